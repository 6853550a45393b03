//! The typed client against a real server: its pagers, and its paths being the served API's.

use holdpoint_client::Client;
use holdpoint_protocol::HoldsParams;

use super::{TestServer, held, question, raise};

/// The admin's typed client.
fn client(t: &TestServer) -> Client {
    Client::new(&t.server.url(), t.server.admin_token().unwrap().to_owned()).unwrap()
}

#[tokio::test]
async fn all_holds_reads_every_page_to_the_end() {
    let t = TestServer::start().await;
    t.world("lab").await;
    let agent = t.caller("bot", "agent", None).await;
    let mut raised = Vec::new();
    for i in 0..5 {
        raised.push(held(
            &raise(&agent, "lab", vec![question(&format!("Q{i}?"), &["yes"])]).await,
            0,
        ));
    }
    let params = HoldsParams {
        world: Some("lab".into()),
        limit: Some(2),
        ..HoldsParams::default()
    };
    let client = client(&t);
    assert_eq!(client.holds(&params).await.unwrap().items.len(), 2);
    let all: Vec<String> = client
        .all_holds(&params)
        .await
        .unwrap()
        .into_iter()
        .map(|h| h.id.to_string())
        .collect();
    assert_eq!(all, raised);
}

#[tokio::test]
async fn health_answers_without_a_token() {
    let t = TestServer::start().await;
    let anonymous = Client::new(&t.server.url(), String::new()).unwrap();
    assert_eq!(anonymous.health().await.unwrap().status, "ok");
    let nowhere = Client::new("http://127.0.0.1:1", String::new()).unwrap();
    assert!(matches!(
        nowhere.health().await,
        Err(holdpoint_client::ClientError::Unreachable { .. })
    ));
}

#[tokio::test]
async fn a_raise_answered_in_lines_gives_the_gate_then_its_sync() {
    use holdpoint_protocol::{GateResult, NewHolds, RaiseSynced};
    use serde_json::json;

    let t = TestServer::with(
        "[[rules]]\nname = \"read\"\ntools = [\"read\"]\naction = \"allow\"\n",
        |_| {},
    )
    .await;
    t.world("lab").await;
    let token = t.token("bot", "agent", None).await;
    let agent = t.api.as_token(&token);
    let lines = |items: serde_json::Value| {
        agent.send(
            agent
                .request(reqwest::Method::POST, "/api/v1/worlds/lab/holds")
                .header("accept", "application/json;q=0.5, application/x-ndjson")
                .json(&json!({ "items": items })),
        )
    };
    // An allowed call: its gate first, then its record's sync, as two JSON lines.
    let allowed = lines(json!([{"kind": "approval", "tool": "read", "arguments": {}}])).await;
    assert_eq!(allowed.status, 200, "{}", allowed.text);
    assert_eq!(allowed.headers["content-type"], "application/x-ndjson");
    let [gate, synced, end] = allowed.text.split('\n').collect::<Vec<_>>()[..] else {
        panic!("not two lines: {:?}", allowed.text);
    };
    let gate: holdpoint_protocol::GateResponse = serde_json::from_str(gate).unwrap();
    assert!(matches!(gate.results[..], [GateResult::Allowed { .. }]));
    let synced: RaiseSynced = serde_json::from_str(synced).unwrap();
    assert_eq!((synced.synced, synced.error, end), (true, None, ""));
    // A hold: 201, in lines too.
    let held = lines(json!([{"kind": "approval", "tool": "deploy", "arguments": {}}])).await;
    assert_eq!(held.status, 201, "{}", held.text);
    assert_eq!(held.text.lines().count(), 2);
    // `q=0` says the client does not take lines: one JSON answer.
    let refusing = agent
        .send(
            agent
                .request(reqwest::Method::POST, "/api/v1/worlds/lab/holds")
                .header("accept", "application/x-ndjson; q=0, application/json")
                .json(&json!({"items": [{"kind": "approval", "tool": "read", "arguments": {"q": 0}}]})),
        )
        .await;
    assert_eq!(refusing.status, 200, "{}", refusing.text);
    assert_eq!(refusing.headers["content-type"], "application/json");
    assert!(matches!(
        serde_json::from_value::<holdpoint_protocol::GateResponse>(refusing.body)
            .unwrap()
            .results[..],
        [GateResult::Allowed { .. }]
    ));
    // A refusal is one JSON error, as without the header.
    let refused = lines(json!([])).await;
    assert_eq!(refused.status, 422);
    assert_eq!(refused.body["error"]["details"]["field"], "items");

    // The typed client reads the lines, and owes nothing against one JSON answer.
    let client = Client::new(&t.server.url(), token).unwrap();
    let new: NewHolds = serde_json::from_value(
        json!({"items": [{"kind": "approval", "tool": "read", "arguments": {"n": 1}}]}),
    )
    .unwrap();
    let (gate, syncing) = client
        .raise_written("lab", &new, Some("k-1"))
        .await
        .unwrap();
    assert!(matches!(gate.results[..], [GateResult::Allowed { .. }]));
    syncing.wait().await.unwrap();
    let (again, syncing) = client
        .raise_written("lab", &new, Some("k-1"))
        .await
        .unwrap();
    assert_eq!(again, gate, "a repeat is answered as the first time");
    syncing.wait().await.unwrap();
    let err = client
        .raise_written("nowhere", &new, None)
        .await
        .err()
        .unwrap();
    assert!(
        matches!(err, holdpoint_client::ClientError::Api { status: 404, .. }),
        "{err:?}"
    );
}

/// Every request the typed client makes, as method and path, recorded by a server that
/// answers each with 404.
async fn requests_of_every_client_method() -> Vec<(String, String)> {
    use std::sync::{Arc, Mutex};

    use axum::extract::Request;
    use holdpoint_protocol::{
        ApplyDefault, BatchId, DecideBatchRequest, Decision, EventsParams, GrantId, HoldId,
        PageParams, StreamParams, TokenId, TurnId, WaitParams, WebhookId, Withdraw,
    };
    use serde::de::DeserializeOwned;
    use serde_json::{Value, json};

    fn body<T: DeserializeOwned>(v: Value) -> T {
        serde_json::from_value(v).unwrap()
    }

    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    let app = axum::Router::new().fallback(move |req: Request| {
        let record = record.clone();
        async move {
            let mut seen = record.lock().unwrap();
            seen.push((req.method().to_string(), req.uri().path().to_owned()));
            axum::http::StatusCode::NOT_FOUND
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let server = tokio::spawn(async move { axum::serve(listener, app).await });

    let c = Client::new(&url, "hp_any".into()).unwrap();
    let (w, deny) = ("w", Decision::Deny { reason: None });
    let _ = c.health().await;
    let _ = c.session().await;
    let _ = c.tokens().await;
    let _ = c
        .create_token(&body(json!({"name": "n", "role": "agent"})))
        .await;
    let _ = c.revoke_token(TokenId::random()).await;
    let _ = c.worlds().await;
    let _ = c.world(w).await;
    let _ = c.create_world(&body(json!({"name": w}))).await;
    let _ = c.update_world(w, &Default::default()).await;
    let _ = c.delete_world(w).await;
    let _ = c.agents(w).await;
    let _ = c.agent(w, "a").await;
    let new_agent = json!({"name": "a", "llm": {"base_url": "http://x", "model": "m"},
        "system_prompt": ""});
    let _ = c.create_agent(w, &body(new_agent)).await;
    let _ = c.update_agent(w, "a", &Default::default()).await;
    let _ = c.delete_agent(w, "a").await;
    let _ = c.chats(w).await;
    let _ = c.chat(w, "c").await;
    let _ = c.create_chat(w, &body(json!({"agent": "a"}))).await;
    let _ = c.update_chat(w, "c", &Default::default()).await;
    let _ = c.delete_chat(w, "c").await;
    let _ = c.messages(w, "c", &PageParams::default()).await;
    let _ = c.send_message(w, "c", &body(json!({"text": "hi"}))).await;
    let _ = c.turn(w, TurnId::random()).await;
    let _ = c.cancel_turn(w, TurnId::random()).await;
    let _ = c.raise(w, &body(json!({"items": []})), None).await;
    let _ = c.raise_written(w, &body(json!({"items": []})), None).await;
    let _ = c.holds(&HoldsParams::default()).await;
    let _ = c.all_holds(&HoldsParams::default()).await;
    let _ = c.hold("h").await;
    let _ = c.decide("h", &deny, None).await;
    let _ = c
        .apply_default(HoldId::random(), &ApplyDefault::default(), None)
        .await;
    let all = DecideBatchRequest {
        seen: vec![],
        decision: deny.clone(),
    };
    let _ = c.decide_batch(BatchId::random(), &all, None).await;
    let _ = c.wait(HoldId::random(), &WaitParams::default()).await;
    let _ = c.withdraw(HoldId::random(), &Withdraw::default()).await;
    let _ = c.grants(w).await;
    let _ = c.revoke_grant(GrantId::random()).await;
    let _ = c.policy().await;
    let explain = json!({"world": w, "tool": "t", "arguments": {}});
    let _ = c.explain(&body(explain)).await;
    let _ = c.webhooks(w).await;
    let _ = c.create_webhook(w, &body(json!({"url": "http://x"}))).await;
    let _ = c.delete_webhook(WebhookId::random()).await;
    let _ = c
        .deliveries(WebhookId::random(), &PageParams::default())
        .await;
    let _ = c.audit_events(&EventsParams::default()).await;
    let _ = c.audit_verify().await;
    let _ = c.events(&StreamParams::default()).await;
    server.abort();
    seen.lock().unwrap().clone()
}

/// Whether `path` is an instance of the OpenAPI path template `template`.
fn instance_of(path: &str, template: &str) -> bool {
    let (p, t): (Vec<&str>, Vec<&str>) = (path.split('/').collect(), template.split('/').collect());
    p.len() == t.len()
        && p.iter()
            .zip(&t)
            .all(|(p, t)| p == t || (t.starts_with('{') && t.ends_with('}') && !p.is_empty()))
}

#[tokio::test]
async fn every_request_of_the_typed_client_is_an_operation_of_the_served_document() {
    let requests = requests_of_every_client_method().await;
    assert_eq!(requests.len(), 45, "one request per call: {requests:?}");
    let doc = serde_json::to_value(holdpoint_server::openapi()).unwrap();
    let paths = doc["paths"].as_object().unwrap();
    let documented = |method: &str, path: &str| {
        paths
            .iter()
            .any(|(t, item)| instance_of(path, t) && item.get(method.to_lowercase()).is_some())
    };
    let stray: Vec<_> = requests
        .iter()
        .filter(|(method, path)| !documented(method, path))
        .collect();
    assert!(stray.is_empty(), "not operations of the API: {stray:?}");
    assert!(documented("GET", holdpoint_client::OPENAPI_PATH));
    // The check itself tells a stray path from an operation.
    assert!(!documented("GET", "/api/v1/hold/x"));
    assert!(!documented("PUT", "/api/v1/holds"));
}
