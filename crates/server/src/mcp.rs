//! The MCP servers behind the gateway that `/mcp/{world}` serves and behind the agents' MCP
//! tools, and the sessions of that endpoint.
//!
//! The configuration file's servers are connected once when the server starts and shared by
//! every world that has no servers of its own. A world with servers of its own (its
//! `mcp_servers`) gets a set of its own: the file's servers and its own (a name in both is the
//! world's), connected when the world first needs them (an agent's turn, a gateway session),
//! since starting servers may take seconds and most worlds may never use them. That set is
//! rebuilt when the world's servers change: the old connections are closed (stdio servers
//! exit) and the next use connects to the servers as they are now. Changes and deletions are
//! read from the event log, so every node closes what it holds, whichever node was asked.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use async_trait::async_trait;
use holdpoint_agent::ExternalTools;
use holdpoint_mcp::{FIRST_LIST_PATIENCE, HttpGateway, McpSettings, UpstreamConfig, Upstreams};
use holdpoint_protocol::{EventPayload, McpCallOutput, McpToolInfo, World, WorldId};
use parking_lot::Mutex;
use serde_json::Value;
use tokio::sync::OnceCell;
use tokio_util::sync::CancellationToken;

/// The upstream MCP servers and the HTTP gateway's sessions. Cheap to clone.
#[derive(Clone)]
pub struct McpServers {
    /// The configuration file's `[mcp.servers]`.
    file: Arc<McpSettings>,
    /// Their connections, shared by the worlds without servers of their own; made at first
    /// use, so a server that is slow to start delays neither `holdpoint serve`'s start nor
    /// a process (`holdpoint mcp`, `holdpoint chat`) that runs Holdpoint only to reach it.
    configured: Arc<OnceCell<Arc<Upstreams>>>,
    /// The sets of the worlds with servers of their own, by world.
    worlds: Arc<Mutex<HashMap<WorldId, Arc<WorldSet>>>>,
    http: HttpGateway,
}

/// A world's own set: the servers it was made of, connected at first use.
struct WorldSet {
    servers: BTreeMap<String, UpstreamConfig>,
    upstreams: OnceCell<Arc<Upstreams>>,
}

impl McpServers {
    /// The configuration file's servers, connected at their first use. One that cannot be
    /// reached then is a warning, and is tried again in the background; its tools are offered
    /// once it starts, and Holdpoint serves without it meanwhile.
    pub fn new(settings: &McpSettings, max_body: usize, stop: CancellationToken) -> Self {
        McpServers {
            file: Arc::new(settings.clone()),
            configured: Arc::default(),
            worlds: Arc::default(),
            http: HttpGateway::new(max_body, stop),
        }
    }

    /// The upstream servers whose tools `world` is offered (by its gateway and to its
    /// agents): the configuration file's, and the world's own when it has some.
    pub async fn for_world(&self, world: &World) -> Arc<Upstreams> {
        let Some(set) = self.world_set(world) else {
            return self
                .configured
                .get_or_init(|| connect("the configuration file", &self.file))
                .await
                .clone();
        };
        let whose = format!("world {:?}", world.name);
        let file = &self.file.servers;
        set.upstreams
            .get_or_init(|| async {
                let settings = McpSettings {
                    servers: holdpoint_core::mcp::effective_servers(file, &set.servers),
                };
                connect(&whose, &settings).await
            })
            .await
            .clone()
    }

    /// The set of the world's own servers as they are now; a set made of servers that have
    /// changed since is replaced, and its connections closed.
    fn world_set(&self, world: &World) -> Option<Arc<WorldSet>> {
        let mut worlds = self.worlds.lock();
        if world.mcp_servers.is_empty() {
            if let Some(old) = worlds.remove(&world.id) {
                close(old);
            }
            return None;
        }
        if let Some(set) = worlds.get(&world.id)
            && set.servers == world.mcp_servers
        {
            return Some(set.clone());
        }
        let set = Arc::new(WorldSet {
            servers: world.mcp_servers.clone(),
            upstreams: OnceCell::new(),
        });
        if let Some(old) = worlds.insert(world.id, set.clone()) {
            close(old);
        }
        Some(set)
    }

    /// Follows the event log for worlds changed or deleted (on any node), until `shutdown`:
    /// each is [`McpServers::world_changed`] here too.
    pub async fn follow(
        &self,
        engine: &holdpoint_core::Engine,
        shutdown: CancellationToken,
    ) -> Result<(), holdpoint_core::EngineError> {
        let mut events = engine.events(None, Default::default()).await?;
        let servers = self.clone();
        tokio::spawn(async move {
            loop {
                let event = tokio::select! {
                    () = shutdown.cancelled() => return,
                    event = events.next() => event,
                };
                match event {
                    Ok(event) => match &event.payload {
                        EventPayload::WorldUpdated { world } => {
                            servers.world_changed(world.id, Some(world));
                        }
                        EventPayload::WorldDeleted { world } => servers.world_changed(*world, None),
                        _ => {}
                    },
                    Err(e) => {
                        tracing::error!(error = %e, "changes of worlds' MCP servers are no longer followed");
                        return;
                    }
                }
            }
        });
        Ok(())
    }

    /// A world was changed, or deleted (`None`): connections to servers it no longer has
    /// are closed now, not at its next use.
    pub fn world_changed(&self, id: WorldId, world: Option<&World>) {
        let mut worlds = self.worlds.lock();
        let stale = worlds
            .get(&id)
            .is_some_and(|set| world.is_none_or(|w| w.mcp_servers != set.servers));
        if stale && let Some(old) = worlds.remove(&id) {
            close(old);
        }
    }

    /// The sessions of `/mcp/{world}`.
    pub fn http(&self) -> &HttpGateway {
        &self.http
    }

    /// Withdraws what the gateway's sessions still wait on (the server stops), then ends the
    /// connections to the upstream servers (stdio ones are stopped).
    pub async fn close(&self) {
        self.http.stopped().await;
        let sets: Vec<Arc<WorldSet>> = self.worlds.lock().drain().map(|(_, s)| s).collect();
        for set in sets {
            if let Some(upstreams) = set.upstreams.get() {
                upstreams.close().await;
            }
        }
        if let Some(configured) = self.configured.get() {
            configured.close().await;
        }
    }
}

/// Starts `settings`' servers in the background, logging those whose first start fails.
async fn connect(whose: &str, settings: &McpSettings) -> Arc<Upstreams> {
    let upstreams = Arc::new(Upstreams::start(settings));
    let watched = Arc::downgrade(&upstreams);
    let whose = whose.to_owned();
    tokio::spawn(async move {
        let Some(upstreams) = watched.upgrade() else {
            return;
        };
        for e in upstreams.first_starts().await {
            tracing::warn!(
                servers = whose,
                "{e}; it is tried again in the background, and its tools are offered once it starts"
            );
        }
    });
    upstreams
}

/// Closes a replaced set's connections, in the background (calls still running on them end
/// with an error).
fn close(set: Arc<WorldSet>) {
    if let Some(upstreams) = set.upstreams.get().cloned() {
        tokio::spawn(async move { upstreams.close().await });
    }
}

/// The agents' MCP tools: what the runtime's [`ExternalTools`] are in this server.
pub struct AgentTools(pub McpServers);

impl std::fmt::Debug for AgentTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentTools")
            .field("servers", &self.0.file.servers.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl ExternalTools for AgentTools {
    async fn tools(&self, world: &World) -> Vec<McpToolInfo> {
        let upstreams = self.0.for_world(world).await;
        upstreams.first_starts_within(FIRST_LIST_PATIENCE).await;
        upstreams.tool_infos()
    }

    async fn call(
        &self,
        world: &World,
        tool: &str,
        arguments: &Value,
    ) -> Result<McpCallOutput, String> {
        let upstreams = self.0.for_world(world).await;
        upstreams
            .call_plain(tool, arguments)
            .await
            .map_err(|e| e.to_string())
    }
}
