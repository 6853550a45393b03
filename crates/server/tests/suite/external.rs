//! Holds raised by agents outside Holdpoint: create, wait, decide, list, withdraw.

use holdpoint_protocol::Timestamp;
use holdpoint_test_support::llm::{ScriptedLlm, Step, call};
use reqwest::Method;
use serde_json::{Value, json};

use super::{TestServer, answer, approval, held, question, raise};

async fn lab(t: &TestServer) -> (super::Api, super::Api) {
    t.world("lab").await;
    (
        t.caller("deploy-bot", "agent", None).await,
        t.caller("alice", "approver", None).await,
    )
}

#[tokio::test]
async fn a_waiting_agent_gets_the_answer_given_from_another_client() {
    let t = TestServer::start().await;
    let (agent, alice) = lab(&t).await;
    let mut q = question("Deploy v2 to production?", &["deploy", "abort"]);
    q["default_option"] = json!("abort");
    q["deadline"] = json!("30m");
    let created = raise(&agent, "lab", vec![q]).await;
    let hold = held(&created, 0);
    assert_eq!(created["results"][0]["result"], "held");

    let waiting = {
        let agent = agent.clone();
        let hold = hold.clone();
        tokio::spawn(async move {
            agent
                .get(&format!("/api/v1/holds/{hold}/wait?timeout=60s"))
                .await
        })
    };
    // The approver finds it in the pending list, then answers.
    let pending = alice.get("/api/v1/holds?world=lab").await.expect(200);
    assert_eq!(pending["items"][0]["id"], hold.as_str());
    answer(&alice, &hold, "deploy").await.expect(200);

    let result = waiting.await.unwrap().expect(200);
    assert_eq!(result["decided"], true);
    let outcome = &result["hold"]["outcome"];
    assert_eq!(
        (outcome["status"].as_str(), outcome["source"].as_str()),
        (Some("answered"), Some("person"))
    );
    assert_eq!(outcome["options"][0]["id"], "deploy");
    assert_eq!(outcome["decided_by"], json!(["alice"]));
}

#[tokio::test]
async fn a_wait_that_times_out_says_so_and_the_hold_stays_pending() {
    let t = TestServer::start().await;
    let (agent, _) = lab(&t).await;
    let hold = held(
        &raise(&agent, "lab", vec![question("Go?", &["yes", "no"])]).await,
        0,
    );
    let result = agent
        .get(&format!("/api/v1/holds/{hold}/wait?timeout=50ms"))
        .await
        .expect(200);
    assert_eq!(result["decided"], false);
    assert_eq!(result["hold"]["status"], "pending");
    for bad in ["soon", "10h", "-1s"] {
        let (_, message) = agent
            .get(&format!("/api/v1/holds/{hold}/wait?timeout={bad}"))
            .await
            .error(400);
        assert!(message.starts_with("timeout:"), "{message}");
    }
    agent
        .get(&format!("/api/v1/holds/{hold}/wait?timeout=1s&colour=red"))
        .await
        .error(400);
}

#[tokio::test]
async fn the_same_idempotency_key_raises_one_hold() {
    let t = TestServer::start().await;
    let (agent, _) = lab(&t).await;
    let body = json!({"items": [question("Rotate the keys?", &["yes", "no"])]});
    let send = || {
        agent.send(
            agent
                .request(Method::POST, "/api/v1/worlds/lab/holds")
                .header("idempotency-key", "rotate-2026-11-22")
                .json(&body),
        )
    };
    let first = send().await.expect(201);
    let second = send().await.expect(201);
    assert_eq!(first, second);
    // Listing holds is for people: the admin counts them.
    let listed = t.api.get("/api/v1/holds?world=lab").await.expect(200);
    assert_eq!(listed["items"].as_array().unwrap().len(), 1);

    // The same key with another request is a mistake, not a replay.
    let other = json!({"items": [question("Something else?", &["yes"])]});
    let reply = agent
        .send(
            agent
                .request(Method::POST, "/api/v1/worlds/lab/holds")
                .header("idempotency-key", "rotate-2026-11-22")
                .json(&other),
        )
        .await;
    assert_eq!(reply.status, 409, "{}", reply.text);
}

#[tokio::test]
async fn approvals_go_through_policy_first() {
    let policy = r#"
mode = "manual"
[[rules]]
name = "reads are fine"
tools = ["read_file"]
action = "allow"
[[rules]]
name = "never delete"
tools = ["delete_*"]
action = "deny"
"#;
    let t = TestServer::with(policy, |_| {}).await;
    let (agent, _) = lab(&t).await;
    let reply = agent
        .post("/api/v1/worlds/lab/holds", json!({"items": [approval("read_file", json!({"path": "a.txt"})), approval("delete_db", json!({}))]}))
        .await
        .expect(200);
    assert_eq!(reply["results"][0]["result"], "allowed");
    assert_eq!(reply["results"][1]["result"], "denied");
    assert_eq!(
        reply["results"][1]["decided_by"]["rule"]["name"],
        "never delete"
    );
    assert!(reply.get("batch").is_none());

    let raised = raise(
        &agent,
        "lab",
        vec![approval("shell_cmd", json!({"command": "make deploy"}))],
    )
    .await;
    let hold = &raised["results"][0]["hold"];
    assert_eq!(hold["spec"]["kind"], "approval");
    assert_eq!(hold["spec"]["arguments"], json!({"command": "make deploy"}));
    assert_eq!(hold["requested_by"], "deploy-bot");
}

#[tokio::test]
async fn malformed_holds_raise_nothing_and_name_the_field() {
    let t = TestServer::start().await;
    let (agent, alice) = lab(&t).await;
    let good = question("Fine?", &["yes"]);
    let cases: Vec<(Value, &str)> = vec![
        (
            json!({"items": [good.clone(), question("", &["yes"])]}),
            "items[1].question:",
        ),
        (
            json!({"items": [good.clone(), {"kind": "question", "question": "Q", "options": []}]}),
            "items[1].options:",
        ),
        (
            json!({"items": [{"kind": "question", "question": "Q", "options": [{"id": "a", "label": "A"}], "default_option": "z"}]}),
            "items[0].default_option:",
        ),
        (
            json!({"items": [{"kind": "question", "question": "Q", "options": [{"id": "a", "label": "A"}], "deadline": "soon"}]}),
            "items[0].deadline:",
        ),
        (
            json!({"items": [{"kind": "question", "question": "x".repeat(100_000), "options": [{"id": "a", "label": "A"}]}]}),
            "items[0].question:",
        ),
        (
            json!({"items": [{"kind": "approval", "tool": "t", "arguments": [1, 2]}]}),
            "items[0].arguments:",
        ),
        (json!({"items": [{"kind": "vote"}]}), "items[0].kind:"),
        (json!({"items": []}), "items:"),
        (json!({"items": "all of them"}), "items:"),
        (json!({"chat": 7, "items": [good.clone()]}), "chat:"),
        (
            json!({"items": [{"kind": "question", "question": "Q", "options": [{"id": "a", "label": "A", "colour": "red"}]}]}),
            "items[0].options[0].colour: is not a known field",
        ),
        (
            json!({"items": [{"kind": "question", "options": [{"id": "a", "label": "A"}]}]}),
            "items[0].question: is required",
        ),
        (
            json!({"items": [{"kind": "question", "question": "Q", "options": [{"id": "a", "label": "A"}], "multiple": 3}]}),
            "items[0].multiple: invalid type",
        ),
    ];
    for (body, field) in cases {
        let reply = agent.post("/api/v1/worlds/lab/holds", body.clone()).await;
        assert_eq!(reply.status, 422, "{body}: {}", reply.text);
        let message = reply.body["error"]["message"].as_str().unwrap();
        assert!(
            message.starts_with(field),
            "{body}\nexpected {field} in: {message}"
        );
    }
    let listed = alice.get("/api/v1/holds?status=any").await.expect(200);
    assert_eq!(listed["items"], json!([]), "nothing was raised");

    // Bodies that are not JSON, or too large.
    let unreadable = [
        ("application/json", "{\"items\": [", 400, "malformed_json"),
        ("text/plain", "hi", 415, "unsupported_media_type"),
    ];
    for (content_type, body, status, code) in unreadable {
        let r = agent
            .send(
                agent
                    .request(Method::POST, "/api/v1/worlds/lab/holds")
                    .header("content-type", content_type)
                    .body(body),
            )
            .await;
        assert_eq!(r.error(status).0, code, "{content_type}: {body}");
    }
    let huge = json!({"items": [question(&"x".repeat(2 * 1024 * 1024), &["a"])]});
    let r = agent.post("/api/v1/worlds/lab/holds", huge).await;
    assert_eq!(r.error(413).0, "body_too_large");
    // Only agents (and admins) raise holds.
    alice
        .post("/api/v1/worlds/lab/holds", json!({"items": [good]}))
        .await
        .error(403);
}

#[tokio::test]
async fn decisions_are_validated_against_what_the_hold_offers() {
    let t = TestServer::start().await;
    let (agent, alice) = lab(&t).await;
    let created = raise(
        &agent,
        "lab",
        vec![
            question("Which?", &["a", "b"]),
            approval("shell_cmd", json!({"command": "ls"})),
        ],
    )
    .await;
    let (q, a) = (held(&created, 0), held(&created, 1));
    let cases = [
        (&q, json!({"action": "answer", "options": ["c"]}), 422),
        (&q, json!({"action": "answer", "options": ["a", "b"]}), 422),
        (&q, json!({"action": "approve"}), 422),
        (&a, json!({"action": "answer", "options": ["a"]}), 422),
        (&a, json!({"action": "edit", "arguments": "rm -rf /"}), 422),
        (&a, json!({"action": "approve", "scope": "forever"}), 422),
        // A misspelt field must not quietly drop the check it asked for.
        (&a, json!({"action": "approve", "digset": "0000"}), 422),
        (&a, json!({"action": "approve", "digest": "0000"}), 409),
        (&a, json!({"action": "launch"}), 422),
        (&a, json!({"reason": "no action"}), 422),
    ];
    for (hold, body, status) in cases {
        let reply = alice
            .post(&format!("/api/v1/holds/{hold}/decision"), body.clone())
            .await;
        assert_eq!(reply.status, status, "{body}: {}", reply.text);
        assert!(
            reply.body["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty())
        );
    }
    let digest =
        alice.get(&format!("/api/v1/holds/{a}")).await.expect(200)["hold"]["spec"]["digest"]
            .clone();
    let decided = alice
        .post(
            &format!("/api/v1/holds/{a}/decision"),
            json!({"action": "approve", "digest": digest}),
        )
        .await
        .expect(200);
    assert_eq!(decided["hold"]["outcome"]["verdict"], "approve");
}

#[tokio::test]
async fn holds_are_listed_with_filters_and_cursors() {
    let t = TestServer::start().await;
    let (agent, alice) = lab(&t).await;
    t.world("ops").await;
    for i in 0..5 {
        raise(
            &agent,
            "lab",
            vec![question(&format!("Q{i}?"), &["yes", "no"])],
        )
        .await;
    }
    let chat_hold = agent
        .post("/api/v1/worlds/ops/holds", json!({"chat": "night-shift", "items": [approval("shell_cmd", json!({"command": "reboot"}))]}))
        .await
        .expect(201);
    let first = held(
        &raise(&agent, "lab", vec![question("Decided?", &["yes"])]).await,
        0,
    );
    answer(&alice, &first, "yes").await.expect(200);

    let mut seen = Vec::new();
    let mut path = "/api/v1/holds?world=lab&limit=2".to_owned();
    loop {
        let page = alice.get(&path).await.expect(200);
        seen.extend(
            page["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|h| h["spec"]["question"].as_str().unwrap().to_owned()),
        );
        match page["next"].as_str() {
            Some(next) => path = format!("/api/v1/holds?world=lab&limit=2&cursor={next}"),
            None => break,
        }
    }
    assert_eq!(seen, ["Q0?", "Q1?", "Q2?", "Q3?", "Q4?"]);

    let count = |v: Value| v["items"].as_array().unwrap().len();
    assert_eq!(
        count(alice.get("/api/v1/holds?status=resolved").await.expect(200)),
        1
    );
    assert_eq!(
        count(alice.get("/api/v1/holds?status=answered").await.expect(200)),
        1
    );
    assert_eq!(
        count(alice.get("/api/v1/holds?status=any").await.expect(200)),
        7
    );
    assert_eq!(
        count(alice.get("/api/v1/holds?kind=approval").await.expect(200)),
        1
    );
    assert_eq!(
        count(
            alice
                .get("/api/v1/holds?world=ops&chat=night-shift")
                .await
                .expect(200)
        ),
        1
    );
    assert_eq!(
        count(
            alice
                .get("/api/v1/holds?world=ops&chat=day-shift")
                .await
                .expect(200)
        ),
        0
    );
    let batch = chat_hold["batch"].as_str().unwrap();
    assert_eq!(
        count(
            alice
                .get(&format!("/api/v1/holds?batch={batch}"))
                .await
                .expect(200)
        ),
        1
    );
    let newest = alice
        .get("/api/v1/holds?order=newest&limit=1")
        .await
        .expect(200);
    assert_eq!(newest["items"][0]["spec"]["tool"], "shell_cmd");

    for bad in [
        "status=lost",
        "kind=poll",
        "order=random",
        "limit=many",
        "cursor=%%%",
        "colour=red",
    ] {
        let reply = alice.get(&format!("/api/v1/holds?{bad}")).await;
        assert!(
            reply.status == 400 || reply.status == 422,
            "{bad}: {}",
            reply.text
        );
    }
    alice.get("/api/v1/holds?world=atlantis").await.error(404);
}

/// A hold's place in the urgent order: by deadline, holds without one last.
fn urgency(hold: &Value) -> (bool, Option<Timestamp>) {
    let deadline: Option<Timestamp> = serde_json::from_value(hold["deadline"].clone()).unwrap();
    (deadline.is_none(), deadline)
}

#[tokio::test]
async fn holds_are_listed_by_agent_and_tool_and_most_urgent_first() {
    let llm = ScriptedLlm::start(vec![Step::calls(vec![call(
        "c1",
        "shell_cmd",
        json!({"command": "uptime"}),
    )])])
    .await;
    let t = TestServer::start().await;
    let chat = super::lab_chat(&t, &llm.base_url(), None).await;
    let agent = t.caller("deploy-bot", "agent", None).await;
    let alice = t.caller("alice", "approver", None).await;
    let mut stream = alice.events("?world=lab", None).await;
    alice
        .post(
            &format!("/api/v1/worlds/lab/chats/{chat}/messages"),
            json!({"text": "How busy is it?"}),
        )
        .await
        .expect(202);
    let held_by_agent = stream.next_of("hold.created").await.data["payload"]["hold"].clone();
    let helper = t
        .api
        .get("/api/v1/worlds/lab/agents/helper")
        .await
        .expect(200);
    assert_eq!(held_by_agent["agent"], helper["id"]);
    let deploy = |deadline: &str| {
        let mut item = approval("deploy", json!({"to": deadline}));
        item["deadline"] = json!(deadline);
        item
    };
    let mut asked = question("Which region?", &["eu", "us"]);
    asked["deadline"] = json!("2m");
    raise(
        &agent,
        "lab",
        vec![deploy("5m"), asked, deploy("1m"), deploy("2m")],
    )
    .await;

    let items = |page: Value| page["items"].as_array().unwrap().clone();
    let ids = |items: &[Value]| -> Vec<Value> { items.iter().map(|h| h["id"].clone()).collect() };
    let by_agent = items(
        alice
            .get(&format!(
                "/api/v1/holds?agent={}",
                helper["id"].as_str().unwrap()
            ))
            .await
            .expect(200),
    );
    assert_eq!(ids(&by_agent), [held_by_agent["id"].clone()]);
    let deploys = items(alice.get("/api/v1/holds?tool=deploy").await.expect(200));
    assert_eq!(
        deploys
            .iter()
            .map(|h| h["spec"]["arguments"]["to"].clone())
            .collect::<Vec<_>>(),
        ["5m", "1m", "2m"]
    );
    assert_eq!(
        ids(&items(
            alice.get("/api/v1/holds?tool=shell_cmd").await.expect(200)
        )),
        [held_by_agent["id"].clone()]
    );
    // A question has no tool; the agent's hold is not a deploy.
    assert!(
        items(
            alice
                .get("/api/v1/holds?tool=deploy&kind=question")
                .await
                .expect(200)
        )
        .is_empty()
    );
    assert!(
        items(
            alice
                .get(&format!(
                    "/api/v1/holds?tool=deploy&agent={}",
                    helper["id"].as_str().unwrap()
                ))
                .await
                .expect(200)
        )
        .is_empty()
    );

    // Most urgent first, page by page: every pending hold once, by deadline, oldest first
    // among equal deadlines (the 2m approval and the 2m question were raised together).
    let mut expected = items(alice.get("/api/v1/holds").await.expect(200));
    expected.sort_by_key(urgency);
    for limit in [1, 2, 10] {
        let mut seen = Vec::new();
        let mut path = format!("/api/v1/holds?order=urgent&limit={limit}");
        loop {
            let page = alice.get(&path).await.expect(200);
            seen.extend(items(page.clone()));
            match page["next"].as_str() {
                Some(next) => {
                    path = format!("/api/v1/holds?order=urgent&limit={limit}&cursor={next}")
                }
                None => break,
            }
        }
        assert_eq!(ids(&seen), ids(&expected), "pages of {limit}");
        assert!(seen.is_sorted_by_key(urgency), "pages of {limit}");
    }
    let urgent_deploys = items(
        alice
            .get("/api/v1/holds?tool=deploy&order=urgent")
            .await
            .expect(200),
    );
    assert_eq!(
        urgent_deploys
            .iter()
            .map(|h| h["spec"]["arguments"]["to"].clone())
            .collect::<Vec<_>>(),
        ["1m", "2m", "5m"]
    );

    let (code, message) = alice
        .get("/api/v1/holds?order=urgent&status=resolved")
        .await
        .error(400);
    assert!(
        code == "invalid_input" && message.contains("urgent"),
        "{code}: {message}"
    );
    // A cursor continues the order it came from.
    let oldest = alice.get("/api/v1/holds?limit=1").await.expect(200);
    let next = oldest["next"].as_str().unwrap();
    let (_, message) = alice
        .get(&format!("/api/v1/holds?order=urgent&cursor={next}"))
        .await
        .error(400);
    assert!(message.contains("cursor"), "{message}");
}

#[tokio::test]
async fn one_hold_comes_with_its_history() {
    let t = TestServer::start().await;
    let (agent, alice) = lab(&t).await;
    let hold = held(
        &raise(&agent, "lab", vec![question("Go?", &["yes", "no"])]).await,
        0,
    );
    answer(&alice, &hold, "no").await.expect(200);
    let detail = alice
        .get(&format!("/api/v1/holds/{hold}"))
        .await
        .expect(200);
    let types: Vec<&str> = detail["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["payload"]["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["hold.created", "hold.decided"]);
    assert_eq!(detail["hold"]["status"], "answered");
}

#[tokio::test]
async fn a_batch_is_decided_at_once_as_it_was_seen() {
    let t = TestServer::start().await;
    let (agent, alice) = lab(&t).await;
    let created = raise(
        &agent,
        "lab",
        vec![
            approval("shell_cmd", json!({"command": "a"})),
            approval("shell_cmd", json!({"command": "b"})),
        ],
    )
    .await;
    let batch = created["batch"].as_str().unwrap();
    let seen: Vec<Value> = (0..2)
        .map(|i| {
            let h = &created["results"][i]["hold"];
            json!({"hold": h["id"], "digest": h["spec"]["digest"]})
        })
        .collect();

    // What was seen must be the whole batch.
    let partial =
        json!({"seen": [seen[0].clone()], "decision": {"action": "deny", "reason": "no"}});
    alice
        .post(&format!("/api/v1/batches/{batch}/decision"), partial)
        .await
        .error(409);

    let all = json!({"seen": seen, "decision": {"action": "deny", "reason": "not today"}});
    let result = alice
        .post(&format!("/api/v1/batches/{batch}/decision"), all)
        .await
        .expect(200);
    for i in 0..2 {
        assert_eq!(
            result["holds"][i]["hold"]["outcome"]["status"], "denied",
            "{result}"
        );
    }
    alice
        .post(
            "/api/v1/batches/not-a-batch/decision",
            json!({"seen": [], "decision": {"action": "deny"}}),
        )
        .await
        .error(404);
}

#[tokio::test]
async fn the_agent_that_raised_a_hold_may_withdraw_it() {
    let t = TestServer::start().await;
    let (agent, alice) = lab(&t).await;
    let other_agent = t.caller("other-bot", "agent", None).await;
    let hold = held(
        &raise(&agent, "lab", vec![question("Still needed?", &["yes"])]).await,
        0,
    );
    // Another agent's hold does not exist for it.
    other_agent
        .post(
            &format!("/api/v1/holds/{hold}/withdraw"),
            json!({"reason": "mine now"}),
        )
        .await
        .error(404);
    // No body at all is fine: every field of a withdrawal is optional.
    let withdrawn = agent
        .send(agent.request(Method::POST, &format!("/api/v1/holds/{hold}/withdraw")))
        .await
        .expect(200);
    assert_eq!(withdrawn["status"], "canceled");
    let (code, _) = answer(&alice, &hold, "yes").await.error(409);
    assert_eq!(code, "already_decided");
    let waited = agent
        .get(&format!("/api/v1/holds/{hold}/wait"))
        .await
        .expect(200);
    assert_eq!(waited["decided"], true);
}

#[tokio::test]
async fn grants_are_listed_and_revoked_and_policy_explains_itself() {
    let t = TestServer::start().await;
    let (agent, alice) = lab(&t).await;
    let hold = held(
        &raise(
            &agent,
            "lab",
            vec![approval("deploy", json!({"env": "staging"}))],
        )
        .await,
        0,
    );
    alice
        .post(
            &format!("/api/v1/holds/{hold}/decision"),
            json!({"action": "approve", "scope": "always_args"}),
        )
        .await
        .expect(200);

    let explain = json!({"world": "lab", "tool": "deploy", "arguments": {"env": "staging"}});
    let before = alice
        .post("/api/v1/policy/explain", explain.clone())
        .await
        .expect(200);
    assert_eq!(before["decision"], "allow", "{before}");
    let again = agent
        .post(
            "/api/v1/worlds/lab/holds",
            json!({"items": [approval("deploy", json!({"env": "staging"}))]}),
        )
        .await
        .expect(200);
    assert_eq!(again["results"][0]["result"], "allowed");

    let grants = alice.get("/api/v1/worlds/lab/grants").await.expect(200);
    let grant = grants[0]["id"].as_str().unwrap().to_owned();
    agent
        .delete(&format!("/api/v1/grants/{grant}"))
        .await
        .error(403);
    alice
        .delete(&format!("/api/v1/grants/{grant}"))
        .await
        .expect(200);
    assert_eq!(
        alice.get("/api/v1/worlds/lab/grants").await.expect(200),
        json!([])
    );
    let after = alice
        .post("/api/v1/policy/explain", explain)
        .await
        .expect(200);
    assert_eq!(after["decision"], "ask", "{after}");
    alice
        .delete(&format!("/api/v1/grants/{grant}"))
        .await
        .error(409);
    alice
        .post(
            "/api/v1/policy/explain",
            json!({"world": "lab", "tool": "x", "arguments": [1]}),
        )
        .await
        .error(422);
    alice
        .post(
            "/api/v1/policy/explain",
            json!({"world": "nowhere", "tool": "x"}),
        )
        .await
        .error(404);
}

#[tokio::test]
async fn people_read_the_active_policy_as_rules_and_text_and_agents_do_not() {
    let policy = r#"mode = "auto_deny"

[[rules]]
name = "deploys"
tools = ["deploy"]
action = "ask"
args = [{ pointer = "/env", equals = "production" }]
approvers = ["alice"]

[[rules]]
tools = ["shell_cmd"]
action = "allow"
command = { program = "ls" }
"#;
    let t = TestServer::with(policy, |_| {}).await;
    let (agent, alice) = lab(&t).await;
    let shown = alice.get("/api/v1/policy").await.expect(200);
    assert_eq!(shown["mode"], "auto_deny", "{shown}");
    assert_eq!(shown["source"], policy);
    assert_eq!(shown["rules"].as_array().unwrap().len(), 2, "{shown}");
    let deploys = &shown["rules"][0];
    assert_eq!(
        (&deploys["name"], &deploys["action"], &deploys["tools"]),
        (&json!("deploys"), &json!("ask"), &json!(["deploy"]))
    );
    assert_eq!(
        deploys["args"],
        json!([{"pointer": "/env", "test": "equals", "value": "production"}])
    );
    assert_eq!(deploys["ask"]["approvers"], json!(["alice"]));
    let ls = &shown["rules"][1];
    assert_eq!(
        (&ls["name"], &ls["action"]),
        (&json!("rules[1]"), &json!("allow"))
    );
    assert_eq!(ls["command"]["program"], "ls");
    // The typed client reads the same document.
    let client =
        holdpoint_client::Client::new(&t.server.url(), t.server.admin_token().unwrap().to_owned())
            .unwrap();
    let typed = client.policy().await.unwrap();
    assert_eq!(serde_json::to_value(&typed).unwrap(), shown);
    let (code, _) = agent.get("/api/v1/policy").await.error(403);
    assert_eq!(code, "forbidden");
}

#[tokio::test]
async fn a_client_without_a_person_applies_the_fail_closed_default() {
    let t = TestServer::start().await;
    let (agent, alice) = lab(&t).await;
    let mut q = question("Deploy?", &["deploy", "abort"]);
    q["default_option"] = json!("abort");
    let created = raise(
        &agent,
        "lab",
        vec![q, approval("shell_cmd", json!({"command": "ls"}))],
    )
    .await;
    let (q, a) = (held(&created, 0), held(&created, 1));

    // Agents never decide, not even a default.
    agent
        .post(&format!("/api/v1/holds/{a}/default"), json!({}))
        .await
        .error(403);
    let (_, message) = alice
        .post(&format!("/api/v1/holds/{a}/default"), json!({"why": "x"}))
        .await
        .error(422);
    assert!(message.contains("why"), "{message}");

    let denied = alice
        .post(
            &format!("/api/v1/holds/{a}/default"),
            json!({"reason": "no terminal"}),
        )
        .await
        .expect(200);
    let outcome = &denied["hold"]["outcome"];
    assert_eq!(
        (
            outcome["status"].as_str(),
            outcome["source"].as_str(),
            outcome["reason"].as_str()
        ),
        (Some("denied"), Some("default"), Some("no terminal"))
    );
    assert_eq!(outcome["decided_by"], json!(["alice"]));
    let answered = alice
        .post(&format!("/api/v1/holds/{q}/default"), json!({}))
        .await
        .expect(200);
    assert_eq!(answered["hold"]["outcome"]["options"][0]["id"], "abort");

    // Recorded like any decision: a second one gets the first, the history names the source.
    let (code, _) = alice
        .post(&format!("/api/v1/holds/{a}/default"), json!({}))
        .await
        .error(409);
    assert_eq!(code, "already_decided");
    let history = alice.get(&format!("/api/v1/holds/{a}")).await.expect(200)["history"].clone();
    let decided = history
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["payload"]["type"] == "hold.decided")
        .unwrap();
    assert_eq!(
        decided["actor"],
        json!({"source": "default", "name": "alice", "role": "approver"})
    );
}
