use holdpoint_protocol::{EventPayload, TurnStatus};
use holdpoint_test_support::llm::Step;
use holdpoint_test_support::next_matching;

use super::{Harness, by, turn_end};

/// Each failure ends the turn with a clear error event; nothing hangs.
#[tokio::test]
async fn llm_failures_fail_the_turn_with_a_clear_error() {
    let cases = [
        (Step::Status(401, "bad key".into()), "refused the API key"),
        (Step::Status(500, "down".into()), "failed (HTTP 500)"),
        (Step::Malformed, "could not be read"),
        (Step::Stall, "stalled"),
    ];
    for (step, expected) in cases {
        // A second 500 for the retry of the server error; unused otherwise.
        let h = Harness::new("", vec![step, Step::Status(500, "still down".into())]).await;
        let mut events = h.events().await;
        let turn = h.send("hi").await;
        let failed = next_matching(&mut events, "turn.failed", |e| {
            e.payload.type_name() == "turn.failed"
        })
        .await;
        let EventPayload::TurnFailed { error, .. } = &failed.payload else {
            unreachable!()
        };
        assert!(error.contains(expected), "{expected}: {error}");
        // The turn is saved in the same transaction as its `turn.failed` event.
        let done = h.rt.turn(turn.id).await.unwrap();
        assert_eq!(
            (done.status, done.error.as_deref()),
            (TurnStatus::Failed, Some(error.as_str()))
        );
        assert!(
            h.rt.active_turn(h.chat.id).await.unwrap().is_none(),
            "the chat is free again"
        );
    }
}

#[tokio::test]
async fn an_unreachable_llm_says_what_to_configure() {
    let h = Harness::new("", vec![]).await;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut llm = h.agent.llm.clone();
    llm.base_url = format!("http://127.0.0.1:{port}/v1");
    h.rt.update_agent(
        &by(),
        h.world.id,
        h.agent.id,
        holdpoint_protocol::AgentChanges {
            llm: Some(llm),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let mut events = h.events().await;
    let turn = h.send("hi").await;
    let done = turn_end(&h.rt, &mut events, turn.id).await;
    let error = done.error.unwrap();
    assert!(
        error.contains("cannot reach the LLM") && error.contains("base URL"),
        "{error}"
    );
}
