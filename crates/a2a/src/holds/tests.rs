#![allow(clippy::unwrap_used)]

use super::*;

fn approval(id: &str, call: &str) -> Hold {
    serde_json::from_value(json!({
        "id": id, "batch": holdpoint_protocol::BatchId::random(), "world": "w", "tool_call_id": call,
        "requested_by": "bot", "created_at": "2026-11-26T00:00:00Z", "deadline": null,
        "on_timeout": {"action": "deny"}, "quorum": 1,
        "offers": ["approve_once", "deny"],
        "spec": {"kind": "approval", "tool": "transfer", "arguments": {"amount": 5}, "digest": "sha256:abc"},
        "status": "pending", "version": 1
    }))
    .unwrap()
}

fn ids() -> (String, String) {
    let a = HoldId::random().to_string();
    let b = HoldId::random().to_string();
    (a, b)
}

#[test]
fn the_status_message_carries_adk_kagent_and_holdpoint_shapes() {
    let (a, _) = ids();
    let holds = [approval(&a, "call_1")];
    let (parts, metadata) = held_parts(&holds);
    assert_eq!(metadata["interrupt_type"], "tool_approval");
    let adk = parts
        .iter()
        .find_map(|p| p.data.as_ref().filter(|d| d["name"] == ADK_CONFIRMATION))
        .unwrap();
    assert_eq!(adk["id"], format!("adk-{a}"));
    assert_eq!(adk["args"]["originalFunctionCall"]["id"], "call_1");
    assert_eq!(adk["args"]["originalFunctionCall"]["args"]["amount"], 5);
    let kagent = parts
        .iter()
        .find_map(|p| {
            p.data
                .as_ref()
                .filter(|d| d["interrupt_type"] == "tool_approval")
        })
        .unwrap();
    assert_eq!(kagent["action_requests"][0]["id"], "call_1");
    let ours = parts
        .iter()
        .find_map(|p| p.data.as_ref().and_then(|d| d.get("holdpoint")))
        .unwrap();
    assert_eq!(ours["holds"][0]["digest"], "sha256:abc");
    assert_eq!(ours["holds"][0]["offers"], json!(["approve_once", "deny"]));
}

#[test]
fn an_adk_confirmation_approves_its_hold_bound_to_the_digest_shown() {
    let (a, b) = ids();
    let holds = [approval(&a, "call_1"), approval(&b, "call_2")];
    let reply = [Part::data(
        json!({"name": ADK_CONFIRMATION, "id": format!("adk-{b}"), "response": {"confirmed": true}}),
    )];
    let decided = reply_decisions(&reply, &holds).unwrap();
    assert_eq!(decided.len(), 1);
    assert_eq!(decided[0].0, Target::Hold(holds[1].id));
    assert!(
        matches!(&decided[0].1, Decision::Approve { digest: Some(d), .. } if d == "sha256:abc")
    );
    let no = [Part::data(
        json!({"name": ADK_CONFIRMATION, "id": format!("adk-{a}"), "response": "{\"confirmed\": false}"}),
    )];
    assert!(matches!(
        reply_decisions(&no, &holds).unwrap()[0].1,
        Decision::Deny { .. }
    ));
}

#[test]
fn kagent_and_seed_shapes_decide_all_or_per_call() {
    let (a, b) = ids();
    let holds = [approval(&a, "call_1"), approval(&b, "call_2")];
    let all = reply_decisions(&[Part::data(json!({"decision_type": "approve"}))], &holds).unwrap();
    assert_eq!(all.len(), 2);
    let deny = reply_decisions(
        &[Part::data(
            json!({"decision_type": "deny", "reason": "too much"}),
        )],
        &holds,
    )
    .unwrap();
    assert!(
        deny.iter()
            .all(|(_, d)| matches!(d, Decision::Deny { reason: Some(r) } if r == "too much"))
    );
    let batch = reply_decisions(
        &[Part::data(json!({"decision_type": "batch", "decisions": {"call_1": "approve", "call_2": "reject"}, "rejection_reasons": {"call_2": "not that one"}}))],
        &holds,
    )
    .unwrap();
    assert!(
        batch
            .iter()
            .any(|(t, d)| *t == Target::Hold(holds[0].id) && matches!(d, Decision::Approve { .. }))
    );
    assert!(batch.iter().any(|(t, d)| *t == Target::Hold(holds[1].id)
        && matches!(d, Decision::Deny { reason: Some(r) } if r == "not that one")));
}

#[test]
fn words_decide_when_no_data_does() {
    let (a, _) = ids();
    let holds = [approval(&a, "call_1")];
    assert!(matches!(
        reply_decisions(&[Part::text("Yes, go ahead")], &holds).unwrap()[0].1,
        Decision::Approve { .. }
    ));
    let denied = reply_decisions(&[Part::text("No: the amount is wrong")], &holds).unwrap();
    assert!(
        matches!(&denied[0].1, Decision::Deny { reason: Some(r) } if r == "the amount is wrong")
    );
}

#[test]
fn replies_that_decide_nothing_or_name_what_is_not_pending_are_refused_by_field() {
    let (a, b) = ids();
    let holds = [approval(&a, "call_1")];
    let e = reply_decisions(&[Part::text("what does it do?")], &holds).unwrap_err();
    assert_eq!(e.field, "message.parts");
    let e = reply_decisions(&[Part::data(json!({"decision_type": "maybe"}))], &holds).unwrap_err();
    assert_eq!(e.field, "message.parts[0].data.decision_type");
    let e = reply_decisions(&[Part::data(json!({"name": ADK_CONFIRMATION, "id": format!("adk-{b}"), "response": {"confirmed": true}}))], &holds).unwrap_err();
    assert_eq!(e.field, "message.parts[0].data.id");
    let e = reply_decisions(
        &[Part::data(
            json!({"holdpoint": {"decisions": [{"hold": a, "decision": {"action": "launch"}}]}}),
        )],
        &holds,
    )
    .unwrap_err();
    assert_eq!(
        e.field,
        "message.parts[0].data.holdpoint.decisions[0].decision"
    );
}
