use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;

fn policy(text: &str) -> Policy {
    match Policy::from_toml(text) {
        Ok(p) => p,
        Err(e) => panic!("{e}"),
    }
}

fn errors(text: &str) -> Vec<String> {
    match Policy::from_toml(text) {
        Ok(_) => panic!("policy was accepted"),
        Err(e) => e.0.iter().map(|e| e.to_string()).collect(),
    }
}

fn decide(p: &Policy, tool: &str, args: Value) -> (Action, Option<String>) {
    let e = p.evaluate(&Call::new(tool, &args));
    (e.action, e.rule.and_then(|i| p.rule_ref(i)).map(|r| r.name))
}

fn shell(p: &Policy, command: &str) -> (Action, Option<String>) {
    decide(p, "shell_cmd", json!({ "command": command }))
}

const GIT: &str = r#"
mode = "manual"

[[rules]]
name = "git status"
tools = ["shell_cmd"]
action = "allow"
command = { program = "git", args = ["status"] }

[[rules]]
name = "git log"
tools = ["shell_cmd"]
action = "allow"
command = { program = "git", args = ["log"] }

[[rules]]
name = "git push"
tools = ["shell_cmd"]
action = "ask"
command = { program = "git", args = ["push"] }

[[rules]]
name = "no rm"
tools = ["shell_cmd"]
action = "deny"
command = { program = "rm" }
"#;

#[test]
fn strictest_matching_rule_wins_and_ties_go_to_the_first() {
    let p = policy(
        r#"
        [[rules]]
        name = "allow all files"
        tools = ["*_file"]
        action = "allow"
        [[rules]]
        name = "ask writes"
        tools = ["write_file"]
        action = "ask"
        [[rules]]
        name = "deny etc"
        tools = ["write_file", "read_file"]
        action = "deny"
        args = [{ pointer = "/path", prefix = "/etc/" }]
        [[rules]]
        name = "ask writes again"
        tools = ["write_*"]
        action = "ask"
        "#,
    );
    assert_eq!(
        decide(&p, "read_file", json!({"path": "a"})),
        (Action::Allow, Some("allow all files".into()))
    );
    assert_eq!(
        decide(&p, "write_file", json!({"path": "a"})),
        (Action::Ask, Some("ask writes".into()))
    );
    assert_eq!(
        decide(&p, "write_file", json!({"path": "/etc/x"})),
        (Action::Deny, Some("deny etc".into()))
    );
    assert_eq!(
        decide(&p, "read_file", json!({"path": "/etc/x"})),
        (Action::Deny, Some("deny etc".into()))
    );
    assert_eq!(decide(&p, "list_files", json!({})), (Action::Ask, None));
}

#[test]
fn among_asks_the_larger_quorum_wins() {
    let p = policy(
        r#"
        [[rules]]
        name = "destructive"
        tools = ["deploy"]
        action = "ask"
        [[rules]]
        name = "production"
        tools = ["deploy"]
        action = "ask"
        args = [{ pointer = "/env", equals = "prod" }]
        approvers = ["a", "b"]
        quorum = 2
        "#,
    );
    assert_eq!(
        decide(&p, "deploy", json!({"env": "prod"})),
        (Action::Ask, Some("production".into()))
    );
    assert_eq!(
        decide(&p, "deploy", json!({"env": "dev"})),
        (Action::Ask, Some("destructive".into()))
    );
}

#[test]
fn modes_decide_when_no_rule_matches() {
    for (mode, action) in [
        ("manual", Action::Ask),
        ("auto_approve", Action::Allow),
        ("auto_deny", Action::Deny),
    ] {
        let p = policy(&format!("mode = \"{mode}\""));
        assert_eq!(decide(&p, "anything", json!({})), (action, None), "{mode}");
        assert_eq!(p.can_ask(), mode == "manual");
    }
    assert_eq!(Policy::default().mode(), Mode::Manual);
}

#[test]
fn argument_matchers() {
    let p = policy(
        r#"
        mode = "auto_approve"
        [[rules]]
        name = "equals"
        tools = ["t"]
        action = "deny"
        args = [{ pointer = "/force", equals = true }]
        [[rules]]
        name = "glob"
        tools = ["t"]
        action = "deny"
        args = [{ pointer = "/path", glob = "/secrets/*" }]
        [[rules]]
        name = "regex"
        tools = ["t"]
        action = "deny"
        args = [{ pointer = "/url", regex = "^https?://(internal|admin)\\." }]
        [[rules]]
        name = "outside workspace"
        tools = ["t"]
        action = "ask"
        args = [{ pointer = "/dir", prefix = "/work/", not = true }]
        [[rules]]
        name = "nested"
        tools = ["t"]
        action = "deny"
        args = [{ pointer = "/opts/0/name", equals = "drop" }, { pointer = "/opts/0/value", equals = 1 }]
        "#,
    );
    let d = |args: Value| decide(&p, "t", args).1;
    assert_eq!(
        d(json!({"force": true, "dir": "/work/a"})),
        Some("equals".into())
    );
    assert_eq!(
        d(json!({"force": "true", "dir": "/work/a"})),
        None,
        "equals compares JSON values"
    );
    assert_eq!(
        d(json!({"path": "/secrets/key", "dir": "/work/a"})),
        Some("glob".into())
    );
    assert_eq!(
        d(json!({"path": "/secrets/a/key", "dir": "/work/a"})),
        None,
        "* stops at /"
    );
    assert_eq!(
        d(json!({"url": "http://admin.example", "dir": "/work/a"})),
        Some("regex".into())
    );
    assert_eq!(
        d(json!({"url": 7, "dir": "/work/a"})),
        None,
        "regex needs a string"
    );
    assert_eq!(d(json!({"dir": "/tmp"})), Some("outside workspace".into()));
    assert_eq!(
        d(json!({})),
        Some("outside workspace".into()),
        "a missing value fails the test, so `not` matches"
    );
    assert_eq!(
        d(json!({"dir": "/work/", "opts": [{"name": "drop", "value": 1}]})),
        Some("nested".into())
    );
    assert_eq!(
        d(json!({"dir": "/work/", "opts": [{"name": "drop", "value": 2}]})),
        None,
        "every matcher must match"
    );
}

#[test]
fn json_pointers_follow_rfc_6901() {
    let p = policy(
        r#"
        mode = "auto_approve"
        [[rules]]
        name = "escaped"
        tools = ["t"]
        action = "deny"
        args = [{ pointer = "/a~1b/c~0d/1", equals = "x" }]
        [[rules]]
        name = "whole"
        tools = ["t"]
        action = "ask"
        args = [{ pointer = "", equals = {} }]
        "#,
    );
    assert_eq!(
        decide(&p, "t", json!({"a/b": {"c~d": ["w", "x"]}})).1,
        Some("escaped".into())
    );
    assert_eq!(
        decide(&p, "t", json!({"a/b": {"c~d": {"1": "x"}}})).1,
        Some("escaped".into()),
        "a token names an object key too"
    );
    assert_eq!(decide(&p, "t", json!({"a/b": {"c~d": ["x"]}})).1, None);
    assert_eq!(decide(&p, "t", json!({})).1, Some("whole".into()));
    let p = policy(
        "mode = \"auto_approve\"\n[[rules]]\ntools = [\"t\"]\naction = \"deny\"\nargs = [{ pointer = \"/a/01\", equals = 1 }]",
    );
    assert_eq!(
        decide(&p, "t", json!({"a": [0, 1]})).1,
        None,
        "no leading zeros in array indices"
    );
    let errs = errors(
        "[[rules]]\ntools = [\"t\"]\naction = \"deny\"\nargs = [{ pointer = \"/a~2\", equals = 1 }]",
    );
    assert!(
        errs[0].starts_with("rules[0].args[0].pointer: \"/a~2\": `~` must be written `~0`"),
        "{errs:?}"
    );
}

#[test]
fn allow_git_status_but_ask_for_git_push() {
    let p = policy(GIT);
    assert_eq!(
        shell(&p, "git status"),
        (Action::Allow, Some("git status".into()))
    );
    assert_eq!(
        shell(&p, "git status --short"),
        (Action::Allow, Some("git status".into()))
    );
    assert_eq!(
        shell(&p, "/usr/bin/git status"),
        (Action::Allow, Some("git status".into()))
    );
    assert_eq!(
        shell(&p, "git push origin main"),
        (Action::Ask, Some("git push".into()))
    );
    assert_eq!(shell(&p, "git commit -m x"), (Action::Ask, None));
    assert_eq!(
        decide(&p, "shell_cmd", json!({"command": ["git", "status"]})),
        (Action::Allow, Some("git status".into()))
    );
}

#[test]
fn a_command_line_is_allowed_only_when_every_command_in_it_is() {
    let p = policy(GIT);
    assert_eq!(
        shell(&p, "git status && git log -1"),
        (Action::Allow, Some("git status".into()))
    );
    assert_eq!(
        shell(&p, "git status && git push"),
        (Action::Ask, Some("git push".into()))
    );
    assert_eq!(shell(&p, "git status; curl x | sh"), (Action::Ask, None));
    assert_eq!(
        shell(&p, "git status; rm -rf ~"),
        (Action::Deny, Some("no rm".into()))
    );
    assert_eq!(
        shell(&p, "git status > /tmp/out"),
        (Action::Ask, None),
        "redirection"
    );
    assert_eq!(
        shell(&p, "git status $(touch x)"),
        (Action::Ask, None),
        "substitution"
    );
    assert_eq!(
        shell(&p, "git status `rm -rf /`"),
        (Action::Deny, Some("no rm".into())),
        "inside a substitution"
    );
    assert_eq!(
        shell(&p, "GIT_DIR=/x git status"),
        (Action::Ask, None),
        "assignment prefix"
    );
    assert_eq!(
        shell(&p, "$GIT status"),
        (Action::Deny, Some("no rm".into())),
        "an expanded program could be rm"
    );
    assert_eq!(
        shell(&p, "\"$(which git)\" status"),
        (Action::Deny, Some("no rm".into())),
        "so could a substituted one"
    );
    assert_eq!(
        shell(&p, "git \"status\""),
        (Action::Allow, Some("git status".into())),
        "quotes removed"
    );
    assert_eq!(
        shell(&p, ""),
        (Action::Ask, None),
        "an empty line is not allowed by any rule"
    );
    assert_eq!(
        shell(&p, "if true; then rm -rf /; fi"),
        (Action::Deny, Some("no rm".into()))
    );
}

#[test]
fn a_command_matcher_ignores_values_that_are_not_commands() {
    let p = policy(GIT);
    assert_eq!(
        decide(&p, "shell_cmd", json!({"command": 42})),
        (Action::Ask, None)
    );
    assert_eq!(
        decide(&p, "shell_cmd", json!({"command": ["git", 1]})),
        (Action::Ask, None)
    );
    assert_eq!(decide(&p, "shell_cmd", json!({})), (Action::Ask, None));
}

#[test]
fn annotation_matchers() {
    let p = policy(
        r#"
        [[rules]]
        name = "read-only tools"
        tools = ["*__*"]
        action = "allow"
        annotations = { read_only = true }
        [[rules]]
        name = "destructive tools"
        tools = ["*__*"]
        action = "ask"
        annotations = { destructive = true }
        "#,
    );
    let args = json!({});
    let ro = ToolAnnotations {
        read_only: Some(true),
        ..Default::default()
    };
    let de = ToolAnnotations {
        destructive: Some(true),
        ..Default::default()
    };
    let eval = |ann: Option<&ToolAnnotations>| {
        let e = p.evaluate(&Call {
            tool: "fs__read",
            arguments: &args,
            annotations: ann,
        });
        (e.action, e.rule)
    };
    assert_eq!(eval(Some(&ro)), (Action::Allow, Some(0)));
    assert_eq!(eval(Some(&de)), (Action::Ask, Some(1)));
    assert_eq!(eval(None), (Action::Ask, None));
}

#[test]
fn explain_lists_every_matching_rule() {
    let p = policy(GIT);
    let args = json!({"command": "git status && git push"});
    let (eval, matched) = p.explain(&Call::new("shell_cmd", &args));
    assert_eq!(
        eval,
        Evaluation {
            action: Action::Ask,
            rule: Some(2)
        }
    );
    let names: Vec<(&str, Action)> = matched
        .iter()
        .map(|m| (m.rule.name.as_str(), m.action))
        .collect();
    assert_eq!(names, vec![("git push", Action::Ask)]);
    let args = json!({"command": "git status && git log"});
    let (_, matched) = p.explain(&Call::new("shell_cmd", &args));
    assert_eq!(
        matched.iter().map(|m| m.rule.index).collect::<Vec<_>>(),
        vec![0]
    );
}

#[test]
fn ask_settings_come_from_rule_then_tool_then_defaults() {
    let p = policy(
        r#"
        default_deadline = "10m"
        remind_before = "1m"
        [tools.deploy]
        deadline = "2h"
        on_timeout = "approve"
        [[rules]]
        name = "prod"
        tools = ["deploy"]
        action = "ask"
        args = [{ pointer = "/env", equals = "prod" }]
        deadline = "1h"
        on_timeout = "deny"
        approvers = ["ann", "bob", "cy"]
        quorum = 2
        "#,
    );
    let prod = p.ask_settings("deploy", Some(0));
    assert_eq!(prod.deadline, Deadline::After(Duration::from_secs(3600)));
    assert_eq!(prod.on_timeout, Verdict::Deny);
    assert_eq!(prod.quorum, 2);
    assert_eq!(prod.approvers, vec!["ann", "bob", "cy"]);
    assert_eq!(
        prod.offers,
        vec![
            DecisionKind::ApproveOnce,
            DecisionKind::Deny,
            DecisionKind::DenyStop
        ]
    );
    assert_eq!(prod.rule.unwrap().name, "prod");
    let tool = p.ask_settings("deploy", None);
    assert_eq!(tool.deadline, Deadline::After(Duration::from_secs(7200)));
    assert_eq!(tool.on_timeout, Verdict::Approve);
    assert_eq!(tool.quorum, 1);
    assert_eq!(tool.offers, DecisionKind::APPROVAL.to_vec());
    let other = p.ask_settings("x", None);
    assert_eq!(other.deadline, Deadline::After(Duration::from_secs(600)));
    assert_eq!(other.on_timeout, Verdict::Deny, "fail closed by default");
    assert_eq!(other.remind_before, Duration::from_secs(60));
}

#[test]
fn requested_deadlines_are_bounded_by_max_deadline() {
    let p = policy("max_deadline = \"1h\"");
    assert!(
        p.check_requested_deadline(Deadline::After(Duration::from_secs(60)))
            .is_ok()
    );
    assert!(
        p.check_requested_deadline(Deadline::After(Duration::from_secs(7200)))
            .unwrap_err()
            .contains("max_deadline")
    );
    assert!(
        p.check_requested_deadline(Deadline::Never)
            .unwrap_err()
            .contains("never")
    );
    let p = policy("max_deadline = \"never\"");
    assert_eq!(
        p.check_requested_deadline(Deadline::Never),
        Ok(Deadline::Never)
    );
}

#[test]
fn examples_are_checked_when_the_policy_loads() {
    let ok = r#"
        [[rules]]
        name = "git status"
        tools = ["shell_cmd"]
        action = "allow"
        command = { program = "git", args = ["status"] }
        must_match = [{ tool = "shell_cmd", args = { command = "git status -s" } }]
        must_not_match = [{ tool = "shell_cmd", args = { command = "git status; rm x" } }]
        [[checks]]
        tool = "shell_cmd"
        args = { command = "git status" }
        expect = "allow"
        rule = "git status"
        [[checks]]
        tool = "shell_cmd"
        args = { command = "git push" }
        expect = "ask"
    "#;
    policy(ok);
    let bad = ok
        .replace("git status -s", "git push")
        .replace("git status; rm x", "git status")
        .replace("expect = \"ask\"", "expect = \"deny\"");
    assert_eq!(
        errors(&bad),
        vec![
            r#"rules[0].must_match[0]: the rule does not match this example: tool "shell_cmd", args {"command":"git push"}"#,
            r#"rules[0].must_not_match[0]: the rule matches this example: tool "shell_cmd", args {"command":"git status"}"#,
            "checks[1].expect: the policy decides ask (mode manual), not deny",
        ]
    );
}

#[test]
fn each_kind_of_bad_policy_names_its_field() {
    let cases: &[(&str, &str)] = &[
        (
            "mode = \"sometimes\"",
            "mode: unknown variant `sometimes`, expected one of `manual`, `auto_approve`, `auto_deny`",
        ),
        (
            "[[rules]]\ntools = [\"x\"]\nactoin = \"allow\"",
            "rules[0].actoin: unknown field `actoin`, expected one of `name`, `tools`, `action`",
        ),
        (
            "[[rules]]\ntools = [\"x\"]\naction = \"alow\"",
            "rules[0].action: unknown variant `alow`",
        ),
        (
            "[[rules]]\naction = \"allow\"",
            "rules[0]: missing field `tools`",
        ),
        (
            "[[rules]]\ntools = []\naction = \"allow\"",
            "rules[0].tools: list at least one tool",
        ),
        (
            "[[rules]]\ntools = [\"a[\"]\naction = \"allow\"",
            "rules[0].tools[0]: invalid glob \"a[\"",
        ),
        (
            "[[rules]]\ntools = [\"x\"]\naction = \"deny\"\nargs = [{ pointer = \"/a\", regex = \"(\" }]",
            "rules[0].args[0].regex: invalid regex \"(\"",
        ),
        (
            "[[rules]]\ntools = [\"x\"]\naction = \"deny\"\nargs = [{ pointer = \"/a\", prefix = \"x\", glob = \"y\" }]",
            "rules[0].args[0]: give exactly one of `equals`, `prefix`, `glob` or `regex`",
        ),
        (
            "[[rules]]\ntools = [\"x\"]\naction = \"deny\"\nargs = [{ pointer = \"a\", prefix = \"x\" }]",
            "rules[0].args[0].pointer: \"a\" is not a JSON pointer",
        ),
        (
            "[[rules]]\ntools = [\"x\"]\naction = \"allow\"\nquorum = 2",
            "rules[0].quorum: only `ask` rules take `quorum` (this rule's action is allow)",
        ),
        (
            "[[rules]]\ntools = [\"x\"]\naction = \"ask\"\napprovers = [\"a\"]\nquorum = 2",
            "rules[0].quorum: needs 2 approvals but only 1 approvers are listed",
        ),
        (
            "[[rules]]\ntools = [\"x\"]\naction = \"ask\"\nquorum = 0",
            "rules[0].quorum: must be at least 1",
        ),
        (
            "[[rules]]\ntools = [\"x\"]\naction = \"ask\"\ndeadline = \"soon\"",
            "rules[0].deadline: \"soon\" is not a deadline",
        ),
        (
            "[[rules]]\ntools = [\"x\"]\naction = \"ask\"\non_timeout = \"maybe\"",
            "rules[0].on_timeout: unknown variant `maybe`",
        ),
        (
            "[[rules]]\ntools = [\"x\"]\naction = \"ask\"\nquorum = 2\noffers = [\"approve_always_tool\", \"deny\"]",
            "rules[0].offers[0]: a quorum rule offers only approve_once, deny and deny_stop",
        ),
        (
            "[[rules]]\ntools = [\"x\"]\naction = \"ask\"\noffers = [\"deny\"]",
            "rules[0].offers: offer at least one way to approve and one way to deny",
        ),
        (
            "[[rules]]\nname = \"a\"\ntools = [\"x\"]\naction = \"ask\"\n[[rules]]\nname = \"a\"\ntools = [\"y\"]\naction = \"ask\"",
            "rules[1].name: \"a\" is used by an earlier rule",
        ),
        (
            "[[rules]]\ntools = [\"x\"]\naction = \"ask\"\ncommand = { program = \"\" }",
            "rules[0].command.program: name the program",
        ),
        (
            "remind_before = \"never\"",
            "remind_before: must be a duration",
        ),
        (
            "[tools.x]\ndeadline = \"1 fortnight\"",
            "tools.x.deadline: \"1 fortnight\" is not a deadline",
        ),
        (
            "[[checks]]\ntool = \"x\"\nexpect = \"allow\"",
            "checks[0].expect: the policy decides ask (mode manual), not allow",
        ),
        (
            "mode = \"manual\"\nrules = 3",
            "rules: invalid type: integer `3`, expected a sequence",
        ),
        ("mode = manual", "line 1, column 8"),
    ];
    for (text, expected) in cases {
        let errs = errors(text);
        assert!(
            errs.iter().any(|e| e.contains(expected)),
            "for {text:?}\n expected {expected:?}\n got {errs:#?}"
        );
    }
}

#[test]
fn all_problems_are_reported_at_once() {
    let errs = errors(
        "[[rules]]\ntools = []\naction = \"allow\"\nquorum = 2\n[[rules]]\ntools = [\"x\"]\naction = \"deny\"\nargs = [{ pointer = \"/a\", regex = \"[\" }]",
    );
    assert_eq!(errs.len(), 3, "{errs:#?}");
}

/// A rule of the order property: its action, its tool (`*`: any), perhaps a value `/n` must
/// equal.
#[derive(Debug, Clone)]
struct OrderRule {
    action: Action,
    tool: &'static str,
    n: Option<u8>,
}

fn order_rule() -> impl proptest::strategy::Strategy<Value = OrderRule> {
    use proptest::prelude::*;
    (
        prop::sample::select(vec![Action::Allow, Action::Ask, Action::Deny]),
        prop::sample::select(vec!["a", "b", "*"]),
        prop::option::of(0..3u8),
    )
        .prop_map(|(action, tool, n)| OrderRule { action, tool, n })
}

/// A policy of `rules`, each named `r` and its number.
fn order_policy(mode: Mode, rules: &[(usize, OrderRule)]) -> Policy {
    let mut text = format!("mode = \"{}\"\n", mode.as_str());
    for (name, r) in rules {
        text.push_str(&format!(
            "[[rules]]\nname = \"r{name}\"\ntools = [\"{}\"]\naction = \"{}\"\n",
            r.tool,
            r.action.as_str()
        ));
        if let Some(n) = r.n {
            text.push_str(&format!("args = [{{ pointer = \"/n\", equals = {n} }}]\n"));
        }
    }
    policy(&text)
}

/// Up to 8 rules, numbered, and the same rules shuffled.
#[allow(clippy::type_complexity)]
fn rules_in_two_orders()
-> impl proptest::strategy::Strategy<Value = (Vec<(usize, OrderRule)>, Vec<(usize, OrderRule)>)> {
    use proptest::prelude::*;
    prop::collection::vec(order_rule(), 0..8).prop_flat_map(|rules| {
        let numbered: Vec<(usize, OrderRule)> = rules.into_iter().enumerate().collect();
        (Just(numbered.clone()), Just(numbered).prop_shuffle())
    })
}

/// A program name that is not `git`, nor a word the shell reserves (`git; fi` runs no
/// second command: the line is opaque, and not allowed either).
fn other_program() -> impl proptest::strategy::Strategy<Value = String> {
    use proptest::prelude::*;
    "[a-z]{1,8}".prop_filter("another program", |p| {
        p != "git" && !super::shell::is_reserved(p)
    })
}

/// What can follow a command so that more than it runs, or runs differently: another
/// command after a list operator or a pipe, a command substitution (bare, quoted, or with
/// backticks), a redirection.
fn more_than_one_command() -> impl proptest::strategy::Strategy<Value = (String, bool)> {
    use proptest::prelude::*;
    let chained = (
        prop::sample::select(vec![";", "&&", "||", "|", "|&", "&", "\n"]),
        other_program(),
        "[a-z0-9./-]{0,6}",
    )
        .prop_map(|(op, program, arg)| (format!("{op} {program} {arg}"), true));
    let opaque = prop_oneof![
        "[a-z ]{0,12}".prop_map(|inner| format!("$({inner})")),
        "[a-z ]{0,12}".prop_map(|inner| format!("\"$({inner})\"")),
        "[a-z ]{0,12}".prop_map(|inner| format!("`{inner}`")),
        (
            prop::sample::select(vec![">", ">>", "<", "2>", "&>", "<<", ">|", "2>&1 >"]),
            "[a-z0-9./]{1,8}"
        )
            .prop_map(|(op, target)| format!("{op} {target}")),
    ]
    .prop_map(|s| (s, false));
    prop_oneof![chained, opaque]
}

/// A keyword after a list operator runs no second command, but it makes the line opaque,
/// so a rule allowing the first program does not allow the line.
#[test]
fn an_allowed_program_followed_by_a_keyword_is_not_allowed() {
    let p = policy(
        "[[rules]]\nname = \"git\"\ntools = [\"shell_cmd\"]\naction = \"allow\"\ncommand = { program = \"git\" }",
    );
    for line in ["git; fi ", "git && done", "git; in x"] {
        assert!(!shell::parse(line).is_plain(), "{line:?} read as plain");
        assert_ne!(shell(&p, line).0, Action::Allow, "{line:?} allowed");
    }
}

proptest::proptest! {
    /// Whatever order the rules are in, a call that a `deny` rule matches is denied (by a
    /// deny rule), and every call gets the strictest action of the rules that match it.
    #[test]
    fn deny_wins_whatever_the_order_of_the_rules(
        (rules, shuffled) in rules_in_two_orders(),
        mode in proptest::sample::select(vec![Mode::Manual, Mode::AutoApprove, Mode::AutoDeny]),
    ) {
        let written = order_policy(mode, &rules);
        let reordered = order_policy(mode, &shuffled);
        for tool in ["a", "b", "c"] {
            for n in 0..3u8 {
                let args = json!({ "n": n });
                let matching: Vec<Action> = rules
                    .iter()
                    .filter(|(_, r)| (r.tool == "*" || r.tool == tool) && r.n.is_none_or(|m| m == n))
                    .map(|(_, r)| r.action)
                    .collect();
                let expected = matching.iter().copied().max().unwrap_or(match mode {
                    Mode::Manual => Action::Ask,
                    Mode::AutoApprove => Action::Allow,
                    Mode::AutoDeny => Action::Deny,
                });
                for p in [&written, &reordered] {
                    let (action, rule) = decide(p, tool, args.clone());
                    proptest::prop_assert_eq!(action, expected, "{} {:?} {:?}", tool, args, rules);
                    if matching.contains(&Action::Deny) {
                        let index: usize = rule.as_deref().and_then(|r| r[1..].parse().ok()).unwrap();
                        proptest::prop_assert_eq!(rules[index].1.action, Action::Deny);
                    }
                }
            }
        }
    }

    /// A rule that allows a program never allows a line that runs more than that program:
    /// `;`, `&&`, `||`, `|`, `&` and newlines start other commands, which the rule does not
    /// cover, and substitutions and redirections make the line opaque.
    #[test]
    fn an_allowed_program_does_not_allow_what_follows_it(
        args in "( [a-z0-9./-]{1,6}){0,3}",
        (construct, chained) in more_than_one_command(),
        spaced in proptest::bool::ANY,
    ) {
        let p = policy(
            "[[rules]]\nname = \"git\"\ntools = [\"shell_cmd\"]\naction = \"allow\"\ncommand = { program = \"git\" }",
        );
        proptest::prop_assert_eq!(shell(&p, "git status").0, Action::Allow);
        let line = format!("git{args}{}{construct}", if spaced { " " } else { "" });
        let read = shell::parse(&line);
        if chained {
            proptest::prop_assert!(read.commands.len() >= 2, "{:?} read as {:?}", line, read);
        } else {
            proptest::prop_assert!(!read.is_plain(), "{:?} read as plain: {:?}", line, read);
        }
        let (action, rule) = shell(&p, &line);
        proptest::prop_assert_ne!(action, Action::Allow, "{:?} allowed by {:?}", line, rule);
    }
}

/// The base's locked deny of recursive deletes, as docs/policy.md writes it, over a world
/// that allows `rm`.
const RECURSIVE: &str = r#"
[[rules]]
name = "never delete recursively"
tools = ["shell_cmd"]
action = "deny"
command = { program = "rm", flags = ["-r|-R|--recursive"] }
locked = true
"#;

const RM_ALLOWED: &str = r#"
mode = "auto_approve"

[[rules]]
name = "rm is fine"
tools = ["shell_cmd"]
action = "allow"
command = { program = "rm" }
"#;

/// Every spelling of `rm -r` that the tests below try: flags, wrappers and substitutions.
const RECURSIVE_SPELLINGS: &[&str] = &[
    "rm -r junk",
    "rm -R junk",
    "rm -rf junk",
    "rm -fr junk",
    "rm -f -r junk",
    "rm -vfR junk",
    "rm --recursive junk",
    "rm --recursive=yes junk",
    "rm --rec junk",
    "rm junk -rf",
    "/bin/rm -rf junk",
    "sudo rm -rf junk",
    "sudo -u bob rm -rf junk",
    "sudo -nu bob -- rm -rf junk",
    "sudo --user=bob rm -rf junk",
    "sudo --user bob A=1 rm -rf junk",
    "env rm -rf junk",
    "env A=B rm -rf junk",
    "env -i PATH=/bin rm -fr junk",
    "env -u HOME -C /tmp rm -fr junk",
    "env -S 'rm -rf junk'",
    "env --split-string='rm -rf junk'",
    "command rm -rf junk",
    "command -p rm -rf junk",
    "exec rm -rf junk",
    "exec -a x rm -rf junk",
    "nice -n 5 rm -rf junk",
    "nohup rm -rf junk",
    "timeout -s KILL 10 rm -rf junk",
    "find . -name x | xargs rm -rf",
    "xargs -n 1 rm -rf < list",
    "echo -rf | xargs rm",
    "find . -name junk -exec rm -rf {} +",
    "find . -execdir rm -r {} ;",
    "sudo env A=B nice rm -rf junk",
    "sh -c 'rm -rf junk'",
    "bash -ec \"rm -rf junk\"",
    "bash -o pipefail -c 'rm -rf junk'",
    "eval rm -rf junk",
    "eval \"rm -rf junk\"",
    "rm $(echo -rf) junk",
    "rm `echo -rf` junk",
    "rm \"$FLAGS\" junk",
    "rm $FLAGS junk",
    "$RM -rf junk",
    "\"$(echo rm)\" -rf junk",
    "sudo $CMD",
    "sh -c \"$LINE\"",
    "eval $LINE",
    "git status; rm -rf ~",
    "echo $(rm -fr /)",
];

#[test]
fn a_flag_matches_in_every_spelling_behind_any_wrapper() {
    let p = policy(RECURSIVE);
    for line in RECURSIVE_SPELLINGS {
        assert_eq!(
            shell(&p, line),
            (Action::Deny, Some("never delete recursively".into())),
            "{line:?}"
        );
    }
    for line in [
        "rm notes.txt",
        "rm -f notes.txt",
        "rm -i -v notes.txt",
        "rm --force notes.txt",
        "rm -- -r",
        "rm *.o",
        "ls -R",
        "sudo ls -R",
        "env A=B rm notes.txt",
        "sh -c 'rm notes.txt'",
        "echo rm -rf",
        "grep -r rm .",
    ] {
        assert_eq!(shell(&p, line), (Action::Ask, None), "{line:?}");
    }
    // An argument vector is read the same way.
    let argv = decide(
        &p,
        "shell_cmd",
        json!({"command": ["sudo", "rm", "-fr", "x"]}),
    );
    assert_eq!(argv.0, Action::Deny);
}

#[test]
fn a_locked_flag_rule_is_not_loosened_by_a_world_that_allows_the_program() {
    let layers = {
        let mut l = Layers::new(policy(RECURSIVE));
        l.set_world("w", 1, policy(RM_ALLOWED));
        l
    };
    let (p, _) = layers.for_world("w");
    for line in RECURSIVE_SPELLINGS {
        let e = p.evaluate(&Call::new("shell_cmd", &json!({ "command": line })));
        assert_eq!(e.action, Action::Deny, "{line:?}");
        assert_eq!(p.layer_of(e.rule), PolicyLayer::Base, "{line:?}");
    }
    assert_eq!(
        p.evaluate(&Call::new("shell_cmd", &json!({"command": "rm notes.txt"})))
            .action,
        Action::Allow
    );
}

#[test]
fn an_allow_rule_never_covers_what_a_wrapper_or_shell_runs_unless_it_is_allowed_too() {
    let p = policy(
        r#"
[[rules]]
name = "sudo"
tools = ["shell_cmd"]
action = "allow"
command = { program = "sudo" }

[[rules]]
name = "env"
tools = ["shell_cmd"]
action = "allow"
command = { program = "env" }

[[rules]]
name = "sh"
tools = ["shell_cmd"]
action = "allow"
command = { program = "sh" }

[[rules]]
name = "git status"
tools = ["shell_cmd"]
action = "allow"
command = { program = "git", args = ["status"] }
"#,
    );
    for line in [
        "sudo rm x",
        "env A=B rm x",
        "sudo -u bob env rm x",
        "sh -c 'git status'",
        "sudo $CMD",
        "env $CMD",
    ] {
        assert_eq!(shell(&p, line).0, Action::Ask, "{line:?}");
    }
    // What the wrapper runs is allowed too: the line is.
    assert_eq!(shell(&p, "sudo git status").0, Action::Allow);
    assert_eq!(shell(&p, "env A=B git status").0, Action::Allow);
}

#[test]
fn flags_are_checked_when_the_policy_loads() {
    let text = |flag: &str| {
        format!(
            "[[rules]]\ntools = [\"shell_cmd\"]\naction = \"deny\"\ncommand = {{ program = \"rm\", flags = [\"-r\", {flag:?}] }}\n"
        )
    };
    for bad in ["r", "-rf", "--", "-", "--a=b", "-r|", "--rec*"] {
        let errs = errors(&text(bad));
        assert_eq!(errs.len(), 1, "{bad:?}: {errs:?}");
        assert!(
            errs[0].starts_with("rules[0].command.flags[1]: ")
                && errs[0].contains("write -x for a short flag or --name for a long one"),
            "{bad:?}: {errs:?}"
        );
    }
    let p = policy(&text("--force|-f"));
    assert_eq!(shell(&p, "rm -rf x").0, Action::Deny);
    assert_eq!(
        shell(&p, "rm -r x").0,
        Action::Ask,
        "every flag must be there"
    );
    assert_eq!(shell(&p, "rm --force -R x").0, Action::Ask);
    assert_eq!(shell(&p, "rm --force -r x").0, Action::Deny);
}

#[test]
fn the_documented_policies_hold_against_every_spelling() {
    // docs/policy.example.toml loads: its examples and checks hold.
    let example = policy(include_str!("../../../../docs/policy.example.toml"));
    for line in RECURSIVE_SPELLINGS {
        assert_eq!(shell(&example, line).0, Action::Deny, "{line:?}");
    }
    // Every policy in docs/policy.md loads, and its base's locked rule denies them too.
    let doc = include_str!("../../../../docs/policy.md");
    let blocks = toml_blocks(doc);
    assert!(blocks.len() >= 8, "found {} TOML blocks", blocks.len());
    let base = blocks
        .iter()
        .find(|b| b.contains("never delete recursively") && b.contains("locked = true"))
        .expect("docs/policy.md shows the base's locked rule");
    let base = policy(base);
    for line in RECURSIVE_SPELLINGS {
        assert_eq!(shell(&base, line).0, Action::Deny, "{line:?}");
    }
    for block in &blocks {
        check_doc_block(block, &blocks);
    }
}

/// The ```toml blocks of a Markdown text.
fn toml_blocks(doc: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current: Option<String> = None;
    for line in doc.lines() {
        match (&mut current, line.trim_start()) {
            (None, l) if l.starts_with("```toml") => current = Some(String::new()),
            (Some(block), "```") => {
                out.push(std::mem::take(block));
                current = None;
            }
            (Some(block), _) => {
                block.push_str(line);
                block.push('\n');
            }
            (None, _) => {}
        }
    }
    out
}

/// A documented block loads as what it is: a whole policy, `[[checks]]` of the policy that
/// defines the rule they name, or a fragment of a rule (`command = …`, `args = …`).
fn check_doc_block(block: &str, all: &[String]) {
    if block.contains("[[rules]]") || block.starts_with("mode") || block.starts_with('#') {
        if let Err(e) = Policy::from_toml(block) {
            panic!("a documented policy does not load: {e}\n{block}");
        }
    } else if block.contains("[[checks]]") {
        let rule = block
            .lines()
            .find_map(|l| l.trim().strip_prefix("rule = "))
            .and_then(|r| r.split('"').nth(1));
        let owner = all
            .iter()
            .find(|b| rule.is_some_and(|r| b.contains(&format!("name = \"{r}\""))))
            .unwrap_or_else(|| panic!("no documented policy defines the rule of\n{block}"));
        if let Err(e) = Policy::from_toml(&format!("{owner}\n{block}")) {
            panic!("documented checks fail: {e}\n{block}");
        }
    } else {
        let rule = format!("[[rules]]\ntools = [\"shell_cmd\"]\naction = \"deny\"\n{block}");
        if let Err(e) = Policy::from_toml(&rule) {
            panic!("a documented rule fragment does not load: {e}\n{block}");
        }
    }
}

/// A flag spelled any way, behind any wrapper: the deny rule for it denies.
fn recursive_spelling() -> impl proptest::strategy::Strategy<Value = String> {
    use proptest::prelude::*;
    let flag = prop_oneof![
        Just("-r".to_owned()),
        Just("-R".to_owned()),
        Just("--recursive".to_owned()),
        "[fvid]{0,3}".prop_flat_map(|others| {
            (0..=others.len()).prop_map(move |at| {
                let mut f = others.clone();
                f.insert(at, 'r');
                format!("-{f}")
            })
        }),
        Just("$(echo -rf)".to_owned()),
        Just("\"$FLAGS\"".to_owned()),
    ];
    let wrapper = prop::sample::select(vec![
        "",
        "sudo ",
        "sudo -u bob ",
        "env ",
        "env A=B ",
        "env -i ",
        "command ",
        "exec ",
        "nice -n 3 ",
        "nohup ",
        "sudo env X=1 ",
        "timeout 5 ",
    ]);
    (
        wrapper,
        prop::sample::select(vec!["rm", "/bin/rm", "/usr/bin/rm"]),
        flag,
        "( [a-z][a-z0-9./]{0,5}){0,2}",
        proptest::bool::ANY,
    )
        .prop_map(|(wrapper, rm, flag, operands, flag_last)| {
            if flag_last {
                format!("{wrapper}{rm}{operands} {flag}")
            } else {
                format!("{wrapper}{rm} {flag}{operands}")
            }
        })
}

proptest::proptest! {
    /// However the recursive flag is spelled and whatever wrapper runs `rm`, the locked deny
    /// rule denies it, in a world whose own policy allows `rm`.
    #[test]
    fn a_deny_rule_for_a_flag_is_not_got_around(line in recursive_spelling()) {
        let mut layers = Layers::new(policy(RECURSIVE));
        layers.set_world("w", 1, policy(RM_ALLOWED));
        let (p, _) = layers.for_world("w");
        let e = p.evaluate(&Call::new("shell_cmd", &json!({ "command": line })));
        proptest::prop_assert_eq!(e.action, Action::Deny, "{:?}", line);
    }
}
