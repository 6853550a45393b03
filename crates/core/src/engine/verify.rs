//! `audit verify`: the chain walked in pages, then what the store serves (holds, grants, and
//! each chat's messages and turns) compared with what the chain's events say, through the
//! store's own reads, so one check serves every store. A hold's stored row is checked whole:
//! its JSON against the log, and each column that listings, lookups and version checks
//! filter on (`HoldColumns`: open, status, world, chat, agent, tool, kind, batch, deadline…)
//! against that JSON.
//!
//! On a live store, what is read after the walk may have changed since (its events are past
//! the walk's end): a difference is looked at again after following the log on, a few times,
//! before it is called an edit.

use std::collections::{BTreeSet, HashSet};

use holdpoint_protocol::{ChatId, Grant, GrantId, Message, Turn};
use uuid::Uuid;

use super::Engine;
use crate::audit::state::{Checked, StateCheck};
use crate::audit::{ChainError, ChainVerifier, VerifyReport};
use crate::error::EngineError;
use crate::record::decode;
use crate::store::{
    HoldColumns, PAGE, Record, RecordKind, Store, StoreError, StoredHold, each_page,
};

/// Events read from the log at a time.
const EVENTS: usize = 1024;
/// How many times a difference is looked at again after following the log on.
const RECHECKS: usize = 3;

impl Engine {
    /// Walks the whole audit chain, and checks the store's state against it.
    pub async fn verify_audit(&self) -> Result<Result<VerifyReport, ChainError>, EngineError> {
        Ok(verify(self.inner.store.as_ref()).await?)
    }
}

/// Walks a store's audit chain, then checks that what it serves is what the chain says.
pub async fn verify(store: &dyn Store) -> Result<Result<VerifyReport, ChainError>, StoreError> {
    let mut walk = Walk {
        chain: ChainVerifier::new(),
        state: StateCheck::new(),
        at: 0,
    };
    if let Err(e) = walk.follow(store).await? {
        return Ok(Err(e));
    }
    let head = store.audit_head().await?;
    let mut report = match walk.chain.clone().finish(head) {
        Ok(r) => r,
        Err(e) => return Ok(Err(e)),
    };
    let mut checked = Checked::default();
    if let Err(e) = walk.holds_and_grants(store, &mut checked).await? {
        return Ok(Err(e));
    }
    if let Err(e) = walk.conversations(store, &mut checked).await? {
        return Ok(Err(e));
    }
    report.state = walk.state.finish(checked);
    Ok(Ok(report))
}

/// The chain and the state it describes, as far as the log has been read.
struct Walk {
    chain: ChainVerifier,
    state: StateCheck,
    at: u64,
}

/// A message the log did not account for, kept to be looked at again.
struct OddMessage {
    chat: String,
    id: Uuid,
    message: Message,
}

impl Walk {
    /// Reads the log from where the walk stands to its end.
    async fn follow(&mut self, store: &dyn Store) -> Result<Result<(), ChainError>, StoreError> {
        loop {
            let rows = store.raw_events(self.at, EVENTS).await?;
            for row in &rows {
                match self.chain.push(row) {
                    Ok(event) => self.state.observe(row.seq, &event),
                    Err(e) => return Ok(Err(e)),
                }
                self.at = row.seq;
            }
            if rows.len() < EVENTS {
                return Ok(Ok(()));
            }
        }
    }

    /// Follows the log on; whether it went further (something changed while the store was
    /// read), or the chain's error.
    async fn moved_on(
        &mut self,
        store: &dyn Store,
    ) -> Result<Result<bool, ChainError>, StoreError> {
        let before = self.at;
        Ok(self.follow(store).await?.map(|()| self.at != before))
    }

    async fn holds_and_grants(
        &mut self,
        store: &dyn Store,
        checked: &mut Checked,
    ) -> Result<Result<(), ChainError>, StoreError> {
        // Suspects by position: a hold's stored row is read again by it.
        let mut suspects = Vec::new();
        let read = |after, limit| store.stored_holds(after, limit);
        each_page(PAGE, read, |page| {
            checked.holds += page.len() as u64;
            for row in &page {
                if self.stored_hold_differs(&row.item).is_some() {
                    suspects.push(row.position);
                }
            }
        })
        .await?;
        let mut grants = store.grants(None).await?;
        let mut misfiled = grant_worlds_differ(store, &grants).await?;
        for _ in 0..RECHECKS {
            if suspects.is_empty()
                && self.state.grants_differ(&grants).is_empty()
                && misfiled.is_empty()
            {
                break;
            }
            match self.moved_on(store).await? {
                Ok(true) => {}
                Ok(false) => break,
                Err(e) => return Ok(Err(e)),
            }
            let mut still = Vec::new();
            for position in suspects {
                match stored_hold(store, position).await? {
                    Some(h) if self.stored_hold_differs(&h).is_none() => {}
                    _ => still.push(position),
                }
            }
            suspects = still;
            grants = store.grants(None).await?;
            misfiled = grant_worlds_differ(store, &grants).await?;
        }
        for position in suspects {
            self.hold_mismatch(store, position).await?;
        }
        let differ = self.state.grants_differ(&grants);
        checked.grants = grants.len() as u64;
        for (id, reason) in differ.into_iter().chain(misfiled) {
            self.state.mismatch("grant", id.to_string(), reason);
        }
        Ok(Ok(()))
    }

    async fn hold_mismatch(&mut self, store: &dyn Store, position: u64) -> Result<(), StoreError> {
        if let Some(h) = stored_hold(store, position).await?
            && let Some(reason) = self.stored_hold_differs(&h)
        {
            self.state.mismatch("hold", h.hold.id.to_string(), reason);
        }
        Ok(())
    }

    /// How a hold's stored row differs from what the log says: its JSON (as the store serves
    /// it) against the log's events, and each column that listings, lookups and version
    /// checks filter on against that JSON, so that a column edited alone (a decided hold
    /// marked open, listed as pending) shows, named.
    fn stored_hold_differs(&mut self, row: &StoredHold) -> Option<String> {
        let mut differ: Vec<String> = self.state.hold_differs(&row.hold).into_iter().collect();
        for (column, stored, wanted) in row.columns.differ(&HoldColumns::of(&row.hold)) {
            differ.push(format!(
                "its stored column `{column}` is {stored} but the hold says {wanted} (what \
                 filters on `{column}` finds it wrongly)"
            ));
        }
        (!differ.is_empty()).then(|| differ.join("; "))
    }

    /// Every chat's messages and turns (the tool results the LLM was given, each call's
    /// recorded result, how each turn ended), world by world.
    async fn conversations(
        &mut self,
        store: &dyn Store,
        checked: &mut Checked,
    ) -> Result<Result<(), ChainError>, StoreError> {
        let mut odd_messages = Vec::new();
        let mut odd_turns = Vec::new();
        for world in store.all_records(RecordKind::World, None).await? {
            for chat in store.all_records(RecordKind::Chat, Some(world.id)).await? {
                let name = ChatId::from_uuid(chat.id).to_string();
                let read =
                    |after, limit| store.records(RecordKind::Message, Some(chat.id), after, limit);
                each_page(PAGE, read, |page| {
                    checked.messages += page.len() as u64;
                    for record in &page {
                        self.message(&name, &record.item, &mut odd_messages);
                    }
                })
                .await?;
                for record in store.all_records(RecordKind::Turn, Some(chat.id)).await? {
                    checked.turns += 1;
                    if self.turn_differs(record).is_some() {
                        odd_turns.push(chat.id);
                    }
                }
            }
        }
        odd_turns.dedup();
        for _ in 0..RECHECKS {
            if odd_messages.is_empty() && odd_turns.is_empty() {
                break;
            }
            match self.moved_on(store).await? {
                Ok(true) => {}
                Ok(false) => break,
                Err(e) => return Ok(Err(e)),
            }
            odd_messages.retain(|m| self.state.message_differs(&m.chat, &m.message).is_some());
            let mut still = Vec::new();
            for chat in odd_turns {
                for record in store.all_records(RecordKind::Turn, Some(chat)).await? {
                    if self.turn_differs(record).is_some() {
                        still.push(chat);
                        break;
                    }
                }
            }
            odd_turns = still;
        }
        for m in odd_messages {
            if let Some(reason) = self.state.message_differs(&m.chat, &m.message) {
                self.state.mismatch("message", m.id.to_string(), reason);
            }
        }
        for chat in odd_turns {
            for record in store.all_records(RecordKind::Turn, Some(chat)).await? {
                let id = record.id;
                if let Some(reason) = self.turn_differs(record) {
                    self.state.mismatch("turn", id.to_string(), reason);
                }
            }
        }
        Ok(Ok(()))
    }

    /// Takes a served message into the check; one the log does not account for (yet) is kept.
    fn message(&mut self, chat: &str, record: &Record, odd: &mut Vec<OddMessage>) {
        match decode::<Message>(record.clone()) {
            Ok(message) => {
                if self.state.message_differs(chat, &message).is_some() {
                    odd.push(OddMessage {
                        chat: chat.to_owned(),
                        id: record.id,
                        message,
                    });
                }
            }
            Err(e) => self
                .state
                .mismatch("message", record.id.to_string(), e.to_string()),
        }
    }

    fn turn_differs(&self, record: Record) -> Option<String> {
        match decode::<Turn>(record) {
            Ok(turn) => self.state.turn_differs(&turn),
            Err(e) => Some(e.to_string()),
        }
    }
}

/// The hold stored at `position`, if it is still there.
async fn stored_hold(store: &dyn Store, position: u64) -> Result<Option<StoredHold>, StoreError> {
    let page = store
        .stored_holds(Some(position.saturating_sub(1)), 1)
        .await?;
    Ok(page
        .into_iter()
        .find(|row| row.position == position)
        .map(|row| row.item))
}

/// Active grants that the listing of their world's grants (filtered on the stored `world`
/// column) leaves out: a grant whose column was edited, to whatever world, is one.
async fn grant_worlds_differ(
    store: &dyn Store,
    grants: &[Grant],
) -> Result<Vec<(GrantId, String)>, StoreError> {
    let worlds: BTreeSet<&str> = grants.iter().map(|g| g.world.as_str()).collect();
    let mut out = Vec::new();
    for world in worlds {
        let listed = store.grants(Some(world)).await?;
        let ids: HashSet<GrantId> = listed.iter().map(|g| g.id).collect();
        for g in grants
            .iter()
            .filter(|g| g.world == world && !ids.contains(&g.id))
        {
            out.push((
                g.id,
                format!(
                    "its stored column `world` is not {world:?}, the grant's world: the \
                     listing of {world:?}'s grants leaves it out"
                ),
            ));
        }
    }
    Ok(out)
}
