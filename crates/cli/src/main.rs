//! `holdpoint`: the command-line interface.

mod client;
mod commands;
mod connect;
mod decide;
mod editor;
mod paths;
mod present;
mod terminal;

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

/// mimalloc rather than glibc's malloc: a busy server frees on one thread what another
/// allocated, where glibc spends its time on arena locks and consolidation.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Holdpoint: a human-in-the-loop runtime for LLM agents.
///
/// When an agent wants to do something a person must allow, its turn stops at a hold; a
/// person decides, and the agent resumes with a clear result. Holds are durable, decided
/// exactly once, bound to the exact arguments shown, never wait forever, and every step is
/// written to a tamper-evident audit log.
#[derive(Parser)]
#[command(name = "holdpoint", version, propagate_version = true)]
#[command(
    after_help = "Examples:\n  holdpoint serve\n  holdpoint chat lab\n  holdpoint holds list\n  holdpoint ask \"Deploy v2 to production?\" --option deploy --option abort\n  holdpoint exec -- make deploy\n\n\
Commands that talk to a server find it with --server, $HOLDPOINT_SERVER or the configured\n\
address, and use $HOLDPOINT_TOKEN or the admin token in the data directory.\n\n\
Exit status: 0 success; 1 the check or request failed (a broken audit chain, a refused\n\
decision, no server); 2 bad input (usage, a bad policy file, bad JSON). `ask` and `exec` have\n\
their own codes for denied, canceled and timed out: see their --help."
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
    #[command(subcommand, after_help = "Example:\n  holdpoint config check")]
    Config(commands::serve::ConfigCommand),
    /// Check a policy file, and what it decides for a tool call.
    #[command(
        subcommand,
        after_help = "Example:\n  holdpoint policy check --policy policy.toml --tool shell_cmd --args '{\"command\": \"git push\"}'"
    )]
    Policy(commands::policy::PolicyCommand),
    /// Verify the tamper-evident audit log.
    #[command(
        subcommand,
        after_help = "Examples:\n  holdpoint audit verify\n  holdpoint audit head"
    )]
    Audit(commands::audit::AuditCommand),
    /// Talk to an agent; decide its holds at a menu as they come.
    Chat(commands::chat::ChatArgs),
    /// Create, list, change and delete worlds, and their MCP servers.
    #[command(
        subcommand,
        after_help = "Examples:\n  holdpoint worlds create lab\n  holdpoint worlds list\n  holdpoint worlds mcp list lab"
    )]
    Worlds(commands::catalog::WorldsCommand),
    /// Create, list, change and delete a world's agents.
    #[command(
        subcommand,
        after_help = "Examples:\n  holdpoint agents create lab helper --base-url https://api.openai.com/v1 --model gpt-4o-mini --api-key-env OPENAI_API_KEY\n  holdpoint agents list lab"
    )]
    Agents(commands::catalog::AgentsCommand),
    /// Create, list, change and delete a world's chats.
    #[command(
        subcommand,
        after_help = "Examples:\n  holdpoint chats create lab --agent helper\n  holdpoint chats list lab"
    )]
    Chats(commands::catalog::ChatsCommand),
    /// List, show, decide and watch holds.
    #[command(
        subcommand,
        after_help = "Examples:\n  holdpoint holds list\n  holdpoint holds show ID\n  holdpoint holds approve ID\n  holdpoint holds watch"
    )]
    Holds(commands::holds::HoldsCommand),
    /// Ask a person a question and print the answer (for scripts and CI jobs).
    Ask(commands::ask::AskArgs),
    /// Run a command only if policy or a person allows it.
    Exec(commands::exec::ExecArgs),
    /// Serve MCP on stdio in front of the configured MCP servers: every tool call goes
    /// through the world's policy, and what must be asked waits for a person.
    Mcp(commands::mcp::McpArgs),
    /// Print a shell completion script.
    Completions(commands::completions::CompletionsArgs),
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
    /// Exit with this status; anything to say was said.
    Exit(u8),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve(args) => commands::serve::serve(args),
        Command::Config(cmd) => commands::serve::config(cmd),
        Command::Openapi => commands::serve::openapi(),
        Command::Policy(cmd) => commands::policy::run(cmd),
        Command::Audit(cmd) => commands::audit::run(cmd),
        Command::Chat(args) => commands::chat::run(args),
        Command::Holds(cmd) => commands::holds::run(cmd),
        Command::Worlds(cmd) => commands::catalog::worlds(cmd),
        Command::Agents(cmd) => commands::catalog::agents(cmd),
        Command::Chats(cmd) => commands::catalog::chats(cmd),
        Command::Ask(args) => commands::ask::run(args),
        Command::Exec(args) => commands::exec::run(args),
        Command::Mcp(args) => commands::mcp::run(args),
        Command::Completions(args) => commands::completions::run(args, Cli::command()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // Messages carry what servers and files said: cleaned like everything else.
        Err(Failure::Check(message)) => {
            eprintln!("{}", terminal::safe::clean(&message));
            ExitCode::from(1)
        }
        Err(Failure::Usage(message)) => {
            eprintln!("error: {}", terminal::safe::clean(&message));
            ExitCode::from(2)
        }
        Err(Failure::Exit(status)) => ExitCode::from(status),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every command's `--help` ends with at least one example.
    #[test]
    fn every_command_has_an_example_in_its_help() {
        fn walk(cmd: &mut clap::Command, path: &str, missing: &mut Vec<String>) {
            let path = format!("{path} {}", cmd.get_name());
            if !cmd.is_hide_set() {
                let help = cmd.render_long_help().to_string();
                if !help.contains("Example") {
                    missing.push(path.clone());
                }
            }
            for sub in cmd.get_subcommands_mut() {
                walk(sub, &path, missing);
            }
        }
        let mut missing = Vec::new();
        let mut cli = Cli::command();
        cli.build();
        walk(&mut cli, "", &mut missing);
        missing.retain(|p| !p.contains(" help"));
        assert!(missing.is_empty(), "no example in: {missing:#?}");
    }
}
