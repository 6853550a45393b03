//! Calls as MCP tasks (revision 2025-11-25) over both transports: `holdpoint mcp` on stdio and
//! the server's `/mcp/{world}` over streamable HTTP, with the official Python SDK's client
//! (`tests/mcp/elicit_client.py`). A task's hold is decided like a plain call's: through the
//! API, or in the client as an elicitation when it can be asked, the first answer winning.

use serde_json::{Value, json};

use super::mcp::{Gateway, text};
use super::mcp_elicit::{NOTE, VIA, client, printed, resolutions, stdout};

/// A task approved through the API: declared, created at once, its result the upstream's.
async fn approved_through_the_api(gw: &Gateway) {
    let mut child = client(gw, &["task", "up__write_note", NOTE], None, false);
    let mut out = stdout(&mut child);
    let declared = printed(&mut out, "declared").await;
    assert_eq!(
        declared["tasks"]["requests"]["tools"]["call"],
        json!({}),
        "{declared}"
    );
    assert_eq!(
        declared["execution"]["taskSupport"], "optional",
        "{declared}"
    );
    let created = printed(&mut out, "created").await;
    assert_eq!(created["task"]["status"], "working", "{created}");
    let hold = gw.lab.pending_hold().await;
    assert_eq!(
        hold["spec"]["mcp"],
        json!({"server": "up", "tool": "write_note"})
    );
    assert_eq!(gw.upstream_calls(), Vec::<Value>::new());
    gw.decide(&hold, json!({"action": "approve"})).await;
    let result = printed(&mut out, "result").await;
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(text(&result), "wrote a: hello");
    assert_eq!(
        result["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        created["task"]["taskId"]
    );
    let task = printed(&mut out, "task").await;
    assert_eq!(task["status"], "completed", "{task}");
    assert_eq!(gw.upstream_calls().len(), 1);
    // The wait was reported under the call's progress token, tied to the task.
    let progress = printed(&mut out, "progress").await;
    let first = &progress[0];
    assert_eq!(first["progressToken"], "task-progress", "{progress}");
    let hold_id = hold["id"].as_str().unwrap();
    assert!(
        first["message"].as_str().unwrap().contains(hold_id),
        "{progress}"
    );
    assert_eq!(
        first["_meta"]["io.modelcontextprotocol/related-task"]["taskId"], created["task"]["taskId"],
        "{progress}"
    );
}

#[tokio::test]
async fn a_call_as_a_task_answers_at_once_and_tasks_result_gives_the_upstream_result() {
    let gw = Gateway::start("").await;
    approved_through_the_api(&gw).await;
}

#[tokio::test]
async fn over_http_a_call_as_a_task_answers_at_once_and_tasks_result_gives_the_upstream_result() {
    let gw = Gateway::served("").await;
    approved_through_the_api(&gw).await;
}

/// A task canceled while its hold waits: the hold is withdrawn, and the call never runs.
async fn canceled(gw: &Gateway) {
    let mut child = client(gw, &["task-cancel", "up__write_note", NOTE], None, false);
    let mut out = stdout(&mut child);
    let canceled = printed(&mut out, "canceled").await;
    assert_eq!(canceled["status"], "cancelled", "{canceled}");
    let task = printed(&mut out, "task").await;
    assert_eq!(task["status"], "cancelled");
    let hold = gw.lab.first_hold().await;
    let withdrawn = gw.resolved(hold["id"].as_str().unwrap()).await;
    assert_eq!(withdrawn["status"], "canceled", "{withdrawn}");
    assert_eq!(
        withdrawn["outcome"]["reason"],
        "the MCP client canceled the task"
    );
    assert_eq!(gw.upstream_calls(), Vec::<Value>::new());
}

#[tokio::test]
async fn tasks_cancel_withdraws_the_hold_and_the_upstream_never_runs() {
    let gw = Gateway::start("").await;
    canceled(&gw).await;
}

#[tokio::test]
async fn over_http_tasks_cancel_withdraws_the_hold_and_the_upstream_never_runs() {
    let gw = Gateway::served("").await;
    canceled(&gw).await;
}

/// A task whose hold is approved in the client: the call runs, recorded as alice's via the
/// client.
async fn approved_in_the_client(gw: &Gateway) {
    let mut child = client(
        gw,
        &["task", "up__write_note", NOTE],
        Some(r#"accept:{"decision": "approve", "reason": "as a task"}"#),
        true,
    );
    let mut out = stdout(&mut child);
    let created = printed(&mut out, "created").await;
    assert_eq!(created["task"]["status"], "working", "{created}");
    let elicited = printed(&mut out, "elicited").await;
    let message = elicited["message"].as_str().unwrap();
    assert!(message.contains("up__write_note"), "{message}");
    // The elicitation belongs to the task, which needs input while it is open.
    assert_eq!(elicited["related"], created["task"]["taskId"], "{elicited}");
    assert_eq!(elicited["task"]["status"], "input_required", "{elicited}");
    let result = printed(&mut out, "result").await;
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(text(&result), "wrote a: hello");
    assert_eq!(printed(&mut out, "task").await["status"], "completed");
    let hold = gw.lab.first_hold().await;
    let id = hold["id"].as_str().unwrap();
    let events = resolutions(gw, id).await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(
        events[0]["actor"],
        json!({"source": "person", "name": "alice", "role": "approver", "via": VIA})
    );
    assert_eq!(events[0]["payload"]["outcome"]["reason"], "as a task");
    assert_eq!(gw.upstream_calls().len(), 1);
}

#[tokio::test]
async fn a_task_s_hold_is_put_to_the_client_as_an_elicitation_and_its_answer_runs_the_call() {
    let gw = Gateway::start("").await;
    approved_in_the_client(&gw).await;
}

#[tokio::test]
async fn over_http_a_task_s_hold_is_put_to_the_client_as_an_elicitation_and_its_answer_runs_the_call()
 {
    let gw = Gateway::served("").await;
    approved_in_the_client(&gw).await;
}

/// A task's hold decided through the API while its elicitation is open: the elicitation is
/// withdrawn, and the API's decision is the one.
async fn decided_through_the_api_first(gw: &Gateway) {
    // The user never answers.
    let mut child = client(gw, &["task", "up__write_note", NOTE], Some("stdin"), true);
    let mut out = stdout(&mut child);
    printed(&mut out, "elicited").await;
    let hold = gw.lab.pending_hold().await;
    gw.decide(&hold, json!({"action": "deny", "reason": "not now"}))
        .await;
    assert_eq!(printed(&mut out, "elicitation_canceled").await, true);
    let result = printed(&mut out, "result").await;
    assert_eq!(result["isError"], true, "{result}");
    assert!(
        text(&result).contains("denied by alice: not now"),
        "{result}"
    );
    // A tool call whose result is an error ends its task as failed (2025-11-25).
    assert_eq!(printed(&mut out, "task").await["status"], "failed");
    let events = resolutions(gw, hold["id"].as_str().unwrap()).await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["actor"]["via"], Value::Null, "{events:?}");
    assert_eq!(gw.upstream_calls(), Vec::<Value>::new());
}

#[tokio::test]
async fn a_task_s_elicitation_is_withdrawn_when_the_hold_is_decided_through_the_api_first() {
    let gw = Gateway::start("").await;
    decided_through_the_api_first(&gw).await;
}

#[tokio::test]
async fn over_http_a_task_s_elicitation_is_withdrawn_when_the_hold_is_decided_through_the_api_first()
 {
    let gw = Gateway::served("").await;
    decided_through_the_api_first(&gw).await;
}
