use std::sync::Arc;

use holdpoint_core::policy::Policy;
use holdpoint_core::{EngineError, Scope};
use holdpoint_protocol::{ApproveScope, Decision, GateResult, OutcomeStatus};
use holdpoint_test_support::{TestEngine, agent, approval, approver, gate};
use serde_json::json;
use tokio::sync::Barrier;

/// 32 people decide the same hold at the same moment: one wins; the other 31 are told it is
/// already decided and shown the winning decision.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn thirty_two_racing_decisions_have_one_winner() {
    let t = TestEngine::new(Policy::default()).await;
    let res = t
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
    let id = hold.id;
    let start = Arc::new(Barrier::new(32));
    let mut tasks = Vec::new();
    for i in 0..32 {
        let (engine, start) = (t.engine.clone(), start.clone());
        tasks.push(tokio::spawn(async move {
            let decision = if i % 2 == 0 {
                Decision::Approve {
                    scope: ApproveScope::Once,
                    expires_in: None,
                    digest: None,
                    reason: Some(format!("from {i}")),
                }
            } else {
                Decision::Deny {
                    reason: Some(format!("from {i}")),
                }
            };
            start.wait().await;
            engine
                .decide(
                    &approver(&format!("person-{i}")),
                    id,
                    decision,
                    &Scope::any(),
                    None,
                )
                .await
        }));
    }
    let mut winners = Vec::new();
    let mut losers = Vec::new();
    for task in tasks {
        match task.await.unwrap() {
            Ok(r) => winners.push(r.hold.outcome.unwrap()),
            Err(EngineError::AlreadyDecided { hold }) => losers.push(hold.outcome.unwrap()),
            Err(e) => panic!("unexpected {e:?}"),
        }
    }
    assert_eq!((winners.len(), losers.len()), (1, 31));
    let winner = &winners[0];
    assert!(
        losers.iter().all(|l| l == winner),
        "every loser sees the winning decision"
    );
    let stored = t
        .engine
        .hold(id, &Scope::any())
        .await
        .unwrap()
        .outcome
        .unwrap();
    assert_eq!(&stored, winner);
    assert!(matches!(
        stored.status,
        OutcomeStatus::Approved | OutcomeStatus::Denied
    ));
    let history = t.engine.history(id, &Scope::any()).await.unwrap();
    assert_eq!(
        history
            .iter()
            .filter(|e| e.payload.resolution().is_some())
            .count(),
        1,
        "one decision recorded"
    );
    t.engine.verify_audit().await.unwrap().unwrap();
}
