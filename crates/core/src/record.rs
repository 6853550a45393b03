//! Typed records: the one place where an entity becomes a store [`Record`] and back.
//!
//! A store keeps records as opaque JSON under a kind; it never sees a world, a token or a
//! webhook. Every layer that keeps entities in records — the runtime's worlds, agents, chats
//! and turns, the server's tokens, browser sessions and webhooks — encodes, decodes, reads and
//! commits them through this module, so a store has one contract to satisfy (the record
//! methods of [`Store`]) and an entity is never encoded two ways.

use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;
use uuid::Uuid;

use crate::audit::EventDraft;
use crate::store::{
    CommitError, Positioned, Record, RecordKind, Store, StoreError, Transaction, Write,
};

/// `value` as a record of `kind`.
pub fn encode<T: Serialize>(
    kind: RecordKind,
    id: Uuid,
    parent: Option<Uuid>,
    key: Option<String>,
    version: u64,
    value: &T,
) -> Result<Record, StoreError> {
    let data = serde_json::to_value(value)
        .map_err(|e| StoreError::new(format!("a {} cannot be stored: {e}", kind.as_str())))?;
    Ok(Record {
        kind,
        id,
        parent,
        key,
        version,
        data,
    })
}

/// The write that stores `value` as a record of `kind` at `version` (1 creates it).
pub fn put<T: Serialize>(
    kind: RecordKind,
    id: Uuid,
    parent: Option<Uuid>,
    key: Option<String>,
    version: u64,
    value: &T,
) -> Result<Write, StoreError> {
    Ok(Write::PutRecord(Box::new(encode(
        kind, id, parent, key, version, value,
    )?)))
}

/// The entity a record holds.
pub fn decode<T: DeserializeOwned>(r: Record) -> Result<T, StoreError> {
    serde_json::from_value(r.data)
        .map_err(|e| StoreError::new(format!("a stored {} is unreadable: {e}", r.kind.as_str())))
}

/// Typed reads of a store's records, and commits of record writes with the events that
/// record them. Cheap to clone.
#[derive(Clone)]
pub struct Records {
    store: Arc<dyn Store>,
}

impl Records {
    pub fn new(store: Arc<dyn Store>) -> Self {
        Records { store }
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// The record of `kind` with `id`, decoded.
    pub async fn get<T: DeserializeOwned>(
        &self,
        kind: RecordKind,
        id: Uuid,
    ) -> Result<Option<T>, StoreError> {
        self.store.record(kind, id).await?.map(decode).transpose()
    }

    /// Whether a record of `kind` with `id` exists.
    pub async fn exists(&self, kind: RecordKind, id: Uuid) -> Result<bool, StoreError> {
        Ok(self.store.record(kind, id).await?.is_some())
    }

    /// The record of `kind` under `parent` with `key`, with its id and version.
    pub async fn by_key<T: DeserializeOwned>(
        &self,
        kind: RecordKind,
        parent: Option<Uuid>,
        key: &str,
    ) -> Result<Option<Keyed<T>>, StoreError> {
        let Some(r) = self.store.record_by_key(kind, parent, key).await? else {
            return Ok(None);
        };
        let (id, version) = (r.id, r.version);
        Ok(Some(Keyed {
            id,
            version,
            value: decode(r)?,
        }))
    }

    /// Every record of `kind` under `parent`, oldest first, read to the end
    /// ([`Store::all_records`]).
    pub async fn all<T: DeserializeOwned>(
        &self,
        kind: RecordKind,
        parent: Option<Uuid>,
    ) -> Result<Vec<T>, StoreError> {
        let records = self.store.all_records(kind, parent).await?;
        records.into_iter().map(decode).collect()
    }

    /// Every record of `kind` under `parent` with its id and version, oldest first, read to
    /// the end: for acting on each of them (deleting, updating at its version).
    pub async fn all_keyed<T: DeserializeOwned>(
        &self,
        kind: RecordKind,
        parent: Option<Uuid>,
    ) -> Result<Vec<Keyed<T>>, StoreError> {
        let records = self.store.all_records(kind, parent).await?;
        records
            .into_iter()
            .map(|r| {
                let (id, version) = (r.id, r.version);
                Ok(Keyed {
                    id,
                    version,
                    value: decode(r)?,
                })
            })
            .collect()
    }

    /// One page of the records of `kind` under `parent`, after position `after`.
    pub async fn page<T: DeserializeOwned>(
        &self,
        kind: RecordKind,
        parent: Option<Uuid>,
        after: Option<u64>,
        limit: usize,
    ) -> Result<Vec<Positioned<T>>, StoreError> {
        let page = self.store.records(kind, parent, after, limit).await?;
        page.into_iter()
            .map(|p| {
                Ok(Positioned {
                    position: p.position,
                    item: decode(p.item)?,
                })
            })
            .collect()
    }

    /// Commits `writes` and the events that record them, atomically.
    pub async fn commit(
        &self,
        writes: Vec<Write>,
        events: Vec<EventDraft>,
    ) -> Result<(), CommitError> {
        let tx = Transaction {
            writes,
            events: events.into_iter().map(Into::into).collect(),
        };
        self.store.commit(tx).await.map(|_| ())
    }
}

/// A record found by its key: the entity, with what it takes to replace or delete it.
#[derive(Debug, Clone, PartialEq)]
pub struct Keyed<T> {
    pub id: Uuid,
    pub version: u64,
    pub value: T,
}
