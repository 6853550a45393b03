//! `holdpoint serve` under connections that never send a request, as an attacker without a
//! credential would open them: thousands of silent ones and some that trickle a byte at a
//! time, against a server with few file descriptors. The probes and a person's decision are
//! still answered, and the silent connections are closed `server.header_timeout` after they
//! were opened.

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use holdpoint_test_support::http::{Api, Method};
use holdpoint_test_support::serve::{ServeCommand, Stderr};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinSet;
use tokio::time::Instant;

const HEADER_TIMEOUT: Duration = Duration::from_secs(2);
/// How late a silent connection may be closed on a busy two-core machine.
const SLACK: Duration = Duration::from_secs(4);
/// How long a probe or a decision may take while the flood goes on.
const ANSWER: Duration = Duration::from_secs(5);
const SILENT: usize = 3000;
const TRICKLING: usize = 100;

/// Connects to `addr` and says nothing; when it was opened and when the server closed it
/// (`None`: it never connected, or stayed open past the deadline).
async fn silent(addr: String) -> Option<(Instant, Option<Instant>)> {
    let mut tcp = tokio::time::timeout(ANSWER, TcpStream::connect(&addr))
        .await
        .ok()?
        .ok()?;
    let opened = Instant::now();
    let mut byte = [0u8; 1];
    let closed = tokio::time::timeout(HEADER_TIMEOUT + SLACK + ANSWER, tcp.read(&mut byte))
        .await
        .ok()
        .map(|_| Instant::now());
    Some((opened, closed))
}

/// Connects and sends a request's head a byte every 100 ms, which would take six seconds;
/// whether the server closed the connection first.
async fn trickling(addr: String) -> bool {
    let Ok(Ok(mut tcp)) = tokio::time::timeout(ANSWER, TcpStream::connect(&addr)).await else {
        return false;
    };
    let head = format!(
        "GET /healthz HTTP/1.1\r\nHost: {addr}\r\nX-Slow: {}",
        "a".repeat(30)
    );
    for byte in head.bytes() {
        if tcp.write_all(&[byte]).await.is_err() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut rest = [0u8; 64];
    match tcp.try_read(&mut rest) {
        Ok(n) => n == 0,
        Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_and_trickling_connections_neither_starve_the_server_nor_stay_open() {
    let dir = tempfile::tempdir().unwrap();
    // The server may open 256 files: without caps, a few hundred silent connections would
    // take every one of them.
    let wrapper = dir.path().join("holdpoint-256");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nulimit -n 256 || exit 1\nexec '{}' \"$@\"\n",
            env!("CARGO_BIN_EXE_holdpoint")
        ),
    )
    .unwrap();
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let config = dir.path().join("holdpoint.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nheader_timeout = \"{}s\"\n[log]\nlevel = \"error\"\n",
            HEADER_TIMEOUT.as_secs()
        ),
    )
    .unwrap();
    let command = ServeCommand::new(&wrapper, dir.path().join("data"))
        .arg("--config")
        .arg(&config)
        .stderr(Stderr::AppendTo(dir.path().join("serve.log")));
    let mut server = command.spawn();
    let url = server.listening().await.expect("the server did not start");
    let addr = url.trim_start_matches("http://").to_owned();
    let token = std::fs::read_to_string(command.data.join("admin-token")).unwrap();
    let admin = Api::new(&url, Some(token.trim()));
    admin
        .post("/api/v1/worlds", json!({"name": "lab"}))
        .await
        .expect(201);
    let agent_token = admin
        .post(
            "/api/v1/tokens",
            json!({"name": "bot", "role": "agent", "world": "lab"}),
        )
        .await
        .expect(201)["token"]
        .as_str()
        .unwrap()
        .to_owned();
    let agent = admin.as_token(&agent_token);

    // The flood: silent connections opened as fast as they connect, and trickling ones.
    let mut tricklers = JoinSet::new();
    for _ in 0..TRICKLING {
        tricklers.spawn(trickling(addr.clone()));
    }
    let flood = {
        let addr = addr.clone();
        tokio::spawn(async move {
            let mut silents = JoinSet::new();
            for _ in 0..SILENT {
                silents.spawn(silent(addr.clone()));
                tokio::task::yield_now().await;
            }
            silents.join_all().await
        })
    };

    // Meanwhile the probes answer, and a hold is raised and decided.
    for _ in 0..5 {
        let probe = tokio::time::timeout(ANSWER, admin.anonymous().get("/healthz"))
            .await
            .expect("/healthz did not answer during the flood");
        assert_eq!(probe.status, 200, "{}", probe.text);
    }
    let raised = tokio::time::timeout(
        ANSWER,
        agent.send(
            agent
                .request(Method::POST, "/api/v1/worlds/lab/holds")
                .json(&json!({"items": [{"kind": "approval", "tool": "deploy", "arguments": {}}]})),
        ),
    )
    .await
    .expect("raising a hold did not answer during the flood")
    .expect(201);
    let id = raised["results"][0]["hold"]["id"].as_str().unwrap();
    let decided = tokio::time::timeout(
        ANSWER,
        admin.post(
            &format!("/api/v1/holds/{id}/decision"),
            json!({"action": "approve"}),
        ),
    )
    .await
    .expect("a decision did not answer during the flood")
    .expect(200);
    assert_eq!(decided["hold"]["status"], "approved");

    // Every silent connection was closed in time: its header timeout after it was opened,
    // or sooner, to make room for another.
    let silents = flood.await.unwrap();
    let connected: Vec<_> = silents.into_iter().flatten().collect();
    assert!(
        connected.len() > SILENT / 2,
        "only {} of {SILENT} silent connections connected",
        connected.len()
    );
    let late: Vec<_> = connected
        .iter()
        .filter(|(opened, closed)| {
            closed.is_none_or(|closed| closed.duration_since(*opened) > HEADER_TIMEOUT + SLACK)
        })
        .collect();
    assert!(
        late.is_empty(),
        "{} of {} silent connections stayed open past {HEADER_TIMEOUT:?} (+{SLACK:?})",
        late.len(),
        connected.len()
    );
    let closed = tricklers.join_all().await;
    let trickled = closed.iter().filter(|c| **c).count();
    assert_eq!(
        trickled,
        closed.len(),
        "trickling connections were left open by the server"
    );

    // The server is still itself afterwards.
    let probe = admin.anonymous().get("/healthz").await;
    assert_eq!(probe.status, 200);
    server.terminate().await;
}
