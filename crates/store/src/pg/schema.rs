//! The PostgreSQL schema, as an ordered list of migrations applied at open (the version is
//! kept in `holdpoint_schema`). Several nodes may start at once: the migrations run under a
//! transaction-scoped advisory lock, so one node migrates and the others find it done.

use holdpoint_core::audit::GENESIS;
use tokio_postgres::{Client, GenericClient};

/// Each entry moves the schema one version forward. Never edit a released entry; add one.
pub(super) const MIGRATIONS: &[&str] = &[
    // 1: what SQLite's schema has reached, in PostgreSQL's terms. Ids are `uuid` (16 bytes),
    // times are milliseconds since the epoch, entities are their JSON as text (exactly as
    // written: `jsonb` would reorder keys and cost a conversion on every read). Positions
    // are identities: every write takes the chain head's row lock first (see writer/), so
    // positions, like event sequence numbers, are handed out in commit order.
    r#"
    CREATE TABLE holds (
        position  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        id        uuid NOT NULL UNIQUE,
        batch     uuid NOT NULL,
        world     text NOT NULL,
        chat      text,
        agent     text,
        tool      text,
        kind      text NOT NULL,
        status    text NOT NULL,
        open      boolean NOT NULL,
        deadline  bigint,
        remind_at bigint,
        version   bigint NOT NULL,
        data      text NOT NULL
    );
    -- As in SQLite: indexes on columns that never change, and partial indexes of open and of
    -- resolved holds, so a decision moves a hold from one set to the other and nothing else.
    CREATE INDEX holds_batch ON holds (batch, position);
    CREATE INDEX holds_open ON holds (position) WHERE open;
    CREATE INDEX holds_open_world ON holds (world, position) WHERE open;
    CREATE INDEX holds_open_chat ON holds (world, chat, position) WHERE open AND chat IS NOT NULL;
    CREATE INDEX holds_open_kind ON holds (kind, position) WHERE open;
    CREATE INDEX holds_open_agent ON holds (agent, position) WHERE open AND agent IS NOT NULL;
    CREATE INDEX holds_open_tool ON holds (tool, position) WHERE open AND tool IS NOT NULL;
    CREATE INDEX holds_open_urgent ON holds (deadline, position, world, chat, kind, agent, tool)
        WHERE open;
    CREATE INDEX holds_done ON holds (position) WHERE NOT open;
    CREATE INDEX holds_done_world ON holds (world, position) WHERE NOT open;
    CREATE INDEX holds_done_chat ON holds (world, chat, position) WHERE NOT open AND chat IS NOT NULL;
    CREATE INDEX holds_done_agent ON holds (agent, position) WHERE NOT open AND agent IS NOT NULL;
    CREATE INDEX holds_done_tool ON holds (tool, position) WHERE NOT open AND tool IS NOT NULL;

    CREATE TABLE events (
        seq   bigint PRIMARY KEY,
        type  text NOT NULL,
        hold  uuid,
        world text,
        chat  text,
        body  text NOT NULL,
        hash  text NOT NULL
    );
    CREATE INDEX events_hold ON events (hold, seq) WHERE hold IS NOT NULL;
    CREATE INDEX events_world ON events (world, seq);
    CREATE INDEX events_chat ON events (world, chat, seq) WHERE chat IS NOT NULL;

    -- The newest entry of the chain, kept apart so that cutting entries off the end shows.
    -- Its one row exists from the start (sequence 0, the genesis hash): every writer locks
    -- it, which is what keeps the chain one line whichever process or node writes.
    CREATE TABLE audit_head (
        id   integer PRIMARY KEY CHECK (id = 1),
        seq  bigint NOT NULL,
        hash text NOT NULL
    );

    CREATE TABLE grants (
        position   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        id         uuid NOT NULL UNIQUE,
        world      text NOT NULL,
        revoked_at bigint,
        data       text NOT NULL
    );
    CREATE INDEX grants_active ON grants (world, position) WHERE revoked_at IS NULL;

    -- Records without a parent have the nil uuid as theirs, so that keys are unique per
    -- parent (NULL keys never clash: unkeyed records).
    CREATE TABLE records (
        position bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        kind     text NOT NULL,
        id       uuid NOT NULL,
        parent   uuid NOT NULL,
        key      text,
        version  bigint NOT NULL,
        data     text NOT NULL,
        UNIQUE (kind, id),
        UNIQUE (kind, parent, key)
    );
    CREATE INDEX records_children ON records (kind, parent, position);

    CREATE TABLE idempotency (
        key         text PRIMARY KEY,
        fingerprint text NOT NULL,
        response    text NOT NULL,
        created_at  bigint NOT NULL
    );
    CREATE INDEX idempotency_age ON idempotency (created_at);
    "#,
    // 2: the catalog's version, moved in every transaction that changes a record kind the
    // nodes cache (credentials, sessions, worlds, agents, webhooks): see catalog.rs.
    r#"
    CREATE TABLE catalog_version (
        id      integer PRIMARY KEY CHECK (id = 1),
        version bigint NOT NULL
    );
    INSERT INTO catalog_version (id, version) VALUES (1, 0);
    "#,
    // 3: start reads every open hold's id, world, raiser and timers (Store::open_marks) from
    // the open holds' index alone, as on SQLite: the raiser becomes a column (filled in for
    // the holds stored before) and the index carries the five.
    r#"
    ALTER TABLE holds ADD COLUMN raiser text;
    UPDATE holds SET raiser = (data::json)->>'requested_by';
    DROP INDEX holds_open;
    CREATE INDEX holds_open ON holds (position) INCLUDE (id, world, raiser, deadline, remind_at)
        WHERE open;
    "#,
];

/// Any number that no other program on the database is likely to use for an advisory lock.
const MIGRATION_LOCK: i64 = 0x686f6c64_706f696e; // "holdpoin"

/// The schema version recorded in the database (0 for an empty one).
async fn version(client: &impl GenericClient) -> Result<usize, String> {
    let exists: bool = client
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_tables WHERE tablename = 'holdpoint_schema' AND schemaname = current_schema())",
            &[],
        )
        .await
        .map_err(|e| e.to_string())?
        .get(0);
    if !exists {
        return Ok(0);
    }
    let v: i32 = client
        .query_one("SELECT version FROM holdpoint_schema", &[])
        .await
        .map_err(|e| e.to_string())?
        .get(0);
    Ok(usize::try_from(v).unwrap_or(usize::MAX))
}

fn too_new(version: usize) -> String {
    format!(
        "the database has schema version {version}, but this Holdpoint knows versions up to {}: \
         use a newer holdpoint",
        MIGRATIONS.len()
    )
}

/// Brings the schema up to date in one transaction (PostgreSQL changes its schema
/// transactionally: a failed migration leaves nothing behind). Refuses a database
/// written by a newer Holdpoint.
pub(super) async fn migrate(client: &mut Client) -> Result<(), String> {
    let tx = client.transaction().await.map_err(|e| e.to_string())?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(|e| e.to_string())?;
    let current = version(&tx).await?;
    if current > MIGRATIONS.len() {
        return Err(too_new(current));
    }
    if current == 0 {
        tx.batch_execute("CREATE TABLE holdpoint_schema (version integer NOT NULL)")
            .await
            .map_err(|e| e.to_string())?;
        tx.execute("INSERT INTO holdpoint_schema (version) VALUES (0)", &[])
            .await
            .map_err(|e| e.to_string())?;
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(current) {
        tx.batch_execute(sql)
            .await
            .map_err(|e| format!("migration {} failed: {e}", i + 1))?;
        let next = i32::try_from(i + 1).unwrap_or(i32::MAX);
        tx.execute("UPDATE holdpoint_schema SET version = $1", &[&next])
            .await
            .map_err(|e| e.to_string())?;
    }
    tx.execute(
        "INSERT INTO audit_head (id, seq, hash) VALUES (1, 0, $1) ON CONFLICT (id) DO NOTHING",
        &[&GENESIS],
    )
    .await
    .map_err(|e| e.to_string())?;
    tx.commit().await.map_err(|e| e.to_string())
}

/// Checks, without changing anything, that the schema is the one this Holdpoint writes.
pub(super) async fn check_current(client: &Client) -> Result<(), String> {
    let current = version(client).await?;
    if current > MIGRATIONS.len() {
        return Err(too_new(current));
    }
    if current != MIGRATIONS.len() {
        return Err(format!(
            "the database has schema version {current}; this Holdpoint reads version {} (start `holdpoint serve` once to migrate it)",
            MIGRATIONS.len()
        ));
    }
    Ok(())
}
