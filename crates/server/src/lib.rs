//! Holdpoint's HTTP server: the REST API under `/api/v1`, live events (SSE), tokens and browser
//! sessions, webhooks, Prometheus metrics, and the OpenAPI document.
//!
//! The only crate that knows HTTP. Handlers are thin: they check who is calling, read the
//! request, and call the engine or the runtime.
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod app;
mod auth;
pub mod config;
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
mod webhooks;

use std::future::Future;
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
pub use routes::{mcp_in_process, openapi, operations, router};
pub use webhooks::signature;

/// Serves `app` on `listener` until `stop` resolves; then lets requests in flight finish.
pub async fn serve(
    listener: tokio::net::TcpListener,
    app: App,
    stop: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let shutdown = app.shutdown().clone();
    let header_timeout = app.config().header_timeout;
    let send_timeout = app.config().send_timeout;
    let service = TowerToHyperService::new(router(app));
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout);
    let graceful = GracefulShutdown::new();
    let mut stop = std::pin::pin!(stop);
    loop {
        let tcp = tokio::select! {
            () = &mut stop => break,
            accepted = listener.accept() => match accepted {
                Ok((tcp, _)) => tcp,
                Err(e) => {
                    // Out of file descriptors, say: back off rather than spin.
                    tracing::warn!(error = %e, "could not accept a connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        // Small writes (a live event, a long poll's answer) go out at once rather than
        // waiting behind Nagle's algorithm for the peer's delayed acknowledgement (40 ms).
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "could not set TCP_NODELAY");
        }
        let connection = builder
            .serve_connection_with_upgrades(
                TokioIo::new(send_timeout::SendTimeout::new(tcp, send_timeout)),
                service.clone(),
            )
            .into_owned();
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            if let Err(e) = connection.await {
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
