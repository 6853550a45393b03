//! `holdpoint worlds`, `agents` and `chats`: creating, listing, changing and deleting them from
//! the terminal, through the same API the web UI uses.

use std::collections::BTreeMap;

use clap::{Args, Subcommand};
use holdpoint_protocol::{
    Agent, AgentChanges, Chat, ChatChanges, LlmSettings, NewAgent, NewChat, NewWorld,
    UpstreamConfig, World, WorldChanges,
};

use super::{Common, runtime};
use crate::Failure;
use crate::client::Client;
use crate::connect::client_failure;
use crate::decide::learn_agents;
use crate::present::{self, AgentNames};
use crate::terminal::safe::clean_line;

#[derive(Subcommand)]
pub enum WorldsCommand {
    /// List the worlds this token may use.
    #[command(after_help = "Example:\n  holdpoint worlds list")]
    List(Common),
    /// Create a world (admins).
    #[command(after_help = "Example:\n  holdpoint worlds create lab --description 'experiments'")]
    Create {
        /// Unique among worlds.
        name: String,
        #[arg(long)]
        description: Option<String>,
        #[command(flatten)]
        common: Common,
    },
    /// Rename a world or change its description (admins).
    #[command(after_help = "Example:\n  holdpoint worlds change lab --name research")]
    Change {
        /// The world (name or id).
        world: String,
        #[arg(long)]
        name: Option<String>,
        #[arg(long)]
        description: Option<String>,
        #[command(flatten)]
        common: Common,
    },
    /// Delete a world with its agents and chats (admins; refused while a turn runs in it).
    #[command(after_help = "Example:\n  holdpoint worlds delete lab")]
    Delete {
        /// The world (name or id).
        world: String,
        #[command(flatten)]
        common: Common,
    },
    /// A world's own MCP servers, whose tools its agents (and `holdpoint mcp --world`) get.
    #[command(
        subcommand,
        after_help = "Examples:\n  holdpoint worlds mcp list lab\n  holdpoint worlds mcp add lab fs --command mcp-server-filesystem --arg /srv/lab\n  holdpoint worlds mcp remove lab fs"
    )]
    Mcp(WorldMcpCommand),
    /// A world's own remote A2A agents, which its agents call as `a2a__NAME` (docs/a2a.md).
    #[command(
        subcommand,
        after_help = "Examples:
  holdpoint worlds a2a list lab
  holdpoint worlds a2a add lab bank --url https://bank.example/ --bearer-env BANK_TOKEN
  holdpoint worlds a2a remove lab bank"
    )]
    A2a(super::world_a2a::WorldA2aCommand),
    /// A world's own notice routes: who its holds are sent to by email and Slack, beside the
    /// configuration file's (docs/channels.md).
    #[command(
        subcommand,
        after_help = "Examples:
  holdpoint worlds routes list lab
  holdpoint worlds routes set lab routes.json
  holdpoint worlds routes clear lab"
    )]
    Routes(super::world_routes::WorldRoutesCommand),
}

#[derive(Subcommand)]
pub enum WorldMcpCommand {
    /// List the world's own MCP servers (the values of env and headers are hidden).
    #[command(after_help = "Example:\n  holdpoint worlds mcp list lab")]
    List {
        /// The world (name or id).
        world: String,
        #[command(flatten)]
        common: Common,
    },
    /// Add an MCP server to the world, or replace the one of that name (admins).
    #[command(
        after_help = "Examples:\n  holdpoint worlds mcp add lab fs --command npx --arg -y --arg @modelcontextprotocol/server-filesystem --arg /srv/lab \\\n      --tool read_text_file --tool write_file --require-approval write_file\n  holdpoint worlds mcp add lab github --url https://api.githubcopilot.com/mcp/ --header 'Authorization=Bearer ghp_…'\n  holdpoint worlds mcp add lab gh --command github-mcp-server --arg stdio --env GITHUB_TOKEN   (its value from this environment)\n\n\
Its tools are offered as NAME__tool. A name the configuration file uses too is the world's in this world."
    )]
    Add {
        /// The world (name or id).
        world: String,
        /// The server's name: letters, digits, - and _ (no __).
        name: String,
        #[command(flatten)]
        server: Box<McpServerArgs>,
        #[command(flatten)]
        common: Common,
    },
    /// Remove one of the world's MCP servers (admins); its connection is closed.
    #[command(after_help = "Example:\n  holdpoint worlds mcp remove lab fs")]
    Remove {
        /// The world (name or id).
        world: String,
        /// The server's name.
        name: String,
        #[command(flatten)]
        common: Common,
    },
}

/// An MCP server, as flags.
#[derive(Args)]
pub struct McpServerArgs {
    /// stdio: the program to start.
    #[arg(long, conflicts_with = "url")]
    command: Option<String>,
    /// stdio: an argument of the program (repeat).
    #[arg(long = "arg", value_name = "ARG", allow_hyphen_values = true)]
    args: Vec<String>,
    /// stdio: a variable for the program, KEY=VALUE, or KEY alone for this environment's
    /// value of KEY (repeat).
    #[arg(long = "env", value_name = "KEY[=VALUE]")]
    env: Vec<String>,
    /// Streamable HTTP: the endpoint.
    #[arg(long)]
    url: Option<String>,
    /// Streamable HTTP: a header sent with every request, NAME=VALUE (repeat).
    #[arg(long = "header", value_name = "NAME=VALUE")]
    headers: Vec<String>,
    /// A tool offered, by its name on the server (repeat; without any, every tool).
    #[arg(long = "tool", value_name = "TOOL")]
    tools: Vec<String>,
    /// A tool whose every call needs a person (repeat; must be among --tool when given).
    #[arg(long = "require-approval", value_name = "TOOL")]
    require_approval: Vec<String>,
    /// How long one call may wait for the server ("60s", "5m"; 100ms to 24h; 60s by default).
    #[arg(long, value_name = "DURATION")]
    call_timeout: Option<String>,
    /// The largest message the server may send ("1MiB", "512KiB", or bytes; 64KiB to 256MiB;
    /// 1MiB by default).
    #[arg(long, value_name = "SIZE")]
    max_message_size: Option<String>,
}

impl McpServerArgs {
    fn config(self) -> Result<UpstreamConfig, Failure> {
        let mut env = BTreeMap::new();
        for entry in self.env {
            let (key, value) = match entry.split_once('=') {
                Some((k, v)) => (k.to_owned(), v.to_owned()),
                None => {
                    let value = std::env::var(&entry).map_err(|_| {
                        Failure::Usage(format!(
                            "--env {entry}: no value given and ${entry} is not set here"
                        ))
                    })?;
                    (entry, value)
                }
            };
            env.insert(key, value);
        }
        let mut headers = BTreeMap::new();
        for entry in self.headers {
            let Some((name, value)) = entry.split_once('=') else {
                return Err(Failure::Usage(format!(
                    "--header {entry:?}: write it as NAME=VALUE"
                )));
            };
            headers.insert(name.trim().to_owned(), value.trim().to_owned());
        }
        Ok(UpstreamConfig {
            command: self.command,
            args: self.args,
            env,
            url: self.url,
            headers,
            tools: (!self.tools.is_empty()).then_some(self.tools),
            require_approval: self.require_approval,
            call_timeout: self.call_timeout,
            max_message_size: self.max_message_size,
        })
    }
}

#[derive(Subcommand)]
pub enum AgentsCommand {
    /// List a world's agents.
    #[command(after_help = "Example:\n  holdpoint agents list lab")]
    List {
        /// The world (name or id).
        world: String,
        #[command(flatten)]
        common: Common,
    },
    /// Create an agent on any OpenAI-compatible endpoint (admins).
    #[command(
        after_help = "Examples:\n  holdpoint agents create lab helper --base-url https://api.openai.com/v1 --model gpt-4o-mini --api-key-env OPENAI_API_KEY\n  holdpoint agents create lab local --base-url http://localhost:11434/v1 --model llama3.1 --tool read_file --tool shell_cmd"
    )]
    Create {
        /// The world (name or id).
        world: String,
        /// Unique within the world.
        name: String,
        #[command(flatten)]
        settings: AgentSettings,
        #[command(flatten)]
        common: Common,
    },
    /// Change an agent; what is not given stays (admins).
    #[command(
        after_help = "Example:\n  holdpoint agents change lab helper --model gpt-4o --max-steps 40"
    )]
    Change {
        /// The world (name or id).
        world: String,
        /// The agent (name or id).
        agent: String,
        /// A new name.
        #[arg(long)]
        name: Option<String>,
        #[command(flatten)]
        settings: AgentSettings,
        #[command(flatten)]
        common: Common,
    },
    /// Delete an agent (admins; refused while chats use it).
    #[command(after_help = "Example:\n  holdpoint agents delete lab helper")]
    Delete {
        /// The world (name or id).
        world: String,
        /// The agent (name or id).
        agent: String,
        #[command(flatten)]
        common: Common,
    },
}

/// An agent's settings, as flags; each is optional so that `change` can leave it alone.
#[derive(Args)]
pub struct AgentSettings {
    /// The LLM endpoint, up to the API version (`https://api.openai.com/v1`).
    #[arg(long)]
    base_url: Option<String>,
    #[arg(long)]
    model: Option<String>,
    /// The environment variable of the server that holds the API key (never the key itself).
    #[arg(long, value_name = "VAR")]
    api_key_env: Option<String>,
    /// The agent's instructions.
    #[arg(long, value_name = "TEXT")]
    system_prompt: Option<String>,
    /// A tool it may call, by name or glob (repeat; without any, every built-in tool).
    #[arg(long = "tool", value_name = "TOOL")]
    tools: Vec<String>,
    /// LLM calls per turn before the turn ends.
    #[arg(long, value_parser = |t: &str| super::number_between(t, 1, u32::MAX))]
    max_steps: Option<u32>,
}

#[derive(Subcommand)]
pub enum ChatsCommand {
    /// List a world's chats.
    #[command(after_help = "Example:\n  holdpoint chats list lab")]
    List {
        /// The world (name or id).
        world: String,
        #[command(flatten)]
        common: Common,
    },
    /// Start a chat with one of the world's agents (then `holdpoint chat WORLD --chat ID`).
    #[command(
        after_help = "Example:\n  holdpoint chats create lab --agent helper --title 'release notes'"
    )]
    Create {
        /// The world (name or id).
        world: String,
        /// The agent (name or id).
        #[arg(long)]
        agent: String,
        #[arg(long)]
        title: Option<String>,
        #[command(flatten)]
        common: Common,
    },
    /// Rename a chat, or hand it to another of the world's agents.
    #[command(
        after_help = "Examples:\n  holdpoint chats change lab 0193c2a4-… --title 'release 2'\n  holdpoint chats change lab 0193c2a4-… --agent reviewer   (refused while a turn runs)"
    )]
    Change {
        /// The world (name or id).
        world: String,
        /// The chat's id.
        chat: String,
        #[arg(long)]
        title: Option<String>,
        /// The agent (name or id) that answers from the next message on.
        #[arg(long)]
        agent: Option<String>,
        #[command(flatten)]
        common: Common,
    },
    /// Delete a chat with its messages (refused while a turn runs in it).
    #[command(after_help = "Example:\n  holdpoint chats delete lab 0193c2a4-…")]
    Delete {
        /// The world (name or id).
        world: String,
        /// The chat's id.
        chat: String,
        #[command(flatten)]
        common: Common,
    },
}

pub fn worlds(cmd: WorldsCommand) -> Result<(), Failure> {
    runtime()?.block_on(async move {
        match cmd {
            WorldsCommand::List(common) => {
                let worlds = common.client()?.worlds().await;
                let worlds = worlds.map_err(client_failure)?;
                common.show_all(&worlds, "No worlds.", world_line)
            }
            WorldsCommand::Create {
                name,
                description,
                common,
            } => {
                let body = NewWorld {
                    name,
                    description,
                    ..Default::default()
                };
                let w = common.client()?.create_world(&body).await;
                let w = w.map_err(client_failure)?;
                common.show(&w, world_line)
            }
            WorldsCommand::Change {
                world,
                name,
                description,
                common,
            } => {
                let body = WorldChanges {
                    name,
                    description,
                    ..Default::default()
                };
                let w = common.client()?.update_world(&world, &body).await;
                let w = w.map_err(client_failure)?;
                common.show(&w, world_line)
            }
            WorldsCommand::Delete { world, common } => {
                let done = common.client()?.delete_world(&world).await;
                common.deleted(done, &format!("world {world}"))
            }
            WorldsCommand::Mcp(cmd) => world_mcp(cmd).await,
            WorldsCommand::A2a(cmd) => super::world_a2a::run(cmd).await,
            WorldsCommand::Routes(cmd) => super::world_routes::run(cmd).await,
        }
    })
}

async fn world_mcp(cmd: WorldMcpCommand) -> Result<(), Failure> {
    match cmd {
        WorldMcpCommand::List { world, common } => {
            let w = common.client()?.world(&world).await;
            let w = w.map_err(client_failure)?;
            if common.json {
                return super::print_json(&w.mcp_servers);
            }
            if w.mcp_servers.is_empty() {
                println!("No MCP servers of its own.");
            }
            for (name, server) in &w.mcp_servers {
                println!("{}", mcp_server_line(name, server));
            }
            Ok(())
        }
        WorldMcpCommand::Add {
            world,
            name,
            server,
            common,
        } => {
            let server = server.config()?;
            let body = WorldChanges {
                mcp_servers: Some(BTreeMap::from([(name.clone(), Some(server))])),
                ..Default::default()
            };
            let w = common.client()?.update_world(&world, &body).await;
            let w = w.map_err(client_failure)?;
            let Some(server) = w.mcp_servers.get(&name) else {
                return Err(Failure::Check(format!(
                    "the server did not keep MCP server {name:?}"
                )));
            };
            if common.json {
                return super::print_json(server);
            }
            println!("{}", mcp_server_line(&name, server));
            Ok(())
        }
        WorldMcpCommand::Remove {
            world,
            name,
            common,
        } => {
            let client = common.client()?;
            let w = client.world(&world).await.map_err(client_failure)?;
            if !w.mcp_servers.contains_key(&name) {
                let known = w.mcp_servers.keys();
                return Err(super::no_entry(
                    &w.name,
                    "MCP server",
                    "servers",
                    &name,
                    known,
                ));
            }
            let body = WorldChanges {
                mcp_servers: Some(BTreeMap::from([(name.clone(), None)])),
                ..Default::default()
            };
            let done = client.update_world(&world, &body).await.map(drop);
            common.deleted(done, &format!("MCP server {name} of world {world}"))
        }
    }
}

pub fn agents(cmd: AgentsCommand) -> Result<(), Failure> {
    runtime()?.block_on(async move {
        match cmd {
            AgentsCommand::List { world, common } => {
                let agents = common.client()?.agents(&world).await;
                let agents = agents.map_err(client_failure)?;
                common.show_all(&agents, "No agents.", agent_line)
            }
            AgentsCommand::Create {
                world,
                name,
                settings,
                common,
            } => {
                let (Some(base_url), Some(model)) = (settings.base_url, settings.model) else {
                    return Err(Failure::Usage(
                        "an agent needs --base-url and --model (its LLM endpoint)".into(),
                    ));
                };
                let body = NewAgent {
                    name,
                    llm: LlmSettings {
                        base_url,
                        model,
                        api_key_env: settings.api_key_env,
                        headers: Default::default(),
                        temperature: None,
                    },
                    system_prompt: settings.system_prompt.unwrap_or_default(),
                    tools: (!settings.tools.is_empty()).then_some(settings.tools),
                    max_steps: settings.max_steps,
                };
                let a = common.client()?.create_agent(&world, &body).await;
                let a = a.map_err(client_failure)?;
                common.show(&a, agent_line)
            }
            AgentsCommand::Change {
                world,
                agent,
                name,
                settings,
                common,
            } => {
                let client = common.client()?;
                let llm = if settings.base_url.is_some()
                    || settings.model.is_some()
                    || settings.api_key_env.is_some()
                {
                    // The LLM settings change as a whole: start from the agent's own.
                    let current = client.agent(&world, &agent).await;
                    let current = current.map_err(client_failure)?;
                    let mut llm = current.llm;
                    llm.base_url = settings.base_url.unwrap_or(llm.base_url);
                    llm.model = settings.model.unwrap_or(llm.model);
                    llm.api_key_env = settings.api_key_env.or(llm.api_key_env);
                    Some(llm)
                } else {
                    None
                };
                let body = AgentChanges {
                    name,
                    llm,
                    system_prompt: settings.system_prompt,
                    tools: (!settings.tools.is_empty()).then_some(settings.tools),
                    max_steps: settings.max_steps,
                };
                let a = client.update_agent(&world, &agent, &body).await;
                let a = a.map_err(client_failure)?;
                common.show(&a, agent_line)
            }
            AgentsCommand::Delete {
                world,
                agent,
                common,
            } => {
                let done = common.client()?.delete_agent(&world, &agent).await;
                common.deleted(done, &format!("agent {agent}"))
            }
        }
    })
}

pub fn chats(cmd: ChatsCommand) -> Result<(), Failure> {
    runtime()?.block_on(async move {
        match cmd {
            ChatsCommand::List { world, common } => {
                let client = common.client()?;
                let chats = client.chats(&world).await.map_err(client_failure)?;
                show_chats(&common, &client, &world, &chats).await
            }
            ChatsCommand::Create {
                world,
                agent,
                title,
                common,
            } => {
                let body = NewChat { agent, title };
                let client = common.client()?;
                let chat = client.create_chat(&world, &body).await;
                let chat = chat.map_err(client_failure)?;
                if common.json {
                    return super::print_json(&chat);
                }
                show_chats(&common, &client, &world, &[chat]).await
            }
            ChatsCommand::Change {
                world,
                chat,
                title,
                agent,
                common,
            } => {
                let body = ChatChanges { title, agent };
                let client = common.client()?;
                let chat = client.update_chat(&world, &chat, &body).await;
                let chat = chat.map_err(client_failure)?;
                if common.json {
                    return super::print_json(&chat);
                }
                show_chats(&common, &client, &world, &[chat]).await
            }
            ChatsCommand::Delete {
                world,
                chat,
                common,
            } => {
                let done = common.client()?.delete_chat(&world, &chat).await;
                common.deleted(done, &format!("chat {chat}"))
            }
        }
    })
}

fn world_line(w: &World) -> String {
    let description = w
        .description
        .as_deref()
        .map(|d| format!("  {}", present::short(d, 60)))
        .unwrap_or_default();
    format!("{}  {}{description}", w.id, clean_line(&w.name))
}

/// One MCP server on a line: how it is reached, its tools and what needs approval. The
/// values of env and headers arrive hidden.
fn mcp_server_line(name: &str, s: &UpstreamConfig) -> String {
    let pairs = |m: &BTreeMap<String, String>| {
        m.iter()
            .map(|(k, v)| format!(" {k}={v}"))
            .collect::<String>()
    };
    let reach = match (&s.command, &s.url) {
        (Some(command), _) => format!(
            "{command}{}{}",
            s.args.iter().map(|a| format!(" {a}")).collect::<String>(),
            if s.env.is_empty() {
                String::new()
            } else {
                format!("  env:{}", pairs(&s.env))
            }
        ),
        (None, Some(url)) => format!(
            "{url}{}",
            if s.headers.is_empty() {
                String::new()
            } else {
                format!("  headers:{}", pairs(&s.headers))
            }
        ),
        (None, None) => String::new(),
    };
    let tools = match &s.tools {
        Some(tools) => tools.join(", "),
        None => "all".into(),
    };
    let approval = if s.require_approval.is_empty() {
        String::new()
    } else {
        format!("  require approval: {}", s.require_approval.join(", "))
    };
    clean_line(&format!("{name}  {reach}  tools: {tools}{approval}"))
}

fn agent_line(a: &Agent) -> String {
    format!(
        "{}  {}  {} at {}",
        a.id,
        clean_line(&a.name),
        clean_line(&a.llm.model),
        clean_line(&a.llm.base_url)
    )
}

/// Chats, a line each, their agents by name (a JSON array with `--json`).
async fn show_chats(
    common: &Common,
    client: &Client,
    world: &str,
    chats: &[Chat],
) -> Result<(), Failure> {
    if common.json {
        return super::print_json(&chats);
    }
    if chats.is_empty() {
        println!("No chats.");
        return Ok(());
    }
    let mut agents = AgentNames::default();
    learn_agents(client, world, &mut agents).await;
    for c in chats {
        println!("{}", chat_line(c, &agents));
    }
    Ok(())
}

fn chat_line(c: &Chat, agents: &AgentNames) -> String {
    format!(
        "{}  {}  (agent {})",
        c.id,
        clean_line(&c.title),
        agents.agent(&c.agent.to_string())
    )
}
