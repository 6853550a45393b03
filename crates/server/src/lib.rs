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
mod launch;
mod metrics;
mod routes;
mod webhooks;

use axum::serve::ListenerExt;
use std::future::Future;

pub use app::{App, ServerConfig};
pub use auth::{CSRF_HEADER, SESSION_COOKIE};
pub use config::{ConfigError, LogFormat, Settings};
pub use error::ApiError;
pub use launch::{ADMIN_TOKEN_FILE, LaunchError, Server, load_policy};
pub use routes::{openapi, router};
pub use webhooks::signature;

/// Serves `app` on `listener` until `stop` resolves; then lets requests in flight finish.
pub async fn serve(
    listener: tokio::net::TcpListener,
    app: App,
    stop: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let shutdown = app.shutdown().clone();
    let router = router(app);
    // Small writes (a live event, a long poll's answer) go out at once rather than waiting
    // behind Nagle's algorithm for the peer's delayed acknowledgement (up to 40 ms).
    let listener = listener.tap_io(|tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "could not set TCP_NODELAY");
        }
    });
    axum::serve(listener, router)
        .with_graceful_shutdown(async move {
            stop.await;
            // Long polls and live streams end, so the server can stop.
            shutdown.cancel();
        })
        .await
}
