//! Forgetting what is kept only for a while: the responses recorded for idempotency keys.

use holdpoint_protocol::Timestamp;

use super::Engine;
use super::decide::commit_error;
use crate::error::EngineError;
use crate::store::{Transaction, Write};

/// Keys forgotten per transaction, so that a long backlog never holds the writer for long.
const PAGE: usize = 500;

impl Engine {
    /// Forgets the responses to idempotent requests recorded before `before`, oldest first;
    /// returns how many. A request retried with a forgotten key is a new request.
    pub async fn forget_idempotency(&self, before: Timestamp) -> Result<usize, EngineError> {
        let mut forgotten = 0;
        loop {
            let keys = self.store().idempotent_keys_before(before, PAGE).await?;
            let n = keys.len();
            if n == 0 {
                return Ok(forgotten);
            }
            let writes = keys
                .into_iter()
                .map(|key| Write::ForgetIdempotent { key, before })
                .collect();
            self.store()
                .commit(Transaction {
                    writes,
                    events: Vec::new(),
                })
                .await
                .map_err(commit_error)?;
            forgotten += n;
            if n < PAGE {
                return Ok(forgotten);
            }
        }
    }
}
