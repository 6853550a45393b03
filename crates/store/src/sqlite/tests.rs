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

/// The engine's other frequent reads use the partial index of open holds.
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
