//! `holdpoint policy check` (a file, here), and the server's policies: `show`, `set`,
//! `history` (a world's own) and `reload` (the base file).

use std::path::PathBuf;

use clap::{Args, Subcommand};
use holdpoint_core::policy::{Call, Policy};
use holdpoint_protocol::{HoldId, ReplayRequest, SetPolicy, ToolAnnotations};
use serde_json::{Value, json};

use super::{Common, print_json, runtime};
use crate::Failure;
use crate::connect::client_failure;
use crate::present;
use crate::terminal::safe::clean;

#[derive(Subcommand)]
pub enum PolicyCommand {
    /// Check a policy file (rules, examples, checks) and, given a tool call, print what it
    /// decides and which rule decided.
    #[command(
        after_help = "Examples:\n  holdpoint policy check --policy policy.toml\n  holdpoint policy check --policy policy.toml --tool shell_cmd --args '{\"command\": \"git push\"}'\n  holdpoint policy check --policy policy.toml --tool fs__delete --destructive --json"
    )]
    Check(CheckArgs),
    /// Print the policy the server is using: its file's text, or with --json its rules as
    /// data; with --world, that world's own policy (admins and approvers).
    #[command(
        after_help = "Examples:\n  holdpoint policy show\n  holdpoint policy show --json\n  holdpoint policy show --world lab"
    )]
    Show(ShowArgs),
    /// Give a world a new version of its own policy (admins). The file is checked whole on the
    /// server (examples and checks run); an invalid one changes nothing and every problem is
    /// printed.
    #[command(after_help = "Examples:\n  holdpoint policy set --world lab lab-policy.toml")]
    Set(SetArgs),
    /// List every version of a world's policy: who set it, when, and its digest.
    #[command(after_help = "Examples:\n  holdpoint policy history --world lab")]
    History(WorldArgs),
    /// Print the narrowest rule that would have decided a hold's call as it was decided, with
    /// the call as its own example: review it, edit it, add it to a world's policy.
    #[command(
        after_help = "Examples:\n  holdpoint policy suggest 0193…\n  holdpoint policy suggest 0193… >> lab.toml && holdpoint policy set --world lab lab.toml"
    )]
    Suggest(SuggestArgs),
    /// Show what a candidate policy, as a world's, would have decided differently for the
    /// calls recorded in the world: counts and examples of each difference. Changes nothing.
    #[command(
        after_help = "Examples:\n  holdpoint policy replay --world lab --policy new.toml\n  holdpoint policy replay --world lab --policy new.toml --since 7d --json"
    )]
    Replay(ReplayArgs),
    /// Make the server read its policy file again (admins), with the checks of a start; a
    /// broken file leaves the policy in force. (SIGHUP to the server does the same.)
    #[command(after_help = "Examples:\n  holdpoint policy reload")]
    Reload(Common),
}

#[derive(Args)]
pub struct ShowArgs {
    /// A world (id or name): show its own policy instead of the server's.
    #[arg(long, value_name = "WORLD")]
    world: Option<String>,
    #[command(flatten)]
    common: Common,
}

#[derive(Args)]
pub struct WorldArgs {
    /// The world (id or name).
    #[arg(long, value_name = "WORLD")]
    world: String,
    #[command(flatten)]
    common: Common,
}

#[derive(Args)]
pub struct ReplayArgs {
    /// The world (id or name).
    #[arg(long, value_name = "WORLD")]
    world: String,
    /// The candidate policy file (TOML).
    #[arg(long, value_name = "FILE")]
    policy: PathBuf,
    /// Only calls recorded this recently ("7d", "24h") [default: all].
    #[arg(long, value_name = "DURATION")]
    since: Option<holdpoint_protocol::Deadline>,
    #[command(flatten)]
    common: Common,
}

#[derive(Args)]
pub struct SuggestArgs {
    /// The hold's id.
    hold: String,
    #[command(flatten)]
    common: Common,
}

#[derive(Args)]
pub struct SetArgs {
    /// The world (id or name).
    #[arg(long, value_name = "WORLD")]
    world: String,
    /// The policy file (TOML; see docs/policy.md).
    #[arg(value_name = "FILE")]
    file: PathBuf,
    #[command(flatten)]
    common: Common,
}

#[derive(Args)]
pub struct CheckArgs {
    /// The policy file (TOML; see docs/policy.md).
    #[arg(long, value_name = "FILE")]
    policy: PathBuf,
    /// The tool to decide, as the agent names it (`server__tool` for MCP tools).
    #[arg(long, value_name = "NAME")]
    tool: Option<String>,
    /// The call's arguments, a JSON object.
    #[arg(long, value_name = "JSON", default_value = "{}", requires = "tool")]
    args: String,
    /// The tool is annotated read-only.
    #[arg(long, requires = "tool")]
    read_only: bool,
    /// The tool is annotated destructive.
    #[arg(long, requires = "tool")]
    destructive: bool,
    /// Print JSON: {"decision": …, "rule": …}.
    #[arg(long)]
    json: bool,
}

pub fn run(cmd: PolicyCommand) -> Result<(), Failure> {
    match cmd {
        PolicyCommand::Check(args) => check(args),
        PolicyCommand::Show(args) => match args.world {
            Some(world) => show_world(&world, args.common),
            None => show(args.common),
        },
        PolicyCommand::Set(args) => set(args),
        PolicyCommand::History(args) => history(args),
        PolicyCommand::Suggest(args) => suggest(args),
        PolicyCommand::Replay(args) => replay(args),
        PolicyCommand::Reload(common) => reload(common),
    }
}

fn show_world(world: &str, common: Common) -> Result<(), Failure> {
    let client = common.client()?;
    let state = runtime()?
        .block_on(client.world_policy(world))
        .map_err(client_failure)?;
    if common.json {
        return print_json(&state);
    }
    match &state.current {
        Some(p) => print!("{}", clean(&p.text)),
        None => println!(
            "World {} has no policy of its own: the server's applies.",
            clean(world)
        ),
    }
    Ok(())
}

fn set(a: SetArgs) -> Result<(), Failure> {
    let text = std::fs::read_to_string(&a.file).map_err(|e| {
        Failure::Usage(format!(
            "cannot read the policy file {}: {e}",
            a.file.display()
        ))
    })?;
    let client = a.common.client()?;
    let p = runtime()?
        .block_on(client.set_world_policy(&a.world, &SetPolicy { text }))
        .map_err(client_failure)?;
    if a.common.json {
        return print_json(&p);
    }
    println!(
        "World {}: policy version {} is in force (sha256 {}).",
        clean(&a.world),
        p.version,
        p.digest
    );
    Ok(())
}

fn history(a: WorldArgs) -> Result<(), Failure> {
    let client = a.common.client()?;
    let versions = runtime()?
        .block_on(client.world_policy_history(&a.world))
        .map_err(client_failure)?;
    if a.common.json {
        return print_json(&versions);
    }
    if versions.is_empty() {
        println!(
            "World {} has no policy of its own: the server's applies.",
            clean(&a.world)
        );
    }
    for p in versions {
        let by = p.by.name.as_deref().unwrap_or("holdpoint");
        println!(
            "version {}  {}  by {}  sha256 {}",
            p.version,
            p.at,
            clean(by),
            p.digest
        );
    }
    Ok(())
}

fn replay(a: ReplayArgs) -> Result<(), Failure> {
    let text = std::fs::read_to_string(&a.policy).map_err(|e| {
        Failure::Usage(format!(
            "cannot read the policy file {}: {e}",
            a.policy.display()
        ))
    })?;
    let client = a.common.client()?;
    let body = ReplayRequest {
        text,
        since: a.since,
    };
    let r = runtime()?
        .block_on(client.replay_policy(&a.world, &body))
        .map_err(client_failure)?;
    if a.common.json {
        return print_json(&r);
    }
    println!(
        "{} calls replayed: {} decided the same, {} differently.",
        r.calls,
        r.unchanged,
        r.calls - r.unchanged
    );
    if r.granted > 0 {
        println!(
            "{} of them allowed by a grant in force at the time, where the rules would ask.",
            r.granted
        );
    }
    for c in &r.changes {
        println!("  {} {} -> {}", c.count, c.before, c.after.as_str());
        for e in &c.examples {
            let args = serde_json::to_string(&e.arguments).unwrap_or_default();
            println!("      {} {} {}", e.at, clean(&e.tool), clean(&args));
        }
    }
    Ok(())
}

fn suggest(a: SuggestArgs) -> Result<(), Failure> {
    let id: HoldId = a
        .hold
        .parse()
        .map_err(|_| Failure::Usage(format!("{:?} is not a hold id", clean(&a.hold))))?;
    let client = a.common.client()?;
    let s = runtime()?
        .block_on(client.suggested_rule(id))
        .map_err(client_failure)?;
    if a.common.json {
        return print_json(&s);
    }
    print!("{}", clean(&s.rule));
    Ok(())
}

fn reload(common: Common) -> Result<(), Failure> {
    let client = common.client()?;
    let r = runtime()?
        .block_on(client.reload_policy())
        .map_err(client_failure)?;
    if common.json {
        return print_json(&r);
    }
    if r.changed {
        println!("Policy reloaded (sha256 {}).", r.digest);
    } else {
        println!("Policy file unchanged (sha256 {}).", r.digest);
    }
    Ok(())
}

fn show(common: Common) -> Result<(), Failure> {
    let client = common.client()?;
    let policy = runtime()?
        .block_on(client.policy())
        .map_err(client_failure)?;
    if common.json {
        return print_json(&policy);
    }
    match &policy.source {
        Some(text) => print!("{}", clean(text)),
        None => println!(
            "The server runs without a policy file: mode {}, no rules.",
            policy.mode
        ),
    }
    Ok(())
}

fn check(a: CheckArgs) -> Result<(), Failure> {
    let text = std::fs::read_to_string(&a.policy).map_err(|e| {
        Failure::Usage(format!(
            "cannot read the policy file {}: {e}",
            a.policy.display()
        ))
    })?;
    let policy = Policy::from_toml(&text)
        .map_err(|e| Failure::Usage(format!("{}: {e}", a.policy.display())))?;
    let Some(tool) = a.tool else {
        if a.json {
            println!(
                "{}",
                json!({"valid": true, "mode": policy.mode().as_str(), "rules": policy.rule_count()})
            );
        } else {
            println!(
                "{}: valid ({} rules, mode {})",
                a.policy.display(),
                policy.rule_count(),
                policy.mode().as_str()
            );
        }
        return Ok(());
    };
    let arguments: Value = serde_json::from_str(&a.args)
        .map_err(|e| Failure::Usage(format!("--args is not valid JSON: {e}")))?;
    if !arguments.is_object() {
        return Err(Failure::Usage(
            "--args must be a JSON object, such as '{\"command\": \"ls\"}'".into(),
        ));
    }
    let annotations = ToolAnnotations {
        read_only: a.read_only.then_some(true),
        destructive: a.destructive.then_some(true),
        ..ToolAnnotations::default()
    };
    let call = Call {
        tool: &tool,
        arguments: &arguments,
        annotations: Some(&annotations),
    };
    let (eval, matched) = policy.explain(&call);
    let rule = eval.rule.and_then(|i| policy.rule_ref(i));
    if a.json {
        let out = json!({
            "decision": eval.action.as_str(),
            "rule": rule,
            "mode": policy.mode().as_str(),
            "matched": matched,
        });
        println!("{out}");
        return Ok(());
    }
    println!("decision: {}", eval.action.as_str());
    match rule {
        Some(r) => println!("rule:     {}", present::rule_at(&r)),
        None => println!(
            "rule:     none matched; mode {} decides",
            policy.mode().as_str()
        ),
    }
    if matched.len() > 1 {
        println!("matched:");
        for m in matched {
            println!("  {} -> {}", present::rule_at(&m.rule), m.action.as_str());
        }
    }
    Ok(())
}
