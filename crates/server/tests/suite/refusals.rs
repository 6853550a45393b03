//! What outside testing found the API took, or refused unclearly (issue 27): names that read
//! as ids, control characters in an agent's LLM headers, tokens of deleted worlds, query and
//! body errors in the parser's words, and PATCHes without a body.

use reqwest::Method;
use serde_json::{Value, json};

use super::{TestServer, held, lab_chat, question, raise};

/// The error's `details.field` and message, after checking the status.
#[track_caller]
fn refused(reply: super::Reply, status: u16) -> (String, String) {
    let body = reply.expect(status);
    (
        body["error"]["details"]["field"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    )
}

#[tokio::test]
async fn a_world_or_agent_named_like_an_id_is_refused() {
    let t = TestServer::start().await;
    let lab = t.world("lab").await;
    let lab_id = lab["id"].as_str().unwrap();
    // Another world's id as a name: `/worlds/{that id}` would always find the other world.
    let (field, message) = refused(
        t.api.post("/api/v1/worlds", json!({"name": lab_id})).await,
        422,
    );
    assert_eq!(field, "name");
    assert!(message.contains("must not be a UUID"), "{message}");
    // Any UUID, in any of its spellings, reads as an id.
    for name in [
        "0190a6a4-4b5e-7c3d-8e9f-0a1b2c3d4e5f",
        "0190a6a44b5e7c3d8e9f0a1b2c3d4e5f",
    ] {
        let (field, _) = refused(
            t.api.post("/api/v1/worlds", json!({"name": name})).await,
            422,
        );
        assert_eq!(field, "name", "{name}");
    }
    // Renaming to one is refused too, and the world keeps its name.
    let other = t.world("other").await;
    let (field, _) = refused(
        t.api
            .patch("/api/v1/worlds/other", json!({"name": lab_id}))
            .await,
        422,
    );
    assert_eq!(field, "name");
    let still = t.api.get("/api/v1/worlds/other").await.expect(200);
    assert_eq!(still["version"], other["version"]);
    // Agents are found by id or name alike.
    let (field, _) = refused(
        t.api
            .post(
                "/api/v1/worlds/lab/agents",
                json!({"name": lab_id, "llm": {"base_url": "http://127.0.0.1:9/v1", "model": "m"}}),
            )
            .await,
        422,
    );
    assert_eq!(field, "name");
    // A name that merely looks like part of one is fine.
    t.world("0190a6a4-4b5e").await;
}

#[tokio::test]
async fn control_characters_in_an_agents_llm_headers_are_refused() {
    let t = TestServer::start().await;
    t.world("lab").await;
    let agent = |headers: Value| json!({"name": "helper", "llm": {"base_url": "http://127.0.0.1:9/v1", "model": "m", "headers": headers}});
    for value in [
        "a\r\nX-Injected: 1",
        "a\nb",
        "nul\u{0}",
        "tab\there",
        "del\u{7f}",
    ] {
        let (field, message) = refused(
            t.api
                .post("/api/v1/worlds/lab/agents", agent(json!({"X-Foo": value})))
                .await,
            422,
        );
        assert_eq!(field, "llm.headers.X-Foo", "{value:?}");
        assert!(message.contains("control characters"), "{message}");
    }
    for name in ["X Foo", "X-Foo\r\n", "", "Bad:Name"] {
        let (field, message) = refused(
            t.api
                .post("/api/v1/worlds/lab/agents", agent(json!({name: "v"})))
                .await,
            422,
        );
        assert_eq!(field, "llm.headers", "{name:?}");
        assert!(message.contains("is not a header name"), "{message}");
    }
    // Nothing was created; good headers are taken.
    assert_eq!(
        t.api.get("/api/v1/worlds/lab/agents").await.expect(200),
        json!([])
    );
    t.api
        .post(
            "/api/v1/worlds/lab/agents",
            agent(json!({"HTTP-Referer": "https://example.com/app", "X-Title": "Holdpoint"})),
        )
        .await
        .expect(201);
    // A change is checked the same way, and leaves the agent as it was.
    let (field, _) = refused(
        t.api
            .patch(
                "/api/v1/worlds/lab/agents/helper",
                json!({"llm": {"base_url": "http://127.0.0.1:9/v1", "model": "m", "headers": {"X-Foo": "a\r\nb"}}}),
            )
            .await,
        422,
    );
    assert_eq!(field, "llm.headers.X-Foo");
    let kept = t
        .api
        .get("/api/v1/worlds/lab/agents/helper")
        .await
        .expect(200);
    assert_eq!(kept["llm"]["headers"]["X-Title"], "Holdpoint");
    assert_eq!(kept["version"], 1);
}

#[tokio::test]
async fn a_token_of_a_deleted_world_lists_as_such_and_stays_limited() {
    let t = TestServer::start().await;
    t.world("lab").await;
    let token = t.token("pat", "approver", Some("lab")).await;
    let pat = t.api.as_token(&token);
    let listed = |tokens: Value| {
        tokens
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["name"] == "pat")
            .unwrap()
            .clone()
    };
    let before = listed(t.api.get("/api/v1/tokens").await.expect(200));
    assert_eq!(before["world"], "lab");
    assert!(before.get("world_deleted").is_none(), "{before}");

    t.api.delete("/api/v1/worlds/lab").await.expect(204);
    let after = listed(t.api.get("/api/v1/tokens").await.expect(200));
    assert_eq!(after["world_deleted"], true, "{after}");
    assert!(after.get("world").is_none(), "{after}");
    // A token of every world does not say so.
    let admin = t
        .api
        .get("/api/v1/tokens")
        .await
        .expect(200)
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["role"] == "admin")
        .unwrap()
        .clone();
    assert!(admin.get("world_deleted").is_none(), "{admin}");

    // Still limited: other worlds, a world of the old name and their holds do not exist
    // for it.
    t.world("other").await;
    t.world("lab").await;
    let hold = held(
        &raise(&t.api, "other", vec![question("Ship?", &["yes", "no"])]).await,
        0,
    );
    assert_eq!(pat.get("/api/v1/worlds").await.expect(200), json!([]));
    pat.get("/api/v1/worlds/other").await.expect(404);
    pat.get("/api/v1/worlds/lab").await.expect(404);
    let holds = pat.get("/api/v1/holds").await.expect(200);
    assert_eq!(holds["items"], json!([]), "{holds}");
    pat.get(&format!("/api/v1/holds/{hold}")).await.expect(404);
    pat.get("/api/v1/holds?world=other").await.expect(404);
}

#[tokio::test]
async fn a_chat_filter_without_a_world_is_a_documented_400() {
    let t = TestServer::start().await;
    let (field, message) = refused(t.api.get("/api/v1/events?chat=c1").await, 400);
    assert_eq!(field, "chat");
    assert!(message.contains("needs a world"), "{message}");
    let doc = t.api.get("/api/v1/openapi.json").await.expect(200);
    let responses = &doc["paths"]["/api/v1/events"]["get"]["responses"];
    assert!(responses.get("400").is_some(), "{responses}");
    assert!(responses.get("422").is_none(), "{responses}");
}

#[tokio::test]
async fn every_patch_needs_a_body() {
    let t = TestServer::start().await;
    let chat = lab_chat(&t, "http://127.0.0.1:9/v1", Some("first")).await;
    let doc = t.api.get("/api/v1/openapi.json").await.expect(200);
    let patches: Vec<String> = doc["paths"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, item)| item.get("patch").is_some())
        .map(|(path, _)| {
            path.replace("{world}", "lab")
                .replace("{agent}", "helper")
                .replace("{chat}", &chat)
        })
        .collect();
    assert_eq!(patches.len(), 3, "{patches:?}");
    for path in &patches {
        assert!(!path.contains('{'), "{path}");
        let before = t.api.get(path).await.expect(200);
        // No body at all, with or without a type, or only white space.
        for request in [
            t.api.request(Method::PATCH, path),
            t.api
                .request(Method::PATCH, path)
                .header("content-type", "application/json"),
            t.api
                .request(Method::PATCH, path)
                .header("content-type", "application/json")
                .body(" \n"),
        ] {
            let body = t.api.send(request).await.expect(400);
            assert_eq!(body["error"]["code"], "missing_body", "{path}: {body}");
            let message = body["error"]["message"].as_str().unwrap();
            assert!(message.contains("JSON object"), "{message}");
        }
        // Not an object either.
        for wrong in [json!(null), json!([]), json!("x")] {
            let reply = t.api.patch(path, wrong.clone()).await;
            assert_eq!(reply.status, 422, "{path} {wrong}: {}", reply.text);
        }
        assert_eq!(t.api.get(path).await.expect(200), before, "{path}");
        // An empty object is a change of nothing, on purpose.
        assert_eq!(t.api.patch(path, json!({})).await.expect(200), before);
    }
}

#[tokio::test]
async fn query_errors_say_what_is_allowed() {
    let t = TestServer::start().await;
    let world = t.world("lab").await;
    let hook = t
        .api
        .post(
            &format!("/api/v1/worlds/{}/webhooks", world["id"].as_str().unwrap()),
            json!({"url": "http://127.0.0.1:9/hook"}),
        )
        .await
        .expect(201)["webhook"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let chat = lab_chat_in(&t).await;
    let cases = [
        (
            "/api/v1/holds?limit=-1",
            "limit",
            "limit: must be a whole number from 1 to 500",
        ),
        (
            "/api/v1/holds?limit=",
            "limit",
            "limit: must be a whole number from 1 to 500",
        ),
        (
            "/api/v1/audit/events?limit=many",
            "limit",
            "limit: must be a whole number from 1 to 1000",
        ),
        (
            "/api/v1/audit/events?after=-1",
            "after",
            "after: must be a whole number from 0 to 9223372036854775807",
        ),
        (
            "/api/v1/audit/events?after=99999999999999999999",
            "after",
            "after: must be a whole number from 0 to 9223372036854775807",
        ),
        (
            &format!("/api/v1/webhooks/{hook}/deliveries?limit=1.5"),
            "limit",
            "limit: must be a whole number from 1 to 1000",
        ),
        (
            &format!("/api/v1/worlds/lab/chats/{chat}/messages?after=x"),
            "after",
            "after: must be a whole number from 0 to 9223372036854775807",
        ),
        (
            "/api/v1/holds?batch=zz",
            "batch",
            "batch: \"zz\" is not a valid batch id (expected a UUID)",
        ),
        (
            "/api/v1/audit/events?hold=zz",
            "hold",
            "hold: \"zz\" is not a valid hold id (expected a UUID)",
        ),
    ];
    for (path, field, said) in cases {
        let (got_field, message) = refused(t.api.get(path).await, 400);
        assert_eq!(got_field, field, "{path}");
        assert_eq!(message, said, "{path}");
    }
    // The enumerations already said what they take.
    let (_, message) = refused(t.api.get("/api/v1/holds?kind=both").await, 400);
    assert!(message.contains("`approval`"), "{message}");
}

#[tokio::test]
async fn body_errors_say_what_is_allowed() {
    let t = TestServer::start().await;
    t.world("lab").await;
    let (field, message) = refused(
        t.api
            .post(
                "/api/v1/batches/0190a6a4-4b5e-7c3d-8e9f-0a1b2c3d4e5f/decision",
                json!({"seen": [{"hold": "zz", "digest": "d"}], "decision": {"action": "deny"}}),
            )
            .await,
        422,
    );
    assert_eq!(field, "seen[0].hold");
    assert_eq!(
        message,
        "seen[0].hold: \"zz\" is not a valid hold id (expected a UUID)"
    );
    let (field, message) = refused(
        t.api
            .post(
                "/api/v1/worlds/lab/agents",
                json!({"name": "a", "llm": {"base_url": "http://127.0.0.1:9/v1", "model": "m"}, "max_steps": -1}),
            )
            .await,
        422,
    );
    assert_eq!(field, "max_steps");
    assert!(
        message.contains("expected a whole number from 0 to 4294967295"),
        "{message}"
    );
    assert!(!message.contains("u32"), "{message}");
}

/// A chat in `lab` (which exists), with an agent on an LLM nobody calls.
async fn lab_chat_in(t: &TestServer) -> String {
    t.api
        .post(
            "/api/v1/worlds/lab/agents",
            json!({"name": "helper", "llm": {"base_url": "http://127.0.0.1:9/v1", "model": "m"}}),
        )
        .await
        .expect(201);
    t.api
        .post("/api/v1/worlds/lab/chats", json!({"agent": "helper"}))
        .await
        .expect(201)["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// The document says what the server checks, so that a request built from it is taken: the
/// refusals above are in its schemas as lengths, patterns, least items and ranges.
#[tokio::test]
async fn the_document_says_what_the_server_checks() {
    let t = TestServer::start().await;
    let doc = t.api.get("/api/v1/openapi.json").await.expect(200);
    let schema = |name: &str| doc["components"]["schemas"][name].clone();
    let property = |name: &str, field: &str| schema(name)["properties"][field].clone();

    assert_eq!(property("NewHolds", "items")["minItems"], 1);
    for (owner, field) in [
        ("NewWorld", "name"),
        ("WorldChanges", "name"),
        ("NewAgent", "name"),
        ("AgentChanges", "name"),
    ] {
        assert_eq!(
            property(owner, field)["pattern"],
            "^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$",
            "{owner}.{field}"
        );
    }
    assert_eq!(property("NewAgent", "max_steps")["minimum"], 1);
    assert_eq!(property("NewAgent", "max_steps")["maximum"], 200);
    assert_eq!(property("LlmSettings", "temperature")["maximum"], 2.0);
    let headers = property("LlmSettings", "headers");
    assert!(headers["propertyNames"]["pattern"].is_string(), "{headers}");
    assert_eq!(headers["additionalProperties"]["maxLength"], 8192);
    assert_eq!(property("NewToken", "name")["maxLength"], 100);
    assert!(property("Withdraw", "reason")["pattern"].is_string());

    // An item of a request is an approval or a question, `kind` among their fields: each
    // variant's object refuses unknown fields, so `kind` must be one of its properties.
    let items = schema("HoldRequest")["oneOf"].as_array().unwrap().clone();
    assert_eq!(items.len(), 2);
    for (item, kind) in items.iter().zip(["approval", "question"]) {
        assert_eq!(item["properties"]["kind"]["enum"], json!([kind]), "{item}");
        assert!(
            item["required"]
                .as_array()
                .unwrap()
                .contains(&json!("kind")),
            "{item}"
        );
        assert_eq!(item["additionalProperties"], false, "{item}");
    }
    // "Decide all" offers only the actions it takes.
    let batch = schema("DecideBatchRequest")["properties"]["decision"]["oneOf"].clone();
    let actions: Vec<Value> = batch
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["properties"]["action"]["enum"][0].clone())
        .collect();
    assert_eq!(
        actions,
        vec![json!("approve"), json!("deny"), json!("deny_stop")]
    );

    // Query parameters: a page's limit and a position's range, a listing's statuses.
    let holds = doc["paths"]["/api/v1/holds"]["get"]["parameters"]
        .as_array()
        .unwrap()
        .clone();
    let param = |name: &str| holds.iter().find(|p| p["name"] == name).unwrap()["schema"].clone();
    assert_eq!(param("limit")["minimum"], 1);
    assert_eq!(param("limit")["maximum"], 500);
    assert!(
        param("status")["pattern"]
            .as_str()
            .unwrap()
            .contains("timed_out")
    );
    // Headers of decisions.
    let decide = doc["paths"]["/api/v1/holds/{hold}/decision"]["post"]["parameters"]
        .as_array()
        .unwrap()
        .clone();
    for header in ["Holdpoint-Via", "Idempotency-Key"] {
        let p = decide.iter().find(|p| p["name"] == header).unwrap();
        assert_eq!(p["schema"]["maxLength"], 200, "{header}");
        assert_eq!(p["schema"]["minLength"], 1, "{header}");
    }
    // The live stream is text, each message's data an Event.
    let live = &doc["paths"]["/api/v1/events"]["get"]["responses"]["200"];
    assert_eq!(
        live["content"]["text/event-stream"]["schema"]["type"], "string",
        "{live}"
    );
    assert!(doc["components"]["schemas"]["Event"].is_object());
}

/// What the document allows, the server takes: a request at the edges of each schema.
#[tokio::test]
async fn requests_at_the_schemas_edges_are_taken() {
    let t = TestServer::start().await;
    t.api
        .post(
            "/api/v1/worlds",
            json!({"name": format!("a{}", "b".repeat(63)), "description": "d".repeat(4096)}),
        )
        .await
        .expect(201);
    t.world("lab").await;
    t.api
        .post(
            "/api/v1/worlds/lab/agents",
            json!({
                "name": "helper",
                "llm": {
                    "base_url": "https://llm.example/v1",
                    "model": "m".repeat(200),
                    "api_key_env": "KEY_1",
                    "temperature": 2.0,
                    "headers": {"X-Long": "v".repeat(8192), "!#$%&'*+.^_`|~-": "x"}
                },
                "system_prompt": "p".repeat(65536),
                "max_steps": 200
            }),
        )
        .await
        .expect(201);
    let raised = t
        .api
        .post(
            "/api/v1/worlds/lab/holds",
            json!({"chat": "c".repeat(200), "items": [question("Ship?", &["yes", "no"])]}),
        )
        .await
        .expect(201);
    let hold = held(&raised, 0);
    t.api
        .post(
            &format!("/api/v1/holds/{hold}/withdraw"),
            json!({"reason": format!("line one\n\t{}", "r".repeat(4000))}),
        )
        .await
        .expect(200);
}
