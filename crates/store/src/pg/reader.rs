//! Reads. Each is one statement (one snapshot, one round trip) on a readers' connection.

use std::ops::RangeInclusive;
use std::sync::Arc;

use holdpoint_core::audit::{self, AuditHead, RawEvent};
use holdpoint_core::store::{
    EventFilter, EventPage, HoldColumns, HoldFilter, MarkNames, OpenMark, Positioned, Record,
    RecordKind, StatusSet, StoreError, StoredHold,
};
use holdpoint_protocol::{
    BatchId, Grant, GrantId, Hold, HoldCount, HoldId, HoldKind, Order, Timestamp,
};
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;
use uuid::Uuid;

use super::conn::{Conn, sql_error};
use crate::pages::{self, Part};

type Param = Box<dyn ToSql + Sync + Send>;

fn parse<T: serde::de::DeserializeOwned>(what: &str, data: &str) -> Result<T, StoreError> {
    serde_json::from_str(data)
        .map_err(|e| StoreError::new(format!("a stored {what} is unreadable: {e}")))
}

fn count(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// A record's parent as stored: the nil uuid for none.
pub(super) fn parent_key(parent: Option<Uuid>) -> Uuid {
    parent.unwrap_or(Uuid::nil())
}

async fn rows(conn: &Conn, sql: &str, params: &[Param]) -> Result<Vec<Row>, StoreError> {
    let refs: Vec<&(dyn ToSql + Sync)> = params.iter().map(|p| p.as_ref() as _).collect();
    conn.query(sql, &refs).await.map_err(sql_error)
}

pub(super) async fn hold(conn: &Conn, id: HoldId) -> Result<Option<Hold>, StoreError> {
    let row = conn
        .query_opt("SELECT data FROM holds WHERE id = $1", &[id.as_uuid()])
        .await
        .map_err(sql_error)?;
    row.map(|r| parse("hold", r.get(0))).transpose()
}

/// Holds' stored rows by position (the primary key: no index the check is about is used).
pub(super) async fn stored_holds(
    conn: &Conn,
    after: Option<u64>,
    limit: usize,
) -> Result<Vec<Positioned<StoredHold>>, StoreError> {
    let after = after.map_or(0, |a| i64::try_from(a).unwrap_or(i64::MAX));
    let rows = conn
        .query(
            "SELECT position, id, batch, world, chat, agent, tool, kind, status, open, deadline, \
             remind_at, version, data, raiser FROM holds WHERE position > $1 ORDER BY position LIMIT $2",
            &[&after, &count(limit)],
        )
        .await
        .map_err(sql_error)?;
    rows.iter()
        .map(|r| {
            let hold: Hold = parse("hold", r.get(13))?;
            let columns = HoldColumns {
                id: HoldId::from_uuid(r.get(1)),
                batch: BatchId::from_uuid(r.get(2)),
                world: r.get(3),
                // A raiser stored as NULL is reported by the check as empty.
                raiser: r.get::<_, Option<String>>(14).unwrap_or_default(),
                chat: r.get(4),
                agent: r.get(5),
                tool: r.get(6),
                kind: r.get(7),
                status: r.get(8),
                open: r.get(9),
                deadline: r.get(10),
                remind_at: r.get(11),
                version: u64::try_from(r.get::<_, i64>(12)).unwrap_or(u64::MAX),
            };
            Ok(Positioned {
                position: u64::try_from(r.get::<_, i64>(0)).unwrap_or(0),
                item: StoredHold { columns, hold },
            })
        })
        .collect()
}

/// One page of holds. Each shape of filter is an equality prefix of one partial index
/// followed by `position` (or `deadline, position`), so PostgreSQL walks the index in order
/// and stops after `limit` rows.
pub(super) async fn holds(
    conn: &Conn,
    f: &HoldFilter,
) -> Result<Vec<Positioned<Hold>>, StoreError> {
    let parts = pages::parts(f)?;
    let mut out = Vec::new();
    for &part in parts {
        let limit = pages::part_limit(f, out.len());
        if limit == 0 {
            break;
        }
        let (sql, params) = hold_query(f, part, limit);
        for row in rows(conn, &sql, &params).await? {
            out.push(Positioned {
                position: row.get::<_, i64>(0) as u64,
                item: parse("hold", row.get(1))?,
            });
        }
    }
    pages::merge(f, parts, &mut out);
    Ok(out)
}

fn hold_query(f: &HoldFilter, part: Part, limit: usize) -> (String, Vec<Param>) {
    // `open` is written into the SQL, not bound, so that the planner can use the partial
    // indexes (and a prepared statement's generic plan still can).
    let mut sql = String::from(if part == Part::Resolved {
        "SELECT position, data FROM holds WHERE NOT open"
    } else {
        "SELECT position, data FROM holds WHERE open"
    });
    let mut params: Vec<Param> = Vec::new();
    let mut eq = |sql: &mut String, column: &str, value: Param| {
        params.push(value);
        sql.push_str(&format!(" AND {column} = ${}", params.len()));
    };
    if let Some(w) = &f.world {
        eq(&mut sql, "world", Box::new(w.clone()));
    }
    if let Some(c) = &f.chat {
        eq(&mut sql, "chat", Box::new(c.clone()));
    }
    if let Some(a) = &f.agent {
        eq(&mut sql, "agent", Box::new(a.clone()));
    }
    if let Some(t) = &f.tool {
        eq(&mut sql, "tool", Box::new(t.clone()));
    }
    if let Some(k) = f.kind {
        eq(&mut sql, "kind", Box::new(k.as_str()));
    }
    if let Some(b) = f.batch {
        eq(&mut sql, "batch", Box::new(*b.as_uuid()));
    }
    if let StatusSet::Is(s) = f.status {
        eq(&mut sql, "status", Box::new(s.as_str()));
    }
    let mut bind = |sql: &mut String, value: Param| {
        params.push(value);
        sql.push_str(&format!("${}", params.len()));
    };
    let order = match (part, f.order) {
        (Part::Due, _) => {
            sql.push_str(" AND deadline IS NOT NULL");
            if let (Some(after), Some(deadline)) = (f.after, f.after_deadline) {
                sql.push_str(" AND (deadline, position) > (");
                bind(&mut sql, Box::new(deadline.as_millis()));
                sql.push_str(", ");
                bind(&mut sql, Box::new(after as i64));
                sql.push(')');
            }
            "deadline, position"
        }
        (Part::Undated, _) => {
            sql.push_str(" AND deadline IS NULL");
            if let (Some(after), None) = (f.after, f.after_deadline) {
                sql.push_str(" AND position > ");
                bind(&mut sql, Box::new(after as i64));
            }
            "position"
        }
        (Part::Open | Part::Resolved, Order::Newest) => {
            if let Some(after) = f.after {
                sql.push_str(" AND position < ");
                bind(&mut sql, Box::new(after as i64));
            }
            "position DESC"
        }
        (Part::Open | Part::Resolved, Order::Oldest | Order::Urgent) => {
            if let Some(after) = f.after {
                sql.push_str(" AND position > ");
                bind(&mut sql, Box::new(after as i64));
            }
            "position"
        }
    };
    sql.push_str(&format!(" ORDER BY {order} LIMIT "));
    bind(&mut sql, Box::new(count(limit)));
    (sql, params)
}

pub(super) async fn batch(conn: &Conn, batch: BatchId) -> Result<Vec<Hold>, StoreError> {
    let rows = conn
        .query(
            "SELECT data FROM holds WHERE batch = $1 ORDER BY position",
            &[batch.as_uuid()],
        )
        .await
        .map_err(sql_error)?;
    rows.iter().map(|r| parse("hold", r.get(0))).collect()
}

pub(super) async fn chat_has_open_hold(
    conn: &Conn,
    world: &str,
    chat: &str,
) -> Result<bool, StoreError> {
    let row = conn
        .query_opt(
            "SELECT 1 FROM holds WHERE world = $1 AND chat = $2 AND open LIMIT 1",
            &[&world, &chat],
        )
        .await
        .map_err(sql_error)?;
    Ok(row.is_some())
}

/// Open holds' marks at `positions`, from the open holds' index (it carries the columns).
pub(super) async fn open_marks(
    conn: &Conn,
    positions: RangeInclusive<u64>,
    limit: usize,
) -> Result<Vec<Positioned<OpenMark>>, StoreError> {
    let (from, until) = pages::position_range(&positions);
    let rows = conn
        .query(
            "SELECT position, id, world, raiser, deadline, remind_at FROM holds \
             WHERE open AND position BETWEEN $1 AND $2 ORDER BY position LIMIT $3",
            &[&from, &until, &count(limit)],
        )
        .await
        .map_err(sql_error)?;
    let mut names = MarkNames::default();
    Ok(rows
        .iter()
        .map(|r| Positioned {
            position: r.get::<_, i64>(0) as u64,
            item: OpenMark {
                id: HoldId::from_uuid(r.get(1)),
                world: names.world(r.get(2)),
                requested_by: names.raiser(r.get::<_, Option<&str>>(3).unwrap_or_default()),
                deadline: r.get::<_, Option<i64>>(4).map(Timestamp::from_millis),
                remind_at: r.get::<_, Option<i64>>(5).map(Timestamp::from_millis),
            },
        })
        .collect())
}

/// The first and last open positions, from the open holds' index.
pub(super) async fn open_span(conn: &Conn) -> Result<Option<RangeInclusive<u64>>, StoreError> {
    let row = conn
        .query_opt(
            "SELECT min(position), max(position) FROM holds WHERE open",
            &[],
        )
        .await
        .map_err(sql_error)?;
    Ok(row.and_then(|r| {
        let (first, last): (Option<i64>, Option<i64>) = (r.get(0), r.get(1));
        first.zip(last).map(|(a, b)| a as u64..=b as u64)
    }))
}

/// The open holds by world and kind: a count over the open holds' partial index, never a
/// read of the holds themselves.
pub(super) async fn open_hold_counts(
    conn: &Conn,
    world: Option<&str>,
) -> Result<Vec<HoldCount>, StoreError> {
    let rows = match world {
        Some(w) => {
            conn.query(
                "SELECT world, kind, COUNT(*) FROM holds WHERE open AND world = $1 \
                 GROUP BY world, kind ORDER BY world, kind",
                &[&w],
            )
            .await
        }
        None => {
            conn.query(
                "SELECT world, kind, COUNT(*) FROM holds WHERE open \
                 GROUP BY world, kind ORDER BY world, kind",
                &[],
            )
            .await
        }
    }
    .map_err(sql_error)?;
    rows.iter()
        .map(|r| {
            let kind = r.get::<_, &str>(1);
            let Some(kind) = HoldKind::parse(kind) else {
                return Err(StoreError::new(format!("a hold of unknown kind {kind:?}")));
            };
            Ok(HoldCount {
                world: r.get(0),
                kind,
                pending: u64::try_from(r.get::<_, i64>(2)).unwrap_or(0),
            })
        })
        .collect()
}

pub(super) async fn grants(conn: &Conn, world: Option<String>) -> Result<Vec<Grant>, StoreError> {
    let rows = match world {
        Some(w) => {
            conn.query(
                "SELECT data FROM grants WHERE world = $1 AND revoked_at IS NULL ORDER BY position",
                &[&w],
            )
            .await
        }
        None => {
            conn.query(
                "SELECT data FROM grants WHERE revoked_at IS NULL ORDER BY position",
                &[],
            )
            .await
        }
    }
    .map_err(sql_error)?;
    rows.iter().map(|r| parse("grant", r.get(0))).collect()
}

pub(super) async fn grant(conn: &Conn, id: GrantId) -> Result<Option<Grant>, StoreError> {
    let row = conn
        .query_opt("SELECT data FROM grants WHERE id = $1", &[id.as_uuid()])
        .await
        .map_err(sql_error)?;
    row.map(|r| parse("grant", r.get(0))).transpose()
}

pub(super) async fn idempotent(
    conn: &Conn,
    key: &str,
) -> Result<Option<(String, String)>, StoreError> {
    let row = conn
        .query_opt(
            "SELECT fingerprint, response FROM idempotency WHERE key = $1",
            &[&key],
        )
        .await
        .map_err(sql_error)?;
    Ok(row.map(|r| (r.get(0), r.get(1))))
}

pub(super) async fn idempotent_keys_before(
    conn: &Conn,
    before: Timestamp,
    limit: usize,
) -> Result<Vec<String>, StoreError> {
    let rows = conn
        .query(
            "SELECT key FROM idempotency WHERE created_at < $1 ORDER BY created_at LIMIT $2",
            &[&before.as_millis(), &count(limit)],
        )
        .await
        .map_err(sql_error)?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

/// The head of the chain; `None` while the log is empty (the stored head is then the
/// genesis row at sequence 0).
pub(super) async fn audit_head(conn: &Conn) -> Result<Option<AuditHead>, StoreError> {
    let row = conn
        .query_opt("SELECT seq, hash FROM audit_head WHERE id = 1", &[])
        .await
        .map_err(sql_error)?;
    Ok(row
        .map(|r| AuditHead {
            seq: r.get::<_, i64>(0) as u64,
            hash: r.get(1),
        })
        .filter(|h| h.seq > 0))
}

/// Events after `after`, and how far the log was considered, in one statement: the head
/// and the events are read in one snapshot.
pub(super) async fn events(
    conn: &Conn,
    after: u64,
    f: &EventFilter,
    limit: usize,
) -> Result<EventPage, StoreError> {
    let mut params: Vec<Param> = vec![Box::new(after as i64)];
    let filter = event_filter(f, &mut params);
    params.push(Box::new(count(limit)));
    let sql = format!(
        "SELECT h.seq, e.seq, e.body, e.hash FROM audit_head h LEFT JOIN LATERAL \
         (SELECT seq, body, hash FROM events WHERE seq > $1{filter} ORDER BY seq LIMIT ${}) e ON true \
         WHERE h.id = 1",
        params.len()
    );
    let found = rows(conn, &sql, &params).await?;
    let head = found.first().map_or(0, |r| r.get::<_, i64>(0) as u64);
    let mut events = Vec::with_capacity(found.len());
    for r in &found {
        let Some(seq) = r.get::<_, Option<i64>>(1) else {
            continue;
        };
        let event = audit::open(r.get(2), r.get(3))
            .map_err(|e| StoreError::new(format!("event {seq} is unreadable: {e}")))?;
        events.push(Arc::new(event));
    }
    let scanned_to = if events.len() == limit {
        events.last().map_or(after, |e| e.seq)
    } else {
        head.max(after)
    };
    Ok(EventPage { events, scanned_to })
}

/// The conditions of `f` on the events table (` AND hold = $2 …`), their values added to
/// `params`.
fn event_filter(f: &EventFilter, params: &mut Vec<Param>) -> String {
    let mut filter = String::new();
    if let Some(h) = f.hold {
        params.push(Box::new(*h.as_uuid()));
        filter.push_str(&format!(" AND hold = ${}", params.len()));
    }
    for (column, value) in [("world", &f.world), ("chat", &f.chat)] {
        if let Some(v) = value {
            params.push(Box::new(v.clone()));
            filter.push_str(&format!(" AND {column} = ${}", params.len()));
        }
    }
    filter
}

/// Events before `before`, newest first (through the same indexes, read backwards).
pub(super) async fn events_before(
    conn: &Conn,
    before: Option<u64>,
    f: &EventFilter,
    limit: usize,
) -> Result<EventPage, StoreError> {
    let below = before.map_or(i64::MAX, |b| i64::try_from(b).unwrap_or(i64::MAX));
    let mut params: Vec<Param> = vec![Box::new(below)];
    let filter = event_filter(f, &mut params);
    params.push(Box::new(count(limit)));
    let sql = format!(
        "SELECT seq, body, hash FROM events WHERE seq < $1{filter} ORDER BY seq DESC LIMIT ${}",
        params.len()
    );
    let found = rows(conn, &sql, &params).await?;
    let mut events = Vec::with_capacity(found.len());
    for r in &found {
        let seq: i64 = r.get(0);
        let event = audit::open(r.get(1), r.get(2))
            .map_err(|e| StoreError::new(format!("event {seq} is unreadable: {e}")))?;
        events.push(Arc::new(event));
    }
    let scanned_to = if events.len() == limit {
        events.last().map_or(0, |e| e.seq)
    } else {
        0
    };
    Ok(EventPage { events, scanned_to })
}

pub(super) async fn raw_events(
    conn: &Conn,
    after: u64,
    limit: usize,
) -> Result<Vec<RawEvent>, StoreError> {
    let rows = conn
        .query(
            "SELECT seq, body, hash, type, hold, world, chat FROM events WHERE seq > $1 ORDER BY seq LIMIT $2",
            &[&(after as i64), &count(limit)],
        )
        .await
        .map_err(sql_error)?;
    Ok(rows
        .iter()
        .map(|r| RawEvent {
            seq: r.get::<_, i64>(0) as u64,
            body: r.get(1),
            hash: r.get(2),
            type_name: r.get(3),
            hold: r.get::<_, Option<Uuid>>(4).map(|u| u.to_string()),
            world: r.get(5),
            chat: r.get(6),
        })
        .collect())
}

const RECORD_COLUMNS: &str = "position, id, parent, key, version, data";

fn to_record(kind: RecordKind, r: &Row) -> Result<Positioned<Record>, StoreError> {
    let parent: Uuid = r.get(2);
    Ok(Positioned {
        position: r.get::<_, i64>(0) as u64,
        item: Record {
            kind,
            id: r.get(1),
            parent: (!parent.is_nil()).then_some(parent),
            key: r.get(3),
            version: r.get::<_, i64>(4) as u64,
            data: parse(kind.as_str(), r.get(5))?,
        },
    })
}

pub(super) async fn record(
    conn: &Conn,
    kind: RecordKind,
    id: Uuid,
) -> Result<Option<Record>, StoreError> {
    let row = conn
        .query_opt(
            &format!("SELECT {RECORD_COLUMNS} FROM records WHERE kind = $1 AND id = $2"),
            &[&kind.as_str(), &id],
        )
        .await
        .map_err(sql_error)?;
    row.map(|r| to_record(kind, &r).map(|p| p.item)).transpose()
}

pub(super) async fn record_by_key(
    conn: &Conn,
    kind: RecordKind,
    parent: Option<Uuid>,
    name: &str,
) -> Result<Option<Record>, StoreError> {
    let row = conn
        .query_opt(
            &format!(
                "SELECT {RECORD_COLUMNS} FROM records WHERE kind = $1 AND parent = $2 AND key = $3"
            ),
            &[&kind.as_str(), &parent_key(parent), &name],
        )
        .await
        .map_err(sql_error)?;
    row.map(|r| to_record(kind, &r).map(|p| p.item)).transpose()
}

pub(super) async fn records(
    conn: &Conn,
    kind: RecordKind,
    parent: Option<Uuid>,
    after: Option<u64>,
    limit: usize,
) -> Result<Vec<Positioned<Record>>, StoreError> {
    let rows = conn
        .query(
            &format!(
                "SELECT {RECORD_COLUMNS} FROM records WHERE kind = $1 AND parent = $2 AND position > $3 ORDER BY position LIMIT $4"
            ),
            &[
                &kind.as_str(),
                &parent_key(parent),
                &(after.unwrap_or(0) as i64),
                &count(limit),
            ],
        )
        .await
        .map_err(sql_error)?;
    rows.iter().map(|r| to_record(kind, r)).collect()
}
