//! Holdpoint's HTTP server: the REST API under `/api/v1`, live events (SSE), tokens and browser
//! sessions, webhooks, Prometheus metrics, and the OpenAPI document.
//!
//! The only crate that knows HTTP. Route handlers are thin: the access table checks who is
//! calling, the handler reads the request and calls one function of `service`, which the
//! protocol adapters (MCP) call too.
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod a2a;
mod app;
mod attendance;
mod auth;
pub mod channels;
pub mod config;
mod connections;
mod datadir;
mod delivery;
mod error;
mod extract;
mod headers;
pub mod housekeeping;
mod launch;
mod limits;
mod markdown;
mod mcp;
mod metrics;
mod routes;
mod send_timeout;
mod service;
mod webhooks;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;

pub use app::{App, ServerConfig};
pub use auth::{Access, CSRF_HEADER, SESSION_COOKIE};
pub use config::{ConfigError, LogFormat, Settings};
pub use error::ApiError;
pub use launch::{ADMIN_TOKEN_FILE, LaunchError, Server, load_policy};
pub use routes::{openapi, operations, router};
pub use service::in_process::in_process as mcp_in_process;
pub use webhooks::signature;

/// Serves `app` on `listener` until `stop` resolves; then lets requests in flight finish.
///
/// Each connection is admitted under `[limits]`'s caps (`connections::Connections`) and must
/// send a request's headers within `server.header_timeout` of its accept, or it is closed.
pub async fn serve(
    listener: tokio::net::TcpListener,
    app: App,
    stop: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let shutdown = app.shutdown().clone();
    let header_timeout = app.config().header_timeout;
    let send_timeout = app.config().send_timeout;
    let limits = &app.config().limits;
    let connections =
        connections::Connections::new(limits.connections, limits.connections_per_address);
    app.metrics().watch_connections(Arc::clone(&connections));
    let service = TowerToHyperService::new(router(app));
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout);
    let graceful = GracefulShutdown::new();
    let mut stop = std::pin::pin!(stop);
    let mut backoff = Backoff::default();
    loop {
        let (tcp, peer) = tokio::select! {
            () = &mut stop => break,
            accepted = async {
                connections.room().await;
                listener.accept().await
            } => match accepted {
                Ok(accepted) => {
                    backoff.reset();
                    accepted
                }
                Err(e) => {
                    // Out of descriptors, say: close a connection that sent nothing yet, and
                    // wait a little longer each time rather than spin on the error.
                    let shed = out_of_descriptors(&e) && connections.shed();
                    tracing::warn!(error = %e, shed, "could not accept a connection");
                    tokio::select! {
                        () = &mut stop => break,
                        () = tokio::time::sleep(backoff.next()) => continue,
                    }
                }
            },
        };
        let Some(admitted) = connections.admit(peer.ip()) else {
            // Every connection open sent a request: this one waits for none of them.
            tracing::debug!(%peer, "refused a connection: too many open");
            continue;
        };
        // Small writes (a live event, a long poll's answer) go out at once rather than
        // waiting behind Nagle's algorithm for the peer's delayed acknowledgement (40 ms).
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "could not set TCP_NODELAY");
        }
        let connection = builder
            .serve_connection_with_upgrades(
                TokioIo::new(send_timeout::SendTimeout::new(tcp, send_timeout)),
                FirstRequest {
                    inner: service.clone(),
                    admitted: Arc::clone(&admitted),
                },
            )
            .into_owned();
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            let mut connection = std::pin::pin!(connection);
            // Until its first request a connection may be closed: for silence past the
            // header timeout (counted from accept, before hyper even knows the protocol),
            // or to make room for another.
            let ended = tokio::select! {
                ended = &mut connection => Some(ended),
                () = tokio::time::sleep(header_timeout) => {
                    if !admitted.has_requested() {
                        return;
                    }
                    None
                }
                () = admitted.evicted() => return,
            };
            let ended = match ended {
                Some(ended) => ended,
                None => connection.await,
            };
            if let Err(e) = ended {
                tracing::debug!(error = %e, "a connection ended with an error");
            }
        });
    }
    drop(listener);
    // Long polls and live streams end, so the connections can close.
    shutdown.cancel();
    graceful.shutdown().await;
    Ok(())
}

/// The service of one connection, which marks the connection as having sent a request.
#[derive(Clone)]
struct FirstRequest<S> {
    inner: S,
    admitted: Arc<connections::Admitted>,
}

impl<S: hyper::service::Service<R>, R> hyper::service::Service<R> for FirstRequest<S> {
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn call(&self, request: R) -> Self::Future {
        self.admitted.requested();
        self.inner.call(request)
    }
}

fn out_of_descriptors(e: &std::io::Error) -> bool {
    // EMFILE (the process's limit) and ENFILE (the system's).
    matches!(e.raw_os_error(), Some(24 | 23))
}

/// The pause after a failed accept: 5 ms, doubled each failure in a row, at most 250 ms.
#[derive(Default)]
struct Backoff(Option<Duration>);

impl Backoff {
    const FIRST: Duration = Duration::from_millis(5);
    const MAX: Duration = Duration::from_millis(250);

    fn next(&mut self) -> Duration {
        let pause = self.0.map_or(Self::FIRST, |p| (p * 2).min(Self::MAX));
        self.0 = Some(pause);
        pause
    }

    fn reset(&mut self) {
        self.0 = None;
    }
}
