//! Groups of transactions, as both stores' writers commit them: what is queued behind the
//! transaction a writer waited for is committed with it, one durable commit (SQLite's fsync,
//! PostgreSQL's WAL flush) for all, which is what makes durable writes fast under
//! concurrency. The writers differ in how they wait and how they commit; gathering a group,
//! sealing its answers and failing it as a whole are the same for both, and written here.

use std::sync::Arc;

use holdpoint_core::store::{CommitError, Conflict, PreparedEvent, StoreError};
use holdpoint_protocol::Event;

use crate::rows::{Job, Message};

/// The most transactions committed together.
pub(crate) const MAX_GROUP: usize = 512;

/// A writer's queue, read without waiting. Implemented for the channel of each writer, so
/// that gathering a group costs no more than the loop each writer had of its own.
pub(crate) trait Queue {
    /// The next message already queued; `None` when there is none now or the senders are
    /// gone (the writer then stops when it next waits).
    fn try_next(&mut self) -> Option<Message>;
}

/// The SQLite writer's channel (it waits on its own thread).
impl Queue for std::sync::mpsc::Receiver<Message> {
    fn try_next(&mut self) -> Option<Message> {
        self.try_recv().ok()
    }
}

/// The PostgreSQL writer's channel (it waits on a runtime of its own).
impl Queue for tokio::sync::mpsc::UnboundedReceiver<Message> {
    fn try_next(&mut self) -> Option<Message> {
        self.try_recv().ok()
    }
}

/// The transactions to commit together.
pub(crate) struct Group {
    pub(crate) jobs: Vec<Job>,
    /// The store asked to close behind these: the writer commits them, then stops.
    pub(crate) closing: bool,
}

/// A group starting with `first`, the message the writer waited for, and taking what is
/// already queued behind it, up to [`MAX_GROUP`] transactions; `None` when `first` closes
/// the store. It stops at a close, so that nothing sent after it is committed.
pub(crate) fn gather(first: Message, queue: &mut impl Queue) -> Option<Group> {
    let Message::Commit(first) = first else {
        return None;
    };
    let mut jobs = vec![first];
    let mut closing = false;
    while jobs.len() < MAX_GROUP {
        match queue.try_next() {
            Some(Message::Commit(job)) => jobs.push(job),
            Some(Message::Close) => {
                closing = true;
                break;
            }
            None => break,
        }
    }
    Some(Group { jobs, closing })
}

/// A job's answer once its group committed: its events, sealed at the positions and with
/// the hashes the group gave them, or the precondition that failed.
pub(crate) fn answer(
    events: Vec<PreparedEvent>,
    sealed: Result<Vec<(u64, String)>, Conflict>,
) -> Result<Vec<Arc<Event>>, CommitError> {
    sealed.map_err(CommitError::Conflict).map(|sealed| {
        events
            .into_iter()
            .zip(sealed)
            .map(|(e, (seq, hash))| Arc::new(e.draft.into_event(seq, hash)))
            .collect()
    })
}

/// Answers every job of a group that was not committed with `error`.
pub(crate) fn fail(jobs: Vec<Job>, error: &StoreError) {
    for job in jobs {
        let _ = job.reply.send(Err(CommitError::Store(error.clone())));
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;

    use super::*;

    fn commit() -> Message {
        Message::Commit(Job {
            writes: Vec::new(),
            events: Vec::new(),
            reply: tokio::sync::oneshot::channel().0,
            allowed_short: false,
            written: None,
        })
    }

    #[test]
    fn a_group_takes_what_is_queued_up_to_the_limit() {
        let (tx, mut rx) = mpsc::channel();
        for _ in 0..MAX_GROUP + 3 {
            tx.send(commit()).unwrap();
        }
        let first = rx.recv().unwrap();
        let group = gather(first, &mut rx).unwrap();
        assert_eq!((group.jobs.len(), group.closing), (MAX_GROUP, false));
        let first = rx.recv().unwrap();
        let group = gather(first, &mut rx).unwrap();
        assert_eq!((group.jobs.len(), group.closing), (3, false));
    }

    #[test]
    fn a_group_stops_at_a_close() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        for message in [commit(), commit(), Message::Close, commit()] {
            tx.send(message).unwrap();
        }
        let first = rx.try_recv().unwrap();
        let group = gather(first, &mut rx).unwrap();
        assert_eq!((group.jobs.len(), group.closing), (2, true));
        assert!(gather(Message::Close, &mut rx).is_none());
    }
}
