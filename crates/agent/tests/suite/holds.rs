use std::time::Duration;

use holdpoint_core::Scope;
use holdpoint_protocol::{
    Actor, ApproveScope, CallState, Decision, EventPayload, HoldStatus, Role, Source, TurnStatus,
};
use holdpoint_test_support::llm::{Step, call};
use holdpoint_test_support::{approver, next_matching};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::{Harness, by, next_hold, turn_end};

const ASK_ALL: &str = "mode = \"manual\"";

fn approve(scope: ApproveScope) -> Decision {
    Decision::Approve {
        scope,
        expires_in: None,
        digest: None,
        reason: None,
    }
}

fn lines(path: &std::path::Path) -> usize {
    std::fs::read_to_string(path)
        .map(|s| s.lines().count())
        .unwrap_or(0)
}

#[tokio::test]
async fn approve_once_runs_the_tool_once_and_the_llm_gets_its_output() {
    let h = Harness::new(
        ASK_ALL,
        vec![
            Step::calls(vec![call(
                "c1",
                "shell_cmd",
                json!({"command": "echo ran >> runs.txt; echo out"}),
            )]),
            Step::text("All done."),
        ],
    )
    .await;
    let mut events = h.events().await;
    let turn = h.send("run it").await;
    let hold = next_hold(&mut events).await;
    assert_eq!(
        (hold.tool_call_id.as_deref(), hold.chat.as_deref()),
        (Some("c1"), Some(h.chat.id.to_string().as_str()))
    );
    assert_eq!(
        lines(&h.world_dir().join("runs.txt")),
        0,
        "nothing runs before the decision"
    );
    h.decide(&hold, approve(ApproveScope::Once)).await;
    let done = turn_end(&h.rt, &mut events, turn.id).await;
    assert_eq!(done.status, TurnStatus::Finished);
    assert_eq!(
        lines(&h.world_dir().join("runs.txt")),
        1,
        "ran exactly once"
    );
    let second = &h.llm.requests()[1];
    let result = second.tool_result("c1").unwrap();
    assert_eq!(
        (result["status"].clone(), result["approved_by"].clone()),
        (json!("executed"), json!("person"))
    );
    assert_eq!(result["output"]["stdout"], "out\n");
    assert_eq!(result["output"]["exit_code"], 0);
    // The LLM saw its own call, then exactly one result for it, and nothing else of ours.
    let roles: Vec<String> = second
        .messages()
        .iter()
        .map(|m| m["role"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(roles, vec!["system", "user", "assistant", "tool"]);
}

#[tokio::test]
async fn deny_with_a_reason_tells_the_llm_and_the_turn_goes_on() {
    let h = Harness::new(
        ASK_ALL,
        vec![
            Step::calls(vec![call("c1", "shell_cmd", json!({"command": "touch x"}))]),
            Step::text("Understood."),
        ],
    )
    .await;
    let mut events = h.events().await;
    let turn = h.send("go").await;
    let hold = next_hold(&mut events).await;
    h.decide(
        &hold,
        Decision::Deny {
            reason: Some("not on a Friday".into()),
        },
    )
    .await;
    let done = turn_end(&h.rt, &mut events, turn.id).await;
    assert_eq!(done.status, TurnStatus::Finished);
    let result = h.llm.requests()[1].tool_result("c1").unwrap();
    assert_eq!(
        result,
        json!({"status": "denied_by_person", "reason": "not on a Friday", "decided_by": ["alice"]})
    );
    assert!(!h.world_dir().join("x").exists());
}

#[tokio::test]
async fn deny_and_stop_ends_the_turn_without_calling_the_llm_again() {
    let h = Harness::new(
        ASK_ALL,
        vec![
            Step::calls(vec![call("c1", "shell_cmd", json!({"command": "touch x"}))]),
            Step::text("after"),
        ],
    )
    .await;
    let mut events = h.events().await;
    let turn = h.send("go").await;
    let hold = next_hold(&mut events).await;
    h.decide(
        &hold,
        Decision::DenyStop {
            reason: Some("stop".into()),
        },
    )
    .await;
    let done = turn_end(&h.rt, &mut events, turn.id).await;
    assert_eq!(done.status, TurnStatus::Stopped);
    assert_eq!(h.llm.requests().len(), 1, "the LLM is not called again");
    // The conversation stays whole: the next message carries the call's result.
    let next = h.send("and now?").await;
    turn_end(&h.rt, &mut events, next.id).await;
    let result = h.llm.requests()[1].tool_result("c1").unwrap();
    assert_eq!(result["status"], "denied_by_person");
}

#[tokio::test]
async fn a_stop_and_the_withdrawal_of_the_rest_of_the_batch_are_the_deciders() {
    let h = Harness::new(
        ASK_ALL,
        vec![Step::calls(vec![
            call("c1", "shell_cmd", json!({"command": "touch x"})),
            call("c2", "shell_cmd", json!({"command": "touch y"})),
        ])],
    )
    .await;
    let mut events = h.events().await;
    let turn = h.send("go").await;
    let raised = [next_hold(&mut events).await, next_hold(&mut events).await];
    let [first, rest] = ["c1", "c2"].map(|call| {
        raised
            .iter()
            .find(|hold| hold.tool_call_id.as_deref() == Some(call))
            .unwrap()
            .clone()
    });
    h.decide(
        &first,
        Decision::DenyStop {
            reason: Some("stop".into()),
        },
    )
    .await;
    let stopped = next_matching(
        &mut events,
        "the turn stopped",
        |e| matches!(&e.payload, EventPayload::TurnStopped { turn: t } if *t == turn.id),
    )
    .await;

    let alice = Actor {
        source: Source::Person,
        name: Some("alice".into()),
        role: Some(Role::Approver),
        via: None,
    };
    assert_eq!(stopped.actor, alice);
    let history = h.engine.history(rest.id, &Scope::any()).await.unwrap();
    let withdrawn = history.last().unwrap();
    let EventPayload::HoldWithdrawn { outcome } = &withdrawn.payload else {
        panic!(
            "the rest of the batch is withdrawn: {:?}",
            withdrawn.payload
        );
    };
    assert_eq!(withdrawn.actor, alice);
    assert_eq!(
        (outcome.source, outcome.decided_by.clone()),
        (Source::Person, vec!["alice".to_owned()])
    );
}

#[tokio::test]
async fn an_allowed_call_runs_at_once_and_results_come_back_in_call_order() {
    let policy = "[[rules]]\ntools = [\"read_file\"]\naction = \"allow\"";
    let h = Harness::new(
        policy,
        vec![
            Step::calls(vec![
                call("c1", "shell_cmd", json!({"command": "echo held"})),
                call("c2", "read_file", json!({"path": "notes.txt"})),
            ]),
            Step::text("ok"),
        ],
    )
    .await;
    std::fs::write(h.world_dir().join("notes.txt"), "remember").unwrap();
    let mut events = h.events().await;
    let turn = h.send("read and run").await;
    let hold = next_hold(&mut events).await;
    let finished = next_matching(&mut events, "the allowed call's result", |e| {
        e.payload.type_name() == "turn.tool_finished"
    })
    .await;
    assert!(
        matches!(&finished.payload, EventPayload::TurnToolFinished { call, .. } if call == "c2"),
        "ran before the decision"
    );
    // The call's result and state are saved with the event that reports it.
    let mid = h.rt.turn(turn.id).await.unwrap();
    assert_eq!(
        mid.calls.iter().map(|c| c.state).collect::<Vec<_>>(),
        vec![CallState::Held, CallState::Done]
    );
    h.decide(&hold, approve(ApproveScope::Once)).await;
    turn_end(&h.rt, &mut events, turn.id).await;
    let second = &h.llm.requests()[1];
    let tools: Vec<String> = second
        .messages()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["tool_call_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(tools, vec!["c1", "c2"]);
    assert_eq!(
        second.tool_result("c2").unwrap()["output"]["content"],
        "remember"
    );
    assert_eq!(second.tool_result("c2").unwrap()["approved_by"], "policy");
    let started = h.engine.history(hold.id, &Scope::any()).await.unwrap();
    assert_eq!(started.len(), 2, "one hold for the held call only");
}

#[tokio::test]
async fn a_deadline_applies_the_configured_outcome_and_the_llm_is_told() {
    let h = Harness::new(
        "default_deadline = \"10m\"",
        vec![
            Step::calls(vec![call("c1", "shell_cmd", json!({"command": "touch x"}))]),
            Step::text("ok"),
        ],
    )
    .await;
    let mut events = h.events().await;
    let turn = h.send("go").await;
    let hold = next_hold(&mut events).await;
    h.clock.advance(Duration::from_secs(601));
    turn_end(&h.rt, &mut events, turn.id).await;
    assert_eq!(
        h.engine.hold(hold.id, &Scope::any()).await.unwrap().status,
        HoldStatus::TimedOut
    );
    assert_eq!(
        h.llm.requests()[1].tool_result("c1").unwrap(),
        json!({"status": "timed_out", "applied": "deny"})
    );
    assert!(!h.world_dir().join("x").exists());
}

#[tokio::test]
async fn edited_arguments_are_what_runs_and_the_llm_is_told_so() {
    let policy = "[[rules]]\nname = \"no secrets\"\ntools = [\"write_file\"]\naction = \"deny\"\nargs = [{ pointer = \"/path\", prefix = \"secret\" }]";
    let h = Harness::new(
        policy,
        vec![
            Step::calls(vec![call(
                "c1",
                "write_file",
                json!({"path": "a.txt", "content": "old"}),
            )]),
            Step::text("ok"),
        ],
    )
    .await;
    let mut events = h.events().await;
    let turn = h.send("write").await;
    let hold = next_hold(&mut events).await;
    let edit = |args| Decision::Edit {
        arguments: args,
        reason: None,
    };
    let alice = approver("alice");
    let err = h
        .engine
        .decide(
            &alice,
            hold.id,
            edit(json!({"path": 5, "content": "x"})),
            &Scope::any(),
            None,
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), "invalid_arguments", "{err}");
    let err = h
        .engine
        .decide(
            &alice,
            hold.id,
            edit(json!({"path": "secret.txt", "content": "x"})),
            &Scope::any(),
            None,
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), "edit_denied", "{err}");
    h.decide(&hold, edit(json!({"path": "b.txt", "content": "new"})))
        .await;
    turn_end(&h.rt, &mut events, turn.id).await;
    assert!(!h.world_dir().join("a.txt").exists());
    assert_eq!(
        std::fs::read_to_string(h.world_dir().join("b.txt")).unwrap(),
        "new"
    );
    let result = h.llm.requests()[1].tool_result("c1").unwrap();
    assert_eq!(
        result["arguments"],
        json!({"path": "b.txt", "content": "new"}),
        "the LLM is told which arguments ran"
    );
}

#[tokio::test]
async fn approve_for_this_chat_skips_the_same_call_later_in_the_chat_only() {
    let same = || Step::calls(vec![call("c", "shell_cmd", json!({"command": "echo hi"}))]);
    let h = Harness::new(
        ASK_ALL,
        vec![
            same(),
            Step::text("1"),
            same(),
            Step::text("2"),
            same(),
            Step::text("3"),
        ],
    )
    .await;
    let mut events = h.events().await;
    let first = h.send("one").await;
    let hold = next_hold(&mut events).await;
    h.decide(&hold, approve(ApproveScope::Chat)).await;
    turn_end(&h.rt, &mut events, first.id).await;
    let second = h.send("two").await;
    let done = turn_end(&h.rt, &mut events, second.id).await;
    assert_eq!(done.status, TurnStatus::Finished);
    assert_eq!(
        h.llm.requests()[3].tool_result("c").unwrap()["approved_by"],
        "grant"
    );
    let other = h.new_chat().await;
    let third =
        h.rt.send_message(&by(), h.world.id, other.id, "three")
            .await
            .unwrap();
    let held = next_hold(&mut events).await;
    assert_eq!(
        held.chat.as_deref(),
        Some(other.id.to_string().as_str()),
        "another chat asks again"
    );
    h.decide(&held, approve(ApproveScope::Once)).await;
    turn_end(&h.rt, &mut events, third.id).await;
}

#[tokio::test]
async fn a_message_while_a_hold_is_pending_is_refused() {
    let h = Harness::new(
        ASK_ALL,
        vec![
            Step::calls(vec![call("c1", "shell_cmd", json!({"command": "true"}))]),
            Step::text("ok"),
        ],
    )
    .await;
    let mut events = h.events().await;
    let turn = h.send("go").await;
    let hold = next_hold(&mut events).await;
    let err =
        h.rt.send_message(&by(), h.world.id, h.chat.id, "another")
            .await
            .unwrap_err();
    assert_eq!(err.code(), "chat_locked");
    assert!(err.to_string().contains("decide it"), "{err}");
    h.decide(&hold, approve(ApproveScope::Once)).await;
    turn_end(&h.rt, &mut events, turn.id).await;
    h.send("now it is fine").await;
}

#[tokio::test]
async fn cancelling_a_waiting_turn_withdraws_its_holds() {
    let h = Harness::new(
        ASK_ALL,
        vec![
            Step::calls(vec![call("c1", "shell_cmd", json!({"command": "true"}))]),
            Step::text("later"),
        ],
    )
    .await;
    let mut events = h.events().await;
    let turn = h.send("go").await;
    let hold = next_hold(&mut events).await;
    let canceled = h.rt.cancel_turn(&by(), h.world.id, turn.id).await.unwrap();
    assert_eq!(canceled.status, TurnStatus::Canceled);
    let stored = h.engine.hold(hold.id, &Scope::any()).await.unwrap();
    assert_eq!(stored.status, HoldStatus::Canceled);
    // The withdrawal is recorded as the person who cancelled the turn.
    let outcome = stored.outcome.unwrap();
    assert_eq!(
        (outcome.source, outcome.decided_by),
        (holdpoint_protocol::Source::Person, vec!["root".to_owned()])
    );
    let err = h
        .engine
        .decide(
            &approver("alice"),
            hold.id,
            approve(ApproveScope::Once),
            &Scope::any(),
            None,
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), "already_decided");
    assert_eq!(
        h.rt.cancel_turn(&by(), h.world.id, turn.id)
            .await
            .unwrap_err()
            .code(),
        "turn_finished"
    );
    let next = h.send("again").await;
    turn_end(&h.rt, &mut events, next.id).await;
    assert_eq!(
        h.llm.requests()[1].tool_result("c1").unwrap(),
        json!({"status": "not_executed", "reason": "the turn was canceled"})
    );
}

#[tokio::test]
async fn a_policy_denial_names_its_rule_once() {
    let policy = "[[rules]]\ntools = [\"write_file\"]\naction = \"deny\"\n\n[[rules]]\nname = \"no secrets\"\ntools = [\"read_file\"]\naction = \"deny\"";
    let h = Harness::new(
        policy,
        vec![
            Step::calls(vec![
                call("c1", "write_file", json!({"path": "a.txt", "content": "x"})),
                call("c2", "read_file", json!({"path": "a.txt"})),
            ]),
            Step::text("ok"),
        ],
    )
    .await;
    let mut events = h.events().await;
    let turn = h.send("write").await;
    assert_eq!(
        turn_end(&h.rt, &mut events, turn.id).await.status,
        TurnStatus::Finished
    );
    let second = &h.llm.requests()[1];
    let rules: Vec<Value> = ["c1", "c2"]
        .iter()
        .map(|id| {
            let r = second.tool_result(id).unwrap();
            assert_eq!(r["status"], "denied_by_policy");
            r["rule"].clone()
        })
        .collect();
    assert_eq!(rules, vec![json!("rules[0]"), json!("rule \"no secrets\"")]);
}
