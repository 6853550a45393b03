//! Finding the server and the token: `--server`, `HOLDPOINT_SERVER` or the configured
//! address; `HOLDPOINT_TOKEN` or the admin token in the data directory. `chat` may instead run
//! Holdpoint in this process, on the same data directory, when no server is running.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use holdpoint_mcp::Holdpoint;
use holdpoint_protocol::{Actor, Role, Source, TokenId};
use holdpoint_server::{ADMIN_TOKEN_FILE, LaunchError, Server};

use crate::Failure;
use crate::client::{Client, ClientError};
use crate::paths::Files;

/// How a command reaches Holdpoint.
#[derive(Args)]
pub struct Connect {
    /// The server [default: $HOLDPOINT_SERVER, else server.bind of the configuration,
    /// http://127.0.0.1:7717]. The token comes from $HOLDPOINT_TOKEN, else from the admin
    /// token file in the data directory.
    #[arg(long, value_name = "URL", env = "HOLDPOINT_SERVER")]
    server: Option<String>,
    #[command(flatten)]
    files: Files,
}

/// A client, and the server this process runs when there was none to connect to.
pub struct Connection {
    pub client: Client,
    embedded: Option<Embedded>,
}

struct Embedded {
    server: Server,
    /// The token this process acts with.
    token: String,
    /// A token made for this process, revoked when it ends.
    minted: Option<TokenId>,
}

impl Connect {
    fn url(&self) -> Result<String, Failure> {
        if let Some(url) = &self.server {
            return Ok(url.clone());
        }
        Ok(local_url(self.files.settings()?.server.bind))
    }

    fn token(&self) -> Result<String, Failure> {
        if let Ok(token) = std::env::var("HOLDPOINT_TOKEN") {
            return Ok(token.trim().to_owned());
        }
        let file = self.files.data_dir().join(ADMIN_TOKEN_FILE);
        std::fs::read_to_string(&file)
            .map(|t| t.trim().to_owned())
            .map_err(|e| no_token(&file, &e))
    }

    /// The settings, with the variables of this process over the configuration file.
    pub fn settings(&self) -> Result<holdpoint_server::Settings, Failure> {
        self.files.settings()
    }

    /// A client for the running server.
    pub fn client(&self) -> Result<Client, Failure> {
        self.client_at(&self.url()?)
    }

    fn client_at(&self, url: &str) -> Result<Client, Failure> {
        Client::new(url, self.token()?).map_err(client_failure)
    }

    /// A client for the running server; when none runs and none was named, a server in this
    /// process on the data directory (so one terminal is enough).
    pub async fn client_or_embedded(&self) -> Result<Connection, Failure> {
        let url = self.url()?;
        if self.server.is_some() || reachable(&url).await {
            return Ok(Connection {
                client: self.client_at(&url)?,
                embedded: None,
            });
        }
        let data = self.files.data_dir();
        let mut settings = self.files.settings()?;
        settings.server.bind = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        let server = Server::start(&data, &settings)
            .await
            .map_err(|e| match e {
                LaunchError::Store(holdpoint_store::OpenError::Locked { .. }) => Failure::Check(format!(
                    "error: no server answers at {url}, and the data directory {} is in use by another Holdpoint process: name its server with --server URL",
                    data.display()
                )),
                e => Failure::Check(format!("error: cannot run Holdpoint here: {e}")),
            })?;
        // Where people can see and decide what this process holds while it runs (the web
        // interface, the API, `holdpoint holds --server`): its port is its own, so that it
        // never stands in for a server another process expects at the configured address.
        eprintln!(
            "No server at {url}; running Holdpoint in this process on {}, serving people at {} while it runs.",
            data.display(),
            server.url()
        );
        let (token, minted) = match (std::env::var("HOLDPOINT_TOKEN"), server.admin_token()) {
            (Ok(t), _) => (t.trim().to_owned(), None),
            (Err(_), Some(t)) => (t.to_owned(), None),
            (Err(_), None) => {
                // The data directory is this user's: they act as its admin, under their name.
                let name = std::env::var("USER").unwrap_or_else(|_| "terminal".into());
                let created = server
                    .app()
                    .credentials()
                    .create_token(&Actor::of(Source::System), &name, Role::Admin, None, None)
                    .await
                    .map_err(|e| Failure::Check(format!("error: {}", e.message)))?;
                (created.token, Some(created.info.id))
            }
        };
        let client = Client::new(&server.url(), token.clone()).map_err(client_failure)?;
        Ok(Connection {
            client,
            embedded: Some(Embedded {
                server,
                token,
                minted,
            }),
        })
    }
}

impl Connection {
    /// How an MCP gateway in this process asks Holdpoint: the engine in this process, as the
    /// holder of the token, when this process runs Holdpoint (the same asking as the
    /// server's `/mcp/{world}`, without an HTTP exchange per call); else the server's API.
    pub async fn mcp_holdpoint(&self) -> Result<Arc<dyn Holdpoint>, Failure> {
        match &self.embedded {
            Some(e) => holdpoint_server::mcp_in_process(e.server.app(), &e.token)
                .await
                .map_err(|e| Failure::Check(format!("error: {}", e.message))),
            None => Ok(Arc::new(self.client.clone())),
        }
    }

    /// Stops the server this process ran, if any; its turns stay stored.
    pub async fn close(self) {
        if let Some(e) = self.embedded {
            if let Some(id) = e.minted {
                let by = Actor::of(Source::System);
                let _ = e.server.app().credentials().revoke_token(&by, id).await;
            }
            let _ = e.server.stop().await;
        }
    }
}

/// `http://` and the address, with an unspecified address replaced by loopback.
fn local_url(mut bind: SocketAddr) -> String {
    if bind.ip().is_unspecified() {
        bind.set_ip(Ipv4Addr::LOCALHOST.into());
    }
    format!("http://{bind}")
}

/// Whether a server answers its health check at `url` (whatever it answers) within two
/// seconds. The probe needs no token.
async fn reachable(url: &str) -> bool {
    let Ok(client) = Client::new(url, String::new()) else {
        return false;
    };
    match tokio::time::timeout(Duration::from_secs(2), client.health()).await {
        Ok(Ok(_)) => true,
        Ok(Err(e)) => !matches!(e, ClientError::Unreachable { .. }),
        Err(_) => false,
    }
}

/// Neither `HOLDPOINT_TOKEN` nor the admin token file: most likely no server has run on this
/// data directory yet (its first start writes the file), else the server is elsewhere and its
/// token must be given. Not a usage error: the command line was right (exit 1).
fn no_token(file: &std::path::Path, e: &std::io::Error) -> Failure {
    Failure::Check(format!(
        "error: no token: HOLDPOINT_TOKEN is not set and there is no admin token in {} ({e}). \
         If no Holdpoint server is running, start one with `holdpoint serve` (its first start \
         writes that file); if one runs elsewhere, set HOLDPOINT_TOKEN to one of its API tokens \
         (an admin creates them: see docs/api.md)",
        file.display()
    ))
}

pub fn client_failure(e: ClientError) -> Failure {
    Failure::Check(format!("error: {e}"))
}
