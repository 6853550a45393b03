//! Many pending holds: what they cost in memory, and how fast the first page comes back.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use holdpoint_core::Engine;
use holdpoint_core::store::Store;
use holdpoint_protocol::{BatchId, GateRequest, HoldQuery, HoldRequest, Order, Principal, Role};
use holdpoint_store::SqliteStore;

use crate::ALLOCATOR;
use crate::cycle::{Inbox, ask};
use crate::stats::{Latencies, ms};

/// The process's resident memory, in bytes.
pub(crate) fn rss_bytes() -> usize {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|p| p.parse::<usize>().ok())
        })
        .map_or(0, |pages| pages * 4096)
}

/// Raises `holds` holds, 64 to a request (one batch each) from 16 callers, spread over ten
/// worlds and seven agents; their batches. Hold `i` (from 0) is `item(engine, i)`.
pub(crate) async fn fill<F>(engine: &Engine, holds: usize, item: F) -> anyhow::Result<Vec<BatchId>>
where
    F: Fn(&Engine, usize) -> HoldRequest + Send + Sync + 'static,
{
    const PER_REQUEST: usize = 64;
    const TASKS: usize = 16;
    let requests = holds.div_ceil(PER_REQUEST);
    let item = Arc::new(item);
    let mut tasks = Vec::new();
    for t in 0..TASKS {
        let (engine, item) = (engine.clone(), item.clone());
        tasks.push(tokio::spawn(async move {
            let agent = Principal::new("bench-agent", Role::Agent);
            let mut batches = Vec::new();
            for r in (t..requests).step_by(TASKS) {
                let first = r * PER_REQUEST;
                let n = PER_REQUEST.min(holds - first);
                let items = (first..first + n).map(|i| item(&engine, i)).collect();
                let req = GateRequest {
                    world: format!("world-{}", r % 10),
                    agent: Some(format!("agent-{}", r % 7)),
                    items,
                    ..ask("")
                };
                batches.extend(engine.gate(&agent, req).await?.batch);
            }
            Ok::<_, anyhow::Error>(batches)
        }));
    }
    let mut batches = Vec::new();
    for t in tasks {
        batches.extend(t.await??);
    }
    Ok(batches)
}

/// A plain question, as the benchmarks raise them.
pub(crate) fn question(_: &Engine, _: usize) -> HoldRequest {
    ask("").items.remove(0)
}

/// Times the first page of `query`, which must hold `items` holds.
async fn page_latency(
    engine: &Engine,
    query: &HoldQuery,
    items: usize,
    runs: usize,
) -> anyhow::Result<Latencies> {
    let mut samples = Vec::with_capacity(runs);
    for _ in 0..runs {
        let start = Instant::now();
        let page = engine.holds(query).await?;
        samples.push(start.elapsed());
        anyhow::ensure!(page.items.len() == items, "expected {items} holds");
    }
    Ok(Latencies::new(samples))
}

/// Where `pending` keeps its database: a temporary directory's, or one kept between runs.
pub enum Database {
    Temporary(tempfile::TempDir),
    /// Raised into once, kept: a run that finds its holds there times only the restarts.
    Kept(PathBuf),
}

impl Database {
    fn path(&self) -> PathBuf {
        match self {
            Database::Temporary(dir) => dir.path().join("pending.db"),
            Database::Kept(path) => path.clone(),
        }
    }
}

pub async fn run(database: &Database, holds: usize) -> anyhow::Result<()> {
    println!("== {holds} pending holds");
    let path = database.path();
    let store = Arc::new(SqliteStore::open(&path)?);
    // Counted from the open holds' index, without an engine's start (which would read them
    // all, as the restarts timed below do).
    let found: u64 = store
        .open_hold_counts(None)
        .await?
        .iter()
        .map(|c| c.pending)
        .sum();
    if found == 0 {
        let engine = Engine::builder(store.clone())
            .channel(Arc::new(Inbox))
            .start()
            .await?;
        raise_and_list(&engine, &path, holds).await?;
    } else {
        anyhow::ensure!(
            found == holds as u64,
            "{} holds {found} pending holds, not {holds}: remove it or ask for {found}",
            path.display()
        );
        println!(
            "  {found} pending holds found in {}: restarts only",
            path.display()
        );
    }
    store.close().await;

    restart(&path, holds, "restart").await?;
    evict(&path)?;
    restart(&path, holds, "restart from a cold cache").await?;
    println!();
    Ok(())
}

/// Raises `holds` into `engine`, and times the first pages.
async fn raise_and_list(engine: &Engine, path: &Path, holds: usize) -> anyhow::Result<()> {
    let (heap0, rss0) = (ALLOCATOR.allocated(), rss_bytes());
    let start = Instant::now();
    fill(engine, holds, question).await?;
    let filled = start.elapsed();
    let (heap1, rss1) = (ALLOCATOR.allocated(), rss_bytes());
    println!(
        "  raised in {:.2} s ({:.0} holds/s, 64 per request)",
        filled.as_secs_f64(),
        holds as f64 / filled.as_secs_f64()
    );
    println!("  timers tracked: {}", engine.tracked_timers());
    let on_disk: u64 = database_files(path)
        .filter_map(|f| std::fs::metadata(f).ok())
        .map(|m| m.len())
        .sum();
    println!(
        "  database:     {:>8.1} MiB on disk = {:>5.0} bytes per hold",
        on_disk as f64 / 1048576.0,
        on_disk as f64 / holds as f64
    );
    let per = |bytes: usize| bytes as f64 / holds as f64;
    println!(
        "  Rust heap:    +{:>6.1} MiB = {:>5.0} bytes per pending hold",
        heap1.saturating_sub(heap0) as f64 / 1048576.0,
        per(heap1.saturating_sub(heap0))
    );
    println!(
        "  process RSS:  +{:>6.1} MiB = {:>5.0} bytes per pending hold (includes SQLite's page cache)",
        rss1.saturating_sub(rss0) as f64 / 1048576.0,
        per(rss1.saturating_sub(rss0))
    );

    let page = |f: fn(&mut HoldQuery)| {
        let mut query = HoldQuery {
            limit: Some(50),
            ..HoldQuery::default()
        };
        f(&mut query);
        query
    };
    for (name, items, query) in [
        ("first page, oldest first", 50, page(|_| {})),
        (
            "first page, newest first",
            50,
            page(|q| q.order = Order::Newest),
        ),
        (
            "first page of one world",
            50,
            page(|q| q.world = Some("world-3".into())),
        ),
        (
            "first page of one agent",
            50,
            page(|q| q.agent = Some("agent-3".into())),
        ),
        ("most urgent first", 50, page(|q| q.order = Order::Urgent)),
        (
            "most urgent of one world",
            50,
            page(|q| {
                q.order = Order::Urgent;
                q.world = Some("world-3".into());
            }),
        ),
        (
            "most urgent of one agent",
            50,
            page(|q| {
                q.order = Order::Urgent;
                q.agent = Some("agent-3".into());
            }),
        ),
        // Nothing matches: read through the tool's own index, which has no entry of it,
        // rather than by walking the urgency index past every open hold.
        (
            "most urgent, no match",
            0,
            page(|q| {
                q.order = Order::Urgent;
                q.tool = Some("deploy".into());
            }),
        ),
    ] {
        let runs = 2000;
        page_latency(engine, &query, items, runs / 20).await?;
        let lat = page_latency(engine, &query, items, runs).await?;
        println!(
            "  {name:<26} p50 {}   p99 {}   ({items} holds, {} runs)",
            ms(lat.percentile(50.0)),
            ms(lat.percentile(99.0)),
            lat.len()
        );
    }
    Ok(())
}

/// The database's files: the main one and its write-ahead log.
fn database_files(path: &Path) -> impl Iterator<Item = PathBuf> {
    let wal = PathBuf::from(format!("{}-wal", path.display()));
    [path.to_path_buf(), wal].into_iter()
}

/// Opens the store at `path` and starts an engine on it, timing both; the heap it takes.
async fn restart(path: &Path, holds: usize, name: &str) -> anyhow::Result<()> {
    let per = |bytes: usize| bytes as f64 / holds as f64;
    let heap0 = ALLOCATOR.allocated();
    let start = Instant::now();
    let store = Arc::new(SqliteStore::open(path)?);
    let opened = start.elapsed();
    let engine = Engine::builder(store.clone())
        .channel(Arc::new(Inbox))
        .start()
        .await?;
    let restarted = start.elapsed();
    let heap1 = ALLOCATOR.allocated();
    println!(
        "  {name} with {} pending (deadlines reloaded): {:.0} ms",
        engine.open_holds(),
        restarted.as_secs_f64() * 1000.0
    );
    println!(
        "    of which the store's open: {:.0} ms, the engine's start: {:.0} ms",
        opened.as_secs_f64() * 1000.0,
        (restarted - opened).as_secs_f64() * 1000.0
    );
    println!(
        "  Rust heap after restart: +{:>6.1} MiB = {:>5.0} bytes per pending hold",
        heap1.saturating_sub(heap0) as f64 / 1048576.0,
        per(heap1.saturating_sub(heap0))
    );
    drop(engine);
    store.close().await;
    Ok(())
}

/// Drops the database's files from the kernel's page cache, as after a reboot: written back
/// first, since only clean pages are dropped.
fn evict(path: &Path) -> anyhow::Result<()> {
    for file in database_files(path) {
        let Ok(file) = std::fs::File::open(&file) else {
            continue;
        };
        file.sync_all()?;
        rustix::fs::fadvise(&file, 0, None, rustix::fs::Advice::DontNeed)?;
    }
    Ok(())
}
