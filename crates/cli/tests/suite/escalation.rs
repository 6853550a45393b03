//! Escalation with `holdpoint serve` as a process: an escalation that fell due while the
//! server was killed (SIGKILL) is mailed after the restart, once; `holdpoint config check`
//! names the routing keys at fault.

use std::path::Path;
use std::time::Duration;

use holdpoint_test_support::http::Api;
use holdpoint_test_support::smtp::{Sink, python};
use serde_json::{Value, json};

use super::channels::first_notice_delivered;
use super::serve::{admin, served};
use super::{holdpoint, stderr};

/// Every hold mailed to alice through the SMTP server on `port`; escalated to the `oncall`
/// group (carol) when nobody decided within 2s. `route` adds lines to the route.
fn config(dir: &Path, port: u16, route: &str) -> String {
    let file = dir.join("holdpoint.toml");
    std::fs::write(
        &file,
        format!(
            "[channels.email]\nhost = \"127.0.0.1\"\nport = {port}\nsecurity = \"none\"\n\
             from = \"holdpoint@example.com\"\npublic_url = \"http://127.0.0.1\"\n\
             backoff = \"100ms\"\nattempts = 100\n\n\
             [channels.groups]\noncall = [{{ address = \"carol@example.com\", as = \"carol\" }}]\n\n\
             [[channels.routes]]\nto = [\"alice@example.com\"]\nas = \"alice\"\n{route}\n"
        ),
    )
    .unwrap();
    file.to_str().unwrap().to_owned()
}

/// Raises an approval of `command` in world `lab`; its hold's id.
async fn raise(api: &Api, command: &str) -> String {
    let raised = api
        .post(
            "/api/v1/worlds/lab/holds",
            json!({"items": [{"kind": "approval", "tool": "shell_cmd", "arguments": {"command": command}}]}),
        )
        .await
        .expect(201);
    raised["results"][0]["hold"]["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

const ESCALATES: &str = "escalate_after = \"2s\"\nescalate_to = \"oncall\"";

#[tokio::test]
async fn an_escalation_due_while_the_server_was_killed_is_mailed_after_the_restart_once() {
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let sink = Sink::start(&python, 0).await;
    let file = config(dir.path(), sink.port, ESCALATES);
    let mut first = served(&data, &["--config", &file]);
    let url = first.url().await;
    let api = admin(&data, &url);
    api.post("/api/v1/worlds", json!({"name": "lab"}))
        .await
        .expect(201);
    let hold = raise(&api, "ls").await;
    let started = tokio::time::Instant::now();
    assert_eq!(sink.nth(1).await["rcpt_tos"], json!(["alice@example.com"]));
    // Killed once alice's mail is recorded: killed before, the server would send it again
    // after the restart, before the escalation this test is about.
    first_notice_delivered(&api, &hold).await;
    first.kill().await;
    assert_eq!(sink.messages().len(), 1, "escalated before the kill");
    // The escalation falls due while no server runs (this wait is the scenario, not a
    // synchronisation: nothing runs that it waits for).
    tokio::time::sleep_until(started + Duration::from_millis(2500)).await;

    let mut second = served(&data, &["--config", &file]);
    let url = second.url().await;
    let api = admin(&data, &url);
    let escalated = sink.nth(2).await;
    assert_eq!(escalated["rcpt_tos"], json!(["carol@example.com"]));
    assert!(
        escalated["subject"].as_str().unwrap().contains("Escalated"),
        "{escalated}"
    );
    // Once: a hold raised now escalates 2s later; by then a second mail of the first
    // escalation, which was due at once, would have come.
    let later = raise(&api, "pwd").await;
    sink.nth(4).await;
    let to_carol: Vec<Value> = sink
        .messages()
        .into_iter()
        .filter(|m| m["rcpt_tos"] == json!(["carol@example.com"]))
        .collect();
    assert_eq!(to_carol.len(), 2, "{to_carol:?}");
    let listed = api
        .get(&format!("/api/v1/holds/{hold}/notices"))
        .await
        .expect(200);
    let purposes: Vec<&Value> = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| &n["purpose"])
        .collect();
    assert_eq!(
        purposes,
        [&json!("first"), &json!("escalation")],
        "{listed}"
    );
    assert_eq!(listed["items"][1]["status"], "delivered", "{listed}");
    let later = api
        .get(&format!("/api/v1/holds/{later}/notices"))
        .await
        .expect(200);
    assert_eq!(later["items"][1]["purpose"], "escalation", "{later}");
    second.terminate().await;
}

#[tokio::test]
async fn config_check_names_the_routing_key_at_fault() {
    let dir = tempfile::tempdir().unwrap();
    for (route, key, says) in [
        (
            "escalate_after = \"soon\"\nescalate_to = \"oncall\"",
            "channels.routes[0].escalate_after",
            "\"soon\" is not a duration",
        ),
        (
            "escalate_after = \"15m\"\nescalate_to = \"nobody\"",
            "channels.routes[0].escalate_to",
            "no group \"nobody\"",
        ),
        (
            "escalate_to = \"oncall\"",
            "channels.routes[0].escalate_after",
            "is needed with escalate_to",
        ),
        (
            "last_notice = \"0s\"",
            "channels.routes[0].last_notice",
            "out of range",
        ),
        (
            "groups = [\"oncall\", \"ops\"]",
            "channels.routes[0].groups",
            "no group \"ops\"",
        ),
    ] {
        let file = config(dir.path(), 25, route);
        let out = holdpoint(&["config", "check", "--config", &file]);
        assert_eq!(out.status.code(), Some(2), "{route}: {}", stderr(&out));
        assert!(
            stderr(&out).contains(key) && stderr(&out).contains(says),
            "{route}: {}",
            stderr(&out)
        );
    }
}
