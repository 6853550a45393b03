//! The menu model: what a hold offers, as numbered choices, and what a person's input picks.
//! Pure: no terminal and no server, so every menu can be tested as data.

use holdpoint_protocol::{
    ApproveScope, DecideOutcome, DecideResult, Decision, DecisionKind, Hold, HoldSpec, QuestionSpec,
};

use crate::present;
use crate::terminal::safe::clean_line as clean_line_of;

/// One line of a menu.
#[derive(Clone, Debug, PartialEq)]
pub enum Choice {
    Approve(ApproveScope),
    Deny,
    DenyStop,
    Edit,
    /// A question's option, by id.
    Option(String),
    Cancel,
}

impl Choice {
    pub fn label(&self, hold: &Hold) -> String {
        match self {
            Choice::Approve(ApproveScope::Once) => "approve once".into(),
            Choice::Approve(ApproveScope::Chat) => "approve for this chat".into(),
            Choice::Approve(ApproveScope::AlwaysArgs) => {
                "approve always (these exact arguments)".into()
            }
            Choice::Approve(ApproveScope::AlwaysTool) => {
                "approve always (this tool, any arguments)".into()
            }
            Choice::Deny => "deny, with a reason".into(),
            Choice::DenyStop => "deny and stop the turn".into(),
            Choice::Edit => "edit the arguments, then approve once".into(),
            Choice::Option(id) => option_label(hold, id),
            Choice::Cancel => "cancel the question".into(),
        }
    }
}

fn option_label(hold: &Hold, id: &str) -> String {
    let q = match &hold.spec {
        HoldSpec::Question(q) => q,
        HoldSpec::Approval(_) => return id.to_owned(),
    };
    let Some(o) = q.options.iter().find(|o| o.id == id) else {
        return id.to_owned();
    };
    let mut label = clean_line_of(&o.label);
    if let Some(d) = &o.description {
        label.push_str(&format!(" — {}", clean_line_of(d)));
    }
    if q.default_option.as_deref() == Some(id) {
        label.push_str(" (default)");
    }
    label
}

/// The menu of a hold: exactly what it offers, in a fixed order.
pub fn menu(hold: &Hold) -> Vec<Choice> {
    let offers = |k: DecisionKind| hold.offers.contains(&k);
    match &hold.spec {
        HoldSpec::Approval(_) => [
            (
                DecisionKind::ApproveOnce,
                Choice::Approve(ApproveScope::Once),
            ),
            (
                DecisionKind::ApproveChat,
                Choice::Approve(ApproveScope::Chat),
            ),
            (
                DecisionKind::ApproveAlwaysArgs,
                Choice::Approve(ApproveScope::AlwaysArgs),
            ),
            (
                DecisionKind::ApproveAlwaysTool,
                Choice::Approve(ApproveScope::AlwaysTool),
            ),
            (DecisionKind::Deny, Choice::Deny),
            (DecisionKind::DenyStop, Choice::DenyStop),
            (DecisionKind::Edit, Choice::Edit),
        ]
        .into_iter()
        .filter(|(k, _)| offers(*k))
        .map(|(_, c)| c)
        .collect(),
        HoldSpec::Question(q) => {
            let mut items: Vec<Choice> = if offers(DecisionKind::Answer) {
                q.options
                    .iter()
                    .map(|o| Choice::Option(o.id.clone()))
                    .collect()
            } else {
                Vec::new()
            };
            if offers(DecisionKind::Cancel) {
                items.push(Choice::Cancel);
            }
            items
        }
    }
}

/// Whether the hold is among those "decide all" decides: approvals, which one decision fits.
pub fn decided_together(hold: &Hold) -> bool {
    match &hold.spec {
        HoldSpec::Approval(_) => true,
        HoldSpec::Question(_) => false,
    }
}

/// The "decide all" menu of a batch's open approvals: one decision for all of them, as far as
/// every one offers it, and always the way back to deciding one by one (`None`).
pub fn batch_menu(approvals: &[&Hold]) -> Vec<(&'static str, Option<Decision>)> {
    let common = |k: DecisionKind| approvals.iter().all(|h| h.offers.contains(&k));
    let mut items: Vec<(&str, Option<Decision>)> = Vec::new();
    if common(DecisionKind::ApproveOnce) {
        items.push((
            "approve all once",
            Some(Decision::Approve {
                scope: ApproveScope::Once,
                expires_in: None,
                digest: None,
                reason: None,
            }),
        ));
    }
    if common(DecisionKind::Deny) {
        items.push(("deny all", Some(Decision::Deny { reason: None })));
    }
    if common(DecisionKind::DenyStop) {
        items.push((
            "deny all and stop the turn",
            Some(Decision::DenyStop { reason: None }),
        ));
    }
    items.push(("decide one by one", None));
    items
}

/// Reads menu input: one number from 1 to `n`, or several separated by commas where
/// `several` is allowed. The error says what to type.
pub fn parse_choice(input: &str, n: usize, several: bool) -> Result<Vec<usize>, String> {
    let expected = if several {
        format!("type a number from 1 to {n}, or several separated by commas")
    } else {
        format!("type a number from 1 to {n}")
    };
    let parts: Vec<&str> = input
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect();
    if parts.is_empty() || (parts.len() > 1 && !several) {
        return Err(format!(
            "{:?} is not one of the choices: {expected}",
            present::short(input, 40)
        ));
    }
    let mut picked = Vec::new();
    for p in parts {
        match p.parse::<usize>() {
            Ok(i) if (1..=n).contains(&i) && !picked.contains(&(i - 1)) => picked.push(i - 1),
            _ => {
                return Err(format!(
                    "{:?} is not one of the choices: {expected}",
                    present::short(p, 40)
                ));
            }
        }
    }
    Ok(picked)
}

pub fn result_text(r: &DecideResult) -> String {
    match r.result {
        DecideOutcome::VoteRecorded => format!(
            "approval recorded ({} of {} needed)",
            r.hold.votes.len(),
            r.hold.quorum
        ),
        DecideOutcome::AwaitingConfirm => "chosen; waiting for confirmation".to_owned(),
        _ => r
            .hold
            .outcome
            .as_ref()
            .map(present::outcome)
            .unwrap_or_default(),
    }
}

/// A question's options, for the `answer` command's help and errors.
pub fn option_ids(q: &QuestionSpec) -> String {
    q.options
        .iter()
        .map(|o| clean_line_of(&o.id))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn hold(spec: Value, offers: &[&str]) -> Hold {
        serde_json::from_value(json!({
            "id": "0193c2a4-5b1e-7f00-8a1c-3d2e4f5a6b7c",
            "batch": "0193c2a4-5b1e-7f00-8a1c-3d2e4f5a6b7d",
            "world": "lab",
            "requested_by": "agent:helper",
            "created_at": "2026-01-01T00:00:00.000Z",
            "deadline": null,
            "on_timeout": {"action": "deny"},
            "quorum": 1,
            "offers": offers,
            "spec": spec,
            "status": "pending",
            "version": 1
        }))
        .unwrap()
    }

    fn approval(offers: &[&str]) -> Hold {
        hold(
            json!({"kind": "approval", "tool": "shell_cmd", "arguments": {"cmd": "ls"}, "digest": "d"}),
            offers,
        )
    }

    #[test]
    fn a_menu_shows_what_the_hold_offers_in_a_fixed_order() {
        let h = approval(&["edit", "deny", "approve_once"]);
        assert_eq!(
            menu(&h),
            vec![
                Choice::Approve(ApproveScope::Once),
                Choice::Deny,
                Choice::Edit
            ]
        );
        let q = hold(
            json!({"kind": "question", "question": "Deploy?", "default_option": "no",
                   "options": [{"id": "yes", "label": "Deploy"}, {"id": "no", "label": "Wait", "description": "until Monday"}]}),
            &["cancel", "answer"],
        );
        let items = menu(&q);
        assert_eq!(
            items,
            vec![
                Choice::Option("yes".into()),
                Choice::Option("no".into()),
                Choice::Cancel
            ]
        );
        let labels: Vec<String> = items.iter().map(|c| c.label(&q)).collect();
        assert_eq!(
            labels,
            [
                "Deploy",
                "Wait — until Monday (default)",
                "cancel the question"
            ]
        );
    }

    #[test]
    fn decide_all_offers_only_what_every_approval_offers() {
        let (a, b) = (
            approval(&["approve_once", "deny", "deny_stop"]),
            approval(&["approve_once", "deny"]),
        );
        let labels: Vec<&str> = batch_menu(&[&a, &b]).into_iter().map(|(l, _)| l).collect();
        assert_eq!(
            labels,
            ["approve all once", "deny all", "decide one by one"]
        );
    }

    #[test]
    fn menu_input_is_checked() {
        assert_eq!(parse_choice("2", 3, false), Ok(vec![1]));
        assert_eq!(parse_choice(" 3 ", 3, false), Ok(vec![2]));
        assert_eq!(parse_choice("1, 3", 3, true), Ok(vec![0, 2]));
        for bad in ["", "0", "4", "x", "1,2", "-1", "1.5"] {
            let e = parse_choice(bad, 3, false).unwrap_err();
            assert!(e.contains("type a number from 1 to 3"), "{bad}: {e}");
        }
        assert!(parse_choice("1,1", 3, true).is_err());
    }
}
