use holdpoint_core::store::{HoldFilter, StatusSet};
use holdpoint_protocol::{BatchId, HoldKind, HoldStatus, Order, Timestamp};

use super::*;

/// The plan SQLite makes for one part of a listing, its steps joined with ` | `.
fn plan(conn: &Connection, f: &HoldFilter, part: crate::pages::Part) -> String {
    let (sql, params) = reader::hold_query(f, part, 50, None);
    let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
    let plan: Vec<String> = stmt
        .query_map(rusqlite::params_from_iter(params), |r| {
            r.get::<_, String>(3)
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();
    plan.join(" | ")
}

/// Every filter a listing can combine: none, or one value of each.
fn filters(order: Order) -> Vec<HoldFilter> {
    let mut all = Vec::new();
    for world in [None, Some("w".to_owned())] {
        for chat in [None, Some("c".to_owned())] {
            if chat.is_some() && world.is_none() {
                continue;
            }
            for agent in [None, Some("a".to_owned())] {
                for tool in [None, Some("t".to_owned())] {
                    for kind in [None, Some(HoldKind::Question)] {
                        for batch in [None, Some(BatchId::random())] {
                            all.push(HoldFilter {
                                world: world.clone(),
                                chat: chat.clone(),
                                agent: agent.clone(),
                                tool: tool.clone(),
                                kind,
                                batch,
                                order,
                                after: Some(10),
                                limit: 50,
                                ..HoldFilter::default()
                            });
                        }
                    }
                }
            }
        }
    }
    all
}

/// Every shape of hold listing must walk an index in `position` order: no table scan and no
/// sort, so the first page costs the same however many holds there are.
#[test]
fn every_hold_listing_is_served_by_an_index() {
    let dir = tempfile::tempdir().unwrap();
    let mut conn = connect(&dir.path().join("plan.db"), false).unwrap();
    schema::migrate(&mut conn).unwrap();
    let statuses = [
        StatusSet::Open,
        StatusSet::Resolved,
        StatusSet::Is(HoldStatus::Pending),
        StatusSet::Is(HoldStatus::Denied),
    ];
    let mut checked = 0;
    for order in [Order::Oldest, Order::Newest] {
        for filter in filters(order) {
            for status in statuses {
                let f = HoldFilter {
                    status,
                    ..filter.clone()
                };
                for part in [crate::pages::Part::Open, crate::pages::Part::Resolved] {
                    let text = plan(&conn, &f, part);
                    assert!(!text.contains("TEMP B-TREE"), "{f:?} sorts: {text}");
                    assert!(
                        text.starts_with("SEARCH holds USING INDEX"),
                        "{f:?} scans: {text}"
                    );
                    // The index seeks on the most selective filter and on the cursor.
                    let selective = match (&f.batch, &f.chat, &f.agent, &f.tool, &f.world) {
                        (Some(_), ..) => "batch=?",
                        (None, Some(_), ..) => "chat=?",
                        (None, None, Some(_), ..) => "agent=?",
                        (None, None, None, Some(_), _) => "tool=?",
                        (None, None, None, None, Some(_)) => "world=?",
                        (None, None, None, None, None) => "position",
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
    // 3 places × 2 agents × 2 tools × 2 kinds × 2 batches, 2 orders, 4 statuses, 2 parts.
    assert_eq!(checked, 3 * 2 * 2 * 2 * 2 * 2 * 4 * 2);
}

/// The urgent order walks the urgency index by deadline and position without sorting,
/// seeking the cursor, whatever else is filtered; only a batch (a few holds) is read by its
/// own index and sorted.
#[test]
fn urgent_listings_walk_the_urgency_index() {
    let dir = tempfile::tempdir().unwrap();
    let mut conn = connect(&dir.path().join("plan.db"), false).unwrap();
    schema::migrate(&mut conn).unwrap();
    let mut checked = 0;
    for filter in filters(Order::Urgent) {
        for after_deadline in [None, Some(Timestamp::from_millis(5))] {
            for status in [StatusSet::Open, StatusSet::Is(HoldStatus::Pending)] {
                let f = HoldFilter {
                    status,
                    after_deadline,
                    ..filter.clone()
                };
                for part in [crate::pages::Part::Due, crate::pages::Part::Undated] {
                    let text = plan(&conn, &f, part);
                    if f.batch.is_some() {
                        assert!(
                            text.starts_with("SEARCH holds USING INDEX holds_batch (batch=?"),
                            "{f:?}: {text}"
                        );
                    } else {
                        assert!(!text.contains("TEMP B-TREE"), "{f:?} sorts: {text}");
                        let seek = match (part, after_deadline) {
                            // `deadline IS NOT NULL`, then the cursor row by row.
                            (crate::pages::Part::Due, _) => "(deadline>?)",
                            (_, Some(_)) => "(deadline=?)",
                            (_, None) => "(deadline=? AND position>?)",
                        };
                        assert_eq!(
                            text,
                            format!("SEARCH holds USING INDEX holds_open_urgent {seek}"),
                            "{f:?}"
                        );
                    }
                    checked += 1;
                }
            }
        }
    }
    assert_eq!(checked, 3 * 2 * 2 * 2 * 2 * 2 * 2 * 2);
}

/// An urgent listing that fewer than `FEW` open holds can match is read through its filter's
/// own index and sorted, not by walking the urgency index past every hold that does not
/// match; one that many match walks the urgency index, as does one without such a filter.
#[test]
fn an_urgent_listing_few_holds_match_is_read_through_its_filters_index() {
    let dir = tempfile::tempdir().unwrap();
    let mut conn = connect(&dir.path().join("few.db"), false).unwrap();
    schema::migrate(&mut conn).unwrap();
    let insert = |tool: &str, open: bool| {
        conn.execute(
            "INSERT INTO holds (id, batch, world, chat, kind, status, open, version, data, agent, tool) \
             VALUES (randomblob(16), randomblob(16), 'w', 'c', 'approval', 'pending', ?, 1, '{}', 'a', ?)",
            rusqlite::params![open, tool],
        )
        .unwrap();
    };
    for _ in 0..reader::FEW {
        insert("common", true);
    }
    for _ in 0..3 {
        insert("rare", true);
    }
    // Resolved holds are not counted, however many.
    for _ in 0..2 * reader::FEW {
        insert("gone", false);
    }
    let urgent = |f: HoldFilter| HoldFilter {
        order: Order::Urgent,
        limit: 50,
        ..f
    };
    let text = |s: &str| Some(s.to_owned());
    for (f, through) in [
        (
            urgent(HoldFilter {
                tool: text("rare"),
                ..HoldFilter::default()
            }),
            Some("holds_open_tool"),
        ),
        (
            urgent(HoldFilter {
                tool: text("gone"),
                world: text("w"),
                ..HoldFilter::default()
            }),
            Some("holds_open_tool"),
        ),
        (
            urgent(HoldFilter {
                tool: text("common"),
                ..HoldFilter::default()
            }),
            None,
        ),
        (
            urgent(HoldFilter {
                world: text("w"),
                ..HoldFilter::default()
            }),
            None,
        ),
        (
            urgent(HoldFilter {
                world: text("w"),
                chat: text("other"),
                ..HoldFilter::default()
            }),
            Some("holds_open_chat"),
        ),
        (
            urgent(HoldFilter {
                agent: text("b"),
                tool: text("common"),
                ..HoldFilter::default()
            }),
            Some("holds_open_agent"),
        ),
        (
            urgent(HoldFilter {
                kind: Some(HoldKind::Question),
                ..HoldFilter::default()
            }),
            Some("holds_open_kind"),
        ),
        (urgent(HoldFilter::default()), None),
        (
            urgent(HoldFilter {
                batch: Some(BatchId::random()),
                tool: text("rare"),
                ..HoldFilter::default()
            }),
            None,
        ),
    ] {
        assert_eq!(reader::few_through(&conn, &f).unwrap(), through, "{f:?}");
        let Some(index) = through else { continue };
        for part in [crate::pages::Part::Due, crate::pages::Part::Undated] {
            let (sql, params) = reader::hold_query(&f, part, 50, through);
            let plan: Vec<String> = conn
                .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
                .unwrap()
                .query_map(rusqlite::params_from_iter(params), |r| {
                    r.get::<_, String>(3)
                })
                .unwrap()
                .map(Result::unwrap)
                .collect();
            assert!(
                plan[0].starts_with(&format!("SEARCH holds USING INDEX {index} (")),
                "{f:?}: {plan:?}"
            );
        }
    }
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

/// Migration 4 fills the agent and tool columns of the holds stored before it from their
/// JSON, so listings by agent and by tool find them.
#[test]
fn agent_and_tool_are_filled_in_for_existing_holds() {
    let dir = tempfile::tempdir().unwrap();
    let mut conn = connect(&dir.path().join("v3.db"), false).unwrap();
    for sql in &schema::MIGRATIONS[..3] {
        conn.execute_batch(sql).unwrap();
    }
    conn.pragma_update(None, "user_version", 3).unwrap();
    for (position, kind, data) in [
        (
            1,
            "approval",
            r#"{"agent":"a1","spec":{"kind":"approval","tool":"shell_cmd"}}"#,
        ),
        (
            2,
            "question",
            r#"{"agent":"a1","spec":{"kind":"question","text":"Go?"}}"#,
        ),
        (
            3,
            "approval",
            r#"{"spec":{"kind":"approval","tool":"read_file"}}"#,
        ),
    ] {
        conn.execute(
            "INSERT INTO holds (position, id, batch, world, kind, status, open, version, data) \
             VALUES (?, ?, ?, 'w', ?, 'pending', 1, 1, ?)",
            rusqlite::params![
                position,
                vec![position as u8; 16],
                vec![0u8; 16],
                kind,
                data
            ],
        )
        .unwrap();
    }
    schema::migrate(&mut conn).unwrap();
    let listed = |index: &str, column: &str, value: &str| -> Vec<i64> {
        conn.prepare(&format!(
            "SELECT position FROM holds INDEXED BY {index} WHERE open = 1 AND {column} = ? ORDER BY position"
        ))
        .unwrap()
        .query_map([value], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect()
    };
    assert_eq!(listed("holds_open_agent", "agent", "a1"), [1, 2]);
    assert_eq!(listed("holds_open_tool", "tool", "shell_cmd"), [1]);
    assert_eq!(listed("holds_open_tool", "tool", "read_file"), [3]);
    let urgent: i64 = conn
        .query_row(
            "SELECT count(*) FROM holds INDEXED BY holds_open_urgent WHERE open = 1 AND deadline IS NULL",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(urgent, 3);
}

/// Migration 5 fills the raiser column of the holds stored before it from their JSON, and
/// start's read of the open holds' marks uses the open holds' index alone.
#[test]
fn raisers_are_filled_in_and_marks_are_read_from_the_index_alone() {
    let dir = tempfile::tempdir().unwrap();
    let mut conn = connect(&dir.path().join("v4.db"), false).unwrap();
    for sql in &schema::MIGRATIONS[..4] {
        conn.execute_batch(sql).unwrap();
    }
    conn.pragma_update(None, "user_version", 4).unwrap();
    for (position, open, raiser) in [(1, 1, "bot-a"), (2, 0, "bot-b"), (3, 1, "bot-c")] {
        conn.execute(
            "INSERT INTO holds (position, id, batch, world, kind, status, open, deadline, version, data) \
             VALUES (?, ?, ?, 'w', 'question', 'pending', ?, 5000, 1, ?)",
            rusqlite::params![
                position,
                vec![position as u8; 16],
                vec![0u8; 16],
                open,
                format!(r#"{{"requested_by":"{raiser}"}}"#)
            ],
        )
        .unwrap();
    }
    schema::migrate(&mut conn).unwrap();
    let marks = reader::open_marks(&conn, 0..=u64::MAX, 10).unwrap();
    let read: Vec<_> = marks
        .iter()
        .map(|m| (m.position, &*m.item.requested_by, m.item.deadline))
        .collect();
    let at = Some(Timestamp::from_millis(5000));
    assert_eq!(read, [(1, "bot-a", at), (3, "bot-c", at)]);
    assert_eq!(
        reader::open_marks(&conn, 2..=u64::MAX, 10).unwrap().len(),
        1
    );
    let raiser: String = conn
        .query_row("SELECT raiser FROM holds WHERE position = 2", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(raiser, "bot-b", "resolved holds are filled in too");
    let plan: Vec<String> = conn
        .prepare(
            "EXPLAIN QUERY PLAN SELECT position, id, world, raiser, deadline, remind_at FROM holds \
             INDEXED BY holds_open WHERE open = 1 AND position > 0 ORDER BY position LIMIT 10",
        )
        .unwrap()
        .query_map([], |r| r.get(3))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert!(
        plan.iter().any(|p| p.contains("COVERING INDEX holds_open")),
        "{plan:?}"
    );
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

/// Start's read-ahead finds the open holds' index by its name and names each of its leaves
/// (a renamed index would leave start reading from a cold cache a page at a time, unnoticed).
#[test]
fn the_open_holds_index_is_read_ahead_whole() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("many.db");
    let mut conn = connect(&path, false).unwrap();
    schema::migrate(&mut conn).unwrap();
    let tx = conn.transaction().unwrap();
    for position in 1..=20_000i64 {
        tx.execute(
            "INSERT INTO holds (position, id, batch, world, kind, status, open, version, data, raiser) \
             VALUES (?, randomblob(16), randomblob(16), 'world', 'question', 'pending', ?, 1, '{}', 'bot')",
            rusqlite::params![position, position % 3 != 0],
        )
        .unwrap();
    }
    tx.commit().unwrap();
    let leaves: i64 = conn
        .query_row(
            "SELECT count(*) FROM dbstat WHERE name = 'holds_open' AND pagetype = 'leaf'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let leaves = usize::try_from(leaves).unwrap();
    assert!(leaves > 100, "{leaves} leaves");
    assert_eq!(read_ahead_open_marks(&path, 4), Ok(leaves));
}
