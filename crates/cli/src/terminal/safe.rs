//! Text from LLMs, MCP servers and agents, made safe to print on a terminal.
//!
//! Such text is untrusted: an escape sequence in it could clear the screen, move the cursor
//! over what was printed, retitle the window, or hide an argument; a carriage return or a
//! backspace could overwrite a line; a bidirectional override could show characters in another
//! order than they run. Everything that is not printable text is removed, whole sequences at a
//! time, and only newlines and tabs are kept.

use std::borrow::Cow;

const ESC: char = '\u{1b}';
const BEL: char = '\u{7}';
/// The C1 controls that open a string ended by ST: DCS, SOS, OSC, PM, APC.
const C1_STRINGS: [char; 5] = ['\u{90}', '\u{98}', '\u{9d}', '\u{9e}', '\u{9f}'];
const C1_CSI: char = '\u{9b}';
const C1_ST: char = '\u{9c}';

/// `text` with escape sequences and control characters removed; newlines and tabs stay.
pub fn clean(text: &str) -> Cow<'_, str> {
    if text.chars().all(|c| c == '\n' || c == '\t' || is_plain(c)) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\n' | '\t' => out.push(c),
            ESC => match chars.next() {
                Some('[') => skip_csi(&mut chars),
                Some(']' | 'P' | 'X' | '^' | '_') => skip_string(&mut chars),
                // Two-character sequences, and ESC with intermediates (`ESC ( B`).
                Some(c) if (' '..='/').contains(&c) => {
                    while chars.next_if(|c| (' '..='/').contains(c)).is_some() {}
                    chars.next();
                }
                _ => {}
            },
            C1_CSI => skip_csi(&mut chars),
            c if C1_STRINGS.contains(&c) => skip_string(&mut chars),
            c if is_plain(c) => out.push(c),
            _ => {}
        }
    }
    Cow::Owned(out)
}

/// [`clean`], on one line: newlines and tabs become spaces (a label must not fake a menu
/// line below it).
pub fn clean_line(text: &str) -> String {
    clean(text).replace(['\n', '\t'], " ")
}

/// Printable: not a control character, not a bidirectional control, not a BOM.
fn is_plain(c: char) -> bool {
    !(c.is_control()
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{061c}' | '\u{feff}')
        || ('\u{202a}'..='\u{202e}').contains(&c)
        || ('\u{2066}'..='\u{2069}').contains(&c))
}

/// A control sequence: parameters and intermediates, up to its final byte.
fn skip_csi(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    for c in chars.by_ref() {
        if ('@'..='~').contains(&c) {
            return;
        }
    }
}

/// A control string (OSC, DCS, …): up to BEL, ESC \ or ST.
fn skip_string(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    while let Some(c) = chars.next() {
        match c {
            BEL | C1_ST => return,
            ESC => {
                chars.next_if_eq(&'\\');
                return;
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_kept_as_it_is() {
        let text = "Déployer v2 → prod?\n\tyes / no 🚀";
        assert!(matches!(clean(text), Cow::Borrowed(t) if t == text));
    }

    #[test]
    fn escape_sequences_are_removed_whole() {
        let cases = [
            ("\u{1b}[2J\u{1b}[Hrm -rf /", "rm -rf /"),
            ("red \u{1b}[31;1mtext\u{1b}[0m", "red text"),
            ("\u{1b}]0;owned\u{7}title", "title"),
            (
                "\u{1b}]8;;http://evil\u{1b}\\link\u{1b}]8;;\u{1b}\\",
                "link",
            ),
            ("\u{1b}P+q\u{1b}\\dcs", "dcs"),
            ("\u{1b}(Bcharset \u{1b}7saved\u{1b}8", "charset saved"),
            ("\u{9b}2Jc1 csi", "c1 csi"),
            ("\u{9d}0;x\u{9c}c1 osc", "c1 osc"),
            ("unterminated \u{1b}[", "unterminated "),
            ("unterminated \u{1b}]0;title", "unterminated "),
        ];
        for (input, expected) in cases {
            assert_eq!(clean(input), expected, "{input:?}");
        }
    }

    #[test]
    fn controls_that_overwrite_or_reorder_are_removed() {
        assert_eq!(clean("safe\rrm -rf ~"), "saferm -rf ~");
        assert_eq!(clean("abc\u{8}\u{8}\u{8}xyz\u{7f}"), "abcxyz");
        assert_eq!(clean("file\u{202e}txt.exe"), "filetxt.exe");
        assert_eq!(clean("a\u{2066}b\u{2069}c\u{200f}"), "abc");
        assert_eq!(clean("nul\0byte"), "nulbyte");
        assert_eq!(clean_line("Yes\n  2) No\tthen"), "Yes   2) No then");
    }

    #[test]
    fn nothing_escapes_the_cleaning() {
        // Every character up to U+3000 on its own and after ESC: nothing left is a control.
        for c in (0u32..0x3000).filter_map(char::from_u32) {
            for input in [
                format!("x{c}y"),
                format!("x\u{1b}{c}y"),
                format!("\u{9b}{c}y"),
            ] {
                let out = clean(&input);
                assert!(
                    out.chars().all(|c| c == '\n' || c == '\t' || is_plain(c)),
                    "{input:?} -> {out:?}"
                );
            }
        }
    }
}
