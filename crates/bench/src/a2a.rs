//! A turn through A2A beside the same turn through the REST API: an agent whose LLM (scripted,
//! on loopback) calls a tool that policy allows (`list_files`), then answers. Each caller has
//! a chat of its own and sends one message after another:
//!
//! - **rest**: `POST /api/v1/worlds/{w}/chats/{chat}/messages`, then the chat's live stream
//!   until `turn.finished`;
//! - **a2a**: one blocking `SendMessage` to `/a2a/{w}/{agent}` in the same context, answered
//!   with the completed task.
//!
//! The two ways run at each level of concurrency, one after the other, on the same server; the
//! difference is what A2A adds.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use holdpoint_protocol::sse::SseDecoder;
use holdpoint_test_support::llm::{ScriptedLlm, Step, call};
use serde_json::{Value, json};

use crate::http::{Caller, WORLD, start};
use crate::stats::{Latencies, ms};

const AGENT: &str = "helper";

pub async fn run(dir: &tempfile::TempDir, levels: &[usize], seconds: f64) -> anyhow::Result<()> {
    // Answers from the request alone: a tool call first, the answer once the tool's result is in.
    let llm = ScriptedLlm::answering(|request| {
        let last = request.messages().last().cloned().unwrap_or(Value::Null);
        if last["role"] == "tool" {
            Step::Text(vec!["Listed.".into()])
        } else {
            Step::calls(vec![call("c1", "list_files", json!({"path": "."}))])
        }
    })
    .await;
    let (server, admin) = start(dir, None).await?;
    admin
        .post::<Value>(
            &format!("/api/v1/worlds/{WORLD}/agents"),
            json!({"name": AGENT, "llm": {"base_url": llm.base_url(), "model": "scripted"}}),
            201,
        )
        .await?;
    let http = reqwest::Client::new();
    let put = http
        .put(format!("{}/api/v1/worlds/{WORLD}/policy", admin.base))
        .bearer_auth(&admin.token)
        .json(&json!({"text": "mode = \"auto_approve\"\n"}))
        .send()
        .await?;
    if !put.status().is_success() {
        bail!("the world's policy was refused: {}", put.text().await?);
    }
    let person = admin.token("bench-person", "approver").await?;
    println!("A2A turn beside the REST API (an allowed tool call, then the answer)");
    for &c in levels {
        let mut rates = Vec::new();
        for way in [Way::Rest, Way::A2a] {
            let (samples, elapsed) = level(&person, way, c, seconds).await?;
            let n = samples.len();
            let lat = Latencies::new(samples);
            rates.push(format!(
                "{:<4} p50 {:>10}  p99 {:>10}  {:>7.0} turns/s",
                way.name(),
                ms(lat.percentile(50.0)),
                ms(lat.percentile(99.0)),
                n as f64 / elapsed
            ));
        }
        println!("  c{c:<4} {}", rates.join("   "));
    }
    println!();
    server.stop().await?;
    Ok(())
}

#[derive(Clone, Copy)]
enum Way {
    Rest,
    A2a,
}

impl Way {
    fn name(self) -> &'static str {
        match self {
            Way::Rest => "rest",
            Way::A2a => "a2a",
        }
    }
}

/// `concurrency` callers, each in a chat of its own, for `seconds` after half a second of
/// warm-up: each turn's latency, and the seconds measured.
async fn level(
    person: &Caller,
    way: Way,
    concurrency: usize,
    seconds: f64,
) -> anyhow::Result<(Vec<Duration>, f64)> {
    let warmup = Instant::now() + Duration::from_millis(500);
    let end = warmup + Duration::from_secs_f64(seconds);
    let mut workers = Vec::new();
    for _ in 0..concurrency {
        let person = person.clone();
        workers.push(tokio::spawn(async move {
            let mut chat = Chat::open(&person, way).await?;
            let mut kept = Vec::new();
            loop {
                let start = Instant::now();
                if start >= end {
                    return Ok::<_, anyhow::Error>(kept);
                }
                chat.turn().await?;
                if start >= warmup {
                    kept.push(start.elapsed());
                }
            }
        }));
    }
    let mut all = Vec::new();
    for w in workers {
        all.extend(w.await??);
    }
    Ok((all, seconds))
}

/// One caller's chat, and (for REST) its live stream.
struct Chat {
    person: Caller,
    way: Way,
    id: String,
    stream: Option<(reqwest::Response, SseDecoder)>,
}

impl Chat {
    async fn open(person: &Caller, way: Way) -> anyhow::Result<Chat> {
        let chat: Value = person
            .post(
                &format!("/api/v1/worlds/{WORLD}/chats"),
                json!({"agent": AGENT}),
                201,
            )
            .await?;
        let id = chat["id"]
            .as_str()
            .context("a chat without its id")?
            .to_owned();
        let stream = match way {
            Way::A2a => None,
            Way::Rest => Some((
                person
                    .http
                    .get(format!(
                        "{}/api/v1/events?world={WORLD}&chat={id}",
                        person.base
                    ))
                    .bearer_auth(&person.token)
                    .send()
                    .await?
                    .error_for_status()?,
                SseDecoder::default(),
            )),
        };
        Ok(Chat {
            person: person.clone(),
            way,
            id,
            stream,
        })
    }

    async fn turn(&mut self) -> anyhow::Result<()> {
        match self.way {
            Way::Rest => {
                let started: Value = self
                    .person
                    .post(
                        &format!("/api/v1/worlds/{WORLD}/chats/{}/messages", self.id),
                        json!({"text": "list them"}),
                        202,
                    )
                    .await?;
                let turn = started["turn"].as_str().context("no turn")?.to_owned();
                let (stream, frames) = self.stream.as_mut().context("no stream")?;
                loop {
                    while let Some(frame) = frames.next_frame() {
                        if frame.event == "turn.finished" && frame.data.contains(&turn) {
                            return Ok(());
                        }
                        if frame.event == "turn.failed" {
                            bail!("the turn failed: {}", frame.data);
                        }
                    }
                    let chunk = stream.chunk().await?.context("the live stream ended")?;
                    frames.push(&chunk);
                }
            }
            Way::A2a => {
                let request = json!({
                    "jsonrpc": "2.0", "id": 1, "method": "SendMessage",
                    "params": {"message": {
                        "messageId": uuid::Uuid::new_v4().to_string(),
                        "contextId": self.id,
                        "role": "ROLE_USER",
                        "parts": [{"text": "list them"}],
                    }},
                });
                let answer: Value = self
                    .person
                    .http
                    .post(format!("{}/a2a/{WORLD}/{AGENT}", self.person.base))
                    .bearer_auth(&self.person.token)
                    .header("A2A-Version", "1.0")
                    .json(&request)
                    .send()
                    .await?
                    .json()
                    .await?;
                if answer["result"]["task"]["status"]["state"] != "TASK_STATE_COMPLETED" {
                    bail!("the A2A task did not complete: {answer}");
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both ways complete turns against a real server.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn both_ways_complete_turns() {
        let dir = tempfile::tempdir().unwrap();
        run(&dir, &[1, 2], 0.3).await.unwrap();
    }
}
