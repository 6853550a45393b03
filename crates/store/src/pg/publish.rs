//! Publishing committed events to this process's subscribers, in log order, exactly once.
//!
//! Two tasks publish: the writer (this process's own commits, right after `COMMIT`) and the
//! tail (what other nodes committed, read from the log). They share how far publishing has
//! got under one lock, and each publishes only events beyond it, in order: so no event is
//! published twice, none out of order, whichever of the two sees it first.

use std::sync::Arc;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};

use holdpoint_protocol::Event;
use tokio::sync::{Mutex, MutexGuard, broadcast};
use tokio_postgres::Client;

/// Events read per statement when publishing from the log.
const PAGE: i64 = 1000;

pub(super) struct Publisher {
    /// The last sequence number published; held while publishing.
    published: Mutex<u64>,
    /// The same number, for a look without waiting (the tail skipping a notification of
    /// what is already published, a read barrier finding nothing to do).
    seen: AtomicU64,
    /// The backend process of this process's writer connection: its notifications are of
    /// commits the writer publishes itself.
    writer_pid: AtomicI32,
    events: broadcast::Sender<Arc<Event>>,
}

impl Publisher {
    pub(super) fn new(published: u64, buffer: usize) -> Publisher {
        let (events, _) = broadcast::channel(buffer);
        Publisher {
            published: Mutex::new(published),
            seen: AtomicU64::new(published),
            writer_pid: AtomicI32::new(0),
            events,
        }
    }

    pub(super) fn subscribe(&self) -> broadcast::Receiver<Arc<Event>> {
        self.events.subscribe()
    }

    /// The right to publish, until the guard is dropped.
    pub(super) async fn lock(&self) -> Publishing<'_> {
        Publishing {
            published: self.published.lock().await,
            publisher: self,
        }
    }

    /// How far publishing has got, without waiting for the lock.
    pub(super) fn published(&self) -> u64 {
        self.seen.load(Ordering::Relaxed)
    }

    pub(super) fn set_writer_pid(&self, pid: i32) {
        self.writer_pid.store(pid, Ordering::Relaxed);
    }

    /// Whether a notification from backend `pid` that the head reached `head` (if it says)
    /// may announce events not yet published.
    pub(super) fn may_be_new(&self, pid: i32, head: Option<u64>) -> bool {
        pid != self.writer_pid.load(Ordering::Relaxed)
            && head.is_none_or(|h| h > self.seen.load(Ordering::Relaxed))
    }
}

/// Publishing in progress: the lock on how far it has got.
pub(super) struct Publishing<'a> {
    published: MutexGuard<'a, u64>,
    publisher: &'a Publisher,
}

impl Publishing<'_> {
    /// The last sequence number published.
    pub(super) fn published(&self) -> u64 {
        *self.published
    }

    /// Publishes `event` unless it was published already. One beyond the next (the log
    /// could not be read to fill the gap) is published all the same: subscribers read a
    /// gap from the log.
    pub(super) fn send(&mut self, event: Arc<Event>) {
        if event.seq <= *self.published {
            return;
        }
        *self.published = event.seq;
        self.publisher.seen.store(event.seq, Ordering::Relaxed);
        let _ = self.publisher.events.send(event);
    }

    /// Publishes what the log holds after the last published event, up to `upto` (or to
    /// its end), read on `client`. Stops at an unreadable event, saying so.
    pub(super) async fn read_log(
        &mut self,
        client: &Client,
        upto: Option<u64>,
    ) -> Result<(), tokio_postgres::Error> {
        while upto.is_none_or(|u| *self.published < u) {
            let after = *self.published as i64;
            let rows = client
                .query(
                    "SELECT seq, body, hash FROM events WHERE seq > $1 ORDER BY seq LIMIT $2",
                    &[&after, &PAGE],
                )
                .await?;
            let full = rows.len() as i64 == PAGE;
            for r in rows {
                let seq = r.get::<_, i64>(0) as u64;
                if upto.is_some_and(|u| seq > u) {
                    return Ok(());
                }
                match holdpoint_core::audit::open(r.get(1), r.get(2)) {
                    Ok(event) => self.send(Arc::new(event)),
                    Err(e) => {
                        tracing::error!(seq, error = %e, "an event in the log is unreadable");
                        return Ok(());
                    }
                }
            }
            if !full {
                return Ok(());
            }
        }
        Ok(())
    }
}
