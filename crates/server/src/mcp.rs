//! The MCP servers behind the gateway that `/mcp/{world}` serves: connected once when the
//! server starts and shared by every session, and the sessions of that endpoint.

use std::sync::Arc;

use holdpoint_mcp::{HttpGateway, McpSettings, Upstreams};
use holdpoint_protocol::World;
use tokio_util::sync::CancellationToken;

/// The upstream MCP servers and the HTTP gateway's sessions. Cheap to clone.
#[derive(Clone)]
pub struct McpServers {
    /// The configuration file's `[mcp.servers]`.
    configured: Arc<Upstreams>,
    http: HttpGateway,
}

impl McpServers {
    /// Connects to the configuration file's servers. One that cannot be reached is a warning,
    /// and its tools are not offered: Holdpoint serves without it.
    pub async fn connect(settings: &McpSettings, max_body: usize, stop: CancellationToken) -> Self {
        let (configured, failed) = Upstreams::connect(settings).await;
        for e in failed {
            tracing::warn!("{e}; its tools are not offered");
        }
        McpServers {
            configured: Arc::new(configured),
            http: HttpGateway::new(max_body, stop),
        }
    }

    /// The upstream servers whose tools `world`'s gateway offers: the configuration file's,
    /// the same for every world.
    pub fn for_world(&self, _world: &World) -> Arc<Upstreams> {
        self.configured.clone()
    }

    /// The sessions of `/mcp/{world}`.
    pub fn http(&self) -> &HttpGateway {
        &self.http
    }

    /// Ends the connections to the upstream servers (stdio ones are stopped).
    pub async fn close(&self) {
        self.configured.close().await;
    }
}
