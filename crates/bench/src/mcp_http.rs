//! The full asked cycle of the MCP gateway over HTTP, as an MCP client and a person see it:
//!
//! 1. **hold**: the client calls `request_approval` (always asked) through `POST /mcp/{w}` in
//!    its session; measured until the approver's live stream delivers `hold.created`;
//! 2. **decide**: the approver `POST`s the approval to `/api/v1/holds/{id}/decision`;
//! 3. **resume**: from the moment the decision is sent until the call's JSON-RPC result
//!    arrives on its stream of server-sent events.
//!
//! The client speaks MCP's JSON-RPC over HTTP itself (initialize, then calls), as any client
//! does. `request_approval` is Holdpoint's own tool, so no upstream server is involved: an
//! upstream tool adds its own call after the approval.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use holdpoint_protocol::sse::SseDecoder;
use reqwest::{Client, RequestBuilder};
use serde_json::{Value, json};

use tokio::sync::mpsc;

use crate::http::{Caller, start};
use crate::stats::{Latencies, ms};

#[derive(Default)]
struct Samples {
    hold: Vec<Duration>,
    decide: Vec<Duration>,
    resume: Vec<Duration>,
    cycle: Vec<Duration>,
}

impl Samples {
    fn extend(&mut self, other: Samples) {
        self.hold.extend(other.hold);
        self.decide.extend(other.decide);
        self.resume.extend(other.resume);
        self.cycle.extend(other.cycle);
    }
}

/// One MCP session of an agent in a world of its own, and the approver who answers its calls,
/// told of each hold by the world's live stream.
struct Session {
    http: Client,
    url: String,
    token: String,
    id: String,
    next: u64,
    approver: Caller,
    raised: mpsc::Receiver<(String, Instant)>,
}

impl Session {
    async fn open(
        http: &Client,
        server: SocketAddr,
        world: &str,
        token: &str,
        approver: Caller,
        raised: mpsc::Receiver<(String, Instant)>,
    ) -> anyhow::Result<Session> {
        let url = format!("http://{server}/mcp/{world}");
        let mut session = Session {
            http: http.clone(),
            url,
            token: token.to_owned(),
            id: String::new(),
            next: 1,
            approver,
            raised,
        };
        let init = json!({
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "holdpoint-bench", "version": "1"}
            }
        });
        let response = session.post(&init).send().await?;
        if response.status() != 200 {
            bail!(
                "initialize: {} {}",
                response.status(),
                response.text().await?
            );
        }
        session.id = response
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .context("initialize opened no session")?
            .to_owned();
        response.bytes().await?;
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let response = session.post(&initialized).send().await?;
        if response.status() != 202 {
            bail!("initialized: {}", response.status());
        }
        Ok(session)
    }

    fn post(&self, message: &Value) -> RequestBuilder {
        let mut r = self
            .http
            .post(&self.url)
            .bearer_auth(&self.token)
            .header("accept", "application/json, text/event-stream")
            .json(message);
        if !self.id.is_empty() {
            r = r.header("mcp-session-id", &self.id);
        }
        r
    }

    async fn cycle(&mut self, samples: &mut Samples) -> anyhow::Result<()> {
        let id = self.next;
        self.next += 1;
        let call = json!({
            "jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {
                "name": "request_approval",
                "arguments": {"action": "deploy", "arguments": {"call": id}}
            }
        });
        let start = Instant::now();
        let mut stream = self.post(&call).send().await?;
        if stream.status() != 200 {
            bail!("tools/call: {} {}", stream.status(), stream.text().await?);
        }
        // The hold appears in the approver's stream (the world's only one).
        let (hold, seen) = tokio::time::timeout(Duration::from_secs(30), self.raised.recv())
            .await
            .context("the approver's stream never delivered the hold")?
            .context("the approver's stream ended")?;
        let sent = Instant::now();
        let _: Value = self
            .approver
            .post(
                &format!("/api/v1/holds/{hold}/decision"),
                json!({"action": "approve"}),
                200,
            )
            .await?;
        let decided = Instant::now();
        let mut frames = SseDecoder::default();
        let result = 'read: loop {
            let chunk = stream
                .chunk()
                .await?
                .context("the call's stream ended without its result")?;
            frames.push(&chunk);
            while let Some(frame) = frames.next_frame() {
                let Ok(message) = serde_json::from_str::<Value>(&frame.data) else {
                    continue;
                };
                if message["id"] == json!(id) {
                    break 'read message;
                }
            }
        };
        let returned = Instant::now();
        if result["result"]["structuredContent"]["approved"] != true {
            bail!("the call was not approved: {result}");
        }
        samples.hold.push(seen.saturating_duration_since(start));
        samples.decide.push(decided - sent);
        samples.resume.push(returned - sent);
        samples.cycle.push(returned - start);
        Ok(())
    }
}

/// Reads a live stream until it ends, sending each `hold.created`'s hold and when it came.
async fn follow(
    mut stream: reqwest::Response,
    raised: mpsc::Sender<(String, Instant)>,
) -> anyhow::Result<()> {
    let mut frames = SseDecoder::default();
    while let Some(chunk) = stream.chunk().await? {
        frames.push(&chunk);
        while let Some(frame) = frames.next_frame() {
            if frame.event != "hold.created" {
                continue;
            }
            let data: Value = serde_json::from_str(&frame.data)?;
            let hold = data["hold"].as_str().context("an event without its hold")?;
            raised.send((hold.to_owned(), Instant::now())).await?;
        }
    }
    Ok(())
}

/// A token of `role` limited to `world`.
async fn token(admin: &Caller, name: &str, role: &str, world: &str) -> anyhow::Result<String> {
    let created: Value = admin
        .post(
            "/api/v1/tokens",
            json!({"name": name, "role": role, "world": world}),
            201,
        )
        .await?;
    Ok(created["token"].as_str().context("no token")?.to_owned())
}

fn report(name: &str, samples: Vec<Duration>) {
    let lat = Latencies::new(samples);
    println!(
        "      {name:<7} p50 {:>10}   p99 {:>10}",
        ms(lat.percentile(50.0)),
        ms(lat.percentile(99.0))
    );
}

pub async fn run(dir: &tempfile::TempDir, levels: &[usize], seconds: f64) -> anyhow::Result<()> {
    println!(
        "== MCP over HTTP: a client calls request_approval at /mcp/{{world}} -> the hold reaches the approver's stream -> the approver approves over the API -> the call's result arrives"
    );
    println!(
        "   holdpoint serve on 127.0.0.1 (SQLite in {}, WAL fsynced before each acknowledgement)",
        dir.path().display()
    );
    crate::disk::describe(dir.path());
    let (server, admin) = start(dir, None).await?;
    let http = Client::builder().pool_max_idle_per_host(1024).build()?;
    for &c in levels {
        // A world per caller, with its agent, its approver and the approver's live stream:
        // each caller's holds reach its own approver, in order.
        let mut sessions = Vec::new();
        for i in 0..c {
            let world = format!("mcp-{c}-{i}");
            let _: Value = admin
                .post("/api/v1/worlds", json!({"name": world}), 201)
                .await?;
            let agent = token(&admin, &format!("agent-{world}"), "agent", &world).await?;
            let approver = Caller {
                token: token(&admin, &format!("approver-{world}"), "approver", &world).await?,
                ..admin.clone()
            };
            let stream = http
                .get(format!("{}/api/v1/events?world={world}", server.url()))
                .bearer_auth(&approver.token)
                .send()
                .await?
                .error_for_status()?;
            let (tx, rx) = mpsc::channel(16);
            let follower = tokio::spawn(follow(stream, tx));
            let session = Session::open(&http, server.addr(), &world, &agent, approver, rx).await?;
            sessions.push((session, follower));
        }
        let warmup = Instant::now() + Duration::from_millis(500);
        let end = warmup + Duration::from_secs_f64(seconds);
        let mut workers = Vec::new();
        for (mut session, follower) in sessions {
            workers.push(tokio::spawn(async move {
                let mut kept = Samples::default();
                let done = loop {
                    let start = Instant::now();
                    if start >= end {
                        break Ok::<_, anyhow::Error>(kept);
                    }
                    let mut one = Samples::default();
                    if let Err(e) = session.cycle(&mut one).await {
                        break Err(e);
                    }
                    if start >= warmup {
                        kept.extend(one);
                    }
                };
                follower.abort();
                done
            }));
        }
        let mut all = Samples::default();
        for w in workers {
            all.extend(w.await??);
        }
        println!(
            "  concurrency {c:>4}: {:>8.0} cycles/s   ({} cycles)",
            all.cycle.len() as f64 / seconds,
            all.cycle.len()
        );
        report("hold", all.hold);
        report("decide", all.decide);
        report("resume", all.resume);
        report("cycle", all.cycle);
    }
    server.stop().await?;
    println!();
    Ok(())
}
