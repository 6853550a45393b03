//! `holdpoint ask`, `holdpoint exec` and `holdpoint chat` without a terminal, as scripts and CI
//! jobs run them: answers, denials, timeouts, policy deciding without asking, exit statuses,
//! and the fail-closed default.

use std::process::{Output, Stdio};

use holdpoint_test_support::PATIENCE;
use holdpoint_test_support::http::Api;
use holdpoint_test_support::llm::{Step, call};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use super::lab::Lab;

/// Starts `holdpoint ARGS` as the agent `bot`; returns the running child and an approver.
async fn start(lab: &Lab, args: &[&str]) -> (tokio::process::Child, Api) {
    let bot = lab.token("bot", "agent").await;
    let child = lab
        .command(args, &bot)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let alice = lab.admin.as_token(&lab.token("alice", "approver").await);
    (child, alice)
}

async fn finish(child: tokio::process::Child) -> (i32, String, String) {
    let out: Output = tokio::time::timeout(PATIENCE, child.wait_with_output())
        .await
        .expect("the command did not finish in time")
        .unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs `command` with `input` on its stdin; its status and output.
async fn piped(mut command: tokio::process::Command, input: &[u8]) -> (i32, String, String) {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input).await.unwrap();
    drop(stdin);
    finish(child).await
}

async fn decide(lab: &Lab, approver: &Api, body: serde_json::Value) -> serde_json::Value {
    let hold = lab.pending_hold().await;
    let id = hold["id"].as_str().unwrap();
    approver
        .post(&format!("/api/v1/holds/{id}/decision"), body)
        .await
        .expect(200);
    hold
}

const ASK: &[&str] = &[
    "ask",
    "Deploy v2 to production?",
    "--option",
    "deploy=Deploy now",
    "--option",
    "abort",
    "--default",
    "abort",
];

#[tokio::test]
async fn ask_prints_the_answer_and_exits_0() {
    let lab = Lab::start(vec![]).await;
    let (child, alice) = start(&lab, ASK).await;
    let hold = decide(
        &lab,
        &alice,
        json!({"action": "answer", "options": ["deploy"]}),
    )
    .await;
    assert_eq!(hold["spec"]["question"], "Deploy v2 to production?");
    assert_eq!(hold["spec"]["options"][0]["label"], "Deploy now");
    assert_eq!(hold["requested_by"], "bot");
    let (code, stdout, stderr) = finish(child).await;
    assert_eq!((code, stdout.as_str()), (0, "deploy\n"), "{stderr}");
}

#[tokio::test]
async fn ask_with_confirm_and_json_reports_the_confirmed_outcome() {
    let lab = Lab::start(vec![]).await;
    let mut args = ASK.to_vec();
    args.extend(["--confirm", "--json"]);
    let (child, alice) = start(&lab, &args).await;
    let hold = decide(
        &lab,
        &alice,
        json!({"action": "answer", "options": ["deploy"]}),
    )
    .await;
    let id = hold["id"].as_str().unwrap();
    alice
        .post(
            &format!("/api/v1/holds/{id}/decision"),
            json!({"action": "confirm"}),
        )
        .await
        .expect(200);
    let (code, stdout, _) = finish(child).await;
    assert_eq!(code, 0);
    let printed: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(printed["hold"], id);
    assert_eq!(printed["outcome"]["status"], "confirmed");
    assert_eq!(printed["outcome"]["options"][0]["id"], "deploy");
}

#[tokio::test]
async fn ask_exits_123_when_canceled() {
    let lab = Lab::start(vec![]).await;
    let (child, alice) = start(&lab, ASK).await;
    decide(
        &lab,
        &alice,
        json!({"action": "cancel", "reason": "not now"}),
    )
    .await;
    let (code, stdout, stderr) = finish(child).await;
    assert_eq!((code, stdout.as_str()), (123, ""));
    assert!(stderr.contains("canceled by alice: not now"), "{stderr}");
}

#[tokio::test]
async fn ask_exits_124_when_the_deadline_passes_and_prints_what_the_timeout_applied() {
    let lab = Lab::start(vec![]).await;
    let mut args = ASK.to_vec();
    args.extend(["--timeout", "1s"]);
    let (child, _) = start(&lab, &args).await;
    let (code, stdout, stderr) = finish(child).await;
    assert_eq!((code, stdout.as_str()), (124, "abort\n"), "{stderr}");
    assert!(
        stderr.contains("timed out: the answer is abort"),
        "{stderr}"
    );
}

#[tokio::test]
async fn a_question_without_a_default_times_out_with_no_answer() {
    let lab = Lab::start(vec![]).await;
    let args = [
        "ask",
        "Deploy to production?",
        "--option",
        "deploy",
        "--option",
        "abort",
        "--timeout",
        "1s",
    ];
    let (child, _) = start(&lab, &args).await;
    let (code, stdout, stderr) = finish(child).await;
    assert_eq!(
        (code, stdout.as_str()),
        (124, ""),
        "nobody chose `deploy`: {stderr}"
    );
    assert!(stderr.contains("timed out: no answer"), "{stderr}");
}

#[tokio::test]
async fn ask_exits_125_when_it_cannot_ask() {
    let lab = Lab::start(vec![]).await;
    let child = lab
        .command(ASK, "hp_not_a_token")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (code, _, stderr) = finish(child).await;
    assert_eq!(code, 125, "{stderr}");
    assert!(stderr.contains("HOLDPOINT_TOKEN"), "{stderr}");
}

const POLICY: &str = r#"
mode = "manual"

[[rules]]
name = "echo is harmless"
tools = ["exec"]
action = "allow"
command = { program = "echo" }

[[rules]]
name = "never delete"
tools = ["exec"]
action = "deny"
command = { program = "rm" }
"#;

#[tokio::test]
async fn exec_runs_what_policy_allows_without_asking() {
    let lab = Lab::with_policy(vec![], Some(POLICY)).await;
    let (child, _) = start(&lab, &["exec", "--", "echo", "ran at once"]).await;
    let (code, stdout, stderr) = finish(child).await;
    assert_eq!((code, stdout.as_str()), (0, "ran at once\n"), "{stderr}");
    assert!(
        stderr.contains("Allowed by rule \"echo is harmless\":"),
        "{stderr}"
    );
    let holds = lab.admin.get("/api/v1/holds?status=any").await.expect(200);
    assert_eq!(holds["items"], json!([]));
}

#[tokio::test]
async fn exec_never_runs_what_policy_denies() {
    let lab = Lab::with_policy(vec![], Some(POLICY)).await;
    let victim = lab.data().join("victim");
    std::fs::write(&victim, "still here").unwrap();
    let (child, _) = start(&lab, &["exec", "--", "rm", victim.to_str().unwrap()]).await;
    let (code, _, stderr) = finish(child).await;
    assert_eq!(code, 123, "{stderr}");
    assert!(
        stderr.contains("Denied by rule \"never delete\";"),
        "{stderr}"
    );
    assert!(victim.exists());
}

#[tokio::test]
async fn exec_runs_an_approved_command_and_exits_with_its_status() {
    let lab = Lab::start(vec![]).await;
    let (child, alice) = start(
        &lab,
        &[
            "exec",
            "--reason",
            "check",
            "--",
            "sh",
            "-c",
            "echo approved; exit 7",
        ],
    )
    .await;
    let hold = decide(&lab, &alice, json!({"action": "approve"})).await;
    assert_eq!(hold["spec"]["tool"], "exec");
    assert_eq!(
        hold["spec"]["arguments"]["command"],
        json!(["sh", "-c", "echo approved; exit 7"])
    );
    assert_eq!(hold["spec"]["description"], "check");
    assert_eq!(
        hold["offers"],
        json!(["approve_once", "approve_always_args", "deny"])
    );
    let (code, stdout, stderr) = finish(child).await;
    assert_eq!((code, stdout.as_str()), (7, "approved\n"), "{stderr}");
}

#[tokio::test]
async fn exec_exits_123_when_denied_and_124_when_timed_out_and_runs_nothing() {
    let lab = Lab::start(vec![]).await;
    let marker = lab.data().join("marker");
    let touch = ["exec", "--", "touch", marker.to_str().unwrap()];
    let (child, alice) = start(&lab, &touch).await;
    decide(&lab, &alice, json!({"action": "deny", "reason": "no"})).await;
    let (code, _, stderr) = finish(child).await;
    assert_eq!(code, 123, "{stderr}");
    assert!(stderr.contains("Not run: denied by alice: no"), "{stderr}");

    let mut timed = touch.to_vec();
    timed.splice(1..1, ["--timeout", "1s"]);
    let (child, _) = start(&lab, &timed).await;
    let (code, _, stderr) = finish(child).await;
    assert_eq!(code, 124, "{stderr}");
    assert!(!marker.exists());
}

#[tokio::test]
async fn ctrl_c_withdraws_the_hold_and_exits_130() {
    let lab = Lab::start(vec![]).await;
    let marker = lab.data().join("marker");
    let exec = ["exec", "--", "touch", marker.to_str().unwrap()];
    for args in [&["ask", "Go?", "--option", "yes"][..], &exec[..]] {
        let (mut child, _) = start(&lab, args).await;
        // Interrupted once it says where to answer, as a person would.
        let mut stderr = BufReader::new(child.stderr.take().unwrap()).lines();
        let hint = tokio::time::timeout(PATIENCE, async {
            loop {
                let line = stderr
                    .next_line()
                    .await
                    .unwrap()
                    .expect("no hint was printed");
                if line.starts_with("Waiting for a person") {
                    return line;
                }
            }
        })
        .await
        .expect("no hint in time");
        let hold = hint
            .split_once("(hold ")
            .and_then(|(_, rest)| rest.split_once(')'))
            .map(|(id, _)| id.to_owned())
            .unwrap_or_else(|| panic!("no hold id in {hint:?}"));
        let pid = child.id().unwrap().to_string();
        let sent = std::process::Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .unwrap();
        assert!(sent.success());

        let status = tokio::time::timeout(PATIENCE, child.wait())
            .await
            .expect("the command did not stop in time")
            .unwrap();
        assert_eq!(status.code(), Some(130), "{args:?}");
        let mut rest = String::new();
        while let Some(line) = stderr.next_line().await.unwrap() {
            rest.push_str(&line);
        }
        assert!(rest.contains(&format!("hold {hold} withdrawn")), "{rest}");
        let withdrawn = lab.hold(&hold).await;
        assert_eq!(withdrawn["status"], "canceled", "{withdrawn}");
        assert_eq!(
            withdrawn["outcome"]["reason"], "the asking command was interrupted",
            "{withdrawn}"
        );
    }
    assert!(!marker.exists(), "the interrupted command ran");
}

#[tokio::test]
async fn chat_without_a_terminal_applies_and_records_the_fail_closed_default() {
    let lab = Lab::start(vec![
        Step::calls(vec![
            call("c1", "shell_cmd", json!({"command": "echo x"})),
            call(
                "q1",
                "ask_human",
                json!({"question": "Which?", "options": [{"id": "a", "label": "A"}, {"id": "no", "label": "No"}]}),
            ),
        ]),
        Step::text("Understood."),
    ])
    .await;
    let (code, stdout, stderr) = piped(
        lab.command(&["chat", "lab"], &lab.token),
        b"please run it\n",
    )
    .await;
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains(
            "no one to ask here; denied (the fail-closed default, applied by admin): no terminal"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("no one to ask here; answered: No (the fail-closed default"),
        "{stdout}"
    );
    assert!(stdout.contains("Understood."), "{stdout}");

    let resolved = lab
        .admin
        .get("/api/v1/holds?status=resolved")
        .await
        .expect(200);
    let items = resolved["items"].as_array().unwrap();
    assert_eq!(items.len(), 2);
    for hold in items {
        assert_eq!(hold["outcome"]["source"], "default", "{hold}");
    }
    // The LLM hears that nobody was asked, not that someone refused.
    let request = &lab.llm.wait_for_requests(2).await[1];
    assert_eq!(
        request.tool_result("c1").unwrap(),
        json!({"status": "denied_by_default", "reason": "no terminal: holdpoint chat ran without one", "applied_by": ["admin"]})
    );
    let answer = request.tool_result("q1").unwrap();
    assert_eq!(answer["options"][0]["id"], "no", "{answer}");
    assert_eq!(answer["by_default"], true, "{answer}");
}

#[tokio::test]
async fn chat_without_a_terminal_exits_1_when_a_turn_failed() {
    let lab = Lab::start(vec![
        Step::text("Done."),
        Step::Status(401, "invalid API key".into()),
    ])
    .await;
    let (code, stdout, stderr) = piped(
        lab.command(&["chat", "lab"], &lab.token),
        b"first\nsecond\n",
    )
    .await;
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    assert!(stdout.contains("Done."), "{stdout}");
    assert!(stdout.contains("The turn failed"), "{stdout}");
    assert!(
        stderr.contains("a message was refused or its turn failed"),
        "{stderr}"
    );
}

#[tokio::test]
async fn chat_runs_holdpoint_in_process_when_no_server_answers() {
    let lab = Lab::start(vec![Step::text("Hello from the same process.")]).await;
    let data = lab.data().join("data");
    let token = lab.token.clone();
    // The server stops: its data directory is free for the CLI to open.
    let Lab {
        server, llm, dir, ..
    } = lab;
    server.stop().await.unwrap();
    let mut chat = tokio::process::Command::new(env!("CARGO_BIN_EXE_holdpoint"));
    chat.args(["chat", "lab", "--data"])
        .arg(&data)
        .env_remove("HOLDPOINT_SERVER")
        .env_remove("HOLDPOINT_TOKEN")
        .env_remove("HOLDPOINT_CONFIG")
        // Nothing listens on port 1: the configured address does not answer.
        .env("HOLDPOINT_SERVER_BIND", "127.0.0.1:1")
        .kill_on_drop(true);
    let (code, stdout, stderr) = piped(chat, b"hi\n").await;
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("running Holdpoint in this process"),
        "{stderr}"
    );
    assert!(stdout.contains("Hello from the same process."), "{stdout}");
    assert_eq!(llm.requests().len(), 1);
    // The admin token still works: the data directory was opened, not replaced.
    assert!(
        std::fs::read_to_string(data.join("admin-token"))
            .unwrap()
            .contains(&token)
    );
    drop(dir);
}

#[test]
fn completions_are_printed_for_each_shell() {
    for shell in ["bash", "zsh", "fish"] {
        let out = super::holdpoint(&["completions", shell]);
        assert!(out.status.success(), "{shell}: {}", super::stderr(&out));
        let script = super::stdout(&out);
        for word in ["holdpoint", "chat", "holds", "ask", "exec"] {
            assert!(script.contains(word), "{shell} lacks {word}");
        }
    }
    let out = super::holdpoint(&["completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(2));
}

#[tokio::test]
async fn mcp_names_a_refused_approver_token_as_the_approver_token() {
    let lab = Lab::start(vec![]).await;
    let bot = lab.token("bot", "agent").await;
    let mut command = lab.command(&["mcp", "--world", "lab"], &bot);
    command.env("HOLDPOINT_APPROVER_TOKEN", "hp_not_a_token_of_this_server");
    let (code, _, stderr) = piped(command, b"").await;
    assert_eq!(code, 125, "{stderr}");
    assert!(
        stderr.contains("HOLDPOINT_APPROVER_TOKEN was refused"),
        "{stderr}"
    );
    assert!(!stderr.contains("HOLDPOINT_TOKEN"), "{stderr}");
}
