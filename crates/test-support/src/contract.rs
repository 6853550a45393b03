//! The `Store` contract: what every store must do, as test cases over `Arc<dyn Store>`.
//!
//! A store implementation runs the whole suite with [`store_contract!`], giving a function
//! that returns a fresh, empty store (and anything that must live as long as it), or `None`
//! when the store cannot be had here (PostgreSQL outside CI without a test database: see
//! [`crate::pg::test_database_url`]).

use std::any::Any;
use std::sync::Arc;
use std::time::Duration;

use holdpoint_core::audit::EventDraft;
use holdpoint_core::hold::{HoldContext, question_hold, validate_question};
use holdpoint_core::limits::Limits;
use holdpoint_core::store::{
    CommitError, Conflict, EventFilter, HoldFilter, OpenMark, PreparedEvent, Record, RecordKind,
    StatusSet, Store, Transaction, Write,
};
use holdpoint_core::verify;
use holdpoint_protocol::{
    Actor, ApprovalSpec, BatchId, Deadline, EventPayload, Grant, GrantId, GrantScope, Hold,
    HoldCount, HoldId, HoldKind, HoldSpec, HoldStatus, Order, Source, Timestamp,
};
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::{START, question};

/// A fresh store and what keeps it alive.
pub struct Fixture {
    pub store: Arc<dyn Store>,
    pub guard: Box<dyn Any + Send>,
}

/// Runs every contract case as its own test, with `$fresh` (an async fn returning an
/// `Option<`[`Fixture`]`>`) making a new empty store for each.
#[macro_export]
macro_rules! store_contract {
    ($fresh:path) => {
        $crate::store_contract!(@cases $fresh;
            commits_chain_events_without_gaps,
            a_failed_precondition_applies_nothing,
            updates_apply_only_at_the_version_read,
            lists_holds_by_filter_in_order,
            pages_continue_after_a_cursor,
            lists_holds_by_agent_and_tool,
            urgent_order_pages_by_deadline,
            urgent_order_pages_alike_whether_a_filter_matches_many_or_few,
            finds_open_holds_in_a_chat,
            counts_open_holds_by_world_and_kind,
            marks_every_open_hold_from_its_columns,
            grants_are_listed_until_revoked,
            idempotency_keys_are_recorded_once,
            idempotency_records_are_forgotten_oldest_first,
            events_filter_and_report_how_far_they_scanned,
            events_read_newest_first_back_to_the_start,
            subscribers_see_committed_events_in_order,
            concurrent_commits_all_land_in_one_chain,
            records_are_created_updated_and_listed,
            record_keys_are_unique_per_parent,
            records_are_deleted_one_by_one_or_by_parent,
            every_read_sees_the_last_committed_change,
            transactions_sent_together_apply_one_after_another,
        );
    };
    (@cases $fresh:path; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                let Some(fixture) = $fresh().await else {
                    return;
                };
                $crate::contract::$case(fixture.store.clone()).await;
                drop(fixture);
            }
        )*
    };
}

fn hold_in(world: &str, chat: Option<&str>, batch: BatchId, at: Timestamp) -> Hold {
    let ctx = HoldContext {
        world,
        chat,
        agent: None,
        requested_by: "agent-1",
        batch,
        now: at,
        remind_before: Duration::from_secs(60),
        policy: None,
        lineage: &[],
    };
    let spec = validate_question(&question("Go?", &["yes", "no"]), &Limits::default()).unwrap();
    question_hold(&ctx, spec, None, Deadline::After(Duration::from_secs(600)))
}

fn created(hold: &Hold) -> PreparedEvent {
    EventDraft {
        at: hold.created_at,
        world: Some(hold.world.clone()),
        chat: hold.chat.clone(),
        hold: Some(hold.id),
        actor: Actor::named(Source::Agent, "agent-1"),
        payload: EventPayload::HoldCreated {
            hold: Arc::new(hold.clone()),
        },
    }
    .into()
}

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

fn insert(hold: &Hold) -> Transaction {
    Transaction {
        writes: vec![Write::InsertHold(Arc::new(hold.clone()))],
        events: vec![created(hold)],
    }
}

/// The hold at its next version, resolved as canceled.
fn resolved(hold: &Hold) -> Hold {
    let mut h = hold.clone();
    h.version += 1;
    h.status = HoldStatus::Canceled;
    h
}

async fn all_events(store: &Arc<dyn Store>) -> Vec<u64> {
    store
        .events(0, &EventFilter::default(), 10_000)
        .await
        .unwrap()
        .events
        .iter()
        .map(|e| e.seq)
        .collect()
}

pub async fn commits_chain_events_without_gaps(store: Arc<dyn Store>) {
    assert_eq!(store.audit_head().await.unwrap(), None);
    let first = store
        .commit(Transaction {
            writes: vec![],
            events: vec![marker("w"), marker("w")],
        })
        .await
        .unwrap();
    let second = store
        .commit(Transaction {
            writes: vec![],
            events: vec![marker("x")],
        })
        .await
        .unwrap();
    let seqs: Vec<u64> = first.iter().chain(&second).map(|e| e.seq).collect();
    assert_eq!(seqs, vec![1, 2, 3]);
    let head = store.audit_head().await.unwrap().unwrap();
    assert_eq!((head.seq, head.hash.as_str()), (3, second[0].hash.as_str()));
    let report = verify(store.as_ref()).await.unwrap().unwrap();
    assert_eq!(report.events, 3);
    let raw = store.raw_events(1, 10).await.unwrap();
    assert_eq!(raw.iter().map(|r| r.seq).collect::<Vec<_>>(), vec![2, 3]);
    assert_eq!(raw[1].world.as_deref(), Some("x"));
}

pub async fn a_failed_precondition_applies_nothing(store: Arc<dyn Store>) {
    let h = hold_in("w", Some("c"), BatchId::random(), START);
    store.commit(insert(&h)).await.unwrap();
    let other = hold_in("w", Some("c"), BatchId::random(), START);
    // A new hold and a duplicate of an existing one: neither applies, no event is appended.
    let tx = Transaction {
        writes: vec![
            Write::InsertHold(Arc::new(other.clone())),
            Write::InsertHold(Arc::new(h.clone())),
        ],
        events: vec![created(&other), created(&h)],
    };
    match store.commit(tx).await {
        Err(CommitError::Conflict(Conflict::HoldExists(id))) => assert_eq!(id, h.id),
        r => panic!("expected a conflict, got {r:?}"),
    }
    assert_eq!(store.hold(other.id).await.unwrap(), None);
    assert_eq!(all_events(&store).await, vec![1]);
    // The chain goes on from where it was.
    let next = store
        .commit(Transaction {
            writes: vec![],
            events: vec![marker("w")],
        })
        .await
        .unwrap();
    assert_eq!(next[0].seq, 2);
    verify(store.as_ref()).await.unwrap().unwrap();
}

pub async fn updates_apply_only_at_the_version_read(store: Arc<dyn Store>) {
    let h = hold_in("w", None, BatchId::random(), START);
    store.commit(insert(&h)).await.unwrap();
    let v2 = resolved(&h);
    store
        .commit(Transaction {
            writes: vec![Write::UpdateHold(Arc::new(v2.clone()))],
            events: vec![],
        })
        .await
        .unwrap();
    assert_eq!(store.hold(h.id).await.unwrap(), Some(v2.clone()));
    // The same change again was computed from version 1, which is gone.
    match store
        .commit(Transaction {
            writes: vec![Write::UpdateHold(Arc::new(v2.clone()))],
            events: vec![marker("w")],
        })
        .await
    {
        Err(CommitError::Conflict(Conflict::StaleHold(id))) => assert_eq!(id, h.id),
        r => panic!("expected a stale hold, got {r:?}"),
    }
    assert_eq!(all_events(&store).await, vec![1]);
    let unknown = resolved(&hold_in("w", None, BatchId::random(), START));
    assert!(matches!(
        store
            .commit(Transaction {
                writes: vec![Write::UpdateHold(Arc::new(unknown))],
                events: vec![]
            })
            .await,
        Err(CommitError::Conflict(Conflict::StaleHold(_)))
    ));
}

pub async fn lists_holds_by_filter_in_order(store: Arc<dyn Store>) {
    let batch = BatchId::random();
    let a = hold_in("w1", Some("c1"), batch, START);
    let b = hold_in("w1", Some("c2"), batch, START);
    let c = hold_in("w2", None, BatchId::random(), START);
    let d = hold_in("w1", Some("c1"), BatchId::random(), START);
    for h in [&a, &b, &c, &d] {
        store.commit(insert(h)).await.unwrap();
    }
    store
        .commit(Transaction {
            writes: vec![Write::UpdateHold(Arc::new(resolved(&d)))],
            events: vec![],
        })
        .await
        .unwrap();
    let list = |f: HoldFilter| {
        let store = store.clone();
        async move { ids(store.holds(&HoldFilter { limit: 100, ..f }).await.unwrap()) }
    };
    assert_eq!(list(HoldFilter::default()).await, vec![a.id, b.id, c.id]);
    assert_eq!(
        list(HoldFilter {
            order: Order::Newest,
            ..HoldFilter::default()
        })
        .await,
        vec![c.id, b.id, a.id]
    );
    assert_eq!(
        list(HoldFilter {
            world: Some("w1".into()),
            ..HoldFilter::default()
        })
        .await,
        vec![a.id, b.id]
    );
    assert_eq!(
        list(HoldFilter {
            world: Some("w1".into()),
            chat: Some("c1".into()),
            status: StatusSet::Any,
            ..HoldFilter::default()
        })
        .await,
        vec![a.id, d.id]
    );
    assert_eq!(
        list(HoldFilter {
            status: StatusSet::Resolved,
            ..HoldFilter::default()
        })
        .await,
        vec![d.id]
    );
    assert_eq!(
        list(HoldFilter {
            status: StatusSet::Is(HoldStatus::Canceled),
            ..HoldFilter::default()
        })
        .await,
        vec![d.id]
    );
    assert_eq!(
        list(HoldFilter {
            status: StatusSet::Is(HoldStatus::Denied),
            ..HoldFilter::default()
        })
        .await,
        vec![]
    );
    assert_eq!(
        list(HoldFilter {
            batch: Some(batch),
            ..HoldFilter::default()
        })
        .await,
        vec![a.id, b.id]
    );
    assert_eq!(
        list(HoldFilter {
            kind: Some(HoldKind::Approval),
            ..HoldFilter::default()
        })
        .await,
        vec![]
    );
    assert_eq!(
        list(HoldFilter {
            status: StatusSet::Any,
            order: Order::Newest,
            ..HoldFilter::default()
        })
        .await,
        vec![d.id, c.id, b.id, a.id]
    );
    assert_eq!(
        store
            .batch(batch)
            .await
            .unwrap()
            .iter()
            .map(|h| h.id)
            .collect::<Vec<_>>(),
        vec![a.id, b.id]
    );
}

pub async fn pages_continue_after_a_cursor(store: Arc<dyn Store>) {
    let mut made = Vec::new();
    for _ in 0..7 {
        let h = hold_in("w", None, BatchId::random(), START);
        store.commit(insert(&h)).await.unwrap();
        made.push(h.id);
    }
    for order in [Order::Oldest, Order::Newest] {
        let mut seen = Vec::new();
        let mut after = None;
        loop {
            let page = store
                .holds(&HoldFilter {
                    order,
                    after,
                    limit: 3,
                    ..HoldFilter::default()
                })
                .await
                .unwrap();
            after = page.last().map(|r| r.position);
            let n = page.len();
            seen.extend(page.into_iter().map(|r| r.item.id));
            if n < 3 {
                break;
            }
        }
        let mut expected = made.clone();
        if order == Order::Newest {
            expected.reverse();
        }
        assert_eq!(seen, expected, "{order:?}");
    }
}

/// A hold of `agent` in `world`: an approval of `tool`, or a question without one.
fn hold_of(world: &str, agent: Option<&str>, tool: Option<&str>) -> Hold {
    let mut h = hold_in(world, None, BatchId::random(), START);
    h.agent = agent.map(str::to_owned);
    if let Some(tool) = tool {
        let arguments = json!({"n": 1});
        h.spec = HoldSpec::Approval(ApprovalSpec {
            tool: tool.into(),
            digest: holdpoint_core::canonical::digest(&arguments),
            arguments,
            schema: None,
            annotations: None,
            description: None,
            mcp: None,
        });
    }
    h
}

fn ids(rows: Vec<holdpoint_core::store::Positioned<Hold>>) -> Vec<HoldId> {
    rows.into_iter().map(|r| r.item.id).collect()
}

pub async fn lists_holds_by_agent_and_tool(store: Arc<dyn Store>) {
    let a = hold_of("w1", Some("a1"), Some("shell"));
    let b = hold_of("w1", Some("a1"), None);
    let c = hold_of("w2", Some("a2"), Some("shell"));
    let d = hold_of("w1", None, Some("read"));
    let e = hold_of("w1", Some("a1"), Some("shell"));
    for h in [&a, &b, &c, &d, &e] {
        store.commit(insert(h)).await.unwrap();
    }
    store
        .commit(Transaction {
            writes: vec![Write::UpdateHold(Arc::new(resolved(&e)))],
            events: vec![],
        })
        .await
        .unwrap();
    let list = |f: HoldFilter| {
        let store = store.clone();
        async move { ids(store.holds(&HoldFilter { limit: 100, ..f }).await.unwrap()) }
    };
    let by = |agent: Option<&str>, tool: Option<&str>| HoldFilter {
        agent: agent.map(Into::into),
        tool: tool.map(Into::into),
        ..HoldFilter::default()
    };
    assert_eq!(list(by(Some("a1"), None)).await, vec![a.id, b.id]);
    assert_eq!(list(by(Some("a3"), None)).await, vec![]);
    assert_eq!(list(by(None, Some("shell"))).await, vec![a.id, c.id]);
    assert_eq!(list(by(None, Some("read"))).await, vec![d.id]);
    assert_eq!(list(by(Some("a1"), Some("shell"))).await, vec![a.id]);
    // A question has no tool, so no tool filter finds it.
    assert_eq!(
        list(HoldFilter {
            kind: Some(HoldKind::Question),
            ..by(None, Some("shell"))
        })
        .await,
        vec![]
    );
    assert_eq!(
        list(HoldFilter {
            world: Some("w2".into()),
            ..by(Some("a1"), None)
        })
        .await,
        vec![]
    );
    assert_eq!(
        list(HoldFilter {
            world: Some("w2".into()),
            ..by(None, Some("shell"))
        })
        .await,
        vec![c.id]
    );
    assert_eq!(
        list(HoldFilter {
            order: Order::Newest,
            ..by(Some("a1"), None)
        })
        .await,
        vec![b.id, a.id]
    );
    assert_eq!(
        list(HoldFilter {
            status: StatusSet::Resolved,
            ..by(None, Some("shell"))
        })
        .await,
        vec![e.id]
    );
    assert_eq!(
        list(HoldFilter {
            status: StatusSet::Any,
            ..by(Some("a1"), None)
        })
        .await,
        vec![a.id, b.id, e.id]
    );
    // Equal deadlines: the urgent order is by position among them.
    for (agent, tool, expected) in [
        (Some("a1"), None, vec![a.id, b.id]),
        (None, Some("shell"), vec![a.id, c.id]),
        (Some("a2"), Some("shell"), vec![c.id]),
    ] {
        assert_eq!(
            list(HoldFilter {
                order: Order::Urgent,
                ..by(agent, tool)
            })
            .await,
            expected
        );
    }
}

/// The ids of `holds` in the urgent order: soonest deadline first, those without one last,
/// in the order given among equals (a stable sort).
fn by_urgency<'a>(holds: impl Iterator<Item = &'a Hold>) -> Vec<HoldId> {
    let mut holds: Vec<&Hold> = holds.collect();
    holds.sort_by_key(|h| (h.deadline.is_none(), h.deadline));
    holds.into_iter().map(|h| h.id).collect()
}

/// Every hold `filter` lists in the urgent order, read in pages of `limit`, each page going
/// on from the last one's deadline and position; more than `most` fails.
async fn urgent_pages(
    store: &Arc<dyn Store>,
    filter: HoldFilter,
    limit: usize,
    most: usize,
) -> Vec<HoldId> {
    let mut seen = Vec::new();
    let (mut after, mut after_deadline) = (None, None);
    loop {
        let page = store
            .holds(&HoldFilter {
                order: Order::Urgent,
                after,
                after_deadline,
                limit,
                ..filter.clone()
            })
            .await
            .unwrap();
        assert!(page.len() <= limit);
        if let Some(last) = page.last() {
            (after, after_deadline) = (Some(last.position), last.item.deadline);
        }
        let n = page.len();
        seen.extend(ids(page));
        if n < limit {
            return seen;
        }
        assert!(seen.len() <= most, "{filter:?}, pages of {limit}: {seen:?}");
    }
}

/// The urgent order: soonest deadline first, holds without one last, by position among
/// equals; paging with any page size sees every open hold once.
pub async fn urgent_order_pages_by_deadline(store: Arc<dyn Store>) {
    // Deadlines in seconds from START, in the order the holds are made; `None`: no deadline.
    let deadlines = [
        Some(300),
        None,
        Some(100),
        Some(300),
        None,
        Some(100),
        Some(200),
        Some(300),
        None,
        Some(50),
    ];
    let mut made = Vec::new();
    for (i, secs) in deadlines.into_iter().enumerate() {
        let world = if i % 3 == 0 { "w1" } else { "w2" };
        let mut h = hold_in(world, None, BatchId::random(), START);
        h.deadline = secs.map(|s| START.saturating_add(Duration::from_secs(s)));
        store.commit(insert(&h)).await.unwrap();
        made.push(h);
    }
    // A resolved hold with the soonest deadline of all is not listed.
    let mut gone = hold_in("w1", None, BatchId::random(), START);
    gone.deadline = Some(START);
    store.commit(insert(&gone)).await.unwrap();
    store
        .commit(Transaction {
            writes: vec![Write::UpdateHold(Arc::new(resolved(&gone)))],
            events: vec![],
        })
        .await
        .unwrap();
    for world in [None, Some("w1"), Some("w2")] {
        let expected = by_urgency(made.iter().filter(|h| world.is_none_or(|w| h.world == w)));
        for limit in 1..=expected.len() + 1 {
            let filter = HoldFilter {
                world: world.map(Into::into),
                ..HoldFilter::default()
            };
            let seen = urgent_pages(&store, filter, limit, expected.len()).await;
            assert_eq!(seen, expected, "{world:?}, pages of {limit}");
        }
    }
    assert!(
        store
            .holds(&HoldFilter {
                status: StatusSet::Resolved,
                order: Order::Urgent,
                limit: 10,
                ..HoldFilter::default()
            })
            .await
            .is_err(),
        "the urgent order lists open holds only"
    );
}

/// The urgent order with a filter pages alike whether the filter matches many open holds or
/// few, alone or with other filters: a store may read the two differently (SQLite reads a
/// filter that fewer than 200 open holds match through its own index, and sorts them).
pub async fn urgent_order_pages_alike_whether_a_filter_matches_many_or_few(store: Arc<dyn Store>) {
    let mut made = Vec::new();
    let mut raise = Transaction {
        writes: vec![],
        events: vec![],
    };
    for i in 0..260u64 {
        let tool = if i % 50 == 7 { "rare" } else { "common" };
        let world = if i % 2 == 0 { "w1" } else { "w2" };
        let agent = if i % 3 == 0 { "a1" } else { "a2" };
        let mut h = hold_of(world, Some(agent), Some(tool));
        // Deadlines that repeat (ties go by position), and a quarter without one.
        h.deadline = (i % 4 != 0).then(|| START.saturating_add(Duration::from_secs(i * 37 % 11)));
        raise.writes.push(Write::InsertHold(Arc::new(h.clone())));
        raise.events.push(created(&h));
        made.push(h);
    }
    store.commit(raise).await.unwrap();
    let tool_of = |h: &Hold| match &h.spec {
        HoldSpec::Approval(a) => Some(a.tool.clone()),
        _ => None,
    };
    let filters = [
        (Some("common"), None, None),
        (Some("rare"), None, None),
        (Some("none"), None, None),
        (Some("common"), Some("w1"), None),
        (Some("rare"), Some("w2"), None),
        (None, None, Some("a1")),
        (Some("common"), None, Some("a1")),
        (None, Some("w2"), None),
    ];
    for (tool, world, agent) in filters {
        let expected = by_urgency(
            made.iter()
                .filter(|h| tool.is_none_or(|t| tool_of(h).as_deref() == Some(t)))
                .filter(|h| world.is_none_or(|w| h.world == w))
                .filter(|h| agent.is_none_or(|a| h.agent.as_deref() == Some(a))),
        );
        for limit in [7, 50] {
            let filter = HoldFilter {
                tool: tool.map(Into::into),
                world: world.map(Into::into),
                agent: agent.map(Into::into),
                ..HoldFilter::default()
            };
            let seen = urgent_pages(&store, filter, limit, expected.len()).await;
            assert_eq!(
                seen, expected,
                "tool {tool:?}, world {world:?}, agent {agent:?}, pages of {limit}"
            );
        }
    }
}

pub async fn finds_open_holds_in_a_chat(store: Arc<dyn Store>) {
    let h = hold_in("w", Some("c"), BatchId::random(), START);
    assert!(!store.chat_has_open_hold("w", "c").await.unwrap());
    store.commit(insert(&h)).await.unwrap();
    assert!(store.chat_has_open_hold("w", "c").await.unwrap());
    assert!(!store.chat_has_open_hold("w", "other").await.unwrap());
    assert!(!store.chat_has_open_hold("other", "c").await.unwrap());
    store
        .commit(Transaction {
            writes: vec![Write::UpdateHold(Arc::new(resolved(&h)))],
            events: vec![],
        })
        .await
        .unwrap();
    assert!(!store.chat_has_open_hold("w", "c").await.unwrap());
}

/// Open holds are counted by world and kind, ordered by world, then kind; resolved ones are
/// not counted, and neither are the kinds of a world with none open.
pub async fn counts_open_holds_by_world_and_kind(store: Arc<dyn Store>) {
    assert_eq!(store.open_hold_counts(None).await.unwrap(), vec![]);
    let a = hold_of("w2", None, Some("shell"));
    let b = hold_of("w1", None, Some("read"));
    let c = hold_of("w1", None, None);
    let d = hold_of("w1", None, Some("shell"));
    let e = hold_of("w2", None, None);
    for h in [&a, &b, &c, &d, &e] {
        store.commit(insert(h)).await.unwrap();
    }
    store
        .commit(Transaction {
            writes: vec![Write::UpdateHold(Arc::new(resolved(&e)))],
            events: vec![],
        })
        .await
        .unwrap();
    let count = |world: &str, kind, pending| HoldCount {
        world: world.into(),
        kind,
        pending,
    };
    assert_eq!(
        store.open_hold_counts(None).await.unwrap(),
        vec![
            count("w1", HoldKind::Approval, 2),
            count("w1", HoldKind::Question, 1),
            count("w2", HoldKind::Approval, 1),
        ]
    );
    assert_eq!(
        store.open_hold_counts(Some("w2")).await.unwrap(),
        vec![count("w2", HoldKind::Approval, 1)]
    );
    assert_eq!(store.open_hold_counts(Some("w3")).await.unwrap(), vec![]);
}

/// What the engine reads of each open hold at start equals what the hold itself says: its
/// world, raiser, deadline, and the reminder while it is due; resolved holds are left out.
pub async fn marks_every_open_hold_from_its_columns(store: Arc<dyn Store>) {
    let all = 0..=u64::MAX;
    assert_eq!(store.open_marks(all.clone(), 10).await.unwrap(), vec![]);
    assert_eq!(store.open_span().await.unwrap(), None);
    let mut a = hold_of("w1", None, Some("shell"));
    a.requested_by = "bot-a".into();
    a.deadline = Some(Timestamp::from_millis(START.as_millis() + 60_000));
    a.remind_at = Some(Timestamp::from_millis(START.as_millis() + 30_000));
    let mut b = hold_of("w2", None, None);
    b.requested_by = "bot-b".into();
    b.remind_at = Some(Timestamp::from_millis(START.as_millis() + 30_000));
    b.reminded = true;
    let c = hold_of("w1", None, None);
    for h in [&a, &b, &c] {
        store.commit(insert(h)).await.unwrap();
    }
    store
        .commit(Transaction {
            writes: vec![Write::UpdateHold(Arc::new(resolved(&c)))],
            events: vec![],
        })
        .await
        .unwrap();
    let marks: Vec<_> = store.open_marks(all.clone(), 10).await.unwrap();
    let items: Vec<_> = marks.iter().map(|m| m.item.clone()).collect();
    assert_eq!(items, vec![OpenMark::of(&a), OpenMark::of(&b)]);
    assert_eq!(items[1].remind_at, None, "a reminder sent is not due again");
    // Read a page at a time, in position order, between positions given (both included).
    let (pa, pb) = (marks[0].position, marks[1].position);
    assert_eq!(store.open_marks(all.clone(), 1).await.unwrap(), marks[..1]);
    assert_eq!(
        store.open_marks(pa + 1..=u64::MAX, 10).await.unwrap(),
        marks[1..]
    );
    assert_eq!(
        store.open_marks(pb + 1..=u64::MAX, 10).await.unwrap(),
        vec![]
    );
    assert_eq!(store.open_marks(pa..=pa, 10).await.unwrap(), marks[..1]);
    assert_eq!(store.open_marks(pa..=pb, 10).await.unwrap(), marks);
    assert_eq!(store.open_marks(pa + 1..=pb - 1, 10).await.unwrap(), vec![]);
    // The span runs from the first open hold to the last, the resolved one aside.
    assert_eq!(store.open_span().await.unwrap(), Some(pa..=pb));
}

pub async fn grants_are_listed_until_revoked(store: Arc<dyn Store>) {
    let grant = |world: &str| Grant {
        id: GrantId::random(),
        scope: GrantScope::AlwaysTool,
        world: world.into(),
        chat: None,
        tool: "t".into(),
        digest: None,
        created_by: "alice".into(),
        created_at: START,
        from_hold: HoldId::random(),
        revoked_at: None,
        expires_at: None,
        expired: false,
    };
    let (g1, g2) = (grant("w"), grant("x"));
    for g in [&g1, &g2] {
        store
            .commit(Transaction {
                writes: vec![Write::InsertGrant(Box::new(g.clone()))],
                events: vec![],
            })
            .await
            .unwrap();
    }
    assert_eq!(store.grants(Some("w")).await.unwrap(), vec![g1.clone()]);
    assert_eq!(store.grants(None).await.unwrap().len(), 2);
    let at = START.saturating_add(Duration::from_secs(5));
    store
        .commit(Transaction {
            writes: vec![Write::RevokeGrant { id: g1.id, at }],
            events: vec![],
        })
        .await
        .unwrap();
    assert_eq!(store.grants(Some("w")).await.unwrap(), vec![]);
    assert_eq!(
        store.grant(g1.id).await.unwrap().unwrap().revoked_at,
        Some(at)
    );
    assert!(matches!(
        store
            .commit(Transaction {
                writes: vec![Write::RevokeGrant { id: g1.id, at }],
                events: vec![]
            })
            .await,
        Err(CommitError::Conflict(Conflict::NoSuchGrant(_)))
    ));
    assert_eq!(store.grant(GrantId::random()).await.unwrap(), None);
}

pub async fn idempotency_keys_are_recorded_once(store: Arc<dyn Store>) {
    let put = |response: serde_json::Value| Write::PutIdempotent {
        key: "k".into(),
        fingerprint: "f".into(),
        response,
        at: START,
    };
    assert_eq!(store.idempotent("k").await.unwrap(), None);
    store
        .commit(Transaction {
            writes: vec![put(json!({"n": 1}))],
            events: vec![],
        })
        .await
        .unwrap();
    let rec = store.idempotent("k").await.unwrap().unwrap();
    assert_eq!(
        (rec.fingerprint.as_str(), rec.response),
        ("f", json!({"n": 1}))
    );
    assert!(matches!(
        store
            .commit(Transaction {
                writes: vec![put(json!({"n": 2}))],
                events: vec![]
            })
            .await,
        Err(CommitError::Conflict(Conflict::KeyTaken(_)))
    ));
}

pub async fn idempotency_records_are_forgotten_oldest_first(store: Arc<dyn Store>) {
    // Recorded out of time order: the listing follows the time, not the order of writing.
    let minute = |m: u64| START.saturating_add(Duration::from_secs(60 * m));
    for (i, m) in [3, 1, 4, 2].into_iter().enumerate() {
        apply(
            &store,
            Write::PutIdempotent {
                key: format!("k{m}"),
                fingerprint: "f".into(),
                response: json!({ "n": i }),
                at: minute(m),
            },
        )
        .await
        .unwrap();
    }
    let before = |m, limit| {
        let store = store.clone();
        async move {
            store
                .idempotent_keys_before(minute(m), limit)
                .await
                .unwrap()
        }
    };
    assert_eq!(before(4, 10).await, ["k1", "k2", "k3"]);
    assert_eq!(before(4, 2).await, ["k1", "k2"]);
    assert_eq!(before(1, 10).await, Vec::<String>::new());

    // A key is forgotten only if it was recorded before the time given.
    for key in ["k1", "k4"] {
        apply(
            &store,
            Write::ForgetIdempotent {
                key: key.into(),
                before: minute(3),
            },
        )
        .await
        .unwrap();
    }
    assert_eq!(store.idempotent("k1").await.unwrap(), None);
    assert!(store.idempotent("k4").await.unwrap().is_some());
    assert_eq!(before(5, 10).await, ["k2", "k3", "k4"]);
    // A forgotten key can be recorded again.
    apply(
        &store,
        Write::PutIdempotent {
            key: "k1".into(),
            fingerprint: "g".into(),
            response: json!({ "n": 9 }),
            at: minute(10),
        },
    )
    .await
    .unwrap();
    assert_eq!(
        store.idempotent("k1").await.unwrap().unwrap().fingerprint,
        "g"
    );
}

pub async fn events_read_newest_first_back_to_the_start(store: Arc<dyn Store>) {
    let h = hold_in("w", Some("c"), BatchId::random(), START);
    store
        .commit(Transaction {
            writes: vec![],
            events: vec![marker("w"), marker("x")],
        })
        .await
        .unwrap();
    store.commit(insert(&h)).await.unwrap();
    store
        .commit(Transaction {
            writes: vec![],
            events: vec![marker("x"), marker("w")],
        })
        .await
        .unwrap();
    let seqs = |page: &holdpoint_core::store::EventPage| {
        page.events.iter().map(|e| e.seq).collect::<Vec<_>>()
    };
    let all = EventFilter::default();
    let page = store.events_before(None, &all, 2).await.unwrap();
    assert_eq!(
        (seqs(&page), page.scanned_to),
        (vec![5, 4], 4),
        "a full page"
    );
    let page = store.events_before(Some(4), &all, 2).await.unwrap();
    assert_eq!((seqs(&page), page.scanned_to), (vec![3, 2], 2));
    let page = store.events_before(Some(2), &all, 2).await.unwrap();
    assert_eq!(
        (seqs(&page), page.scanned_to),
        (vec![1], 0),
        "a partial page has reached the start"
    );
    let w = EventFilter {
        world: Some("w".into()),
        ..Default::default()
    };
    let page = store.events_before(None, &w, 10).await.unwrap();
    assert_eq!((seqs(&page), page.scanned_to), (vec![5, 3, 1], 0));
    let page = store
        .events_before(
            Some(5),
            &EventFilter {
                hold: Some(h.id),
                ..Default::default()
            },
            10,
        )
        .await
        .unwrap();
    assert_eq!(seqs(&page), vec![3]);
}

pub async fn events_filter_and_report_how_far_they_scanned(store: Arc<dyn Store>) {
    let h = hold_in("w", Some("c"), BatchId::random(), START);
    store
        .commit(Transaction {
            writes: vec![],
            events: vec![marker("w"), marker("x")],
        })
        .await
        .unwrap();
    store.commit(insert(&h)).await.unwrap();
    store
        .commit(Transaction {
            writes: vec![],
            events: vec![marker("x")],
        })
        .await
        .unwrap();
    let page = store
        .events(
            0,
            &EventFilter {
                world: Some("w".into()),
                ..Default::default()
            },
            10,
        )
        .await
        .unwrap();
    assert_eq!(
        page.events.iter().map(|e| e.seq).collect::<Vec<_>>(),
        vec![1, 3]
    );
    assert_eq!(
        page.scanned_to, 4,
        "a partial page has considered the whole log"
    );
    let page = store.events(0, &EventFilter::default(), 2).await.unwrap();
    assert_eq!(
        (page.events.len(), page.scanned_to),
        (2, 2),
        "a full page has considered up to its last event"
    );
    let page = store
        .events(
            0,
            &EventFilter {
                hold: Some(h.id),
                ..Default::default()
            },
            10,
        )
        .await
        .unwrap();
    assert_eq!(page.events.len(), 1);
    assert_eq!(
        page.events[0].payload,
        EventPayload::HoldCreated {
            hold: Arc::new(h.clone())
        }
    );
    let page = store
        .events(
            0,
            &EventFilter {
                world: Some("w".into()),
                chat: Some("c".into()),
                hold: None,
            },
            10,
        )
        .await
        .unwrap();
    assert_eq!(
        page.events.iter().map(|e| e.seq).collect::<Vec<_>>(),
        vec![3]
    );
    let page = store.events(10, &EventFilter::default(), 10).await.unwrap();
    assert_eq!((page.events.len(), page.scanned_to), (0, 10));
}

pub async fn subscribers_see_committed_events_in_order(store: Arc<dyn Store>) {
    let mut rx = store.subscribe();
    let h = hold_in("w", None, BatchId::random(), START);
    store.commit(insert(&h)).await.unwrap();
    let _ = store.commit(insert(&h)).await.unwrap_err();
    store
        .commit(Transaction {
            writes: vec![],
            events: vec![marker("w"), marker("w")],
        })
        .await
        .unwrap();
    let mut seqs = Vec::new();
    for _ in 0..3 {
        seqs.push(
            tokio::time::timeout(crate::PATIENCE, rx.recv())
                .await
                .unwrap()
                .unwrap()
                .seq,
        );
    }
    assert_eq!(seqs, vec![1, 2, 3], "the failed commit published nothing");
    assert!(rx.try_recv().is_err());
}

pub async fn concurrent_commits_all_land_in_one_chain(store: Arc<dyn Store>) {
    let mut tasks = Vec::new();
    for i in 0..64 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let h = hold_in(&format!("w{}", i % 4), None, BatchId::random(), START);
            store.commit(insert(&h)).await.unwrap();
            let v2 = resolved(&h);
            store
                .commit(Transaction {
                    writes: vec![Write::UpdateHold(Arc::new(v2))],
                    events: vec![marker("w")],
                })
                .await
                .unwrap();
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(all_events(&store).await, (1..=128).collect::<Vec<u64>>());
    assert_eq!(verify(store.as_ref()).await.unwrap().unwrap().events, 128);
    let resolved = store
        .holds(&HoldFilter {
            status: StatusSet::Resolved,
            limit: 100,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(resolved.len(), 64);
}

/// A new record of `kind` holding `data`, encoded as every layer encodes its entities.
fn record(
    kind: RecordKind,
    parent: Option<uuid::Uuid>,
    key: Option<&str>,
    data: serde_json::Value,
) -> Record {
    holdpoint_core::record::encode(
        kind,
        uuid::Uuid::now_v7(),
        parent,
        key.map(Into::into),
        1,
        &data,
    )
    .expect("plain JSON encodes")
}

async fn put(store: &Arc<dyn Store>, r: &Record) -> Result<(), CommitError> {
    apply(store, Write::PutRecord(Box::new(r.clone()))).await
}

/// Commits one write without events.
async fn apply(store: &Arc<dyn Store>, w: Write) -> Result<(), CommitError> {
    store
        .commit(Transaction {
            writes: vec![w],
            events: vec![],
        })
        .await
        .map(|_| ())
}

pub async fn records_are_created_updated_and_listed(store: Arc<dyn Store>) {
    let world = record(RecordKind::World, None, Some("alpha"), json!({"n": 1}));
    put(&store, &world).await.unwrap();
    assert_eq!(
        store.record(RecordKind::World, world.id).await.unwrap(),
        Some(world.clone())
    );
    assert_eq!(
        store.record(RecordKind::Chat, world.id).await.unwrap(),
        None,
        "kinds are apart"
    );
    assert_eq!(
        store
            .record_by_key(RecordKind::World, None, "alpha")
            .await
            .unwrap(),
        Some(world.clone())
    );
    let v2 = Record {
        version: 2,
        key: Some("beta".into()),
        data: json!({"n": 2}),
        ..world.clone()
    };
    put(&store, &v2).await.unwrap();
    assert_eq!(
        store
            .record_by_key(RecordKind::World, None, "beta")
            .await
            .unwrap(),
        Some(v2.clone())
    );
    assert_eq!(
        store
            .record_by_key(RecordKind::World, None, "alpha")
            .await
            .unwrap(),
        None,
        "the old key is free"
    );
    match put(&store, &v2).await {
        Err(CommitError::Conflict(Conflict::StaleRecord { kind: "world", id })) => {
            assert_eq!(id, world.id)
        }
        r => panic!("{r:?}"),
    }
    let mut messages = Vec::new();
    for i in 0..5 {
        let m = record(RecordKind::Message, Some(world.id), None, json!({ "i": i }));
        put(&store, &m).await.unwrap();
        messages.push(m);
    }
    put(
        &store,
        &record(
            RecordKind::Message,
            Some(uuid::Uuid::now_v7()),
            None,
            json!({}),
        ),
    )
    .await
    .unwrap();
    let page = store
        .records(RecordKind::Message, Some(world.id), None, 3)
        .await
        .unwrap();
    assert_eq!(
        page.iter()
            .map(|p| p.item.data["i"].clone())
            .collect::<Vec<_>>(),
        vec![json!(0), json!(1), json!(2)]
    );
    let rest = store
        .records(
            RecordKind::Message,
            Some(world.id),
            page.last().map(|p| p.position),
            10,
        )
        .await
        .unwrap();
    assert_eq!(
        rest.iter().map(|p| p.item.id).collect::<Vec<_>>(),
        vec![messages[3].id, messages[4].id]
    );
    assert_eq!(
        store
            .records(RecordKind::World, None, None, 10)
            .await
            .unwrap()
            .len(),
        1
    );
}

pub async fn record_keys_are_unique_per_parent(store: Arc<dyn Store>) {
    let (w1, w2) = (uuid::Uuid::now_v7(), uuid::Uuid::now_v7());
    put(
        &store,
        &record(RecordKind::Agent, Some(w1), Some("helper"), json!({})),
    )
    .await
    .unwrap();
    put(
        &store,
        &record(RecordKind::Agent, Some(w2), Some("helper"), json!({})),
    )
    .await
    .unwrap();
    match put(
        &store,
        &record(RecordKind::Agent, Some(w1), Some("helper"), json!({})),
    )
    .await
    {
        Err(CommitError::Conflict(Conflict::RecordExists {
            kind: "agent",
            name,
        })) => assert_eq!(name, "helper"),
        r => panic!("{r:?}"),
    }
    put(
        &store,
        &record(RecordKind::World, None, Some("x"), json!({})),
    )
    .await
    .unwrap();
    assert!(
        put(
            &store,
            &record(RecordKind::World, None, Some("x"), json!({}))
        )
        .await
        .is_err(),
        "unique without a parent too"
    );
    // Unkeyed records never clash.
    put(
        &store,
        &record(RecordKind::Message, Some(w1), None, json!({})),
    )
    .await
    .unwrap();
    put(
        &store,
        &record(RecordKind::Message, Some(w1), None, json!({})),
    )
    .await
    .unwrap();
    // A failed record write applies nothing of its transaction.
    let fresh = record(RecordKind::Chat, Some(w1), None, json!({}));
    let tx = Transaction {
        writes: vec![
            Write::PutRecord(Box::new(fresh.clone())),
            Write::PutRecord(Box::new(record(
                RecordKind::Agent,
                Some(w1),
                Some("helper"),
                json!({}),
            ))),
        ],
        events: vec![],
    };
    assert!(store.commit(tx).await.is_err());
    assert_eq!(
        store.record(RecordKind::Chat, fresh.id).await.unwrap(),
        None
    );
}

pub async fn records_are_deleted_one_by_one_or_by_parent(store: Arc<dyn Store>) {
    let chat = uuid::Uuid::now_v7();
    let a = record(RecordKind::Message, Some(chat), None, json!({}));
    let b = record(RecordKind::Message, Some(chat), None, json!({}));
    let keep = record(RecordKind::Turn, Some(chat), None, json!({}));
    for r in [&a, &b, &keep] {
        put(&store, r).await.unwrap();
    }
    apply(
        &store,
        Write::DeleteRecord {
            kind: RecordKind::Message,
            id: a.id,
        },
    )
    .await
    .unwrap();
    assert_eq!(store.record(RecordKind::Message, a.id).await.unwrap(), None);
    apply(
        &store,
        Write::DeleteRecord {
            kind: RecordKind::Message,
            id: a.id,
        },
    )
    .await
    .unwrap();
    apply(
        &store,
        Write::DeleteRecords {
            kind: RecordKind::Message,
            parent: chat,
        },
    )
    .await
    .unwrap();
    assert!(
        store
            .records(RecordKind::Message, Some(chat), None, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        store.record(RecordKind::Turn, keep.id).await.unwrap(),
        Some(keep)
    );
    // A deleted record's key is free again.
    let w = record(RecordKind::World, None, Some("again"), json!({}));
    put(&store, &w).await.unwrap();
    apply(
        &store,
        Write::DeleteRecord {
            kind: RecordKind::World,
            id: w.id,
        },
    )
    .await
    .unwrap();
    put(
        &store,
        &record(RecordKind::World, None, Some("again"), json!({})),
    )
    .await
    .unwrap();
}

/// Reads repeated between changes of the kinds a store may keep in memory (credentials,
/// worlds, webhooks) each see the change just committed: nothing answers from before it.
pub async fn every_read_sees_the_last_committed_change(store: Arc<dyn Store>) {
    let world = uuid::Uuid::now_v7();
    let token = record(RecordKind::Token, None, Some("digest"), json!({"v": 1}));
    let hook = record(RecordKind::Webhook, Some(world), None, json!({}));
    let by_key = || store.record_by_key(RecordKind::Token, None, "digest");
    let by_id = || store.record(RecordKind::Token, token.id);
    let hooks = || store.records(RecordKind::Webhook, Some(world), None, 10);
    for _ in 0..2 {
        assert_eq!(by_key().await.unwrap(), None);
        assert_eq!(by_id().await.unwrap(), None);
        assert!(hooks().await.unwrap().is_empty());
    }
    put(&store, &token).await.unwrap();
    put(&store, &hook).await.unwrap();
    for _ in 0..2 {
        assert_eq!(by_key().await.unwrap(), Some(token.clone()));
        assert_eq!(by_id().await.unwrap(), Some(token.clone()));
        assert_eq!(hooks().await.unwrap().len(), 1);
    }
    let v2 = Record {
        version: 2,
        data: json!({"v": 2}),
        ..token.clone()
    };
    put(&store, &v2).await.unwrap();
    assert_eq!(by_key().await.unwrap(), Some(v2.clone()));
    assert_eq!(by_id().await.unwrap(), Some(v2));
    apply(
        &store,
        Write::DeleteRecord {
            kind: RecordKind::Token,
            id: token.id,
        },
    )
    .await
    .unwrap();
    apply(
        &store,
        Write::DeleteRecords {
            kind: RecordKind::Webhook,
            parent: world,
        },
    )
    .await
    .unwrap();
    assert_eq!(by_key().await.unwrap(), None);
    assert_eq!(by_id().await.unwrap(), None);
    assert!(hooks().await.unwrap().is_empty());
}

/// Transactions sent together, which a store may commit as one group, apply as if one
/// after the other in the order sent: each precondition sees what those before it wrote.
pub async fn transactions_sent_together_apply_one_after_another(store: Arc<dyn Store>) {
    let parent = uuid::Uuid::now_v7();
    for round in 0..10 {
        let h = hold_in("w", None, BatchId::random(), START);
        let (v2, mut rival) = (resolved(&h), resolved(&h));
        rival.status = HoldStatus::TimedOut;
        let name = format!("helper-{round}");
        let first = record(
            RecordKind::Agent,
            Some(parent),
            Some(&name),
            json!({"n": 1}),
        );
        let same_name = record(
            RecordKind::Agent,
            Some(parent),
            Some(&name),
            json!({"n": 2}),
        );
        let after_delete = record(
            RecordKind::Agent,
            Some(parent),
            Some(&name),
            json!({"n": 3}),
        );
        let key = format!("key-{round}");
        let idempotent = |n: u32| Write::PutIdempotent {
            key: key.clone(),
            fingerprint: "f".into(),
            response: json!({"n": n}),
            at: START,
        };
        let one = |w: Write| Transaction {
            writes: vec![w],
            events: vec![marker("w")],
        };
        let sent = vec![
            insert(&h),
            one(Write::UpdateHold(Arc::new(v2.clone()))),
            one(Write::UpdateHold(Arc::new(rival))),
            one(Write::PutRecord(Box::new(first.clone()))),
            one(Write::PutRecord(Box::new(same_name))),
            one(Write::DeleteRecord {
                kind: RecordKind::Agent,
                id: first.id,
            }),
            one(Write::PutRecord(Box::new(after_delete.clone()))),
            one(idempotent(1)),
            one(idempotent(2)),
        ];
        // join_all polls up to 30 futures in order, so they are sent in this order.
        let answers =
            futures_util::future::join_all(sent.into_iter().map(|tx| store.commit(tx))).await;
        let outcomes: Vec<&str> = answers
            .iter()
            .map(|a| match a {
                Ok(_) => "applied",
                Err(CommitError::Conflict(Conflict::StaleHold(_))) => "stale hold",
                Err(CommitError::Conflict(Conflict::RecordExists { .. })) => "name taken",
                Err(CommitError::Conflict(Conflict::KeyTaken(_))) => "key taken",
                Err(e) => panic!("{e}"),
            })
            .collect();
        assert_eq!(
            outcomes,
            [
                "applied",
                "applied",
                "stale hold",
                "applied",
                "name taken",
                "applied",
                "applied",
                "applied",
                "key taken"
            ],
            "round {round}"
        );
        assert_eq!(store.hold(h.id).await.unwrap(), Some(v2));
        assert_eq!(
            store
                .record(RecordKind::Agent, after_delete.id)
                .await
                .unwrap(),
            Some(after_delete)
        );
        let rec = store.idempotent(&key).await.unwrap().unwrap();
        assert_eq!(rec.response, json!({"n": 1}));
    }
    // Six events a round, one for each transaction that applied, in one gapless chain.
    assert_eq!(all_events(&store).await, (1..=60).collect::<Vec<u64>>());
    verify(store.as_ref()).await.unwrap().unwrap();
}
