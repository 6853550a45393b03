//! The server's policies from the terminal: a world's own (`policy set`, `show --world`,
//! `history`), reloading the base (`policy reload`, and SIGHUP to a real `holdpoint serve`).

use rustix::process::Signal;
use serde_json::{Value, json};

use super::catalog::{json, run};
use super::lab::Lab;
use super::serve::{admin, served};
use holdpoint_test_support::http::Api;

async fn shell(api: &Api, world: &str, command: &str) -> String {
    let reply = api
        .post(
            &format!("/api/v1/worlds/{world}/holds"),
            json!({"items": [{"kind": "approval", "tool": "shell_cmd", "arguments": {"command": command}}]}),
        )
        .await;
    assert!(matches!(reply.status, 200 | 201), "{}", reply.text);
    let body: Value = serde_json::from_str(&reply.text).unwrap();
    body["results"][0]["result"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn sighup_reloads_the_policy_file_and_a_broken_one_keeps_the_old() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("policy.toml");
    std::fs::write(&file, "mode = \"auto_deny\"\n").unwrap();
    let data = dir.path().join("data");
    let mut served = served(&data, &["--policy", file.to_str().unwrap()]);
    let url = served.url().await;
    let api = admin(&data, &url);
    api.post("/api/v1/worlds", json!({"name": "lab"}))
        .await
        .expect(201);
    assert_eq!(shell(&api, "lab", "ls").await, "denied");

    std::fs::write(&file, "mode = \"sometimes\"\n").unwrap();
    served.signal(Signal::HUP);
    let line = served.stderr_line("policy not reloaded").await;
    assert!(line.contains("unknown variant `sometimes`"), "{line}");
    assert_eq!(shell(&api, "lab", "ls").await, "denied");

    std::fs::write(&file, "mode = \"auto_approve\"\n").unwrap();
    served.signal(Signal::HUP);
    served.stderr_line("SIGHUP: policy reloaded").await;
    assert_eq!(shell(&api, "lab", "ls").await, "allowed");
    let events = api.get("/api/v1/audit/events?limit=1000").await.expect(200);
    let reloads = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["payload"]["type"] == "policy.changed")
        .count();
    assert_eq!(reloads, 1);
    assert!(served.terminate().await.success());
}

#[tokio::test]
async fn a_worlds_policy_is_set_shown_and_listed_from_the_terminal() {
    let lab = Lab::with_policy(vec![], Some("mode = \"manual\"\n")).await;
    let file = lab.dir.path().join("lab.toml");
    let text = "[[rules]]\nname = \"ls\"\ntools = [\"shell_cmd\"]\naction = \"allow\"\ncommand = { program = \"ls\" }\n";
    std::fs::write(&file, text).unwrap();
    let path = file.to_str().unwrap();

    let (code, out, err) = run(&lab, &lab.token, &["policy", "set", "--world", "lab", path]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("policy version 1 is in force"), "{out}");
    let (code, out, _) = run(&lab, &lab.token, &["policy", "show", "--world", "lab"]).await;
    assert_eq!((code, out.as_str()), (0, text));

    let broken = lab.dir.path().join("broken.toml");
    std::fs::write(
        &broken,
        format!("{text}must_match = [{{ tool = \"shell_cmd\", args = {{ command = \"cat\" }} }}]\n[[checks]]\ntool = \"x\"\nexpect = \"allow\"\n"),
    )
    .unwrap();
    let (code, _, err) = run(
        &lab,
        &lab.token,
        &["policy", "set", "--world", "lab", broken.to_str().unwrap()],
    )
    .await;
    assert_eq!(code, 1);
    assert!(
        err.contains("rules[0].must_match[0]") && err.contains("checks[0].expect"),
        "{err}"
    );

    let approver = lab.token("alice", "approver").await;
    let (code, _, err) = run(&lab, &approver, &["policy", "set", "--world", "lab", path]).await;
    assert_eq!(code, 1);
    assert!(err.contains("admin"), "{err}");

    let history = json(&lab, &["policy", "history", "--world", "lab"]).await;
    assert_eq!(history.as_array().unwrap().len(), 1);
    assert_eq!(history[0]["by"]["name"], "admin");
    let reloaded = json(&lab, &["policy", "reload"]).await;
    assert_eq!(reloaded["changed"], false);
}

#[tokio::test]
async fn replay_shows_what_a_candidate_would_change() {
    let lab = Lab::with_policy(vec![], Some("mode = \"manual\"\n")).await;
    let file = lab.dir.path().join("lab.toml");
    let allows =
        "[[rules]]\ntools = [\"shell_cmd\"]\naction = \"allow\"\ncommand = { program = \"ls\" }\n";
    std::fs::write(&file, allows).unwrap();
    let (code, _, err) = run(
        &lab,
        &lab.token,
        &["policy", "set", "--world", "lab", file.to_str().unwrap()],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(shell(&lab.admin, "lab", "ls -la").await, "allowed");

    let candidate = lab.dir.path().join("candidate.toml");
    std::fs::write(&candidate, "mode = \"auto_deny\"\n").unwrap();
    let args = [
        "policy",
        "replay",
        "--world",
        "lab",
        "--policy",
        candidate.to_str().unwrap(),
        "--since",
        "7d",
    ];
    let (code, out, err) = run(&lab, &lab.token, &args).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("1 calls replayed: 0 decided the same, 1 differently.")
            && out.contains("1 allowed -> deny")
            && out.contains("ls -la"),
        "{out}"
    );
    let report = json(&lab, &args).await;
    assert_eq!(report["changes"][0]["before"], "allowed");
}
