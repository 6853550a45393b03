//! Holds and outcomes as people read them on a terminal. Everything that came from an LLM, an
//! agent or a tool server goes through [`safe`] first.

use std::time::Duration;

use holdpoint_protocol::{
    ApproveScope, Hold, HoldSpec, Outcome, OutcomeStatus, Source, Timestamp, Verdict,
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

/// Everything a person needs to decide a hold: what, why, who asked, until when.
pub fn card(hold: &Hold, now: Timestamp) -> String {
    let mut out = Vec::new();
    match &hold.spec {
        HoldSpec::Approval(a) => {
            out.push(format!("Approval needed: {}", clean_line(&a.tool)));
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
    let why = match (&hold.rule, hold.kind()) {
        (Some(rule), _) => format!(
            "; rule {} ({}) asks for it",
            rule.index,
            short(&rule.name, 60)
        ),
        (None, holdpoint_protocol::HoldKind::Approval) => {
            "; no rule matched, so the policy's mode asks".to_owned()
        }
        (None, _) => String::new(),
    };
    out.push(format!(
        "  raised by {}{why}; hold {}",
        clean_line(&hold.requested_by),
        hold.id
    ));
    match hold.deadline {
        Some(d) => out.push(format!(
            "  deadline {d} ({}); then {}",
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

fn on_timeout(hold: &Hold) -> String {
    match &hold.on_timeout {
        holdpoint_protocol::OnTimeout::Deny => "denied".to_owned(),
        holdpoint_protocol::OnTimeout::Approve => "approved".to_owned(),
        holdpoint_protocol::OnTimeout::Choose { option } => {
            format!("answered {}", clean_line(option))
        }
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
            (_, false) => format!("timed out: answered {options}"),
            _ => "timed out: denied".to_owned(),
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
    use super::*;

    #[test]
    fn short_cuts_long_lines_and_cleans_them() {
        assert_eq!(short("abc", 5), "abc");
        assert_eq!(short("abcdefgh", 5), "abcd…");
        assert_eq!(short("a\u{1b}[2Jb\nc", 10), "ab c");
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
