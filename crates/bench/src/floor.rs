//! The floor a cycle is measured against, in the same run: one bare keep-alive HTTP request on
//! loopback, to a minimal server (axum, one route, an empty JSON answer), sent by the same
//! lean client as the cycles' requests (wire.rs). Its CPU per request is what any request costs
//! here before Holdpoint does anything; a cycle is three requests, one event on a stream and
//! two fsyncs, so its CPU is reported as a multiple of the floor's, and its p50 at one caller
//! against two fsyncs plus three bare round trips.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::get;

use crate::cpu::CpuTimes;
use crate::stats::{Latencies, ms};
use crate::wire::Connection;

/// What the floor came to at one level of concurrency.
pub struct Floor {
    pub per_second: f64,
    /// Machine CPU time per request (every process: the server and the load generator).
    pub cpu: Option<Duration>,
    pub p50: Duration,
}

/// Starts the minimal server; its address.
async fn serve() -> anyhow::Result<SocketAddr> {
    let app = Router::new().route("/floor", get(|| async { "{}" }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(addr)
}

/// Bare requests from `concurrency` callers for `seconds` (after half a second of warm-up).
pub async fn measure(concurrency: usize, seconds: f64) -> anyhow::Result<Floor> {
    let addr = serve().await?;
    let warmup = Instant::now() + Duration::from_millis(500);
    let end = warmup + Duration::from_secs_f64(seconds);
    let mut workers = Vec::new();
    for _ in 0..concurrency {
        let mut conn = Connection::open(addr, "floor").await?;
        workers.push(tokio::spawn(async move {
            let mut kept = Vec::new();
            loop {
                let start = Instant::now();
                if start >= end {
                    return Ok::<_, anyhow::Error>(kept);
                }
                conn.send("GET", "/floor", None, 200).await?;
                if start >= warmup {
                    kept.push(start.elapsed());
                }
            }
        }));
    }
    tokio::time::sleep_until(warmup.into()).await;
    let before = CpuTimes::now();
    tokio::time::sleep_until(end.into()).await;
    let after = CpuTimes::now();
    let mut samples = Vec::new();
    for w in workers {
        samples.extend(w.await??);
    }
    let per_second = samples.len() as f64 / seconds;
    let busy = before.zip(after).and_then(|(b, a)| b.busy_until(a));
    Ok(Floor {
        per_second,
        cpu: busy.and_then(|b| cpu_per(b, per_second)),
        p50: Latencies::new(samples).percentile(50.0),
    })
}

/// Machine CPU time per operation, from the share of the CPUs busy and the operations a second.
pub fn cpu_per(busy: f64, per_second: f64) -> Option<Duration> {
    (per_second > 0.0)
        .then(|| Duration::from_secs_f64(busy * crate::cpu::count() as f64 / per_second))
}

/// Prints the floor at `concurrency`, and the cycle's CPU (`cycle_cpu`) as a multiple of it.
pub fn report(concurrency: usize, floor: &Floor, cycle_cpu: Option<Duration>) {
    let cpu = floor
        .cpu
        .map_or("?".into(), |c| format!("{:.1} µs", micros(c)));
    let multiple = match (cycle_cpu, floor.cpu) {
        (Some(cycle), Some(bare)) if !bare.is_zero() => format!(
            "   cycle CPU {:.1} µs = {:.1}× the bare request's",
            micros(cycle),
            cycle.as_secs_f64() / bare.as_secs_f64()
        ),
        _ => String::new(),
    };
    println!(
        "  floor {concurrency:>4}: {:>8.0} bare requests/s   p50 {}   CPU {cpu} each{multiple}",
        floor.per_second,
        ms(floor.p50)
    );
}

/// A duration in microseconds.
pub fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn bare_requests_are_counted_and_timed() {
        let floor = measure(2, 0.2).await.unwrap();
        assert!(floor.per_second > 0.0);
        assert!(floor.p50 > Duration::ZERO);
    }

    #[test]
    fn cpu_per_operation_is_the_busy_cpus_over_the_rate() {
        let cpus = crate::cpu::count() as f64;
        let per = cpu_per(0.5, 1000.0).unwrap();
        assert!((per.as_secs_f64() - 0.5 * cpus / 1000.0).abs() < 1e-12);
        assert_eq!(cpu_per(0.5, 0.0), None);
    }
}
