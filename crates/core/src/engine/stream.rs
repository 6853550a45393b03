//! A resumable stream of committed events: first what the log holds after a position, then
//! live events, with gaps (a slow reader, a missed notification) filled from the log.

use std::collections::VecDeque;
use std::sync::Arc;

use holdpoint_protocol::Event;
use tokio::sync::broadcast::{Receiver, error::RecvError};

use crate::store::{EventFilter, Store, StoreError};

const PAGE: usize = 256;

pub struct EventStream {
    store: Arc<dyn Store>,
    rx: Receiver<Arc<Event>>,
    filter: EventFilter,
    /// Every event with `seq <= cursor` has been considered.
    cursor: u64,
    backlog: VecDeque<Arc<Event>>,
    catching_up: bool,
}

impl std::fmt::Debug for EventStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventStream")
            .field("cursor", &self.cursor)
            .finish_non_exhaustive()
    }
}

impl EventStream {
    pub(crate) fn new(
        store: Arc<dyn Store>,
        rx: Receiver<Arc<Event>>,
        filter: EventFilter,
        cursor: u64,
        catching_up: bool,
    ) -> Self {
        EventStream {
            store,
            rx,
            filter,
            cursor,
            backlog: VecDeque::new(),
            catching_up,
        }
    }

    /// The next matching event, in log order.
    pub async fn next(&mut self) -> Result<Arc<Event>, StoreError> {
        loop {
            if let Some(e) = self.backlog.pop_front() {
                return Ok(e);
            }
            if self.catching_up {
                let page = self.store.events(self.cursor, &self.filter, PAGE).await?;
                self.cursor = self.cursor.max(page.scanned_to);
                self.catching_up = page.events.len() == PAGE;
                self.backlog.extend(page.events);
                continue;
            }
            match self.rx.recv().await {
                Ok(e) if e.seq <= self.cursor => {}
                Ok(e) if e.seq == self.cursor + 1 => {
                    self.cursor = e.seq;
                    if self.filter.matches(&e) {
                        return Ok(e);
                    }
                }
                Ok(_) | Err(RecvError::Lagged(_)) => self.catching_up = true,
                Err(RecvError::Closed) => return Err(StoreError::new("the store was closed")),
            }
        }
    }

    /// The position up to which the log has been considered (for `Last-Event-ID`).
    pub fn cursor(&self) -> u64 {
        self.cursor
    }
}
