//! Two engines on one store behave like two nodes of one service: each follows the other's
//! commits, and what one node remembers of a hold never overrides what the other decided.

use std::sync::Arc;
use std::time::Duration;

use holdpoint_core::policy::Policy;
use holdpoint_core::{Engine, EngineError, Scope};
use holdpoint_protocol::{
    ApproveScope, Decision, GateResult, HoldRequest, OutcomeStatus, QuestionRequest,
};
use holdpoint_test_support::{
    RecordingChannel, TestEngine, agent, approval, approver, gate, question,
};
use pretty_assertions::assert_eq;
use serde_json::json;

async fn second_node(t: &TestEngine) -> Engine {
    Engine::builder(t.temp.dyn_store())
        .clock(t.clock.clone())
        .channel(Arc::new(RecordingChannel::default()))
        .start()
        .await
        .unwrap()
}

#[tokio::test]
async fn a_decision_on_another_node_wins_over_what_this_node_remembers() {
    let a = TestEngine::new(Policy::default()).await;
    let b = second_node(&a).await;
    let res = a
        .engine
        .gate(
            &agent("bot"),
            gate("w", None, vec![approval("deploy", json!({}))]),
        )
        .await
        .unwrap();
    let GateResult::Held { hold } = &res.results[0] else {
        panic!()
    };
    let engine = a.engine.clone();
    let id = hold.id;
    let waiter = tokio::spawn(async move {
        engine
            .wait(id, Duration::from_secs(30), &Scope::any())
            .await
    });

    b.decide(
        &approver("bob"),
        hold.id,
        Decision::Deny {
            reason: Some("from b".into()),
        },
        &Scope::any(),
        None,
    )
    .await
    .unwrap();
    let approve = Decision::Approve {
        scope: ApproveScope::Once,
        expires_in: None,
        digest: None,
        reason: None,
    };
    match a
        .engine
        .decide(&approver("alice"), hold.id, approve, &Scope::any(), None)
        .await
        .unwrap_err()
    {
        EngineError::AlreadyDecided { hold } => {
            assert_eq!(hold.outcome.unwrap().reason.as_deref(), Some("from b"))
        }
        e => panic!("{e:?}"),
    }
    let seen = waiter.await.unwrap().unwrap().unwrap();
    assert_eq!(
        (seen.status, seen.reason.as_deref()),
        (OutcomeStatus::Denied, Some("from b"))
    );
}

#[tokio::test]
async fn a_step_taken_on_another_node_is_not_refused_here() {
    let a = TestEngine::new(Policy::default()).await;
    let b = second_node(&a).await;
    let q = QuestionRequest {
        confirm: true,
        ..question("Ship?", &["yes", "no"])
    };
    let res = a
        .engine
        .gate(
            &agent("bot"),
            gate("w", None, vec![HoldRequest::Question(q)]),
        )
        .await
        .unwrap();
    let GateResult::Held { hold } = &res.results[0] else {
        panic!()
    };
    // B records the answer; A still remembers the question as unanswered.
    b.decide(
        &approver("bob"),
        hold.id,
        Decision::Answer {
            options: vec!["yes".into()],
        },
        &Scope::any(),
        None,
    )
    .await
    .unwrap();
    let r = a
        .engine
        .decide(
            &approver("alice"),
            hold.id,
            Decision::Confirm,
            &Scope::any(),
            None,
        )
        .await
        .unwrap();
    let o = r.hold.outcome.unwrap();
    assert_eq!(
        (o.status, o.decided_by),
        (
            OutcomeStatus::Confirmed,
            vec!["bob".to_owned(), "alice".to_owned()]
        )
    );
}
