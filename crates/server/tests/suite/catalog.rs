//! Worlds, agents and chats.

use serde_json::json;

use super::{TestServer, audit_after, held, last_seq, question, raise};

fn agent(name: &str) -> serde_json::Value {
    json!({"name": name, "llm": {"base_url": "http://127.0.0.1:9/v1", "model": "m"}, "system_prompt": "You help."})
}

#[tokio::test]
async fn worlds_are_created_found_by_name_or_id_renamed_and_deleted() {
    let t = TestServer::start().await;
    let world = t.world("lab").await;
    let id = world["id"].as_str().unwrap();
    assert_eq!(t.api.get("/api/v1/worlds/lab").await.expect(200), world);
    assert_eq!(
        t.api.get(&format!("/api/v1/worlds/{id}")).await.expect(200),
        world
    );
    let renamed = t
        .api
        .patch(
            "/api/v1/worlds/lab",
            json!({"name": "lab2", "description": "the lab"}),
        )
        .await
        .expect(200);
    assert_eq!(
        (renamed["name"].as_str(), renamed["version"].as_u64()),
        (Some("lab2"), Some(2))
    );
    t.api.get("/api/v1/worlds/lab").await.error(404);

    let (code, _) = t
        .api
        .post("/api/v1/worlds", json!({"name": "lab2"}))
        .await
        .error(409);
    assert!(!code.is_empty());
    for (body, field) in [
        (json!({}), "name: is required"),
        (json!({"name": 5}), "name:"),
        (json!({"name": ""}), "name:"),
        (json!({"name": "x".repeat(1000)}), "name:"),
        (
            json!({"name": "a", "colour": "red"}),
            "colour: is not a known field",
        ),
    ] {
        let (_, message) = t.api.post("/api/v1/worlds", body.clone()).await.error(422);
        assert!(message.contains(field), "{body}: {message}");
    }
    let approver = t.caller("alice", "approver", None).await;
    approver
        .post("/api/v1/worlds", json!({"name": "mine"}))
        .await
        .error(403);
    approver.get("/api/v1/worlds").await.expect(200);

    // A world with a pending hold is not deleted from under it.
    let agent = t.caller("bot", "agent", None).await;
    let hold = held(
        &raise(&agent, "lab2", vec![question("Keep it?", &["yes"])]).await,
        0,
    );
    let (code, message) = t.api.delete("/api/v1/worlds/lab2").await.error(409);
    assert_eq!(code, "holds_pending");
    assert!(message.contains(&hold), "{message}");
    agent
        .post(&format!("/api/v1/holds/{hold}/withdraw"), json!({}))
        .await
        .expect(200);
    t.api.delete("/api/v1/worlds/lab2").await.expect(204);
    t.api.delete("/api/v1/worlds/lab2").await.error(404);
    assert_eq!(t.api.get("/api/v1/worlds").await.expect(200), json!([]));
}

#[tokio::test]
async fn agents_are_managed_by_admins_and_checked() {
    let t = TestServer::start().await;
    t.world("lab").await;
    let created = t
        .api
        .post("/api/v1/worlds/lab/agents", agent("helper"))
        .await
        .expect(201);
    assert_eq!(created["name"], "helper");
    assert_eq!(
        t.api
            .get("/api/v1/worlds/lab/agents/helper")
            .await
            .expect(200),
        created
    );
    let listed = t.api.get("/api/v1/worlds/lab/agents").await.expect(200);
    assert_eq!(listed.as_array().unwrap().len(), 1);
    let changed = t
        .api
        .patch(
            "/api/v1/worlds/lab/agents/helper",
            json!({"system_prompt": "Be brief."}),
        )
        .await
        .expect(200);
    assert_eq!(changed["system_prompt"], "Be brief.");

    t.api
        .post("/api/v1/worlds/lab/agents", agent("helper"))
        .await
        .error(409);
    let mut bad_url = agent("a1");
    bad_url["llm"]["base_url"] = json!("ftp://example");
    let mut bad_tool = agent("a2");
    bad_tool["tools"] = json!("shell_cmd");
    let mut bad_type = agent("a3");
    bad_type["max_steps"] = json!("many");
    for (body, field) in [
        (bad_url, "llm.base_url"),
        (bad_tool, "tools"),
        (bad_type, "max_steps"),
    ] {
        let (_, message) = t
            .api
            .post("/api/v1/worlds/lab/agents", body)
            .await
            .error(422);
        assert!(message.starts_with(field), "{field}: {message}");
    }
    let bot = t.caller("bot", "agent", None).await;
    bot.post("/api/v1/worlds/lab/agents", agent("sneaky"))
        .await
        .error(403);
    t.api
        .get("/api/v1/worlds/lab/agents/nobody")
        .await
        .error(404);
    t.api.get("/api/v1/worlds/nowhere/agents").await.error(404);

    // An agent a chat uses stays.
    t.api
        .post("/api/v1/worlds/lab/chats", json!({"agent": "helper"}))
        .await
        .expect(201);
    t.api
        .delete("/api/v1/worlds/lab/agents/helper")
        .await
        .error(409);
}

#[tokio::test]
async fn chats_are_created_listed_read_and_deleted() {
    let t = TestServer::start().await;
    t.world("lab").await;
    t.api
        .post("/api/v1/worlds/lab/agents", agent("helper"))
        .await
        .expect(201);
    let alice = t.caller("alice", "approver", None).await;
    let chat = alice
        .post(
            "/api/v1/worlds/lab/chats",
            json!({"agent": "helper", "title": "Release"}),
        )
        .await
        .expect(201);
    let id = chat["id"].as_str().unwrap();
    assert_eq!(
        alice
            .get(&format!("/api/v1/worlds/lab/chats/{id}"))
            .await
            .expect(200),
        chat
    );
    assert_eq!(
        alice.get("/api/v1/worlds/lab/chats").await.expect(200),
        json!([chat])
    );
    let messages = alice
        .get(&format!("/api/v1/worlds/lab/chats/{id}/messages"))
        .await
        .expect(200);
    assert_eq!(messages["items"], json!([]));

    alice
        .post("/api/v1/worlds/lab/chats", json!({"agent": "nobody"}))
        .await
        .error(404);
    alice
        .post("/api/v1/worlds/lab/chats", json!({}))
        .await
        .error(422);
    for missing in ["0192f0c0-0000-7000-8000-000000000000", "chat-1"] {
        alice
            .get(&format!("/api/v1/worlds/lab/chats/{missing}"))
            .await
            .error(404);
        alice
            .post(
                &format!("/api/v1/worlds/lab/chats/{missing}/messages"),
                json!({"text": "hi"}),
            )
            .await
            .error(404);
        alice
            .get(&format!("/api/v1/worlds/lab/turns/{missing}"))
            .await
            .error(404);
    }
    alice
        .post(
            &format!("/api/v1/worlds/lab/chats/{id}/messages"),
            json!({"text": 3}),
        )
        .await
        .error(422);
    alice
        .get(&format!("/api/v1/worlds/lab/chats/{id}/messages?after=x"))
        .await
        .error(400);

    // Renamed, then handed to another agent; a change names what is wrong with it.
    t.api
        .post("/api/v1/worlds/lab/agents", agent("reviewer"))
        .await
        .expect(201);
    let path = format!("/api/v1/worlds/lab/chats/{id}");
    let renamed = alice
        .patch(&path, json!({"title": "Release 2"}))
        .await
        .expect(200);
    assert_eq!(
        (renamed["title"].as_str(), renamed["agent"].clone()),
        (Some("Release 2"), chat["agent"].clone())
    );
    let handed = alice
        .patch(&path, json!({"agent": "reviewer"}))
        .await
        .expect(200);
    assert_ne!(handed["agent"], chat["agent"]);
    assert_eq!(handed["title"], "Release 2");
    assert_eq!(alice.get(&path).await.expect(200), handed);
    alice
        .patch(&path, json!({"agent": "nobody"}))
        .await
        .error(404);
    let (_, message) = alice
        .patch(&path, json!({"title": "x".repeat(201)}))
        .await
        .error(422);
    assert!(message.starts_with("title:"), "{message}");
    let (_, message) = alice
        .patch(&path, json!({"colour": "red"}))
        .await
        .error(422);
    assert!(message.contains("colour"), "{message}");

    alice
        .delete(&format!("/api/v1/worlds/lab/chats/{id}"))
        .await
        .expect(204);
    alice
        .get(&format!("/api/v1/worlds/lab/chats/{id}"))
        .await
        .error(404);
}

#[tokio::test]
async fn unknown_routes_and_methods_get_the_error_shape() {
    let t = TestServer::start().await;
    let (code, _) = t.api.get("/api/v1/nothing-here").await.error(404);
    assert_eq!(code, "not_found");
    let (code, _) = t.api.delete("/api/v1/worlds").await.error(405);
    assert_eq!(code, "method_not_allowed");
}

#[tokio::test]
async fn changes_to_worlds_agents_and_chats_are_logged_with_who_made_them() {
    let t = TestServer::start().await;
    let carol = t.caller("carol", "admin", None).await;
    let from = last_seq(&t).await;
    carol
        .post("/api/v1/worlds", json!({"name": "lab"}))
        .await
        .expect(201);
    carol
        .patch("/api/v1/worlds/lab", json!({"description": "the lab"}))
        .await
        .expect(200);
    carol
        .post("/api/v1/worlds/lab/agents", agent("helper"))
        .await
        .expect(201);
    carol
        .patch(
            "/api/v1/worlds/lab/agents/helper",
            json!({"system_prompt": "Be brief."}),
        )
        .await
        .expect(200);
    let chat = carol
        .post("/api/v1/worlds/lab/chats", json!({"agent": "helper"}))
        .await
        .expect(201);
    let chat = chat["id"].as_str().unwrap();
    carol
        .patch(
            &format!("/api/v1/worlds/lab/chats/{chat}"),
            json!({"title": "Plans"}),
        )
        .await
        .expect(200);
    carol
        .delete(&format!("/api/v1/worlds/lab/chats/{chat}"))
        .await
        .expect(204);
    carol
        .delete("/api/v1/worlds/lab/agents/helper")
        .await
        .expect(204);
    carol.delete("/api/v1/worlds/lab").await.expect(204);

    let events = audit_after(&t, from).await;
    let types: Vec<&str> = events
        .iter()
        .map(|e| e["payload"]["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        types,
        [
            "world.created",
            "world.updated",
            "agent.created",
            "agent.updated",
            "chat.created",
            "chat.updated",
            "chat.deleted",
            "agent.deleted",
            "world.deleted"
        ]
    );
    for e in &events {
        assert_eq!(
            e["actor"],
            json!({"source": "person", "name": "carol", "role": "admin"}),
            "{e}"
        );
    }
}

#[tokio::test]
async fn an_empty_change_changes_nothing() {
    let t = TestServer::start().await;
    let world = t.world("lab").await;
    let agent = t
        .api
        .post("/api/v1/worlds/lab/agents", agent("helper"))
        .await
        .expect(201);
    let chat = t
        .api
        .post("/api/v1/worlds/lab/chats", json!({"agent": "helper"}))
        .await
        .expect(201);
    let chat_path = format!("/api/v1/worlds/lab/chats/{}", chat["id"].as_str().unwrap());
    let from = last_seq(&t).await;
    for (path, before) in [
        ("/api/v1/worlds/lab".to_owned(), &world),
        ("/api/v1/worlds/lab/agents/helper".to_owned(), &agent),
        (chat_path.clone(), &chat),
    ] {
        // Nothing named, and the same values again: the resource as it was.
        assert_eq!(t.api.patch(&path, json!({})).await.expect(200), *before);
        assert_eq!(t.api.get(&path).await.expect(200), *before);
    }
    assert_eq!(
        t.api
            .patch("/api/v1/worlds/lab", json!({"name": "lab"}))
            .await
            .expect(200),
        world
    );
    assert_eq!(
        t.api
            .patch(&chat_path, json!({"agent": "helper"}))
            .await
            .expect(200),
        chat
    );
    assert_eq!(audit_after(&t, from).await, Vec::<serde_json::Value>::new());
    assert_eq!(last_seq(&t).await, from);
}
