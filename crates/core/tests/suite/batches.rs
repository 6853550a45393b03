use holdpoint_core::Scope;
use holdpoint_core::policy::Policy;
use holdpoint_protocol::{
    ApproveScope, DecideBatchRequest, DecideOutcome, Decision, GateResult, Hold, HoldRequest,
    HoldStatus, SeenHold,
};
use holdpoint_test_support::{TestEngine, agent, approval, approver, gate, question};
use pretty_assertions::assert_eq;
use serde_json::json;

async fn batch(t: &TestEngine) -> Vec<Hold> {
    let items = vec![
        approval("a", json!({"n": 1})),
        approval("b", json!({"n": 2})),
        HoldRequest::Question(question("And?", &["x", "y"])),
    ];
    let res = t
        .engine
        .gate(&agent("bot"), gate("w", Some("c"), items))
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

fn seen(holds: &[&Hold]) -> Vec<SeenHold> {
    holds
        .iter()
        .map(|h| SeenHold {
            hold: h.id,
            digest: h.digest().unwrap().to_owned(),
        })
        .collect()
}

fn all(seen: Vec<SeenHold>, decision: Decision) -> DecideBatchRequest {
    DecideBatchRequest { seen, decision }
}

#[tokio::test]
async fn decide_all_applies_to_every_approval_seen() {
    let t = TestEngine::new(Policy::default()).await;
    let h = batch(&t).await;
    let approve = Decision::Approve {
        scope: ApproveScope::Once,
        expires_in: None,
        digest: None,
        reason: None,
    };
    let r = t
        .engine
        .decide_batch(
            &approver("alice"),
            h[0].batch,
            all(seen(&[&h[0], &h[1]]), approve),
            &Scope::any(),
            None,
        )
        .await
        .unwrap();
    assert_eq!(
        r.holds
            .iter()
            .map(|d| (d.hold.id, d.result))
            .collect::<Vec<_>>(),
        vec![
            (h[0].id, DecideOutcome::Resolved),
            (h[1].id, DecideOutcome::Resolved)
        ]
    );
    assert!(
        r.holds
            .iter()
            .all(|d| d.hold.status == HoldStatus::Approved)
    );
    assert!(
        t.engine
            .hold(h[2].id, &Scope::any())
            .await
            .unwrap()
            .is_open(),
        "questions are answered one by one"
    );
}

#[tokio::test]
async fn decide_all_is_refused_when_the_batch_differs_from_what_was_seen() {
    let t = TestEngine::new(Policy::default()).await;
    let h = batch(&t).await;
    let deny = Decision::Deny { reason: None };
    let alice = approver("alice");
    let cases = [
        (seen(&[&h[0]]), "was not seen"),
        (
            {
                let mut s = seen(&[&h[0], &h[1]]);
                s.push(SeenHold {
                    hold: h[2].id,
                    digest: "0".repeat(64),
                });
                s
            },
            "not an approval of this batch",
        ),
        (
            {
                let mut s = seen(&[&h[0], &h[1]]);
                s[1].digest = "0".repeat(64);
                s
            },
            "differ from those seen",
        ),
        (
            {
                let mut s = seen(&[&h[0], &h[1]]);
                s.push(s[0].clone());
                s
            },
            "listed twice",
        ),
    ];
    for (seen, message) in cases {
        let err = t
            .engine
            .decide_batch(
                &alice,
                h[0].batch,
                all(seen, deny.clone()),
                &Scope::any(),
                None,
            )
            .await
            .unwrap_err();
        assert_eq!(err.code(), "batch_mismatch");
        assert!(err.to_string().contains(message), "{err}");
    }
    assert!(
        t.engine
            .hold(h[0].id, &Scope::any())
            .await
            .unwrap()
            .is_open(),
        "nothing was decided"
    );
    let err = t
        .engine
        .decide_batch(
            &alice,
            h[0].batch,
            all(seen(&[&h[0], &h[1]]), Decision::Confirm),
            &Scope::any(),
            None,
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), "invalid_input");
    let err = t
        .engine
        .decide_batch(
            &alice,
            h[0].batch,
            all(seen(&[&h[0], &h[1]]), deny.clone()),
            &Scope::world("elsewhere"),
            None,
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), "not_found");
    let err = t
        .engine
        .decide_batch(
            &agent("bot"),
            h[0].batch,
            all(seen(&[&h[0], &h[1]]), deny),
            &Scope::any(),
            None,
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), "forbidden");
}

#[tokio::test]
async fn decide_all_leaves_holds_decided_before_as_they_are() {
    let t = TestEngine::new(Policy::default()).await;
    let h = batch(&t).await;
    t.engine
        .decide(
            &approver("bob"),
            h[0].id,
            Decision::Deny { reason: None },
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
    let r = t
        .engine
        .decide_batch(
            &approver("alice"),
            h[0].batch,
            all(seen(&[&h[0], &h[1]]), approve),
            &Scope::any(),
            Some("once"),
        )
        .await
        .unwrap();
    assert_eq!(r.holds[0].result, DecideOutcome::AlreadyDecided);
    assert_eq!(r.holds[0].hold.status, HoldStatus::Denied);
    assert_eq!(r.holds[1].hold.status, HoldStatus::Approved);
    let approve = Decision::Approve {
        scope: ApproveScope::Once,
        expires_in: None,
        digest: None,
        reason: None,
    };
    let again = t
        .engine
        .decide_batch(
            &approver("alice"),
            h[0].batch,
            all(seen(&[&h[0], &h[1]]), approve),
            &Scope::any(),
            Some("once"),
        )
        .await
        .unwrap();
    assert_eq!(again, r, "the same key replays the first result");
}

#[tokio::test]
async fn a_batch_decisions_idempotency_key_is_bound_to_its_batch_and_body() {
    let t = TestEngine::new(Policy::default()).await;
    let first = batch(&t).await;
    let second = batch(&t).await;
    let alice = approver("alice");
    let body = all(
        seen(&[&first[0], &first[1]]),
        Decision::Deny { reason: None },
    );
    let decided = t
        .engine
        .decide_batch(
            &alice,
            first[0].batch,
            body.clone(),
            &Scope::any(),
            Some("k"),
        )
        .await
        .unwrap();

    // The key is bound to `{batch, seen, decision}`, as it always was: a retry of a request
    // recorded by an earlier version replays it.
    t.clock.advance(std::time::Duration::from_secs(1));
    let keys = t
        .engine
        .store()
        .idempotent_keys_before(t.engine.clock().now(), 10)
        .await
        .unwrap();
    assert_eq!(keys.len(), 1, "{keys:?}");
    let recorded = t
        .engine
        .store()
        .idempotent(&keys[0])
        .await
        .unwrap()
        .unwrap();
    let expected = serde_json::to_value(&body).unwrap();
    let mut fingerprinted = json!({"batch": first[0].batch});
    for (k, v) in expected.as_object().unwrap() {
        fingerprinted[k] = v.clone();
    }
    assert_eq!(
        recorded.fingerprint,
        holdpoint_core::canonical::digest(&fingerprinted)
    );

    // The same key and body on another batch is another request: it is checked against that
    // batch (whose holds differ from those seen), not answered with the first batch's result.
    let err = t
        .engine
        .decide_batch(&alice, second[0].batch, body, &Scope::any(), Some("k"))
        .await
        .unwrap_err();
    assert_ne!(err.code(), "idempotency_mismatch");
    assert!(
        t.engine
            .hold(second[0].id, &Scope::any())
            .await
            .unwrap()
            .is_open()
    );
    assert!(
        decided
            .holds
            .iter()
            .all(|d| d.hold.status == HoldStatus::Denied)
    );
}
