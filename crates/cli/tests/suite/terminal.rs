//! `holdpoint chat` and `holdpoint holds watch` driven through a pseudo-terminal, as a person
//! uses them, against a real server and a scripted LLM.

use holdpoint_test_support::llm::{Step, call};
use serde_json::{Value, json};

use super::lab::{Lab, Terminal};

fn shell(id: &str, command: &str) -> holdpoint_test_support::llm::ScriptedCall {
    call(id, "shell_cmd", json!({ "command": command }))
}

/// What the agent was told about call `id` (the result of its second LLM request).
async fn told(lab: &Lab, id: &str) -> Value {
    lab.llm.wait_for_requests(2).await[1]
        .tool_result(id)
        .unwrap()
}

/// Opens `holdpoint chat lab` (with `env` set) and sends the first message.
async fn chat(lab: &Lab, env: &[(&str, &str)], message: &str) -> Terminal {
    let mut t = lab.terminal(&["chat", "lab"], env);
    t.expect("you> ").await;
    t.line(message);
    t
}

#[tokio::test]
async fn approving_once_shows_the_call_without_escape_sequences() {
    let lab = Lab::start(vec![
        Step::calls(vec![shell("c1", "echo hi \u{1b}[2J\u{1b}]0;owned\u{7}")]),
        Step::text("All \u{1b}[31mdone\u{1b}[0m.\u{1b}[2J"),
    ])
    .await;
    let mut t = chat(&lab, &[], "say hi").await;
    let card = t.expect("choose 1-7: ").await;
    assert!(card.contains("Approval needed: shell_cmd"), "{card}");
    assert!(card.contains("no rule matched"), "{card}");
    for item in [
        "1) approve once",
        "2) approve for this chat",
        "5) deny, with a reason",
        "6) deny and stop the turn",
        "7) edit the arguments",
    ] {
        assert!(card.contains(item), "{item} missing from {card}");
    }
    // The escape sequences are shown as JSON escapes, never sent to the terminal.
    assert!(card.contains(r#""command": "echo hi \u001b[2J"#), "{card}");

    t.line("9");
    t.expect("\"9\" is not one of the choices: type a number from 1 to 7")
        .await;
    t.expect("choose 1-7: ").await;
    t.line("1");
    t.expect("approved once by admin").await;
    // The reply's escape sequences are shown, not sent.
    t.expect(r"All \u{1b}[31mdone\u{1b}[0m.\u{1b}[2J").await;
    t.expect("you> ").await;
    t.ctrl_d();
    t.expect("Left chat").await;
    let transcript = t.transcript();
    assert_eq!(t.exit_code().await, 0);
    assert!(
        !transcript.contains('\u{1b}') && !transcript.contains('\u{7}'),
        "{transcript:?}"
    );
    assert_eq!(told(&lab, "c1").await["status"], "executed");
}

#[tokio::test]
async fn denying_with_a_reason_tells_the_agent() {
    let lab = Lab::start(vec![
        Step::calls(vec![shell("c1", "rm -rf build")]),
        Step::text("OK, I will not."),
    ])
    .await;
    let mut t = chat(&lab, &[], "clean up").await;
    t.expect("choose 1-7: ").await;
    t.line("5");
    t.expect("reason (told to the agent; Enter for none): ")
        .await;
    t.line("too risky");
    t.expect("denied by admin: too risky").await;
    t.expect("OK, I will not.").await;
    let result = told(&lab, "c1").await;
    assert_eq!(result["reason"], "too risky", "{result}");
}

#[tokio::test]
async fn editing_in_the_editor_runs_the_edited_arguments() {
    let lab = Lab::start(vec![
        Step::calls(vec![shell("c1", "echo build")]),
        Step::text("Ran it."),
    ])
    .await;
    let mut t = chat(&lab, &[("EDITOR", "sed -i s/build/dist/")], "go").await;
    t.expect("choose 1-7: ").await;
    t.line("7");
    t.expect("approved with edited arguments by admin").await;
    t.expect("Ran it.").await;
    let result = told(&lab, "c1").await;
    assert_eq!(
        result["arguments"],
        json!({"command": "echo dist"}),
        "{result}"
    );
}

#[tokio::test]
async fn editing_inline_takes_json_and_explains_bad_json() {
    let lab = Lab::start(vec![
        Step::calls(vec![shell("c1", "echo build")]),
        Step::text("Ran it."),
    ])
    .await;
    let mut t = chat(&lab, &[], "go").await;
    t.expect("choose 1-7: ").await;
    t.line("7");
    t.expect("new arguments as JSON on one line").await;
    t.line("{not json");
    t.expect("that is not JSON").await;
    t.expect("choose 1-7: ").await;
    t.line("7");
    t.expect("new arguments as JSON on one line").await;
    t.line(r#"{"command": "echo inline"}"#);
    t.expect("approved with edited arguments").await;
    t.expect("Ran it.").await;
    assert_eq!(
        told(&lab, "c1").await["arguments"],
        json!({"command": "echo inline"})
    );
}

#[tokio::test]
async fn a_batch_is_decided_all_at_once() {
    let lab = Lab::start(vec![
        Step::calls(vec![shell("c1", "echo one"), shell("c2", "echo two")]),
        Step::text("Both ran."),
    ])
    .await;
    let mut t = chat(&lab, &[], "both").await;
    let shown = t.expect("choose 1-4: ").await;
    assert!(
        shown.contains("The agent asks for 2 calls at once"),
        "{shown}"
    );
    assert!(
        shown.contains("[1/2]") && shown.contains("[2/2]"),
        "{shown}"
    );
    assert!(shown.contains("1) approve all once"), "{shown}");
    t.line("1");
    t.expect("Both ran.").await;
    let request = &lab.llm.wait_for_requests(2).await[1];
    for id in ["c1", "c2"] {
        assert_eq!(request.tool_result(id).unwrap()["status"], "executed");
    }
}

fn deploy_question(id: &str) -> Step {
    Step::calls(vec![call(
        id,
        "ask_human",
        json!({"question": "Deploy now?", "confirm": true, "options": [
            {"id": "yes", "label": "Deploy"}, {"id": "no", "label": "Wait"}]}),
    )])
}

#[tokio::test]
async fn a_question_with_confirm_can_be_canceled_or_confirmed() {
    let lab = Lab::start(vec![deploy_question("q1"), Step::text("Canceled, then.")]).await;
    let mut t = chat(&lab, &[], "deploy?").await;
    let shown = t.expect("choose 1-3: ").await;
    assert!(shown.contains("Question: Deploy now?"), "{shown}");
    assert!(shown.contains("1) Deploy") && shown.contains("3) cancel the question"));
    t.line("1");
    t.expect("Confirm Deploy?").await;
    t.line("2");
    t.expect("canceled by admin").await;
    t.expect("Canceled, then.").await;
    assert_eq!(told(&lab, "q1").await["outcome"], "canceled");

    lab.llm.push(deploy_question("q2"));
    lab.llm.push(Step::text("Deploying."));
    t.expect("you> ").await;
    t.line("deploy now");
    t.expect("choose 1-3: ").await;
    t.line("1");
    t.expect("choose 1-2: ").await;
    t.line("1");
    t.expect("confirmed: Deploy by admin").await;
    t.expect("Deploying.").await;
}

#[tokio::test]
async fn ctrl_c_cancels_the_turn_and_the_chat_goes_on() {
    let lab = Lab::start(vec![Step::calls(vec![shell("c1", "echo x")])]).await;
    let mut t = chat(&lab, &[], "go").await;
    t.expect("choose 1-7: ").await;
    let hold = lab.pending_hold().await;
    t.ctrl_c();
    t.expect("Canceling the turn").await;
    t.expect("Turn canceled.").await;
    t.expect("you> ").await;
    let hold = lab.hold(hold["id"].as_str().unwrap()).await;
    assert_eq!(hold["status"], "canceled");
    t.ctrl_d();
    assert_eq!(t.exit_code().await, 0);
}

#[tokio::test]
async fn watch_offers_the_menus_for_holds_of_any_chat() {
    let lab = Lab::start(vec![]).await;
    let agent = lab.admin.as_token(&lab.token("deploy-bot", "agent").await);
    let raise = |item: Value| {
        let agent = agent.clone();
        async move {
            agent
                .post(
                    "/api/v1/worlds/lab/holds",
                    json!({"chat": "ci-42", "items": [item]}),
                )
                .await
                .expect(201)["results"][0]["hold"]["id"]
                .as_str()
                .unwrap()
                .to_owned()
        }
    };
    let first =
        raise(json!({"kind": "approval", "tool": "deploy", "arguments": {"env": "prod"}})).await;
    let mut t = lab.terminal(&["holds", "watch"], &[]);
    let shown = t.expect("choose 1-7: ").await;
    assert!(shown.contains("Approval needed: deploy"), "{shown}");
    t.line("1");
    t.expect("approved once by admin").await;
    assert_eq!(lab.hold(&first).await["status"], "approved");

    let second = raise(
        json!({"kind": "question", "question": "Proceed?", "options": [
        {"id": "yes", "label": "Yes"}, {"id": "no", "label": "No"}]}),
    )
    .await;
    t.expect("Question: Proceed?").await;
    t.expect("choose 1-3: ").await;
    t.line("2");
    t.expect("answered: No by admin").await;
    assert_eq!(lab.hold(&second).await["status"], "answered");
    t.ctrl_c();
    assert_eq!(t.exit_code().await, 0);
}

#[tokio::test]
async fn watch_shows_c1_and_bidi_controls_as_escapes_and_loses_nothing_after_them() {
    let lab = Lab::start(vec![]).await;
    let agent = lab.admin.as_token(&lab.token("deploy-bot", "agent").await);
    // JSON escapes C0 controls but not C1 ones: the CSI reaches the terminal code raw,
    // followed by the closing quote, the newline and the next key.
    let arguments = json!({"a": "x\u{9b}", "b": "file\u{202e}txt.exe\u{2066}", "c": "next"});
    agent
        .post(
            "/api/v1/worlds/lab/holds",
            json!({"chat": "ci-42", "items": [{"kind": "approval", "tool": "deploy", "arguments": arguments.clone()}]}),
        )
        .await
        .expect(201);
    let mut t = lab.terminal(&["holds", "watch"], &[]);
    let card = t.expect("choose 1-7: ").await;
    for line in [
        r#"      "a": "x\u{9b}","#,
        r#"      "b": "file\u{202e}txt.exe\u{2066}","#,
        r#"      "c": "next""#,
    ] {
        assert!(
            card.contains(&format!("{line}\n")),
            "{line} missing from {card}"
        );
    }
    t.line("1");
    t.expect("approved once by admin").await;
    let transcript = t.transcript();
    t.ctrl_c();
    assert_eq!(t.exit_code().await, 0);
    for raw in ['\u{9b}', '\u{202e}', '\u{2066}'] {
        assert!(!transcript.contains(raw), "{raw:?} in {transcript:?}");
    }

    // --json keeps the value, with those characters as JSON's own escapes.
    let out = lab
        .command(&["holds", "list", "--status", "any", "--json"], &lab.token)
        .output()
        .await
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains(r#""a": "x\u009b""#), "{text}");
    assert!(
        !text.contains('\u{9b}') && !text.contains('\u{202e}'),
        "{text:?}"
    );
    let page: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(page["items"][0]["spec"]["arguments"], arguments);
}
