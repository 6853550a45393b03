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

use holdpoint_core::Engine;
use holdpoint_protocol::Timestamp;
use tokio_util::sync::CancellationToken;

use crate::auth::Credentials;
use crate::error::ApiError;
use crate::webhooks::Webhooks;

/// How often housekeeping runs.
pub const EVERY: Duration = Duration::from_secs(3600);

/// What one run deleted.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Swept {
    pub idempotency_records: usize,
    pub sessions: usize,
    pub deliveries: usize,
}

/// What housekeeping deletes from, and after how long (`App::housekeeping`).
pub struct Housekeeping {
    pub(crate) engine: Engine,
    pub(crate) credentials: Credentials,
    pub(crate) webhooks: Webhooks,
    /// `server.idempotency_retention`.
    pub(crate) idempotency_retention: Duration,
    /// `webhooks.keep_deliveries`.
    pub(crate) keep_deliveries: Duration,
}

impl Housekeeping {
    /// Deletes what has expired by `now`.
    pub async fn sweep(&self, now: Timestamp) -> Result<Swept, ApiError> {
        let before = now.saturating_sub(self.idempotency_retention);
        Ok(Swept {
            idempotency_records: self.engine.forget_idempotency(before).await?,
            sessions: self.credentials.end_expired_sessions(now).await?,
            deliveries: self
                .webhooks
                .forget_deliveries(now.saturating_sub(self.keep_deliveries))
                .await?,
        })
    }

    /// Runs [`Housekeeping::sweep`] every [`EVERY`] until `shutdown`.
    pub fn start(self, shutdown: CancellationToken) {
        tokio::spawn(async move {
            let clock = self.engine.clock().clone();
            loop {
                let next = clock.now().saturating_add(EVERY);
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    () = clock.sleep_until(next) => {}
                }
                match self.sweep(clock.now()).await {
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
}
