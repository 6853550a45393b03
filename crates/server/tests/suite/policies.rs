//! Worlds' own policies over the API: who may read and set them, refusals that name every
//! problem, versions, explain naming the layer, and reloading the base file.

use serde_json::{Value, json};

use super::{Api, TestServer, approval, audit_after, last_seq};

const BASE: &str = r#"
mode = "manual"

[[rules]]
name = "no rm"
tools = ["shell_cmd"]
action = "deny"
command = { program = "rm" }
locked = true
"#;

const ALLOW_SHELL: &str =
    "[[rules]]\nname = \"shell ok\"\ntools = [\"shell_cmd\"]\naction = \"allow\"\n";

fn shell(command: &str) -> Value {
    approval("shell_cmd", json!({ "command": command }))
}

/// Asks for `items` in `world`: 201 when something was held, 200 when all was decided.
async fn raise(agent: &Api, world: &str, items: Vec<Value>) -> Value {
    let reply = agent
        .post(
            &format!("/api/v1/worlds/{world}/holds"),
            json!({ "items": items }),
        )
        .await;
    assert!(matches!(reply.status, 200 | 201), "{}", reply.text);
    serde_json::from_str(&reply.text).unwrap()
}

#[tokio::test]
async fn admins_set_a_worlds_policy_approvers_read_it_and_agents_cannot() {
    let t = TestServer::with(BASE, |_| {}).await;
    t.world("lab").await;
    t.world("prod").await;
    let alice = t.caller("alice", "approver", None).await;
    let bot = t.caller("bot", "agent", None).await;

    let state = alice.get("/api/v1/worlds/lab/policy").await.expect(200);
    assert!(state.get("current").is_none(), "{state}");
    assert_eq!(state["locked"], json!(["no rm"]));

    let body = json!({ "text": ALLOW_SHELL });
    let (code, _) = alice
        .put("/api/v1/worlds/lab/policy", body.clone())
        .await
        .error(403);
    assert_eq!(code, "forbidden");
    bot.get("/api/v1/worlds/lab/policy").await.error(403);

    let before = last_seq(&t).await;
    let v1 = t
        .api
        .put("/api/v1/worlds/lab/policy", body)
        .await
        .expect(200);
    assert_eq!(v1["version"], 1);
    assert_eq!(v1["by"]["name"], "admin");

    // In force for the next call, in that world only; the locked deny still binds it.
    let r = raise(&bot, "lab", vec![shell("cat x"), shell("rm -rf x")]).await;
    assert_eq!(r["results"][0]["result"], "allowed", "{r}");
    assert_eq!(r["results"][1]["result"], "denied", "{r}");
    let r = raise(&bot, "prod", vec![shell("cat x")]).await;
    assert_eq!(r["results"][0]["result"], "held", "{r}");
    let hold = &r["results"][0]["hold"];
    assert!(
        hold["policy"]["base"].as_str().unwrap().len() == 64,
        "{hold}"
    );

    let e = alice
        .post(
            "/api/v1/policy/explain",
            json!({"world": "lab", "tool": "shell_cmd", "arguments": {"command": "rm x"}}),
        )
        .await
        .expect(200);
    assert_eq!(
        (e["decision"].as_str(), e["layer"].as_str()),
        (Some("deny"), Some("base"))
    );
    assert_eq!(e["decided_by"]["rule"]["layer"], "base");
    let e = alice
        .post(
            "/api/v1/policy/explain",
            json!({"world": "lab", "tool": "shell_cmd", "arguments": {"command": "ls"}}),
        )
        .await
        .expect(200);
    assert_eq!(
        (e["decision"].as_str(), e["layer"].as_str()),
        (Some("allow"), Some("world"))
    );

    // The change is in the audit log with its author and digest, and the chain holds.
    let changes: Vec<Value> = audit_after(&t, before)
        .await
        .into_iter()
        .filter(|e| e["payload"]["type"] == "policy.changed")
        .collect();
    assert_eq!(changes.len(), 1);
    assert_eq!(changes[0]["actor"]["name"], "admin");
    assert_eq!(changes[0]["payload"]["digest"], v1["digest"]);
    assert_eq!(changes[0]["payload"]["version"], 1);
    let verified = t.api.get("/api/v1/audit/verify").await.expect(200);
    assert_eq!(verified["intact"], true, "{verified}");

    let history = alice
        .get("/api/v1/worlds/lab/policy/history")
        .await
        .expect(200);
    assert_eq!(history.as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn an_invalid_policy_is_refused_with_every_problem_named() {
    let t = TestServer::with(BASE, |_| {}).await;
    t.world("lab").await;
    t.api
        .put("/api/v1/worlds/lab/policy", json!({ "text": ALLOW_SHELL }))
        .await
        .expect(200);
    let broken = r#"
mode_floor = "manual"

[[rules]]
name = "curl"
tools = ["shell_cmd"]
action = "deny"
command = { program = "curl" }
must_not_match = [{ tool = "shell_cmd", args = { command = "curl x" } }]
"#;
    let reply = t
        .api
        .put("/api/v1/worlds/lab/policy", json!({ "text": broken }))
        .await;
    assert_eq!(reply.status, 422, "{}", reply.text);
    let body: Value = serde_json::from_str(&reply.text).unwrap();
    assert_eq!(body["error"]["code"], "invalid_policy");
    let paths: Vec<&str> = body["error"]["details"]["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["path"].as_str().unwrap())
        .collect();
    // Both at once: the floor is the base's alone, and the example fails.
    assert_eq!(
        paths,
        ["mode_floor", "rules[0].must_not_match[0]"],
        "{body}"
    );
    // With the examples fixed, the floor alone.
    let floor = broken.replace("must_not_match", "must_match");
    let reply = t
        .api
        .put("/api/v1/worlds/lab/policy", json!({ "text": floor }))
        .await;
    let body: Value = serde_json::from_str(&reply.text).unwrap();
    assert_eq!(
        body["error"]["details"]["problems"][0]["path"],
        "mode_floor"
    );

    let state = t.api.get("/api/v1/worlds/lab/policy").await.expect(200);
    assert_eq!(state["current"]["version"], 1);
    assert_eq!(state["current"]["text"], ALLOW_SHELL);
}

#[tokio::test]
async fn reload_reads_the_file_again_and_keeps_the_old_policy_when_it_is_broken() {
    let t = TestServer::with(BASE, |_| {}).await;
    t.world("lab").await;
    let bot = t.caller("bot", "agent", None).await;
    let file = t.server.app().config().policy_file.clone().unwrap();

    std::fs::write(&file, "mode = \"sometimes\"\n").unwrap();
    let (code, message) = t
        .api
        .post("/api/v1/policy/reload", json!({}))
        .await
        .error(422);
    assert_eq!(code, "invalid_policy");
    assert!(message.contains("mode"), "{message}");
    let r = raise(&bot, "lab", vec![shell("rm x")]).await;
    assert_eq!(r["results"][0]["result"], "denied", "{r}");

    std::fs::write(&file, "mode = \"auto_approve\"\n").unwrap();
    let alice = t.caller("alice", "approver", None).await;
    alice
        .post("/api/v1/policy/reload", json!({}))
        .await
        .error(403);
    let done = t
        .api
        .post("/api/v1/policy/reload", json!({}))
        .await
        .expect(200);
    assert_eq!(done["changed"], true);
    let r = raise(&bot, "lab", vec![shell("rm x")]).await;
    assert_eq!(r["results"][0]["result"], "allowed", "{r}");
}

#[tokio::test]
async fn a_rule_suggested_from_a_decision_allows_that_call_and_not_its_neighbours() {
    let t = TestServer::with("mode = \"manual\"\n", |_| {}).await;
    t.world("lab").await;
    let bot = t.caller("bot", "agent", None).await;
    let alice = t.caller("alice", "approver", None).await;
    let r = raise(&bot, "lab", vec![shell("git push origin main")]).await;
    let hold = r["results"][0]["hold"]["id"].as_str().unwrap().to_owned();
    alice
        .post(
            &format!("/api/v1/holds/{hold}/decision"),
            json!({"action": "approve"}),
        )
        .await
        .expect(200);
    bot.get(&format!("/api/v1/holds/{hold}/suggested-rule"))
        .await
        .error(403);
    let s = alice
        .get(&format!("/api/v1/holds/{hold}/suggested-rule"))
        .await
        .expect(200);
    assert_eq!(s["action"], "allow");
    let rule = s["rule"].as_str().unwrap();
    assert!(
        rule.contains(r#"command = { program = "git", args = ["push", "origin", "main"] }"#),
        "{rule}"
    );

    // Added to the world's policy in one step, it is checked by its own example and decides
    // the next call; a neighbouring call is still asked.
    t.api
        .put(
            "/api/v1/worlds/lab/policy",
            json!({ "text": format!("mode = \"manual\"\n\n{rule}") }),
        )
        .await
        .expect(200);
    let r = raise(
        &bot,
        "lab",
        vec![shell("git push origin main"), shell("git push --force")],
    )
    .await;
    assert_eq!(r["results"][0]["result"], "allowed", "{r}");
    assert_eq!(r["results"][1]["result"], "held", "{r}");

    let q = raise(
        &bot,
        "lab",
        vec![json!({"kind": "question", "question": "Go?", "options": [{"id": "yes", "label": "Yes"}, {"id": "no", "label": "No"}]})],
    )
    .await;
    let question = q["results"][0]["hold"]["id"].as_str().unwrap();
    let (code, _) = alice
        .get(&format!("/api/v1/holds/{question}/suggested-rule"))
        .await
        .error(422);
    assert_eq!(code, "invalid_input");
}

#[tokio::test]
async fn a_rule_suggested_from_an_edited_approval_allows_what_was_approved_not_what_was_asked() {
    let t = TestServer::with("mode = \"manual\"\n", |_| {}).await;
    t.world("lab").await;
    let bot = t.caller("bot", "agent", None).await;
    let alice = t.caller("alice", "approver", None).await;
    let r = raise(&bot, "lab", vec![shell("git push --force origin main")]).await;
    let hold = r["results"][0]["hold"]["id"].as_str().unwrap().to_owned();
    alice
        .post(
            &format!("/api/v1/holds/{hold}/decision"),
            json!({"action": "edit", "arguments": {"command": "git push origin main"}}),
        )
        .await
        .expect(200);
    let s = alice
        .get(&format!("/api/v1/holds/{hold}/suggested-rule"))
        .await
        .expect(200);
    assert_eq!(s["action"], "allow");
    let rule = s["rule"].as_str().unwrap();
    assert!(!rule.contains("--force"), "{rule}");
    assert!(
        rule.contains(r#"command = { program = "git", args = ["push", "origin", "main"] }"#),
        "{rule}"
    );

    // In force, it allows the call as approved; the call as asked is still asked.
    t.api
        .put(
            "/api/v1/worlds/lab/policy",
            json!({ "text": format!("mode = \"manual\"\n\n{rule}") }),
        )
        .await
        .expect(200);
    let r = raise(
        &bot,
        "lab",
        vec![
            shell("git push origin main"),
            shell("git push --force origin main"),
        ],
    )
    .await;
    assert_eq!(r["results"][0]["result"], "allowed", "{r}");
    assert_eq!(r["results"][1]["result"], "held", "{r}");
}

#[tokio::test]
async fn a_deleted_worlds_policy_goes_with_it() {
    let t = TestServer::with(BASE, |_| {}).await;
    let old = t.world("lab").await["id"].as_str().unwrap().to_owned();
    t.api
        .put("/api/v1/worlds/lab/policy", json!({ "text": ALLOW_SHELL }))
        .await
        .expect(200);
    let engine = t.server.app().engine();
    assert_eq!(engine.policy_for(&old).1.world, Some(1));

    t.api.delete("/api/v1/worlds/lab").await.expect(204);
    // Neither in force nor stored: nothing of it is loaded again or served.
    assert_eq!(engine.policy_for(&old).1.world, None);
    let uuid = uuid::Uuid::parse_str(&old).unwrap();
    let state = engine.world_policy(uuid).await.unwrap();
    assert!(state.current.is_none(), "{state:?}");
    assert!(engine.world_policy_history(uuid).await.unwrap().is_empty());

    // A new world of the same name starts from the base.
    t.world("lab").await;
    let state = t.api.get("/api/v1/worlds/lab/policy").await.expect(200);
    assert!(state.get("current").is_none(), "{state}");
    let bot = t.caller("bot", "agent", None).await;
    let r = raise(&bot, "lab", vec![shell("cat notes")]).await;
    assert_eq!(r["results"][0]["result"], "held", "{r}");
}
