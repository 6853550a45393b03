//! Several `holdpoint serve` processes on one PostgreSQL database are one service: what is
//! raised on one node is seen, decided and waited on from the others, the 32-way decision
//! race has one winner across nodes, a token revoked on one node is refused by the others,
//! an idempotency key means the same request on every node, and a world's policy set through
//! one node is in force on the others for their next call.

use holdpoint_test_support::PATIENCE;
use holdpoint_test_support::http::{Api, Sse, SseMessage};
use holdpoint_test_support::llm::{ScriptedLlm, Step, call};
use holdpoint_test_support::pg::TempSchema;
use reqwest::Method;
use serde_json::{Value, json};
use tempfile::TempDir;

use super::cluster::{Nodes, Running};
use super::serve::{held_turn, wait_until_in_flight};

/// Three nodes on one database schema, ready; the directory they share.
async fn three(schema: &TempSchema) -> (TempDir, Running) {
    let dir = tempfile::tempdir().unwrap();
    let nodes = Nodes::new(dir.path(), &schema.url, None)
        .start_ready(3)
        .await;
    (dir, nodes)
}

/// World `lab` and an agent token for it, made on `api`.
async fn lab_agent(api: &Api) -> String {
    api.post("/api/v1/worlds", json!({"name": "lab"}))
        .await
        .expect(201);
    token(api, "bot", "agent", Some("lab")).await.0
}

/// A new token's secret and id.
async fn token(api: &Api, name: &str, role: &str, world: Option<&str>) -> (String, String) {
    let created = api
        .post(
            "/api/v1/tokens",
            json!({"name": name, "role": role, "world": world}),
        )
        .await
        .expect(201);
    (
        created["token"].as_str().unwrap().to_owned(),
        created["info"]["id"].as_str().unwrap().to_owned(),
    )
}

/// The next message of type `event` on `stream`, within [`PATIENCE`] (heartbeats keep a
/// stream alive, so each read alone would wait for ever).
async fn seen(stream: &mut Sse, event: &str) -> SseMessage {
    tokio::time::timeout(PATIENCE, stream.next_of(event))
        .await
        .unwrap_or_else(|_| panic!("no {event} within {PATIENCE:?}"))
}

fn deploy() -> Value {
    json!({"items": [{"kind": "approval", "tool": "deploy", "arguments": {"env": "prod"}}]})
}

/// Raises `deploy` as `agent`; the hold's id.
async fn raise(agent: &Api) -> String {
    let raised = agent
        .post("/api/v1/worlds/lab/holds", deploy())
        .await
        .expect(201);
    raised["results"][0]["hold"]["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_raised_on_one_node_is_seen_decided_and_waited_on_across_nodes() {
    let Some(schema) = TempSchema::new().await else {
        return;
    };
    let llm = ScriptedLlm::start(vec![
        Step::calls(vec![call(
            "c1",
            "shell_cmd",
            json!({"command": "echo ran"}),
        )]),
        Step::text("Done."),
    ])
    .await;
    let (_dir, nodes) = three(&schema).await;
    let [a, b, c] = [0, 1, 2].map(|i| nodes.admins[i].clone());
    // Opened before the world exists (it is made with the turn), so unfiltered.
    let mut on_b = b.events("", None).await;
    let mut on_c = c.events("", None).await;

    // A turn on node A stops at a hold; nodes B and C show it live.
    let (turn, hold) = held_turn(&a, &llm, "check").await;
    for stream in [&mut on_b, &mut on_c] {
        let created = seen(stream, "hold.created").await;
        assert_eq!(created.data["hold"], hold.as_str());
    }
    // A long poll on node A is answered by a decision taken on node C.
    let waiting = {
        let a = a.clone();
        let hold = hold.clone();
        tokio::spawn(async move {
            a.get(&format!("/api/v1/holds/{hold}/wait?timeout=2m"))
                .await
        })
    };
    wait_until_in_flight(&a, "/api/v1/holds/{hold}/wait").await;
    c.post(
        &format!("/api/v1/holds/{hold}/decision"),
        json!({"action": "approve"}),
    )
    .await
    .expect(200);
    let waited = waiting.await.unwrap().expect(200);
    assert_eq!(waited["decided"], true);
    assert_eq!(waited["hold"]["status"], "approved");
    // The turn on node A goes on: the call runs there and the turn finishes.
    let decided = seen(&mut on_b, "hold.decided").await;
    assert_eq!(decided.data["hold"], hold.as_str());
    let finished = seen(&mut on_b, "turn.finished").await;
    assert_eq!(finished.data["payload"]["turn"], turn.as_str());
    let result = llm.wait_for_requests(2).await[1].tool_result("c1").unwrap();
    assert!(result.to_string().contains("ran"), "{result}");

    // A stream resumed on node B after the hold was raised replays the decision, with the
    // same position it had live.
    let created_at = decided.id.unwrap() - 1;
    let mut resumed = b.events("?world=lab", Some(created_at)).await;
    let replayed = seen(&mut resumed, "hold.decided").await;
    assert_eq!(replayed.id, decided.id);
    assert_eq!(replayed.data["hold"], hold.as_str());
    nodes.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thirty_two_decisions_racing_on_three_nodes_have_one_winner() {
    let Some(schema) = TempSchema::new().await else {
        return;
    };
    let (_dir, nodes) = three(&schema).await;
    let agent = nodes.admins[0].as_token(&lab_agent(&nodes.admins[0]).await);
    let hold = raise(&agent).await;
    let mut racers = Vec::new();
    for i in 0..32 {
        let api = nodes.admins[i % 3].clone();
        let path = format!("/api/v1/holds/{hold}/decision");
        let action = if i % 2 == 0 { "approve" } else { "deny" };
        racers.push(tokio::spawn(async move {
            let reply = api.post(&path, json!({"action": action})).await;
            (action, reply)
        }));
    }
    let (mut won, mut lost) = (Vec::new(), Vec::new());
    for r in racers {
        let (action, reply) = r.await.unwrap();
        match reply.status {
            200 => won.push((action, reply.body)),
            409 => lost.push(reply.body),
            s => panic!("a decision got {s}: {}", reply.text),
        }
    }
    assert_eq!(won.len(), 1, "exactly one decision wins");
    let (action, winner) = &won[0];
    let status = if *action == "approve" {
        "approved"
    } else {
        "denied"
    };
    assert_eq!(winner["hold"]["status"], status);
    assert_eq!(lost.len(), 31);
    for body in &lost {
        assert_eq!(body["error"]["code"], "already_decided");
        assert_eq!(body["error"]["details"]["hold"]["status"], status);
        assert_eq!(
            body["error"]["details"]["hold"]["outcome"],
            winner["hold"]["outcome"]
        );
    }
    let shown = nodes.admins[2]
        .get(&format!("/api/v1/holds/{hold}"))
        .await
        .expect(200);
    let decided = shown["history"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["payload"]["type"] == "hold.decided")
        .count();
    assert_eq!(decided, 1, "{shown}");
    nodes.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_revoked_on_one_node_is_refused_by_another_on_the_next_request() {
    let Some(schema) = TempSchema::new().await else {
        return;
    };
    let (_dir, nodes) = three(&schema).await;
    let (a, b) = (&nodes.admins[0], &nodes.admins[1]);
    let (secret, id) = token(a, "alice", "approver", None).await;
    let alice_on_b = b.as_token(&secret);
    alice_on_b.get("/api/v1/holds").await.expect(200);
    a.delete(&format!("/api/v1/tokens/{id}")).await.expect(204);
    alice_on_b.get("/api/v1/holds").await.error(401);
    nodes.admins[2]
        .as_token(&secret)
        .get("/api/v1/holds")
        .await
        .error(401);
    nodes.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idempotency_key_gets_the_same_answer_on_every_node() {
    let Some(schema) = TempSchema::new().await else {
        return;
    };
    let (_dir, nodes) = three(&schema).await;
    let secret = lab_agent(&nodes.admins[0]).await;
    let agents: Vec<Api> = nodes.admins.iter().map(|a| a.as_token(&secret)).collect();
    let raise_with = |api: &Api, key: &str, body: Value| {
        let request = api
            .request(Method::POST, "/api/v1/worlds/lab/holds")
            .header("idempotency-key", key)
            .json(&body);
        let api = api.clone();
        async move { api.send(request).await }
    };
    // One after the other on two nodes, and at once on all three.
    let first = raise_with(&agents[0], "deploy-1", deploy())
        .await
        .expect(201);
    let again = raise_with(&agents[1], "deploy-1", deploy())
        .await
        .expect(201);
    assert_eq!(again, first);
    let (code, _) = raise_with(
        &agents[2],
        "deploy-1",
        json!({"items": [{"kind": "approval", "tool": "deploy", "arguments": {"env": "dev"}}]}),
    )
    .await
    .error(409);
    assert_eq!(code, "idempotency_mismatch");
    let at_once: Vec<_> = agents
        .iter()
        .map(|a| tokio::spawn(raise_with(a, "deploy-2", deploy())))
        .collect();
    let mut bodies = Vec::new();
    for raised in at_once {
        bodies.push(raised.await.unwrap().expect(201));
    }
    assert_ne!(bodies[0], first);
    assert!(bodies.iter().all(|b| *b == bodies[0]), "{bodies:?}");
    let pending = nodes.admins[1].get("/api/v1/holds").await.expect(200);
    assert_eq!(pending["items"].as_array().unwrap().len(), 2, "{pending}");
    nodes.stop().await;
}

/// A world policy denying `deploy` (the rule named `rule`) and leaving other tools to ask.
fn deny_deploy(rule: &str) -> Value {
    json!({"text": format!("[[rules]]\nname = \"{rule}\"\ntools = [\"deploy\"]\naction = \"deny\"\n")})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worlds_policy_set_on_one_node_is_in_force_on_another_for_the_next_call() {
    let Some(schema) = TempSchema::new().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let nodes = Nodes::new(dir.path(), &schema.url, None)
        .start_ready(2)
        .await;
    let [a, b] = [0, 1].map(|i| nodes.admins[i].clone());
    let agent_on_b = b.as_token(&lab_agent(&a).await);
    let build = json!({"items": [{"kind": "approval", "tool": "build", "arguments": {}}]});
    // B has gated a call in the world, with the base alone, before any change.
    raise(&agent_on_b).await;

    // Each version set through A denies, on B, the very next call its rule names (B's gate
    // reads up to the log's head first, and its follower installs the version on the way),
    // and a hold raised on B records that version.
    for (version, rule) in [(1, "no deploys"), (2, "still no deploys")] {
        let set = a
            .put("/api/v1/worlds/lab/policy", deny_deploy(rule))
            .await
            .expect(200);
        assert_eq!(set["version"], version);
        let denied = agent_on_b
            .post("/api/v1/worlds/lab/holds", deploy())
            .await
            .expect(200);
        let result = &denied["results"][0];
        assert_eq!(result["result"], "denied", "{denied}");
        assert_eq!(result["decided_by"]["rule"]["layer"], "world", "{denied}");
        assert_eq!(result["decided_by"]["rule"]["name"], rule, "{denied}");
        let explained = b
            .post(
                "/api/v1/policy/explain",
                json!({"world": "lab", "tool": "deploy", "arguments": {"env": "prod"}}),
            )
            .await
            .expect(200);
        assert_eq!(
            (explained["decision"].as_str(), explained["layer"].as_str()),
            (Some("deny"), Some("world")),
            "{explained}"
        );
        let held = agent_on_b
            .post("/api/v1/worlds/lab/holds", build.clone())
            .await
            .expect(201);
        assert_eq!(
            held["results"][0]["hold"]["policy"]["world"], version,
            "{held}"
        );
    }
    nodes.stop().await;
}
