//! Random interleavings of concurrent decisions, timeouts and cancellations: whatever the
//! order, each hold ends with exactly one recorded outcome, everyone who was told an outcome
//! was told that one, and the audit chain verifies.

use std::time::Duration;

use holdpoint_core::policy::Policy;
use holdpoint_core::{EngineError, Scope};
use holdpoint_protocol::{
    Actor, ApproveScope, DecideOutcome, DecideResult, Decision, GateResult, Hold, HoldRequest,
    HoldSpec, OutcomeStatus, Source,
};
use holdpoint_test_support::{PATIENCE, TestEngine, agent, approval, approver, gate, question};
use proptest::prelude::*;
use serde_json::json;

const POLICY: &str = r#"
default_deadline = "10m"
[[rules]]
name = "two people"
tools = ["quorum"]
action = "ask"
quorum = 2
"#;

#[derive(Debug, Clone)]
enum Op {
    Decide {
        hold: usize,
        person: usize,
        choice: u8,
    },
    Advance {
        secs: u64,
    },
    Withdraw {
        hold: usize,
    },
    CancelTurn,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..4usize, 0..3usize, 0..4u8).prop_map(|(hold, person, choice)| Op::Decide { hold, person, choice }),
        2 => (1..900u64).prop_map(|secs| Op::Advance { secs }),
        1 => (0..4usize).prop_map(|hold| Op::Withdraw { hold }),
        1 => Just(Op::CancelTurn),
    ]
}

fn decision(hold: &Hold, choice: u8) -> Decision {
    match (&hold.spec, choice) {
        (HoldSpec::Approval(_), 0) => Decision::Approve {
            scope: ApproveScope::Once,
            expires_in: None,
            digest: None,
            reason: None,
        },
        (HoldSpec::Approval(_), 1) => Decision::Deny {
            reason: Some("no".into()),
        },
        (HoldSpec::Approval(_), 2) => Decision::DenyStop { reason: None },
        (HoldSpec::Approval(_), _) => Decision::Approve {
            scope: ApproveScope::Chat,
            expires_in: None,
            digest: None,
            reason: None,
        },
        (HoldSpec::Question(_), 0) => Decision::Answer {
            options: vec!["a".into()],
        },
        (HoldSpec::Question(_), 1) => Decision::Confirm,
        (HoldSpec::Question(_), 2) => Decision::Cancel { reason: None },
        (HoldSpec::Question(_), _) => Decision::Answer {
            options: vec!["b".into()],
        },
    }
}

async fn run(kinds: Vec<u8>, ops: Vec<Op>) {
    let t = TestEngine::new(Policy::from_toml(POLICY).unwrap()).await;
    let items: Vec<HoldRequest> = kinds
        .iter()
        .enumerate()
        .map(|(i, k)| match k {
            0 => approval("shell_cmd", json!({ "n": i })),
            1 => approval("quorum", json!({ "n": i })),
            _ => HoldRequest::Question(holdpoint_protocol::QuestionRequest {
                confirm: true,
                ..question("Q", &["a", "b"])
            }),
        })
        .collect();
    let res = t
        .engine
        .gate(&agent("bot"), gate("w", Some("c"), items))
        .await
        .unwrap();
    let holds: Vec<Hold> = res
        .results
        .into_iter()
        .map(|r| match r {
            GateResult::Held { hold } => std::sync::Arc::unwrap_or_clone(hold),
            other => panic!("{other:?}"),
        })
        .collect();

    let mut tasks = Vec::new();
    for op in ops {
        let engine = t.engine.clone();
        let clock = t.clock.clone();
        let holds = holds.clone();
        tasks.push(tokio::spawn(async move {
            match op {
                Op::Decide {
                    hold,
                    person,
                    choice,
                } => {
                    let h = &holds[hold % holds.len()];
                    let r = engine
                        .decide(
                            &approver(&format!("p{person}")),
                            h.id,
                            decision(h, choice),
                            &Scope::any(),
                            None,
                        )
                        .await;
                    Some((h.id, r))
                }
                Op::Advance { secs } => {
                    clock.advance(Duration::from_secs(secs));
                    None
                }
                Op::Withdraw { hold } => {
                    let h = &holds[hold % holds.len()];
                    let _ = engine
                        .withdraw(&agent("bot"), h.id, None, &Scope::any())
                        .await;
                    None
                }
                Op::CancelTurn => {
                    engine
                        .withdraw_batch(
                            holds[0].batch,
                            &Actor::of(Source::System),
                            "turn cancelled",
                        )
                        .await
                        .unwrap();
                    None
                }
            }
        }));
    }
    let mut told: Vec<(
        holdpoint_protocol::HoldId,
        Result<DecideResult, EngineError>,
    )> = Vec::new();
    for task in tasks {
        if let Some(r) = task.await.unwrap() {
            told.push(r);
        }
    }
    // Whatever is still open times out.
    t.clock.advance(Duration::from_secs(86_400));
    for h in &holds {
        let outcome = t.engine.wait(h.id, PATIENCE, &Scope::any()).await.unwrap();
        assert!(outcome.is_some(), "hold {} never resolved", h.id);
    }
    for h in &holds {
        let stored = t.engine.hold(h.id, &Scope::any()).await.unwrap();
        let history = t.engine.history(h.id, &Scope::any()).await.unwrap();
        let resolutions: Vec<_> = history
            .iter()
            .filter_map(|e| e.payload.resolution())
            .collect();
        assert_eq!(
            resolutions.len(),
            1,
            "hold {} has {} outcomes",
            h.id,
            resolutions.len()
        );
        assert_eq!(Some(resolutions[0]), stored.outcome.as_ref());
        let outcome = stored.outcome.clone().unwrap();
        if outcome.status == OutcomeStatus::Approved && h.quorum > 1 {
            let mut by = outcome.decided_by.clone();
            by.dedup();
            assert_eq!(by.len(), 2, "a quorum needs two different people");
        }
        for (id, r) in told.iter().filter(|(id, _)| *id == h.id) {
            match r {
                Ok(r) if r.result == DecideOutcome::Resolved => {
                    assert_eq!(r.hold.outcome.as_ref(), Some(&outcome), "{id}")
                }
                Ok(_) => {}
                Err(EngineError::AlreadyDecided { hold }) => {
                    assert_eq!(hold.outcome.as_ref(), Some(&outcome), "{id}")
                }
                Err(EngineError::Invalid { .. } | EngineError::Conflict { .. }) => {}
                Err(e) => panic!("unexpected error {e:?}"),
            }
        }
    }
    let report = t.engine.verify_audit().await.unwrap().unwrap();
    assert!(report.events >= holds.len() as u64 * 2);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn every_hold_ends_with_exactly_one_outcome(kinds in prop::collection::vec(0..3u8, 1..5), ops in prop::collection::vec(op(), 0..16)) {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        rt.block_on(run(kinds, ops));
    }
}
