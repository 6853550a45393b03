use holdpoint_core::store::{HoldFilter, StatusSet};
use holdpoint_protocol::{BatchId, HoldKind, HoldStatus, Order};

use super::*;

/// Every shape of hold listing must walk an index in `position` order: no table scan and no
/// sort, so the first page costs the same however many holds there are.
#[test]
fn every_hold_listing_is_served_by_an_index() {
    let dir = tempfile::tempdir().unwrap();
    let mut conn = connect(&dir.path().join("plan.db"), false).unwrap();
    schema::migrate(&mut conn).unwrap();
    let worlds = [None, Some("w".to_owned())];
    let statuses = [
        StatusSet::Open,
        StatusSet::Resolved,
        StatusSet::Is(HoldStatus::Pending),
        StatusSet::Is(HoldStatus::Denied),
    ];
    let mut checked = 0;
    for world in &worlds {
        for chat in [None, Some("c".to_owned())] {
            if chat.is_some() && world.is_none() {
                continue;
            }
            for status in statuses {
                for kind in [None, Some(HoldKind::Question)] {
                    for batch in [None, Some(BatchId::random())] {
                        for order in [Order::Oldest, Order::Newest] {
                            let f = HoldFilter {
                                world: world.clone(),
                                chat: chat.clone(),
                                status,
                                kind,
                                batch,
                                order,
                                after: Some(10),
                                limit: 50,
                            };
                            for open in [true, false] {
                                let (sql, params) = reader::hold_query(&f, open);
                                let mut stmt =
                                    conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
                                let plan: Vec<String> = stmt
                                    .query_map(rusqlite::params_from_iter(params), |r| {
                                        r.get::<_, String>(3)
                                    })
                                    .unwrap()
                                    .map(Result::unwrap)
                                    .collect();
                                let text = plan.join(" | ");
                                assert!(!text.contains("TEMP B-TREE"), "{f:?} sorts: {text}");
                                assert!(
                                    text.starts_with("SEARCH holds USING INDEX"),
                                    "{f:?} scans: {text}"
                                );
                                // The index seeks on the most selective filter and on the cursor.
                                let selective = match (&f.batch, &f.chat, &f.world) {
                                    (Some(_), _, _) => "batch=?",
                                    (None, Some(_), _) => "chat=?",
                                    (None, None, Some(_)) => "world=?",
                                    (None, None, None) => "position",
                                };
                                assert!(
                                    text.contains(selective),
                                    "{f:?} filters {selective} row by row: {text}"
                                );
                                assert!(
                                    text.contains("position>?") || text.contains("position<?"),
                                    "{f:?} does not seek the cursor: {text}"
                                );
                                checked += 1;
                            }
                        }
                    }
                }
            }
        }
    }
    assert_eq!(checked, 3 * 4 * 2 * 2 * 2 * 2);
}

/// The engine's other frequent reads use the partial indexes.
#[test]
fn open_hold_lookups_use_the_open_indexes() {
    let dir = tempfile::tempdir().unwrap();
    let mut conn = connect(&dir.path().join("plan.db"), false).unwrap();
    schema::migrate(&mut conn).unwrap();
    for (sql, index) in [
        (
            "SELECT EXISTS (SELECT 1 FROM holds WHERE world = 'w' AND chat = 'c' AND open = 1)",
            "holds_open_chat",
        ),
        (
            "SELECT id, deadline, remind_at FROM holds WHERE open = 1",
            "holds_open",
        ),
        (
            "SELECT seq FROM events WHERE seq > 5 AND world = 'w' AND chat = 'c' ORDER BY seq",
            "events_chat",
        ),
        (
            "SELECT key FROM idempotency WHERE created_at < 5 ORDER BY created_at LIMIT 10",
            "idempotency_age",
        ),
    ] {
        let plan: Vec<String> = conn
            .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
            .unwrap()
            .query_map([], |r| r.get::<_, String>(3))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert!(plan.iter().any(|p| p.contains(index)), "{sql}: {plan:?}");
    }
}

/// Migration 2 rebuilds the chat indexes without chat-less rows; rows written before it are
/// still found by chat, and chat-less ones are left out.
#[test]
fn the_chat_indexes_are_rebuilt_over_existing_holds() {
    let dir = tempfile::tempdir().unwrap();
    let mut conn = connect(&dir.path().join("v1.db"), false).unwrap();
    conn.execute_batch(schema::MIGRATIONS[0]).unwrap();
    conn.pragma_update(None, "user_version", 1).unwrap();
    for (position, chat) in [(1, Some("c")), (2, None)] {
        conn.execute(
            "INSERT INTO holds (position, id, batch, world, chat, kind, status, open, version, data) \
             VALUES (?, ?, ?, 'w', ?, 'question', 'pending', 1, 1, '{}')",
            rusqlite::params![position, vec![position as u8; 16], vec![0u8; 16], chat],
        )
        .unwrap();
    }
    schema::migrate(&mut conn).unwrap();
    let in_chat: Vec<i64> = conn
        .prepare("SELECT position FROM holds INDEXED BY holds_open_chat WHERE open = 1 AND world = 'w' AND chat = 'c'")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(in_chat, [1]);
    // Entries in the index itself (one leaf page), as SQLite's page statistics count them.
    let entries: i64 = conn
        .query_row(
            "SELECT sum(ncell) FROM dbstat WHERE name = 'holds_open_chat'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(entries, 1, "a chat-less hold is in the chat index");
}

#[test]
fn a_newer_schema_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("new.db");
    {
        let conn = Connection::open(&path).unwrap();
        conn.pragma_update(None, "user_version", 99).unwrap();
    }
    let err = SqliteStore::open(&path).unwrap_err();
    assert!(err.to_string().contains("schema version 99"), "{err}");
}

/// A cached statement must not be planned again each time it runs with other values (SQLite
/// would otherwise re-plan queries whose best index could depend on a bound value).
#[test]
fn cached_statements_are_not_planned_again_for_new_values() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("plans.db");
    let mut conn = connect(&path, false).unwrap();
    schema::migrate(&mut conn).unwrap();
    let reader = connect(&path, true).unwrap();
    for i in 0..5u8 {
        let parent = uuid::Uuid::from_bytes([i; 16]);
        reader::records(
            &reader,
            RecordKind::Chat,
            Some(parent),
            Some(u64::from(i)),
            10,
        )
        .unwrap();
    }
    let sql = format!(
        "SELECT {} FROM records WHERE kind = ? AND parent = ? AND position > ? ORDER BY position LIMIT ?",
        reader::RECORD_COLUMNS
    );
    let listing = reader.prepare_cached(&sql).unwrap();
    assert_eq!(
        listing.get_status(rusqlite::StatementStatus::RePrepare),
        0,
        "the listing was planned again"
    );
}
