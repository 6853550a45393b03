//! `holdpoint policy check` (a file, here) and `holdpoint policy show` (the server's).

use std::path::PathBuf;

use clap::{Args, Subcommand};
use holdpoint_core::policy::{Call, Policy};
use holdpoint_protocol::ToolAnnotations;
use serde_json::{Value, json};

use super::{Common, print_json, runtime};
use crate::Failure;
use crate::connect::client_failure;
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
    /// data (admins and approvers).
    #[command(after_help = "Examples:\n  holdpoint policy show\n  holdpoint policy show --json")]
    Show(Common),
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
        PolicyCommand::Show(common) => show(common),
    }
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
        Some(r) => println!("rule:     rules[{}] {:?}", r.index, r.name),
        None => println!(
            "rule:     none matched; mode {} decides",
            policy.mode().as_str()
        ),
    }
    if matched.len() > 1 {
        println!("matched:");
        for m in matched {
            println!(
                "  rules[{}] {:?} -> {}",
                m.rule.index,
                m.rule.name,
                m.action.as_str()
            );
        }
    }
    Ok(())
}
