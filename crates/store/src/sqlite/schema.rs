//! The schema, as an ordered list of migrations applied at open (tracked in `user_version`).

use rusqlite::Connection;

/// Each entry moves the schema one version forward. Never edit a released entry; add one.
pub(super) const MIGRATIONS: &[&str] = &[
    // 1: holds, the event log with its head, grants, idempotency records. Ids are stored as
    // their 16 bytes: smaller indexes and cheaper comparisons than text.
    r#"
    CREATE TABLE holds (
        position  INTEGER PRIMARY KEY,
        id        BLOB NOT NULL UNIQUE,
        batch     BLOB NOT NULL,
        world     TEXT NOT NULL,
        chat      TEXT,
        kind      TEXT NOT NULL,
        status    TEXT NOT NULL,
        open      INTEGER NOT NULL,
        deadline  INTEGER,
        remind_at INTEGER,
        version   INTEGER NOT NULL,
        data      TEXT NOT NULL
    ) STRICT;
    -- Listings walk an index in `position` order and stop after a page. Indexes on columns
    -- that never change (id, batch) cost nothing when a hold changes; the others are partial
    -- indexes of open or of resolved holds, so deciding a hold moves it from one set to the
    -- other and nothing else (a vote, a reminder, the confirm step touch no index).
    CREATE INDEX holds_batch ON holds (batch, position);
    CREATE INDEX holds_open ON holds (position) WHERE open = 1;
    CREATE INDEX holds_open_world ON holds (world, position) WHERE open = 1;
    CREATE INDEX holds_open_chat ON holds (world, chat, position) WHERE open = 1;
    CREATE INDEX holds_open_kind ON holds (kind, position) WHERE open = 1;
    CREATE INDEX holds_done ON holds (position) WHERE open = 0;
    CREATE INDEX holds_done_world ON holds (world, position) WHERE open = 0;
    CREATE INDEX holds_done_chat ON holds (world, chat, position) WHERE open = 0;

    CREATE TABLE events (
        seq   INTEGER PRIMARY KEY,
        type  TEXT NOT NULL,
        hold  BLOB,
        world TEXT,
        chat  TEXT,
        body  TEXT NOT NULL,
        hash  TEXT NOT NULL
    ) STRICT;
    CREATE INDEX events_hold ON events (hold, seq) WHERE hold IS NOT NULL;
    CREATE INDEX events_world ON events (world, seq);
    CREATE INDEX events_chat ON events (world, chat, seq);

    -- The newest entry of the chain, kept apart so that cutting entries off the end shows.
    CREATE TABLE audit_head (
        id   INTEGER PRIMARY KEY CHECK (id = 1),
        seq  INTEGER NOT NULL,
        hash TEXT NOT NULL
    ) STRICT;

    CREATE TABLE grants (
        id         BLOB PRIMARY KEY,
        world      TEXT NOT NULL,
        revoked_at INTEGER,
        data       TEXT NOT NULL
    ) STRICT;
    CREATE INDEX grants_active ON grants (world) WHERE revoked_at IS NULL;

    -- The runtime's records (worlds, agents, chats, messages, turns): opaque JSON under a
    -- kind. `parent` is empty for records without one, so that keys are unique per parent.
    CREATE TABLE records (
        position INTEGER PRIMARY KEY,
        kind     TEXT NOT NULL,
        id       BLOB NOT NULL,
        parent   BLOB NOT NULL,
        key      TEXT,
        version  INTEGER NOT NULL,
        data     TEXT NOT NULL,
        UNIQUE (kind, id),
        UNIQUE (kind, parent, key)
    ) STRICT;
    CREATE INDEX records_children ON records (kind, parent, position);

    CREATE TABLE idempotency (
        key         TEXT PRIMARY KEY,
        fingerprint TEXT NOT NULL,
        response    TEXT NOT NULL,
        created_at  INTEGER NOT NULL
    ) STRICT;
    "#,
    // 2: the chat indexes leave out what belongs to no chat (external agents' holds and their
    // events), which nothing looks up by chat: one B-tree page fewer for each such write.
    // (A query with `chat = ?` implies `chat IS NOT NULL`, so it still uses them.)
    r#"
    DROP INDEX holds_open_chat;
    DROP INDEX holds_done_chat;
    DROP INDEX events_chat;
    CREATE INDEX holds_open_chat ON holds (world, chat, position) WHERE open = 1 AND chat IS NOT NULL;
    CREATE INDEX holds_done_chat ON holds (world, chat, position) WHERE open = 0 AND chat IS NOT NULL;
    CREATE INDEX events_chat ON events (world, chat, seq) WHERE chat IS NOT NULL;
    "#,
    // 3: idempotency records are forgotten once their retention has passed, oldest first.
    // Records are made in time order, so each insertion lands on the index's last page.
    r#"
    CREATE INDEX idempotency_age ON idempotency (created_at);
    "#,
    // 4: holds are listed by agent and by tool, and open ones by urgency. Agent and tool were
    // only inside the JSON: they become columns (filled in for the holds stored before), so
    // that indexes serve these listings. Neither changes after a hold is made, nor does the
    // deadline, so these indexes too are touched only when a hold is made and when it is
    // resolved. The urgency index carries the other filters' columns, so that a filtered
    // urgent listing checks them on index entries and reads only the holds it returns.
    r#"
    ALTER TABLE holds ADD COLUMN agent TEXT;
    ALTER TABLE holds ADD COLUMN tool TEXT;
    UPDATE holds SET agent = json_extract(data, '$.agent'), tool = json_extract(data, '$.spec.tool');
    CREATE INDEX holds_open_agent ON holds (agent, position) WHERE open = 1 AND agent IS NOT NULL;
    CREATE INDEX holds_open_tool ON holds (tool, position) WHERE open = 1 AND tool IS NOT NULL;
    CREATE INDEX holds_done_agent ON holds (agent, position) WHERE open = 0 AND agent IS NOT NULL;
    CREATE INDEX holds_done_tool ON holds (tool, position) WHERE open = 0 AND tool IS NOT NULL;
    CREATE INDEX holds_open_urgent ON holds (deadline, position, world, chat, kind, agent, tool)
        WHERE open = 1;
    "#,
    // 5: start reads every open hold's id, world, raiser and timers (Store::open_marks). The
    // raiser was only inside the JSON, so the read went to every open hold's row and parsed
    // it: with millions open, gigabytes. It becomes a column (never changed after a hold is
    // made, filled in for the holds stored before), and the open holds' index carries all
    // five, so start reads the index alone, in position order.
    r#"
    ALTER TABLE holds ADD COLUMN raiser TEXT;
    UPDATE holds SET raiser = json_extract(data, '$.requested_by');
    DROP INDEX holds_open;
    CREATE INDEX holds_open ON holds (position, id, world, raiser, deadline, remind_at)
        WHERE open = 1;
    "#,
];

/// Brings the schema up to date. Refuses a database written by a newer Holdpoint.
pub(super) fn migrate(conn: &mut Connection) -> Result<(), String> {
    let version: usize = conn
        .query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0))
        .map_err(|e| e.to_string())?
        .try_into()
        .unwrap_or(usize::MAX);
    if version > MIGRATIONS.len() {
        return Err(format!(
            "the database has schema version {version}, but this Holdpoint knows versions up to {}: \
             use a newer holdpoint",
            MIGRATIONS.len()
        ));
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(version) {
        let tx = conn.transaction().map_err(|e| e.to_string())?;
        tx.execute_batch(sql)
            .map_err(|e| format!("migration {} failed: {e}", i + 1))?;
        tx.pragma_update(None, "user_version", (i + 1) as i64)
            .map_err(|e| e.to_string())?;
        tx.commit().map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Checks, without changing anything, that the schema is the one this Holdpoint writes.
pub(super) fn check_current(conn: &Connection) -> Result<(), String> {
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(|e| e.to_string())?;
    if version != MIGRATIONS.len() as i64 {
        return Err(format!(
            "the database has schema version {version}; this Holdpoint reads version {} (start `holdpoint serve` once to migrate it)",
            MIGRATIONS.len()
        ));
    }
    Ok(())
}
