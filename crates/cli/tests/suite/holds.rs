//! `holdpoint holds list` against a real server, as a child process.

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
