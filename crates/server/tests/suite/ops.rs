//! Health, readiness, metrics and the OpenAPI document.

use super::{TestServer, answer, held, question, raise};

#[tokio::test]
async fn the_committed_openapi_document_is_current() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/openapi.json");
    let current = holdpoint_server::openapi().to_pretty_json().unwrap() + "\n";
    if std::env::var_os("HOLDPOINT_UPDATE_OPENAPI").is_some() {
        std::fs::write(&path, &current).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == current,
        "docs/openapi.json is stale: run HOLDPOINT_UPDATE_OPENAPI=1 cargo test -p holdpoint-server openapi, and commit it"
    );

    // The server serves the same document.
    let t = TestServer::start().await;
    let served = t
        .api
        .anonymous()
        .get("/api/v1/openapi.json")
        .await
        .expect(200);
    assert_eq!(
        served,
        serde_json::from_str::<serde_json::Value>(&current).unwrap()
    );
    // Every event type on the wire is documented in docs/api.md.
    let guide = std::fs::read_to_string(path.with_file_name("api.md")).unwrap();
    let variants = served["components"]["schemas"]["EventPayload"]["oneOf"]
        .as_array()
        .unwrap();
    assert!(variants.len() > 20, "the event types were not found");
    for variant in variants {
        let kind = variant["properties"]["type"]["enum"][0].as_str().unwrap();
        assert!(
            guide.contains(&format!("| `{kind}`")),
            "{kind} is not in the event table of docs/api.md"
        );
    }
}

#[tokio::test]
async fn metrics_count_pending_holds_decisions_and_requests() {
    let t = TestServer::start().await;
    t.world("lab").await;
    let agent = t.caller("bot", "agent", None).await;
    let alice = t.caller("alice", "approver", None).await;
    let first = held(
        &raise(&agent, "lab", vec![question("A?", &["yes"])]).await,
        0,
    );
    raise(&agent, "lab", vec![question("B?", &["yes"])]).await;
    answer(&alice, &first, "yes").await.expect(200);
    t.api.get("/api/v1/holds/not-a-hold").await.error(404);

    // The decision reaches the metrics through the log; wait for it there.
    let metrics = &t.api.anonymous();
    let text = holdpoint_test_support::eventually(|| async move {
        let reply = metrics.get("/metrics").await;
        assert_eq!(reply.status, 200);
        assert!(
            reply
                .headers
                .get("content-type")
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with("text/plain")
        );
        if reply
            .text
            .contains("holdpoint_decisions_total{outcome=\"answered\",source=\"person\"} 1")
        {
            Ok(reply.text)
        } else {
            Err(format!("the decision was not counted:\n{}", reply.text))
        }
    })
    .await;
    for line in [
        "holdpoint_pending_holds 1",
        "holdpoint_time_to_decision_seconds_count 1",
        "holdpoint_http_requests_total{route=\"/api/v1/holds/{hold}/decision\",method=\"POST\",status=\"200\"} 1",
        "holdpoint_http_requests_total{route=\"/api/v1/holds/{hold}\",method=\"GET\",status=\"404\"} 1",
    ] {
        assert!(text.contains(line), "missing {line}:\n{text}");
    }
}

#[tokio::test]
async fn health_and_readiness() {
    let t = TestServer::start().await;
    assert_eq!(
        t.api.anonymous().get("/healthz").await.expect(200)["status"],
        "ok"
    );
    assert_eq!(
        t.api.anonymous().get("/readyz").await.expect(200)["status"],
        "ready"
    );
}

#[tokio::test]
async fn the_audit_log_is_listed_and_verified() {
    let t = TestServer::start().await;
    t.world("lab").await;
    let agent = t.caller("bot", "agent", None).await;
    let alice = t.caller("alice", "approver", None).await;
    let hold = held(
        &raise(&agent, "lab", vec![question("A?", &["yes"])]).await,
        0,
    );
    let page = alice
        .get(&format!("/api/v1/audit/events?hold={hold}"))
        .await
        .expect(200);
    assert_eq!(page["events"][0]["payload"]["type"], "hold.created");
    agent.get("/api/v1/audit/events").await.error(403);
    alice.get("/api/v1/audit/verify").await.error(403);
    let report = t.api.get("/api/v1/audit/verify").await.expect(200);
    assert_eq!(report["intact"], true);
    assert!(report["events"].as_u64().unwrap() >= 2, "{report}");
    alice.get("/api/v1/audit/events?after=-1").await.error(400);
}

#[tokio::test]
async fn a_client_that_never_finishes_its_headers_is_disconnected() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let t = TestServer::with(super::ASK_ALL, |s| {
        s.server.header_timeout = std::time::Duration::from_millis(300);
    })
    .await;
    let mut tcp = tokio::net::TcpStream::connect(t.server.addr())
        .await
        .unwrap();
    tcp.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .await
        .unwrap();
    // The server gives up on the request and closes the connection (after at most an error
    // response); the read ends instead of waiting forever.
    let mut answer = Vec::new();
    tokio::time::timeout(
        holdpoint_test_support::PATIENCE,
        tcp.read_to_end(&mut answer),
    )
    .await
    .expect("the connection was held open")
    .ok();
    let answer = String::from_utf8_lossy(&answer);
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 408"),
        "{answer}"
    );

    // Well-behaved clients are still served.
    t.api.anonymous().get("/healthz").await.expect(200);
}
