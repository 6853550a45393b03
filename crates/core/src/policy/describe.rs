//! The policy as data people read (`GET /api/v1/policy`): its settings and each rule in the
//! file's terms, rebuilt from the compiled matchers so what is shown is what is applied.

use holdpoint_protocol::{
    ActivePolicy, ArgCondition, CommandCondition, Deadline, PolicyRule, RuleAsk,
};
use serde_json::Value;

use super::matcher::{ArgMatcher, ArgTest, CommandMatcher, Pattern, Pointer};
use super::{Action, Policy, Rule, default_offers};

impl Policy {
    /// The policy's settings, its rules in order, and the text it was read from.
    pub fn describe(&self) -> ActivePolicy {
        ActivePolicy {
            mode: self.mode.as_str().to_owned(),
            default_deadline: self.default_deadline,
            max_deadline: self.max_deadline,
            remind_before: Deadline::After(self.remind_before),
            rules: self.rules.iter().map(describe_rule).collect(),
            source: self.source.as_deref().map(str::to_owned),
        }
    }
}

fn describe_rule(rule: &Rule) -> PolicyRule {
    let ask = (rule.action == Action::Ask).then(|| {
        let quorum = rule.ask.quorum.max(1);
        RuleAsk {
            deadline: rule.ask.deadline,
            on_timeout: rule.ask.on_timeout,
            approvers: rule.ask.approvers.clone(),
            quorum,
            offers: rule
                .ask
                .offers
                .clone()
                .unwrap_or_else(|| default_offers(quorum).to_vec()),
        }
    });
    PolicyRule {
        index: rule.origin,
        locked: rule.locked,
        name: rule.name.clone(),
        action: rule.action.verdict(),
        tools: rule.tools.clone(),
        args: rule.args.iter().map(describe_arg).collect(),
        command: rule.command.as_ref().map(describe_command),
        annotations: rule.annotations.map(|a| a.0),
        ask,
    }
}

fn describe_arg(m: &ArgMatcher) -> ArgCondition {
    let (test, value) = match &m.test {
        ArgTest::Equals(v) => ("equals", v.clone()),
        ArgTest::Prefix(p) => ("prefix", Value::String(p.clone())),
        ArgTest::Glob(g) => ("glob", Value::String(g.glob().glob().to_owned())),
        ArgTest::Regex(r) => ("regex", Value::String(r.as_str().to_owned())),
    };
    ArgCondition {
        pointer: pointer_text(&m.pointer),
        test: test.to_owned(),
        value,
        not: m.negate,
    }
}

fn describe_command(c: &CommandMatcher) -> CommandCondition {
    CommandCondition {
        pointer: pointer_text(&c.pointer),
        program: pattern_text(&c.program),
        args: c.args.iter().map(pattern_text).collect(),
        flags: c.flags.iter().map(|f| f.text.clone()).collect(),
    }
}

fn pattern_text(p: &Pattern) -> String {
    match p {
        Pattern::Literal(l) => l.clone(),
        Pattern::Glob(g) => g.glob().glob().to_owned(),
    }
}

/// A pointer written back as RFC 6901 text (`~` as `~0`, `/` inside a name as `~1`).
fn pointer_text(p: &Pointer) -> String {
    p.tokens()
        .iter()
        .map(|t| format!("/{}", t.replace('~', "~0").replace('/', "~1")))
        .collect()
}

#[cfg(test)]
mod tests {
    use holdpoint_protocol::{CallVerdict, DecisionKind};
    use serde_json::json;

    use super::*;

    #[test]
    fn a_described_policy_shows_each_rule_as_written_and_the_text_it_came_from() {
        let text = r#"
mode = "auto_deny"
default_deadline = "10m"

[[rules]]
name = "reads"
tools = ["fs__read*"]
action = "allow"
args = [{ pointer = "/path~1x/a~0b", glob = "/srv/**" }, { pointer = "/mode", equals = 3, not = true }]

[[rules]]
tools = ["shell"]
action = "ask"
command = { program = "git", args = ["push"], flags = ["-f|--force"] }
approvers = ["carol", "dave"]
quorum = 2
deadline = "5m"
"#;
        let policy = Policy::from_toml(text).unwrap();
        let d = policy.describe();
        assert_eq!(d.mode, "auto_deny");
        assert_eq!(d.default_deadline.to_string(), "10m");
        assert_eq!(d.source.as_deref(), Some(text));
        assert_eq!(d.rules.len(), 2);
        let reads = &d.rules[0];
        assert_eq!(
            (reads.index, reads.name.as_str(), reads.action),
            (0, "reads", CallVerdict::Allow)
        );
        assert_eq!(reads.tools, ["fs__read*"]);
        assert_eq!(reads.args[0].pointer, "/path~1x/a~0b");
        assert_eq!(
            (reads.args[0].test.as_str(), &reads.args[0].value),
            ("glob", &json!("/srv/**"))
        );
        assert!(!reads.args[0].not);
        assert_eq!(
            (
                reads.args[1].test.as_str(),
                &reads.args[1].value,
                reads.args[1].not
            ),
            ("equals", &json!(3), true)
        );
        assert!(reads.ask.is_none());
        let push = &d.rules[1];
        assert_eq!(push.name, "rules[1]");
        let command = push.command.as_ref().unwrap();
        assert_eq!(
            (command.pointer.as_str(), command.program.as_str()),
            ("/command", "git")
        );
        assert_eq!(command.args, ["push"]);
        assert_eq!(command.flags, ["-f|--force"]);
        let ask = push.ask.as_ref().unwrap();
        assert_eq!(ask.approvers, ["carol", "dave"]);
        assert_eq!(ask.quorum, 2);
        assert_eq!(ask.deadline.map(|d| d.to_string()).as_deref(), Some("5m"));
        // A quorum's holds offer no grants and no edits.
        assert_eq!(
            ask.offers,
            [
                DecisionKind::ApproveOnce,
                DecisionKind::Deny,
                DecisionKind::DenyStop
            ]
        );
    }

    #[test]
    fn the_default_policy_has_no_text_and_asks() {
        let d = Policy::default().describe();
        assert_eq!((d.mode.as_str(), d.rules.len()), ("manual", 0));
        assert!(d.source.is_none());
    }
}
