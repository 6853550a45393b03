use holdpoint_core::audit::EventDraft;
use holdpoint_core::policy::Policy;
use holdpoint_core::store::{EventFilter, PreparedEvent, Transaction};
use holdpoint_protocol::{Actor, EventPayload, GrantId, HoldRequest, Source};
use holdpoint_test_support::{START, TestEngine, agent, gate, next_matching, question};
use pretty_assertions::assert_eq;

async fn ask(t: &TestEngine, world: &str) {
    t.engine
        .gate(
            &agent("bot"),
            gate(
                world,
                None,
                vec![HoldRequest::Question(question("Q", &["a"]))],
            ),
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn a_stream_resumes_after_the_last_event_seen() {
    let t = TestEngine::new(Policy::default()).await;
    let mut live = t.stream().await;
    ask(&t, "w").await;
    ask(&t, "w").await;
    let first = next_matching(&mut live, "event 1", |_| true).await;
    assert_eq!(first.seq, 1);
    drop(live);
    ask(&t, "w").await;
    ask(&t, "x").await;
    ask(&t, "w").await;
    // Reconnect with the last id seen: exactly what was missed, in order.
    let mut resumed = t
        .engine
        .events(Some(first.seq), EventFilter::default())
        .await
        .unwrap();
    let mut seqs = Vec::new();
    for _ in 0..4 {
        seqs.push(
            next_matching(&mut resumed, "a missed event", |_| true)
                .await
                .seq,
        );
    }
    assert_eq!(seqs, vec![2, 3, 4, 5]);
    ask(&t, "w").await;
    assert_eq!(
        next_matching(&mut resumed, "a live event", |_| true)
            .await
            .seq,
        6
    );

    let mut only_x = t
        .engine
        .events(
            Some(0),
            EventFilter {
                world: Some("x".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let e = next_matching(&mut only_x, "x's event", |_| true).await;
    assert_eq!((e.seq, e.world.as_deref()), (4, Some("x")));
}

#[tokio::test]
async fn a_reader_that_falls_behind_catches_up_from_the_log() {
    let t = TestEngine::new(Policy::default()).await;
    let mut slow = t.engine.events(None, EventFilter::default()).await.unwrap();
    // More events than the live buffer holds, committed while the reader is not reading.
    for _ in 0..50 {
        let events = (0..100)
            .map(|_| {
                PreparedEvent::from(EventDraft {
                    at: START,
                    world: Some("w".into()),
                    chat: None,
                    hold: None,
                    actor: Actor::of(Source::System),
                    payload: EventPayload::GrantRevoked {
                        grant: GrantId::random(),
                    },
                })
            })
            .collect();
        t.engine
            .store()
            .commit(Transaction {
                writes: vec![],
                events,
            })
            .await
            .unwrap();
    }
    for expected in 1..=5000u64 {
        assert_eq!(
            next_matching(&mut slow, "the next event", |_| true)
                .await
                .seq,
            expected
        );
    }
    assert_eq!(slow.cursor(), 5000);
}
