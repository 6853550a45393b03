use holdpoint_protocol::{EventPayload, TurnStatus};
use holdpoint_test_support::llm::{ScriptedCall, Step, call};
use holdpoint_test_support::next_matching;
use pretty_assertions::assert_eq;
use serde_json::json;

use super::{Harness, by, turn_end};

#[tokio::test]
async fn invalid_calls_go_back_to_the_llm_without_a_hold() {
    let calls = vec![
        call("a", "write_file", json!({"path": 3, "content": "x"})),
        ScriptedCall {
            id: "b".into(),
            name: "read_file".into(),
            arguments: "{\"path\": \"a".into(),
        },
        call("c", "launch_rockets", json!({})),
    ];
    let h = Harness::new("", vec![Step::calls(calls), Step::text("fixed")]).await;
    let mut events = h.events().await;
    let turn = h.send("go").await;
    let done = turn_end(&h.rt, &mut events, turn.id).await;
    assert_eq!(done.status, TurnStatus::Finished);
    assert!(
        h.engine
            .holds(&Default::default())
            .await
            .unwrap()
            .items
            .is_empty(),
        "nothing was asked"
    );
    let req = &h.llm.requests()[1];
    let error = |id: &str| {
        let r = req.tool_result(id).unwrap();
        assert_eq!(r["status"], "invalid_arguments", "{r}");
        r["error"].as_str().unwrap().to_owned()
    };
    // The field is named as the model wrote it, not as a JSON pointer.
    assert!(
        error("a").contains("path: 3 is not of type \"string\"") && !error("a").contains("/path"),
        "{}",
        error("a")
    );
    assert!(error("b").contains("not valid JSON"), "{}", error("b"));
    assert!(
        error("c").contains("no tool named \"launch_rockets\""),
        "{}",
        error("c")
    );
}

#[tokio::test]
async fn paths_out_of_the_world_go_back_to_the_llm_before_anyone_is_asked() {
    // Every call would be asked (mode manual), but none of them could ever run.
    let calls = vec![
        call("r", "read_file", json!({"path": "../../../etc/passwd"})),
        call(
            "w",
            "write_file",
            json!({"path": "/tmp/holdpoint-escape", "content": "x"}),
        ),
        call("l", "list_files", json!({"path": ".."})),
        call("s", "shell_cmd", json!({"command": "pwd", "cwd": "../.."})),
        call("k", "read_file", json!({"path": "link/secret"})),
    ];
    let h = Harness::new("", vec![Step::calls(calls), Step::text("ok")]).await;
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), "top secret").unwrap();
    std::os::unix::fs::symlink(outside.path(), h.world_dir().join("link")).unwrap();
    let mut events = h.events().await;
    let turn = h.send("look around").await;
    let done = turn_end(&h.rt, &mut events, turn.id).await;
    assert_eq!(done.status, TurnStatus::Finished);
    assert!(
        h.engine
            .holds(&Default::default())
            .await
            .unwrap()
            .items
            .is_empty(),
        "nobody is asked about a call that cannot run"
    );
    let req = &h.llm.requests()[1];
    for (id, field, why) in [
        ("r", "path", "leaves the world"),
        ("w", "path", "absolute"),
        ("l", "path", "leaves the world"),
        ("s", "cwd", "leaves the world"),
        ("k", "path", "symbolic link"),
    ] {
        let r = req.tool_result(id).unwrap();
        assert_eq!(r["status"], "invalid_arguments", "{id}: {r}");
        let e = r["error"].as_str().unwrap();
        assert!(
            e.starts_with(&format!("`{field}`: ")) && e.contains(why),
            "{id}: {e}"
        );
    }
    assert!(!std::path::Path::new("/tmp/holdpoint-escape").exists());
}

#[tokio::test]
async fn streamed_text_is_recorded_as_it_comes() {
    let h = Harness::new(
        "",
        vec![Step::Text(vec![
            "Hello".into(),
            ", ".into(),
            "world".into(),
        ])],
    )
    .await;
    let mut events = h.events().await;
    let turn = h.send("hi").await;
    let mut text = String::new();
    loop {
        let e = next_matching(&mut events, "text or the end", |e| {
            matches!(
                e.payload,
                EventPayload::TurnText { .. } | EventPayload::TurnFinished { .. }
            )
        })
        .await;
        match &e.payload {
            EventPayload::TurnText { text: t, .. } => text.push_str(t),
            _ => break,
        }
    }
    assert_eq!(text, "Hello, world");
    let messages =
        h.rt.messages(h.world.id, h.chat.id, None, 10)
            .await
            .unwrap();
    assert_eq!(
        messages
            .iter()
            .map(|(_, m)| m.content.clone().unwrap())
            .collect::<Vec<_>>(),
        vec!["hi", "Hello, world"]
    );
    assert_eq!(h.rt.turn(turn.id).await.unwrap().step, 1);
}

#[tokio::test]
async fn a_turn_ends_at_its_step_limit() {
    let again = || Step::calls(vec![call("c", "list_files", json!({}))]);
    let h = Harness::new("mode = \"auto_approve\"", vec![again(), again(), again()]).await;
    let agent =
        h.rt.update_agent(
            &by(),
            h.world.id,
            h.agent.id,
            holdpoint_protocol::AgentChanges {
                max_steps: Some(2),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(agent.max_steps, 2);
    let mut events = h.events().await;
    let turn = h.send("loop").await;
    let done = turn_end(&h.rt, &mut events, turn.id).await;
    assert_eq!(done.status, TurnStatus::Failed);
    assert!(done.error.unwrap().contains("limit of 2 LLM calls"));
    assert_eq!(h.llm.requests().len(), 2);
}
