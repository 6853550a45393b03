//! `holdpoint mcp`'s standard streams and its two ways of reaching Holdpoint: pipes are read
//! and written in non-blocking mode, put back as they were when it ends (and a pipe that is
//! standard error too is left blocking); with no server to reach, it runs Holdpoint in its
//! own process and asks that engine.

use std::io::{BufRead, BufReader, PipeReader, Write};
use std::os::fd::AsFd;
use std::process::{Command, Stdio};

use holdpoint_server::{Server, Settings};
use holdpoint_test_support::PATIENCE;
use holdpoint_test_support::http::Api;
use holdpoint_test_support::serve::{Signal, signal_process};
use rustix::fs::OFlags;
use serde_json::{Value, json};

use super::lab::Lab;
use super::mcp::{Client, Gateway, finished, text, upstream_section};

fn nonblocking(fd: impl AsFd) -> bool {
    rustix::fs::fcntl_getfl(fd)
        .unwrap()
        .contains(OFlags::NONBLOCK)
}

/// `holdpoint mcp` for `gw`'s agent, with no upstreams, its streams as given.
fn gateway(gw: &Gateway, stdin: Stdio, stdout: Stdio, stderr: Stdio) -> std::process::Child {
    let config = gw.lab.data().join("no-upstreams.toml");
    std::fs::write(&config, "").unwrap();
    Command::new(env!("CARGO_BIN_EXE_holdpoint"))
        .args(["mcp", "--world", "lab"])
        .env("HOLDPOINT_SERVER", gw.lab.server.url())
        .env("HOLDPOINT_TOKEN", &gw.agent)
        .env("HOLDPOINT_DATA", gw.lab.data().join("elsewhere"))
        .env("HOLDPOINT_CONFIG", &config)
        .stdin(stdin)
        .stdout(stdout)
        .stderr(stderr)
        .spawn()
        .unwrap()
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"test","version":"0"}}}"#;

/// Sends `initialize` and reads its answer (on a thread of its own: the test keeps a copy of
/// the gateway's output, so a gateway that died would never end the read).
fn initialize(to: &mut impl Write, from: PipeReader) -> PipeReader {
    writeln!(to, "{INITIALIZE}").unwrap();
    to.flush().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut from = BufReader::new(from);
        let mut line = String::new();
        from.read_line(&mut line).unwrap();
        let _ = tx.send((line, from.into_inner()));
    });
    let (line, from) = rx
        .recv_timeout(PATIENCE)
        .expect("holdpoint mcp did not answer initialize");
    let answer: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(answer["id"], 1, "{answer}");
    assert!(answer["result"]["serverInfo"].is_object(), "{answer}");
    from
}

/// Waits for the child's exit, within the tests' patience.
async fn exits(mut child: std::process::Child) -> std::process::ExitStatus {
    let waited = tokio::task::spawn_blocking(move || child.wait());
    tokio::time::timeout(PATIENCE, waited)
        .await
        .expect("holdpoint mcp did not end")
        .unwrap()
        .unwrap()
}

/// An MCP client whose server does not end when its input closes sends SIGTERM, and Ctrl-C
/// at a terminal sends SIGINT. Either way `holdpoint mcp` ends as when its client leaves: the
/// hold its call waits on is withdrawn at once, saying why (not when the server's grace for
/// absent waiters runs out), and it exits cleanly.
#[tokio::test(flavor = "multi_thread")]
async fn a_signal_to_stop_withdraws_the_waiting_calls_hold_and_ends_the_gateway() {
    for signal in [Signal::TERM, Signal::INT] {
        let gw = Gateway::start("").await;
        let (stdin, mut to_gateway) = std::io::pipe().unwrap();
        let (from_gateway, stdout) = std::io::pipe().unwrap();
        let child = gateway(&gw, stdin.into(), stdout.into(), Stdio::inherit());
        // Kept open: the gateway's input does not end, and its output is read by nobody.
        let _output = initialize(&mut to_gateway, from_gateway);
        let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "ask_human",
            "arguments": {"question": "Ship it?", "options": [{"id": "yes", "label": "Yes"}]}}});
        writeln!(
            to_gateway,
            r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
        )
        .unwrap();
        writeln!(to_gateway, "{call}").unwrap();
        to_gateway.flush().unwrap();
        let hold = gw.lab.pending_hold().await;
        signal_process(child.id(), signal);
        let status = exits(child).await;
        assert!(status.success(), "{signal:?}: {status:?}");
        let withdrawn = gw.resolved(hold["id"].as_str().unwrap()).await;
        assert_eq!(withdrawn["status"], "canceled", "{withdrawn}");
        assert_eq!(
            withdrawn["outcome"]["reason"],
            "the MCP gateway stopped: Holdpoint shut down while the call waited"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn pipes_are_used_without_blocking_and_left_blocking_as_they_were() {
    let gw = Gateway::start("").await;
    let (stdin, mut to_gateway) = std::io::pipe().unwrap();
    let (from_gateway, stdout) = std::io::pipe().unwrap();
    // Copies that share the gateway's ends (and so their mode).
    let its_stdin = stdin.try_clone().unwrap();
    let its_stdout = stdout.try_clone().unwrap();
    let child = gateway(&gw, stdin.into(), stdout.into(), Stdio::inherit());
    let _from = initialize(&mut to_gateway, from_gateway);
    assert!(
        nonblocking(&its_stdin),
        "standard input is read on the reactor"
    );
    assert!(
        nonblocking(&its_stdout),
        "standard output is written on the reactor"
    );
    drop(to_gateway);
    exits(child).await;
    assert!(!nonblocking(&its_stdin), "standard input is blocking again");
    assert!(
        !nonblocking(&its_stdout),
        "standard output is blocking again"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pipe_that_is_standard_error_too_stays_blocking() {
    let gw = Gateway::start("").await;
    let (stdin, mut to_gateway) = std::io::pipe().unwrap();
    let (from_gateway, stdout) = std::io::pipe().unwrap();
    let shared = stdout.try_clone().unwrap();
    let stderr = stdout.try_clone().unwrap();
    let child = gateway(&gw, stdin.into(), stdout.into(), stderr.into());
    let _from = initialize(&mut to_gateway, from_gateway);
    assert!(
        !nonblocking(&shared),
        "2>&1: standard output stays blocking"
    );
    drop(to_gateway);
    exits(child).await;
}

/// An agent's `up__echo` is allowed, `up__delete_all` denied.
const POLICY: &str = r#"
mode = "manual"

[[rules]]
name = "echo is fine"
tools = ["up__echo"]
action = "allow"

[[rules]]
name = "never delete everything"
tools = ["up__delete_all"]
action = "deny"
"#;

#[tokio::test(flavor = "multi_thread")]
async fn with_no_server_to_reach_it_runs_holdpoint_itself_and_records_each_call() {
    let lab = Lab::with_policy(vec![], Some(POLICY)).await;
    let agent = lab.token("coder", "agent").await;
    let Lab { server, dir, .. } = lab;
    server.stop().await.unwrap();
    let data = dir.path().join("data");
    let upstream_log = dir.path().join("upstream.log");
    // An address where no server answers.
    let nobody = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nbind = \"{nobody}\"\n\n[policy]\nfile = {:?}\n\n{}",
            dir.path().join("policy.toml").display().to_string(),
            upstream_section(&upstream_log),
        ),
    )
    .unwrap();
    let steps = json!([
        {"call": "up__echo", "arguments": {"text": "hi"}},
        {"call": "up__delete_all", "arguments": {"confirm": true}},
    ]);
    let client = Client {
        server: None,
        http: false,
        token: &agent,
        config: &config,
        data: &data,
        upstream_log: None,
    }
    .command("client.py", &["session", &steps.to_string()])
    .spawn()
    .unwrap();
    let (lines, stderr) = finished(client).await;
    assert!(
        stderr.contains("running Holdpoint in this process"),
        "{stderr}"
    );
    // Where people can decide what it holds meanwhile: its own port on loopback.
    assert!(
        stderr.contains("serving people at http://127.0.0.1:"),
        "{stderr}"
    );
    // The revision negotiated, then a line per step.
    let results = &lines[1..];
    assert_eq!(text(&results[0]), "echo: hi", "{results:?}");
    assert_eq!(results[1]["isError"], true, "{results:?}");
    assert!(
        text(&results[1]).contains("never delete everything"),
        "{results:?}"
    );
    let ran = std::fs::read_to_string(&upstream_log).unwrap();
    assert_eq!(ran.lines().count(), 1, "only the allowed call ran: {ran}");

    // The process recorded both calls in the data directory.
    let mut settings = Settings::default();
    settings.server.bind = "127.0.0.1:0".parse().unwrap();
    let server = Server::start(&data, &settings).await.unwrap();
    let admin = Api::new(&server.url(), server.admin_token());
    let events = admin.get("/api/v1/audit/events").await.expect(200)["events"].clone();
    let calls: Vec<(&str, &str)> = events
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["payload"]["tool"].is_string())
        .map(|e| {
            (
                e["payload"]["type"].as_str().unwrap(),
                e["payload"]["tool"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        calls,
        [
            ("call.allowed", "up__echo"),
            ("call.denied", "up__delete_all")
        ]
    );
    server.stop().await.unwrap();
}

/// Messages that are not what they should be, after `initialize` (revision 2025-11-25): what
/// each is sent as, and the id and the JSON-RPC error code of its answer. The same on stdio
/// and over HTTP (`mcp_http.rs`).
pub(super) fn misfits() -> Vec<(Vec<u8>, Value, i64)> {
    let null = Value::Null;
    let json = |v: Value| v.to_string().into_bytes();
    vec![
        (b"not json".to_vec(), null.clone(), -32700),
        (
            br#"{"jsonrpc": "2.0", "id": 2, "method": "tools/li"#.to_vec(),
            null.clone(),
            -32700,
        ),
        (
            b"{\"jsonrpc\": \"2.0\", \"id\": 3, \"method\": \"\xff\xfe\"}".to_vec(),
            null.clone(),
            -32700,
        ),
        (
            json(json!({"id": 4, "method": "tools/list"})),
            json!(4),
            -32600,
        ),
        (
            json(json!({"jsonrpc": "2.0", "id": {"n": 5}, "method": "tools/list"})),
            null.clone(),
            -32600,
        ),
        (
            json(json!([{"jsonrpc": "2.0", "id": 6, "method": "ping"}])),
            null,
            -32600,
        ),
        (
            json(json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": 5}})),
            json!(7),
            -32602,
        ),
        (
            json(json!({"jsonrpc": "2.0", "id": "eight", "method": "tools/call"})),
            json!("eight"),
            -32602,
        ),
        (
            json(json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list",
                "params": {"cursor": "page-2"}})),
            json!(9),
            -32602,
        ),
        // A second initialize, for another revision: the session keeps its own.
        (
            json(
                json!({"jsonrpc": "2.0", "id": 10, "method": "initialize", "params": {
                "protocolVersion": "2024-11-05", "capabilities": {},
                "clientInfo": {"name": "again", "version": "0"}}}),
            ),
            json!(10),
            -32600,
        ),
    ]
}

/// Checks one answer to a message of [`misfits`].
pub(super) fn assert_refused(sent: &[u8], answer: &Value, id: &Value, code: i64) {
    let sent = String::from_utf8_lossy(sent);
    assert_eq!(answer["jsonrpc"], "2.0", "{sent}: {answer}");
    assert!(
        answer.as_object().unwrap().contains_key("id"),
        "{sent}: no id in {answer}"
    );
    assert_eq!(&answer["id"], id, "{sent}: {answer}");
    assert_eq!(answer["error"]["code"], code, "{sent}: {answer}");
    assert!(
        !answer["error"]["message"].as_str().unwrap().is_empty(),
        "{sent}: {answer}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn what_is_not_a_message_of_mcp_is_answered_as_json_rpc_asks() {
    let gw = Gateway::start("").await;
    let (stdin, mut to_gateway) = std::io::pipe().unwrap();
    let (from_gateway, stdout) = std::io::pipe().unwrap();
    let child = gateway(&gw, stdin.into(), stdout.into(), Stdio::inherit());
    let from = initialize(&mut to_gateway, from_gateway);
    // Each line the gateway writes, read on a thread of its own (see `initialize`).
    let (tx, answers) = std::sync::mpsc::channel::<Value>();
    std::thread::spawn(move || {
        for line in BufReader::new(from).lines() {
            let Ok(line) = line else { return };
            if tx.send(serde_json::from_str(&line).unwrap()).is_err() {
                return;
            }
        }
    });
    let mut ask = |line: &[u8]| -> Value {
        to_gateway.write_all(line).unwrap();
        to_gateway.write_all(b"\n").unwrap();
        to_gateway.flush().unwrap();
        answers
            .recv_timeout(PATIENCE)
            .unwrap_or_else(|_| panic!("no answer to {}", String::from_utf8_lossy(line)))
    };
    for (sent, id, code) in misfits() {
        assert_refused(&sent, &ask(&sent), &id, code);
    }
    // Nothing broke the session: it serves on, with the revision it negotiated first.
    let listed = ask(br#"{"jsonrpc": "2.0", "id": 11, "method": "tools/list"}"#);
    assert_eq!(listed["id"], 11, "{listed}");
    assert_eq!(
        listed["result"]["tools"][0]["execution"]["taskSupport"], "optional",
        "still 2025-11-25: {listed}"
    );
    drop(to_gateway);
    exits(child).await;
}
