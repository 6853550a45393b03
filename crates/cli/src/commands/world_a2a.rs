//! `holdpoint worlds a2a`: a world's own remote A2A agents (`a2a_agents`), which its agents
//! call as `a2a__NAME`, listed, added and removed through the API, as `worlds mcp` does for
//! MCP servers. The configuration file's (`[a2a.agents.NAME]`) are offered to every world
//! beside them.

use std::collections::BTreeMap;

use clap::{Args, Subcommand};
use holdpoint_protocol::{RemoteAgentConfig, WorldChanges};

use super::Common;
use crate::Failure;
use crate::connect::client_failure;
use crate::terminal::safe::clean_line;

#[derive(Subcommand)]
pub enum WorldA2aCommand {
    /// List the world's own remote A2A agents (the values of headers are hidden).
    #[command(after_help = "Example:\n  holdpoint worlds a2a list lab")]
    List {
        /// The world (name or id).
        world: String,
        #[command(flatten)]
        common: Common,
    },
    /// Add a remote A2A agent to the world, or replace the one of that name (admins).
    #[command(
        after_help = "Examples:\n  holdpoint worlds a2a add lab bank --url https://bank.example/ --bearer-env BANK_TOKEN\n  holdpoint worlds a2a add lab shop --url https://holdpoint.example/a2a/shop/clerk --bearer-env SHOP_APPROVER_TOKEN --timeout 5m\n  holdpoint worlds a2a add lab research --agent researcher   (an agent of the same world)\n\n\
Its agents call it as the tool a2a__NAME. A name the configuration file uses too is the world's in this world. To call another Holdpoint's agent, send an approver's token: the person's decisions in this chat go back with it, and an agent's token never decides."
    )]
    Add {
        /// The world (name or id).
        world: String,
        /// The agent's name: letters, digits, - and _ (no __).
        name: String,
        #[command(flatten)]
        remote: RemoteArgs,
        #[command(flatten)]
        common: Common,
    },
    /// Remove one of the world's remote A2A agents (admins).
    #[command(after_help = "Example:\n  holdpoint worlds a2a remove lab bank")]
    Remove {
        /// The world (name or id).
        world: String,
        /// The agent's name.
        name: String,
        #[command(flatten)]
        common: Common,
    },
}

/// A remote A2A agent, as flags.
#[derive(Args)]
pub struct RemoteArgs {
    /// Its Agent Card's URL, or its base URL (the card is read at /.well-known/agent-card.json).
    #[arg(long, conflicts_with = "agent", required_unless_present = "agent")]
    url: Option<String>,
    /// Instead of a URL: an agent of the same world (name or id), called without HTTP.
    #[arg(long)]
    agent: Option<String>,
    /// A header sent with every request, NAME=VALUE (repeat).
    #[arg(long = "header", value_name = "NAME=VALUE")]
    headers: Vec<String>,
    /// Sends `Authorization: Bearer <the value of VAR in this environment>`, so the token is
    /// not on the command line.
    #[arg(long, value_name = "VAR")]
    bearer_env: Option<String>,
    /// How long it may take over one request ("120s", "5m"; 1s to 24h; 120s by default).
    #[arg(long, value_name = "DURATION")]
    timeout: Option<String>,
}

impl RemoteArgs {
    fn config(self) -> Result<RemoteAgentConfig, Failure> {
        let mut headers = BTreeMap::new();
        for entry in self.headers {
            let Some((name, value)) = entry.split_once('=') else {
                return Err(Failure::Usage(format!(
                    "--header {entry:?}: write it as NAME=VALUE"
                )));
            };
            headers.insert(name.trim().to_owned(), value.trim().to_owned());
        }
        if let Some(var) = self.bearer_env {
            let token = std::env::var(&var).map_err(|_| {
                Failure::Usage(format!("--bearer-env {var}: ${var} is not set here"))
            })?;
            headers.insert("Authorization".into(), format!("Bearer {}", token.trim()));
        }
        Ok(RemoteAgentConfig {
            url: self.url,
            agent: self.agent,
            headers,
            timeout: self.timeout,
        })
    }
}

pub async fn run(cmd: WorldA2aCommand) -> Result<(), Failure> {
    match cmd {
        WorldA2aCommand::List { world, common } => {
            let w = common.client()?.world(&world).await;
            let w = w.map_err(client_failure)?;
            if common.json {
                return super::print_json(&w.a2a_agents);
            }
            if w.a2a_agents.is_empty() {
                println!("No remote A2A agents of its own.");
            }
            for (name, remote) in &w.a2a_agents {
                println!("{}", line(name, remote));
            }
            Ok(())
        }
        WorldA2aCommand::Add {
            world,
            name,
            remote,
            common,
        } => {
            let body = WorldChanges {
                a2a_agents: Some(BTreeMap::from([(name.clone(), Some(remote.config()?))])),
                ..Default::default()
            };
            let w = common.client()?.update_world(&world, &body).await;
            let w = w.map_err(client_failure)?;
            let Some(remote) = w.a2a_agents.get(&name) else {
                return Err(Failure::Check(format!(
                    "the server did not keep remote agent {name:?}"
                )));
            };
            if common.json {
                return super::print_json(remote);
            }
            println!("{}", line(&name, remote));
            Ok(())
        }
        WorldA2aCommand::Remove {
            world,
            name,
            common,
        } => {
            let client = common.client()?;
            let w = client.world(&world).await.map_err(client_failure)?;
            if !w.a2a_agents.contains_key(&name) {
                let known = w.a2a_agents.keys();
                return Err(super::no_entry(
                    &w.name,
                    "remote A2A agent",
                    "agents",
                    &name,
                    known,
                ));
            }
            let body = WorldChanges {
                a2a_agents: Some(BTreeMap::from([(name.clone(), None)])),
                ..Default::default()
            };
            let done = client.update_world(&world, &body).await.map(drop);
            common.deleted(done, &format!("remote A2A agent {name} of world {world}"))
        }
    }
}

/// One remote agent on a line: its name, where it is, its headers (hidden by the server) and
/// its timeout.
fn line(name: &str, r: &RemoteAgentConfig) -> String {
    let reach = match (&r.url, &r.agent) {
        (Some(url), _) => url.clone(),
        (None, Some(agent)) => format!("agent {agent}"),
        (None, None) => String::new(),
    };
    let headers: String = r.headers.iter().map(|(k, v)| format!(" {k}={v}")).collect();
    let headers = if headers.is_empty() {
        String::new()
    } else {
        format!("  headers:{headers}")
    };
    let timeout = r
        .timeout
        .as_deref()
        .map(|t| format!("  timeout: {t}"))
        .unwrap_or_default();
    clean_line(&format!("a2a__{name}  {reach}{headers}{timeout}"))
}
