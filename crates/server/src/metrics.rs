//! Prometheus metrics: pending holds, decisions by outcome and source, time to decision, and
//! HTTP requests by route and status.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::Response;
use holdpoint_core::Engine;
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use crate::error::ApiError;

/// Upper bounds of the time-to-decision buckets, in seconds.
const BUCKETS: [f64; 12] = [
    0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 86400.0,
];

#[derive(Default)]
pub struct Metrics {
    http: Mutex<BTreeMap<(String, String, u16), u64>>,
    /// Requests whose answer has not started, by route (long polls above all).
    in_flight: Mutex<BTreeMap<String, i64>>,
    decisions: Mutex<BTreeMap<(String, String), u64>>,
    to_decision: Mutex<Histogram>,
    /// The serving loop's connections, once it runs.
    connections: std::sync::OnceLock<Arc<crate::connections::Connections>>,
}

#[derive(Default)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    sum: f64,
    total: u64,
}

impl Metrics {
    fn request(&self, route: &str, method: &str, status: u16) {
        *self
            .http
            .lock()
            .entry((route.to_owned(), method.to_owned(), status))
            .or_default() += 1;
    }

    fn decision(&self, status: &str, source: &str, seconds: Option<f64>) {
        *self
            .decisions
            .lock()
            .entry((status.to_owned(), source.to_owned()))
            .or_default() += 1;
        if let Some(s) = seconds {
            let mut h = self.to_decision.lock();
            for (i, bound) in BUCKETS.iter().enumerate() {
                if s <= *bound {
                    h.counts[i] += 1;
                }
            }
            h.sum += s;
            h.total += 1;
        }
    }

    /// Reports the connections of the serving loop.
    pub(crate) fn watch_connections(&self, connections: Arc<crate::connections::Connections>) {
        let _ = self.connections.set(connections);
    }

    /// The Prometheus text exposition.
    pub fn render(&self, pending: u64, streams: usize) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "# HELP holdpoint_pending_holds Holds waiting for a decision.\n# TYPE holdpoint_pending_holds gauge"
        );
        let _ = writeln!(out, "holdpoint_pending_holds {pending}");
        let _ = writeln!(
            out,
            "# HELP holdpoint_live_streams Live event streams open.\n# TYPE holdpoint_live_streams gauge"
        );
        let _ = writeln!(out, "holdpoint_live_streams {streams}");
        if let Some(connections) = self.connections.get() {
            let (open, fresh) = connections.counts();
            let _ = writeln!(
                out,
                "# HELP holdpoint_connections_open Client connections open.\n# TYPE holdpoint_connections_open gauge\nholdpoint_connections_open {open}\n# HELP holdpoint_connections_without_request Open client connections that have sent no request yet.\n# TYPE holdpoint_connections_without_request gauge\nholdpoint_connections_without_request {fresh}\n# HELP holdpoint_connections_max The most client connections open at once (limits.connections, under the descriptor limit).\n# TYPE holdpoint_connections_max gauge\nholdpoint_connections_max {}",
                connections.max_total()
            );
        }
        let _ = writeln!(
            out,
            "# HELP holdpoint_decisions_total Holds resolved, by outcome and by who or what decided.\n# TYPE holdpoint_decisions_total counter"
        );
        for ((status, source), n) in self.decisions.lock().iter() {
            let _ = writeln!(
                out,
                "holdpoint_decisions_total{{outcome=\"{status}\",source=\"{source}\"}} {n}"
            );
        }
        let _ = writeln!(
            out,
            "# HELP holdpoint_time_to_decision_seconds From a hold's creation to its outcome.\n# TYPE holdpoint_time_to_decision_seconds histogram"
        );
        let h = self.to_decision.lock();
        for (bound, n) in BUCKETS.iter().zip(h.counts) {
            let _ = writeln!(
                out,
                "holdpoint_time_to_decision_seconds_bucket{{le=\"{bound}\"}} {n}"
            );
        }
        let _ = writeln!(
            out,
            "holdpoint_time_to_decision_seconds_bucket{{le=\"+Inf\"}} {}",
            h.total
        );
        let _ = writeln!(out, "holdpoint_time_to_decision_seconds_sum {}", h.sum);
        let _ = writeln!(out, "holdpoint_time_to_decision_seconds_count {}", h.total);
        drop(h);
        let _ = writeln!(
            out,
            "# HELP holdpoint_http_requests_total HTTP requests, by route, method and status.\n# TYPE holdpoint_http_requests_total counter"
        );
        for ((route, method, status), n) in self.http.lock().iter() {
            let _ = writeln!(
                out,
                "holdpoint_http_requests_total{{route=\"{route}\",method=\"{method}\",status=\"{status}\"}} {n}"
            );
        }
        let _ = writeln!(
            out,
            "# HELP holdpoint_http_requests_in_flight Requests not yet answered (long polls included), by route.\n# TYPE holdpoint_http_requests_in_flight gauge"
        );
        for (route, n) in self.in_flight.lock().iter() {
            let _ = writeln!(
                out,
                "holdpoint_http_requests_in_flight{{route=\"{route}\"}} {n}"
            );
        }
        out
    }
}

/// Counts each request under its route's pattern (never its concrete path).
pub async fn track(State(metrics): State<Arc<Metrics>>, req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |p| p.as_str().to_owned());
    let method = req.method().as_str().to_owned();
    let in_flight = InFlight::enter(&metrics, &route);
    let response = next.run(req).await;
    drop(in_flight);
    metrics.request(&route, &method, response.status().as_u16());
    response
}

/// Counts a request in flight until dropped (also when the client goes away mid-request).
struct InFlight<'a> {
    metrics: &'a Metrics,
    route: &'a str,
}

impl<'a> InFlight<'a> {
    fn enter(metrics: &'a Metrics, route: &'a str) -> Self {
        *metrics
            .in_flight
            .lock()
            .entry(route.to_owned())
            .or_default() += 1;
        InFlight { metrics, route }
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if let Some(n) = self.metrics.in_flight.lock().get_mut(self.route) {
            *n -= 1;
        }
    }
}

/// Counts resolutions as the log records them (this node's and others'), until `shutdown`.
pub async fn follow(
    engine: Engine,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
) -> Result<(), ApiError> {
    let mut events = engine.events(None, Default::default()).await?;
    tokio::spawn(async move {
        loop {
            let event = tokio::select! {
                () = shutdown.cancelled() => return,
                e = events.next() => match e {
                    Ok(e) => e,
                    Err(_) => return,
                },
            };
            let (Some(outcome), Some(id)) = (event.payload.resolution(), event.hold) else {
                continue;
            };
            // From memory for a hold raised lately, on any node (no read of the store).
            let created = engine.created_at(id).await.ok();
            let seconds = created.map(|c| outcome.decided_at.duration_since(c).as_secs_f64());
            let status = serde_json::to_value(outcome.status)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default();
            let source = serde_json::to_value(outcome.source)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default();
            metrics.decision(&status, &source, seconds);
        }
    });
    Ok(())
}
