//! Takeover: how long after a node's death its turns run on another node. Two `holdpoint
//! serve` processes (the binary built beside this program) share a PostgreSQL schema; turns
//! waiting on holds are started on the first, which is killed with SIGKILL; their holds are
//! decided on the second, and each turn counts as running there once the LLM gets its next
//! request (the tool's result). The time is reported from the death, and from the end of the
//! dead node's lease on each turn, as the store recorded it.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use anyhow::{Context, bail};
use holdpoint_core::store::{RecordKind, Store};
use holdpoint_protocol::Timestamp;
use holdpoint_store::PgStore;
use holdpoint_test_support::llm::{ScriptedLlm, Step, call};
use holdpoint_test_support::pg::TempSchema;
use holdpoint_test_support::serve::{Serve, ServeCommand, Stderr};
use reqwest::Client;
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::json;

use crate::http::{Caller, WORLD};
use crate::stats::ms;

/// A `holdpoint serve` child process and its URL.
pub(crate) struct Node {
    serve: Serve,
    pub(crate) url: String,
}

impl Node {
    /// `holdpoint serve` on `data` with the configuration file `config`, on the PostgreSQL
    /// database `url` when given (else SQLite in `data`).
    pub(crate) async fn start(
        holdpoint: &Path,
        data: &Path,
        config: &Path,
        url: Option<&str>,
    ) -> anyhow::Result<Node> {
        let mut command = ServeCommand::new(holdpoint, data)
            .arg("--config")
            .arg(config)
            .stderr(Stderr::Inherit);
        if let Some(url) = url {
            command = command.arg("--database-url").arg(url);
        }
        let mut serve = command.spawn();
        let url = serve
            .listening()
            .await
            .context("holdpoint serve ended before it listened")?;
        Ok(Node { serve, url })
    }

    /// The process's id, while it runs.
    pub(crate) fn pid(&self) -> Option<u32> {
        self.serve.pid()
    }

    /// SIGKILL, and the moment it was sent.
    async fn kill(self) -> SystemTime {
        let at = SystemTime::now();
        self.serve.kill().await;
        at
    }
}

#[derive(Deserialize)]
struct Created {
    id: String,
}

#[derive(Deserialize)]
struct Holds {
    items: Vec<Created>,
}

/// The end of the lease of each turn under way, as the store has it.
async fn lease_ends(url: &str) -> anyhow::Result<Vec<Timestamp>> {
    let store = PgStore::open(url).await?;
    let mut ends = Vec::new();
    for record in store.all_records(RecordKind::ActiveTurn, None).await? {
        let until = record.data["lease"]["until"]
            .as_str()
            .context("an active turn without a lease")?;
        ends.push(until.parse().map_err(|e| anyhow::anyhow!("{e}"))?);
    }
    Ok(ends)
}

pub async fn run(
    dir: &tempfile::TempDir,
    database_url: Option<&str>,
    holdpoint: Option<PathBuf>,
    turns: usize,
    lease: Duration,
) -> anyhow::Result<()> {
    let Some(database_url) = database_url else {
        bail!("takeover needs PostgreSQL: give --database-url");
    };
    let holdpoint = crate::mcp::holdpoint_binary(holdpoint)?;
    println!(
        "== Takeover: {turns} turns waiting on holds on node A; A killed (SIGKILL); the holds decided on node B; a turn runs again once the LLM gets its tool result"
    );
    println!(
        "   turn lease {:.1}s (renewed every third of it); two holdpoint serve processes on one PostgreSQL schema",
        lease.as_secs_f64()
    );
    let schema = TempSchema::in_database(database_url).await;
    let data = dir.path().join("data");
    let config = dir.path().join("holdpoint.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nturn_lease = \"{}ms\"\n[log]\nlevel = \"warn\"\n",
            lease.as_millis()
        ),
    )?;
    let a = Node::start(&holdpoint, &data, &config, Some(&schema.url)).await?;
    let b = Node::start(&holdpoint, &data, &config, Some(&schema.url)).await?;
    let token = std::fs::read_to_string(data.join("admin-token"))?;
    let http = Client::new();
    let on = |node: &Node| Caller {
        http: http.clone(),
        base: node.url.clone(),
        token: token.trim().to_owned(),
    };
    let (on_a, on_b) = (on(&a), on(&b));

    let mut steps = Vec::new();
    steps.extend(
        (0..turns).map(|_| Step::calls(vec![call("c1", "shell_cmd", json!({"command": "true"}))])),
    );
    steps.extend((0..turns).map(|_| Step::text("Done.")));
    let llm = ScriptedLlm::start(steps).await;
    on_a.post::<IgnoredAny>("/api/v1/worlds", json!({"name": WORLD}), 201)
        .await?;
    on_a.post::<IgnoredAny>(
        &format!("/api/v1/worlds/{WORLD}/agents"),
        json!({"name": "helper", "llm": {"base_url": llm.base_url(), "model": "scripted"}}),
        201,
    )
    .await?;
    for _ in 0..turns {
        let chat: Created = on_a
            .post(
                &format!("/api/v1/worlds/{WORLD}/chats"),
                json!({"agent": "helper"}),
                201,
            )
            .await?;
        on_a.post::<IgnoredAny>(
            &format!("/api/v1/worlds/{WORLD}/chats/{}/messages", chat.id),
            json!({"text": "go"}),
            202,
        )
        .await?;
    }
    let holds = loop {
        let pending: Holds = http
            .get(format!("{}/api/v1/holds?limit=500", on_b.base))
            .bearer_auth(&on_b.token)
            .send()
            .await?
            .json()
            .await?;
        if pending.items.len() >= turns {
            break pending.items;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };

    let died = a.kill().await;
    let ends = lease_ends(&schema.url).await?;
    for hold in &holds {
        on_b.post::<IgnoredAny>(
            &format!("/api/v1/holds/{}/decision", hold.id),
            json!({"action": "approve"}),
            200,
        )
        .await?;
    }
    let mut resumed = Vec::new();
    for k in turns + 1..=2 * turns {
        llm.wait_for_requests(k).await;
        resumed.push(SystemTime::now());
    }
    let since = |t: SystemTime, from: SystemTime| t.duration_since(from).unwrap_or_default();
    println!(
        "  death -> first turn running on B {:>10}   last {:>10}",
        ms(since(resumed[0], died)),
        ms(since(resumed[turns - 1], died))
    );
    let last_end = ends.iter().max().copied().context("no leases read")?;
    let last_end = SystemTime::UNIX_EPOCH
        + Duration::from_millis(u64::try_from(last_end.as_millis()).unwrap_or(0));
    println!(
        "  death -> the dead node's last lease ended {:>10}",
        ms(since(last_end, died))
    );
    println!(
        "  lease end -> last turn running on B {:>10}   ({} turns)",
        ms(since(resumed[turns - 1], last_end)),
        turns
    );
    b.kill().await;
    println!();
    Ok(())
}
