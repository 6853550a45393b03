//! Housekeeping: what is kept only for a while is deleted once its time has passed, so that no
//! table grows without bound on a server that runs for months.
//!
//! - Responses recorded for idempotency keys are forgotten after
//!   `server.idempotency_retention`: a client that retries after that makes a new request.
//! - Browser sessions are deleted once they have ended (they are refused from then on anyway).
//! - Finished webhook deliveries are deleted after `webhooks.keep_deliveries`.
//!
//! It runs every [`EVERY`], the first time one period after the server starts: turns resumed
//! at start may repeat their last gate with its idempotency key, and must find its record.

use std::time::Duration;

use holdpoint_protocol::Timestamp;

use crate::app::App;
use crate::error::ApiError;

/// How often housekeeping runs.
pub const EVERY: Duration = Duration::from_secs(3600);

/// What one run deleted.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Swept {
    pub idempotency_records: usize,
    pub sessions: usize,
    pub deliveries: usize,
}

/// Deletes what has expired by `now`.
pub async fn sweep(app: &App, now: Timestamp) -> Result<Swept, ApiError> {
    let before = now.saturating_sub(app.config().idempotency_retention);
    Ok(Swept {
        idempotency_records: app.engine().forget_idempotency(before).await?,
        sessions: app.credentials().end_expired_sessions(now).await?,
        deliveries: crate::webhooks::forget_deliveries(
            app,
            now.saturating_sub(app.config().webhooks.keep_deliveries),
        )
        .await?,
    })
}

/// Runs [`sweep`] every [`EVERY`] until the server stops.
pub fn start(app: App) {
    tokio::spawn(async move {
        let clock = app.engine().clock().clone();
        loop {
            let next = clock.now().saturating_add(EVERY);
            tokio::select! {
                () = app.shutdown().cancelled() => return,
                () = clock.sleep_until(next) => {}
            }
            match sweep(&app, clock.now()).await {
                Ok(swept) if swept != Swept::default() => tracing::info!(
                    idempotency_records = swept.idempotency_records,
                    sessions = swept.sessions,
                    deliveries = swept.deliveries,
                    "housekeeping deleted what had expired"
                ),
                Ok(_) => {}
                Err(e) => tracing::warn!(
                    error = %e.message,
                    "housekeeping failed; it runs again in an hour"
                ),
            }
        }
    });
}
