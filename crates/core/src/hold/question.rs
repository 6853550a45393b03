//! Questions: a multiple-choice question for a person, options only. What a question must be
//! (read from untrusted JSON), the hold it raises and the decisions it offers, what each
//! decision does, and the option that applies when nobody answers.

use std::collections::HashSet;

use holdpoint_protocol::{
    ChosenOption, Deadline, DecideOutcome, Decision, DecisionKind, EventPayload, Hold, HoldSpec,
    HoldStatus, OnTimeout, Outcome, OutcomeStatus, PendingAnswer, Principal, QuestionOption,
    QuestionRequest, QuestionSpec, Source, Timestamp,
};
use serde_json::Value;

use super::build::HoldContext;
use super::machine::{
    Decided, Transition, check_reason, next, not_offered, outcome, person_resolution,
};
use super::validate::{check_json_size, check_name, check_optional_text};
use crate::error::{EngineError, ValidationError};
use crate::limits::Limits;
use crate::roles;

const QUESTION_FIELDS: &[&str] = &[
    "tool_call_id",
    "question",
    "options",
    "multiple",
    "confirm",
    "default_option",
    "context",
    "deadline",
];
const OPTION_FIELDS: &[&str] = &["id", "label", "description"];
const FREE_TEXT_HINTS: &[&str] = &[
    "free_text",
    "allow_free_text",
    "freeform",
    "free_form",
    "freetext",
    "text_input",
    "allow_other",
    "other",
    "input",
    "placeholder",
    "answer",
    "text",
    "type",
    "multiline",
];
const OPTIONS_ONLY: &str =
    "questions are options-only: free-text answers are not supported; offer the choices as options";

/// Reads a question from untrusted JSON (an LLM's tool call, an API body), refusing free-text
/// answer fields with a clear error.
pub fn parse_question(value: &Value) -> Result<QuestionRequest, ValidationError> {
    let Some(obj) = value.as_object() else {
        return Err(ValidationError::new("", "a question must be a JSON object"));
    };
    for key in obj.keys() {
        if !QUESTION_FIELDS.contains(&key.as_str()) {
            return Err(unknown_field(key, "", QUESTION_FIELDS));
        }
    }
    if let Some(Value::Array(options)) = obj.get("options") {
        for (i, o) in options.iter().enumerate() {
            if let Some(o) = o.as_object()
                && let Some(key) = o.keys().find(|k| !OPTION_FIELDS.contains(&k.as_str()))
            {
                return Err(unknown_field(key, &format!("options[{i}]"), OPTION_FIELDS));
            }
        }
    }
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        ValidationError::new(
            if path == "." { String::new() } else { path },
            e.inner().to_string(),
        )
    })
}

fn unknown_field(key: &str, at: &str, allowed: &[&str]) -> ValidationError {
    let field = if at.is_empty() {
        key.to_owned()
    } else {
        format!("{at}.{key}")
    };
    if FREE_TEXT_HINTS.contains(&key.to_ascii_lowercase().as_str()) {
        ValidationError::new(field, OPTIONS_ONLY)
    } else {
        ValidationError::new(
            field,
            format!("unknown field; allowed fields are {}", allowed.join(", ")),
        )
    }
}

/// Checks a question and returns what the hold will show.
pub fn validate_question(
    req: &QuestionRequest,
    limits: &Limits,
) -> Result<QuestionSpec, ValidationError> {
    check_name("question", &req.question, limits.question)?;
    if let Some(id) = &req.tool_call_id {
        check_name("tool_call_id", id, limits.name)?;
    }
    if req.options.is_empty() {
        return Err(ValidationError::new(
            "options",
            format!("give at least one option ({OPTIONS_ONLY})"),
        ));
    }
    if req.options.len() > limits.options {
        return Err(ValidationError::new(
            "options",
            format!(
                "{} options given; at most {} are allowed",
                req.options.len(),
                limits.options
            ),
        ));
    }
    let mut ids = HashSet::new();
    for (i, o) in req.options.iter().enumerate() {
        // The option's place is spelled only for an error: every hold raised passes here.
        check_option(o, &mut ids, limits).map_err(|e| e.within(&format!("options[{i}]")))?;
    }
    if let Some(d) = &req.default_option
        && !ids.contains(d.as_str())
    {
        return Err(ValidationError::new(
            "default_option",
            format!(
                "{d:?} is not one of the options ({})",
                req.options
                    .iter()
                    .map(|o| o.id.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ));
    }
    if let Some(ctx) = &req.context {
        check_json_size("context", &Value::Object(ctx.clone()), limits.context)?;
    }
    Ok(QuestionSpec {
        question: req.question.clone(),
        options: req.options.clone(),
        multiple: req.multiple,
        confirm: req.confirm,
        default_option: req.default_option.clone(),
        context: req.context.clone(),
    })
}

/// One option of a question, its fields named within the option (`id`, `label`); `ids` are
/// those of the options before it.
fn check_option<'a>(
    o: &'a QuestionOption,
    ids: &mut HashSet<&'a str>,
    limits: &Limits,
) -> Result<(), ValidationError> {
    check_name("id", &o.id, limits.option_id)?;
    if let Some(c) =
        o.id.chars()
            .find(|c| !(c.is_ascii_alphanumeric() || "_-.:".contains(*c)))
    {
        return Err(ValidationError::new(
            "id",
            format!("{c:?} is not allowed in an option id (letters, digits, _ - . : only)"),
        ));
    }
    if !ids.insert(o.id.as_str()) {
        return Err(ValidationError::new(
            "id",
            format!(
                "{:?} is used by an earlier option; ids must be unique",
                o.id
            ),
        ));
    }
    check_name("label", &o.label, limits.option_label)?;
    check_optional_text(
        "description",
        o.description.as_deref(),
        limits.option_description,
    )
}

/// A question hold. On timeout the question's fail-closed option applies (its default, else
/// an option `no`); without one, nobody chose and no option is applied.
pub fn question_hold(
    ctx: &HoldContext<'_>,
    spec: QuestionSpec,
    tool_call_id: Option<&String>,
    deadline: Deadline,
) -> Hold {
    let on_timeout = match fail_closed_option(&spec) {
        Some(o) => OnTimeout::Choose {
            option: o.id.clone(),
        },
        None => OnTimeout::NoAnswer,
    };
    let offers = if spec.confirm {
        DecisionKind::QUESTION.to_vec()
    } else {
        vec![DecisionKind::Answer, DecisionKind::Cancel]
    };
    let mut hold = ctx.hold(tool_call_id, deadline, HoldSpec::Question(spec));
    hold.on_timeout = on_timeout;
    hold.offers = offers;
    hold
}
/// A person's decision on a question, once [`decide`](super::decide) checked who decides and
/// that the decision is offered.
pub(super) fn decide(
    hold: &Hold,
    q: &QuestionSpec,
    who: &Principal,
    decision: &Decision,
    now: Timestamp,
    limits: &Limits,
) -> Result<Decided, EngineError> {
    match decision {
        Decision::Answer { options } => answer(hold, q, who, options, now),
        Decision::Confirm => confirm(hold, who, now),
        Decision::Cancel { reason } => {
            check_reason(reason.as_ref(), limits)?;
            let mut o = outcome(
                OutcomeStatus::Canceled,
                Source::Person,
                vec![who.name.clone()],
                now,
            );
            o.reason = reason.clone();
            Ok(person_resolution(hold, who, o, now))
        }
        Decision::Approve { .. }
        | Decision::Deny { .. }
        | Decision::DenyStop { .. }
        | Decision::Edit { .. } => Err(not_offered(hold, decision)),
    }
}

/// The option a question falls back to when nobody answers it — no one can be asked, or its
/// deadline passed: its default, else an option with the id `no`. `None`: no option applies
/// (never one nobody chose, such as the first).
pub fn fail_closed_option(q: &QuestionSpec) -> Option<&QuestionOption> {
    let id = q.default_option.as_deref().unwrap_or("no");
    q.options.iter().find(|o| o.id == id)
}

fn chosen_option(option: &QuestionOption) -> ChosenOption {
    ChosenOption {
        id: option.id.clone(),
        label: option.label.clone(),
    }
}

fn chosen(q: &QuestionSpec, ids: &[String]) -> Result<Vec<ChosenOption>, EngineError> {
    if ids.is_empty() {
        return Err(EngineError::invalid(
            "invalid_option",
            "options",
            "choose at least one option",
        ));
    }
    if ids.len() > 1 && !q.multiple {
        return Err(EngineError::invalid(
            "invalid_option",
            "options",
            "this question takes exactly one option",
        ));
    }
    let mut seen = HashSet::new();
    ids.iter()
        .enumerate()
        .map(|(i, id)| {
            if !seen.insert(id) {
                return Err(EngineError::invalid(
                    "invalid_option",
                    format!("options[{i}]"),
                    format!("{id:?} is chosen twice"),
                ));
            }
            let opt = q.options.iter().find(|o| &o.id == id).ok_or_else(|| {
                let valid: Vec<&str> = q.options.iter().map(|o| o.id.as_str()).collect();
                let shown: String = id.chars().take(64).collect();
                EngineError::invalid(
                    "invalid_option",
                    format!("options[{i}]"),
                    format!(
                        "{shown:?} is not an option of this question; choose from {}",
                        valid.join(", ")
                    ),
                )
            })?;
            Ok(chosen_option(opt))
        })
        .collect()
}

fn answer(
    hold: &Hold,
    q: &QuestionSpec,
    who: &Principal,
    ids: &[String],
    now: Timestamp,
) -> Result<Decided, EngineError> {
    if hold.status == HoldStatus::AwaitingConfirm {
        return Err(EngineError::conflict(
            "awaiting_confirm",
            "an answer is waiting for its confirm step: confirm or cancel it",
        ));
    }
    let options = chosen(q, ids)?;
    if q.confirm {
        let answer = PendingAnswer {
            options,
            by: who.name.clone(),
            at: now,
        };
        let mut h = next(hold);
        h.status = HoldStatus::AwaitingConfirm;
        h.pending_answer = Some(answer.clone());
        let t = Transition::new(
            h,
            roles::actor_of(who),
            now,
            EventPayload::HoldAwaitingConfirm { answer },
        );
        return Ok((t, DecideOutcome::AwaitingConfirm));
    }
    let mut o = outcome(
        OutcomeStatus::Answered,
        Source::Person,
        vec![who.name.clone()],
        now,
    );
    o.options = options;
    Ok(person_resolution(hold, who, o, now))
}

fn confirm(hold: &Hold, who: &Principal, now: Timestamp) -> Result<Decided, EngineError> {
    let Some(pending) = hold
        .pending_answer
        .as_ref()
        .filter(|_| hold.status == HoldStatus::AwaitingConfirm)
    else {
        return Err(EngineError::invalid(
            "nothing_to_confirm",
            "action",
            "no answer waits for confirmation: answer the question first",
        ));
    };
    let mut by = vec![pending.by.clone()];
    if pending.by != who.name {
        by.push(who.name.clone());
    }
    let mut o = outcome(OutcomeStatus::Confirmed, Source::Person, by, now);
    o.options = pending.options.clone();
    Ok(person_resolution(hold, who, o, now))
}

/// The fail-closed default for a question (see [`fail_closed`](super::fail_closed)): its
/// fail-closed option, else canceled.
pub(super) fn fail_closed(q: &QuestionSpec, by: Vec<String>, now: Timestamp) -> Outcome {
    let status = if fail_closed_option(q).is_some() {
        OutcomeStatus::Answered
    } else {
        OutcomeStatus::Canceled
    };
    let mut o = outcome(status, Source::Default, by, now);
    o.options = fail_closed_option(q)
        .map(chosen_option)
        .into_iter()
        .collect();
    o
}

/// A question's outcome at its deadline. A question falls to its fail-closed option, whatever
/// an older version stored as `on_timeout` (which could name the first option, one nobody
/// chose); without one, no option is chosen.
pub(super) fn timed_out(q: &QuestionSpec, now: Timestamp) -> Outcome {
    let mut o = outcome(OutcomeStatus::TimedOut, Source::Timeout, Vec::new(), now);
    o.options = fail_closed_option(q)
        .map(chosen_option)
        .into_iter()
        .collect();
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn question(v: Value) -> Result<QuestionSpec, ValidationError> {
        validate_question(&parse_question(&v)?, &Limits::default())
    }

    #[test]
    fn a_valid_question_passes() {
        let spec = question(json!({
            "question": "Deploy?",
            "options": [{"id": "yes", "label": "Deploy"}, {"id": "no", "label": "Abort", "description": "stop"}],
            "confirm": true, "default_option": "no", "context": {"version": "2.1"}
        }))
        .unwrap();
        assert_eq!(spec.options.len(), 2);
        assert!(spec.confirm);
    }

    #[test]
    fn free_text_fields_are_refused_clearly() {
        for v in [
            json!({"question": "Name?", "options": [{"id": "a", "label": "A"}], "free_text": true}),
            json!({"question": "Name?", "options": [{"id": "a", "label": "A", "type": "text"}]}),
        ] {
            let err = question(v).unwrap_err();
            assert!(err.message.contains("options-only"), "{err}");
        }
        let err =
            question(json!({"question": "Q", "options": [{"id": "a", "label": "A"}], "colour": 1}))
                .unwrap_err();
        assert_eq!(err.field, "colour");
        assert!(err.message.contains("allowed fields are"), "{err}");
    }

    #[test]
    fn option_rules_name_the_field() {
        let cases = [
            (
                json!({"question": "Q", "options": []}),
                "options",
                "at least one option",
            ),
            (
                json!({"question": "", "options": [{"id": "a", "label": "A"}]}),
                "question",
                "must not be empty",
            ),
            (
                json!({"question": "Q", "options": [{"id": "a", "label": "A"}, {"id": "a", "label": "B"}]}),
                "options[1].id",
                "unique",
            ),
            (
                json!({"question": "Q", "options": [{"id": "a b", "label": "A"}]}),
                "options[0].id",
                "not allowed",
            ),
            (
                json!({"question": "Q", "options": [{"id": "a", "label": ""}]}),
                "options[0].label",
                "must not be empty",
            ),
            (
                json!({"question": "Q", "options": [{"id": "a", "label": "A"}], "default_option": "z"}),
                "default_option",
                "not one of the options",
            ),
            (
                json!({"question": "Q", "options": [{"id": "a"}]}),
                "options[0]",
                "missing field `label`",
            ),
            (
                json!({"question": "Q", "options": "a,b"}),
                "options",
                "invalid type",
            ),
            (
                json!({"question": "Q\u{1b}[2J", "options": [{"id": "a", "label": "A"}]}),
                "question",
                "control characters",
            ),
        ];
        for (v, field, msg) in cases {
            let err = question(v.clone()).unwrap_err();
            assert_eq!(err.field, field, "{v}: {err}");
            assert!(err.message.contains(msg), "{v}: {err}");
        }
    }

    #[test]
    fn sizes_are_bounded() {
        let many: Vec<Value> = (0..51)
            .map(|i| json!({"id": format!("o{i}"), "label": "x"}))
            .collect();
        let err = question(json!({"question": "Q", "options": many})).unwrap_err();
        assert!(err.message.contains("at most 50"), "{err}");
        let big = "x".repeat(9000);
        assert_eq!(
            question(json!({"question": big, "options": [{"id": "a", "label": "A"}]}))
                .unwrap_err()
                .field,
            "question"
        );
    }
}
