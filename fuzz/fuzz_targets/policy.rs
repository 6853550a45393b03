//! The policy file parser and the matcher compiler, over any text; then the compiled policy
//! over calls. The input is the policy's TOML, optionally followed by a NUL byte and calls,
//! one per line: the tool's name, a tab, and the arguments as JSON. A policy that loads
//! decides every call consistently: `explain` agrees with `evaluate`, the deciding rule is
//! among those that matched, and no matching rule is stricter than the decision.
#![no_main]

use holdpoint_core::policy::{Action, Call, Policy};
use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};

fuzz_target!(|data: &[u8]| {
    let (text, calls) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &b""[..]),
    };
    let Ok(text) = std::str::from_utf8(text) else {
        return;
    };
    let policy = match Policy::from_toml(text) {
        Ok(p) => p,
        Err(errors) => {
            assert!(!errors.0.is_empty(), "refused without a reason");
            for e in &errors.0 {
                assert!(!e.message.is_empty(), "a problem without a message: {e:?}");
            }
            return;
        }
    };
    let mut calls: Vec<(String, Value)> = String::from_utf8_lossy(calls)
        .lines()
        .filter_map(|line| {
            let (tool, args) = line.split_once('\t').unwrap_or((line, "{}"));
            Some((tool.to_owned(), serde_json::from_str(args).ok()?))
        })
        .collect();
    if calls.is_empty() {
        calls.push(("shell_cmd".into(), json!({"command": "git status && ls"})));
        calls.push(("read_file".into(), json!({"path": "/etc/passwd"})));
    }
    for (tool, args) in &calls {
        check(&policy, tool, args);
    }
});

fn check(policy: &Policy, tool: &str, args: &Value) {
    let call = Call::new(tool, args);
    let evaluation = policy.evaluate(&call);
    let (explained, matched) = policy.explain(&call);
    assert_eq!(explained, evaluation, "explain and evaluate disagree");
    match evaluation.rule {
        None => {
            assert!(
                matched.is_empty(),
                "rules matched but the mode decided: {matched:?}"
            );
        }
        Some(i) => {
            let rule = policy
                .rule_ref(i)
                .unwrap_or_else(|| panic!("the deciding rule {i} does not exist"));
            assert!(
                matched
                    .iter()
                    .any(|m| m.rule == rule && m.action == evaluation.action),
                "the deciding rule {rule:?} is not among those that matched: {matched:?}"
            );
            let strictest = matched.iter().map(|m| m.action).max();
            assert_eq!(strictest, Some(evaluation.action), "{matched:?}");
        }
    }
    if evaluation.action == Action::Ask {
        let settings = policy.ask_settings(tool, evaluation.rule);
        assert!(settings.quorum >= 1);
        assert!(!settings.offers.is_empty());
    }
    let _ = policy.decided_by(&evaluation);
}
