//! Holds and outcomes as people read them on a terminal. Everything that came from an LLM, an
//! agent or a tool server goes through [`safe`] first.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use holdpoint_protocol::{
    Agent, ApproveScope, Hold, HoldSpec, OnTimeout, Outcome, OutcomeStatus, RuleRef, Source,
    Timestamp, Verdict,
};
use serde_json::Value;

use crate::terminal::safe::{clean, clean_line};

/// JSON, pretty-printed and cleaned (JSON escapes C0 controls but not C1 or bidi ones).
pub fn json(value: &Value) -> String {
    let text = serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string());
    clean(&text).into_owned()
}

/// At most `max` characters of one line.
pub fn short(text: &str, max: usize) -> String {
    let line = clean_line(text);
    if line.chars().count() <= max {
        return line;
    }
    let mut s: String = line.chars().take(max.saturating_sub(1)).collect();
    s.push('…');
    s
}

/// An argument vector as a shell would read it, for people: `git commit -m 'a b'`.
pub fn command_line(argv: &[String]) -> String {
    let quoted: Vec<String> = argv
        .iter()
        .map(|a| {
            let plain = !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c));
            if plain {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', "'\\''"))
            }
        })
        .collect();
    clean_line(&quoted.join(" "))
}

/// What a hold asks, on one line.
pub fn summary(hold: &Hold) -> String {
    match &hold.spec {
        HoldSpec::Approval(a) => {
            let args = serde_json::to_string(&a.arguments).unwrap_or_default();
            format!("{} {}", clean_line(&a.tool), short(&args, 60))
        }
        HoldSpec::Question(q) => short(&q.question, 70),
    }
}

/// `in 9m 58s` or `3s ago`.
pub fn relative(at: Timestamp, now: Timestamp) -> String {
    let whole_seconds = |d: Duration| Duration::from_secs(d.as_secs());
    if at >= now {
        format!(
            "in {}",
            humantime::format_duration(whole_seconds(at.duration_since(now)))
        )
    } else {
        format!(
            "{} ago",
            humantime::format_duration(whole_seconds(now.duration_since(at)))
        )
    }
}

/// The names of agents by id, so a hold raised by a turn (`agent:<id>`) is said to come from
/// the agent as people know it. Empty where the names are not known.
#[derive(Clone, Debug, Default)]
pub struct AgentNames {
    names: HashMap<String, String>,
    /// The worlds whose agents were added.
    worlds: HashSet<String>,
}

impl AgentNames {
    /// Adds the agents of `world`.
    pub fn add(&mut self, world: &str, agents: &[Agent]) {
        self.worlds.insert(world.to_owned());
        self.names
            .extend(agents.iter().map(|a| (a.id.to_string(), a.name.clone())));
    }

    /// Whether the agents of `world` were added.
    pub fn knows(&self, world: &str) -> bool {
        self.worlds.contains(world)
    }

    /// Who raised `hold`: `agent reviewer` for a known agent's turn, else the principal.
    pub fn raised_by(&self, hold: &Hold) -> String {
        let turn = hold
            .agent
            .as_ref()
            .filter(|id| hold.requested_by.strip_prefix("agent:") == Some(id.as_str()))
            .and_then(|id| self.names.get(id));
        match turn {
            Some(name) => format!("agent {}", clean_line(name)),
            None => clean_line(&hold.requested_by),
        }
    }
}

/// The rule that asked, as the policy names it: its name, or `rules[N]` when it has none.
pub fn rule(rule: &RuleRef) -> String {
    short(&rule.to_string(), 72)
}

/// Everything a person needs to decide a hold: what, why, who asked, until when.
pub fn card(hold: &Hold, now: Timestamp, agents: &AgentNames) -> String {
    let mut out = Vec::new();
    match &hold.spec {
        HoldSpec::Approval(a) => {
            out.push(format!("Approval needed: {}", clean_line(&a.tool)));
            if let Some(mcp) = &a.mcp {
                out.push(format!(
                    "  MCP server: {}, tool: {}",
                    clean_line(&mcp.server),
                    clean_line(&mcp.tool)
                ));
            }
            if let Some(d) = &a.description {
                out.push(format!("  why: {}", clean_line(d)));
            }
            out.push("  arguments:".to_owned());
            for line in json(&a.arguments).lines() {
                out.push(format!("    {line}"));
            }
        }
        HoldSpec::Question(q) => {
            out.push(format!("Question: {}", clean(&q.question)));
            if let Some(context) = &q.context {
                out.push("  context:".to_owned());
                for line in json(&Value::Object(context.clone())).lines() {
                    out.push(format!("    {line}"));
                }
            }
        }
    }
    let why = match (&hold.rule, &hold.asks_because, hold.kind()) {
        (Some(r), _, _) => format!("; {} asks for it", rule(r)),
        (None, Some(because), _) => format!("; asked because {}", clean_line(because)),
        (None, None, holdpoint_protocol::HoldKind::Approval) => {
            "; no rule matched, so the policy's mode asks".to_owned()
        }
        (None, None, _) => String::new(),
    };
    out.push(format!(
        "  raised by {}{why}; hold {}",
        agents.raised_by(hold),
        hold.id
    ));
    match hold.deadline {
        Some(d) => out.push(format!(
            "  deadline {d} ({}); then: {}",
            relative(d, now),
            on_timeout(hold)
        )),
        None => out.push("  no deadline".to_owned()),
    }
    if !hold.approvers.is_empty() {
        out.push(format!("  only {} may decide", hold.approvers.join(", ")));
    }
    if hold.quorum > 1 {
        out.push(format!(
            "  needs {} approvals ({} so far)",
            hold.quorum,
            hold.votes.len()
        ));
    }
    out.join("\n")
}

/// What the deadline will do, as `then: …` shows it.
fn on_timeout(hold: &Hold) -> String {
    match &hold.on_timeout {
        OnTimeout::Deny => "denied".to_owned(),
        OnTimeout::Approve => "approved".to_owned(),
        OnTimeout::Choose { option } => format!("answered {}", clean_line(option)),
        OnTimeout::NoAnswer => "no answer".to_owned(),
    }
}

pub fn scope_text(scope: ApproveScope) -> &'static str {
    match scope {
        ApproveScope::Once => "once",
        ApproveScope::Chat => "for this chat",
        ApproveScope::AlwaysArgs => "always, with these arguments",
        ApproveScope::AlwaysTool => "always, with any arguments",
    }
}

/// How a hold ended, on one line: `approved once by alice`, `timed out: denied`, …
pub fn outcome(o: &Outcome) -> String {
    let options = o
        .options
        .iter()
        .map(|c| clean_line(&c.label))
        .collect::<Vec<_>>()
        .join(", ");
    let what = match o.status {
        OutcomeStatus::Approved => match (o.scope, o.edited) {
            (_, true) => "approved with edited arguments".to_owned(),
            (Some(scope), _) => format!("approved {}", scope_text(scope)),
            (None, _) => "approved".to_owned(),
        },
        OutcomeStatus::Denied if o.stop_turn => "denied, and the turn stopped".to_owned(),
        OutcomeStatus::Denied => "denied".to_owned(),
        OutcomeStatus::Answered => format!("answered: {options}"),
        OutcomeStatus::Confirmed => format!("confirmed: {options}"),
        OutcomeStatus::Canceled => "canceled".to_owned(),
        OutcomeStatus::TimedOut => match (&o.verdict, options.is_empty()) {
            (Some(Verdict::Approve), _) => "timed out: approved".to_owned(),
            (Some(Verdict::Deny), _) => "timed out: denied".to_owned(),
            (None, false) => format!("timed out: answered {options}"),
            // A question without a default or a `no` option: nobody chose.
            (None, true) => "timed out: no answer".to_owned(),
        },
    };
    let by = match o.source {
        Source::Default => format!(
            " (the fail-closed default, applied by {})",
            o.decided_by.join(", ")
        ),
        _ if o.decided_by.is_empty() => String::new(),
        _ => format!(" by {}", clean_line(&o.decided_by.join(", "))),
    };
    let reason = o
        .reason
        .as_deref()
        .map(|r| format!(": {}", clean_line(r)))
        .unwrap_or_default();
    format!("{what}{by}{reason}")
}

#[cfg(test)]
mod tests {
    use holdpoint_core::hold::{HoldContext, question_hold, validate_question};
    use holdpoint_core::limits::Limits;
    use holdpoint_protocol::{BatchId, Deadline, QuestionOption, QuestionRequest};
    use serde_json::json;

    use super::*;

    const AGENT: &str = "0193c2a4-0000-7000-8000-000000000001";

    /// "Deploy to production?" as the turn of the agent `AGENT` raises it.
    fn deploy_question(default: Option<&str>) -> Hold {
        let option = |id: &str| QuestionOption {
            id: id.into(),
            label: id.into(),
            description: None,
        };
        let req = QuestionRequest {
            tool_call_id: None,
            question: "Deploy to production?".into(),
            options: vec![option("deploy"), option("abort")],
            multiple: false,
            confirm: false,
            default_option: default.map(Into::into),
            context: None,
            deadline: None,
        };
        let requested_by = format!("agent:{AGENT}");
        let ctx = HoldContext {
            world: "lab",
            chat: None,
            agent: Some(AGENT),
            requested_by: &requested_by,
            batch: BatchId::random(),
            now: Timestamp::from_millis(0),
            remind_before: Duration::from_secs(60),
            policy: None,
        };
        let spec = validate_question(&req, &Limits::default()).unwrap();
        question_hold(&ctx, spec, None, Deadline::After(Duration::from_secs(600)))
    }

    fn reviewer() -> Agent {
        serde_json::from_value(json!({
            "id": AGENT, "world": "0193c2a4-0000-7000-8000-000000000002", "name": "reviewer",
            "llm": {"base_url": "http://127.0.0.1:1", "model": "m"}, "system_prompt": "",
            "max_steps": 10, "created_at": Timestamp::from_millis(0), "version": 1
        }))
        .unwrap()
    }

    #[test]
    fn a_question_nobody_can_answer_by_default_shows_no_answer() {
        let now = Timestamp::from_millis(0);
        let hold = deploy_question(None);
        let shown = card(&hold, now, &AgentNames::default());
        assert!(shown.contains("then: no answer"), "{shown}");
        let with_default = card_of(&deploy_question(Some("abort")));
        assert!(
            with_default.contains("then: answered abort"),
            "{with_default}"
        );

        let timed_out: Outcome =
            serde_json::from_value(json!({"status": "timed_out", "source": "timeout", "decided_at": Timestamp::from_millis(0)}))
                .unwrap();
        assert_eq!(outcome(&timed_out), "timed out: no answer");
        let denied = Outcome {
            verdict: Some(Verdict::Deny),
            ..timed_out
        };
        assert_eq!(outcome(&denied), "timed out: denied");
    }

    fn card_of(hold: &Hold) -> String {
        card(hold, Timestamp::from_millis(0), &AgentNames::default())
    }

    #[test]
    fn a_card_names_the_agent_and_the_rule_as_people_know_them() {
        let mut hold = deploy_question(None);
        let mut names = AgentNames::default();
        assert!(card_of(&hold).contains(&format!("raised by agent:{AGENT};")));
        names.add("lab", &[reviewer()]);
        let known = card(&hold, Timestamp::from_millis(0), &names);
        assert!(known.contains("raised by agent reviewer;"), "{known}");

        hold.rule = Some(RuleRef {
            index: 2,
            name: "deploys need a person".into(),
            layer: None,
        });
        let named = card_of(&hold);
        assert!(
            named.contains("; rule \"deploys need a person\" asks for it;"),
            "{named}"
        );
        hold.rule = Some(RuleRef {
            index: 0,
            name: "rules[0]".into(),
            layer: None,
        });
        let unnamed = card_of(&hold);
        assert!(unnamed.contains("; rules[0] asks for it;"), "{unnamed}");

        // A principal that merely looks like a turn's is shown as it is.
        hold.requested_by = "ci-bot".into();
        assert!(card(&hold, Timestamp::from_millis(0), &names).contains("raised by ci-bot;"));
    }

    #[test]
    fn short_cuts_long_lines_and_cleans_them() {
        assert_eq!(short("abc", 5), "abc");
        assert_eq!(short("abcdefgh", 5), "abcd…");
        assert_eq!(short("a\u{1b}[2Jb\nc", 20), r"a\u{1b}[2Jb c");
    }

    #[test]
    fn command_lines_are_quoted_for_reading() {
        let argv = ["git", "commit", "-m", "it's done", ""].map(String::from);
        assert_eq!(command_line(&argv), "git commit -m 'it'\\''s done' ''");
    }

    #[test]
    fn relative_times_read_both_ways() {
        let now = Timestamp::from_millis(100_000);
        assert_eq!(relative(Timestamp::from_millis(190_500), now), "in 1m 30s");
        assert_eq!(relative(Timestamp::from_millis(97_000), now), "3s ago");
    }
}
