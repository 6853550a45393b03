//! Typed runtime entities over the store's opaque records.

use holdpoint_core::store::{Record, RecordKind, StoreError, Write};
use serde::Serialize;
use serde::de::DeserializeOwned;
use uuid::Uuid;

/// A record of `kind` holding `value`.
pub(crate) fn record<T: Serialize>(
    kind: RecordKind,
    id: Uuid,
    parent: Option<Uuid>,
    key: Option<String>,
    version: u64,
    value: &T,
) -> Result<Record, StoreError> {
    let data = serde_json::to_value(value).map_err(StoreError::new)?;
    Ok(Record {
        kind,
        id,
        parent,
        key,
        version,
        data,
    })
}

pub(crate) fn put<T: Serialize>(
    kind: RecordKind,
    id: Uuid,
    parent: Option<Uuid>,
    key: Option<String>,
    version: u64,
    value: &T,
) -> Result<Write, StoreError> {
    Ok(Write::PutRecord(Box::new(record(
        kind, id, parent, key, version, value,
    )?)))
}

pub(crate) fn value<T: DeserializeOwned>(r: Record) -> Result<T, StoreError> {
    serde_json::from_value(r.data)
        .map_err(|e| StoreError(format!("a stored {} is unreadable: {e}", r.kind.as_str())))
}
