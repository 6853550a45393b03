//! Several `holdpoint serve` nodes on one PostgreSQL database, as the tests start them: one
//! data directory for all of them (the admin token, the worlds' directories, as a volume every
//! node mounts would be) and one database schema.

use std::path::{Path, PathBuf};
use std::time::Duration;

use holdpoint_test_support::http::Api;

use holdpoint_test_support::serve::Serve;

use super::serve::{admin, served};

pub(super) struct Nodes {
    pub(super) data: PathBuf,
    args: Vec<String>,
}

impl Nodes {
    /// Nodes whose data directory is under `dir`, on the database at `database_url`, with a
    /// turn lease of `lease` in whole seconds (the default one when `None`).
    pub(super) fn new(dir: &Path, database_url: &str, lease: Option<Duration>) -> Nodes {
        let config = dir.join("holdpoint.toml");
        let lease = lease.map_or(String::new(), |l| {
            format!("[server]\nturn_lease = \"{}s\"\n", l.as_secs())
        });
        std::fs::write(&config, format!("{lease}[log]\nlevel = \"warn\"\n")).unwrap();
        let args = vec![
            "--database-url".to_owned(),
            database_url.to_owned(),
            "--config".to_owned(),
            config.display().to_string(),
        ];
        Nodes {
            data: dir.join("data"),
            args,
        }
    }

    /// A node, started and listening; its URL.
    pub(super) async fn start(&self) -> (Serve, String) {
        let args: Vec<&str> = self.args.iter().map(String::as_str).collect();
        let mut node = served(&self.data, &args);
        let url = node.url().await;
        (node, url)
    }

    /// `n` nodes, each ready. The first starts alone, so that it alone makes the admin token.
    pub(super) async fn start_ready(&self, n: usize) -> Running {
        let mut running = Running {
            served: Vec::new(),
            admins: Vec::new(),
        };
        for _ in 0..n {
            let (node, url) = self.start().await;
            let api = self.admin(&url);
            api.get("/readyz").await.expect(200);
            running.served.push(node);
            running.admins.push(api);
        }
        running
    }

    /// The admin token the first node made, on the node at `url`.
    pub(super) fn admin(&self, url: &str) -> Api {
        admin(&self.data, url)
    }
}

/// Nodes started together; `admins[i]` talks to node `i` as the admin.
pub(super) struct Running {
    pub(super) served: Vec<Serve>,
    pub(super) admins: Vec<Api>,
}

impl Running {
    /// Stops every node, checking each exits cleanly.
    pub(super) async fn stop(self) {
        for node in self.served {
            assert!(node.terminate().await.success());
        }
    }
}
