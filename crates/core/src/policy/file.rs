//! The policy file (TOML): reading, checking, and compiling it into a [`Policy`].

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::time::Duration;

use holdpoint_protocol::{Deadline, DecisionKind, HoldKind, PolicyLayer, ToolAnnotations, Verdict};
use regex::RegexBuilder;
use serde::Deserialize;
use serde_json::Value;

use super::matcher::{
    AnnotationMatcher, ArgMatcher, ArgTest, CommandMatcher, Flag, Pattern, Pointer, ToolIndex,
};
use super::{
    Action, Call, DEFAULT_DEADLINE, DEFAULT_MAX_DEADLINE, DEFAULT_REMIND_BEFORE, Mode, Policy,
    Rule, RuleAsk, ToolSettings, default_offers,
};

/// One problem in a policy file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyError {
    /// Where: `rules[2].args[0].regex`; empty for the document as a whole.
    pub path: String,
    pub message: String,
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

/// Every problem found in a policy file.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct PolicyErrors(pub Vec<PolicyError>);

impl fmt::Display for PolicyErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0.len();
        write!(
            f,
            "invalid policy ({n} problem{}):",
            if n == 1 { "" } else { "s" }
        )?;
        for e in &self.0 {
            write!(f, "\n  {e}")?;
        }
        Ok(())
    }
}

const REGEX_SIZE_LIMIT: usize = 1 << 20;
const DEFAULT_COMMAND_POINTER: &str = "/command";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPolicy {
    #[serde(default)]
    mode: Mode,
    /// The base policy only: the least strict mode a world's policy may use.
    mode_floor: Option<Mode>,
    default_deadline: Option<Deadline>,
    remind_before: Option<Deadline>,
    max_deadline: Option<Deadline>,
    #[serde(default)]
    tools: BTreeMap<String, RawToolSettings>,
    #[serde(default)]
    rules: Vec<RawRule>,
    #[serde(default)]
    checks: Vec<RawCheck>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawToolSettings {
    deadline: Option<Deadline>,
    on_timeout: Option<Verdict>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    name: Option<String>,
    tools: Vec<String>,
    action: Action,
    /// The base policy only: no world's policy can loosen this rule.
    #[serde(default)]
    locked: bool,
    #[serde(default)]
    args: Vec<RawArg>,
    command: Option<RawCommand>,
    annotations: Option<RawAnnotations>,
    deadline: Option<Deadline>,
    on_timeout: Option<Verdict>,
    approvers: Option<Vec<String>>,
    quorum: Option<u32>,
    offers: Option<Vec<DecisionKind>>,
    #[serde(default)]
    must_match: Vec<RawExample>,
    #[serde(default)]
    must_not_match: Vec<RawExample>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawArg {
    pointer: String,
    equals: Option<Value>,
    prefix: Option<String>,
    glob: Option<String>,
    regex: Option<String>,
    #[serde(default)]
    not: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCommand {
    pointer: Option<String>,
    program: String,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    flags: Vec<String>,
}

#[derive(Deserialize, Clone, Copy, Debug)]
#[serde(deny_unknown_fields)]
struct RawAnnotations {
    read_only: Option<bool>,
    destructive: Option<bool>,
    idempotent: Option<bool>,
    open_world: Option<bool>,
}

impl From<RawAnnotations> for ToolAnnotations {
    fn from(a: RawAnnotations) -> Self {
        ToolAnnotations {
            read_only: a.read_only,
            destructive: a.destructive,
            idempotent: a.idempotent,
            open_world: a.open_world,
        }
    }
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct RawExample {
    tool: String,
    #[serde(default = "empty_object")]
    args: Value,
    annotations: Option<RawAnnotations>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct RawCheck {
    tool: String,
    #[serde(default = "empty_object")]
    args: Value,
    annotations: Option<RawAnnotations>,
    expect: Action,
    /// The name of the rule expected to decide.
    rule: Option<String>,
}

fn empty_object() -> Value {
    Value::Object(Default::default())
}

/// A policy's tests of itself: its rules' `must_match`/`must_not_match` examples and its
/// `[[checks]]`, kept with it so they can run against the policy in force — for a world's
/// policy, the one merged with the base, since the base's locked rules and floor decide too.
#[derive(Debug, Default)]
pub(crate) struct SelfTests {
    examples: Vec<Example>,
    checks: Vec<RawCheck>,
}

#[derive(Debug)]
struct Example {
    /// Where it is written: `rules[2].must_match[0]`.
    path: String,
    /// The rule's position in its own file.
    rule: usize,
    /// `must_match` (true) or `must_not_match`.
    expect: bool,
    example: RawExample,
}

/// Reads and compiles a policy without running its examples and checks.
pub(super) fn parse_unchecked(text: &str) -> Result<Policy, PolicyErrors> {
    let raw = read(text).map_err(|e| PolicyErrors(vec![e]))?;
    let mut errors = Errors::default();
    let policy = build(raw, &mut errors);
    match (policy, errors.0.is_empty()) {
        (Some(p), true) => Ok(Policy {
            source: Some(text.into()),
            ..p
        }),
        _ => Err(PolicyErrors(errors.0)),
    }
}

/// Reads a policy and runs its examples and checks against itself.
pub(super) fn parse(text: &str) -> Result<Policy, PolicyErrors> {
    let policy = parse_unchecked(text)?;
    run_self_tests(&policy, &policy.tests)?;
    Ok(policy)
}

/// Runs `tests` (a file's own) against `policy`: the file's policy alone, or a world's
/// policy in force, in which the file's rules are its `world` layer.
pub(super) fn run_self_tests(policy: &Policy, tests: &SelfTests) -> Result<(), PolicyErrors> {
    let mut errors = Errors::default();
    check_examples(policy, &tests.examples, &mut errors);
    check_checks(policy, &tests.checks, &mut errors);
    if errors.0.is_empty() {
        Ok(())
    } else {
        Err(PolicyErrors(errors.0))
    }
}

fn read(text: &str) -> Result<RawPolicy, PolicyError> {
    let de =
        toml::de::Deserializer::parse(text).map_err(|e| toml_error(text, String::new(), &e))?;
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let path = if path == "." { String::new() } else { path };
        toml_error(text, path, e.inner())
    })
}

fn toml_error(text: &str, path: String, e: &toml::de::Error) -> PolicyError {
    let message = e.message().trim().to_owned();
    let message = match e.span() {
        Some(span) => {
            let before = &text[..span.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
            format!("{message} (line {line}, column {column})")
        }
        None => message,
    };
    PolicyError { path, message }
}

#[derive(Default)]
struct Errors(Vec<PolicyError>);

impl Errors {
    fn add(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.0.push(PolicyError {
            path: path.into(),
            message: message.into(),
        });
    }
}

fn duration_of(
    d: Option<Deadline>,
    path: &str,
    default: Duration,
    errors: &mut Errors,
) -> Duration {
    match d {
        None => default,
        Some(Deadline::After(d)) => d,
        Some(Deadline::Never) => {
            errors.add(path, "must be a duration such as \"5m\", not \"never\"");
            default
        }
    }
}

fn build(raw: RawPolicy, errors: &mut Errors) -> Option<Policy> {
    let remind_before = duration_of(
        raw.remind_before,
        "remind_before",
        DEFAULT_REMIND_BEFORE,
        errors,
    );
    let mut tools = HashMap::new();
    for (name, t) in raw.tools {
        if name.is_empty() {
            errors.add("tools", "a tool name must not be empty");
        }
        tools.insert(
            name,
            ToolSettings {
                deadline: t.deadline,
                on_timeout: t.on_timeout,
            },
        );
    }

    let mut rules = Vec::with_capacity(raw.rules.len());
    let mut names = HashSet::new();
    let mut examples = Vec::new();
    let mut command_pointers = Vec::new();
    for (i, r) in raw.rules.into_iter().enumerate() {
        let path = format!("rules[{i}]");
        let name = r.name.clone().unwrap_or_else(|| path.clone());
        if name.trim().is_empty() {
            errors.add(
                format!("{path}.name"),
                "must not be empty (leave it out to use the rule's position)",
            );
        } else if !names.insert(name.clone()) {
            errors.add(
                format!("{path}.name"),
                format!("{name:?} is used by an earlier rule; rule names must be unique"),
            );
        }
        let mut rule = build_rule(&path, name, &r, &mut command_pointers, errors);
        rule.origin = i;
        for (expect, list, field) in [
            (true, r.must_match, "must_match"),
            (false, r.must_not_match, "must_not_match"),
        ] {
            examples.extend(list.into_iter().enumerate().map(|(j, example)| Example {
                path: format!("{path}.{field}[{j}]"),
                rule: i,
                expect,
                example,
            }));
        }
        rules.push(rule);
    }

    let tool_patterns: Vec<(u32, Vec<String>)> = rules
        .iter()
        .enumerate()
        .map(|(i, r)| (i as u32, r.tools.clone()))
        .collect();
    let index = match ToolIndex::build(&tool_patterns) {
        Ok(index) => index,
        Err(e) => {
            errors.add("rules", format!("tool patterns do not compile: {e}"));
            return None;
        }
    };
    if let Some(floor) = raw.mode_floor
        && raw.mode.strictness() < floor.strictness()
    {
        errors.add(
            "mode",
            format!(
                "{} is less strict than this policy's own mode_floor {}",
                raw.mode.as_str(),
                floor.as_str()
            ),
        );
    }
    let policy = Policy {
        mode: raw.mode,
        mode_floor: raw.mode_floor,
        mode_layer: None,
        default_deadline: raw.default_deadline.unwrap_or(DEFAULT_DEADLINE),
        remind_before,
        max_deadline: raw.max_deadline.unwrap_or(DEFAULT_MAX_DEADLINE),
        tools,
        rules,
        index,
        command_pointers: command_pointers.len(),
        source: None,
        tests: std::sync::Arc::new(SelfTests {
            examples,
            checks: raw.checks,
        }),
    };
    // Examples and checks only mean something once every rule compiled.
    errors.0.is_empty().then_some(policy)
}

fn build_rule(
    path: &str,
    name: String,
    r: &RawRule,
    command_pointers: &mut Vec<Pointer>,
    errors: &mut Errors,
) -> Rule {
    if r.tools.is_empty() {
        errors.add(
            format!("{path}.tools"),
            "list at least one tool name or glob (\"*\" for every tool)",
        );
    }
    for (j, t) in r.tools.iter().enumerate() {
        if t.is_empty() {
            errors.add(format!("{path}.tools[{j}]"), "must not be empty");
        } else if let Err(e) = Pattern::new(t, false) {
            errors.add(format!("{path}.tools[{j}]"), e);
        }
    }
    let args = r
        .args
        .iter()
        .enumerate()
        .filter_map(|(j, a)| build_arg(&format!("{path}.args[{j}]"), a, errors))
        .collect();
    let command = r
        .command
        .as_ref()
        .and_then(|c| build_command(&format!("{path}.command"), c, command_pointers, errors));
    let ask = build_ask(path, r, errors);
    Rule {
        name,
        action: r.action,
        locked: r.locked,
        layer: None,
        origin: 0,
        args,
        command,
        annotations: r.annotations.map(|a| AnnotationMatcher(a.into())),
        ask,
        tools: r.tools.clone(),
        defaults: None,
    }
}

fn build_arg(path: &str, a: &RawArg, errors: &mut Errors) -> Option<ArgMatcher> {
    let pointer = Pointer::parse(&a.pointer).map_err(|e| errors.add(format!("{path}.pointer"), e));
    let given = [
        a.equals.is_some(),
        a.prefix.is_some(),
        a.glob.is_some(),
        a.regex.is_some(),
    ];
    if given.iter().filter(|g| **g).count() != 1 {
        errors.add(
            path,
            "give exactly one of `equals`, `prefix`, `glob` or `regex`",
        );
        return None;
    }
    let test = if let Some(v) = &a.equals {
        ArgTest::Equals(v.clone())
    } else if let Some(p) = &a.prefix {
        ArgTest::Prefix(p.clone())
    } else if let Some(g) = &a.glob {
        match Pattern::new(g, true) {
            Ok(Pattern::Glob(m)) => ArgTest::Glob(m),
            Ok(Pattern::Literal(l)) => ArgTest::Equals(Value::String(l)),
            Err(e) => {
                errors.add(format!("{path}.glob"), e);
                return None;
            }
        }
    } else {
        let re = a.regex.as_deref().unwrap_or_default();
        match RegexBuilder::new(re).size_limit(REGEX_SIZE_LIMIT).build() {
            Ok(r) => ArgTest::Regex(r),
            Err(e) => {
                let msg = e.to_string();
                let msg = msg
                    .lines()
                    .last()
                    .unwrap_or("invalid")
                    .trim()
                    .trim_start_matches("error: ");
                errors.add(
                    format!("{path}.regex"),
                    format!("invalid regex {re:?}: {msg}"),
                );
                return None;
            }
        }
    };
    Some(ArgMatcher {
        pointer: pointer.ok()?,
        test,
        negate: a.not,
    })
}

fn build_command(
    path: &str,
    c: &RawCommand,
    command_pointers: &mut Vec<Pointer>,
    errors: &mut Errors,
) -> Option<CommandMatcher> {
    let pointer = Pointer::parse(c.pointer.as_deref().unwrap_or(DEFAULT_COMMAND_POINTER))
        .map_err(|e| errors.add(format!("{path}.pointer"), e));
    if c.program.is_empty() {
        errors.add(
            format!("{path}.program"),
            "name the program (such as \"git\"), or a glob",
        );
        return None;
    }
    let program = Pattern::new(&c.program, false)
        .map_err(|e| errors.add(format!("{path}.program"), e))
        .ok()?;
    let mut args = Vec::new();
    for (j, a) in c.args.iter().enumerate() {
        match Pattern::new(a, false) {
            Ok(p) => args.push(p),
            Err(e) => errors.add(format!("{path}.args[{j}]"), e),
        }
    }
    let mut flags = Vec::new();
    for (j, f) in c.flags.iter().enumerate() {
        match Flag::parse(f) {
            Ok(f) => flags.push(f),
            Err(e) => errors.add(format!("{path}.flags[{j}]"), e),
        }
    }
    let pointer = pointer.ok()?;
    let slot = match command_pointers.iter().position(|p| *p == pointer) {
        Some(slot) => slot,
        None => {
            command_pointers.push(pointer.clone());
            command_pointers.len() - 1
        }
    };
    Some(CommandMatcher {
        pointer,
        slot,
        program,
        args,
        flags,
    })
}

fn build_ask(path: &str, r: &RawRule, errors: &mut Errors) -> RuleAsk {
    if r.action != Action::Ask {
        let only_ask = [
            ("deadline", r.deadline.is_some()),
            ("on_timeout", r.on_timeout.is_some()),
            ("approvers", r.approvers.is_some()),
            ("quorum", r.quorum.is_some()),
            ("offers", r.offers.is_some()),
        ];
        for (field, given) in only_ask {
            if given {
                errors.add(
                    format!("{path}.{field}"),
                    format!(
                        "only `ask` rules take `{field}` (this rule's action is {})",
                        r.action.as_str()
                    ),
                );
            }
        }
        return RuleAsk::default();
    }
    let approvers = r.approvers.clone().unwrap_or_default();
    let mut seen = HashSet::new();
    for (j, a) in approvers.iter().enumerate() {
        if a.trim().is_empty() {
            errors.add(format!("{path}.approvers[{j}]"), "must name a person");
        } else if !seen.insert(a) {
            errors.add(
                format!("{path}.approvers[{j}]"),
                format!("{a:?} is listed twice"),
            );
        }
    }
    let quorum = r.quorum.unwrap_or(1);
    if quorum == 0 {
        errors.add(format!("{path}.quorum"), "must be at least 1");
    } else if !approvers.is_empty() && quorum as usize > approvers.len() {
        errors.add(
            format!("{path}.quorum"),
            format!(
                "needs {quorum} approvals but only {} approvers are listed",
                approvers.len()
            ),
        );
    }
    if let Some(offers) = &r.offers {
        let p = format!("{path}.offers");
        let allowed = default_offers(quorum.max(1));
        for (j, o) in offers.iter().enumerate() {
            if !allowed.contains(o) {
                let why = match o.hold_kind() {
                    HoldKind::Approval => {
                        "a quorum rule offers only approve_once, deny and deny_stop".to_owned()
                    }
                    HoldKind::Question => {
                        format!("{} is a question's decision, not an approval's", o.as_str())
                    }
                };
                errors.add(format!("{p}[{j}]"), why);
            }
        }
        let approves = offers.iter().any(|o| o.approves());
        let denies = offers.iter().any(|o| o.denies());
        if !approves || !denies {
            errors.add(p, "offer at least one way to approve and one way to deny");
        }
    }
    RuleAsk {
        deadline: r.deadline,
        on_timeout: r.on_timeout,
        approvers,
        quorum: quorum.max(1),
        offers: r.offers.clone(),
    }
}

fn example_call<'a>(tool: &'a str, args: &'a Value, ann: &'a Option<ToolAnnotations>) -> Call<'a> {
    Call {
        tool,
        arguments: args,
        annotations: ann.as_ref(),
    }
}

fn check_examples(policy: &Policy, examples: &[Example], errors: &mut Errors) {
    for ex in examples {
        let Example {
            path,
            rule,
            expect,
            example,
        } = ex;
        if !example.args.is_object() {
            errors.add(format!("{path}.args"), "must be a table of arguments");
            continue;
        }
        let ann = example.annotations.map(ToolAnnotations::from);
        let call = example_call(&example.tool, &example.args, &ann);
        let (_, matched) = policy.explain(&call);
        // The file's own rule: in a world's policy in force, not a base rule at that position.
        let hit = matched
            .iter()
            .any(|m| m.rule.index == *rule && m.rule.layer != Some(PolicyLayer::Base));
        if hit != *expect {
            let args = serde_json::to_string(&example.args).unwrap_or_default();
            let verb = if *expect { "does not match" } else { "matches" };
            errors.add(
                path.clone(),
                format!(
                    "the rule {verb} this example: tool {:?}, args {args}",
                    example.tool
                ),
            );
        }
    }
}

fn check_checks(policy: &Policy, checks: &[RawCheck], errors: &mut Errors) {
    for (k, c) in checks.iter().enumerate() {
        let path = format!("checks[{k}]");
        if !c.args.is_object() {
            errors.add(format!("{path}.args"), "must be a table of arguments");
            continue;
        }
        let ann = c.annotations.map(ToolAnnotations::from);
        let eval = policy.evaluate(&example_call(&c.tool, &c.args, &ann));
        let decided = eval.rule.and_then(|i| policy.rule_ref(i));
        let by = decided.as_ref().map_or_else(
            || format!("mode {}", policy.mode.as_str()),
            |r| format!("rule {:?}", r.name),
        );
        if eval.action != c.expect {
            errors.add(
                format!("{path}.expect"),
                format!(
                    "the policy decides {} ({by}), not {}",
                    eval.action.as_str(),
                    c.expect.as_str()
                ),
            );
        } else if let Some(want) = &c.rule
            && decided.as_ref().map(|r| &r.name) != Some(want)
        {
            errors.add(
                format!("{path}.rule"),
                format!("decided by {by}, not by rule {want:?}"),
            );
        }
    }
}
