//! `holdpoint serve` as a process: first start, JSON logs, graceful stop, and turns that
//! resume after a restart. Also `holdpoint config check`.

use std::path::Path;

use holdpoint_test_support::eventually;
use holdpoint_test_support::http::Api;
use holdpoint_test_support::llm::{ScriptedLlm, Step, call};
use holdpoint_test_support::serve::{Serve, ServeCommand};
use serde_json::{Value, json};

use super::{holdpoint, stderr, stdout};

/// `holdpoint serve` on `data` with `extra` arguments, its standard error piped to the test.
pub(super) fn served(data: &Path, extra: &[&str]) -> Serve {
    extra
        .iter()
        .fold(
            ServeCommand::new(env!("CARGO_BIN_EXE_holdpoint"), data),
            |command, arg| command.arg(arg),
        )
        .spawn()
}

/// Waits until the server reports a request to `route` in flight.
pub(super) async fn wait_until_in_flight(api: &Api, route: &str) {
    let line = &format!("holdpoint_http_requests_in_flight{{route=\"{route}\"}} 1");
    eventually(|| async move {
        if api.get("/metrics").await.text.contains(line) {
            Ok(())
        } else {
            Err(format!("no request to {route} in flight"))
        }
    })
    .await
}

pub(super) fn admin(data: &Path, url: &str) -> Api {
    let token = std::fs::read_to_string(data.join("admin-token")).unwrap();
    Api::new(url, Some(token.trim()))
}

/// A world `lab` with an agent on `llm` and a chat; `text` sent to it, and the hold its turn
/// raised: the turn's id and the hold's.
pub(super) async fn held_turn(api: &Api, llm: &ScriptedLlm, text: &str) -> (String, String) {
    api.post("/api/v1/worlds", json!({"name": "lab"}))
        .await
        .expect(201);
    api.post(
        "/api/v1/worlds/lab/agents",
        json!({"name": "helper", "llm": {"base_url": llm.base_url(), "model": "scripted"}}),
    )
    .await
    .expect(201);
    let chat = api
        .post("/api/v1/worlds/lab/chats", json!({"agent": "helper"}))
        .await
        .expect(201)["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut events = api.events("?world=lab", None).await;
    let turn = api
        .post(
            &format!("/api/v1/worlds/lab/chats/{chat}/messages"),
            json!({"text": text}),
        )
        .await
        .expect(202)["turn"]
        .as_str()
        .unwrap()
        .to_owned();
    let hold = events.next_of("hold.created").await.data["hold"]
        .as_str()
        .unwrap()
        .to_owned();
    (turn, hold)
}

#[tokio::test]
async fn a_turn_waiting_on_a_hold_resumes_after_a_restart() {
    let llm = ScriptedLlm::start(vec![
        Step::calls(vec![call(
            "c1",
            "shell_cmd",
            json!({"command": "echo resumed"}),
        )]),
        Step::text("Done."),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");

    let mut first = served(&data, &[]);
    let url = first.url().await;
    let login = first.stdout_line("sign in:").await;
    assert!(login.contains(&format!("{url}/login?token=hp_")), "{login}");
    let api = admin(&data, &url);
    let (turn, hold) = held_turn(&api, &llm, "check").await;

    // A long poll in flight ends when the server stops, and the server exits cleanly.
    let waiting = {
        let api = api.clone();
        let hold = hold.clone();
        tokio::spawn(async move {
            api.get(&format!("/api/v1/holds/{hold}/wait?timeout=2m"))
                .await
        })
    };
    wait_until_in_flight(&api, "/api/v1/holds/{hold}/wait").await;
    let status = first.terminate().await;
    assert!(status.success(), "{status}");
    let waited = waiting.await.unwrap().expect(200);
    assert_eq!(waited["decided"], false);

    // The second process finds the hold still pending and the turn waiting on it.
    let mut second = served(&data, &[]);
    let url = second.url().await;
    // The admin token was made on the first start only.
    let banner = second.stdout_line("sign in:").await;
    assert!(banner.contains(&url));
    let api = admin(&data, &url);
    let pending = api.get("/api/v1/holds").await.expect(200);
    assert_eq!(pending["items"][0]["id"], hold.as_str());
    let mut events = api.events("?world=lab", None).await;
    api.post(
        &format!("/api/v1/holds/{hold}/decision"),
        json!({"action": "approve"}),
    )
    .await
    .expect(200);
    let finished = events.next_of("turn.finished").await;
    assert_eq!(finished.data["payload"]["turn"], turn.as_str());
    let result = llm.wait_for_requests(2).await[1].tool_result("c1").unwrap();
    assert!(result.to_string().contains("resumed"), "{result}");
    assert!(second.terminate().await.success());
}

/// Waits until process `pid` has ended (gone, or a zombie nobody reaped yet).
async fn ended(pid: &str) {
    eventually(|| async move {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // The state follows the command name, which is in parentheses.
        let state = stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .chars()
            .next();
        if matches!(state, None | Some('Z' | 'X')) {
            Ok(())
        } else {
            Err(format!("process {pid} is still running"))
        }
    })
    .await
}

#[tokio::test]
async fn a_command_running_when_the_server_is_killed_dies_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let (pid_file, effect) = (dir.path().join("pid"), dir.path().join("effect"));
    let command = format!(
        "echo $$ > {0}.tmp && mv {0}.tmp {0}; sleep 2; echo done >> {1}",
        pid_file.display(),
        effect.display()
    );
    let llm = ScriptedLlm::start(vec![
        Step::calls(vec![call("c1", "shell_cmd", json!({"command": command}))]),
        Step::text("It was interrupted."),
    ])
    .await;
    let data = dir.path().join("data");
    let mut first = served(&data, &[]);
    let url = first.url().await;
    let api = admin(&data, &url);
    let (turn, hold) = held_turn(&api, &llm, "run it").await;
    api.post(
        &format!("/api/v1/holds/{hold}/decision"),
        json!({"action": "approve"}),
    )
    .await
    .expect(200);

    // The command runs (it wrote its pid); the server dies without a chance to clean up.
    let pid_file = &pid_file;
    let pid = eventually(|| async move {
        std::fs::read_to_string(pid_file)
            .map(|pid| pid.trim().to_owned())
            .map_err(|_| "the command never ran".to_owned())
    })
    .await;
    first.kill().await;

    // The command dies with it, before its effect.
    ended(&pid).await;
    assert!(
        !effect.exists(),
        "the command went on after the server died: {:?}",
        std::fs::read_to_string(&effect)
    );

    // The restarted server tells the LLM the call was interrupted.
    let mut second = served(&data, &[]);
    let url = second.url().await;
    let result = llm.wait_for_requests(2).await[1].tool_result("c1").unwrap();
    assert_eq!(result["status"], "interrupted", "{result}");
    assert!(!effect.exists());
    // The turn finishes with the LLM's answer before the server stops (the log is read from
    // its start, so the end is found however early it came).
    let api = admin(&data, &url);
    let mut events = api.events("?world=lab", Some(0)).await;
    let finished = events.next_of("turn.finished").await;
    assert_eq!(finished.data["payload"]["turn"], turn.as_str());
    assert!(second.terminate().await.success());
}

#[tokio::test]
async fn json_logs_for_collectors() {
    let dir = tempfile::tempdir().unwrap();
    let mut served = served(dir.path(), &["--log-format", "json"]);
    let line = served.stderr_line("listening").await;
    let entry: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(entry["level"], "INFO");
    let url = entry["url"].as_str().unwrap().to_owned();
    admin(dir.path(), &url).get("/healthz").await.expect(200);
    assert!(served.terminate().await.success());
}

#[tokio::test]
async fn a_taken_port_or_a_bad_policy_stops_the_start_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let data = dir.path().to_str().unwrap();
    let out = holdpoint(&["serve", "--data", data, "--bind", &addr]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains(&format!("cannot listen on {addr}")),
        "{}",
        stderr(&out)
    );
    assert!(
        !dir.path().join("holdpoint.db").exists(),
        "nothing was opened"
    );

    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, "mode = \"sometimes\"\n").unwrap();
    let out = holdpoint(&[
        "serve",
        "--data",
        data,
        "--bind",
        "127.0.0.1:0",
        "--policy",
        policy.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("mode: unknown variant `sometimes`"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn config_check_names_the_offending_key() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("holdpoint.toml");
    std::fs::write(
        &file,
        "[server]\nbind = \"127.0.0.1:8000\"\nmax_wait = \"5m\"\n[log]\nformat = \"json\"\n",
    )
    .unwrap();
    let path = file.to_str().unwrap();

    let out = holdpoint(&["config", "check", "--config", path]);
    assert!(out.status.success(), "{}", stderr(&out));
    let settings: toml::Table = stdout(&out).parse().unwrap();
    assert_eq!(settings["server"]["bind"].as_str(), Some("127.0.0.1:8000"));
    assert_eq!(settings["server"]["max_wait"].as_str(), Some("5m"));
    assert_eq!(settings["log"]["format"].as_str(), Some("json"));

    std::fs::write(&file, "[server]\nbnd = \"127.0.0.1:8000\"\n").unwrap();
    let out = holdpoint(&["config", "check", "--config", path]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("server.bnd"), "{}", stderr(&out));

    std::fs::write(&file, "[server]\nmax_wait = 30\n").unwrap();
    let out = holdpoint(&["config", "check", "--config", path]);
    assert!(
        stderr(&out).contains("server.max_wait") && stderr(&out).contains("duration"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn environment_variables_override_the_file_and_are_checked_too() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("holdpoint.toml");
    std::fs::write(&file, "[server]\nbind = \"127.0.0.1:8000\"\n").unwrap();
    let run = |vars: &[(&str, &str)]| {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_holdpoint"));
        c.args(["config", "check", "--config", file.to_str().unwrap()]);
        for (k, v) in vars {
            c.env(k, v);
        }
        c.output().unwrap()
    };
    let out = run(&[
        ("HOLDPOINT_SERVER_BIND", "127.0.0.1:9000"),
        ("HOLDPOINT_SERVER_ALLOWED_HOSTS", "a.example,b.example"),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let settings: toml::Table = stdout(&out).parse().unwrap();
    assert_eq!(settings["server"]["bind"].as_str(), Some("127.0.0.1:9000"));
    assert_eq!(
        settings["server"]["allowed_hosts"]
            .as_array()
            .unwrap()
            .len(),
        2
    );

    let out = run(&[("HOLDPOINT_SERVER_BINDD", "1")]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("server.bindd (from HOLDPOINT_SERVER_BINDD)"),
        "{}",
        stderr(&out)
    );
    let out = run(&[("HOLDPOINT_WEBHOOKS_ATTEMPTS", "0")]);
    assert!(
        stderr(&out).contains("webhooks.attempts"),
        "{}",
        stderr(&out)
    );
    let out = run(&[("HOLDPOINT_LOG_LEVEL", "verbose")]);
    assert!(stderr(&out).contains("log.level"), "{}", stderr(&out));
}

#[tokio::test]
async fn a_data_directory_left_readable_by_others_is_made_private_at_start() {
    use std::os::unix::fs::PermissionsExt;
    let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut first = served(&data, &[]);
    first.url().await;
    assert!(first.terminate().await.success());

    // An older version, a restore from backup or another program left them open to all.
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut files = Vec::new();
    for entry in std::fs::read_dir(&data).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
            files.push(path);
        }
    }
    assert!(
        files.iter().any(|f| f.ends_with("admin-token")) && files.len() > 1,
        "the database and the admin token are in the data directory: {files:?}"
    );

    let mut second = served(&data, &[]);
    second.url().await;
    assert_eq!(mode(&data), 0o700);
    for entry in std::fs::read_dir(&data).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            assert_eq!(mode(&path), 0o600, "{}", path.display());
        }
    }
    assert!(second.terminate().await.success());
}
