//! Folds the WAL back into the database file on its own thread and connection, so that the
//! writer neither copies pages nor waits for the database file's fsync between commits.
//!
//! SQLite lets a checkpoint run while the writer appends. Under sustained load, though, a
//! checkpoint racing the writer never catches up with the end of the WAL, and the WAL only
//! starts over once everything in it has been copied; so past a bound the writer runs a
//! (by then short) checkpoint itself, between two commits (see writer.rs).

use std::path::Path;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::thread::JoinHandle;

use rusqlite::Connection;
use rusqlite::wal::CheckpointMode;

pub(super) struct Checkpointer {
    nudge: SyncSender<()>,
    thread: JoinHandle<()>,
}

impl Checkpointer {
    pub(super) fn spawn(path: &Path) -> Result<Checkpointer, String> {
        let conn = super::connect(path, false)?;
        // One pending nudge is enough: the checkpoint it starts covers every commit so far.
        let (nudge, rx) = std::sync::mpsc::sync_channel(1);
        let thread = std::thread::Builder::new()
            .name("holdpoint-ckpt".into())
            .spawn(move || run(&conn, &rx))
            .map_err(|e| e.to_string())?;
        Ok(Checkpointer { nudge, thread })
    }

    /// Asks for a checkpoint soon; never blocks.
    pub(super) fn nudge(&self) {
        match self.nudge.try_send(()) {
            Ok(()) | Err(TrySendError::Full(())) | Err(TrySendError::Disconnected(())) => {}
        }
    }

    /// Lets a running checkpoint finish and stops the thread.
    pub(super) fn stop(self) {
        drop(self.nudge);
        let _ = self.thread.join();
    }
}

fn run(conn: &Connection, nudges: &Receiver<()>) {
    while nudges.recv().is_ok() {
        if let Err(e) = passive(conn) {
            tracing::warn!(error = %e, "checkpoint failed");
        }
    }
}

/// Copies what it can of the WAL into the database without blocking anyone. Another
/// checkpoint already running is not an error: it does the same work.
pub(super) fn passive(conn: &Connection) -> rusqlite::Result<()> {
    match conn.wal_checkpoint_v2(None::<&str>, CheckpointMode::PASSIVE) {
        Err(rusqlite::Error::SqliteFailure(e, _))
            if e.code == rusqlite::ErrorCode::DatabaseBusy =>
        {
            Ok(())
        }
        other => other.map(|_| ()),
    }
}
