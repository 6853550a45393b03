//! `holdpoint worlds`, `agents` and `chats` against a real server, as child processes.

use holdpoint_test_support::PATIENCE;
use serde_json::{Value, json};

use super::lab::Lab;
use super::{stderr, stdout};

pub(super) async fn run(lab: &Lab, token: &str, args: &[&str]) -> (i32, String, String) {
    let out = tokio::time::timeout(PATIENCE, lab.command(args, token).output())
        .await
        .expect("the command did not finish in time")
        .unwrap();
    (out.status.code().unwrap(), stdout(&out), stderr(&out))
}

/// Runs `args` as the admin with `--json`; the JSON it printed.
pub(super) async fn json(lab: &Lab, args: &[&str]) -> Value {
    let mut args = args.to_vec();
    args.push("--json");
    let (code, out, err) = run(lab, &lab.token, &args).await;
    assert_eq!(code, 0, "{args:?}: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: {e}: {out}"))
}

#[tokio::test]
async fn worlds_agents_and_chats_are_managed_from_the_terminal() {
    let lab = Lab::start(vec![]).await;
    let url = lab.llm.base_url();

    let world = json(
        &lab,
        &["worlds", "create", "ops", "--description", "on call"],
    )
    .await;
    assert_eq!(
        (world["name"].as_str(), world["description"].as_str()),
        (Some("ops"), Some("on call"))
    );
    let (code, listed, _) = run(&lab, &lab.token, &["worlds", "list"]).await;
    assert_eq!(code, 0);
    assert!(
        listed.contains("lab") && listed.contains("ops  on call"),
        "{listed}"
    );
    let world = json(&lab, &["worlds", "change", "ops", "--name", "oncall"]).await;
    assert_eq!(
        (world["name"].as_str(), world["description"].as_str()),
        (Some("oncall"), Some("on call"))
    );

    let agent = json(
        &lab,
        &[
            "agents",
            "create",
            "oncall",
            "pager",
            "--base-url",
            &url,
            "--model",
            "m1",
            "--api-key-env",
            "PAGER_KEY",
            "--tool",
            "read_file",
            "--max-steps",
            "7",
        ],
    )
    .await;
    assert_eq!(
        agent["llm"],
        json!({"base_url": url, "model": "m1", "api_key_env": "PAGER_KEY"})
    );
    assert_eq!(
        (agent["tools"].clone(), agent["max_steps"].clone()),
        (json!(["read_file"]), json!(7))
    );
    // A change keeps what it does not name, in the LLM settings too.
    let agent = json(
        &lab,
        &["agents", "change", "oncall", "pager", "--model", "m2"],
    )
    .await;
    assert_eq!(
        agent["llm"],
        json!({"base_url": url, "model": "m2", "api_key_env": "PAGER_KEY"})
    );
    assert_eq!(agent["max_steps"], 7);

    let chat = json(
        &lab,
        &[
            "chats", "create", "oncall", "--agent", "pager", "--title", "night",
        ],
    )
    .await;
    assert_eq!(
        (chat["title"].as_str(), chat["agent"].clone()),
        (Some("night"), agent["id"].clone())
    );
    let id = chat["id"].as_str().unwrap().to_owned();
    let chat = json(&lab, &["chats", "change", "oncall", &id, "--title", "day"]).await;
    assert_eq!(
        (chat["title"].as_str(), chat["agent"].clone()),
        (Some("day"), agent["id"].clone())
    );
    let chats = json(&lab, &["chats", "list", "oncall"]).await;
    assert_eq!(chats, json!([chat.clone()]));
    // For people, the chat's agent by its name.
    let (code, listed, err) = run(&lab, &lab.token, &["chats", "list", "oncall"]).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(listed, format!("{id}  day  (agent pager)\n"));

    // Chats use the agent: it stays until they are gone.
    let (code, _, err) = run(&lab, &lab.token, &["agents", "delete", "oncall", "pager"]).await;
    assert_eq!(code, 1, "{err}");
    let (code, out, err) = run(&lab, &lab.token, &["chats", "delete", "oncall", &id]).await;
    assert_eq!(
        (code, out.trim()),
        (0, format!("Deleted chat {id}.").as_str()),
        "{err}"
    );
    json(&lab, &["agents", "delete", "oncall", "pager"]).await;
    assert_eq!(json(&lab, &["agents", "list", "oncall"]).await, json!([]));
    json(&lab, &["worlds", "delete", "oncall"]).await;
    let worlds = json(&lab, &["worlds", "list"]).await;
    assert_eq!(worlds.as_array().unwrap().len(), 1, "{worlds}");
}

#[tokio::test]
async fn mistakes_are_named_and_change_nothing() {
    let lab = Lab::start(vec![]).await;
    // An agent needs its LLM: refused before anything is sent.
    let (code, _, err) = run(
        &lab,
        &lab.token,
        &["agents", "create", "lab", "x", "--model", "m"],
    )
    .await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--base-url"), "{err}");
    // The server's refusals are passed on, naming what is wrong.
    let (code, _, err) = run(&lab, &lab.token, &["agents", "list", "nowhere"]).await;
    assert_eq!(code, 1);
    assert!(err.contains("nowhere"), "{err}");
    let (code, _, err) = run(&lab, &lab.token, &["worlds", "create", "lab"]).await;
    assert_eq!(code, 1);
    assert!(err.contains("lab"), "{err}");
    // Only admins manage worlds.
    let alice = lab.token("alice", "approver").await;
    let (code, _, err) = run(&lab, &alice, &["worlds", "create", "mine"]).await;
    assert_eq!(code, 1);
    assert!(err.contains("admin"), "{err}");
    assert_eq!(
        json(&lab, &["worlds", "list"])
            .await
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

#[test]
fn without_a_server_a_command_says_to_start_one() {
    let dir = tempfile::tempdir().unwrap();
    // An address nothing listens on.
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", free.local_addr().unwrap());
    drop(free);
    // Without a token (no server has written its admin token here), and with one.
    for token in [None, Some("hp_anything")] {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_holdpoint"));
        command
            .args(["worlds", "create", "lab"])
            .env("HOLDPOINT_DATA", dir.path())
            .env("HOLDPOINT_SERVER", &url)
            .env_remove("HOLDPOINT_TOKEN")
            .env_remove("HOLDPOINT_CONFIG");
        if let Some(token) = token {
            command.env("HOLDPOINT_TOKEN", token);
        }
        let out = command.output().unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{token:?}: {err}");
        assert!(
            err.contains("start one with `holdpoint serve`"),
            "{token:?}: {err}"
        );
    }
}
