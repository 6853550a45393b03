use std::time::Duration;

use holdpoint_core::policy::Policy;
use holdpoint_core::roles;
use holdpoint_core::{EngineError, Scope};
use holdpoint_protocol::{
    ApproveScope, DecideOutcome, Decision, GateResult, Hold, HoldQuery, HoldRequest, Order,
    OutcomeStatus, Principal, Role, Source, StatusFilter, Verdict,
};
use holdpoint_test_support::{TestEngine, agent, approval, approver, gate, question};
use pretty_assertions::assert_eq;
use serde_json::json;

async fn held(t: &TestEngine, world: &str, items: Vec<HoldRequest>) -> Vec<Hold> {
    let res = t
        .engine
        .gate(&agent("bot"), gate(world, Some("c"), items))
        .await
        .unwrap();
    res.results
        .into_iter()
        .map(|r| match r {
            GateResult::Held { hold } => std::sync::Arc::unwrap_or_clone(hold),
            other => panic!("{other:?}"),
        })
        .collect()
}

fn approve() -> Decision {
    Decision::Approve {
        scope: ApproveScope::Once,
        expires_in: None,
        digest: None,
        reason: None,
    }
}

#[tokio::test]
async fn a_decision_wakes_the_waiter_with_the_outcome() {
    let t = TestEngine::new(Policy::default()).await;
    let h = held(&t, "w", vec![approval("deploy", json!({"v": 1}))])
        .await
        .remove(0);
    let engine = t.engine.clone();
    let waiter = tokio::spawn(async move {
        engine
            .wait(h.id, Duration::from_secs(30), &Scope::any())
            .await
    });
    let r = t
        .engine
        .decide(
            &approver("alice"),
            h.id,
            approve(),
            &Scope::world("w"),
            None,
        )
        .await
        .unwrap();
    assert_eq!(r.result, DecideOutcome::Resolved);
    let outcome = waiter.await.unwrap().unwrap().unwrap();
    assert_eq!(Some(&outcome), r.hold.outcome.as_ref());
    assert_eq!(
        (outcome.status, outcome.verdict, outcome.arguments.clone()),
        (
            OutcomeStatus::Approved,
            Some(Verdict::Approve),
            Some(json!({"v": 1}))
        )
    );
    // Waiting on a decided hold returns at once.
    let again = t
        .engine
        .wait(h.id, Duration::from_secs(30), &Scope::any())
        .await
        .unwrap();
    assert_eq!(again, Some(outcome));
}

#[tokio::test]
async fn waiting_times_out_without_deciding() {
    let t = TestEngine::new(Policy::default()).await;
    let h = held(&t, "w", vec![approval("deploy", json!({}))])
        .await
        .remove(0);
    assert_eq!(
        t.engine
            .wait(h.id, Duration::from_millis(20), &Scope::any())
            .await
            .unwrap(),
        None
    );
    assert!(t.engine.hold(h.id, &Scope::any()).await.unwrap().is_open());
}

#[tokio::test]
async fn a_second_decision_gets_the_recorded_one() {
    let t = TestEngine::new(Policy::default()).await;
    let h = held(&t, "w", vec![approval("deploy", json!({}))])
        .await
        .remove(0);
    t.engine
        .decide(
            &approver("alice"),
            h.id,
            Decision::Deny {
                reason: Some("not today".into()),
            },
            &Scope::any(),
            None,
        )
        .await
        .unwrap();
    match t
        .engine
        .decide(&approver("bob"), h.id, approve(), &Scope::any(), None)
        .await
        .unwrap_err()
    {
        EngineError::AlreadyDecided { hold } => {
            let o = hold.outcome.unwrap();
            assert_eq!(
                (o.status, o.decided_by, o.reason.as_deref()),
                (
                    OutcomeStatus::Denied,
                    vec!["alice".to_owned()],
                    Some("not today")
                )
            );
        }
        e => panic!("{e:?}"),
    }
}

#[tokio::test]
async fn a_repeated_idempotency_key_returns_the_same_result() {
    let t = TestEngine::new(Policy::default()).await;
    let h = held(&t, "w", vec![approval("deploy", json!({}))])
        .await
        .remove(0);
    let alice = approver("alice");
    let first = t
        .engine
        .decide(&alice, h.id, approve(), &Scope::any(), Some("k1"))
        .await
        .unwrap();
    let again = t
        .engine
        .decide(&alice, h.id, approve(), &Scope::any(), Some("k1"))
        .await
        .unwrap();
    assert_eq!(first, again);
    let err = t
        .engine
        .decide(
            &alice,
            h.id,
            Decision::Deny { reason: None },
            &Scope::any(),
            Some("k1"),
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), "idempotency_mismatch");
    let err = t
        .engine
        .decide(&alice, h.id, approve(), &Scope::any(), Some("k2"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "already_decided");
    let history = t.engine.history(h.id, &Scope::any()).await.unwrap();
    assert_eq!(
        history
            .iter()
            .map(|e| e.payload.type_name())
            .collect::<Vec<_>>(),
        vec!["hold.created", "hold.decided"]
    );
}

#[tokio::test]
async fn decisions_are_scoped_to_their_world_and_never_taken_from_agents() {
    let t = TestEngine::new(Policy::default()).await;
    let h = held(&t, "w", vec![approval("deploy", json!({}))])
        .await
        .remove(0);
    let err = t
        .engine
        .decide(
            &approver("alice"),
            h.id,
            approve(),
            &Scope::world("other"),
            None,
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), "not_found");
    let err = t
        .engine
        .decide(&agent("bot"), h.id, approve(), &Scope::any(), None)
        .await
        .unwrap_err();
    assert_eq!(err.code(), "forbidden");
    let err = t
        .engine
        .decide(
            &approver("alice"),
            holdpoint_protocol::HoldId::random(),
            approve(),
            &Scope::any(),
            None,
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), "not_found");
    assert!(t.engine.hold(h.id, &Scope::any()).await.unwrap().is_open());
}

#[tokio::test]
async fn questions_confirm_or_cancel() {
    let t = TestEngine::new(Policy::default()).await;
    let mut q = question("Ship it?", &["ship", "wait"]);
    q.confirm = true;
    let holds = held(
        &t,
        "w",
        vec![HoldRequest::Question(q.clone()), HoldRequest::Question(q)],
    )
    .await;
    let alice = approver("alice");
    for (h, last, status) in [
        (&holds[0], Decision::Confirm, OutcomeStatus::Confirmed),
        (
            &holds[1],
            Decision::Cancel { reason: None },
            OutcomeStatus::Canceled,
        ),
    ] {
        let r = t
            .engine
            .decide(
                &alice,
                h.id,
                Decision::Answer {
                    options: vec!["ship".into()],
                },
                &Scope::any(),
                None,
            )
            .await
            .unwrap();
        assert_eq!(r.result, DecideOutcome::AwaitingConfirm);
        assert!(
            t.engine
                .wait(h.id, Duration::from_millis(10), &Scope::any())
                .await
                .unwrap()
                .is_none(),
            "not complete before the confirm step"
        );
        let r = t
            .engine
            .decide(&alice, h.id, last, &Scope::any(), None)
            .await
            .unwrap();
        let o = r.hold.outcome.unwrap();
        assert_eq!(o.status, status);
        assert_eq!(
            o.options.iter().map(|o| o.id.as_str()).collect::<Vec<_>>(),
            if status == OutcomeStatus::Confirmed {
                vec!["ship"]
            } else {
                vec![]
            }
        );
    }
    let err = t
        .engine
        .decide(
            &alice,
            holds[0].id,
            Decision::Answer {
                options: vec!["maybe".into()],
            },
            &Scope::any(),
            None,
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), "already_decided");
}

#[tokio::test]
async fn withdrawing_by_its_agent_or_an_admin_only() {
    let t = TestEngine::new(Policy::default()).await;
    let holds = held(
        &t,
        "w",
        vec![approval("a", json!({})), approval("b", json!({}))],
    )
    .await;
    let err = t
        .engine
        .withdraw(&agent("someone-else"), holds[0].id, None, &Scope::any())
        .await
        .unwrap_err();
    assert_eq!(err.code(), "forbidden");
    let h = t
        .engine
        .withdraw(
            &agent("bot"),
            holds[0].id,
            Some("no longer needed".into()),
            &Scope::any(),
        )
        .await
        .unwrap();
    let o = h.outcome.unwrap();
    assert_eq!(
        (o.status, o.source, o.verdict),
        (OutcomeStatus::Canceled, Source::Agent, Some(Verdict::Deny))
    );
    let err = t
        .engine
        .decide(
            &approver("alice"),
            holds[0].id,
            approve(),
            &Scope::any(),
            None,
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), "already_decided");
    let h = t
        .engine
        .withdraw(
            &Principal::new("root", Role::Admin),
            holds[1].id,
            None,
            &Scope::any(),
        )
        .await
        .unwrap();
    assert_eq!(
        h.outcome.unwrap().source,
        holdpoint_protocol::Source::Person
    );
}

#[tokio::test]
async fn cancelling_a_turn_withdraws_its_batch() {
    let t = TestEngine::new(Policy::default()).await;
    let holds = held(
        &t,
        "w",
        vec![approval("a", json!({})), approval("b", json!({}))],
    )
    .await;
    t.engine
        .decide(
            &approver("alice"),
            holds[0].id,
            approve(),
            &Scope::any(),
            None,
        )
        .await
        .unwrap();
    // Bob cancelled the turn: the withdrawal is his.
    let withdrawn = t
        .engine
        .withdraw_batch(
            holds[0].batch,
            &roles::actor_of(&approver("bob")),
            "turn cancelled",
        )
        .await
        .unwrap();
    assert_eq!(
        withdrawn.iter().map(|h| h.id).collect::<Vec<_>>(),
        vec![holds[1].id]
    );
    let o = withdrawn[0].outcome.clone().unwrap();
    assert_eq!(
        (o.status, o.source, o.decided_by, o.reason.as_deref()),
        (
            OutcomeStatus::Canceled,
            Source::Person,
            vec!["bob".to_owned()],
            Some("turn cancelled")
        )
    );
    assert!(!t.engine.chat_locked("w", "c").await.unwrap());
}

#[tokio::test]
async fn listing_pages_through_open_holds() {
    let t = TestEngine::new(Policy::default()).await;
    let mut ids = Vec::new();
    for i in 0..5 {
        ids.extend(
            held(
                &t,
                if i % 2 == 0 { "w" } else { "x" },
                vec![approval("t", json!({ "i": i }))],
            )
            .await
            .into_iter()
            .map(|h| h.id),
        );
    }
    t.engine
        .decide(&approver("alice"), ids[0], approve(), &Scope::any(), None)
        .await
        .unwrap();
    let mut seen = Vec::new();
    let mut query = HoldQuery {
        limit: Some(2),
        ..HoldQuery::default()
    };
    loop {
        let page = t.engine.holds(&query).await.unwrap();
        seen.extend(page.items.iter().map(|h| h.id));
        match page.next {
            Some(c) => query.cursor = Some(c),
            None => break,
        }
    }
    assert_eq!(seen, ids[1..].to_vec());
    let w = t
        .engine
        .holds(&HoldQuery {
            world: Some("w".into()),
            status: StatusFilter::Any,
            ..HoldQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(
        w.items.iter().map(|h| h.id).collect::<Vec<_>>(),
        vec![ids[0], ids[2], ids[4]]
    );
    let bad = t
        .engine
        .holds(&HoldQuery {
            cursor: Some("nope".into()),
            ..HoldQuery::default()
        })
        .await
        .unwrap_err();
    assert_eq!(
        bad.to_string(),
        "cursor: not a cursor returned by a previous page in this order"
    );
    // A cursor continues the order it came from.
    let oldest = t
        .engine
        .holds(&HoldQuery {
            limit: Some(1),
            ..HoldQuery::default()
        })
        .await
        .unwrap();
    for order in [Order::Urgent, Order::Oldest] {
        let cursor = match order {
            Order::Urgent => oldest.next.clone(),
            _ => {
                t.engine
                    .holds(&HoldQuery {
                        limit: Some(1),
                        order: Order::Urgent,
                        ..HoldQuery::default()
                    })
                    .await
                    .unwrap()
                    .next
            }
        };
        let bad = t
            .engine
            .holds(&HoldQuery {
                order,
                cursor,
                ..HoldQuery::default()
            })
            .await
            .unwrap_err();
        assert!(bad.to_string().starts_with("cursor: "), "{order:?}: {bad}");
    }
    // Resolved holds have no deadline left to meet.
    for status in [StatusFilter::Resolved, StatusFilter::Any] {
        let bad = t
            .engine
            .holds(&HoldQuery {
                status,
                order: Order::Urgent,
                ..HoldQuery::default()
            })
            .await
            .unwrap_err();
        assert!(bad.to_string().starts_with("order: "), "{status:?}: {bad}");
    }
    let bad = t
        .engine
        .holds(&HoldQuery {
            limit: Some(10_000),
            ..HoldQuery::default()
        })
        .await
        .unwrap_err();
    assert_eq!(bad.to_string(), "limit: 10000 is not from 1 to 500");
    // 0 is not "the default": the API documents it as a 400, and so it is everywhere.
    let bad = t
        .engine
        .holds(&HoldQuery {
            limit: Some(0),
            ..HoldQuery::default()
        })
        .await
        .unwrap_err();
    assert_eq!(bad.to_string(), "limit: 0 is not from 1 to 500");
    let bad = t
        .engine
        .holds(&HoldQuery {
            chat: Some("c".into()),
            ..HoldQuery::default()
        })
        .await
        .unwrap_err();
    assert_eq!(bad.code(), "invalid_input");
}

#[tokio::test]
async fn a_holds_history_is_read_to_the_end_however_long() {
    use holdpoint_core::audit::EventDraft;
    use holdpoint_core::clock::Clock;
    use holdpoint_core::store::Transaction;
    use holdpoint_protocol::{Actor, EventPayload};
    let t = TestEngine::new(Policy::default()).await;
    let h = held(&t, "w", vec![approval("deploy", json!({}))])
        .await
        .remove(0);
    // More events about the hold than one page of the log, committed in one transaction.
    const MORE: usize = 1_000;
    let reminded = (0..MORE)
        .map(|_| {
            EventDraft {
                at: t.clock.now(),
                world: Some("w".into()),
                chat: Some("c".into()),
                hold: Some(h.id),
                actor: Actor::of(Source::System),
                payload: EventPayload::HoldReminded {
                    deadline: t.clock.now(),
                },
            }
            .into()
        })
        .collect();
    t.engine
        .store()
        .commit(Transaction {
            writes: vec![],
            events: reminded,
        })
        .await
        .unwrap();
    let history = t.engine.history(h.id, &Scope::any()).await.unwrap();
    assert_eq!(history.len(), 1 + MORE);
    assert_eq!(history[0].payload.type_name(), "hold.created");
    assert!(history.windows(2).all(|w| w[0].seq < w[1].seq));
}
