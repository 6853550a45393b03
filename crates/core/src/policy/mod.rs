//! Policy: for each tool call, `allow`, `ask` (raise a hold) or `deny`.
//!
//! A policy is a mode plus an ordered list of rules. Every rule whose conditions match is
//! considered and the strictest action wins (`deny` > `ask` > `allow`); among `ask` rules the
//! one demanding the larger quorum wins; among equally strict rules the first in the list is
//! reported. When no rule matches, the mode decides: `manual`
//! asks, `auto_approve` allows, `auto_deny` denies. Grants (remembered approvals) are consulted
//! by the engine after deny rules and before asking. The file format is documented in
//! `docs/policy.md`; [`Policy::from_toml`] checks it, examples included.

mod describe;
mod file;
mod grants;
mod layers;
mod matcher;
pub mod replay;
pub mod shell;
pub mod suggest;

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use holdpoint_protocol::{
    CallVerdict, Deadline, DecidedBy, DecisionKind, PolicyLayer, RuleRef, ToolAnnotations, Verdict,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use file::{PolicyError, PolicyErrors};
pub(crate) use grants::GrantIndex;
pub use layers::{Layers, WorldLayer};
use matcher::{AnnotationMatcher, ArgMatcher, CommandMatcher, ToolIndex, full_mask};

/// What happens when no rule matches.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Ask a person.
    #[default]
    Manual,
    AutoApprove,
    AutoDeny,
}

impl Mode {
    /// How strict the mode is: `auto_approve` < `manual` < `auto_deny` (for the base's
    /// `mode_floor`).
    pub fn strictness(self) -> u8 {
        match self {
            Mode::AutoApprove => 0,
            Mode::Manual => 1,
            Mode::AutoDeny => 2,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Manual => "manual",
            Mode::AutoApprove => "auto_approve",
            Mode::AutoDeny => "auto_deny",
        }
    }
}

/// A rule's action, ordered by strictness.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    Allow,
    Ask,
    Deny,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        self.verdict().as_str()
    }

    pub fn verdict(self) -> CallVerdict {
        match self {
            Action::Allow => CallVerdict::Allow,
            Action::Ask => CallVerdict::Ask,
            Action::Deny => CallVerdict::Deny,
        }
    }
}

/// A tool call to decide.
#[derive(Clone, Copy, Debug)]
pub struct Call<'a> {
    pub tool: &'a str,
    pub arguments: &'a Value,
    pub annotations: Option<&'a ToolAnnotations>,
}

impl<'a> Call<'a> {
    pub fn new(tool: &'a str, arguments: &'a Value) -> Self {
        Call {
            tool,
            arguments,
            annotations: None,
        }
    }
}

/// The policy's answer for a call, before grants.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Evaluation {
    pub action: Action,
    /// The deciding rule's index; `None` when no rule matched and the mode decided.
    pub rule: Option<usize>,
}

/// A rule that matched, for `explain`.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct MatchedRule {
    pub rule: RuleRef,
    pub action: Action,
}

/// What asking looks like for a call: from the deciding rule, else the tool's settings, else
/// the policy's defaults.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct AskSettings {
    pub rule: Option<RuleRef>,
    pub deadline: Deadline,
    #[serde(with = "humantime_serde_secs")]
    pub remind_before: Duration,
    pub on_timeout: Verdict,
    pub approvers: Vec<String>,
    pub quorum: u32,
    pub offers: Vec<DecisionKind>,
}

/// Per-tool settings (`[tools.NAME]`).
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub(crate) struct ToolSettings {
    pub(crate) deadline: Option<Deadline>,
    pub(crate) on_timeout: Option<Verdict>,
}

/// What an `ask` rule configures.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub(crate) struct RuleAsk {
    pub(crate) deadline: Option<Deadline>,
    pub(crate) on_timeout: Option<Verdict>,
    pub(crate) approvers: Vec<String>,
    pub(crate) quorum: u32,
    pub(crate) offers: Option<Vec<DecisionKind>>,
}

#[derive(Debug, Clone)]
pub(crate) struct Rule {
    pub(crate) name: String,
    pub(crate) action: Action,
    /// A base rule no world's policy can loosen.
    pub(crate) locked: bool,
    /// The layer it came from, in a world's layered policy (`None` in a policy of one file).
    pub(crate) layer: Option<PolicyLayer>,
    /// Its position in its own file's `rules`.
    pub(crate) origin: usize,
    pub(crate) args: Vec<ArgMatcher>,
    pub(crate) command: Option<CommandMatcher>,
    pub(crate) annotations: Option<AnnotationMatcher>,
    pub(crate) ask: RuleAsk,
    /// The tool patterns as written (the index holds them compiled).
    pub(crate) tools: Vec<String>,
    /// In a world's layered policy, a locked rule's own file's `[tools.NAME]` and
    /// `default_deadline`: what it asks with where it says nothing itself (`None`: the
    /// policy's own).
    pub(crate) defaults: Option<Arc<AskDefaults>>,
}

/// The settings an `ask` rule falls back on where it names no `deadline` or `on_timeout`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AskDefaults {
    pub(crate) tools: HashMap<String, ToolSettings>,
    pub(crate) default_deadline: Deadline,
}

/// A loaded, checked policy. Immutable; reloading builds a new one.
#[derive(Debug, Clone)]
pub struct Policy {
    mode: Mode,
    /// The least strict mode a world's policy may use (base policies only).
    mode_floor: Option<Mode>,
    /// In a world's layered policy, whose mode applies: the world's, or the base's floor.
    mode_layer: Option<PolicyLayer>,
    default_deadline: Deadline,
    remind_before: Duration,
    max_deadline: Deadline,
    tools: HashMap<String, ToolSettings>,
    rules: Vec<Rule>,
    index: ToolIndex,
    /// How many distinct JSON pointers command matchers read.
    command_pointers: usize,
    /// The text it was read from, shown to people as the active policy.
    source: Option<Arc<str>>,
    /// Its file's examples and checks (a world's policy in force carries the world's).
    tests: Arc<file::SelfTests>,
}

impl Default for Policy {
    /// Manual mode, no rules: every call asks.
    fn default() -> Self {
        Policy {
            mode: Mode::Manual,
            mode_floor: None,
            mode_layer: None,
            default_deadline: DEFAULT_DEADLINE,
            remind_before: DEFAULT_REMIND_BEFORE,
            max_deadline: DEFAULT_MAX_DEADLINE,
            tools: HashMap::new(),
            rules: Vec::new(),
            index: ToolIndex::default(),
            command_pointers: 0,
            source: None,
            tests: Arc::default(),
        }
    }
}

pub const DEFAULT_DEADLINE: Deadline = Deadline::After(Duration::from_secs(30 * 60));
pub const DEFAULT_REMIND_BEFORE: Duration = Duration::from_secs(5 * 60);
pub const DEFAULT_MAX_DEADLINE: Deadline = Deadline::After(Duration::from_secs(24 * 3600));

thread_local! {
    static SCRATCH: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
}

impl Policy {
    /// Reads and checks a policy file's text (TOML). Every problem is reported with the path
    /// of the offending field (`rules[2].args[0].regex`).
    pub fn from_toml(text: &str) -> Result<Policy, PolicyErrors> {
        file::parse(text)
    }

    /// Reads a world's policy text without running its examples and checks: they are run on
    /// the policy in force for the world ([`Policy::self_check`]), where the base's locked
    /// rules and floor decide too.
    pub fn from_toml_unchecked(text: &str) -> Result<Policy, PolicyErrors> {
        file::parse_unchecked(text)
    }

    /// Runs the examples and checks this policy carries against it (for a world's policy in
    /// force: the world's file's, against the base and the world together).
    pub fn self_check(&self) -> Result<(), PolicyErrors> {
        file::run_self_tests(self, &self.tests)
    }

    /// A policy in `mode` with no rules.
    pub fn with_mode(mode: Mode) -> Policy {
        Policy {
            mode,
            ..Policy::default()
        }
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    pub fn rule_count(&self) -> usize {
        self.rules.len()
    }

    /// Whether this policy can ever ask a person (then someone must be reachable).
    pub fn can_ask(&self) -> bool {
        self.mode == Mode::Manual || self.rules.iter().any(|r| r.action == Action::Ask)
    }

    pub fn rule_ref(&self, index: usize) -> Option<RuleRef> {
        self.rules.get(index).map(|r| RuleRef {
            index: r.origin,
            name: r.name.clone(),
            layer: r.layer,
        })
    }

    /// The decision for a call, without grants.
    pub fn evaluate(&self, call: &Call<'_>) -> Evaluation {
        let mut best: Option<(Action, usize)> = None;
        self.walk(call, |index, action| {
            let better = match best {
                None => true,
                Some((a, i)) => {
                    let (mine, theirs) = (self.strictness(index, action), self.strictness(i, a));
                    mine > theirs || (mine == theirs && index < i)
                }
            };
            if better {
                best = Some((action, index));
            }
        });
        match best {
            Some((action, index)) => Evaluation {
                action,
                rule: Some(index),
            },
            None => Evaluation {
                action: self.mode_action(),
                rule: None,
            },
        }
    }

    /// Every rule that matches, in policy order, with the decision.
    pub fn explain(&self, call: &Call<'_>) -> (Evaluation, Vec<MatchedRule>) {
        let mut matched: Vec<(usize, Action)> = Vec::new();
        self.walk(call, |index, action| matched.push((index, action)));
        matched.sort_unstable();
        matched.dedup();
        let rules = matched
            .into_iter()
            .filter_map(|(i, action)| self.rule_ref(i).map(|rule| MatchedRule { rule, action }))
            .collect();
        (self.evaluate(call), rules)
    }

    /// What decided, as recorded on events.
    pub fn decided_by(&self, evaluation: &Evaluation) -> DecidedBy {
        match evaluation.rule.and_then(|i| self.rule_ref(i)) {
            Some(rule) => DecidedBy::Rule { rule },
            None => DecidedBy::Mode {
                mode: self.mode.as_str().to_owned(),
            },
        }
    }

    /// How strict a matching rule is: its action, then, among asks, the quorum it demands
    /// (so a generic "ask" rule cannot shadow a later rule that needs two approvers).
    fn strictness(&self, index: usize, action: Action) -> (Action, u32) {
        let quorum = match action {
            Action::Ask => self.rules.get(index).map_or(1, |r| r.ask.quorum),
            _ => 0,
        };
        (action, quorum)
    }

    fn mode_action(&self) -> Action {
        match self.mode {
            Mode::Manual => Action::Ask,
            Mode::AutoApprove => Action::Allow,
            Mode::AutoDeny => Action::Deny,
        }
    }

    /// Calls `on_match(rule, action)` for each matching rule (possibly more than once).
    fn walk(&self, call: &Call<'_>, mut on_match: impl FnMut(usize, Action)) {
        // Command lines read from the arguments, one per distinct pointer (`None`: the value
        // there is not a command); and, for allow rules, which commands of each line they
        // cover: a line is allowed when allow rules together cover every command in it.
        let mut lines: Vec<Option<Option<shell::CommandLine>>> = Vec::new();
        let mut coverage: Vec<(usize, u64, usize)> = Vec::new();
        SCRATCH.with_borrow_mut(|scratch| {
            self.index.for_each_candidate(call.tool, scratch, |r| {
                let index = r as usize;
                let Some(rule) = self.rules.get(index) else {
                    return;
                };
                if !rule.args.iter().all(|m| m.matches(call.arguments))
                    || !rule.annotations.is_none_or(|a| a.matches(call.annotations))
                {
                    return;
                }
                let Some(cm) = &rule.command else {
                    on_match(index, rule.action);
                    return;
                };
                if lines.is_empty() {
                    lines.resize_with(self.command_pointers, || None);
                }
                let Some(line) = lines[cm.slot].get_or_insert_with(|| cm.line(call.arguments))
                else {
                    return;
                };
                if rule.action != Action::Allow {
                    if cm.matches_any(line) {
                        on_match(index, rule.action);
                    }
                    return;
                }
                if !line.is_plain() || line.commands.is_empty() {
                    return;
                }
                let mask = cm.strict_mask(line);
                if mask == full_mask(line) {
                    on_match(index, Action::Allow);
                } else if mask != 0 {
                    match coverage.iter_mut().find(|(slot, _, _)| *slot == cm.slot) {
                        Some(c) => {
                            c.1 |= mask;
                            c.2 = c.2.min(index);
                        }
                        None => coverage.push((cm.slot, mask, index)),
                    }
                }
            });
        });
        for (slot, mask, first) in coverage {
            if let Some(Some(Some(line))) = lines.get(slot)
                && mask == full_mask(line)
            {
                on_match(first, Action::Allow);
            }
        }
    }

    /// How to ask for `tool`, when `rule` (or the mode, `None`) asked.
    pub fn ask_settings(&self, tool: &str, rule: Option<usize>) -> AskSettings {
        let r = rule.and_then(|i| self.rules.get(i));
        // A locked rule asks as its own file says: a world's defaults cannot stretch its
        // deadline or turn its timeout into an approval.
        let (tools, default_deadline) = match r.and_then(|r| r.defaults.as_deref()) {
            Some(d) => (&d.tools, d.default_deadline),
            None => (&self.tools, self.default_deadline),
        };
        let tool_settings = tools.get(tool);
        let quorum = r.map_or(1, |r| r.ask.quorum.max(1));
        let offers = r
            .and_then(|r| r.ask.offers.clone())
            .unwrap_or_else(|| default_offers(quorum).to_vec());
        AskSettings {
            rule: rule.and_then(|i| self.rule_ref(i)),
            deadline: r
                .and_then(|r| r.ask.deadline)
                .or(tool_settings.and_then(|t| t.deadline))
                .unwrap_or(default_deadline),
            remind_before: self.remind_before,
            on_timeout: r
                .and_then(|r| r.ask.on_timeout)
                .or(tool_settings.and_then(|t| t.on_timeout))
                .unwrap_or(Verdict::Deny),
            approvers: r.map(|r| r.ask.approvers.clone()).unwrap_or_default(),
            quorum,
            offers,
        }
    }

    /// The deadline of questions (which no rule governs).
    pub fn question_deadline(&self) -> Deadline {
        self.default_deadline
    }

    pub fn remind_before(&self) -> Duration {
        self.remind_before
    }

    /// Checks a deadline a request asks for against `max_deadline`.
    pub fn check_requested_deadline(&self, requested: Deadline) -> Result<Deadline, String> {
        match (requested, self.max_deadline) {
            (_, Deadline::Never) => Ok(requested),
            (Deadline::Never, Deadline::After(max)) => Err(format!(
                "\"never\" is not allowed here: the policy's max_deadline is {}",
                humantime::format_duration(max)
            )),
            (Deadline::After(d), Deadline::After(max)) if d > max => Err(format!(
                "{} is longer than the policy's max_deadline of {}",
                humantime::format_duration(d),
                humantime::format_duration(max)
            )),
            (Deadline::After(_), Deadline::After(_)) => Ok(requested),
        }
    }
}

/// What an approval offers by default. A quorum collects several people's approval of this
/// one call, so it offers no grants and no edits (an edit would change what the others saw).
pub fn default_offers(quorum: u32) -> &'static [DecisionKind] {
    if quorum > 1 {
        &[
            DecisionKind::ApproveOnce,
            DecisionKind::Deny,
            DecisionKind::DenyStop,
        ]
    } else {
        &DecisionKind::APPROVAL
    }
}

/// `Duration` as whole seconds in JSON.
mod humantime_serde_secs {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(d.as_secs())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_secs)
    }
}

#[cfg(test)]
mod tests;
