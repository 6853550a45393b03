//! Email notices with `holdpoint serve` as a process: `holdpoint config check` connects to the
//! mail server, and a notice survives SIGKILL between its hold's creation and its sending.

use std::path::Path;
use std::time::Duration;

use holdpoint_test_support::eventually;
use holdpoint_test_support::http::Api;
use holdpoint_test_support::smtp::{Sink, free_port, python};
use serde_json::json;

use super::serve::{admin, served};
use super::{holdpoint, stderr};

/// A configuration mailing every hold to alice through the SMTP server on `port`.
fn config(dir: &Path, port: u16, extra: &str) -> String {
    let file = dir.join("holdpoint.toml");
    std::fs::write(
        &file,
        format!(
            "[channels.email]\nhost = \"127.0.0.1\"\nport = {port}\nsecurity = \"none\"\n\
             from = \"holdpoint@example.com\"\npublic_url = \"http://127.0.0.1\"\n\
             backoff = \"100ms\"\nattempts = 100\n{extra}\n\
             [[channels.routes]]\nto = [\"alice@example.com\"]\nas = \"alice\"\n"
        ),
    )
    .unwrap();
    file.to_str().unwrap().to_owned()
}

#[tokio::test]
async fn config_check_connects_to_the_mail_server() {
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().unwrap();

    let down = config(dir.path(), free_port(), "");
    let out = holdpoint(&["config", "check", "--config", &down]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("channels.email: cannot reach the mail server at 127.0.0.1:"),
        "{}",
        stderr(&out)
    );

    let unset = config(
        dir.path(),
        25,
        "username_env = \"HOLDPOINT_TEST_UNSET_USER\"\npassword_env = \"HOLDPOINT_TEST_UNSET_PASSWORD\"",
    );
    let out = holdpoint(&["config", "check", "--config", &unset]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("channels.email.username_env")
            && stderr(&out).contains("HOLDPOINT_TEST_UNSET_USER"),
        "{}",
        stderr(&out)
    );

    let sink = Sink::start(&python, 0).await;
    let up = config(dir.path(), sink.port, "");
    let out = holdpoint(&["config", "check", "--config", &up]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[tokio::test]
async fn a_notice_is_sent_once_after_the_server_is_killed() {
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    // The mail server is down while the hold is raised.
    let port = free_port();
    let file = config(dir.path(), port, "");
    let mut first = served(&data, &["--config", &file]);
    let url = first.url().await;
    let api = admin(&data, &url);
    api.post("/api/v1/worlds", json!({"name": "lab"}))
        .await
        .expect(201);
    let raised = api
        .post(
            "/api/v1/worlds/lab/holds",
            json!({"items": [{"kind": "approval", "tool": "shell_cmd", "arguments": {"command": "ls"}}]}),
        )
        .await
        .expect(201);
    let hold = raised["results"][0]["hold"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    first.kill().await;

    let sink = Sink::start(&python, port).await;
    let mut second = served(&data, &["--config", &file]);
    let url = second.url().await;
    let api = admin(&data, &url);
    let mail = sink.nth(1).await;
    assert_eq!(mail["rcpt_tos"], json!(["alice@example.com"]));
    assert!(mail["text"].as_str().unwrap().contains("shell_cmd"));
    first_notice_delivered(&api, &hold).await;
    // Once.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(sink.messages().len(), 1);
    second.terminate().await;
}

/// Waits until the hold's first notice is recorded as delivered: the mail server's
/// acceptance comes first, and a server killed between the two mails it again after a
/// restart (at least once, by design).
pub(super) async fn first_notice_delivered(api: &Api, hold: &str) {
    eventually(|| async move {
        let n = api
            .get(&format!("/api/v1/holds/{hold}/notices"))
            .await
            .expect(200);
        (n["items"][0]["status"] == "delivered")
            .then_some(())
            .ok_or_else(|| format!("not delivered yet: {n}"))
    })
    .await;
}
