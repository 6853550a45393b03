//! `holdpoint mcp` putting holds to its client as elicitations: the official Python SDK's
//! client (`tests/mcp/elicit_client.py`) with an elicitation callback, against the gateway of
//! `mcp.rs` and its upstream. Calls as tasks are `mcp_tasks.rs`'s, with the same client.

use std::process::Stdio;

use serde_json::{Value, json};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdout};

use super::catalog::run;
use super::mcp::{Gateway, RESOLVING, failed, finished, text, until_printed};

pub(super) const VIA: &str = "MCP elicitation in elicit-test 1.2";
pub(super) const NOTE: &str = r#"{"name": "a", "text": "hello"}"#;

/// The elicitation client, answering elicitations as `answers` says (see the script), with
/// alice's approver token when `approver` is true.
pub(super) fn client(gw: &Gateway, args: &[&str], answers: Option<&str>, approver: bool) -> Child {
    let mut c = gw.client_script("elicit_client.py", args);
    if let Some(answers) = answers {
        c.env("ELICIT", answers);
    }
    if approver {
        c.env("HOLDPOINT_APPROVER_TOKEN", &gw.approver_token);
    }
    c.stdin(Stdio::piped()).spawn().unwrap()
}

/// A line the client printed, as JSON, once one has `key`.
pub(super) async fn printed(out: &mut BufReader<ChildStdout>, key: &str) -> Value {
    let line = until_printed(out, &format!("{{\"{key}\"")).await;
    serde_json::from_str::<Value>(&line).unwrap()[key].clone()
}

pub(super) fn stdout(child: &mut Child) -> BufReader<ChildStdout> {
    BufReader::new(child.stdout.take().unwrap())
}

/// The events of `id`'s history that resolved it.
pub(super) async fn resolutions(gw: &Gateway, id: &str) -> Vec<Value> {
    let detail = gw
        .lab
        .admin
        .get(&format!("/api/v1/holds/{id}"))
        .await
        .expect(200);
    detail["history"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| RESOLVING.contains(&e["payload"]["type"].as_str().unwrap()))
        .cloned()
        .collect()
}

/// Runs the elicitation client with an agent's token as the approver's, which must fail; its
/// standard error.
async fn refused_with_an_agent_token_as_approver_token(gw: &Gateway) -> String {
    let agent = gw.lab.token("sneaky", "agent").await;
    let child = gw
        .client_script(
            "elicit_client.py",
            &["call", "up__echo", r#"{"text": "x"}"#],
        )
        .env("ELICIT", "cancel")
        .env("HOLDPOINT_APPROVER_TOKEN", &agent)
        .spawn()
        .unwrap();
    failed(child).await
}

#[tokio::test]
async fn an_approval_given_in_the_client_runs_the_call_recorded_with_the_person_and_the_client() {
    let gw = Gateway::start("").await;
    let mut child = client(
        &gw,
        &["call", "up__write_note", NOTE],
        Some(r#"accept:{"decision": "approve", "reason": "fine by me"}"#),
        true,
    );
    let mut out = stdout(&mut child);
    let elicited = printed(&mut out, "elicited").await;
    let hold = gw.lab.first_hold().await;
    let message = elicited["message"].as_str().unwrap();
    for shown in [
        "up__write_note",
        "\"hello\"",
        hold["spec"]["digest"].as_str().unwrap(),
    ] {
        assert!(message.contains(shown), "{shown} is not in {message:?}");
    }
    assert_eq!(
        elicited["schema"]["properties"]["decision"]["oneOf"][0]["const"],
        "approve"
    );
    let result = printed(&mut out, "result").await;
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(text(&result), "wrote a: hello");
    assert_eq!(
        gw.upstream_calls(),
        [json!({"tool": "write_note", "arguments": {"name": "a", "text": "hello"}})]
    );

    let id = hold["id"].as_str().unwrap();
    let decided = gw.resolved(id).await;
    assert_eq!(decided["outcome"]["decided_by"], json!(["alice"]));
    assert_eq!(decided["outcome"]["reason"], "fine by me");
    let events = resolutions(&gw, id).await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(
        events[0]["actor"],
        json!({"source": "person", "name": "alice", "role": "approver", "via": VIA})
    );
    // `holds show` says it too.
    let (code, shown, err) = run(&gw.lab, &gw.lab.token, &["holds", "show", id]).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        shown.contains(&format!("alice (person) via {VIA}")),
        "{shown}"
    );
}

#[tokio::test]
async fn over_http_an_approval_given_in_the_client_is_the_person_s_of_the_approver_token_header() {
    let gw = Gateway::served("").await;
    let mut child = client(
        &gw,
        &["call", "up__write_note", NOTE],
        Some(r#"accept:{"decision": "approve"}"#),
        true,
    );
    let mut out = stdout(&mut child);
    printed(&mut out, "elicited").await;
    let result = printed(&mut out, "result").await;
    assert_eq!(text(&result), "wrote a: hello", "{result}");
    let hold = gw.lab.first_hold().await;
    let events = resolutions(&gw, hold["id"].as_str().unwrap()).await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(
        events[0]["actor"],
        json!({"source": "person", "name": "alice", "role": "approver", "via": VIA})
    );
}

#[tokio::test]
async fn over_http_an_agent_token_as_approver_token_is_refused() {
    let gw = Gateway::served("").await;
    refused_with_an_agent_token_as_approver_token(&gw).await;
    assert!(gw.upstream_calls().is_empty());
}

#[tokio::test]
async fn ask_human_is_answered_with_an_option_in_the_client_and_confirmed_there() {
    let gw = Gateway::start("").await;
    let question = json!({
        "question": "Which branch?",
        "options": [{"id": "main", "label": "main"}, {"id": "dev", "label": "dev"}],
        "confirm": true
    });
    let mut child = client(
        &gw,
        &["call", "ask_human", &question.to_string()],
        Some(r#"accept:{"answer": "dev"};accept:{}"#),
        true,
    );
    let mut out = stdout(&mut child);
    let asked = printed(&mut out, "elicited").await;
    assert!(asked["message"].as_str().unwrap().contains("Which branch?"));
    let choices = &asked["schema"]["properties"]["answer"]["oneOf"];
    assert_eq!(
        choices,
        &json!([{"const": "main", "title": "main"}, {"const": "dev", "title": "dev"}])
    );
    let confirm = printed(&mut out, "elicited").await;
    let message = confirm["message"].as_str().unwrap();
    assert!(
        message.contains("Confirm") && message.contains("dev"),
        "{message}"
    );
    let result = printed(&mut out, "result").await;
    let body = &result["structuredContent"];
    assert_eq!(body["status"], "confirmed", "{result}");
    assert_eq!(body["options"], json!([{"id": "dev", "label": "dev"}]));
    assert_eq!(body["by"], json!(["alice"]));
}

#[tokio::test]
async fn a_hold_decided_through_the_api_first_withdraws_the_elicitation() {
    let gw = Gateway::start("").await;
    // The user never answers.
    let mut child = client(&gw, &["call", "up__write_note", NOTE], Some("stdin"), true);
    let mut out = stdout(&mut child);
    printed(&mut out, "elicited").await;
    let hold = gw.lab.pending_hold().await;
    gw.decide(&hold, json!({"action": "deny", "reason": "not now"}))
        .await;
    assert_eq!(printed(&mut out, "elicitation_canceled").await, true);
    let result = printed(&mut out, "result").await;
    assert_eq!(result["isError"], true);
    assert!(
        text(&result).contains("denied by alice: not now"),
        "{result}"
    );
    let events = resolutions(&gw, hold["id"].as_str().unwrap()).await;
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["actor"]["via"], Value::Null, "{events:?}");
    assert_eq!(gw.upstream_calls(), Vec::<Value>::new());
}

#[tokio::test]
async fn answers_racing_in_the_client_and_through_the_api_record_exactly_one_decision() {
    let gw = Gateway::start("").await;
    let mut child = client(&gw, &["call", "up__write_note", NOTE], Some("stdin"), true);
    let mut out = stdout(&mut child);
    let mut input = child.stdin.take().unwrap();
    printed(&mut out, "elicited").await;
    let hold = gw.lab.pending_hold().await;
    let id = hold["id"].as_str().unwrap();
    // The user denies in the client while alice approves through the API.
    let path = format!("/api/v1/holds/{id}/decision");
    let (api, ()) = tokio::join!(
        gw.approver.post(&path, json!({"action": "approve"})),
        async {
            input
                .write_all(b"accept:{\"decision\": \"deny\", \"reason\": \"in the client\"}\n")
                .await
                .unwrap();
        }
    );
    let status = api.status;
    assert!(status == 200 || status == 409, "{status}");
    let result = printed(&mut out, "result").await;
    let events = resolutions(&gw, id).await;
    assert_eq!(events.len(), 1, "{events:?}");
    let won = &events[0]["payload"]["outcome"]["verdict"];
    if events[0]["actor"]["via"] == VIA {
        assert_eq!(won, "deny");
        assert_eq!(result["isError"], true, "{result}");
        assert_eq!(gw.upstream_calls(), Vec::<Value>::new());
    } else {
        assert_eq!(won, "approve");
        assert_eq!(status, 200);
        assert_eq!(text(&result), "wrote a: hello");
    }
}

#[tokio::test]
async fn declining_in_the_client_is_a_denial_recorded_as_declined() {
    let gw = Gateway::start("").await;
    let mut child = client(
        &gw,
        &["call", "up__write_note", NOTE],
        Some("decline"),
        true,
    );
    let mut out = stdout(&mut child);
    let result = printed(&mut out, "result").await;
    assert_eq!(result["isError"], true);
    let said = text(&result);
    assert!(
        said.contains("denied by alice: declined in the MCP client"),
        "{said}"
    );
    let hold = gw.lab.first_hold().await;
    let events = resolutions(&gw, hold["id"].as_str().unwrap()).await;
    assert_eq!(events[0]["actor"]["via"], VIA);
    assert_eq!(
        events[0]["payload"]["outcome"]["reason"],
        "declined in the MCP client"
    );
    assert_eq!(gw.upstream_calls(), Vec::<Value>::new());
}

#[tokio::test]
async fn a_cancel_in_the_client_leaves_the_hold_to_the_other_channels() {
    let gw = Gateway::start("").await;
    let mut child = client(&gw, &["call", "up__write_note", NOTE], Some("cancel"), true);
    let mut out = stdout(&mut child);
    assert_eq!(printed(&mut out, "answered").await, "cancel");
    let hold = gw.lab.pending_hold().await;
    gw.decide(&hold, json!({"action": "approve"})).await;
    let result = printed(&mut out, "result").await;
    assert_eq!(text(&result), "wrote a: hello", "{result}");
}

#[tokio::test]
async fn without_an_approver_token_no_elicitation_is_sent() {
    let gw = Gateway::start("").await;
    // The client can be asked, but the gateway has no person's credential to decide with.
    let child = client(
        &gw,
        &["call", "up__write_note", NOTE],
        Some(r#"accept:{"decision": "approve"}"#),
        false,
    );
    let hold = gw.lab.pending_hold().await;
    gw.decide(&hold, json!({"action": "approve"})).await;
    let (lines, _) = finished(child).await;
    assert!(
        lines.iter().all(|l| l.get("elicited").is_none()),
        "{lines:?}"
    );
    let result = lines.iter().find_map(|l| l.get("result"));
    assert_eq!(text(result.unwrap()), "wrote a: hello", "{lines:?}");
}

#[tokio::test]
async fn an_agent_token_as_approver_token_is_refused() {
    let gw = Gateway::start("").await;
    let stderr = refused_with_an_agent_token_as_approver_token(&gw).await;
    assert!(
        stderr.contains("HOLDPOINT_APPROVER_TOKEN") && stderr.contains("agents never decide"),
        "{stderr}"
    );
}
