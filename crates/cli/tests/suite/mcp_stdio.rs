//! `holdpoint mcp`'s standard streams: pipes are read and written in non-blocking mode, put
//! back as they were when it ends (and a pipe that is standard error too is left blocking).

use std::io::{BufRead, BufReader, PipeReader, Write};
use std::os::fd::AsFd;
use std::process::{Command, Stdio};

use holdpoint_test_support::PATIENCE;
use rustix::fs::OFlags;
use serde_json::Value;

use super::mcp::Gateway;

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
async fn exits(mut child: std::process::Child) {
    let waited = tokio::task::spawn_blocking(move || child.wait());
    tokio::time::timeout(PATIENCE, waited)
        .await
        .expect("holdpoint mcp did not end")
        .unwrap()
        .unwrap();
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
