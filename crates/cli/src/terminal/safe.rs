//! Text from LLMs, MCP servers and agents, made safe to print on a terminal.
//!
//! Such text is untrusted: an escape sequence in it could clear the screen, move the cursor
//! over what was printed, retitle the window, or hide an argument; a carriage return or a
//! backspace could overwrite a line; a bidirectional override could show characters in another
//! order than they run. Every character that could act on the terminal is therefore shown as
//! a visible escape instead (`\u{1b}[2J`, `\u{202e}`), one character at a time, so nothing
//! acts and nothing is hidden: what is left of an escape sequence is plain text. Only newlines
//! and tabs are kept as they are.

use std::borrow::Cow;
use std::fmt::Write as _;

/// `text` with every control character, bidirectional control and BOM shown as its escape
/// (`\u{9b}`); newlines and tabs stay.
pub fn clean(text: &str) -> Cow<'_, str> {
    if text.chars().all(|c| c == '\n' || c == '\t' || is_plain(c)) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if c == '\n' || c == '\t' || is_plain(c) {
            out.push(c);
        } else {
            push_escape(&mut out, c);
        }
    }
    Cow::Owned(out)
}

/// [`clean`], on one line: newlines and tabs become spaces (a label must not fake a menu
/// line below it).
pub fn clean_line(text: &str) -> String {
    clean(text).replace(['\n', '\t'], " ")
}

/// JSON text (as `--json` prints it) safe to print: every character [`clean`] would show as
/// an escape is written as JSON's own escape (`\u009b`) instead, so the text still parses to
/// the same value. Such characters can only be inside strings: JSON's own whitespace is
/// spaces and newlines, and serde escapes C0 controls in strings itself.
pub fn json_text(text: &str) -> Cow<'_, str> {
    if text.chars().all(|c| c == '\n' || c == '\t' || is_plain(c)) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if c == '\n' || c == '\t' || is_plain(c) {
            out.push(c);
        } else {
            for unit in c.encode_utf16(&mut [0; 2]) {
                // Writing to a String cannot fail.
                let _ = write!(out, "\\u{unit:04x}");
            }
        }
    }
    Cow::Owned(out)
}

/// How [`clean`] shows a character it does not print: `\u{` its code point in hex `}`.
fn push_escape(out: &mut String, c: char) {
    // Writing to a String cannot fail.
    let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
}

/// Printable: not a control character, not a bidirectional control, not a line or paragraph
/// separator, not a BOM.
fn is_plain(c: char) -> bool {
    !(c.is_control()
        || matches!(
            c,
            '\u{200e}' | '\u{200f}' | '\u{061c}' | '\u{feff}' | '\u{2028}' | '\u{2029}'
        )
        || ('\u{202a}'..='\u{202e}').contains(&c)
        || ('\u{2066}'..='\u{2069}').contains(&c))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn plain_text_is_kept_as_it_is() {
        let text = "Déployer v2 → prod?\n\tyes / no 🚀 C:\\temp \\u{1b}";
        assert!(matches!(clean(text), Cow::Borrowed(t) if t == text));
    }

    #[test]
    fn escape_sequences_are_shown_not_sent() {
        let cases = [
            ("\u{1b}[2J\u{1b}[Hrm -rf /", r"\u{1b}[2J\u{1b}[Hrm -rf /"),
            (
                "red \u{1b}[31;1mtext\u{1b}[0m",
                r"red \u{1b}[31;1mtext\u{1b}[0m",
            ),
            ("\u{1b}]0;owned\u{7}title", r"\u{1b}]0;owned\u{7}title"),
            ("\u{1b}P+q\u{1b}\\dcs", r"\u{1b}P+q\u{1b}\dcs"),
            ("\u{9b}2Jc1 csi", r"\u{9b}2Jc1 csi"),
            ("\u{9d}0;x\u{9c}c1 osc", r"\u{9d}0;x\u{9c}c1 osc"),
            ("unterminated \u{1b}[", r"unterminated \u{1b}["),
        ];
        for (input, expected) in cases {
            assert_eq!(clean(input), expected, "{input:?}");
        }
    }

    #[test]
    fn a_c1_csi_swallows_nothing_after_it() {
        // As JSON shows arguments: serde escapes C0 controls but not C1 ones, so the CSI
        // arrives raw, followed by the closing quote, the newline and the next key.
        let json = "{\n  \"a\": \"x\u{9b}\",\n  \"b\": \"next\"\n}";
        assert_eq!(
            clean(json),
            "{\n  \"a\": \"x\\u{9b}\",\n  \"b\": \"next\"\n}"
        );
    }

    #[test]
    fn controls_that_overwrite_or_reorder_are_shown_as_escapes() {
        assert_eq!(clean("safe\rrm -rf ~"), r"safe\u{d}rm -rf ~");
        assert_eq!(clean("abc\u{8}\u{8}xyz\u{7f}"), r"abc\u{8}\u{8}xyz\u{7f}");
        assert_eq!(clean("file\u{202e}txt.exe"), r"file\u{202e}txt.exe");
        assert_eq!(
            clean("a\u{2066}b\u{2069}c\u{200f}\u{200e}\u{61c}\u{feff}"),
            r"a\u{2066}b\u{2069}c\u{200f}\u{200e}\u{61c}\u{feff}"
        );
        assert_eq!(clean("one\u{2028}two"), r"one\u{2028}two");
        assert_eq!(clean("nul\0byte"), r"nul\u{0}byte");
        assert_eq!(clean_line("Yes\n  2) No\tthen"), "Yes   2) No then");
        assert_eq!(clean_line("\u{85}next line"), r"\u{85}next line");
    }

    /// `\u{9b}` for U+009B, as written independently of `push_escape`.
    fn escape(c: char) -> String {
        format!("\\u{{{:x}}}", u32::from(c))
    }

    /// Whether `c` may reach the terminal in what `clean` gives.
    fn printable(c: char) -> bool {
        c == '\n' || c == '\t' || is_plain(c)
    }

    /// Walks `input` and `output` together: each character of the input is either kept, or
    /// shown as its escape, in order, and nothing else is in the output. `kept` says what a
    /// kept character may be turned into (a newline into a space, for `clean_line`).
    fn accounts_for_every_character(
        input: &str,
        output: &str,
        kept: impl Fn(char) -> char,
    ) -> Result<(), TestCaseError> {
        let mut rest = output;
        for c in input.chars() {
            let escaped = escape(c);
            if let Some(after) = rest.strip_prefix(kept(c)) {
                rest = after;
            } else if let Some(after) = rest.strip_prefix(escaped.as_str()) {
                rest = after;
            } else {
                return Err(TestCaseError::fail(format!(
                    "{c:?} of {input:?} is neither kept nor shown as {escaped:?} at {rest:?}"
                )));
            }
        }
        prop_assert_eq!(rest, "", "left over in {:?}", output);
        Ok(())
    }

    #[test]
    fn json_keeps_its_value_and_shows_its_controls_as_json_escapes() {
        let value = serde_json::json!({"a": "x\u{9b}", "b": "file\u{202e}txt\u{7f}", "c": "next"});
        let text = serde_json::to_string_pretty(&value).unwrap();
        let safe = json_text(&text);
        assert!(safe.contains(r#""a": "x\u009b","#), "{safe}");
        assert!(safe.contains(r#""b": "file\u202etxt\u007f","#), "{safe}");
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&safe).unwrap(),
            value
        );
        assert!(matches!(json_text("{\"a\": 1}"), Cow::Borrowed(_)));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// JSON made safe parses to the same value, and sends no control.
        #[test]
        fn json_text_keeps_the_value(text in any::<String>(), key in any::<String>()) {
            let value = serde_json::json!({ key: [text] });
            let json = serde_json::to_string_pretty(&value).unwrap();
            let safe = json_text(&json);
            prop_assert!(safe.chars().all(printable), "{:?}", safe);
            let back: serde_json::Value = serde_json::from_str(&safe).unwrap();
            prop_assert_eq!(back, value);
        }

        /// Nothing is lost, and nothing that could act on the terminal is left: over any
        /// text, and over text made mostly of controls, escapes and bidirectional ones.
        #[test]
        fn clean_shows_every_character_and_sends_no_control(
            text in prop_oneof![
                any::<String>(),
                proptest::collection::vec(
                    prop_oneof![
                        proptest::char::range('\u{0}', '\u{a0}'),
                        proptest::char::range('\u{2000}', '\u{2070}'),
                        Just('\u{61c}'),
                        Just('\u{feff}'),
                        Just('\\'),
                        any::<char>(),
                    ],
                    0..40,
                )
                .prop_map(|cs| cs.into_iter().collect::<String>()),
            ]
        ) {
            let out = clean(&text);
            accounts_for_every_character(&text, &out, |c| c)?;
            prop_assert!(out.chars().all(printable), "{:?} -> {:?}", text, out);
            // A character is escaped exactly when it may not be printed.
            let expected: String = text
                .chars()
                .map(|c| if printable(c) { c.to_string() } else { escape(c) })
                .collect();
            prop_assert_eq!(out.as_ref(), expected.as_str());

            let line = clean_line(&text);
            let as_space = |c: char| if c == '\n' || c == '\t' { ' ' } else { c };
            accounts_for_every_character(&text, &line, as_space)?;
            prop_assert!(
                line.chars().all(|c| c != '\n' && c != '\t' && printable(c)),
                "{:?} -> {:?}", text, line
            );
        }
    }
}
