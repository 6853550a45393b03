//! The tail: what other nodes commit, published to this process's subscribers.
//!
//! Every group that appends events sends `NOTIFY holdpoint_events` in its transaction
//! (delivered at commit, with the new head's sequence number as payload). The tail listens
//! on a connection of its own; a notification only wakes it, and it reads the log after the
//! last event published. Notifications sent while it was not listening are lost, so it reads
//! again after every (re)connection, and every second anyway as a backstop.

use std::future::poll_fn;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::MissedTickBehavior;
use tokio_postgres::{AsyncMessage, Client, NoTls, Notification};

use super::conn::Target;
use super::publish::Publisher;

/// The channel every writer notifies and every tail listens on.
pub(super) const CHANNEL: &str = "holdpoint_events";
/// How often the log is read with no notification.
const POLL: Duration = Duration::from_secs(1);
/// The first and the longest wait before connecting again.
const RETRY: (Duration, Duration) = (Duration::from_millis(100), Duration::from_secs(2));

/// Follows the log until the task is aborted.
pub(super) async fn run(target: Target, publisher: Arc<Publisher>) {
    let mut retry = RETRY.0;
    loop {
        match listen(&target).await {
            Ok((client, notes)) => {
                retry = RETRY.0;
                follow(&client, notes, &publisher).await;
                tracing::warn!("the connection listening for other nodes' events was lost");
            }
            Err(e) => tracing::warn!(error = %e, "cannot listen for other nodes' events"),
        }
        tokio::time::sleep(retry).await;
        retry = (retry * 2).min(RETRY.1);
    }
}

/// A connection listening on [`CHANNEL`], and its notifications.
async fn listen(
    target: &Target,
) -> Result<(Client, mpsc::UnboundedReceiver<Notification>), String> {
    let (client, mut connection) = target
        .config
        .connect(NoTls)
        .await
        .map_err(|e| target.explain(&e))?;
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        // Polling the connection's messages is what drives it; it ends when the client is
        // dropped or the connection is lost, and the receiver then sees the channel close.
        while let Some(message) = poll_fn(|cx| connection.poll_message(cx)).await {
            match message {
                Ok(AsyncMessage::Notification(n)) => {
                    if tx.send(n).is_err() {
                        return;
                    }
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "the listening connection failed");
                    return;
                }
            }
        }
    });
    client
        .batch_execute(&format!("LISTEN {CHANNEL}"))
        .await
        .map_err(|e| target.explain(&e))?;
    Ok((client, rx))
}

/// Publishes from the log on each notification of events not yet published, on each poll,
/// and first of all (what was committed while not listening). Returns when the connection
/// is lost.
async fn follow(
    client: &Client,
    mut notes: mpsc::UnboundedReceiver<Notification>,
    publisher: &Publisher,
) {
    let mut poll = tokio::time::interval(POLL);
    poll.set_missed_tick_behavior(MissedTickBehavior::Delay);
    poll.reset();
    let mut read = true;
    loop {
        if read {
            let result = publisher.lock().await.read_log(client, None).await;
            if let Err(e) = result {
                if client.is_closed() {
                    return;
                }
                tracing::warn!(error = %e, "cannot read the log to publish what others wrote");
            }
        }
        read = tokio::select! {
            note = notes.recv() => match note {
                Some(n) => publisher.may_be_new(n.process_id(), n.payload().parse().ok()),
                None => return,
            },
            _ = poll.tick() => true,
        };
    }
}
