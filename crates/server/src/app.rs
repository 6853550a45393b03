//! The server's shared state.

use std::sync::Arc;
use std::time::Duration;

use holdpoint_agent::Runtime;
use holdpoint_core::Engine;
use holdpoint_core::policy::{Policy, PolicyError, PolicyErrors};
use holdpoint_core::record::Records;
use holdpoint_core::store::Store;
use holdpoint_protocol::{Timestamp, World};
use tokio_util::sync::CancellationToken;

use crate::attendance::Attendance;
use crate::auth::{Caller, Credentials, Guard};
use crate::channels::Channels;
use crate::config::{LimitSettings, Settings, WebhookSettings};
use crate::error::ApiError;
use crate::housekeeping::Housekeeping;
use crate::limits::Limiter;
use crate::mcp::McpServers;
use crate::metrics::Metrics;
use crate::webhooks::Webhooks;

#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// `Host` header values the server answers to (`127.0.0.1:7717`, `localhost:7717`, …).
    pub allowed_hosts: Vec<String>,
    /// Largest request body, in bytes.
    pub max_body: usize,
    pub webhooks: WebhookSettings,
    /// The longest `wait` on a hold a client may ask for.
    pub max_wait: Duration,
    /// How long a client may take to send a request's headers.
    pub header_timeout: Duration,
    /// How often an idle live event stream gets a heartbeat.
    pub heartbeat: Duration,
    /// How long the response to a request with an `Idempotency-Key` is kept for its retries.
    pub idempotency_retention: Duration,
    /// The base policy's file, read again on a reload; `None` without one.
    pub policy_file: Option<std::path::PathBuf>,
    /// How long a client may accept none of the bytes it is sent before its connection closes.
    pub send_timeout: Duration,
    /// What one client can make the server hold (`[limits]`).
    pub limits: LimitSettings,
    /// How long a hold that was waited on may go without a waiter before it is withdrawn.
    pub waiter_grace: Duration,
}

impl ServerConfig {
    /// The configuration of a server bound to `addr` with `settings`: its names are the
    /// address itself, `localhost` too for loopback addresses, and `server.allowed_hosts`.
    pub fn new(addr: std::net::SocketAddr, settings: &Settings) -> Self {
        let server = &settings.server;
        let port = addr.port();
        let mut hosts = vec![addr.to_string()];
        if addr.ip().is_loopback() {
            hosts.extend([
                format!("localhost:{port}"),
                format!("127.0.0.1:{port}"),
                format!("[::1]:{port}"),
            ]);
        }
        hosts.extend(server.allowed_hosts.iter().cloned());
        let mut seen = std::collections::HashSet::new();
        hosts.retain(|h| seen.insert(h.clone()));
        ServerConfig {
            allowed_hosts: hosts,
            max_body: server.max_body,
            webhooks: settings.webhooks.clone(),
            max_wait: server.max_wait,
            header_timeout: server.header_timeout,
            heartbeat: server.heartbeat,
            idempotency_retention: server.idempotency_retention,
            policy_file: settings.policy.file.clone(),
            send_timeout: server.send_timeout,
            limits: settings.limits.clone(),
            waiter_grace: server.waiter_grace,
        }
    }
}

/// Cheap to clone.
#[derive(Clone)]
pub struct App {
    inner: Arc<Inner>,
}

struct Inner {
    runtime: Runtime,
    credentials: Credentials,
    guard: Guard,
    config: ServerConfig,
    metrics: Arc<Metrics>,
    webhooks: Webhooks,
    channels: Channels,
    mcp: McpServers,
    limiter: Arc<Limiter>,
    attendance: Attendance,
    shutdown: CancellationToken,
}

impl App {
    /// `shutdown` is canceled when the server stops; `mcp` ends its sessions with it.
    pub(crate) fn new(
        runtime: Runtime,
        config: ServerConfig,
        mcp: McpServers,
        channels: Channels,
        shutdown: CancellationToken,
    ) -> Self {
        let webhooks = Webhooks::new(runtime.clone(), config.webhooks.clone(), shutdown.clone());
        let credentials = Credentials::new(runtime.clone());
        let guard = Guard::new(&config.allowed_hosts, credentials.clone());
        let limiter = Limiter::new(config.limits.clone());
        let attendance = Attendance::new(config.waiter_grace);
        App {
            inner: Arc::new(Inner {
                runtime,
                credentials,
                guard,
                config,
                metrics: Arc::default(),
                webhooks,
                channels,
                mcp,
                limiter,
                attendance,
                shutdown,
            }),
        }
    }

    pub fn runtime(&self) -> &Runtime {
        &self.inner.runtime
    }

    pub fn engine(&self) -> &Engine {
        self.inner.runtime.engine()
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        self.engine().store()
    }

    /// The runtime's typed records, which tokens, sessions and webhooks are kept in too.
    pub fn records(&self) -> &Records {
        self.runtime().records()
    }

    /// Tokens and browser sessions.
    pub fn credentials(&self) -> &Credentials {
        &self.inner.credentials
    }

    pub fn config(&self) -> &ServerConfig {
        &self.inner.config
    }

    /// Reads the base policy file again and, when it is valid, puts it in force (a changed
    /// text is recorded as `who`'s change). An invalid or unreadable file changes nothing.
    pub async fn reload_policy(
        &self,
        who: holdpoint_protocol::Actor,
    ) -> Result<holdpoint_protocol::PolicyReloaded, ApiError> {
        let Some(path) = &self.inner.config.policy_file else {
            return Err(ApiError::new(
                axum::http::StatusCode::CONFLICT,
                "no_policy_file",
                "the server runs without a policy file (policy.file): there is nothing to reload",
            ));
        };
        let text = std::fs::read_to_string(path).map_err(|e| {
            ApiError::invalid_policy(&PolicyErrors(vec![PolicyError {
                path: String::new(),
                message: format!("cannot read {}: {e}", path.display()),
            }]))
        })?;
        let policy = Policy::from_toml(&text).map_err(|e| ApiError::invalid_policy(&e))?;
        Ok(self.engine().reload_policy(who, policy).await?)
    }

    pub fn metrics(&self) -> &Metrics {
        &self.inner.metrics
    }

    /// The counters behind `[limits]`.
    pub(crate) fn limiter(&self) -> &Arc<Limiter> {
        &self.inner.limiter
    }

    /// The holds waited on through this node.
    pub(crate) fn attendance(&self) -> &Attendance {
        &self.inner.attendance
    }

    /// Webhook subscriptions and their deliveries.
    pub(crate) fn webhooks(&self) -> &Webhooks {
        &self.inner.webhooks
    }

    /// Notices of holds by email, and their decision links.
    pub(crate) fn channels(&self) -> &Channels {
        &self.inner.channels
    }

    /// The MCP servers behind the gateway, and the gateway's HTTP sessions.
    pub(crate) fn mcp(&self) -> &McpServers {
        &self.inner.mcp
    }

    /// What housekeeping deletes, and after how long.
    pub fn housekeeping(&self) -> Housekeeping {
        Housekeeping {
            engine: self.engine().clone(),
            credentials: self.credentials().clone(),
            webhooks: self.webhooks().clone(),
            idempotency_retention: self.config().idempotency_retention,
            keep_deliveries: self.config().webhooks.keep_deliveries,
        }
    }

    /// Cancelled when the server stops: long polls and live streams end.
    pub fn shutdown(&self) -> &CancellationToken {
        &self.inner.shutdown
    }

    pub fn now(&self) -> Timestamp {
        self.engine().clock().now()
    }

    /// A world (by id or name) the caller may use; others look like worlds that do not exist.
    pub async fn world(&self, caller: &Caller, id_or_name: &str) -> Result<World, ApiError> {
        let world = self.runtime().find_world(id_or_name).await?;
        match caller.world {
            Some(allowed) if allowed != world.id => {
                Err(ApiError::not_found("world", format!("{id_or_name:?}")))
            }
            _ => Ok(world),
        }
    }

    /// Starts the background work: metrics and revocations from the event log, webhook
    /// deliveries, housekeeping.
    pub async fn start_background(&self) -> Result<(), ApiError> {
        crate::metrics::follow(
            self.engine().clone(),
            self.inner.metrics.clone(),
            self.shutdown().clone(),
        )
        .await?;
        self.credentials()
            .ends()
            .follow(
                self.engine(),
                self.credentials().clone(),
                self.shutdown().clone(),
            )
            .await?;
        self.mcp()
            .follow(self.engine(), self.shutdown().clone())
            .await?;
        self.webhooks().start().await?;
        self.inner.channels.start().await?;
        self.attendance().start(
            self.engine().clone(),
            self.records().clone(),
            self.shutdown().clone(),
        );
        self.housekeeping().start(self.shutdown().clone());
        Ok(())
    }
}

/// The request counters' state, from the App's.
impl axum::extract::FromRef<App> for Arc<Metrics> {
    fn from_ref(app: &App) -> Arc<Metrics> {
        app.inner.metrics.clone()
    }
}

/// The guard middleware's state, from the App's.
impl axum::extract::FromRef<App> for Guard {
    fn from_ref(app: &App) -> Guard {
        app.inner.guard.clone()
    }
}

/// The rate limiting middleware's state, from the App's.
impl axum::extract::FromRef<App> for Arc<Limiter> {
    fn from_ref(app: &App) -> Arc<Limiter> {
        app.inner.limiter.clone()
    }
}
