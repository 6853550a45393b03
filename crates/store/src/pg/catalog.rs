//! The catalog cache on PostgreSQL, exact across nodes.
//!
//! The cache is SQLite's (`cache.rs`). What makes it exact here is a version in the
//! database (`catalog_version`) that the writer of any node moves in the same transaction as
//! any change to a cached kind (a token revoked, a world renamed, a webhook added). Before a
//! cached answer is used, the version is read again; when it moved, the cache is emptied and
//! the answer read from the database.
//!
//! That read is shared: a request joins the next read to *start*, never one already on its
//! way, so the version it learns was read after it arrived, and any change committed before
//! it arrived, on any node, is seen. Requests that arrive while a read is out wait for it
//! and go together in the next one. One round trip per request at worst (what one uncached
//! read cost before, and a request reads several catalog records: its credential, its world,
//! the world's agents or webhooks), and under load one round trip for many requests.

use std::sync::Arc;

use holdpoint_core::store::StoreError;
use parking_lot::Mutex;
use tokio::sync::oneshot;

use super::conn::{Readers, sql_error};
use crate::cache::RecordCache;

/// Reads the catalog's version.
pub(super) const READ_VERSION: &str = "SELECT version FROM catalog_version WHERE id = 1";
/// Moves the version, in the transaction that changes the catalog (failing, as the
/// writer's conditional writes do, when the row is missing).
pub(super) const MOVE_VERSION: &str = "WITH moved AS (UPDATE catalog_version SET version = version + 1 WHERE id = 1 RETURNING 1) \
     SELECT 1 / count(*) FROM moved";

type Waiter = oneshot::Sender<Result<i64, StoreError>>;

pub(super) struct Catalog {
    pub(super) cache: RecordCache,
    readers: Arc<Readers>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The version the cached answers were read under.
    version: Option<i64>,
    /// Whether a read of the version is on its way.
    reading: bool,
    /// Who waits for the next read.
    waiting: Vec<Waiter>,
}

impl Catalog {
    pub(super) fn new(readers: Arc<Readers>) -> Arc<Catalog> {
        Arc::new(Catalog {
            cache: RecordCache::default(),
            readers,
            state: Mutex::new(State::default()),
        })
    }

    /// Makes the cache current: reads the version (sharing the read with requests that
    /// arrived with this one) and empties the cache when it moved since.
    pub(super) async fn refresh(self: &Arc<Self>) -> Result<(), StoreError> {
        let (tx, rx) = oneshot::channel();
        let start = {
            let mut state = self.state.lock();
            state.waiting.push(tx);
            !std::mem::replace(&mut state.reading, true)
        };
        if start {
            tokio::spawn(self.clone().read_for_waiters());
        }
        let version = rx
            .await
            .map_err(|_| StoreError::new("the catalog's version was not read"))??;
        let mut state = self.state.lock();
        if state.version.is_none_or(|v| v < version) {
            state.version = Some(version);
            self.cache.invalidate();
        }
        Ok(())
    }

    /// Reads the version for everyone waiting, again and again until nobody is.
    async fn read_for_waiters(self: Arc<Self>) {
        loop {
            // Taken before the read is sent: each of these arrived before it.
            let waiting = {
                let mut state = self.state.lock();
                if state.waiting.is_empty() {
                    state.reading = false;
                    return;
                }
                std::mem::take(&mut state.waiting)
            };
            let version = self.read().await;
            for w in waiting {
                let _ = w.send(version.clone());
            }
        }
    }

    async fn read(&self) -> Result<i64, StoreError> {
        let conn = self.readers.get().await?;
        let row = conn.query_opt(READ_VERSION, &[]).await.map_err(sql_error)?;
        row.map(|r| r.get(0))
            .ok_or_else(|| StoreError::new("the catalog's version row is missing"))
    }
}
