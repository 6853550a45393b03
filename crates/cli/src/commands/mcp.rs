//! `holdpoint mcp`: an MCP server on stdio that a coding agent (or any MCP client) starts in
//! front of its MCP servers. Their tools are offered as `server__tool`, with Holdpoint's own
//! `ask_human` and `request_approval`; every call goes through the world's policy, and what
//! must be asked waits for a person in Holdpoint.

use std::sync::Arc;

use clap::Args;
use holdpoint_client::{Client, ClientError};
use holdpoint_mcp::{Approver, Gateway, Holds, McpSettings, Upstreams};
use tokio_util::sync::CancellationToken;

use super::raise::{self, Target};
use super::runtime_on_one_thread;
use crate::Failure;
use crate::terminal::safe::clean_line;

#[derive(Args)]
#[command(
    after_help = "Example (an MCP client's configuration):\n  {\"mcpServers\": {\"holdpoint\": {\"command\": \"holdpoint\", \"args\": [\"mcp\", \"--world\", \"lab\"],\n    \"env\": {\"HOLDPOINT_SERVER\": \"http://127.0.0.1:7717\", \"HOLDPOINT_TOKEN\": \"…\"}}}}\n\n\
The upstream MCP servers are the [mcp.servers.NAME] sections of the configuration file and the\n\
world's own (holdpoint worlds mcp; see docs/mcp.md). Standard input and output carry MCP; messages go to standard error. The token\n\
should be an agent's: the gateway raises holds, people decide them elsewhere.\n\n\
Elicitation: with HOLDPOINT_APPROVER_TOKEN set to an approver's or an admin's token, a hold\n\
raised by a call is also put to the MCP client's user when the client supports elicitation;\n\
their answer is decided as that person (recorded \"via MCP elicitation in CLIENT VERSION\"),\n\
and the first answer on any channel wins. Without it, no elicitation is sent."
)]
pub struct McpArgs {
    #[command(flatten)]
    target: Target,
}

pub fn run(args: McpArgs) -> Result<(), Failure> {
    runtime_on_one_thread()?.block_on(serve(args))
}

async fn serve(args: McpArgs) -> Result<(), Failure> {
    init_logs();
    let settings = args.target.connect.settings()?;
    let connection = args
        .target
        .connect
        .client_or_embedded()
        .await
        .map_err(|f| match f {
            Failure::Check(m) | Failure::Usage(m) => raise::error(m.trim_start_matches("error: ")),
            other => other,
        })?;
    let world = args.target.world(&connection.client).await?;
    // The world's own servers beside the file's; a name in both is the world's.
    let mut own = connection
        .client
        .world_mcp_servers(&world)
        .await
        .map_err(|e| raise::error(format!("cannot read the MCP servers of world {world}: {e}")))?;
    // An agent's token is never shown a secret: servers that need one run in the server.
    own.retain(|name, server| {
        let hidden = server
            .env
            .values()
            .chain(server.headers.values())
            .any(|v| v == holdpoint_core::mcp::HIDDEN);
        if hidden {
            eprintln!(
                "warning: world {world}'s MCP server {} needs secrets (env or headers) that only \
                 an admin may read, so it is not started here; reach it through the server's \
                 gateway (/mcp/{world}), or name it in this configuration file",
                clean_line(name)
            );
        }
        !hidden
    });
    let servers = McpSettings {
        servers: holdpoint_core::mcp::effective_servers(&settings.mcp.servers, &own),
    };
    // Started in the background: the client's initialize is answered at once, and tools
    // are announced as their servers come up.
    let upstreams = Arc::new(Upstreams::start(&servers));
    let watched = upstreams.clone();
    tokio::spawn(async move {
        for e in watched.first_starts().await {
            eprintln!(
                "warning: {}; it is tried again in the background, and its tools are offered once it starts",
                clean_line(&e.to_string())
            );
        }
    });
    let holds = Holds::new(
        connection.mcp_holdpoint().await?,
        world,
        args.target.chat().cloned(),
    );
    // SIGTERM (which an MCP client sends when closing our input is not enough) or Ctrl-C
    // stops the gateway as its client leaving would: the holds its calls wait on are
    // withdrawn, saying so, and its upstreams closed, rather than left to time out.
    let shutdown = CancellationToken::new();
    let stop = super::stop_signal();
    let stopping = shutdown.clone();
    tokio::spawn(async move {
        stop.await;
        stopping.cancel();
    });
    let mut gateway = Gateway::new(holds, upstreams).stopped_by(shutdown);
    if let Some(approver) = approver(&connection.client).await? {
        gateway = gateway.with_approver(approver);
    }
    let served = gateway.serve_stdio().await;
    connection.close().await;
    served.map_err(raise::error)
}

/// The person who answers elicitations: `$HOLDPOINT_APPROVER_TOKEN`, checked to be a person's.
async fn approver(server: &Client) -> Result<Option<Approver>, Failure> {
    let Ok(token) = std::env::var(APPROVER_TOKEN) else {
        return Ok(None);
    };
    let client = Client::new(server.base(), token.trim().to_owned())
        .map_err(|e| raise::error(format!("{APPROVER_TOKEN}: {e}")))?;
    // A refusal is said here, naming this variable: the client's own words for it would
    // point at HOLDPOINT_TOKEN, which is not the token that was refused.
    if let Err(ClientError::Api {
        status: 401,
        message,
        ..
    }) = client.session().await
    {
        return Err(raise::error(approver_refused(&message)));
    }
    Approver::over_http(client)
        .await
        .map(Some)
        .map_err(|e| raise::error(format!("{APPROVER_TOKEN}: {e}")))
}

const APPROVER_TOKEN: &str = "HOLDPOINT_APPROVER_TOKEN";

/// What is said when the server refuses the approver's token (`message`, its reason).
fn approver_refused(message: &str) -> String {
    format!(
        "{APPROVER_TOKEN} was refused: {}; set it to the token of an approver or an admin of \
         this server",
        clean_line(message)
    )
}

/// Warnings and errors on standard error (standard output is the protocol's).
fn init_logs() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("HOLDPOINT_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .try_init();
}
