//! Reads, on a small pool of connections of their own (WAL readers never wait for the writer).

use std::ops::RangeInclusive;
use std::path::PathBuf;
use std::sync::Arc;

use holdpoint_core::audit::{self, AuditHead, RawEvent};
use holdpoint_core::store::{
    EventFilter, EventPage, HoldColumns, HoldFilter, MarkNames, OpenMark, Positioned, Record,
    RecordKind, StatusSet, StoreError, StoredHold,
};
use holdpoint_protocol::{
    BatchId, Grant, GrantId, Hold, HoldCount, HoldId, HoldKind, Order, Timestamp,
};
use parking_lot::Mutex;
use rusqlite::types::Value as Sql;
use rusqlite::{Connection, OptionalExtension, params, params_from_iter};
use tokio::sync::Semaphore;

use super::{connect, key};
use crate::pages::{self, Part};

pub(super) struct ReaderPool {
    path: PathBuf,
    idle: Mutex<Vec<Connection>>,
    permits: Semaphore,
}

/// An id read back from its 16 stored bytes.
fn stored_id(bytes: &[u8]) -> Result<uuid::Uuid, StoreError> {
    uuid::Uuid::from_slice(bytes)
        .map_err(|e| StoreError::new(format!("a stored id is unreadable: {e}")))
}

fn sql_error(e: rusqlite::Error) -> StoreError {
    StoreError::new(e)
}

fn parse<T: serde::de::DeserializeOwned>(what: &str, data: &str) -> Result<T, StoreError> {
    serde_json::from_str(data)
        .map_err(|e| StoreError::new(format!("a stored {what} is unreadable: {e}")))
}

impl ReaderPool {
    pub(super) fn new(path: PathBuf, size: usize) -> Self {
        ReaderPool {
            path,
            idle: Mutex::new(Vec::new()),
            permits: Semaphore::new(size),
        }
    }

    /// Runs a short indexed lookup (a few microseconds) right here on an idle connection:
    /// cheaper than two thread hops. Without an idle connection it runs like [`Self::run`].
    pub(super) async fn lookup<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        if let Ok(_permit) = self.permits.try_acquire() {
            let idle = self.idle.lock().pop();
            if let Some(conn) = idle {
                let result = f(&conn);
                self.idle.lock().push(conn);
                return result;
            }
        }
        self.run(f).await
    }

    /// Runs `f` on an idle connection, on a blocking thread.
    pub(super) async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let _permit = self
            .permits
            .acquire()
            .await
            .map_err(|_| StoreError::new("the store is closed"))?;
        let idle = self.idle.lock().pop();
        let conn = match idle {
            Some(c) => c,
            None => connect(&self.path, true).map_err(StoreError::new)?,
        };
        let (conn, result) = tokio::task::spawn_blocking(move || {
            let r = f(&conn);
            (conn, r)
        })
        .await
        .map_err(|e| StoreError::new(format!("a read failed: {e}")))?;
        self.idle.lock().push(conn);
        result
    }
}

pub(super) fn hold(conn: &Connection, id: HoldId) -> Result<Option<Hold>, StoreError> {
    let data: Option<String> = conn
        .prepare_cached("SELECT data FROM holds WHERE id = ?")
        .and_then(|mut s| s.query_row([key(id.as_uuid())], |r| r.get(0)).optional())
        .map_err(sql_error)?;
    data.map(|d| parse("hold", &d)).transpose()
}

/// Open holds' marks at `positions`, from the open holds' index alone (it carries the columns).
pub(super) fn open_marks(
    conn: &Connection,
    positions: RangeInclusive<u64>,
    limit: usize,
) -> Result<Vec<Positioned<OpenMark>>, StoreError> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT position, id, world, raiser, deadline, remind_at FROM holds \
             INDEXED BY holds_open WHERE open = 1 AND position BETWEEN ? AND ? \
             ORDER BY position LIMIT ?",
        )
        .map_err(sql_error)?;
    let (from, until) = pages::position_range(&positions);
    let mut rows = stmt
        .query(params![from, until, limit as i64])
        .map_err(sql_error)?;
    let mut out = Vec::with_capacity(limit.min(65_536));
    let mut names = MarkNames::default();
    // Names read by reference: a mark's are shared with the last one's where they repeat.
    let millis = |r: &rusqlite::Row<'_>, i: usize| -> rusqlite::Result<Option<Timestamp>> {
        Ok(r.get_ref(i)?.as_i64_or_null()?.map(Timestamp::from_millis))
    };
    while let Some(r) = rows.next().map_err(sql_error)? {
        let id = r
            .get_ref(1)
            .and_then(|v| Ok(v.as_blob()?))
            .map_err(sql_error)?;
        out.push(Positioned {
            position: r
                .get_ref(0)
                .and_then(|v| Ok(v.as_i64()?))
                .map_err(sql_error)? as u64,
            item: OpenMark {
                id: HoldId::from_uuid(stored_id(id)?),
                world: names.world(
                    r.get_ref(2)
                        .and_then(|v| Ok(v.as_str()?))
                        .map_err(sql_error)?,
                ),
                requested_by: names.raiser(
                    r.get_ref(3)
                        .and_then(|v| Ok(v.as_str_or_null()?))
                        .map_err(sql_error)?
                        .unwrap_or_default(),
                ),
                deadline: millis(r, 4).map_err(sql_error)?,
                remind_at: millis(r, 5).map_err(sql_error)?,
            },
        });
    }
    Ok(out)
}

/// The first and last open positions, each one step down the open holds' index (two
/// subqueries: SQLite answers `min` and `max` from an index only one at a time).
pub(super) fn open_span(conn: &Connection) -> Result<Option<RangeInclusive<u64>>, StoreError> {
    let (first, last): (Option<i64>, Option<i64>) = conn
        .prepare_cached(
            "SELECT (SELECT min(position) FROM holds INDEXED BY holds_open WHERE open = 1), \
                    (SELECT max(position) FROM holds INDEXED BY holds_open WHERE open = 1)",
        )
        .and_then(|mut s| s.query_row([], |r| Ok((r.get(0)?, r.get(1)?))))
        .map_err(sql_error)?;
    Ok(first.zip(last).map(|(a, b)| a as u64..=b as u64))
}

/// Holds' stored rows by position (the primary key: no index the check is about is used).
pub(super) fn stored_holds(
    conn: &Connection,
    after: Option<u64>,
    limit: usize,
) -> Result<Vec<Positioned<StoredHold>>, StoreError> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT position, id, batch, world, chat, agent, tool, kind, status, open, deadline, \
             remind_at, version, data, raiser FROM holds WHERE position > ? ORDER BY position LIMIT ?",
        )
        .map_err(sql_error)?;
    let after = after.map_or(0, |a| a as i64);
    let rows = stmt
        .query_map(params![after, limit as i64], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, Vec<u8>>(1)?,
                r.get::<_, Vec<u8>>(2)?,
                (
                    r.get(3)?,
                    r.get(4)?,
                    r.get(5)?,
                    r.get(6)?,
                    r.get(7)?,
                    r.get(8)?,
                ),
                (
                    r.get::<_, i64>(9)?,
                    r.get(10)?,
                    r.get(11)?,
                    r.get::<_, i64>(12)?,
                ),
                r.get::<_, String>(13)?,
                r.get::<_, Option<String>>(14)?,
            ))
        })
        .map_err(sql_error)?;
    let mut out = Vec::new();
    for row in rows {
        let (position, id, batch, text, numbers, data, raiser) = row.map_err(sql_error)?;
        // A raiser stored as NULL is reported by the check as empty.
        let raiser = raiser.unwrap_or_default();
        let (world, chat, agent, tool, kind, status) = text;
        let (open, deadline, remind_at, version) = numbers;
        let hold: Hold = parse("hold", &data)?;
        let columns = HoldColumns {
            id: HoldId::from_uuid(stored_id(&id)?),
            batch: BatchId::from_uuid(stored_id(&batch)?),
            world,
            raiser,
            chat,
            agent,
            tool,
            kind,
            status,
            // Listings ask for `open = 1` or `open = 0`: any other value hides the hold from
            // both, so it is read as the opposite of what the hold says, to be reported.
            open: match open {
                0 => false,
                1 => true,
                _ => !hold.is_open(),
            },
            deadline,
            remind_at,
            version: u64::try_from(version).unwrap_or(u64::MAX),
        };
        out.push(Positioned {
            position: position as u64,
            item: StoredHold { columns, hold },
        });
    }
    Ok(out)
}

/// One page of holds. Each shape of filter is an equality prefix of one index followed by
/// `position` (or, in the urgent order, by `deadline, position`), so SQLite walks the index
/// in order and stops after `limit` rows; in the urgent order, a filter that few open holds
/// match reads them through its own index instead (`few_through`).
pub(super) fn holds(
    conn: &Connection,
    f: &HoldFilter,
) -> Result<Vec<Positioned<Hold>>, StoreError> {
    let parts = pages::parts(f)?;
    let through = match f.order {
        Order::Urgent => few_through(conn, f)?,
        Order::Oldest | Order::Newest => None,
    };
    let mut rows = Vec::new();
    for &part in parts {
        let limit = pages::part_limit(f, rows.len());
        if limit == 0 {
            break;
        }
        let (sql, params) = hold_query(f, part, limit, through);
        let mut stmt = conn.prepare_cached(&sql).map_err(sql_error)?;
        let page = stmt
            .query_map(params_from_iter(params), |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?))
            })
            .map_err(sql_error)?;
        for row in page {
            let (position, data) = row.map_err(sql_error)?;
            rows.push(Positioned {
                position: position as u64,
                item: parse("hold", &data)?,
            });
        }
    }
    pages::merge(f, parts, &mut rows);
    Ok(rows)
}

/// Open holds a filter may match for the urgent order to read them through the filter's own
/// index and sort them, rather than walk the urgency index past those that do not match.
pub(super) const FEW: usize = 200;

/// The index through which the urgent order reads `f`'s holds, when `f` has a filter with an
/// index of its own (not a batch: see `hold_query`) and fewer than [`FEW`] open holds have
/// its value: the urgency index holds every filter's column, so a page is found on its
/// entries, but when few match, that walk passes over nearly every open hold (with ten
/// million open, half a second for a filter that matches nothing). Counted on that index's
/// entries alone, at most `FEW` of them, so the count costs little either way; an upper
/// bound of the matches, as the listing's other filters are left out.
pub(super) fn few_through(
    conn: &Connection,
    f: &HoldFilter,
) -> Result<Option<&'static str>, StoreError> {
    if f.batch.is_some() {
        return Ok(None);
    }
    let text = |s: &String| Sql::Text(s.clone());
    let (index, keys) = match (&f.world, &f.chat, &f.agent, &f.tool, f.kind) {
        (Some(world), Some(chat), ..) => (
            "holds_open_chat",
            vec![("world", text(world)), ("chat", text(chat))],
        ),
        (_, _, Some(agent), ..) => ("holds_open_agent", vec![("agent", text(agent))]),
        (_, _, None, Some(tool), _) => ("holds_open_tool", vec![("tool", text(tool))]),
        (Some(world), ..) => ("holds_open_world", vec![("world", text(world))]),
        (None, _, None, None, Some(kind)) => (
            "holds_open_kind",
            vec![("kind", Sql::Text(kind.as_str().into()))],
        ),
        _ => return Ok(None),
    };
    let matching: Vec<String> = keys.iter().map(|(c, _)| format!("{c} = ?")).collect();
    let sql = format!(
        "SELECT count(*) FROM (SELECT 1 FROM holds INDEXED BY {index} WHERE open = 1 AND {} LIMIT {FEW})",
        matching.join(" AND ")
    );
    let found: i64 = conn
        .prepare_cached(&sql)
        .and_then(|mut s| {
            s.query_row(params_from_iter(keys.into_iter().map(|(_, v)| v)), |r| {
                r.get(0)
            })
        })
        .map_err(sql_error)?;
    Ok((found < FEW as i64).then_some(index))
}

/// The statement reading one part of a listing, at most `limit` rows; an urgent part through
/// the index `through` (see `few_through`), when given.
pub(super) fn hold_query(
    f: &HoldFilter,
    part: Part,
    limit: usize,
    through: Option<&'static str>,
) -> (String, Vec<Sql>) {
    // The index is named here, by the most selective filter, rather than left to the
    // planner (several can tie on a small or unanalysed table). `open` is written into the
    // SQL, not bound, so that SQLite can use the partial indexes. The urgent order walks its
    // own index unless a batch (a few holds) is asked for, or a filter that few holds match:
    // that index holds every other filter's column, so holds that do not match are passed
    // over on its entries.
    let set = if part.open() { "open" } else { "done" };
    let index = match (part, &f.batch, &f.chat, &f.agent, &f.tool, &f.world, f.kind) {
        (_, Some(_), ..) => "holds_batch".to_owned(),
        (Part::Due | Part::Undated, None, ..) => through.unwrap_or("holds_open_urgent").to_owned(),
        (_, None, Some(_), ..) => format!("holds_{set}_chat"),
        (_, None, None, Some(_), ..) => format!("holds_{set}_agent"),
        (_, None, None, None, Some(_), ..) => format!("holds_{set}_tool"),
        (_, None, None, None, None, Some(_), _) => format!("holds_{set}_world"),
        (Part::Open, None, None, None, None, None, Some(_)) => "holds_open_kind".to_owned(),
        (_, None, None, None, None, None, _) => format!("holds_{set}"),
    };
    let mut sql = format!(
        "SELECT position, data FROM holds INDEXED BY {index} WHERE open = {}",
        u8::from(part.open())
    );
    let mut params = Vec::new();
    let mut eq = |column: &str, value: Sql| {
        sql.push_str(" AND ");
        sql.push_str(column);
        sql.push_str(" = ?");
        params.push(value);
    };
    let text = |s: &String| Sql::Text(s.clone());
    for (column, value) in [
        ("world", f.world.as_ref().map(text)),
        ("chat", f.chat.as_ref().map(text)),
        ("agent", f.agent.as_ref().map(text)),
        ("tool", f.tool.as_ref().map(text)),
        ("kind", f.kind.map(|k| Sql::Text(k.as_str().into()))),
        (
            "batch",
            f.batch.map(|b| Sql::Blob(key(b.as_uuid()).to_vec())),
        ),
        (
            "status",
            match f.status {
                StatusSet::Is(s) => Some(Sql::Text(s.as_str().into())),
                _ => None,
            },
        ),
    ] {
        if let Some(value) = value {
            eq(column, value);
        }
    }
    let order = match (part, f.order) {
        (Part::Due, _) => {
            sql.push_str(" AND deadline IS NOT NULL");
            if let (Some(after), Some(deadline)) = (f.after, f.after_deadline) {
                sql.push_str(" AND (deadline, position) > (?, ?)");
                params.push(Sql::Integer(deadline.as_millis()));
                params.push(Sql::Integer(after as i64));
            }
            "deadline, position"
        }
        (Part::Undated, _) => {
            sql.push_str(" AND deadline IS NULL");
            if let (Some(after), None) = (f.after, f.after_deadline) {
                sql.push_str(" AND position > ?");
                params.push(Sql::Integer(after as i64));
            }
            "deadline, position"
        }
        (Part::Open | Part::Resolved, Order::Newest) => {
            if let Some(after) = f.after {
                sql.push_str(" AND position < ?");
                params.push(Sql::Integer(after as i64));
            }
            "position DESC"
        }
        (Part::Open | Part::Resolved, Order::Oldest | Order::Urgent) => {
            if let Some(after) = f.after {
                sql.push_str(" AND position > ?");
                params.push(Sql::Integer(after as i64));
            }
            "position"
        }
    };
    sql.push_str(&format!(" ORDER BY {order} LIMIT ?"));
    params.push(Sql::Integer(limit as i64));
    (sql, params)
}

pub(super) fn batch(conn: &Connection, batch: BatchId) -> Result<Vec<Hold>, StoreError> {
    let mut stmt = conn
        .prepare_cached("SELECT data FROM holds WHERE batch = ? ORDER BY position")
        .map_err(sql_error)?;
    let rows = stmt
        .query_map([key(batch.as_uuid())], |r| r.get::<_, String>(0))
        .map_err(sql_error)?;
    rows.map(|r| parse("hold", &r.map_err(sql_error)?))
        .collect()
}

pub(super) fn chat_has_open_hold(
    conn: &Connection,
    world: &str,
    chat: &str,
) -> Result<bool, StoreError> {
    conn.prepare_cached(
        "SELECT EXISTS (SELECT 1 FROM holds WHERE world = ? AND chat = ? AND open = 1)",
    )
    .and_then(|mut s| s.query_row(params![world, chat], |r| r.get(0)))
    .map_err(sql_error)
}

/// The open holds by world and kind: a count over the urgent order's partial index, which
/// holds every open hold with both columns, so no hold's row is read.
pub(super) fn open_hold_counts(
    conn: &Connection,
    world: Option<String>,
) -> Result<Vec<HoldCount>, StoreError> {
    let (sql, params): (&str, Vec<Sql>) = match world {
        Some(w) => (
            "SELECT world, kind, COUNT(*) FROM holds INDEXED BY holds_open_urgent \
             WHERE open = 1 AND world = ? GROUP BY world, kind ORDER BY world, kind",
            vec![Sql::Text(w)],
        ),
        None => (
            "SELECT world, kind, COUNT(*) FROM holds INDEXED BY holds_open_urgent \
             WHERE open = 1 GROUP BY world, kind ORDER BY world, kind",
            vec![],
        ),
    };
    let mut stmt = conn.prepare_cached(sql).map_err(sql_error)?;
    let rows = stmt
        .query_map(params_from_iter(params), |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, i64>(2)?,
            ))
        })
        .map_err(sql_error)?;
    let mut out = Vec::new();
    for row in rows {
        let (world, kind, n) = row.map_err(sql_error)?;
        out.push(HoldCount {
            world,
            kind: kind_of(&kind)?,
            pending: u64::try_from(n).unwrap_or(0),
        });
    }
    Ok(out)
}

fn kind_of(kind: &str) -> Result<HoldKind, StoreError> {
    HoldKind::parse(kind).ok_or_else(|| StoreError::new(format!("a hold of unknown kind {kind:?}")))
}

pub(super) fn grants(conn: &Connection, world: Option<String>) -> Result<Vec<Grant>, StoreError> {
    let (sql, params): (&str, Vec<Sql>) = match world {
        Some(w) => (
            "SELECT data FROM grants WHERE world = ? AND revoked_at IS NULL ORDER BY rowid",
            vec![Sql::Text(w)],
        ),
        None => (
            "SELECT data FROM grants WHERE revoked_at IS NULL ORDER BY rowid",
            vec![],
        ),
    };
    let mut stmt = conn.prepare_cached(sql).map_err(sql_error)?;
    let rows = stmt
        .query_map(params_from_iter(params), |r| r.get::<_, String>(0))
        .map_err(sql_error)?;
    rows.map(|r| parse("grant", &r.map_err(sql_error)?))
        .collect()
}

pub(super) fn grant(conn: &Connection, id: GrantId) -> Result<Option<Grant>, StoreError> {
    let data: Option<String> = conn
        .prepare_cached("SELECT data FROM grants WHERE id = ?")
        .and_then(|mut s| s.query_row([key(id.as_uuid())], |r| r.get(0)).optional())
        .map_err(sql_error)?;
    data.map(|d| parse("grant", &d)).transpose()
}

pub(super) fn idempotent(
    conn: &Connection,
    key: String,
) -> Result<Option<(String, String)>, StoreError> {
    conn.prepare_cached("SELECT fingerprint, response FROM idempotency WHERE key = ?")
        .and_then(|mut s| {
            s.query_row([key], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()
        })
        .map_err(sql_error)
}

pub(super) fn idempotent_keys_before(
    conn: &Connection,
    before: Timestamp,
    limit: usize,
) -> Result<Vec<String>, StoreError> {
    conn.prepare_cached(
        "SELECT key FROM idempotency WHERE created_at < ? ORDER BY created_at LIMIT ?",
    )
    .and_then(|mut s| {
        s.query_map(params![before.as_millis(), limit as i64], |r| r.get(0))?
            .collect()
    })
    .map_err(sql_error)
}

pub(super) fn audit_head(conn: &Connection) -> Result<Option<AuditHead>, StoreError> {
    conn.prepare_cached("SELECT seq, hash FROM audit_head WHERE id = 1")
        .and_then(|mut s| {
            s.query_row([], |r| {
                Ok(AuditHead {
                    seq: r.get::<_, i64>(0)? as u64,
                    hash: r.get(1)?,
                })
            })
            .optional()
        })
        .map_err(sql_error)
}

/// Events after `after`, and how far the log was considered, read in one snapshot.
pub(super) fn events(
    conn: &Connection,
    after: u64,
    f: &EventFilter,
    limit: usize,
) -> Result<EventPage, StoreError> {
    let tx = conn.unchecked_transaction().map_err(sql_error)?;
    let events = read_events(&tx, Toward::Newer(after), f, limit)?;
    let scanned_to = if events.len() == limit {
        events.last().map_or(after, |e| e.seq)
    } else {
        audit_head(&tx)?.map_or(after, |h| h.seq.max(after))
    };
    Ok(EventPage { events, scanned_to })
}

/// Which way a page of events is read from its bound.
enum Toward {
    /// After this position, oldest first.
    Newer(u64),
    /// Before this position (from the newest when none), newest first.
    Older(Option<u64>),
}

/// At most `limit` events that `f` keeps, read from the bound `toward` names.
fn read_events(
    conn: &Connection,
    toward: Toward,
    f: &EventFilter,
    limit: usize,
) -> Result<Vec<Arc<holdpoint_protocol::Event>>, StoreError> {
    let (condition, bound, order) = match toward {
        Toward::Newer(after) => ("seq > ?", after as i64, "ASC"),
        Toward::Older(before) => (
            "seq < ?",
            before.map_or(i64::MAX, |b| i64::try_from(b).unwrap_or(i64::MAX)),
            "DESC",
        ),
    };
    let mut sql = format!("SELECT seq, body, hash FROM events WHERE {condition}");
    let mut params = vec![Sql::Integer(bound)];
    if let Some(h) = f.hold {
        sql.push_str(" AND hold = ?");
        params.push(Sql::Blob(key(h.as_uuid()).to_vec()));
    }
    for (column, value) in [("world", &f.world), ("chat", &f.chat)] {
        if let Some(v) = value {
            sql.push_str(&format!(" AND {column} = ?"));
            params.push(Sql::Text(v.clone()));
        }
    }
    sql.push_str(&format!(" ORDER BY seq {order} LIMIT ?"));
    params.push(Sql::Integer(limit as i64));
    let mut stmt = conn.prepare_cached(&sql).map_err(sql_error)?;
    let rows = stmt
        .query_map(params_from_iter(params), |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
            ))
        })
        .map_err(sql_error)?;
    let mut events = Vec::new();
    for row in rows {
        let (seq, body, hash) = row.map_err(sql_error)?;
        let event = audit::open(&body, &hash)
            .map_err(|e| StoreError::new(format!("event {seq} is unreadable: {e}")))?;
        events.push(Arc::new(event));
    }
    Ok(events)
}

/// Events before `before`, newest first (through the same indexes, read backwards).
pub(super) fn events_before(
    conn: &Connection,
    before: Option<u64>,
    f: &EventFilter,
    limit: usize,
) -> Result<EventPage, StoreError> {
    let events = read_events(conn, Toward::Older(before), f, limit)?;
    let scanned_to = if events.len() == limit {
        events.last().map_or(0, |e| e.seq)
    } else {
        0
    };
    Ok(EventPage { events, scanned_to })
}

pub(super) fn raw_events(
    conn: &Connection,
    after: u64,
    limit: usize,
) -> Result<Vec<RawEvent>, StoreError> {
    let mut stmt = conn
        .prepare_cached("SELECT seq, body, hash, type, hold, world, chat FROM events WHERE seq > ? ORDER BY seq LIMIT ?")
        .map_err(sql_error)?;
    let rows = stmt
        .query_map(params![after as i64, limit as i64], |r| {
            Ok(RawEvent {
                seq: r.get::<_, i64>(0)? as u64,
                body: r.get(1)?,
                hash: r.get(2)?,
                type_name: r.get(3)?,
                hold: r.get::<_, Option<Vec<u8>>>(4)?.map(|b| {
                    // Shown as text, as the body names it; bytes that are no id show as hex.
                    uuid::Uuid::from_slice(&b)
                        .map_or_else(|_| format!("{b:02x?}"), |u| u.to_string())
                }),
                world: r.get(5)?,
                chat: r.get(6)?,
            })
        })
        .map_err(sql_error)?;
    rows.map(|r| r.map_err(sql_error)).collect()
}

/// A record's columns: position, id, parent, key, version, data.
type StoredRecord = (i64, Vec<u8>, Vec<u8>, Option<String>, i64, String);

fn record_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<StoredRecord> {
    Ok((
        r.get(0)?,
        r.get(1)?,
        r.get(2)?,
        r.get(3)?,
        r.get(4)?,
        r.get(5)?,
    ))
}

fn to_record(kind: RecordKind, row: StoredRecord) -> Result<Positioned<Record>, StoreError> {
    let (position, id, parent, key, version, data) = row;
    Ok(Positioned {
        position: position as u64,
        item: Record {
            kind,
            id: stored_id(&id)?,
            parent: if parent.is_empty() {
                None
            } else {
                Some(stored_id(&parent)?)
            },
            key,
            version: version as u64,
            data: parse(kind.as_str(), &data)?,
        },
    })
}

pub(super) const RECORD_COLUMNS: &str = "position, id, parent, key, version, data";

pub(super) fn record(
    conn: &Connection,
    kind: RecordKind,
    id: uuid::Uuid,
) -> Result<Option<Record>, StoreError> {
    let row = conn
        .prepare_cached(&format!(
            "SELECT {RECORD_COLUMNS} FROM records WHERE kind = ? AND id = ?"
        ))
        .and_then(|mut s| {
            s.query_row(params![kind.as_str(), key(&id)], record_row)
                .optional()
        })
        .map_err(sql_error)?;
    row.map(|r| to_record(kind, r).map(|p| p.item)).transpose()
}

pub(super) fn record_by_key(
    conn: &Connection,
    kind: RecordKind,
    parent: Option<uuid::Uuid>,
    name: &str,
) -> Result<Option<Record>, StoreError> {
    let parent = parent.map(|p| key(&p).to_vec()).unwrap_or_default();
    let row = conn
        .prepare_cached(&format!(
            "SELECT {RECORD_COLUMNS} FROM records WHERE kind = ? AND parent = ? AND key = ?"
        ))
        .and_then(|mut s| {
            s.query_row(params![kind.as_str(), parent, name], record_row)
                .optional()
        })
        .map_err(sql_error)?;
    row.map(|r| to_record(kind, r).map(|p| p.item)).transpose()
}

pub(super) fn records(
    conn: &Connection,
    kind: RecordKind,
    parent: Option<uuid::Uuid>,
    after: Option<u64>,
    limit: usize,
) -> Result<Vec<Positioned<Record>>, StoreError> {
    let parent = parent.map(|p| key(&p).to_vec()).unwrap_or_default();
    let mut stmt = conn
        .prepare_cached(&format!(
            "SELECT {RECORD_COLUMNS} FROM records WHERE kind = ? AND parent = ? AND position > ? ORDER BY position LIMIT ?"
        ))
        .map_err(sql_error)?;
    let rows = stmt
        .query_map(
            params![
                kind.as_str(),
                parent,
                after.unwrap_or(0) as i64,
                limit as i64
            ],
            record_row,
        )
        .map_err(sql_error)?;
    rows.map(|r| to_record(kind, r.map_err(sql_error)?))
        .collect()
}
