//! Policy evaluation: 100 rules of every kind, a varied stream of calls, one core.

use std::hint::black_box;
use std::time::{Duration, Instant};

use holdpoint_core::policy::{Call, Policy};
use holdpoint_protocol::ToolAnnotations;
use serde_json::{Value, json};

/// A policy of 100 rules: shell commands, argument tests, MCP globs and annotations.
pub fn hundred_rules() -> Policy {
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
    match Policy::from_toml(&text) {
        Ok(p) => p,
        Err(e) => panic!("the benchmark policy is invalid: {e}"),
    }
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
    println!();
}
