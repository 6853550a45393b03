//! A whole server on a data directory: the listening socket, the store (SQLite in the data
//! directory, or the PostgreSQL database of `store.url`), the engine,
//! the agent runtime (resuming turns), the first admin token, and the HTTP service.

use std::net::SocketAddr;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use holdpoint_agent::{Runtime, RuntimeConfig, ShellLimits};
use holdpoint_core::lease::Node;
use holdpoint_core::policy::Policy;
use holdpoint_core::record::Records;
use holdpoint_core::{Engine, HumanChannel, PendingLimits};
use holdpoint_llm::{LlmClient, Timeouts};
use holdpoint_store::Database;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::app::{App, ServerConfig};
use crate::config::Settings;
use crate::datadir;
use crate::mcp::{AgentTools, McpServers};

/// The file, in the data directory, that holds the first admin token.
pub const ADMIN_TOKEN_FILE: &str = "admin-token";

/// Why a server did not start. Each names what to change.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("policy file {path}: {message}")]
    Policy { path: PathBuf, message: String },
    #[error(
        "cannot listen on {addr}: {source} (is another server running there? choose another with --bind)"
    )]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("{0}")]
    Store(#[from] holdpoint_store::OpenError),
    #[error("{0}")]
    Start(String),
}

/// People answer holds through the API, the live event stream and the web interface: the
/// server itself is the channel that reaches them.
struct Inbox;

impl HumanChannel for Inbox {
    fn name(&self) -> &str {
        "inbox"
    }
}

/// Connections the kernel completes and queues for accept: room for a burst of thousands
/// (Linux caps it at `net.core.somaxconn`, 4096 by default), where a full queue would make
/// new clients wait seconds for their handshake to be retried.
const BACKLOG: u32 = 4096;

/// Listens on `addr` with [`BACKLOG`] (tokio's own bind asks for 1024).
fn listen(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    // As tokio's bind does: a restarted server may listen again at once.
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(BACKLOG)
}

/// Reads a policy file.
pub fn load_policy(path: &Path) -> Result<Policy, LaunchError> {
    let fail = |message: String| LaunchError::Policy {
        path: path.to_path_buf(),
        message,
    };
    let text = std::fs::read_to_string(path).map_err(|e| fail(format!("cannot read it: {e}")))?;
    Policy::from_toml(&text).map_err(|e| fail(e.to_string()))
}

/// A running server.
pub struct Server {
    addr: SocketAddr,
    app: App,
    database: Database,
    admin_token: Option<String>,
    admin_token_file: PathBuf,
    stop: CancellationToken,
    task: JoinHandle<std::io::Result<()>>,
}

impl Server {
    /// Starts serving `data_dir` as `settings` say. Nothing is opened when the address is
    /// taken or the policy is invalid.
    pub async fn start(data_dir: &Path, settings: &Settings) -> Result<Server, LaunchError> {
        let policy = match &settings.policy.file {
            Some(path) => load_policy(path)?,
            None => Policy::default(),
        };
        let bind = settings.server.bind;
        let listener = listen(bind).map_err(|source| LaunchError::Bind { addr: bind, source })?;
        let addr = listener
            .local_addr()
            .map_err(|source| LaunchError::Bind { addr: bind, source })?;
        // The data directory holds the audit log, the admin token and webhooks' signing
        // secrets: its owner's only, and so is every file in it, whatever modes an older
        // version or another program left.
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(data_dir)
            .map_err(|e| {
                LaunchError::Start(format!(
                    "cannot create the data directory {}: {e}",
                    data_dir.display()
                ))
            })?;
        datadir::make_private(data_dir)?;
        let database = Database::open(settings.store.url.as_deref(), data_dir).await?;
        // SQLite made its files with the umask's modes (its journals take the database's).
        datadir::make_private(data_dir)?;
        let worlds_dir = data_dir.join("worlds");
        if matches!(database, Database::Postgres(_)) {
            datadir::check_shared(&Records::new(database.store()), &worlds_dir).await?;
        }
        let engine = Engine::builder(database.store())
            .policy(policy)
            .pending_limits(PendingLimits {
                per_world: Some(settings.limits.pending_holds_per_world),
                per_raiser: Some(settings.limits.pending_holds_per_token),
            })
            .channel(Arc::new(Inbox))
            .start()
            .await
            .map_err(|e| LaunchError::Start(e.to_string()))?;
        let llm = &settings.llm;
        let timeouts = Timeouts {
            connect: llm.connect_timeout,
            first_byte: llm.first_byte_timeout,
            idle: llm.idle_timeout,
            retries: llm.retries,
            ..Timeouts::default()
        };
        let llm = LlmClient::new(timeouts).map_err(|e| LaunchError::Start(e.to_string()))?;
        let mut runtime_config = RuntimeConfig::new(worlds_dir);
        runtime_config.shell = ShellLimits {
            default_timeout: settings.shell.default_timeout,
            max_timeout: settings.shell.max_timeout,
            max_output: settings.shell.max_output,
        };
        // The MCP servers (the configuration file's and the worlds' own) serve the gateway at
        // /mcp/{world} and the agents' MCP tools.
        let shutdown = CancellationToken::new();
        let mcp = McpServers::new(&settings.mcp, settings.server.max_body, shutdown.clone());
        runtime_config.external_tools = Some(Arc::new(AgentTools(mcp.clone())));
        runtime_config.a2a_agents = settings.a2a.agents.clone();
        // On PostgreSQL other nodes may share the store: turns are leased to one node each.
        let sole = matches!(database, Database::Sqlite(_));
        runtime_config.node = Node::new(settings.server.turn_lease, sole);
        let runtime = Runtime::start(engine, llm, runtime_config)
            .await
            .map_err(|e| LaunchError::Start(e.to_string()))?;

        let config = ServerConfig::new(addr, settings);
        // Email notices of holds; their links' key is kept in the data directory.
        let channels = crate::channels::Channels::new(
            runtime.clone(),
            &settings.channels,
            data_dir,
            shutdown.clone(),
        )
        .map_err(LaunchError::Start)?;
        let app = App::new(runtime, config, mcp, channels, shutdown);
        let admin_token_file = data_dir.join(ADMIN_TOKEN_FILE);
        let admin_token = app
            .credentials()
            .ensure_admin(&admin_token_file)
            .await
            .map_err(|e| LaunchError::Start(e.message))?;
        app.start_background()
            .await
            .map_err(|e| LaunchError::Start(e.message))?;

        let stop = CancellationToken::new();
        let task = tokio::spawn(crate::serve(
            listener,
            app.clone(),
            stop.clone().cancelled_owned(),
        ));
        Ok(Server {
            addr,
            app,
            database,
            admin_token,
            admin_token_file,
            stop,
            task,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The address clients on this machine use (`http://127.0.0.1:7717`).
    pub fn url(&self) -> String {
        let mut addr = self.addr;
        if addr.ip().is_unspecified() {
            addr.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
        }
        format!("http://{addr}")
    }

    pub fn app(&self) -> &App {
        &self.app
    }

    /// The store this server runs on.
    pub fn database(&self) -> &Database {
        &self.database
    }

    /// The first admin token, when its file still holds it.
    pub fn admin_token(&self) -> Option<&str> {
        self.admin_token.as_deref()
    }

    pub fn admin_token_file(&self) -> &Path {
        &self.admin_token_file
    }

    /// The link that signs a browser in as the admin.
    pub fn login_url(&self) -> Option<String> {
        self.admin_token
            .as_ref()
            .map(|t| format!("{}/login?token={t}", self.url()))
    }

    /// Stops taking connections, lets requests in flight finish (long polls and live streams
    /// end at once), then writes out what is queued and closes the store. Turns stay stored
    /// and resume on the next start.
    pub async fn stop(self) -> std::io::Result<()> {
        self.stop.cancel();
        let served = self
            .task
            .await
            .unwrap_or_else(|e| Err(std::io::Error::other(e)));
        self.app.attendance().stopped().await;
        self.app.mcp().close().await;
        self.database.close().await;
        served
    }
}
