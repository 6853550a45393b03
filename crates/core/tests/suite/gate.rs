use holdpoint_core::policy::{Mode, Policy};
use holdpoint_core::store::Store;
use holdpoint_core::{AgentAsking, Engine, StartError};
use holdpoint_protocol::{
    DecidedBy, EventPayload, GateResult, HoldRequest, HoldStatus, QuestionRequest,
};
use holdpoint_test_support::{
    TempStore, TestEngine, agent, approval, gate, next_matching, question,
};
use pretty_assertions::assert_eq;
use serde_json::json;

const POLICY: &str = r#"
[[rules]]
name = "read freely"
tools = ["read_file"]
action = "allow"

[[rules]]
name = "never touch etc"
tools = ["*"]
action = "deny"
args = [{ pointer = "/path", prefix = "/etc/" }]
"#;

#[tokio::test]
async fn each_call_is_allowed_denied_or_held_and_recorded() {
    let t = TestEngine::new(Policy::from_toml(POLICY).unwrap()).await;
    let mut events = t.stream().await;
    let req = gate(
        "w",
        Some("c"),
        vec![
            approval("read_file", json!({"path": "a.txt"})),
            approval("write_file", json!({"path": "/etc/passwd"})),
            approval("write_file", json!({"path": "b.txt"})),
            HoldRequest::Question(question("Which color?", &["red", "blue"])),
        ],
    );
    let res = t.engine.gate(&agent("bot"), req).await.unwrap();
    let batch = res.batch.unwrap();
    match &res.results[..] {
        [
            GateResult::Allowed {
                decided_by: DecidedBy::Rule { rule: allow },
                ..
            },
            GateResult::Denied {
                decided_by: DecidedBy::Rule { rule: deny },
                ..
            },
            GateResult::Held { hold: approval },
            GateResult::Held { hold: question },
        ] => {
            assert_eq!(
                (allow.name.as_str(), deny.name.as_str()),
                ("read freely", "never touch etc")
            );
            assert_eq!((approval.batch, question.batch), (batch, batch));
            assert_eq!(approval.status, HoldStatus::Pending);
            assert_eq!(approval.requested_by, "bot");
            assert_eq!(approval.rule, None, "the mode asked, not a rule");
        }
        other => panic!("{other:#?}"),
    }
    let types: Vec<&str> = [
        next_matching(&mut events, "event", |_| true).await,
        next_matching(&mut events, "event", |_| true).await,
        next_matching(&mut events, "event", |_| true).await,
        next_matching(&mut events, "event", |_| true).await,
    ]
    .iter()
    .map(|e| e.payload.type_name())
    .collect();
    assert_eq!(
        types,
        vec![
            "call.allowed",
            "call.denied",
            "hold.created",
            "hold.created"
        ]
    );
    assert!(t.engine.chat_locked("w", "c").await.unwrap());
    assert!(!t.engine.chat_locked("w", "other").await.unwrap());
    let told = t.channel.events.lock().unwrap().len();
    assert_eq!(told, 2, "the human channel hears of both holds");
}

#[tokio::test]
async fn malformed_items_come_back_invalid_and_raise_nothing() {
    let t = TestEngine::new(Policy::default()).await;
    let bad_question = QuestionRequest {
        options: vec![],
        ..question("Q", &[])
    };
    let mut with_schema = approval("write_file", json!({"path": 7}));
    if let HoldRequest::Approval(a) = &mut with_schema {
        a.schema = Some(json!({"type": "object", "properties": {"path": {"type": "string"}}}));
    }
    let res = t
        .engine
        .gate(
            &agent("bot"),
            gate(
                "w",
                None,
                vec![
                    with_schema,
                    HoldRequest::Question(bad_question),
                    approval("bad tool", json!({})),
                ],
            ),
        )
        .await
        .unwrap();
    let fields: Vec<String> = res
        .results
        .iter()
        .map(|r| match r {
            GateResult::Invalid { field, .. } => field.clone(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        fields,
        vec!["items[0].arguments", "items[1].options", "items[2].tool"]
    );
    assert_eq!(res.batch, None);
    assert_eq!(
        t.engine.store().audit_head().await.unwrap(),
        None,
        "nothing was recorded"
    );

    let err = t
        .engine
        .gate(
            &agent("bot"),
            gate("", None, vec![approval("t", json!({}))]),
        )
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "world: must not be empty");
    let err = t
        .engine
        .gate(&agent("bot"), gate("w", None, vec![]))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "invalid_input");
    let many = (0..65).map(|_| approval("t", json!({}))).collect();
    assert!(
        t.engine
            .gate(&agent("bot"), gate("w", None, many))
            .await
            .unwrap_err()
            .to_string()
            .contains("at most 64")
    );
}

#[tokio::test]
async fn requested_deadlines_respect_the_policy() {
    let t = TestEngine::new(Policy::from_toml("max_deadline = \"1h\"").unwrap()).await;
    let mut q = question("Q", &["a"]);
    q.deadline = Some("2h".parse().unwrap());
    let res = t
        .engine
        .gate(
            &agent("bot"),
            gate("w", None, vec![HoldRequest::Question(q.clone())]),
        )
        .await
        .unwrap();
    assert!(
        matches!(&res.results[0], GateResult::Invalid { field, .. } if field == "items[0].deadline")
    );
    q.deadline = Some("10m".parse().unwrap());
    let res = t
        .engine
        .gate(
            &agent("bot"),
            gate("w", None, vec![HoldRequest::Question(q)]),
        )
        .await
        .unwrap();
    let GateResult::Held { hold } = &res.results[0] else {
        panic!()
    };
    assert_eq!(
        hold.deadline,
        Some(holdpoint_test_support::START.saturating_add(std::time::Duration::from_secs(600)))
    );
}

/// A question sent with an idempotency key.
fn keyed_question() -> holdpoint_protocol::GateRequest {
    let mut req = gate(
        "w",
        None,
        vec![HoldRequest::Question(question("Deploy?", &["yes", "no"]))],
    );
    req.idempotency_key = Some("deploy-42".into());
    req
}

#[tokio::test]
async fn the_same_idempotency_key_raises_one_hold() {
    let t = TestEngine::new(Policy::default()).await;
    let mut req = keyed_question();
    let first = t.engine.gate(&agent("bot"), req.clone()).await.unwrap();
    let again = t.engine.gate(&agent("bot"), req.clone()).await.unwrap();
    assert_eq!(first, again);
    let page = t.engine.holds(&Default::default()).await.unwrap();
    assert_eq!(page.items.len(), 1);
    req.items = vec![HoldRequest::Question(question("Something else?", &["yes"]))];
    let err = t.engine.gate(&agent("bot"), req.clone()).await.unwrap_err();
    assert_eq!(err.code(), "idempotency_mismatch");
    // Keys belong to their caller.
    let other = t.engine.gate(&agent("other-bot"), req).await.unwrap();
    assert_ne!(other.batch, first.batch);
}

#[tokio::test]
async fn a_retried_call_is_answered_as_the_first_time_though_the_policy_changed_since() {
    // No key is read before a first attempt: a retry is attempted too, and only its commit
    // finds the key taken. What the retry came to (denied now) must not be its answer.
    let t = TestEngine::new(Policy::from_toml(POLICY).unwrap()).await;
    let mut req = gate("w", None, vec![approval("read_file", json!({"path": "a"}))]);
    req.idempotency_key = Some("read-1".into());
    let first = t.engine.gate_all(&agent("bot"), req.clone()).await.unwrap();
    assert!(matches!(first.results[..], [GateResult::Allowed { .. }]));
    let deny_all = "[[rules]]\nname = \"no\"\ntools = [\"*\"]\naction = \"deny\"\n";
    t.engine
        .set_policy(Policy::from_toml(deny_all).unwrap())
        .unwrap();
    let again = t.engine.gate_all(&agent("bot"), req.clone()).await.unwrap();
    assert_eq!(again, first);
    let calls = t
        .engine
        .store()
        .events(0, &Default::default(), 100)
        .await
        .unwrap()
        .events
        .into_iter()
        .filter(|e| matches!(e.payload, EventPayload::CallAllowed { .. }))
        .count();
    assert_eq!(calls, 1, "the retried call was recorded once");
}

#[tokio::test]
async fn racing_retries_of_one_request_raise_one_hold_and_get_one_answer() {
    let t = TestEngine::new(Policy::default()).await;
    let req = keyed_question();
    let mut tries = tokio::task::JoinSet::new();
    for _ in 0..16 {
        let (engine, req) = (t.engine.clone(), req.clone());
        tries.spawn(async move { engine.gate(&agent("bot"), req).await.unwrap() });
    }
    let answers = tries.join_all().await;
    for answer in &answers {
        assert_eq!(answer, &answers[0]);
    }
    let page = t.engine.holds(&Default::default()).await.unwrap();
    assert_eq!(page.items.len(), 1);
}

#[tokio::test]
async fn a_forgotten_key_raises_anew_and_a_backlog_is_forgotten_in_pages() {
    use holdpoint_core::store::{Transaction, Write};
    let t = TestEngine::new(Policy::default()).await;
    let req = keyed_question();
    let first = t.engine.gate(&agent("bot"), req.clone()).await.unwrap();
    // More than one transaction's worth of keys, recorded a minute later.
    t.clock.advance(std::time::Duration::from_secs(60));
    let backlog = 1_234;
    let writes = (0..backlog)
        .map(|i| Write::PutIdempotent {
            key: format!("old-{i}"),
            fingerprint: "f".into(),
            response: json!(i),
            at: t.engine.clock().now(),
        })
        .collect();
    t.engine
        .store()
        .commit(Transaction {
            writes,
            events: vec![],
        })
        .await
        .unwrap();

    // Forgetting what came before the backlog leaves the backlog.
    let forgotten = t.engine.forget_idempotency(t.engine.clock().now()).await;
    assert_eq!(forgotten.unwrap(), 1);
    let again = t.engine.gate(&agent("bot"), req.clone()).await.unwrap();
    assert_ne!(again.batch, first.batch);

    t.clock.advance(std::time::Duration::from_secs(60));
    let forgotten = t.engine.forget_idempotency(t.engine.clock().now()).await;
    assert_eq!(forgotten.unwrap(), backlog + 1);
    let left = t
        .engine
        .store()
        .idempotent_keys_before(t.engine.clock().now(), 10);
    assert_eq!(left.await.unwrap(), Vec::<String>::new());
}

#[tokio::test]
async fn always_ask_holds_even_where_policy_allows() {
    let t = TestEngine::new(
        Policy::from_toml("mode = \"auto_approve\"\n[[rules]]\ntools = [\"x\"]\naction = \"ask\"")
            .unwrap(),
    )
    .await;
    let mut create = approval("create_agent", json!({"name": "helper"}));
    if let HoldRequest::Approval(a) = &mut create {
        a.always_ask = true;
    }
    let res = t
        .engine
        .gate(
            &agent("bot"),
            gate(
                "w",
                Some("c"),
                vec![approval("create_agent", json!({})), create],
            ),
        )
        .await
        .unwrap();
    assert!(matches!(
        res.results[0],
        GateResult::Allowed {
            decided_by: DecidedBy::Mode { .. },
            ..
        }
    ));
    let GateResult::Held { hold } = &res.results[1] else {
        panic!("{:?}", res.results[1])
    };
    let offers: Vec<&str> = hold.offers.iter().map(|k| k.as_str()).collect();
    assert_eq!(
        offers,
        vec!["approve_once", "deny", "deny_stop", "edit"],
        "a hold that always asks offers no grants"
    );
}

#[tokio::test]
async fn a_hold_that_always_asks_says_why_where_policy_would_allow() {
    let t = TestEngine::new(
        Policy::from_toml(
            r#"
[[rules]]
name = "agents are fine"
tools = ["create_agent", "fs__write_file"]
action = "allow"

[[rules]]
name = "deploys need a person"
tools = ["deploy"]
action = "ask"
"#,
        )
        .unwrap(),
    )
    .await;
    let always = |tool: &str, mcp: bool| {
        let mut item = approval(tool, json!({"name": "helper"}));
        if let HoldRequest::Approval(a) = &mut item {
            a.always_ask = true;
            a.mcp = mcp.then(|| holdpoint_protocol::McpTool {
                server: "fs".into(),
                tool: "write_file".into(),
            });
        }
        item
    };
    let items = vec![
        always("create_agent", false),
        always("create_agent", false),
        always("fs__write_file", true),
        always("deploy", false),
        always("other", false),
    ];
    let because = [
        Some("creating an agent always needs a person".to_owned()),
        None,
        None,
        Some("unused: a rule asks".to_owned()),
    ];
    let res = t
        .engine
        .gate_as_agent(
            &agent("bot"),
            gate("w", Some("c"), items),
            AgentAsking {
                because: &because,
                lineage: &[],
            },
        )
        .await
        .unwrap();
    let why: Vec<(Option<String>, Option<String>)> = res
        .results
        .iter()
        .map(|r| match r {
            GateResult::Held { hold } => (
                hold.rule.as_ref().map(|r| r.name.clone()),
                hold.asks_because.clone(),
            ),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        why,
        vec![
            (
                None,
                Some(
                    "creating an agent always needs a person \
                     (policy alone would allow it: rule \"agents are fine\")"
                        .into()
                )
            ),
            (
                None,
                Some(
                    "its caller asks a person for it, whatever policy decides \
                     (policy alone would allow it: rule \"agents are fine\")"
                        .into()
                )
            ),
            (
                None,
                Some(
                    "the configuration of the MCP server \"fs\" requires a person's approval \
                     for its tool \"write_file\" (policy alone would allow it: rule \"agents are fine\")"
                        .into()
                )
            ),
            // A rule asks: it says so, and nothing else is claimed.
            (Some("deploys need a person".into()), None),
            // The mode asks (manual): no rule matched is the truth.
            (None, None),
        ]
    );
}

#[tokio::test]
async fn manual_mode_with_nobody_to_ask_does_not_start() {
    let temp = TempStore::new();
    let err = Engine::builder(temp.dyn_store()).start().await.unwrap_err();
    assert!(
        matches!(err, StartError::NoHumanChannel { mode: "manual" }),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains("no way to reach one is configured")
    );
    let policy =
        Policy::from_toml("mode = \"auto_deny\"\n[[rules]]\ntools = [\"x\"]\naction = \"ask\"")
            .unwrap();
    assert!(
        Engine::builder(temp.dyn_store())
            .policy(policy)
            .start()
            .await
            .is_err(),
        "an ask rule needs someone too"
    );
    let engine = Engine::builder(temp.dyn_store())
        .policy(Policy::with_mode(Mode::AutoDeny))
        .start()
        .await
        .unwrap();
    assert!(
        engine.set_policy(Policy::default()).is_err(),
        "nor can a reload make it ask"
    );
}

#[tokio::test]
async fn hold_events_carry_the_hold_as_shown() {
    let t = TestEngine::new(Policy::default()).await;
    let mut events = t.stream().await;
    let res = t
        .engine
        .gate(
            &agent("bot"),
            gate(
                "w",
                None,
                vec![approval("deploy", json!({"env": "prod", "v": 2}))],
            ),
        )
        .await
        .unwrap();
    let GateResult::Held { hold } = &res.results[0] else {
        panic!()
    };
    let e = next_matching(&mut events, "hold.created", |e| {
        e.payload.type_name() == "hold.created"
    })
    .await;
    assert_eq!(e.payload, EventPayload::HoldCreated { hold: hold.clone() });
    assert_eq!(
        hold.digest(),
        Some(holdpoint_core::canonical::digest(
            &json!({"v": 2, "env": "prod"})
        ))
        .as_deref()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_gets_an_allowed_call_once_written_and_a_denial_once_durable() {
    let t = TestEngine::new(Policy::from_toml(POLICY).unwrap()).await;
    let bot = agent("bot");
    let store = t.temp.store.clone();
    let mut published = store.subscribe();
    let before = store.syncs();
    let held = store.hold_syncs();
    let allowed = gate(
        "w",
        None,
        vec![approval("read_file", json!({"path": "a.txt"}))],
    );
    let answer = t.engine.gate_all_written(&bot, allowed);
    let (res, synced) = tokio::time::timeout(std::time::Duration::from_secs(30), answer)
        .await
        .expect("an allowed call waited for its fsync")
        .unwrap();
    assert!(matches!(res.results[..], [GateResult::Allowed { .. }]));
    assert_eq!(store.syncs(), before, "answered after an fsync");
    assert!(published.try_recv().is_err(), "published before durable");
    drop(held);
    synced.wait().await.unwrap();
    assert!(store.syncs() > before);
    let e = published.try_recv().unwrap();
    assert!(matches!(e.payload, EventPayload::CallAllowed { .. }));

    // A denial is final: answered once durable, its event published by then.
    let denied = gate(
        "w",
        None,
        vec![approval("write_file", json!({"path": "/etc/passwd"}))],
    );
    let (res, synced) = t.engine.gate_all_written(&bot, denied).await.unwrap();
    assert!(matches!(res.results[..], [GateResult::Denied { .. }]));
    let e = published
        .try_recv()
        .expect("a denial answered before durable");
    assert!(matches!(e.payload, EventPayload::CallDenied { .. }));
    synced.wait().await.unwrap();
}
