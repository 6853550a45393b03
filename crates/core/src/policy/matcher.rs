//! The compiled conditions of a rule.

use std::collections::HashMap;

use globset::{Glob, GlobBuilder, GlobMatcher, GlobSet, GlobSetBuilder};
use holdpoint_protocol::ToolAnnotations;
use regex::Regex;
use serde_json::Value;

use super::shell::{CommandLine, SimpleCommand, Word};

/// A literal string or a glob.
#[derive(Debug, Clone)]
pub(crate) enum Pattern {
    Literal(String),
    Glob(GlobMatcher),
}

fn has_glob_syntax(s: &str) -> bool {
    s.contains(['*', '?', '[', '{'])
}

impl Pattern {
    /// `separator`: whether `*` stops at `/` (for paths); `**` crosses it either way.
    pub(crate) fn new(pattern: &str, separator: bool) -> Result<Self, String> {
        if !has_glob_syntax(pattern) {
            return Ok(Pattern::Literal(pattern.to_owned()));
        }
        GlobBuilder::new(pattern)
            .literal_separator(separator)
            .backslash_escape(true)
            .build()
            .map(|g| Pattern::Glob(g.compile_matcher()))
            .map_err(|e| format!("invalid glob {pattern:?}: {}", e.kind()))
    }

    pub(crate) fn matches(&self, s: &str) -> bool {
        match self {
            Pattern::Literal(l) => l == s,
            Pattern::Glob(g) => g.is_match(s),
        }
    }
}

/// One test on a value inside the arguments.
#[derive(Debug, Clone)]
pub(crate) enum ArgTest {
    Equals(Value),
    Prefix(String),
    Glob(GlobMatcher),
    Regex(Regex),
}

/// An RFC 6901 JSON pointer, parsed once when the policy loads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pointer(Vec<String>);

impl Pointer {
    pub(crate) fn parse(s: &str) -> Result<Self, String> {
        if s.is_empty() {
            return Ok(Pointer(Vec::new()));
        }
        let Some(rest) = s.strip_prefix('/') else {
            return Err(format!(
                "{s:?} is not a JSON pointer: write \"/field\" or \"/field/0/sub\" (or \"\" for the whole arguments)"
            ));
        };
        rest.split('/')
            .map(|token| {
                let mut out = String::with_capacity(token.len());
                let mut chars = token.chars();
                while let Some(c) = chars.next() {
                    match (c, c == '~') {
                        (_, false) => out.push(c),
                        (_, true) => match chars.next() {
                            Some('0') => out.push('~'),
                            Some('1') => out.push('/'),
                            _ => {
                                return Err(format!(
                                    "{s:?}: `~` must be written `~0`, and `/` inside a name `~1`"
                                ));
                            }
                        },
                    }
                }
                Ok(out)
            })
            .collect::<Result<_, _>>()
            .map(Pointer)
    }

    /// The reference tokens, unescaped.
    pub(crate) fn tokens(&self) -> &[String] {
        &self.0
    }

    /// The value the pointer names, without allocating.
    pub(crate) fn get<'v>(&self, value: &'v Value) -> Option<&'v Value> {
        self.0.iter().try_fold(value, |v, token| match v {
            Value::Object(map) => map.get(token),
            Value::Array(items) => {
                let leading_zero = token.len() > 1 && token.starts_with('0');
                if leading_zero {
                    None
                } else {
                    token.parse::<usize>().ok().and_then(|i| items.get(i))
                }
            }
            _ => None,
        })
    }
}

/// `pointer` (RFC 6901) into the arguments, and the test its value must pass.
#[derive(Debug, Clone)]
pub(crate) struct ArgMatcher {
    pub(crate) pointer: Pointer,
    pub(crate) test: ArgTest,
    /// Matches when the test fails (a missing value fails every test).
    pub(crate) negate: bool,
}

impl ArgMatcher {
    pub(crate) fn matches(&self, args: &Value) -> bool {
        let value = self.pointer.get(args);
        let hit = match (&self.test, value) {
            (_, None) => false,
            (ArgTest::Equals(expected), Some(v)) => v == expected,
            (ArgTest::Prefix(p), Some(Value::String(s))) => s.starts_with(p.as_str()),
            (ArgTest::Glob(g), Some(Value::String(s))) => g.is_match(s),
            (ArgTest::Regex(r), Some(Value::String(s))) => r.is_match(s),
            (_, Some(_)) => false,
        };
        hit != self.negate
    }
}

/// MCP annotations a rule requires (each given one must be set and equal).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct AnnotationMatcher(pub(crate) ToolAnnotations);

impl AnnotationMatcher {
    pub(crate) fn matches(&self, actual: Option<&ToolAnnotations>) -> bool {
        self.0.required_of(actual)
    }
}

/// A shell command: its program, leading argument tokens and flags.
#[derive(Debug, Clone)]
pub(crate) struct CommandMatcher {
    pub(crate) pointer: Pointer,
    /// Which of the policy's distinct command pointers this is (a line is read once per
    /// pointer per call).
    pub(crate) slot: usize,
    pub(crate) program: Pattern,
    pub(crate) args: Vec<Pattern>,
    /// Flags the command must have, each in any of its spellings.
    pub(crate) flags: Vec<Flag>,
}

/// One flag, by all its names: `-r|-R|--recursive`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Flag {
    /// As written in the policy.
    pub(crate) text: String,
    pub(crate) short: Vec<char>,
    pub(crate) long: Vec<String>,
}

impl Flag {
    /// Reads `-r|-R|--recursive`: alternatives separated by `|`, each a short flag (one
    /// dash, one character) or a long one (two dashes, a name).
    pub(crate) fn parse(text: &str) -> Result<Flag, String> {
        let mut flag = Flag {
            text: text.to_owned(),
            short: Vec::new(),
            long: Vec::new(),
        };
        for alt in text.split('|') {
            let alt = alt.trim();
            let bad = |why: &str| {
                format!(
                    "{alt:?} is not a flag ({why}): write -x for a short flag or --name for a long one, \
                     its spellings separated by |, such as \"-r|-R|--recursive\""
                )
            };
            if let Some(name) = alt.strip_prefix("--") {
                if name.is_empty() || name.contains(['=', ' ', '*', '?', '[', '{']) {
                    return Err(bad("a long flag is a plain name"));
                }
                flag.long.push(name.to_owned());
            } else if let Some(short) = alt.strip_prefix('-') {
                let mut chars = short.chars();
                match (chars.next(), chars.next()) {
                    (Some(c), None) if c != '-' && !c.is_whitespace() => flag.short.push(c),
                    _ => return Err(bad("a short flag is one character after one dash")),
                }
            } else {
                return Err(bad("it does not start with a dash"));
            }
        }
        Ok(flag)
    }

    /// Whether `words` (a command's arguments) hold this flag in any spelling: `-r` alone or
    /// among other short flags (`-fr`), `--recursive` or `--recursive=…`, and — for `ask` and
    /// `deny` rules (`!strict`) — an abbreviation such as `--rec` (as programs accept them),
    /// or a word a variable or substitution makes (it could be the flag). Nothing after `--`
    /// is a flag.
    fn found_in(&self, words: &[Word], strict: bool) -> bool {
        for w in words {
            if w.expands && !strict {
                return true;
            }
            if strict && !w.literal {
                continue;
            }
            let t = w.text.as_str();
            if t == "--" {
                return false;
            }
            if let Some(long) = t.strip_prefix("--") {
                let name = long.split_once('=').map_or(long, |(n, _)| n);
                let hit = self
                    .long
                    .iter()
                    .any(|l| l == name || (!strict && !name.is_empty() && l.starts_with(name)));
                if hit {
                    return true;
                }
            } else if let Some(shorts) = t.strip_prefix('-')
                && shorts.chars().any(|c| self.short.contains(&c))
            {
                return true;
            }
        }
        false
    }
}

impl CommandMatcher {
    /// The command line at the pointer: a string is read as shell, an array of strings is an
    /// argument vector. Anything else is not a command.
    pub(crate) fn line(&self, args: &Value) -> Option<CommandLine> {
        match self.pointer.get(args)? {
            Value::String(s) => Some(super::shell::parse(s)),
            Value::Array(items) => {
                let argv: Option<Vec<&str>> = items.iter().map(Value::as_str).collect();
                argv.map(CommandLine::from_argv)
            }
            _ => None,
        }
    }

    /// Whether one simple command matches. `strict` (for allow rules) also requires that
    /// nothing stands before the program and that every matched word is literal. Otherwise
    /// (for ask and deny rules) a word a variable or substitution makes could be anything:
    /// from there on it matches any arguments and flags; and a program that is not literal
    /// matches any program.
    pub(crate) fn matches_command(&self, cmd: &SimpleCommand, strict: bool) -> bool {
        if strict && cmd.prefixed {
            return false;
        }
        let Some((program, basename)) = cmd.program() else {
            return false;
        };
        if !program.literal {
            // A variable, a substitution or a glob chooses the program: any program, for
            // ask and deny rules; none, for allow rules.
            return !strict;
        }
        if !(self.program.matches(&program.text)
            || (basename.len() < program.text.len() && self.program.matches(basename)))
        {
            return false;
        }
        let args = &cmd.words[1..];
        for (i, p) in self.args.iter().enumerate() {
            match args.get(i) {
                Some(w) if !strict && w.expands => return true,
                Some(w) if (!strict || w.literal) && p.matches(&w.text) => {}
                _ => return false,
            }
        }
        self.flags.iter().all(|f| f.found_in(args, strict))
    }

    /// Bit `i` set when command `i` matches strictly.
    pub(crate) fn strict_mask(&self, line: &CommandLine) -> u64 {
        line.commands
            .iter()
            .enumerate()
            .filter(|(_, c)| self.matches_command(c, true))
            .fold(0, |m, (i, _)| m | (1u64 << i))
    }

    pub(crate) fn matches_any(&self, line: &CommandLine) -> bool {
        line.commands.iter().any(|c| self.matches_command(c, false))
    }
}

/// The mask with one bit per command of the line.
pub(crate) fn full_mask(line: &CommandLine) -> u64 {
    match line.commands.len() {
        0 => 0,
        n if n >= 64 => u64::MAX,
        n => (1u64 << n) - 1,
    }
}

/// Finds the rules whose tool patterns match a tool name: a hash lookup for literal names and
/// one pass of a glob set for the rest.
#[derive(Debug, Clone, Default)]
pub(crate) struct ToolIndex {
    literal: HashMap<String, Vec<u32>>,
    globs: GlobSet,
    glob_rules: Vec<u32>,
}

impl ToolIndex {
    pub(crate) fn build(rules: &[(u32, Vec<String>)]) -> Result<Self, globset::Error> {
        let mut literal: HashMap<String, Vec<u32>> = HashMap::new();
        let mut builder = GlobSetBuilder::new();
        let mut glob_rules = Vec::new();
        for (rule, patterns) in rules {
            for p in patterns {
                if has_glob_syntax(p) {
                    builder.add(Glob::new(p)?);
                    glob_rules.push(*rule);
                } else {
                    literal.entry(p.clone()).or_default().push(*rule);
                }
            }
        }
        Ok(ToolIndex {
            literal,
            globs: builder.build()?,
            glob_rules,
        })
    }

    /// Calls `f` with each rule whose tool patterns match (a rule may come more than once).
    pub(crate) fn for_each_candidate(
        &self,
        tool: &str,
        scratch: &mut Vec<usize>,
        mut f: impl FnMut(u32),
    ) {
        if let Some(rules) = self.literal.get(tool) {
            rules.iter().copied().for_each(&mut f);
        }
        if !self.glob_rules.is_empty() {
            self.globs.matches_into(tool, scratch);
            for &g in scratch.iter() {
                f(self.glob_rules[g]);
            }
        }
    }
}
