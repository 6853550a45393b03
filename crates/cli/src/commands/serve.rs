//! `holdpoint serve`, `holdpoint config check` and the OpenAPI document.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use holdpoint_client::{API_ROOT, OPENAPI_PATH};
use holdpoint_mcp::{McpSettings, Upstreams};
use holdpoint_server::{LogFormat, Server, Settings, load_policy};
use holdpoint_store::Database;
use tokio::signal::unix::{Signal, SignalKind, signal};

use super::runtime;
use crate::Failure;
use crate::paths::Files;

#[derive(Args)]
#[command(
    after_help = "Examples:\n  holdpoint serve\n  holdpoint serve --data /var/lib/holdpoint --policy /etc/holdpoint/policy.toml\n  holdpoint serve --bind 0.0.0.0:7717 --config /etc/holdpoint/holdpoint.toml --log-format json\n  holdpoint serve --database-url postgres://holdpoint:PASSWORD@db.internal/holdpoint\n\n\
Settings come from the configuration file, then from HOLDPOINT_<SECTION>_<KEY> environment\n\
variables (HOLDPOINT_SERVER_BIND, HOLDPOINT_LOG_FORMAT, …), then from these flags."
)]
pub struct ServeArgs {
    #[command(flatten)]
    files: Files,
    /// The address to listen on [default: 127.0.0.1:7717, loopback only].
    #[arg(long, value_name = "ADDR")]
    bind: Option<SocketAddr>,
    /// The policy file [default: policy.file of the configuration; without one, every tool
    /// call asks a person].
    #[arg(long, value_name = "FILE")]
    policy: Option<PathBuf>,
    /// A PostgreSQL database, postgres://USER:PASSWORD@HOST:PORT/DATABASE, instead of SQLite
    /// in the data directory [default: store.url of the configuration, or
    /// $HOLDPOINT_STORE_URL].
    #[arg(long, value_name = "URL")]
    database_url: Option<String>,
    /// `text` for people, `json` for log collectors [default: log.format, else text].
    #[arg(long, value_name = "FORMAT", value_parser = ["text", "json"])]
    log_format: Option<String>,
}

#[derive(Subcommand)]
pub enum ConfigCommand {
    /// Check the configuration (the file, HOLDPOINT_* variables and the policy file it names)
    /// and print the settings that would apply.
    #[command(
        after_help = "Examples:\n  holdpoint config check\n  HOLDPOINT_SERVER_BIND=0.0.0.0:7717 holdpoint config check --config holdpoint.toml\n  holdpoint config check --mcp"
    )]
    Check(CheckArgs),
}

#[derive(Args)]
pub struct CheckArgs {
    #[command(flatten)]
    files: Files,
    /// Also start the configured MCP servers ([mcp.servers]) and check their tools against
    /// the configuration: require_approval entries that name no tool of their server, tools
    /// listed twice, names that cannot be offered; and print the names under which tools
    /// are offered where they differ from server__tool.
    #[arg(long)]
    mcp: bool,
}

pub fn config(cmd: ConfigCommand) -> Result<(), Failure> {
    let ConfigCommand::Check(args) = cmd;
    let settings = args.files.settings()?;
    if let Some(policy) = &settings.policy.file {
        load_policy(policy).map_err(|e| Failure::Usage(e.to_string()))?;
    }
    if let Some(email) = &settings.channels.email {
        // A wrong host or refused credentials are said now, not when the first hold is mailed.
        runtime()?
            .block_on(email.test_connection())
            .map_err(|e| Failure::Usage(format!("channels.email: {e}")))?;
    }
    if let Some(slack) = &settings.channels.slack {
        // A token Slack refuses is said now too (auth.test), as the server's start would.
        // (Its errors name their key.)
        let slack = holdpoint_server::channels::slack::Slack::new(slack).map_err(Failure::Usage)?;
        runtime()?
            .block_on(slack.auth_test())
            .map_err(|e| Failure::Usage(format!("channels.slack: auth.test: {e}")))?;
    }
    let mcp = if args.mcp {
        runtime()?.block_on(check_mcp(&settings.mcp))?
    } else {
        unchecked_mcp(&settings.mcp)
    };
    println!(
        "# The configuration is valid. The settings that apply:\n{}",
        settings.to_toml()
    );
    print!("{mcp}");
    Ok(())
}

/// What can be known of the MCP servers without starting them: which `require_approval`
/// entries only their tools can confirm.
fn unchecked_mcp(mcp: &McpSettings) -> String {
    let unchecked: Vec<&str> = mcp
        .servers
        .iter()
        .filter(|(_, s)| s.tools.is_none() && !s.require_approval.is_empty())
        .map(|(name, _)| name.as_str())
        .collect();
    if unchecked.is_empty() {
        return String::new();
    }
    format!(
        "# The require_approval of MCP servers {unchecked:?} is checked against their tools \
         when they start (a name that is not one of their tools makes every call of theirs \
         asked); check it now with --mcp.\n"
    )
}

/// Starts the MCP servers and checks their tools; what they offer, or what is wrong.
async fn check_mcp(mcp: &McpSettings) -> Result<String, Failure> {
    let (upstreams, failed) = Upstreams::connect(mcp).await;
    let mut problems: Vec<String> = failed.iter().map(ToString::to_string).collect();
    problems.extend(upstreams.problems());
    let tools = upstreams.tool_infos();
    upstreams.close().await;
    if !problems.is_empty() {
        return Err(Failure::Usage(format!(
            "the MCP servers do not fit the configuration:\n  {}",
            problems.join("\n  ")
        )));
    }
    let mut said = format!(
        "# The MCP servers started: {} tools offered.\n",
        tools.len()
    );
    for tool in tools {
        if tool.name != format!("{}__{}", tool.mcp.server, tool.mcp.tool) {
            said.push_str(&format!(
                "# Tool {:?} of MCP server {:?} is offered as {} (a name an LLM can take).\n",
                tool.mcp.tool, tool.mcp.server, tool.name
            ));
        }
    }
    Ok(said)
}

pub fn openapi() -> Result<(), Failure> {
    let doc = holdpoint_server::openapi()
        .to_pretty_json()
        .map_err(|e| Failure::Check(e.to_string()))?;
    println!("{doc}");
    Ok(())
}

pub fn serve(args: ServeArgs) -> Result<(), Failure> {
    let mut settings = args.files.settings()?;
    if let Some(bind) = args.bind {
        settings.server.bind = bind;
    }
    if let Some(policy) = args.policy {
        settings.policy.file = Some(policy);
    }
    if let Some(url) = args.database_url {
        holdpoint_store::check_url(&url)
            .map_err(|e| Failure::Usage(format!("--database-url: {e}")))?;
        settings.store.url = Some(url);
    }
    if let Some(format) = args.log_format {
        settings.log.format = format.parse().map_err(Failure::Usage)?;
    }
    init_logs(&settings)?;
    let data = args.files.data_dir();
    runtime()?.block_on(async move {
        let server = Server::start(&data, &settings)
            .await
            .map_err(|e| Failure::Usage(e.to_string()))?;
        // The handlers are in place before the address is printed: whoever reads it may
        // send SIGTERM or SIGHUP at once, which would otherwise kill the process unasked.
        let stop = super::stop_signal();
        let hangups = signal(SignalKind::hangup());
        announce(&server, &data, settings.log.format);
        tokio::select! {
            () = stop => {}
            () = reload_on_hangup(&server, hangups) => {}
        }
        tracing::info!("stopping: finishing requests in flight");
        server
            .stop()
            .await
            .map_err(|e| Failure::Check(format!("the server failed: {e}")))?;
        tracing::info!("stopped");
        Ok(())
    })
}

fn init_logs(settings: &Settings) -> Result<(), Failure> {
    let filter = tracing_subscriber::EnvFilter::try_new(&settings.log.level)
        .map_err(|e| Failure::Usage(format!("log.level: {e}")))?;
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(std::io::stderr);
    let done = match settings.log.format {
        LogFormat::Text => logs.try_init(),
        LogFormat::Json => logs.json().flatten_event(true).try_init(),
    };
    done.map_err(|e| Failure::Check(format!("cannot set up logging: {e}")))
}

/// Says where the server is and how to sign in: in the log, and for people on stdout.
fn announce(server: &Server, data: &Path, format: LogFormat) {
    let database = match server.database() {
        Database::Postgres(pg) => format!("PostgreSQL at {}", pg.name()),
        Database::Sqlite(sqlite) => sqlite.path().display().to_string(),
    };
    tracing::info!(url = %server.url(), data = %data.display(), %database, "listening");
    if format == LogFormat::Json {
        return;
    }
    println!(
        "Holdpoint {} is listening on {}",
        env!("CARGO_PKG_VERSION"),
        server.url()
    );
    println!("  data:     {}", data.display());
    println!("  database: {database}");
    match server.login_url() {
        Some(url) => {
            println!("  sign in:  {url}");
            println!(
                "  admin token (keep it secret): {}",
                server.admin_token_file().display()
            );
        }
        None => println!("  {}", no_admin_token(server.admin_token_file())),
    }
    println!(
        "  API:      {url}{API_ROOT} (described at {url}{OPENAPI_PATH})",
        url = server.url()
    );
    println!("Stop with Ctrl-C; turns stay stored and resume on the next start.");
}

/// How to sign in when this server has no admin token file to show: the file was emptied
/// since the first start, or was never here (a node that joined a database whose first admin
/// token another node wrote into its own data directory).
fn no_admin_token(file: &Path) -> String {
    if file.exists() {
        format!(
            "the admin token is no longer in {}; sign in with a token an admin created",
            file.display()
        )
    } else {
        format!(
            "sign in:  with a token an admin created (there is no admin token file {})",
            file.display()
        )
    }
}

/// Reloads the policy file at each SIGHUP, with the checks of a start: a broken file leaves
/// the policy in force and the log says why. Never returns.
async fn reload_on_hangup(server: &Server, hangups: std::io::Result<Signal>) {
    let Ok(mut hangups) = hangups else {
        tracing::warn!(
            "cannot listen for SIGHUP: reload the policy with `holdpoint policy reload`"
        );
        return std::future::pending().await;
    };
    while hangups.recv().await.is_some() {
        let system = holdpoint_protocol::Actor::of(holdpoint_protocol::Source::System);
        match server.app().reload_policy(system).await {
            Ok(r) if r.changed => {
                tracing::info!(digest = %r.digest, "SIGHUP: policy reloaded");
            }
            Ok(r) => tracing::info!(digest = %r.digest, "SIGHUP: policy file unchanged"),
            Err(e) => {
                // One line per log record: the problems, each on a line of their own in the
                // message, are joined.
                let why: Vec<&str> = e.message.lines().map(str::trim).collect();
                tracing::warn!(
                    error = %why.join(" "),
                    "SIGHUP: policy not reloaded; the policy in force stays"
                );
            }
        }
    }
    std::future::pending().await
}

#[cfg(test)]
mod tests {
    use super::no_admin_token;

    #[test]
    fn an_admin_token_file_that_was_never_there_is_not_said_to_be_gone() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("admin-token");
        // Another node made the first admin token, in its own data directory.
        let never = no_admin_token(&file);
        assert!(!never.contains("no longer"), "{never}");
        assert!(
            never.contains("with a token an admin created") && never.contains("admin-token"),
            "{never}"
        );
        // Emptied since the first start.
        std::fs::write(&file, "").unwrap();
        let emptied = no_admin_token(&file);
        assert!(emptied.contains("is no longer in"), "{emptied}");
    }
}
