//! Policy evaluation: 100 rules of every kind, a varied stream of calls, one core.

use std::hint::black_box;
use std::time::{Duration, Instant};

use std::sync::Arc;

use holdpoint_core::Engine;
use holdpoint_core::audit::EventDraft;
use holdpoint_core::policy::{Call, Layers, Policy, replay};
use holdpoint_core::store::{Store, Transaction};
use holdpoint_store::SqliteStore;

use crate::cycle::Inbox;
use holdpoint_protocol::{
    Actor, BatchId, DecidedBy, Event, EventPayload, Hold, HoldId, Source, Timestamp,
    ToolAnnotations,
};
use serde_json::{Value, json};

/// A policy of 100 rules: shell commands, argument tests, MCP globs and annotations.
pub fn hundred_rules() -> Policy {
    match Policy::from_toml(&hundred_rules_text()) {
        Ok(p) => p,
        Err(e) => panic!("the benchmark policy is invalid: {e}"),
    }
}

fn hundred_rules_text() -> String {
    let mut text = String::from("mode = \"manual\"\n");
    let git_allow = [
        "status", "log", "diff", "show", "branch", "fetch", "blame", "grep", "describe", "shortlog",
    ];
    for sub in git_allow {
        text.push_str(&format!("[[rules]]\nname = \"git {sub}\"\ntools = [\"shell_cmd\"]\naction = \"allow\"\ncommand = {{ program = \"git\", args = [\"{sub}\"] }}\n"));
    }
    for (i, prog) in ["ls", "cat", "head", "tail", "wc"].iter().enumerate() {
        text.push_str(&format!("[[rules]]\nname = \"read {i}\"\ntools = [\"shell_cmd\"]\naction = \"allow\"\ncommand = {{ program = \"{prog}\" }}\n"));
    }
    for (i, prog) in ["rm", "dd", "mkfs*", "shutdown", "curl"].iter().enumerate() {
        text.push_str(&format!("[[rules]]\nname = \"dangerous {i}\"\ntools = [\"shell_cmd\"]\naction = \"deny\"\ncommand = {{ program = \"{prog}\" }}\n"));
    }
    for i in 0..30 {
        let (action, matcher) = match i % 3 {
            0 => (
                "deny",
                format!("args = [{{ pointer = \"/path\", prefix = \"/secret{i}/\" }}]"),
            ),
            1 => (
                "ask",
                format!("args = [{{ pointer = \"/url\", regex = \"^https://internal{i}\\\\.\" }}]"),
            ),
            _ => (
                "allow",
                format!("args = [{{ pointer = \"/path\", glob = \"/work/{i}/**\" }}]"),
            ),
        };
        text.push_str(&format!("[[rules]]\nname = \"tool {i}\"\ntools = [\"tool_{i}\", \"tool_{i}_v2\"]\naction = \"{action}\"\n{matcher}\n"));
    }
    for i in 0..30 {
        let rule = match i % 3 {
            0 => format!(
                "tools = [\"server{i}__*\"]\naction = \"allow\"\nannotations = {{ read_only = true }}"
            ),
            1 => format!(
                "tools = [\"server{i}__*\"]\naction = \"ask\"\nannotations = {{ destructive = true }}"
            ),
            _ => format!("tools = [\"server{i}__delete_*\"]\naction = \"deny\""),
        };
        text.push_str(&format!("[[rules]]\nname = \"mcp {i}\"\n{rule}\n"));
    }
    for i in 0..20 {
        text.push_str(&format!("[[rules]]\nname = \"files {i}\"\ntools = [\"*_file{i}\"]\naction = \"ask\"\nargs = [{{ pointer = \"/mode\", equals = {i} }}]\n"));
    }
    text
}

/// A base of five locked rules and a mode floor, under which a world runs `hundred_rules`.
fn layered() -> Policy {
    Layers::new(locked_base()).effective(&hundred_rules())
}

fn locked_base() -> Policy {
    let base = format!(
        "mode = \"manual\"\nmode_floor = \"manual\"\n{}",
        base_rules_text("locked = true\n")
    );
    match Policy::from_toml(&base) {
        Ok(p) => p,
        Err(e) => panic!("the benchmark base policy is invalid: {e}"),
    }
}

/// The base's five rules (`extra` added to each).
fn base_rules_text(extra: &str) -> String {
    ["rm", "dd", "mkfs*", "shutdown", "curl"]
        .iter()
        .enumerate()
        .map(|(i, prog)| format!("[[rules]]\nname = \"base {i}\"\ntools = [\"shell_cmd\"]\naction = \"deny\"\n{extra}command = {{ program = \"{prog}\" }}\n"))
        .collect()
}

/// One file holding the rules a world's layered policy holds: the base's, then the world's.
fn layered_as_one_file() -> Policy {
    let text = hundred_rules_text().replacen(
        "mode = \"manual\"\n",
        &format!("mode = \"manual\"\n{}", base_rules_text("")),
        1,
    );
    match Policy::from_toml(&text) {
        Ok(p) => p,
        Err(e) => panic!("the benchmark's one-file policy is invalid: {e}"),
    }
}

/// Replay as the API runs it: `n` recorded calls in a world's log in SQLite (among as many
/// events of another world), read a page at a time and replayed under the locked base.
pub async fn replay_stored(dir: &tempfile::TempDir, n: usize) -> anyhow::Result<()> {
    let store = Arc::new(SqliteStore::open(dir.path().join("replay.db"))?);
    let engine = Engine::builder(store.clone())
        .policy(locked_base())
        .channel(Arc::new(Inbox))
        .start()
        .await?;
    let world = uuid::Uuid::now_v7();
    let start = Instant::now();
    for (i, chunk) in recorded(n).chunks(1000).enumerate() {
        for w in [world.to_string(), format!("other-{i}")] {
            let events = chunk
                .iter()
                .map(|e| {
                    EventDraft {
                        at: e.at,
                        world: Some(w.clone()),
                        chat: None,
                        hold: e.hold,
                        actor: e.actor.clone(),
                        payload: e.payload.clone(),
                    }
                    .into()
                })
                .collect();
            store
                .commit(Transaction {
                    writes: Vec::new(),
                    events,
                })
                .await
                .map_err(|e| anyhow::anyhow!("{e:?}"))?;
        }
    }
    let filled = start.elapsed();
    let text = hundred_rules_text();
    let mut samples = Vec::new();
    let mut report = None;
    for _ in 0..3 {
        let start = Instant::now();
        report = Some(engine.replay_world_policy(world, &text, None).await?);
        samples.push(start.elapsed());
    }
    let report = report.unwrap_or_default();
    let best = samples.iter().min().copied().unwrap_or_default();
    println!(
        "  replay through the API's path (SQLite, {} calls of {} events in the log; written in {:.1} s): {:.0} ms best of 3 ({} decided differently)",
        report.calls,
        2 * n,
        filled.as_secs_f64(),
        best.as_secs_f64() * 1000.0,
        report.calls - report.unchanged
    );
    Ok(())
}

/// `n` recorded calls as the log holds them: allowed and denied calls, and holds approved.
fn recorded(n: usize) -> Vec<Event> {
    let samples = calls();
    let mut out = Vec::with_capacity(n * 2);
    for i in 0..n {
        let s = &samples[i % samples.len()];
        let (payload, hold) = match i % 3 {
            0 => (
                EventPayload::CallAllowed {
                    tool: s.tool.clone(),
                    digest: String::new(),
                    arguments: Some(s.args.clone()),
                    annotations: s.annotations,
                    tool_call_id: None,
                    decided_by: DecidedBy::Mode {
                        mode: "auto_approve".into(),
                    },
                },
                None,
            ),
            1 => (
                EventPayload::CallDenied {
                    tool: s.tool.clone(),
                    digest: String::new(),
                    arguments: Some(s.args.clone()),
                    annotations: s.annotations,
                    tool_call_id: None,
                    decided_by: DecidedBy::Mode {
                        mode: "auto_deny".into(),
                    },
                },
                None,
            ),
            _ => {
                let hold: Hold = serde_json::from_value(json!({
                    "id": HoldId::random(), "batch": BatchId::random(), "world": "w",
                    "requested_by": "bench", "created_at": Timestamp::EPOCH, "deadline": null,
                    "on_timeout": {"action": "deny"}, "quorum": 1, "offers": ["approve_once", "deny"],
                    "spec": {"kind": "approval", "tool": s.tool, "arguments": s.args, "digest": ""},
                    "status": "pending", "version": 1
                }))
                .unwrap_or_else(|e| panic!("the benchmark hold does not read: {e}"));
                let id = hold.id;
                (
                    EventPayload::HoldCreated {
                        hold: std::sync::Arc::new(hold),
                    },
                    Some(id),
                )
            }
        };
        out.push(Event {
            seq: out.len() as u64 + 1,
            at: Timestamp::EPOCH,
            world: Some("w".into()),
            chat: None,
            hold,
            actor: Actor::of(Source::Policy),
            payload,
            hash: String::new(),
        });
    }
    out
}

struct Sample {
    tool: String,
    args: Value,
    annotations: Option<ToolAnnotations>,
}

fn calls() -> Vec<Sample> {
    let mut out = Vec::new();
    let commands = [
        "git status",
        "git status --short",
        "git push origin main",
        "ls -la src",
        "rm -rf build",
        "git log --oneline -20 && git diff HEAD~1",
        "cargo build --release",
        "cat README.md | wc -l",
    ];
    for (i, c) in commands.iter().enumerate() {
        out.push(Sample {
            tool: "shell_cmd".into(),
            args: json!({ "command": c, "timeout": i }),
            annotations: None,
        });
    }
    for i in 0..30 {
        out.push(Sample {
            tool: format!("tool_{i}"),
            args: json!({"path": format!("/work/{i}/src/main.rs"), "url": "https://example.com"}),
            annotations: None,
        });
        let ann = ToolAnnotations {
            read_only: Some(i % 2 == 0),
            destructive: Some(i % 2 == 1),
            ..Default::default()
        };
        out.push(Sample {
            tool: format!("server{i}__do_thing"),
            args: json!({"id": i}),
            annotations: Some(ann),
        });
    }
    for i in 0..10 {
        out.push(Sample {
            tool: format!("write_file{i}"),
            args: json!({"mode": i, "path": "x"}),
            annotations: None,
        });
        out.push(Sample {
            tool: format!("unknown_tool_{i}"),
            args: json!({}),
            annotations: None,
        });
    }
    out
}

fn measure(policy: &Policy, samples: &[Sample], seconds: f64) -> (u64, Duration) {
    let budget = Duration::from_secs_f64(seconds);
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed() < budget {
        for s in samples {
            let call = Call {
                tool: &s.tool,
                arguments: &s.args,
                annotations: s.annotations.as_ref(),
            };
            black_box(policy.evaluate(black_box(&call)));
        }
        n += samples.len() as u64;
    }
    (n, start.elapsed())
}

pub fn run(seconds: f64) {
    let policy = hundred_rules();
    assert_eq!(policy.rule_count(), 100);
    let all = calls();
    let shell: Vec<Sample> = all
        .iter()
        .filter(|s| s.tool == "shell_cmd")
        .map(|s| Sample {
            tool: s.tool.clone(),
            args: s.args.clone(),
            annotations: None,
        })
        .collect();
    println!(
        "== policy evaluation: {} rules, one thread",
        policy.rule_count()
    );
    measure(&policy, &all, 0.3); // warm up
    for (name, samples) in [
        ("mixed calls", &all),
        ("shell commands only (parsed each time)", &shell),
    ] {
        let (n, took) = measure(&policy, samples, seconds);
        let per_s = n as f64 / took.as_secs_f64();
        println!(
            "  {name:<40} {per_s:>12.0} decisions/s  ({:.0} ns each)",
            1e9 / per_s
        );
    }
    // Layering's own cost: the world's policy in force against one file of the same 105
    // rules, measured in turns so that a busy machine slows both alike.
    let world = layered();
    let same = layered_as_one_file();
    assert_eq!(world.rule_count(), same.rule_count());
    let (mut one, mut layers) = ((0u64, Duration::ZERO), (0u64, Duration::ZERO));
    for _ in 0..5 {
        let (n, took) = measure(&same, &all, seconds / 5.0);
        one = (one.0 + n, one.1 + took);
        let (n, took) = measure(&world, &all, seconds / 5.0);
        layers = (layers.0 + n, layers.1 + took);
    }
    let single = one.0 as f64 / one.1.as_secs_f64();
    let per_s = layers.0 as f64 / layers.1.as_secs_f64();
    println!(
        "  {:<40} {single:>12.0} decisions/s  ({:.0} ns each)",
        "mixed calls, one file of 105 rules",
        1e9 / single
    );
    println!(
        "  {:<40} {per_s:>12.0} decisions/s  ({:.0} ns each; {:+.1}% time against one file)",
        "mixed calls, a world's layer over a base",
        1e9 / per_s,
        (single / per_s - 1.0) * 100.0
    );
    let events = recorded(100_000);
    let start = Instant::now();
    let report = replay::replay(&world, events.iter(), 5);
    let took = start.elapsed();
    println!(
        "  replay of a candidate over {} recorded calls: {:.0} ms ({} decided differently)",
        report.calls,
        took.as_secs_f64() * 1000.0,
        report.calls - report.unchanged
    );
    println!();
}
