//! Many deadlines: holds pending with deadlines spread over a stretch of time, each timing out
//! through the engine's timer task, and how late each timeout is seen.
//!
//! Real time, on the system clock: an accelerated clock would make the timer task's own delays
//! (waking, reading the hold, committing) look shorter than they are. An hour is long for a
//! run, so the spread is a flag; a shorter spread puts the same deadlines closer together,
//! more expiries per second than an hour's, which is the harder case for lateness.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use holdpoint_core::Engine;
use holdpoint_core::store::EventFilter;
use holdpoint_protocol::{Deadline, EventPayload, HoldId, HoldRequest, Timestamp};
use holdpoint_store::SqliteStore;

use crate::ALLOCATOR;
use crate::cycle::Inbox;
use crate::pending::rss_bytes;
use crate::stats::{Latencies, ms};

/// Raises `holds` questions whose deadlines fall evenly from `first` to `first + spread`.
async fn fill(
    engine: &Engine,
    holds: usize,
    first: Timestamp,
    spread: Duration,
) -> anyhow::Result<()> {
    crate::pending::fill(engine, holds, move |engine, i| {
        let at = first.saturating_add(spread.mul_f64(i as f64 / holds as f64));
        let mut item = crate::pending::question(engine, i);
        if let HoldRequest::Question(q) = &mut item {
            // At least a millisecond: a deadline is never now.
            let after = at
                .duration_since(engine.clock().now())
                .max(Duration::from_millis(1));
            q.deadline = Some(Deadline::After(after));
        }
        item
    })
    .await?;
    Ok(())
}

pub async fn run(
    dir: &tempfile::TempDir,
    holds: usize,
    spread: Duration,
    lead: Duration,
) -> anyhow::Result<()> {
    println!(
        "== {holds} pending holds with deadlines spread over {:.0} s (from {:.0} s after the start), timed out on the system clock",
        spread.as_secs_f64(),
        lead.as_secs_f64()
    );
    let store = Arc::new(SqliteStore::open(dir.path().join("timers.db"))?);
    let engine = Engine::builder(store.clone())
        .channel(Arc::new(Inbox))
        .start()
        .await?;
    let mut events = engine.events(None, EventFilter::default()).await?;
    let (heap0, rss0) = (ALLOCATOR.allocated(), rss_bytes());
    let first = engine.clock().now().saturating_add(lead);
    // Follows the log: each hold's deadline as raised, and when its timeout is seen.
    let watcher = {
        let engine = engine.clone();
        tokio::spawn(async move {
            let mut deadlines: HashMap<HoldId, Timestamp> = HashMap::with_capacity(holds);
            let mut late = Vec::with_capacity(holds);
            let mut early = 0usize;
            let mut peak = (0usize, 0usize);
            while late.len() < holds {
                let event = events.next().await?;
                let seen = engine.clock().now();
                match &event.payload {
                    EventPayload::HoldCreated { hold } => {
                        if let Some(at) = hold.deadline {
                            deadlines.insert(hold.id, at);
                        }
                    }
                    EventPayload::HoldExpired { .. } => {
                        let Some(at) = event.hold.and_then(|h| deadlines.remove(&h)) else {
                            continue;
                        };
                        if seen < at {
                            early += 1;
                        }
                        late.push(seen.duration_since(at));
                        if late.len() % (holds / 10).max(1) == 0 {
                            peak = peak.max((rss_bytes(), ALLOCATOR.allocated()));
                        }
                    }
                    _ => {}
                }
            }
            Ok::<_, anyhow::Error>((late, early, peak))
        })
    };
    let start = Instant::now();
    fill(&engine, holds, first, spread).await?;
    let filled = start.elapsed();
    let (heap1, rss1) = (ALLOCATOR.allocated(), rss_bytes());
    println!(
        "  raised in {:.1} s; timers tracked: {}",
        filled.as_secs_f64(),
        engine.tracked_timers()
    );
    if filled >= lead {
        println!(
            "  (the first deadlines passed while holds were still being raised: those timeouts ran alongside the raising)"
        );
    }
    let per = |bytes: usize| bytes as f64 / holds as f64;
    println!(
        "  with all pending: Rust heap +{:.1} MiB ({:.0} bytes per hold), RSS +{:.1} MiB ({:.0} bytes per hold, SQLite's page cache included)",
        heap1.saturating_sub(heap0) as f64 / 1048576.0,
        per(heap1.saturating_sub(heap0)),
        rss1.saturating_sub(rss0) as f64 / 1048576.0,
        per(rss1.saturating_sub(rss0))
    );
    let (late, early, peak) = watcher.await??;
    let lat = Latencies::new(late);
    println!(
        "  {} timeouts seen over {:.0} s; lateness (deadline → hold.expired committed and seen): p50 {}   p99 {}   max {}   ({early} early)",
        lat.len(),
        start.elapsed().as_secs_f64(),
        ms(lat.percentile(50.0)),
        ms(lat.percentile(99.0)),
        ms(lat.percentile(100.0))
    );
    let (heap2, rss2) = (ALLOCATOR.allocated(), rss_bytes());
    println!(
        "  while expiring, at most: RSS {:.1} MiB, Rust heap {:.1} MiB; once all expired: RSS {:.1} MiB, Rust heap {:.1} MiB; timers tracked: {}",
        peak.0 as f64 / 1048576.0,
        peak.1 as f64 / 1048576.0,
        rss2 as f64 / 1048576.0,
        heap2 as f64 / 1048576.0,
        engine.tracked_timers()
    );
    drop(engine);
    store.close().await;
    println!();
    Ok(())
}
