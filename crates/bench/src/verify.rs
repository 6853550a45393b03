//! `audit verify` over a large log: the whole chain walked and the stored state compared with
//! it, as `holdpoint audit verify` and `GET /audit/verify` do, on a SQLite store.
//!
//! The log is made the way a server makes it: holds raised 64 to a request by 16 callers (a
//! `hold.created` each, as `pending` raises them), then each request's batch withdrawn in one
//! transaction (a `hold.withdrawn` each), so about two events a hold, every hold resolved and
//! compared.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use holdpoint_core::{Engine, verify};
use holdpoint_protocol::{Actor, BatchId, Source};
use holdpoint_store::SqliteStore;

use crate::ALLOCATOR;
use crate::cycle::Inbox;

/// Callers withdrawing at once.
const CALLERS: usize = 16;

/// Withdraws every batch, `CALLERS` at a time.
async fn withdraw(engine: &Engine, batches: Vec<BatchId>) -> anyhow::Result<()> {
    let batches = Arc::new(batches);
    let mut callers = Vec::new();
    for c in 0..CALLERS {
        let (engine, batches) = (engine.clone(), batches.clone());
        callers.push(tokio::spawn(async move {
            let by = Actor::of(Source::System);
            for batch in batches.iter().skip(c).step_by(CALLERS) {
                engine.withdraw_batch(*batch, &by, "bench").await?;
            }
            Ok::<_, anyhow::Error>(())
        }));
    }
    for c in callers {
        c.await??;
    }
    Ok(())
}

pub async fn run(dir: &tempfile::TempDir, events: usize) -> anyhow::Result<()> {
    let holds = events / 2;
    println!("== audit verify over about {events} events ({holds} holds raised and withdrawn)");
    let path = dir.path().join("verify.db");
    let store = Arc::new(SqliteStore::open(&path)?);
    let engine = Engine::builder(store.clone())
        .channel(Arc::new(Inbox))
        .start()
        .await?;
    let start = Instant::now();
    let batches = crate::pending::fill(&engine, holds, crate::pending::question).await?;
    withdraw(&engine, batches).await?;
    println!("  log written in {:.1} s", start.elapsed().as_secs_f64());
    let size = std::fs::metadata(&path).map_or(0, |m| m.len());
    println!("  database: {:.0} MiB", size as f64 / 1048576.0);

    // The RSS counts the database's pages, which SQLite maps and the walk reads: the heap's
    // peak is what the check itself holds.
    let rss_before = crate::pending::rss_bytes();
    let heap_before = ALLOCATOR.allocated();
    let peak = Arc::new(AtomicUsize::new(heap_before));
    let sampler = {
        let peak = peak.clone();
        tokio::spawn(async move {
            loop {
                peak.fetch_max(ALLOCATOR.allocated(), Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
    };
    let start = Instant::now();
    let verified = verify(store.as_ref()).await;
    let took = start.elapsed().as_secs_f64();
    sampler.abort();
    let report = match verified? {
        Ok(report) => report,
        Err(broken) => anyhow::bail!("the chain does not verify: {broken:?}"),
    };
    anyhow::ensure!(
        report.state.mismatched == 0,
        "the state does not match: {:?}",
        report.state.mismatches
    );
    println!(
        "  verified {} events and {} holds in {took:.2} s ({:.0} events/s); Rust heap peak +{:.0} MiB; RSS grew {:.0} MiB (the mapped database included)",
        report.events,
        report.state.holds,
        report.events as f64 / took,
        peak.load(Ordering::Relaxed).saturating_sub(heap_before) as f64 / 1048576.0,
        crate::pending::rss_bytes().saturating_sub(rss_before) as f64 / 1048576.0
    );
    Ok(())
}
