//! Reading what the engine knows: holds, pages of holds, a hold's history, event streams,
//! grants and counts.

use std::sync::Arc;

use holdpoint_protocol::{
    Event, Grant, Hold, HoldCounts, HoldId, HoldQuery, Order, Page, StatusFilter, Timestamp,
};

use super::cursor::Cursor;
use super::{Engine, EventStream, Scope};
use crate::error::EngineError;
use crate::limits::{DEFAULT_PAGE, page_size};
use crate::store::{EventFilter, HoldFilter, StatusSet};

impl Engine {
    /// One hold, if it exists in `scope`. A resolved hold this node wrote lately is answered
    /// from memory (it never changes again), such as the one a wait just saw resolved.
    pub async fn hold(&self, id: HoldId, scope: &Scope) -> Result<Hold, EngineError> {
        let resolved = self
            .inner
            .recent
            .lock()
            .get(id)
            .filter(|h| h.outcome.is_some());
        let hold = match resolved {
            Some(h) => Some(Hold::clone(&h)),
            None => self.inner.store.hold(id).await?,
        };
        match hold {
            Some(h) if scope.admits(&h) => Ok(h),
            _ => Err(EngineError::NotFound {
                what: "hold",
                id: id.to_string(),
            }),
        }
    }

    /// When hold `id` was created. That never changes, so any version of it kept among the
    /// recent holds (this node's, and those it saw raised elsewhere) answers; else the store.
    pub async fn created_at(&self, id: HoldId) -> Result<Timestamp, EngineError> {
        let kept = self.inner.recent.lock().get(id).map(|h| h.created_at);
        match kept {
            Some(at) => Ok(at),
            None => Ok(self.hold(id, &Scope::any()).await?.created_at),
        }
    }

    /// A page of holds. Served by the store's indexes: the first page costs the same with
    /// ten pending holds or a hundred thousand.
    pub async fn holds(&self, query: &HoldQuery) -> Result<Page<Hold>, EngineError> {
        if query.chat.is_some() && query.world.is_none() {
            return Err(EngineError::invalid(
                "invalid_input",
                "chat",
                "filtering by chat needs a world",
            ));
        }
        let status = match query.status {
            StatusFilter::Open => StatusSet::Open,
            StatusFilter::Resolved => StatusSet::Resolved,
            StatusFilter::Any => StatusSet::Any,
            StatusFilter::Is(s) => StatusSet::Is(s),
        };
        if query.order == Order::Urgent && !status.open_only() {
            return Err(EngineError::invalid(
                "invalid_input",
                "order",
                "`urgent` lists open holds only (status pending or awaiting_confirm): a resolved hold has no deadline left",
            ));
        }
        let max = self.inner.limits.page;
        let limit = page_size(query.limit, DEFAULT_PAGE.min(max), max)?;
        let after = match &query.cursor {
            None => None,
            Some(c) => Some(Cursor::decode(c, query.order).ok_or_else(|| {
                EngineError::invalid(
                    "invalid_input",
                    "cursor",
                    "not a cursor returned by a previous page in this order",
                )
            })?),
        };
        let filter = HoldFilter {
            world: query.world.clone(),
            chat: query.chat.clone(),
            status,
            kind: query.kind,
            batch: query.batch,
            agent: query.agent.clone(),
            tool: query.tool.clone(),
            order: query.order,
            after: after.map(|c| c.position),
            after_deadline: after.and_then(|c| c.deadline),
            limit: limit + 1,
        };
        let mut rows = self.inner.store.holds(&filter).await?;
        let next = if rows.len() > limit {
            rows.truncate(limit);
            rows.last()
                .map(|r| Cursor::after(r.position, &r.item).encode(query.order))
        } else {
            None
        };
        Ok(Page {
            items: rows.into_iter().map(|r| r.item).collect(),
            next,
        })
    }

    /// How many holds are open, in all and by world and kind; of one world (its id), or of
    /// all. One counting query of the store, whatever the number of holds.
    pub async fn hold_counts(&self, world: Option<&str>) -> Result<HoldCounts, EngineError> {
        let worlds = self.inner.store.open_hold_counts(world).await?;
        Ok(HoldCounts {
            pending: worlds.iter().map(|c| c.pending).sum(),
            worlds,
        })
    }

    /// Every event about a hold, oldest first: its history.
    pub async fn history(&self, id: HoldId, scope: &Scope) -> Result<Vec<Arc<Event>>, EngineError> {
        self.hold(id, scope).await?;
        let filter = EventFilter {
            hold: Some(id),
            ..EventFilter::default()
        };
        Ok(self.inner.store.all_events(&filter).await?)
    }

    /// Whether new user messages to the chat are refused (a hold is open in it).
    pub async fn chat_locked(&self, world: &str, chat: &str) -> Result<bool, EngineError> {
        Ok(self.inner.store.chat_has_open_hold(world, chat).await?)
    }

    /// Committed events after `after` (or from now on, with `None`), filtered. Resumable:
    /// reconnecting with the last `seq` seen replays exactly what was missed.
    pub async fn events(
        &self,
        after: Option<u64>,
        filter: EventFilter,
    ) -> Result<EventStream, EngineError> {
        let rx = self.inner.store.subscribe();
        let (cursor, catching_up) = match after {
            Some(seq) => (seq, true),
            None => (
                self.inner.store.audit_head().await?.map_or(0, |h| h.seq),
                false,
            ),
        };
        Ok(EventStream::new(
            self.inner.store.clone(),
            rx,
            filter,
            cursor,
            catching_up,
        ))
    }

    /// Grants of a world (or of all) not revoked; those whose time is up say `expired`.
    pub async fn grants(&self, world: Option<&str>) -> Result<Vec<Grant>, EngineError> {
        let now = self.now();
        let mut grants = self.inner.store.grants(world).await?;
        for g in &mut grants {
            g.expired = g.expires_at.is_some_and(|end| end <= now);
        }
        Ok(grants)
    }

    /// Holds not yet resolved, as far as the applied log tells.
    pub fn open_holds(&self) -> u64 {
        self.inner.open.lock().total()
    }

    /// Timers set: open holds' deadlines, and their reminders not sent yet (for tests and
    /// benchmarks).
    pub fn tracked_timers(&self) -> usize {
        self.inner.open.lock().timers()
    }
}
