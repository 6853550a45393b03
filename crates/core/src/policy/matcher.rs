//! The compiled conditions of a rule.

use std::collections::HashMap;

use globset::{Glob, GlobBuilder, GlobMatcher, GlobSet, GlobSetBuilder};
use holdpoint_protocol::ToolAnnotations;
use regex::Regex;
use serde_json::Value;

use super::shell::{CommandLine, SimpleCommand};

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
        let want = &self.0;
        let have = actual.copied().unwrap_or_default();
        let ok = |w: Option<bool>, h: Option<bool>| w.is_none() || w == h;
        ok(want.read_only, have.read_only)
            && ok(want.destructive, have.destructive)
            && ok(want.idempotent, have.idempotent)
            && ok(want.open_world, have.open_world)
    }
}

/// A shell command: its program and leading argument tokens.
#[derive(Debug, Clone)]
pub(crate) struct CommandMatcher {
    pub(crate) pointer: Pointer,
    /// Which of the policy's distinct command pointers this is (a line is read once per
    /// pointer per call).
    pub(crate) slot: usize,
    pub(crate) program: Pattern,
    pub(crate) args: Vec<Pattern>,
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
    /// nothing stands before the program and that every matched word is literal.
    pub(crate) fn matches_command(&self, cmd: &SimpleCommand, strict: bool) -> bool {
        if strict && cmd.prefixed {
            return false;
        }
        let Some((program, basename)) = cmd.program() else {
            return false;
        };
        if cmd.words.len() <= self.args.len() || (strict && !program.literal) {
            return false;
        }
        if !(self.program.matches(&program.text)
            || (basename.len() < program.text.len() && self.program.matches(basename)))
        {
            return false;
        }
        self.args
            .iter()
            .zip(&cmd.words[1..])
            .all(|(p, w)| (!strict || w.literal) && p.matches(&w.text))
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
