//! What a hold's outcome means for its call.

use holdpoint_protocol::{
    ApprovedBy, CallRecord, CallState, DecidedBy, EventPayload, Outcome, OutcomeStatus, Source,
    ToolResult, TurnId, Verdict,
};

use super::finished;
use crate::tools::Gate;

/// What a question's timeout applied when nobody answered and no option was the fallback.
const NO_ANSWER: &str = "no_answer";

/// The effect of an outcome on a call.
pub(super) struct Applied {
    /// The `turn.tool_finished` event, when the call's result is final.
    pub(super) finished: Option<EventPayload>,
    /// A person chose "deny and stop".
    pub(super) stop: bool,
    /// A skill a person allowed for the rest of the chat.
    pub(super) remember_skill: Option<String>,
}

/// How policy denied a call, for the LLM.
pub(super) fn describe(by: &DecidedBy) -> String {
    match by {
        DecidedBy::Rule { rule } => rule.to_string(),
        DecidedBy::Mode { mode } => format!("no rule matched and the policy's mode is {mode}"),
        DecidedBy::Grant { grant } => format!("grant {grant}"),
    }
}

pub(super) fn apply(turn: TurnId, rec: &mut CallRecord, gate: Gate, o: &Outcome) -> Applied {
    let mut applied = Applied {
        finished: None,
        stop: false,
        remember_skill: None,
    };
    let done = |rec: &mut CallRecord, result| Some(finished(turn, rec, result));
    if o.status == OutcomeStatus::Canceled && gate != Gate::Question {
        let reason = o
            .reason
            .clone()
            .unwrap_or_else(|| "the hold was withdrawn".into());
        applied.finished = done(rec, ToolResult::NotExecuted { reason });
        return applied;
    }
    match gate {
        // Nobody answered, and the question named no option to fall back to: the LLM must
        // not read an empty answer as someone's choice.
        Gate::Question if o.status == OutcomeStatus::TimedOut && o.options.is_empty() => {
            applied.finished = done(
                rec,
                ToolResult::TimedOut {
                    applied: NO_ANSWER.into(),
                },
            );
        }
        Gate::Question => {
            let result = ToolResult::Answer {
                outcome: o.status,
                options: o.options.clone(),
                decided_by: o.decided_by.clone(),
                by_default: o.source == Source::Default,
            };
            applied.finished = done(rec, result);
        }
        Gate::Skill => {
            let chosen = o.options.first().map(|c| c.id.as_str());
            match (o.status, chosen) {
                (OutcomeStatus::TimedOut, Some(option))
                    if option != "yes_once" && option != "yes_in_session" =>
                {
                    applied.finished = done(
                        rec,
                        ToolResult::TimedOut {
                            applied: option.into(),
                        },
                    );
                }
                (_, Some(option @ ("yes_once" | "yes_in_session"))) => {
                    rec.state = CallState::Ready;
                    rec.approved_by = Some(approved_by(o));
                    if option == "yes_in_session" {
                        applied.remember_skill = rec
                            .arguments
                            .as_ref()
                            .and_then(|a| a["name"].as_str())
                            .map(str::to_owned);
                    }
                }
                _ => {
                    let result = denied(o, Some("the person chose not to load the skill"));
                    applied.finished = done(rec, result);
                }
            }
        }
        Gate::Policy | Gate::AlwaysAsk => match (o.status, o.verdict) {
            (OutcomeStatus::Approved | OutcomeStatus::TimedOut, Some(Verdict::Approve)) => {
                rec.state = CallState::Ready;
                rec.approved_by = Some(approved_by(o));
                rec.edited = o.edited;
                if let Some(args) = &o.arguments {
                    rec.arguments = Some(args.clone());
                }
            }
            (OutcomeStatus::TimedOut, _) => {
                applied.finished = done(
                    rec,
                    ToolResult::TimedOut {
                        applied: "deny".into(),
                    },
                );
            }
            _ => {
                applied.stop = o.stop_turn;
                let result = denied(o, None);
                applied.finished = done(rec, result);
            }
        },
    }
    applied
}

/// Who approved a call whose hold was approved: a person, or the hold's timeout outcome.
fn approved_by(o: &Outcome) -> ApprovedBy {
    if o.status == OutcomeStatus::TimedOut {
        ApprovedBy::Timeout
    } else {
        ApprovedBy::Person
    }
}

/// A denial, as the LLM hears it: by a person, or by the fail-closed default that a client
/// applied because it could ask no one (the LLM must not believe someone looked and refused).
/// `otherwise` stands in for a person's reason when they gave none.
fn denied(o: &Outcome, otherwise: Option<&str>) -> ToolResult {
    if o.source == Source::Default {
        ToolResult::DeniedByDefault {
            reason: o.reason.clone(),
            applied_by: o.decided_by.clone(),
        }
    } else {
        ToolResult::DeniedByPerson {
            reason: o.reason.clone().or(otherwise.map(str::to_owned)),
            decided_by: o.decided_by.clone(),
        }
    }
}
