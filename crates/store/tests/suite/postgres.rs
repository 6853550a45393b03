//! What is particular to PostgreSQL: several stores (nodes) on one database keep one chain
//! and see each other's events, grants changed on one node are in force on every node, and
//! connection errors say what to fix.

use std::sync::Arc;

use holdpoint_core::audit::EventDraft;
use holdpoint_core::store::{PreparedEvent, Record, RecordKind, Store, Transaction, Write};
use holdpoint_core::{Engine, Scope, verify};
use holdpoint_protocol::{
    Actor, ApproveScope, Decision, Event, EventPayload, GateResult, GrantId, Source,
};
use holdpoint_store::PgStore;
use holdpoint_test_support::pg::{Relay, TempSchema, test_database_url};
use holdpoint_test_support::{PATIENCE, RecordingChannel, START, agent, approval, approver, gate};
use serde_json::json;
use tokio::sync::broadcast;

fn marker(world: &str) -> PreparedEvent {
    EventDraft {
        at: START,
        world: Some(world.into()),
        chat: None,
        hold: None,
        actor: Actor::of(Source::System),
        payload: EventPayload::GrantRevoked {
            grant: GrantId::random(),
        },
    }
    .into()
}

async fn append(store: &PgStore, world: &str) -> u64 {
    store
        .commit(Transaction {
            writes: vec![],
            events: vec![marker(world)],
        })
        .await
        .unwrap()[0]
        .seq
}

/// The next `n` events `rx` receives, by sequence number.
async fn received(rx: &mut broadcast::Receiver<Arc<Event>>, n: usize) -> Vec<u64> {
    let mut got = Vec::new();
    while got.len() < n {
        let e = tokio::time::timeout(PATIENCE, rx.recv())
            .await
            .unwrap_or_else(|_| panic!("only {got:?} were published within {PATIENCE:?}"))
            .unwrap();
        got.push(e.seq);
    }
    got
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stores_on_one_database_write_one_chain_and_publish_every_event_once_in_order() {
    let Some(schema) = TempSchema::new().await else {
        return;
    };
    let (a, b, watcher) = (
        schema.store().await,
        schema.store().await,
        schema.store().await,
    );
    let (mut seen_by_a, mut seen_by_b, mut seen_by_watcher) =
        (a.subscribe(), b.subscribe(), watcher.subscribe());
    // Writers on both interleave: each append lands after the other's.
    let mut tasks = Vec::new();
    for i in 0..40 {
        let store = if i % 2 == 0 { a.clone() } else { b.clone() };
        tasks.push(tokio::spawn(async move {
            append(&store, &format!("w{i}")).await
        }));
    }
    let mut seqs = Vec::new();
    for t in tasks {
        seqs.push(t.await.unwrap());
    }
    seqs.sort_unstable();
    assert_eq!(seqs, (1..=40).collect::<Vec<u64>>());
    let report = verify(a.as_ref()).await.unwrap().unwrap();
    assert_eq!(report.events, 40);
    // Every store publishes the whole log in order, its own events and the other's, and the
    // watcher, which never writes, learns of them all from its tail alone.
    for rx in [&mut seen_by_a, &mut seen_by_b, &mut seen_by_watcher] {
        assert_eq!(received(rx, 40).await, (1..=40).collect::<Vec<u64>>());
    }
    // Nothing was published twice: the next event each receives is the next one written.
    assert_eq!(append(&b, "last").await, 41);
    for rx in [&mut seen_by_a, &mut seen_by_b, &mut seen_by_watcher] {
        assert_eq!(received(rx, 1).await, vec![41]);
    }
    for s in [a, b, watcher] {
        s.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_lost_its_connection_publishes_what_others_wrote_meanwhile() {
    let Some(schema) = TempSchema::new().await else {
        return;
    };
    let relay = Relay::start(&schema.url).await;
    let writer = schema.store().await;
    let cut_off = Arc::new(PgStore::open(&relay.url).await.unwrap());
    let mut seen = cut_off.subscribe();
    for i in 0..5 {
        append(&writer, &format!("before{i}")).await;
    }
    assert_eq!(received(&mut seen, 5).await, vec![1, 2, 3, 4, 5]);
    // Written while the store cannot reach the database: no notification reaches it.
    relay.cut().await;
    for i in 0..5 {
        append(&writer, &format!("during{i}")).await;
    }
    relay.restore();
    assert_eq!(received(&mut seen, 5).await, vec![6, 7, 8, 9, 10]);
    // Its own writes and the other's go on in order, each once.
    assert_eq!(append(&cut_off, "own").await, 11);
    append(&writer, "after").await;
    assert_eq!(received(&mut seen, 2).await, vec![11, 12]);
    cut_off.close().await;
    writer.close().await;
}

/// A store whose tail is stopped learns of what another wrote only from its own writer,
/// which takes the head's lock: it publishes the others' events, then its own, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_publishes_what_others_wrote_before_its_own_events() {
    let Some(schema) = TempSchema::new().await else {
        return;
    };
    let (deaf, other) = (schema.store().await, schema.store().await);
    deaf.stop_tail();
    let mut seen = deaf.subscribe();
    for i in 0..3 {
        append(&other, &format!("other{i}")).await;
    }
    assert_eq!(append(&deaf, "own").await, 4);
    assert_eq!(received(&mut seen, 4).await, vec![1, 2, 3, 4]);
    for s in [deaf, other] {
        s.close().await;
    }
}

/// The test database's URL with one part replaced.
fn with(url: &str, password: Option<&str>, database: Option<&str>) -> String {
    let (rest, db) = url
        .split_once('?')
        .map_or(url, |(u, _)| u)
        .rsplit_once('/')
        .expect("the test database URL names a database");
    let mut rest = rest.to_owned();
    if let Some(p) = password {
        let (scheme, tail) = rest.split_once("://").expect("the URL has a scheme");
        let (userinfo, host) = tail.rsplit_once('@').expect("the URL has a user");
        let user = userinfo.split_once(':').map_or(userinfo, |(u, _)| u);
        rest = format!("{scheme}://{user}:{p}@{host}");
    }
    format!("{rest}/{}", database.unwrap_or(db))
}

async fn open_error(url: &str) -> String {
    PgStore::open(url).await.err().unwrap().to_string()
}

#[tokio::test]
async fn connection_errors_say_what_to_fix() {
    let Some(base) = test_database_url() else {
        return;
    };
    let e = open_error(&with(&base, Some("wrong-password"), None)).await;
    assert!(e.contains("refused user"), "{e}");
    assert!(e.contains("check the user and password"), "{e}");
    assert!(!e.contains("wrong-password"), "{e}");

    let missing = format!("holdpoint_missing_{}", uuid::Uuid::now_v7().simple());
    let e = open_error(&with(&base, None, Some(&missing))).await;
    assert!(
        e.contains(&format!("the database \"{missing}\" does not exist")),
        "{e}"
    );
    assert!(e.contains("createdb"), "{e}");

    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let e = open_error(&format!("postgres://hp:secret@127.0.0.1:{port}/holdpoint")).await;
    assert!(
        e.starts_with(&format!(
            "cannot reach PostgreSQL at 127.0.0.1:{port}/holdpoint"
        )),
        "{e}"
    );
    assert!(e.contains("is it running"), "{e}");
    assert!(!e.contains("secret"), "{e}");
}

#[tokio::test]
async fn a_store_opened_read_only_reads_and_refuses_to_write() {
    let Some(schema) = TempSchema::new().await else {
        return;
    };
    let writer = schema.store().await;
    append(&writer, "w").await;
    let reader: Arc<dyn Store> = Arc::new(PgStore::open_read_only(&schema.url).await.unwrap());
    assert_eq!(reader.audit_head().await.unwrap().unwrap().seq, 1);
    assert!(
        reader
            .commit(Transaction {
                writes: vec![],
                events: vec![marker("w")],
            })
            .await
            .is_err()
    );
    writer.close().await;
}

/// A node on `store`: an engine whose default policy asks for every call.
async fn node(store: &Arc<PgStore>) -> Engine {
    Engine::builder(store.clone())
        .channel(Arc::new(RecordingChannel::default()))
        .start()
        .await
        .unwrap()
}

/// Gates one call to `tool` as an agent.
async fn call(node: &Engine, tool: &str) -> GateResult {
    let req = gate("w", None, vec![approval(tool, json!({"to": "prod"}))]);
    node.gate(&agent("bot"), req)
        .await
        .unwrap()
        .results
        .remove(0)
}

/// Grants `tool` for good through `node`: asks, and approves always for the tool.
async fn grant(node: &Engine, tool: &str) -> GrantId {
    let GateResult::Held { hold } = call(node, tool).await else {
        panic!("{tool} was not asked")
    };
    let approve = Decision::Approve {
        scope: ApproveScope::AlwaysTool,
        digest: None,
        reason: None,
        expires_in: None,
    };
    let who = approver("alice");
    node.decide(&who, hold.id, approve, &Scope::any(), None)
        .await
        .unwrap();
    let grants = node.grants(Some("w")).await.unwrap();
    grants.iter().find(|g| g.tool == tool).unwrap().id
}

/// Each node keeps grants in memory, fed by its tail. A gate first brings them up to the
/// log's head, so a grant revoked through one node allows nothing on another at once, even
/// one whose tail has not heard of the revocation (here: never will, it is stopped); and a
/// grant made through one node allows the call on another at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grants_changed_on_one_node_are_in_force_on_another_for_the_next_call() {
    let Some(schema) = TempSchema::new().await else {
        return;
    };
    let (store_a, store_b) = (schema.store().await, schema.store().await);
    let (a, b) = (node(&store_a).await, node(&store_b).await);
    let deploy = grant(&a, "deploy").await;
    b.catch_up().await.unwrap();
    assert!(
        matches!(call(&b, "deploy").await, GateResult::Allowed { .. }),
        "the grant allows the call on the other node"
    );

    store_b.stop_tail();
    let who = approver("alice");
    a.revoke_grant(&who, deploy, &Scope::any()).await.unwrap();
    assert!(
        matches!(call(&b, "deploy").await, GateResult::Held { .. }),
        "a grant revoked on one node must not allow a call on another"
    );
    grant(&a, "backup").await;
    assert!(
        matches!(call(&b, "backup").await, GateResult::Allowed { .. }),
        "a grant made on one node allows the call on another at once"
    );
}

fn token(version: u64, revoked: bool) -> Record {
    holdpoint_core::record::encode(
        RecordKind::Token,
        uuid::Uuid::from_u128(1),
        None,
        Some("hash-of-the-secret".into()),
        version,
        &json!({"revoked": revoked}),
    )
    .unwrap()
}

async fn put(store: &PgStore, r: Record) {
    store
        .commit(Transaction {
            writes: vec![Write::PutRecord(Box::new(r))],
            events: vec![],
        })
        .await
        .unwrap();
}

/// What node `store` answers for the credential, by key, by id and in a listing.
async fn seen(store: &PgStore) -> [serde_json::Value; 3] {
    let by_key = store
        .record_by_key(RecordKind::Token, None, "hash-of-the-secret")
        .await
        .unwrap()
        .unwrap();
    let by_id = store
        .record(RecordKind::Token, uuid::Uuid::from_u128(1))
        .await
        .unwrap()
        .unwrap();
    let listed = store.all_records(RecordKind::Token, None).await.unwrap();
    [by_key.data, by_id.data, listed[0].data.clone()]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_catalog_change_on_one_node_is_read_by_another_at_once_though_it_caches_the_catalog() {
    let Some(schema) = TempSchema::new().await else {
        return;
    };
    let (a, b) = (schema.store().await, schema.store().await);
    // B learns of nothing from its tail: only the catalog's version can tell it.
    b.stop_tail();
    put(&a, token(1, false)).await;
    let live = json!({"revoked": false});
    assert_eq!(seen(&b).await, [live.clone(), live.clone(), live]);
    // B now answers from its cache; A revokes, and B's very next reads see it.
    put(&a, token(2, true)).await;
    let revoked = json!({"revoked": true});
    assert_eq!(seen(&b).await, [revoked.clone(), revoked.clone(), revoked]);
    // Many reads at once on B share reads of the version and all see the change made
    // before they were sent.
    put(&a, token(3, false)).await;
    let reads: Vec<_> = (0..50)
        .map(|_| {
            let b = b.clone();
            tokio::spawn(async move { seen(&b).await })
        })
        .collect();
    for read in reads {
        assert_eq!(read.await.unwrap()[0], json!({"revoked": false}));
    }
    for s in [a, b] {
        s.close().await;
    }
}

/// A node on a schema of its own with one `deploy` call held (none without PostgreSQL).
async fn deploy_held() -> Option<(
    TempSchema,
    Arc<PgStore>,
    Engine,
    Arc<holdpoint_protocol::Hold>,
)> {
    let schema = TempSchema::new().await?;
    let store = schema.store().await;
    let engine = node(&store).await;
    let GateResult::Held { hold } = call(&engine, "deploy").await else {
        panic!("deploy was not asked")
    };
    Some((schema, store, engine, hold))
}

/// A plain connection to `schema`, to change it behind the stores' backs.
async fn connect(schema: &TempSchema) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(&schema.url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    client
}

/// A conditional write that changes no row fails its transaction, though the `COMMIT` is
/// sent with it: here a trigger someone put on the table skips the decision's update
/// silently, after its precondition was checked. The decision fails, nothing of it is
/// stored (no event without its write), and the chain still verifies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_that_changed_nothing_rolls_its_transaction_back() {
    let Some((schema, store, engine, hold)) = deploy_held().await else {
        return;
    };
    let client = connect(&schema).await;
    client
        .batch_execute(
            "CREATE FUNCTION skip() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$;
             CREATE TRIGGER skip_updates BEFORE UPDATE ON holds FOR EACH ROW EXECUTE FUNCTION skip();",
        )
        .await
        .unwrap();
    let head = store.audit_head().await.unwrap().unwrap().seq;
    let deny = Decision::Deny { reason: None };
    let decided = engine
        .decide(&approver("alice"), hold.id, deny, &Scope::any(), None)
        .await;
    assert!(
        decided.is_err(),
        "a decision whose write was skipped: {decided:?}"
    );
    assert_eq!(store.audit_head().await.unwrap().unwrap().seq, head);
    assert_eq!(
        store.hold(hold.id).await.unwrap().unwrap().version,
        hold.version
    );
    verify(store.as_ref()).await.unwrap().unwrap();
    store.close().await;
}

/// Migration 3 on a database whose holds were stored before it: their raisers are filled in
/// from the JSON, and a node starting on it counts each open hold against its raiser.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raisers_of_holds_stored_before_migration_3_are_filled_in() {
    let Some((schema, store, engine, hold)) = deploy_held().await else {
        return;
    };
    drop(engine);
    store.close().await;
    let client = connect(&schema).await;
    // The schema as version 2 left it.
    client
        .batch_execute(
            "DROP INDEX holds_open;
             ALTER TABLE holds DROP COLUMN raiser;
             CREATE INDEX holds_open ON holds (position) WHERE open;
             UPDATE holdpoint_schema SET version = 2;",
        )
        .await
        .unwrap();
    let store = schema.store().await;
    let marks = store.open_marks(0..=u64::MAX, 10).await.unwrap();
    assert_eq!(marks.len(), 1);
    assert_eq!(
        (marks[0].item.id, &*marks[0].item.requested_by),
        (hold.id, hold.requested_by.as_str())
    );
    let report = verify(&*store).await.unwrap().unwrap();
    assert_eq!(report.state.holds, 1);
    assert!(
        report.state.mismatches.is_empty(),
        "{:?}",
        report.state.mismatches
    );
    store.close().await;
}
