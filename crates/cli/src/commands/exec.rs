//! `holdpoint exec`: run a command only if policy or a person allows exactly it.

use std::os::unix::process::ExitStatusExt;

use clap::Args;
use holdpoint_protocol::{
    ApprovalRequest, Deadline, DecidedBy, DecisionKind, GateResult, HoldRequest, OutcomeStatus,
    Verdict,
};
use serde_json::json;

use super::raise::{self, Target, status};
use super::runtime;
use crate::Failure;
use crate::present;

/// The tool name policy rules use for commands run through `exec`.
pub const TOOL: &str = "exec";

#[derive(Args)]
#[command(
    after_help = "Examples:\n  holdpoint exec -- make deploy\n  holdpoint exec --reason 'rotate the staging keys' -- ./rotate-keys.sh staging\n  holdpoint exec --timeout 10m -- kubectl delete pod web-0\n\n\
The approval is for the tool `exec` with the arguments {\"command\": [COMMAND, ARGS…], \"cwd\": DIR}:\n\
policy rules match it like a shell command (`command = { program = \"make\", args = [\"deploy\"] }`).\n\
An allowed command runs at once; a denied one never runs; otherwise a person is asked, and\n\
may approve it once or always (this command in this directory). The command runs as given,\n\
without a shell, with this terminal's input and output.\n\n\
Exit status:\n  the command's own status when it ran (128 + N when killed by signal N)\n  123  denied (by policy or a person; the command did not run)\n  124  timed out (the command did not run)\n  125  Holdpoint could not ask (no server, a refused token or request)\n  126  the command could not be run\n  127  the command was not found\n  130  interrupted with Ctrl-C while waiting (the approval is withdrawn)\n  2    bad usage: nothing was asked"
)]
pub struct ExecArgs {
    /// Why the command should run, shown to the person who decides.
    #[arg(long, value_name = "TEXT")]
    reason: Option<String>,
    /// How long the approval may wait, such as `90s` or `30m` [default: the policy's deadline].
    #[arg(long, value_name = "DURATION")]
    timeout: Option<Deadline>,
    #[command(flatten)]
    target: Target,
    /// The command and its arguments, after `--`.
    #[arg(required = true, last = true, value_name = "COMMAND")]
    command: Vec<String>,
}

pub fn run(args: ExecArgs) -> Result<(), Failure> {
    runtime()?.block_on(exec(args))
}

async fn exec(args: ExecArgs) -> Result<(), Failure> {
    let client = args.target.client()?;
    let cwd = std::env::current_dir()
        .map_err(|e| raise::error(format!("cannot read the current directory: {e}")))?;
    let arguments = json!({"command": args.command, "cwd": cwd.to_string_lossy()});
    let request = ApprovalRequest {
        tool_call_id: None,
        tool: TOOL.to_owned(),
        arguments: arguments.clone(),
        schema: None,
        annotations: None,
        description: args.reason.clone(),
        deadline: args.timeout,
        always_ask: false,
        // The command runs as asked or not at all: no edits, and no grant wider than it.
        mcp: None,
        offers: Some(vec![
            DecisionKind::ApproveOnce,
            DecisionKind::ApproveAlwaysArgs,
            DecisionKind::Deny,
        ]),
    };
    let shown = present::short(&present::command_line(&args.command), 100);
    match args
        .target
        .raise(&client, HoldRequest::Approval(request))
        .await?
    {
        GateResult::Allowed { decided_by, .. } => {
            eprintln!("Allowed by {}: {shown}", by(&decided_by));
        }
        GateResult::Denied { decided_by, .. } => {
            eprintln!("Denied by {}; not run: {shown}", by(&decided_by));
            return Err(Failure::Exit(status::DENIED));
        }
        GateResult::Invalid { field, message } => {
            return Err(raise::error(format!("{field}: {message}")));
        }
        GateResult::Held { hold } => {
            let decided = raise::outcome(&client, &hold, "approve the command").await?;
            let Some(outcome) = decided.outcome else {
                return Err(raise::error("the hold was decided without an outcome"));
            };
            let said = present::outcome(&outcome);
            if outcome.verdict != Some(Verdict::Approve) {
                eprintln!("Not run: {said}");
                return Err(Failure::Exit(match outcome.status {
                    OutcomeStatus::TimedOut => status::TIMED_OUT,
                    _ => status::DENIED,
                }));
            }
            if outcome.arguments.as_ref() != Some(&arguments) {
                return Err(raise::error(
                    "the approval is for other arguments than this command; not run",
                ));
            }
            eprintln!("{}: {shown}", capitalised(&said));
        }
    }
    run_command(&args.command)
}

fn by(d: &DecidedBy) -> String {
    match d {
        DecidedBy::Rule { rule } => present::rule(rule),
        DecidedBy::Grant { grant } => format!("an earlier \"always\" approval (grant {grant})"),
        DecidedBy::Mode { mode } => format!("the policy's {mode} mode"),
    }
}

fn capitalised(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

/// Runs the command as given, and ends with its status.
fn run_command(command: &[String]) -> Result<(), Failure> {
    let Some((program, rest)) = command.split_first() else {
        return Err(raise::error("no command to run"));
    };
    let status = std::process::Command::new(program).args(rest).status();
    match status {
        Ok(s) => match (s.code(), s.signal()) {
            (Some(0), _) => Ok(()),
            (Some(code), _) => Err(Failure::Exit(u8::try_from(code).unwrap_or(1))),
            (None, Some(signal)) => {
                Err(Failure::Exit(u8::try_from(128 + signal).unwrap_or(u8::MAX)))
            }
            (None, None) => Err(Failure::Exit(1)),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            eprintln!("error: {program}: command not found");
            Err(Failure::Exit(status::NOT_FOUND))
        }
        Err(e) => {
            eprintln!("error: cannot run {program}: {e}");
            Err(Failure::Exit(status::CANNOT_RUN))
        }
    }
}
