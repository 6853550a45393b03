//! `holdpoint`: the command-line interface.

mod commands;
mod paths;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Holdpoint: a human-in-the-loop runtime for LLM agents.
///
/// When an agent wants to do something a person must allow, its turn stops at a hold; a
/// person decides, and the agent resumes with a clear result. Holds are durable, decided
/// exactly once, bound to the exact arguments shown, never wait forever, and every step is
/// written to a tamper-evident audit log.
#[derive(Parser)]
#[command(name = "holdpoint", version, propagate_version = true)]
#[command(
    after_help = "Exit status: 0 success; 1 the check failed (for example a broken audit chain); 2 bad input (usage, a bad policy file, bad JSON)."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the server: the API, live events, the agent runtime and webhooks, on SQLite in
    /// the data directory. Prints a sign-in link while the first admin token file exists.
    Serve(commands::serve::ServeArgs),
    /// Check the configuration.
    #[command(subcommand)]
    Config(commands::serve::ConfigCommand),
    /// Check a policy file, and what it decides for a tool call.
    #[command(subcommand)]
    Policy(commands::policy::PolicyCommand),
    /// Verify the tamper-evident audit log.
    #[command(subcommand)]
    Audit(commands::audit::AuditCommand),
    /// Print the OpenAPI document of the HTTP API.
    #[command(hide = true)]
    Openapi,
}

/// How a command failed, and so which exit status it ends with.
pub enum Failure {
    /// The check itself failed (exit 1).
    Check(String),
    /// The input was bad (exit 2).
    Usage(String),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve(args) => commands::serve::serve(args),
        Command::Config(cmd) => commands::serve::config(cmd),
        Command::Openapi => commands::serve::openapi(),
        Command::Policy(cmd) => commands::policy::run(cmd),
        Command::Audit(cmd) => commands::audit::run(cmd),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Check(message)) => {
            eprintln!("{message}");
            ExitCode::from(1)
        }
        Err(Failure::Usage(message)) => {
            eprintln!("error: {message}");
            ExitCode::from(2)
        }
    }
}
