//! Makes commits durable. The writer commits a group without waiting for the disk and hands
//! it over; this thread fsyncs the WAL (which covers every group committed so far), then
//! publishes the groups' events and answers their callers, in log order. While it waits for
//! the disk, the writer is already applying the next group.
//!
//! A failed fsync leaves it unknown what reached the disk, so the store then refuses all
//! further commits rather than acknowledging anything it cannot vouch for.

use std::fs::File;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::thread::JoinHandle;

use holdpoint_core::store::{CommitError, StoreError};
use holdpoint_protocol::Event;
use tokio::sync::broadcast;

use super::writer::Reply;

/// One transaction's answer, to be given once it is durable.
pub(super) type Answer = (Reply, Result<Vec<Arc<Event>>, CommitError>);

pub(super) fn spawn(
    wal: PathBuf,
    events: broadcast::Sender<Arc<Event>>,
    failed: Arc<AtomicBool>,
) -> std::io::Result<(Sender<Vec<Answer>>, JoinHandle<()>)> {
    let (tx, rx) = std::sync::mpsc::channel();
    let thread = std::thread::Builder::new()
        .name("holdpoint-sqlite-sync".into())
        .spawn(move || run(&wal, &rx, &events, &failed))?;
    Ok((tx, thread))
}

fn run(
    wal: &PathBuf,
    rx: &Receiver<Vec<Answer>>,
    events: &broadcast::Sender<Arc<Event>>,
    failed: &AtomicBool,
) {
    let mut file: Option<File> = None;
    while let Ok(first) = rx.recv() {
        let mut groups = vec![first];
        groups.extend(rx.try_iter());
        let synced = match &file {
            Some(f) => f.sync_data(),
            None => File::options().write(true).open(wal).and_then(|f| {
                let r = f.sync_data();
                file = Some(f);
                r
            }),
        };
        if let Err(e) = synced {
            failed.store(true, Ordering::SeqCst);
            tracing::error!(error = %e, "could not sync the WAL; the store refuses further writes");
            let error = StoreError::new(format!(
                "the commit could not be made durable ({e}); the store refuses further writes"
            ));
            for (reply, _) in groups.into_iter().flatten() {
                let _ = reply.send(Err(CommitError::Store(error.clone())));
            }
            continue;
        }
        for (reply, result) in groups.into_iter().flatten() {
            if let Ok(committed) = &result {
                for e in committed {
                    // No subscribers is fine.
                    let _ = events.send(e.clone());
                }
            }
            let _ = reply.send(result);
        }
    }
}
