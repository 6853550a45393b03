//! The writer's statements, prepared on each connection it opens.

use std::collections::HashMap;

use holdpoint_core::store::StoreError;
use tokio_postgres::{Client, Statement};

use crate::pg::catalog::MOVE_VERSION;
use crate::pg::pipeline::{Step, in_order};

pub(super) const HOLD_EXISTS: &str = "SELECT 1 FROM holds WHERE id = $1";
pub(super) const HOLD_VERSION: &str = "SELECT version FROM holds WHERE id = $1";
pub(super) const GRANT_LIVE: &str = "SELECT data FROM grants WHERE id = $1 AND revoked_at IS NULL";
pub(super) const IDEMPOTENT_EXISTS: &str = "SELECT 1 FROM idempotency WHERE key = $1";
pub(super) const RECORD_VERSION: &str = "SELECT version FROM records WHERE kind = $1 AND id = $2";
pub(super) const RECORD_HOLDER: &str =
    "SELECT id FROM records WHERE kind = $1 AND parent = $2 AND key = $3";
pub(super) const INSERT_HOLD: &str = "INSERT INTO holds (id, batch, world, raiser, chat, agent, tool, kind, status, open, deadline, remind_at, version, data) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)";
// A conditional write that must change exactly one row fails when it changes none (a
// division by zero): the error aborts the transaction, so the `COMMIT` pipelined after it
// rolls the group back rather than commit the rest without it.
pub(super) const UPDATE_HOLD: &str = "WITH changed AS (UPDATE holds SET status = $1, open = $2, remind_at = $3, version = $4, data = $5 \
     WHERE id = $6 AND version = $7 RETURNING 1) SELECT 1 / count(*) FROM changed";
pub(super) const INSERT_GRANT: &str =
    "INSERT INTO grants (id, world, revoked_at, data) VALUES ($1, $2, NULL, $3)";
pub(super) const REVOKE_GRANT: &str = "UPDATE grants SET revoked_at = $1, data = $2 WHERE id = $3";
pub(super) const INSERT_RECORD: &str =
    "INSERT INTO records (kind, id, parent, key, version, data) VALUES ($1, $2, $3, $4, $5, $6)";
pub(super) const UPDATE_RECORD: &str = "WITH changed AS (UPDATE records SET key = $1, version = $2, data = $3 \
     WHERE kind = $4 AND id = $5 AND version = $6 RETURNING 1) SELECT 1 / count(*) FROM changed";
pub(super) const DELETE_RECORD: &str = "DELETE FROM records WHERE kind = $1 AND id = $2";
pub(super) const DELETE_RECORDS: &str = "DELETE FROM records WHERE kind = $1 AND parent = $2";
pub(super) const INSERT_IDEMPOTENT: &str =
    "INSERT INTO idempotency (key, fingerprint, response, created_at) VALUES ($1, $2, $3, $4)";
pub(super) const FORGET_IDEMPOTENT: &str =
    "DELETE FROM idempotency WHERE key = $1 AND created_at < $2";
/// A group's events and the new head in one statement.
pub(super) const APPEND_EVENTS: &str = "WITH appended AS (INSERT INTO events (seq, type, hold, world, chat, body, hash) \
     SELECT * FROM unnest($1::bigint[], $2::text[], $3::uuid[], $4::text[], $5::text[], $6::text[], $7::text[])) \
     UPDATE audit_head SET seq = $8, hash = $9 WHERE id = 1";
/// The same, the head moved only from the one expected (taking its lock; a failure when
/// another writer moved it), for a group written without reading first.
pub(super) const APPEND_AT_HEAD: &str = "WITH moved AS (UPDATE audit_head SET seq = $8, hash = $9 WHERE id = 1 AND seq = $10 AND hash = $11 RETURNING 1), \
     appended AS (INSERT INTO events (seq, type, hold, world, chat, body, hash) \
     SELECT * FROM unnest($1::bigint[], $2::text[], $3::uuid[], $4::text[], $5::text[], $6::text[], $7::text[])) \
     SELECT 1 / count(*) FROM moved";
/// Every statement the writer runs.
const STATEMENTS: [&str; 19] = [
    MOVE_VERSION,
    HOLD_EXISTS,
    HOLD_VERSION,
    GRANT_LIVE,
    IDEMPOTENT_EXISTS,
    RECORD_VERSION,
    RECORD_HOLDER,
    INSERT_HOLD,
    UPDATE_HOLD,
    INSERT_GRANT,
    REVOKE_GRANT,
    INSERT_RECORD,
    UPDATE_RECORD,
    DELETE_RECORD,
    DELETE_RECORDS,
    INSERT_IDEMPOTENT,
    FORGET_IDEMPOTENT,
    APPEND_EVENTS,
    APPEND_AT_HEAD,
];

/// Prepares every statement the writer runs on a newly opened connection, in one
/// round trip, so that a group's statements can be pipelined.
pub(super) async fn prepare(
    client: &Client,
) -> Result<HashMap<&'static str, Statement>, StoreError> {
    let steps = STATEMENTS
        .iter()
        .map(|&sql| {
            Box::pin(async move { client.prepare(sql).await.map(|s| (sql, s)) }) as Step<'_, _, _>
        })
        .collect();
    let prepared = in_order(steps)
        .await
        .map_err(|e| StoreError::new(format!("cannot prepare the writer's statements: {e}")))?;
    Ok(prepared.into_iter().collect())
}
