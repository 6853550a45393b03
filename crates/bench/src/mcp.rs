//! The MCP gateway's added latency for an allowed call over stdio: the same client calls the
//! same upstream tool directly, then through `holdpoint mcp` in its two modes, one call at a
//! time, and the difference of the percentiles is the gateway's, with Holdpoint's gate, which
//! records the allowed call: `holdpoint mcp --server URL` asks a server (in this process) over
//! HTTP, which answers once the record is durable, before the call is forwarded; `holdpoint
//! mcp` with no server to reach runs Holdpoint in its own process (on the same data
//! directory, once the server has stopped) and asks its engine directly, which answers once
//! the record is written, so that its fsync overlaps the upstream's call (docs/mcp.md).
//!
//! The upstream is this binary itself (`holdpoint-bench mcp-upstream`, see [`serve_upstream`]):
//! a minimal MCP server on stdio written for this, so its own time is small and steady and the
//! same in both runs. An upstream on an SDK (the Python one of the tests) spends more, and
//! more variably, on each call than the gateway is meant to add. The client is as lean: JSON-RPC
//! as lines of JSON on the child's pipes, with nothing of an SDK.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};

use holdpoint_server::Settings;

use crate::http::{WORLD, start_with};
use crate::stats::{Latencies, ms};

/// The revision the client asks for.
const REVISION: &str = "2025-11-25";

/// Untimed calls before the timed ones.
const WARM_UP: usize = 500;

/// A client of one MCP server that it started: JSON-RPC over the child's stdin and stdout.
struct Client {
    child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
    next_id: u64,
    line: String,
}

impl Client {
    /// Starts `command` and initializes the session.
    fn start(mut command: Command) -> anyhow::Result<Client> {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("cannot start {command:?}"))?;
        let (Some(input), Some(output)) = (child.stdin.take(), child.stdout.take()) else {
            bail!("the server's pipes could not be opened");
        };
        let mut client = Client {
            child,
            input,
            output: BufReader::new(output),
            next_id: 0,
            line: String::new(),
        };
        client.request(
            "initialize",
            json!({
                "protocolVersion": REVISION,
                "capabilities": {},
                "clientInfo": {"name": "holdpoint-bench", "version": "0"}
            }),
        )?;
        client.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;
        Ok(client)
    }

    fn send(&mut self, message: &Value) -> anyhow::Result<()> {
        let mut text = serde_json::to_vec(message)?;
        text.push(b'\n');
        self.input.write_all(&text)?;
        self.input.flush()?;
        Ok(())
    }

    /// Sends a request and reads until its response (skipping notifications); its result.
    fn request(&mut self, method: &str, params: Value) -> anyhow::Result<Value> {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        loop {
            self.line.clear();
            if self.output.read_line(&mut self.line)? == 0 {
                bail!("the server closed its output while {method} waited");
            }
            let mut message: Value = serde_json::from_str(&self.line)?;
            if message["id"] != id {
                continue;
            }
            if let Some(error) = message.get("error") {
                bail!("{method} failed: {error}");
            }
            return Ok(message["result"].take());
        }
    }

    /// Calls `tool` `warm_up + n` times; the time of each of the last `n` calls.
    fn time_calls(&mut self, tool: &str, n: usize) -> anyhow::Result<Vec<Duration>> {
        let arguments = json!({"name": tool, "arguments": {"text": "ping"}});
        let mut samples = Vec::with_capacity(n);
        for i in 0..WARM_UP + n {
            let started = Instant::now();
            let result = self.request("tools/call", arguments.clone())?;
            let took = started.elapsed();
            if result["isError"] == true || result["content"][0]["text"] != "ping" {
                bail!("{tool} did not answer as expected: {result}");
            }
            if i >= WARM_UP {
                samples.push(took);
            }
        }
        Ok(samples)
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// This program, started as the upstream.
fn upstream_command() -> anyhow::Result<Command> {
    let mut command = Command::new(std::env::current_exe()?);
    command.arg("mcp-upstream");
    Ok(command)
}

/// The `holdpoint` binary: `given`, else the one built next to this program.
pub(crate) fn holdpoint_binary(given: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    let path = match given {
        Some(path) => path,
        None => std::env::current_exe()?
            .parent()
            .context("this program's directory")?
            .join("holdpoint"),
    };
    if !path.exists() {
        bail!(
            "{} is missing: build it with `cargo build --profile profiling -p holdpoint-cli`, or name it with --holdpoint",
            path.display()
        );
    }
    Ok(path)
}

fn report(name: &str, lat: &Latencies) {
    println!(
        "  {name:<16} p50 {:>10}   p99 {:>10}   ({} calls)",
        ms(lat.percentile(50.0)),
        ms(lat.percentile(99.0)),
        lat.len()
    );
}

fn difference(a: Duration, b: Duration) -> String {
    let us = (a.as_secs_f64() - b.as_secs_f64()) * 1e6;
    format!("{us:.1} µs")
}

pub async fn run(
    dir: &tempfile::TempDir,
    calls: usize,
    holdpoint: Option<PathBuf>,
) -> anyhow::Result<()> {
    let holdpoint = holdpoint_binary(holdpoint)?;
    println!(
        "== MCP gateway: an allowed tools/call over stdio, one at a time, {calls} calls timed after {WARM_UP}"
    );
    println!(
        "   the same client and upstream, directly, through `holdpoint mcp --server URL` (its gate: HTTP to a server on loopback) and through `holdpoint mcp` running Holdpoint itself (its gate: the engine in its process); SQLite in {}",
        dir.path().display()
    );
    crate::disk::describe(dir.path());

    let mut direct = Client::start(upstream_command()?)?;
    let direct = Latencies::new(tokio::task::block_in_place(|| {
        direct.time_calls("echo", calls)
    })?);
    report("direct", &direct);

    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        "mode = \"auto_deny\"\n\n[[rules]]\nname = \"the bench's echo\"\ntools = [\"up__echo\"]\naction = \"allow\"\n",
    )?;
    // Read by `holdpoint mcp`: the upstream, and for the embedded run the policy, an address
    // where no server answers, so that it runs Holdpoint itself, and no rate limit on the
    // calls of one token (as the server of the other run has none).
    let config = dir.path().join("config.toml");
    let upstream = upstream_command()?;
    let nobody = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
    std::fs::write(
        &config,
        format!(
            "[server]\nbind = \"{nobody}\"\n\n[limits]\nrequests_per_second = {max}\nrequest_burst = {max}\n\n[policy]\nfile = {policy:?}\n\n[mcp.servers.up]\ncommand = {:?}\nargs = [\"mcp-upstream\"]\n",
            upstream.get_program().to_string_lossy(),
            max = u32::MAX,
        ),
    )?;
    let data = dir.path().join("data");
    let mut settings = Settings::default();
    settings.policy.file = Some(policy);
    let (server, admin) = start_with(&data, settings).await?;
    let agent = admin.token("bench-mcp", "agent").await?;
    let gateway = |server: Option<String>| {
        let mut command = Command::new(&holdpoint);
        command
            .args(["mcp", "--world", WORLD])
            .env("HOLDPOINT_TOKEN", &agent.token)
            .env("HOLDPOINT_CONFIG", &config)
            .env("HOLDPOINT_DATA", &data)
            .env_remove("HOLDPOINT_SERVER");
        if let Some(url) = server {
            command.env("HOLDPOINT_SERVER", url);
        }
        Client::start(command)
    };
    let timed = |server: Option<String>| {
        let mut client = gateway(server)?;
        let samples = tokio::task::block_in_place(|| client.time_calls("up__echo", calls))?;
        anyhow::Ok(Latencies::new(samples))
    };
    let through = timed(Some(server.url()))?;
    report("via a server", &through);
    added(&through, &direct);
    // The same data directory, once the server has let it go.
    server.stop().await?;
    let embedded = timed(None)?;
    report("embedded", &embedded);
    added(&embedded, &direct);
    println!();
    Ok(())
}

fn added(through: &Latencies, direct: &Latencies) {
    println!(
        "    added          p50 {:>10}   p99 {:>10}",
        difference(through.percentile(50.0), direct.percentile(50.0)),
        difference(through.percentile(99.0), direct.percentile(99.0))
    );
}

/// A minimal MCP server on this process's stdin and stdout, with one tool, `echo`, which
/// answers with its `text`: the upstream of the benchmark.
pub fn serve_upstream() -> anyhow::Result<()> {
    let stdin = std::io::stdin().lock();
    let mut stdout = std::io::stdout().lock();
    for line in stdin.lines() {
        let message: Value = serde_json::from_str(&line?)?;
        let Some(id) = message.get("id") else {
            continue; // a notification
        };
        let params = &message["params"];
        let result = match message["method"].as_str() {
            Some("initialize") => json!({
                "protocolVersion": params["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "holdpoint-bench-upstream", "version": "0"}
            }),
            Some("tools/list") => json!({"tools": [{
                "name": "echo",
                "description": "Answers with its text.",
                "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
                "annotations": {"readOnlyHint": true}
            }]}),
            Some("tools/call") => json!({
                "content": [{"type": "text", "text": params["arguments"]["text"]}],
                "isError": false
            }),
            Some("ping") => json!({}),
            _ => {
                let error = json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "method not found"}});
                writeln!(stdout, "{error}")?;
                stdout.flush()?;
                continue;
            }
        };
        writeln!(
            stdout,
            "{}",
            json!({"jsonrpc": "2.0", "id": id, "result": result})
        )?;
        stdout.flush()?;
    }
    Ok(())
}
