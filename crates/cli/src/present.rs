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
        self.principal(&hold.requested_by)
    }

    /// A principal as people know it: `agent reviewer` for a known agent's turn
    /// (`agent:<id>`), else its name as it is.
    pub fn principal(&self, name: &str) -> String {
        match name
            .strip_prefix("agent:")
            .and_then(|id| self.names.get(id))
        {
            Some(agent) => format!("agent {}", clean_line(agent)),
            None => clean_line(name),
        }
    }

    /// An agent by its id: its name when known, else the id.
    pub fn agent(&self, id: &str) -> String {
        clean_line(self.names.get(id).map_or(id, String::as_str))
    }
}

/// The rule that asked, as the policy names it: its name, or `rules[N]` when it has none.
pub fn rule(rule: &RuleRef) -> String {
    short(&rule.to_string(), 72)
}

/// The rule as `policy check` lists it, by its place in the file: `rules[2] "deploys"`, or
/// `rules[0]` alone for a rule without a name (whose name is that already).
pub fn rule_at(rule: &RuleRef) -> String {
    let at = format!("rules[{}]", rule.index);
    if rule.name == at {
        at
    } else {
        format!("{at} \"{}\"", short(&rule.name, 72))
    }
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
        (None, None, holdpoint_protocol::HoldKind::Question) => String::new(),
    };
    out.push(format!(
        "  raised by {}{why}; hold {}",
        agents.raised_by(hold),
        hold.id
    ));
    if !hold.lineage.is_empty() {
        out.push(format!(
            "  through agents: {}",
            clean_line(&holdpoint_protocol::lineage_text(&hold.lineage))
        ));
    }
    out.push(deadline(hold, now));
    if !hold.approvers.is_empty() {
        out.push(format!(
            "  only {} may decide",
            clean_line(&hold.approvers.join(", "))
        ));
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

/// The deadline line of a card: until when, and what then, while the hold is open; once it
/// is decided, when it was, since the deadline no longer applies.
fn deadline(hold: &Hold, now: Timestamp) -> String {
    let decided = hold.outcome.as_ref().filter(|_| !hold.is_open());
    match (hold.deadline, decided) {
        (Some(d), None) => format!(
            "  deadline {d} ({}); then: {}",
            relative(d, now),
            on_timeout(hold)
        ),
        (None, None) => "  no deadline".to_owned(),
        (_, Some(o)) if o.status == OutcomeStatus::TimedOut => format!(
            "  timed out {} ({}): the deadline passed",
            o.decided_at,
            relative(o.decided_at, now)
        ),
        (Some(_), Some(o)) => format!(
            "  decided {} ({}); the deadline no longer applies",
            o.decided_at,
            relative(o.decided_at, now)
        ),
        (None, Some(o)) => format!(
            "  decided {} ({})",
            o.decided_at,
            relative(o.decided_at, now)
        ),
    }
}

/// What the deadline will do, as `then: …` shows it.
fn on_timeout(hold: &Hold) -> String {
    match &hold.on_timeout {
        OnTimeout::Deny => "denied".to_owned(),
        OnTimeout::Approve => "approved".to_owned(),
        OnTimeout::Choose { option } => format!("the answer is {}", option_label(hold, option)),
        OnTimeout::NoAnswer => "no answer".to_owned(),
    }
}

/// A question's option as its menu shows it: its label, else its id.
fn option_label(hold: &Hold, id: &str) -> String {
    let label = match &hold.spec {
        HoldSpec::Question(q) => q.options.iter().find(|o| o.id == id).map(|o| &o.label),
        HoldSpec::Approval(_) => None,
    };
    clean_line(label.map_or(id, String::as_str))
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
    outcome_by(o, &AgentNames::default())
}

/// [`outcome`], with agents named as people know them (`withdrawn by agent helper`).
pub fn outcome_by(o: &Outcome, agents: &AgentNames) -> String {
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
            (None, false) => format!("timed out: the answer is {options}"),
            // A question without a default or a `no` option: nobody chose.
            (None, true) => "timed out: no answer".to_owned(),
        },
    };
    let who = o
        .decided_by
        .iter()
        .map(|p| agents.principal(p))
        .collect::<Vec<_>>()
        .join(", ");
    let by = match o.source {
        Source::Default => format!(" (the fail-closed default, applied by {who})"),
        _ if o.decided_by.is_empty() => String::new(),
        _ => format!(" by {who}"),
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
            lineage: &[],
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
            with_default.ends_with("; then: the answer is abort"),
            "{with_default}"
        );
        let mut labelled = deploy_question(Some("abort"));
        if let HoldSpec::Question(q) = &mut labelled.spec {
            q.options[1].label = "Abort the deploy".into();
        }
        let shown = card_of(&labelled);
        assert!(
            shown.ends_with("; then: the answer is Abort the deploy"),
            "{shown}"
        );

        let timed_out: Outcome =
            serde_json::from_value(json!({"status": "timed_out", "source": "timeout", "decided_at": Timestamp::from_millis(0)}))
                .unwrap();
        assert_eq!(outcome(&timed_out), "timed out: no answer");
        let defaulted = Outcome {
            options: vec![holdpoint_protocol::ChosenOption {
                id: "abort".into(),
                label: "Abort".into(),
            }],
            ..timed_out.clone()
        };
        assert_eq!(outcome(&defaulted), "timed out: the answer is Abort");
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
    fn a_card_says_why_a_hold_asks_where_policy_would_allow() {
        let mut hold = deploy_question(None);
        hold.asks_because = Some(
            "creating an agent always needs a person (policy alone would allow it: rule \"agents\")"
                .into(),
        );
        let card = card_of(&hold);
        assert!(
            card.contains("; asked because creating an agent always needs a person"),
            "{card}"
        );
        assert!(!card.contains("no rule matched"), "{card}");
    }

    #[test]
    fn a_decided_hold_shows_when_it_was_decided_not_a_deadline_to_come() {
        let mut hold = deploy_question(Some("abort"));
        let now = Timestamp::from_millis(120_000);
        let open = card(&hold, now, &AgentNames::default());
        assert!(
            open.contains("(in 8m); then: the answer is abort"),
            "{open}"
        );

        let decided: Outcome = serde_json::from_value(json!({
            "status": "answered", "source": "person", "decided_by": ["alice"],
            "decided_at": Timestamp::from_millis(60_000),
            "options": [{"id": "deploy", "label": "deploy"}]
        }))
        .unwrap();
        hold.status = holdpoint_protocol::HoldStatus::Answered;
        hold.outcome = Some(decided.clone());
        let shown = card(&hold, now, &AgentNames::default());
        assert!(
            shown.contains(&format!(
                "  decided {} (1m ago); the deadline no longer applies",
                Timestamp::from_millis(60_000)
            )),
            "{shown}"
        );
        assert!(
            !shown.contains("then:") && !shown.contains("(in "),
            "{shown}"
        );

        hold.status = holdpoint_protocol::HoldStatus::TimedOut;
        hold.outcome = Some(Outcome {
            status: OutcomeStatus::TimedOut,
            decided_at: Timestamp::from_millis(600_000),
            ..decided
        });
        let shown = card(
            &hold,
            Timestamp::from_millis(660_000),
            &AgentNames::default(),
        );
        assert!(shown.contains("(1m ago): the deadline passed"), "{shown}");
        assert!(!shown.contains("then:"), "{shown}");
    }

    #[test]
    fn outcomes_name_agents_as_people_know_them() {
        let withdrawn: Outcome = serde_json::from_value(json!({
            "status": "canceled", "source": "agent", "decided_by": [format!("agent:{AGENT}")],
            "decided_at": Timestamp::from_millis(0)
        }))
        .unwrap();
        assert_eq!(outcome(&withdrawn), format!("canceled by agent:{AGENT}"));
        let mut names = AgentNames::default();
        names.add("lab", &[reviewer()]);
        assert_eq!(outcome_by(&withdrawn, &names), "canceled by agent reviewer");
        assert_eq!(names.agent(AGENT), "reviewer");
        assert_eq!(names.principal("ci-bot"), "ci-bot");
        // Names that came from outside are cleaned, the fail-closed default's too.
        let defaulted = Outcome {
            source: Source::Default,
            decided_by: vec!["eve\u{1b}[2J".into()],
            ..withdrawn
        };
        assert_eq!(
            outcome(&defaulted),
            "canceled (the fail-closed default, applied by eve\\u{1b}[2J)"
        );
    }

    #[test]
    fn rules_are_named_once() {
        let unnamed = RuleRef {
            index: 0,
            name: "rules[0]".into(),
            layer: None,
        };
        assert_eq!(rule_at(&unnamed), "rules[0]");
        assert_eq!(rule(&unnamed), "rules[0]");
        let named = RuleRef {
            index: 2,
            name: "deploys".into(),
            layer: None,
        };
        assert_eq!(rule_at(&named), "rules[2] \"deploys\"");
        assert_eq!(rule(&named), "rule \"deploys\"");
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
