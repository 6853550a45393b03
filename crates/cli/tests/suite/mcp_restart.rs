//! `holdpoint serve` restarted, or killed and started again, under a `holdpoint mcp` whose
//! client's call waits on a hold: the hold is durable, so the call simply keeps waiting, and
//! once a person approves it on the new server the upstream runs it, exactly once.

use holdpoint_test_support::http::Api;
use holdpoint_test_support::serve::{Serve, ServeCommand, Stderr};
use serde_json::{Value, json};

use super::mcp::{Client, result_of, text, upstream_section};

/// A server of a world `lab` in `dir` (which keeps its data across starts), on `bind`.
fn server(dir: &std::path::Path, bind: &str) -> Serve {
    let policy = dir.join("policy.toml");
    std::fs::write(&policy, "mode = \"manual\"\n").unwrap();
    let config = dir.join("serve.toml");
    std::fs::write(
        &config,
        format!(
            "[policy]\nfile = {:?}\n[log]\nlevel = \"warn\"\n",
            policy.display().to_string()
        ),
    )
    .unwrap();
    ServeCommand::new(env!("CARGO_BIN_EXE_holdpoint"), dir.join("data"))
        .bind(bind)
        .arg("--config")
        .arg(config)
        .stderr(Stderr::AppendTo(dir.join("serve.log")))
        .spawn()
}

/// The first pending hold of the server at `admin`, once there is one.
async fn pending(admin: &Api) -> Value {
    holdpoint_test_support::eventually(|| async move {
        let page = admin.get("/api/v1/holds").await.expect(200);
        page["items"]
            .get(0)
            .cloned()
            .ok_or_else(|| "no hold is pending yet".to_owned())
    })
    .await
}

async fn a_waiting_call_outlives_the_server(kill: bool) {
    let dir = tempfile::tempdir().unwrap();
    let mut first = server(dir.path(), "127.0.0.1:0");
    let url = first.listening().await.expect("the server did not start");
    let addr = url.trim_start_matches("http://").to_owned();
    let admin_token = std::fs::read_to_string(dir.path().join("data/admin-token")).unwrap();
    let admin = Api::new(&url, Some(admin_token.trim()));
    admin
        .post("/api/v1/worlds", json!({"name": "lab"}))
        .await
        .expect(201);
    let agent = admin
        .post("/api/v1/tokens", json!({"name": "coder", "role": "agent"}))
        .await
        .expect(201)["token"]
        .as_str()
        .unwrap()
        .to_owned();
    let log = dir.path().join("upstream.log");
    let config = dir.path().join("gateway.toml");
    std::fs::write(&config, upstream_section(&log)).unwrap();
    let call = Client {
        server: Some(&url),
        http: false,
        token: &agent,
        config: &config,
        data: &dir.path().join("elsewhere"),
        upstream_log: Some(&log),
    }
    .command(
        "client.py",
        &[
            "call",
            "up__write_note",
            r#"{"name": "a", "text": "hello"}"#,
        ],
    )
    .spawn()
    .unwrap();
    let hold = pending(&admin).await;

    // The server goes away under the waiting call, and comes back where it was.
    if kill {
        first.kill().await;
    } else {
        assert!(first.terminate().await.success());
    }
    let mut second = server(dir.path(), &addr);
    assert_eq!(second.url().await, url);
    let again = pending(&admin).await;
    assert_eq!(again["id"], hold["id"], "the same hold is still pending");
    admin
        .post(
            &format!("/api/v1/holds/{}/decision", hold["id"].as_str().unwrap()),
            json!({"action": "approve"}),
        )
        .await
        .expect(200);

    let result = result_of(call).await;
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(text(&result), "wrote a: hello");
    let ran: Vec<Value> = std::fs::read_to_string(&log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        ran,
        [json!({"tool": "write_note", "arguments": {"name": "a", "text": "hello"}})],
        "the approved call runs exactly once"
    );
    assert!(second.terminate().await.success());
}

#[tokio::test]
async fn a_call_waiting_on_a_hold_keeps_waiting_across_a_restart_of_the_server() {
    a_waiting_call_outlives_the_server(false).await;
}

#[tokio::test]
async fn a_call_waiting_on_a_hold_keeps_waiting_after_the_server_is_killed_and_started_again() {
    a_waiting_call_outlives_the_server(true).await;
}
