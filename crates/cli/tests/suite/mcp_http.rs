//! The server's MCP gateway over streamable HTTP (`/mcp/{world}`), with the official Python
//! SDK's client (`streamable_http_client`) and the same upstream as `holdpoint mcp`'s tests:
//! this server connects to it when it starts, and shares it between sessions.

use serde_json::{Value, json};

use holdpoint_test_support::http::{Api, Reply};

use super::lab::Lab;
use super::mcp::{
    Gateway, canceling_withdraws_the_hold, disconnecting_withdraws_the_hold, failed, finished,
    result_of, text,
};

/// An MCP `initialize` request, as a client sends it first.
fn initialize() -> Value {
    json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"}
        }
    })
}

/// Sends `body` to `/mcp/lab` as `api`'s caller (in the session, if any).
async fn send_as(api: &Api, session: Option<&str>, body: Value) -> Reply {
    let mut request = api
        .request("POST".parse().unwrap(), "/mcp/lab")
        .header("accept", "application/json, text/event-stream")
        .json(&body);
    if let Some(id) = session {
        request = request.header("mcp-session-id", id);
    }
    api.send(request).await
}

/// Sends `body` to `/mcp/lab` with `token` (and the session, if any).
async fn send(gw: &Gateway, token: Option<&str>, session: Option<&str>, body: Value) -> Reply {
    let api = match token {
        Some(t) => gw.lab.admin.as_token(t),
        None => gw.lab.admin.anonymous(),
    };
    send_as(&api, session, body).await
}

#[tokio::test]
async fn the_http_gateway_lists_upstream_tools_by_server_and_name_and_its_own() {
    let gw = Gateway::served("").await;
    let (lines, stderr) = finished(gw.client(&["list"]).spawn().unwrap()).await;
    // The client ended its session, and took the answer for what it is.
    assert!(!stderr.contains("Session termination failed"), "{stderr}");
    assert_eq!(lines[0]["protocol_version"], "2025-11-25");
    let names: Vec<&str> = lines[1]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "ask_human",
            "request_approval",
            "up__echo",
            "up__write_note",
            "up__delete_all",
            "up__fail"
        ]
    );
}

#[tokio::test]
async fn allowed_calls_are_forwarded_intact_and_denied_ones_name_the_rule_and_sessions_share_the_upstream()
 {
    let gw = Gateway::served("").await;
    let echoed = gw.call("up__echo", json!({"text": "hi"})).await;
    assert_eq!(echoed["isError"], false, "{echoed}");
    assert_eq!(text(&echoed), "echo: hi");
    assert_eq!(echoed["structuredContent"], json!({"result": "echo: hi"}));
    let denied = gw.call("up__delete_all", json!({"confirm": true})).await;
    assert_eq!(denied["isError"], true);
    let said = text(&denied);
    assert!(said.contains("up__delete_all was not called"), "{said}");
    assert!(said.contains("never delete everything"), "{said}");
    // The sessions above ended (each client deleted its own): the upstream they shared still
    // serves the next one.
    let again = gw.call("up__echo", json!({"text": "again"})).await;
    assert_eq!(text(&again), "echo: again", "{again}");
    assert_eq!(
        gw.upstream_calls(),
        [
            json!({"tool": "echo", "arguments": {"text": "hi"}}),
            json!({"tool": "echo", "arguments": {"text": "again"}})
        ]
    );
}

#[tokio::test]
async fn an_asked_call_over_http_waits_for_a_person_then_runs_what_was_approved_or_says_why_not() {
    let gw = Gateway::served("").await;
    let client = gw
        .client(&[
            "call",
            "up__write_note",
            r#"{"name": "a", "text": "hello"}"#,
        ])
        .spawn()
        .unwrap();
    let hold = gw.lab.pending_hold().await;
    assert_eq!(hold["spec"]["tool"], "up__write_note");
    assert_eq!(hold["requested_by"], "coder");
    assert_eq!(
        gw.upstream_calls(),
        Vec::<Value>::new(),
        "it ran before approval"
    );
    gw.decide(&hold, json!({"action": "approve"})).await;
    let result = result_of(client).await;
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(text(&result), "wrote a: hello");
    assert!(
        result["progress"][0]
            .as_str()
            .unwrap()
            .contains(hold["id"].as_str().unwrap()),
        "{result}"
    );

    let client = gw
        .client(&["call", "up__write_note", r#"{"name": "b", "text": "x"}"#])
        .spawn()
        .unwrap();
    let hold = gw.lab.pending_hold().await;
    gw.decide(
        &hold,
        json!({"action": "deny", "reason": "not on a Friday"}),
    )
    .await;
    let result = result_of(client).await;
    assert_eq!(result["isError"], true, "{result}");
    assert!(
        text(&result).contains("denied by alice: not on a Friday"),
        "{result}"
    );
    assert_eq!(
        gw.upstream_calls(),
        [json!({"tool": "write_note", "arguments": {"name": "a", "text": "hello"}})]
    );
}

#[tokio::test]
async fn ask_human_and_request_approval_are_offered_over_http() {
    let gw = Gateway::served("").await;
    let question = json!({
        "question": "Which branch?",
        "options": [{"id": "main", "label": "main"}, {"id": "dev", "label": "dev"}]
    });
    let client = gw
        .client(&["call", "ask_human", &question.to_string()])
        .spawn()
        .unwrap();
    let hold = gw.lab.pending_hold().await;
    assert_eq!(hold["spec"]["question"], "Which branch?");
    gw.decide(&hold, json!({"action": "answer", "options": ["dev"]}))
        .await;
    let answer = result_of(client).await;
    assert_eq!(answer["isError"], false, "{answer}");
    assert_eq!(
        answer["structuredContent"]["options"],
        json!([{"id": "dev", "label": "dev"}])
    );
    assert_eq!(answer["structuredContent"]["by"], json!(["alice"]));

    let request = json!({"action": "deploy", "arguments": {"env": "prod"}});
    let client = gw
        .client(&["call", "request_approval", &request.to_string()])
        .spawn()
        .unwrap();
    let hold = gw.lab.pending_hold().await;
    assert_eq!(hold["spec"]["tool"], "deploy");
    gw.decide(&hold, json!({"action": "deny", "reason": "freeze"}))
        .await;
    let answer = result_of(client).await;
    let body = &answer["structuredContent"];
    assert_eq!(body["approved"], false, "{answer}");
    assert_eq!(body["by"], json!(["alice"]));
    assert_eq!(body["reason"], "freeze");
}

#[tokio::test]
async fn a_client_that_disconnects_over_http_withdraws_its_hold_and_nothing_runs() {
    disconnecting_withdraws_the_hold(&Gateway::served("").await).await;
}

#[tokio::test]
async fn a_client_that_cancels_its_call_over_http_withdraws_the_hold() {
    canceling_withdraws_the_hold(&Gateway::served("").await).await;
}

#[tokio::test]
async fn only_agents_tokens_open_the_http_gateway_and_they_cannot_decide() {
    let gw = Gateway::served("").await;
    let (code, _) = send(&gw, None, None, initialize()).await.error(401);
    assert_eq!(code, "unauthorized");
    let approver = gw.lab.token("bob", "approver").await;
    let (code, message) = send(&gw, Some(&approver), None, initialize())
        .await
        .error(403);
    assert_eq!(code, "forbidden");
    assert!(message.contains("agent"), "{message}");
    let (code, _) = send(&gw, Some(&gw.lab.token), None, initialize())
        .await
        .error(403);
    assert_eq!(code, "forbidden");
    // An agent's session opens; the same agent's token decides nothing.
    let opened = send(&gw, Some(&gw.agent), None, initialize()).await;
    assert_eq!(opened.status, 200, "{}", opened.text);
    let client = gw
        .client(&["call", "up__write_note", r#"{"name": "e", "text": "x"}"#])
        .spawn()
        .unwrap();
    let hold = gw.lab.pending_hold().await;
    let id = hold["id"].as_str().unwrap();
    let (code, _) = gw
        .lab
        .admin
        .as_token(&gw.agent)
        .post(
            &format!("/api/v1/holds/{id}/decision"),
            json!({"action": "approve"}),
        )
        .await
        .error(403);
    assert_eq!(code, "forbidden");
    assert_eq!(gw.lab.hold(id).await["status"], "pending");
    drop(client);
}

#[tokio::test]
async fn a_session_belongs_to_the_token_that_opened_it() {
    let gw = Gateway::served("").await;
    let opened = send(&gw, Some(&gw.agent), None, initialize()).await;
    assert_eq!(opened.status, 200, "{}", opened.text);
    let session = opened.headers["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let other = gw.lab.token("intruder", "agent").await;
    let (code, message) = send(&gw, Some(&other), Some(&session), initialized.clone())
        .await
        .error(403);
    assert_eq!(code, "forbidden");
    assert!(message.contains("another credential"), "{message}");
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    send(&gw, Some(&other), Some(&session), list.clone())
        .await
        .error(403);
    // Its owner goes on.
    let reply = send(&gw, Some(&gw.agent), Some(&session), initialized).await;
    assert_eq!(reply.status, 202, "{}", reply.text);
    let reply = send(&gw, Some(&gw.agent), Some(&session), list).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert!(reply.text.contains("up__echo"), "{}", reply.text);
}

#[tokio::test]
async fn with_no_upstream_configured_holdpoints_own_tools_are_offered() {
    let lab = Lab::start(vec![]).await;
    let agent = lab.admin.as_token(&lab.token("coder", "agent").await);
    let opened = send_as(&agent, None, initialize()).await;
    assert_eq!(opened.status, 200, "{}", opened.text);
    let session = opened.headers["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(
        send_as(&agent, Some(&session), initialized).await.status,
        202
    );
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let listed = send_as(&agent, Some(&session), list).await;
    assert_eq!(listed.status, 200, "{}", listed.text);
    let result: Value = listed
        .text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .find(|m| m["id"] == 2)
        .unwrap_or_else(|| panic!("no answer to tools/list: {}", listed.text));
    let names: Vec<&str> = result["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["ask_human", "request_approval"]);
    // Ending the session is the client's to do; then the id is unknown.
    let ended = agent
        .send(
            agent
                .request("DELETE".parse().unwrap(), "/mcp/lab")
                .header("mcp-session-id", &session),
        )
        .await;
    assert_eq!(ended.status, 204, "{}", ended.text);
    let list = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"});
    let (code, _) = send_as(&agent, Some(&session), list).await.error(404);
    assert_eq!(code, "not_found");
}

/// The JSON-RPC message with `id` in a reply: its body, or one of its server-sent events.
fn answer_with_id(reply: &Reply, id: &Value) -> Value {
    if let Ok(answer) = serde_json::from_str::<Value>(&reply.text) {
        return answer;
    }
    reply
        .text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .find(|m| &m["id"] == id)
        .unwrap_or_else(|| panic!("no answer with id {id}: {} {}", reply.status, reply.text))
}

#[tokio::test]
async fn what_is_not_a_message_of_mcp_is_answered_as_json_rpc_asks_over_http() {
    let gw = Gateway::served("").await;
    let agent = gw.lab.admin.as_token(&gw.agent);
    let opened = send_as(&agent, None, initialize()).await;
    assert_eq!(opened.status, 200, "{}", opened.text);
    let session = opened.headers["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let post = |body: Vec<u8>| {
        agent.send(
            agent
                .request("POST".parse().unwrap(), "/mcp/lab")
                .header("accept", "application/json, text/event-stream")
                .header("content-type", "application/json")
                .header("mcp-session-id", &session)
                .body(body),
        )
    };
    for (sent, id, code) in super::mcp_stdio::misfits() {
        let reply = post(sent.clone()).await;
        let answer = answer_with_id(&reply, &id);
        super::mcp_stdio::assert_refused(&sent, &answer, &id, code);
        // What is not one message of MCP is refused as the transport asks, with 400; the
        // rest reaches the session, which answers on the request's stream.
        let unreadable = code == -32700 || (code == -32600 && id != json!(10));
        let status = if unreadable { 400 } else { 200 };
        assert_eq!(reply.status, status, "{}", reply.text);
    }
    // The session serves on.
    let list = json!({"jsonrpc": "2.0", "id": 11, "method": "tools/list"});
    let listed = post(list.to_string().into_bytes()).await;
    assert_eq!(listed.status, 200, "{}", listed.text);
    assert!(listed.text.contains("up__echo"), "{}", listed.text);
    // Ending it is answered 204, which clients read as done (the Python SDK logs anything
    // else but 200 as a failure).
    let ended = agent
        .send(
            agent
                .request("DELETE".parse().unwrap(), "/mcp/lab")
                .header("mcp-session-id", &session),
        )
        .await;
    assert_eq!(ended.status, 204, "{}", ended.text);
}

#[tokio::test]
async fn a_server_stopping_under_a_waiting_call_withdraws_its_hold_saying_so() {
    let gw = Gateway::served("").await;
    let client = gw
        .client(&["call", "up__write_note", r#"{"name": "s", "text": "x"}"#])
        .spawn()
        .unwrap();
    let hold = gw.lab.pending_hold().await;
    let id = hold["id"].as_str().unwrap().to_owned();
    let Gateway { lab, .. } = gw;
    let Lab {
        server, token, dir, ..
    } = lab;
    server.stop().await.unwrap();
    // Its session is gone with the server: the call fails.
    let said = failed(client).await;

    // Read back on the server started again on the same data.
    let mut settings = holdpoint_server::Settings::default();
    settings.server.bind = "127.0.0.1:0".parse().unwrap();
    let again = holdpoint_server::Server::start(&dir.path().join("data"), &settings)
        .await
        .unwrap();
    let admin = Api::new(&again.url(), Some(&token));
    let shown = admin.get(&format!("/api/v1/holds/{id}")).await.expect(200);
    let hold = &shown["hold"];
    assert_eq!(
        hold["status"], "canceled",
        "{hold} (the client said {said})"
    );
    let reason = hold["outcome"]["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("Holdpoint shut down while the call waited"),
        "the true reason, not the client's: {hold}"
    );
    again.stop().await.unwrap();
}
