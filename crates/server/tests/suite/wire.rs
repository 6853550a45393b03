//! What crosses the wire as outside clients see it: the OpenAPI document they generate code
//! from, bodies and query strings that do not fit, and who may call what.

use reqwest::Method;
use serde_json::{Value, json};

use super::{TestServer, held, question, raise};

/// Every `$ref` of `doc` that names nothing in it.
fn dangling_refs(doc: &Value) -> Vec<String> {
    fn walk(node: &Value, doc: &Value, out: &mut Vec<String>) {
        match node {
            Value::Object(map) => {
                if let Some(Value::String(target)) = map.get("$ref") {
                    let found = target
                        .strip_prefix('#')
                        .and_then(|pointer| doc.pointer(pointer));
                    if found.is_none() {
                        out.push(target.clone());
                    }
                }
                map.values().for_each(|v| walk(v, doc, out));
            }
            Value::Array(items) => items.iter().for_each(|v| walk(v, doc, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(doc, doc, &mut out);
    out.sort();
    out.dedup();
    out
}

#[tokio::test]
async fn the_openapi_document_resolves_and_says_who_may_call_what() {
    let t = TestServer::start().await;
    let doc = t
        .api
        .anonymous()
        .get("/api/v1/openapi.json")
        .await
        .expect(200);
    assert_eq!(dangling_refs(&doc), Vec::<String>::new());
    // The test above can fail: a document with a reference to nothing is caught.
    let mut broken = doc.clone();
    broken["paths"]["/healthz"]["get"]["responses"]["200"]["$ref"] =
        json!("#/components/schemas/Nothing");
    assert_eq!(dangling_refs(&broken), vec!["#/components/schemas/Nothing"]);

    for public in [
        "/healthz",
        "/readyz",
        "/metrics",
        "/login",
        "/api/v1/openapi.json",
    ] {
        let op = &doc["paths"][public]["get"];
        assert_eq!(op["security"], json!([]), "{public} is public");
        // And it is, without a token.
        if public != "/login" {
            assert_eq!(t.api.anonymous().get(public).await.status, 200, "{public}");
        }
    }
    let paths = doc["paths"].as_object().unwrap();
    for (path, item) in paths {
        for (method, op) in item.as_object().unwrap() {
            let signed = op.get("security") != Some(&json!([]));
            if signed {
                assert!(op["responses"].get("401").is_some(), "{method} {path}: 401");
            }
            if op.get("requestBody").is_some() {
                for status in ["400", "413", "415", "422"] {
                    let schema = &op["responses"][status]["content"]["application/json"]["schema"];
                    assert_eq!(
                        schema["$ref"], "#/components/schemas/ErrorBody",
                        "{method} {path}: {status}"
                    );
                }
            }
        }
    }
    let list = &doc["paths"]["/api/v1/holds"]["get"];
    for status in ["400", "401", "421"] {
        assert!(
            list["responses"].get(status).is_some(),
            "GET /holds {status}"
        );
    }
    // A role-limited operation says so.
    let tokens = &doc["paths"]["/api/v1/tokens"]["get"]["responses"]["403"]["description"];
    assert!(tokens.as_str().unwrap().contains("admin"), "{tokens}");
}

#[tokio::test]
async fn roles_are_checked_for_every_method_of_a_route() {
    let t = TestServer::start().await;
    let alice = t.caller("alice", "approver", None).await;
    alice.get("/api/v1/tokens").await.error(403);
    // HEAD is answered by the GET handler: it is refused the same way.
    let head = alice
        .send(alice.request(Method::HEAD, "/api/v1/tokens"))
        .await;
    assert_eq!(head.status, 403);
    alice.get("/api/v1/audit/verify").await.error(403);
    alice.get("/api/v1/audit/events").await.expect(200);
    // Without a credential: 401 for routes, unknown paths and methods a route does not take.
    let stranger = t.api.anonymous();
    stranger.get("/api/v1/worlds").await.error(401);
    stranger.get("/api/v1/nothing").await.error(401);
    stranger.delete("/api/v1/worlds").await.error(401);
    // A method a public route does not take is 405, as for anyone.
    stranger.delete("/healthz").await.error(405);
}

#[tokio::test]
async fn a_field_of_the_wrong_type_or_given_twice_is_named() {
    let t = TestServer::start().await;
    t.world("lab").await;
    let agent = t.caller("bot", "agent", None).await;
    let alice = t.caller("alice", "approver", None).await;
    let hold = held(
        &raise(&agent, "lab", vec![question("A?", &["a", "b"])]).await,
        0,
    );
    let decide = format!("/api/v1/holds/{hold}/decision");

    let reply = alice
        .post(&decide, json!({"action": "answer", "options": "a"}))
        .await;
    assert_eq!(reply.status, 422, "{}", reply.text);
    assert_eq!(reply.body["error"]["details"]["field"], "options");
    let message = reply.body["error"]["message"].as_str().unwrap();
    assert!(message.starts_with("options: "), "{message}");

    let twice = r#"{"action": "answer", "options": ["a"], "options": ["b"]}"#;
    let reply = alice
        .send(
            alice
                .request(Method::POST, &decide)
                .header("content-type", "application/json")
                .body(twice),
        )
        .await;
    assert_eq!(reply.status, 422, "{}", reply.text);
    assert_eq!(reply.body["error"]["details"]["field"], "options");
    // Inside a list too, with its path.
    let twice =
        r#"{"items": [{"kind": "question", "kind": "question", "question": "Q", "options": []}]}"#;
    let reply = agent
        .send(
            agent
                .request(Method::POST, "/api/v1/worlds/lab/holds")
                .header("content-type", "application/json")
                .body(twice),
        )
        .await;
    assert_eq!(reply.status, 422, "{}", reply.text);
    assert_eq!(reply.body["error"]["details"]["field"], "items[0].kind");
    // Nothing was decided by any of these.
    alice
        .post(&decide, json!({"action": "answer", "options": ["b"]}))
        .await
        .expect(200);
}

#[tokio::test]
async fn a_body_needs_its_content_type() {
    let t = TestServer::start().await;
    t.world("lab").await;
    let agent = t.caller("bot", "agent", None).await;
    let body = json!({"items": [question("A?", &["a"])]}).to_string();
    let untyped = agent
        .send(
            agent
                .request(Method::POST, "/api/v1/worlds/lab/holds")
                .body(body.clone()),
        )
        .await;
    assert_eq!(untyped.error(415).0, "unsupported_media_type");
    let typed = agent
        .send(
            agent
                .request(Method::POST, "/api/v1/worlds/lab/holds")
                .header("content-type", "application/json; charset=utf-8")
                .body(body),
        )
        .await
        .expect(201);
    // A request with no body at all needs no type.
    let hold = held(&typed, 0);
    agent
        .send(agent.request(Method::POST, &format!("/api/v1/holds/{hold}/withdraw")))
        .await
        .expect(200);
}

#[tokio::test]
async fn every_listing_reads_its_limit_alike() {
    let t = TestServer::start().await;
    let world = t.world("lab").await;
    let listings = [
        "/api/v1/holds".to_owned(),
        "/api/v1/audit/events".to_owned(),
        format!(
            "/api/v1/webhooks/{}/deliveries",
            t.api
                .post(
                    &format!("/api/v1/worlds/{}/webhooks", world["id"].as_str().unwrap()),
                    json!({"url": "http://127.0.0.1:9/hook"}),
                )
                .await
                .expect(201)["webhook"]["id"]
                .as_str()
                .unwrap()
        ),
    ];
    for listing in &listings {
        for bad in ["0", "100000", "-1", "many"] {
            let reply = t.api.get(&format!("{listing}?limit={bad}")).await;
            assert_eq!(reply.status, 400, "{listing}?limit={bad}: {}", reply.text);
            assert_eq!(
                reply.body["error"]["details"]["field"], "limit",
                "{listing}"
            );
        }
        t.api.get(&format!("{listing}?limit=1")).await.expect(200);
        t.api.get(listing).await.expect(200);
    }
    // What a listing's query asks for that cannot be is a 400 too, naming the parameter.
    let beyond = t
        .api
        .get("/api/v1/audit/events?after=9223372036854775808")
        .await;
    assert_eq!(beyond.status, 400, "{}", beyond.text);
    assert_eq!(beyond.body["error"]["details"]["field"], "after");
    let chat_alone = t.api.get("/api/v1/holds?chat=c1").await;
    assert_eq!(chat_alone.status, 400, "{}", chat_alone.text);
    assert_eq!(chat_alone.body["error"]["details"]["field"], "chat");
}

#[tokio::test]
async fn a_request_target_too_long_gets_the_error_shape() {
    let t = TestServer::start().await;
    let long = format!("/api/v1/holds?cursor={}", "9".repeat(20_000));
    let reply = t.api.get(&long).await;
    assert_eq!(reply.error(414).0, "uri_too_long");
}

#[tokio::test]
async fn a_path_that_is_not_utf8_gets_the_error_shape() {
    // Found by fuzz/fuzz_targets/api.rs: the path extractor refused `%80` in plain text.
    let t = TestServer::start().await;
    for path in [
        "/api/v1/batches/0190a0a0-0000-7000%8000-000000000000/decision",
        "/api/v1/holds/%C3%28",
        "/api/v1/worlds/%FF/agents",
    ] {
        let reply = t.api.post(path, json!({"action": "deny"})).await;
        assert_eq!(reply.status, 400, "{path}: {}", reply.text);
        assert_eq!(reply.body["error"]["code"], "invalid_input", "{path}");
    }
    // Escapes that decode to text, and `%` that escapes nothing, reach the routes as before.
    t.api.get("/api/v1/worlds/%C3%A9t%C3%A9").await.error(404);
    t.api.get("/api/v1/worlds/100%").await.error(404);
}
