//! `holdpoint holds list` against a real server, as a child process.

use holdpoint_test_support::llm::{Step, call};
use serde_json::{Value, json};

use super::catalog::{json, run};
use super::lab::Lab;

#[tokio::test]
async fn holds_are_listed_by_tool_and_most_urgent_first() {
    let lab = Lab::start(vec![]).await;
    let agent = lab.token("deploy-bot", "agent").await;
    let bot = holdpoint_test_support::http::Api::new(&lab.server.url(), Some(&agent));
    let deploy = |deadline: &str| json!({"kind": "approval", "tool": "deploy", "arguments": {"to": deadline}, "deadline": deadline});
    bot.post(
        "/api/v1/worlds/lab/holds",
        json!({"items": [deploy("5m"), {"kind": "approval", "tool": "read", "arguments": {}}, deploy("1m")]}),
    )
    .await
    .expect(201);
    let targets = |page: Value| -> Vec<Value> {
        page["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["spec"]["arguments"]["to"].clone())
            .collect()
    };
    let listed = json(&lab, &["holds", "list", "--tool", "deploy"]).await;
    assert_eq!(targets(listed), ["5m", "1m"]);
    let urgent = json(&lab, &["holds", "list", "--tool", "deploy", "--urgent"]).await;
    assert_eq!(targets(urgent), ["1m", "5m"]);
    let none = json(&lab, &["holds", "list", "--agent", "nobody"]).await;
    assert_eq!(none["items"], json!([]));
    // Resolved holds have no deadline left to meet: refused, naming the option's field.
    let (code, _, err) = run(
        &lab,
        &lab.token,
        &["holds", "list", "--urgent", "--status", "resolved"],
    )
    .await;
    assert_ne!(code, 0);
    assert!(err.contains("order") && err.contains("urgent"), "{err}");
}

#[tokio::test]
async fn a_decided_hold_is_shown_with_its_agent_by_name_and_no_deadline_to_come() {
    let lab = Lab::start(vec![
        Step::calls(vec![call(
            "q1",
            "ask_human",
            json!({"question": "Deploy now?", "default_option": "abort", "options": [
                {"id": "deploy", "label": "Deploy"}, {"id": "abort", "label": "Abort"}]}),
        )]),
        Step::text("Understood."),
    ])
    .await;
    let chat = lab
        .admin
        .post("/api/v1/worlds/lab/chats", json!({"agent": "helper"}))
        .await
        .expect(201)["id"]
        .as_str()
        .unwrap()
        .to_owned();
    lab.admin
        .post(
            &format!("/api/v1/worlds/lab/chats/{chat}/messages"),
            json!({"text": "deploy?"}),
        )
        .await
        .expect(202);
    let hold = lab.pending_hold().await;
    let id = hold["id"].as_str().unwrap();

    let (code, open, err) = run(&lab, &lab.token, &["holds", "show", id]).await;
    assert_eq!(code, 0, "{err}");
    assert!(open.contains("raised by agent helper;"), "{open}");
    assert!(open.contains("); then: the answer is Abort\n"), "{open}");

    lab.admin
        .post(
            &format!("/api/v1/holds/{id}/decision"),
            json!({"action": "answer", "options": ["deploy"]}),
        )
        .await
        .expect(200);
    let (code, shown, err) = run(&lab, &lab.token, &["holds", "show", id]).await;
    assert_eq!(code, 0, "{err}");
    assert!(shown.contains("  status: answered\n"), "{shown}");
    assert!(
        shown.contains("s ago); the deadline no longer applies\n"),
        "{shown}"
    );
    assert!(
        !shown.contains("then:") && !shown.contains("(in "),
        "{shown}"
    );
    // The turn's agent is named as people know it, in the history too.
    assert!(!shown.contains("agent:"), "{shown}");
    assert!(shown.contains("agent helper (agent)"), "{shown}");
    assert!(shown.contains("answered: Deploy by admin"), "{shown}");
}
