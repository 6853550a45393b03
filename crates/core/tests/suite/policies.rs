//! Policy in layers: a world's own policy over the base, locked rules and the mode floor,
//! versioned changes checked before they apply, and base reloads.

use holdpoint_core::policy::{Call, Policy};
use holdpoint_core::store::EventFilter;
use holdpoint_core::{EngineError, Scope};
use holdpoint_protocol::{
    Actor, CallVerdict, DecidedBy, EventPayload, GateResult, Hold, PolicyLayer, Source,
};
use holdpoint_test_support::{TestEngine, admin, agent, approval, gate};
use pretty_assertions::assert_eq;
use serde_json::json;
use uuid::Uuid;

const BASE: &str = r#"
mode = "manual"
mode_floor = "manual"

[[rules]]
name = "pushing needs two"
tools = ["shell_cmd"]
action = "ask"
command = { program = "git", args = ["push"] }
quorum = 2
locked = true

[[rules]]
name = "no rm"
tools = ["shell_cmd"]
action = "deny"
command = { program = "rm" }
locked = true

[[rules]]
name = "ls is fine"
tools = ["shell_cmd"]
action = "allow"
command = { program = "ls" }
"#;

/// Tries every way to loosen the base: a broader allow, a lower quorum, a looser mode.
const LOOSE_WORLD: &str = r#"
mode = "auto_approve"

[[rules]]
name = "all shell"
tools = ["shell_cmd"]
action = "allow"

[[rules]]
name = "push with one"
tools = ["shell_cmd"]
action = "ask"
command = { program = "git", args = ["push"] }
quorum = 1
on_timeout = "approve"
"#;

async fn engine() -> TestEngine {
    TestEngine::new(Policy::from_toml(BASE).unwrap()).await
}

async fn shell(t: &TestEngine, world: &str, command: &str) -> GateResult {
    let res = t
        .engine
        .gate(
            &agent("bot"),
            gate(
                world,
                None,
                vec![approval("shell_cmd", json!({ "command": command }))],
            ),
        )
        .await
        .unwrap();
    res.results.into_iter().next().unwrap()
}

async fn tool(t: &TestEngine, world: &str, name: &str) -> GateResult {
    let res = t
        .engine
        .gate(
            &agent("bot"),
            gate(world, None, vec![approval(name, json!({}))]),
        )
        .await
        .unwrap();
    res.results.into_iter().next().unwrap()
}

fn held(r: GateResult) -> Hold {
    match r {
        GateResult::Held { hold } => std::sync::Arc::unwrap_or_clone(hold),
        other => panic!("expected a hold, got {other:?}"),
    }
}

fn rule_of(r: &GateResult) -> Option<(String, Option<PolicyLayer>)> {
    let by = match r {
        GateResult::Allowed { decided_by, .. } | GateResult::Denied { decided_by, .. } => {
            decided_by
        }
        GateResult::Held { hold } => {
            return hold.rule.as_ref().map(|r| (r.name.clone(), r.layer));
        }
        GateResult::Invalid { .. } => return None,
    };
    match by {
        DecidedBy::Rule { rule } => Some((rule.name.clone(), rule.layer)),
        _ => None,
    }
}

#[tokio::test]
async fn a_worlds_policy_applies_to_that_world_only() {
    let t = engine().await;
    let (mine, other) = (Uuid::now_v7(), Uuid::now_v7());
    t.engine
        .set_world_policy(&admin("root"), mine, LOOSE_WORLD)
        .await
        .unwrap();
    let (mine, other) = (mine.to_string(), other.to_string());

    let r = shell(&t, &mine, "cat notes.txt").await;
    assert!(matches!(r, GateResult::Allowed { .. }), "{r:?}");
    assert_eq!(
        rule_of(&r),
        Some(("all shell".into(), Some(PolicyLayer::World)))
    );

    // The other world has no policy of its own: the base applies whole.
    let r = shell(&t, &other, "cat notes.txt").await;
    assert!(matches!(r, GateResult::Held { .. }), "{r:?}");
    let r = shell(&t, &other, "ls").await;
    assert_eq!(rule_of(&r), Some(("ls is fine".into(), None)));
    // …and the base's unlocked rule is not in force in the world that replaced it.
    let r = shell(&t, &mine, "ls").await;
    assert_eq!(
        rule_of(&r),
        Some(("all shell".into(), Some(PolicyLayer::World)))
    );
}

#[tokio::test]
async fn a_locked_rule_cannot_be_loosened_by_a_worlds_policy() {
    let t = engine().await;
    let world = Uuid::now_v7();
    t.engine
        .set_world_policy(&admin("root"), world, LOOSE_WORLD)
        .await
        .unwrap();
    let world = world.to_string();

    // A broader allow and a lower quorum (with a looser timeout): the locked ask stands.
    let hold = held(shell(&t, &world, "git push origin main").await);
    assert_eq!(hold.quorum, 2);
    let rule = hold.rule.clone().unwrap();
    assert_eq!(
        (rule.name.as_str(), rule.layer),
        ("pushing needs two", Some(PolicyLayer::Base))
    );
    assert_eq!(hold.on_timeout, holdpoint_protocol::OnTimeout::Deny);

    // A locked deny stays a deny, also inside a line the world allows.
    let r = shell(&t, &world, "ls && rm -rf build").await;
    assert!(matches!(r, GateResult::Denied { .. }), "{r:?}");
    assert_eq!(rule_of(&r), Some(("no rm".into(), Some(PolicyLayer::Base))));

    // A mode change: auto_approve is below the floor, so what no rule matches is asked.
    let r = tool(&t, &world, "fs__write_file").await;
    assert!(matches!(r, GateResult::Held { .. }), "{r:?}");

    // Explain names the layer that decided.
    let args = json!({"command": "git push origin main"});
    let e = t
        .engine
        .explain(&world, None, &Call::new("shell_cmd", &args));
    assert_eq!(e.decision, CallVerdict::Ask);
    assert_eq!(e.layer, PolicyLayer::Base);
    let args = json!({"command": "cat x"});
    let e = t
        .engine
        .explain(&world, None, &Call::new("shell_cmd", &args));
    assert_eq!(
        (e.decision, e.layer),
        (CallVerdict::Allow, PolicyLayer::World)
    );
    let e = t
        .engine
        .explain(&world, None, &Call::new("fs__write_file", &json!({})));
    assert_eq!((e.decision, e.layer), (CallVerdict::Ask, PolicyLayer::Base));
}

#[tokio::test]
async fn an_invalid_policy_is_refused_with_every_problem_and_the_old_one_stays() {
    let t = engine().await;
    let world = Uuid::now_v7();
    let v1 = r#"
[[rules]]
name = "cat is fine"
tools = ["shell_cmd"]
action = "allow"
command = { program = "cat" }
"#;
    t.engine
        .set_world_policy(&admin("root"), world, v1)
        .await
        .unwrap();
    let broken = r#"
[[rules]]
name = "bad"
tools = ["shell_cmd"]
action = "allow"
args = [{ pointer = "/command", regex = "([" }]

[[rules]]
name = "pretends"
tools = ["shell_cmd"]
action = "deny"
command = { program = "curl" }
must_match = [{ tool = "shell_cmd", args = { command = "wget x" } }]
locked = true
"#;
    let err = t
        .engine
        .set_world_policy(&admin("root"), world, broken)
        .await
        .unwrap_err();
    let EngineError::InvalidPolicy(problems) = err else {
        panic!("expected an invalid policy, got {err:?}");
    };
    let paths: Vec<&str> = problems.0.iter().map(|p| p.path.as_str()).collect();
    assert_eq!(paths, ["rules[0].args[0].regex"], "{problems}");

    // Once it parses, the examples run, and the lock is refused: both named.
    let examples = broken.replace("regex = \"([\"", "prefix = \"x\"");
    let err = t
        .engine
        .set_world_policy(&admin("root"), world, &examples)
        .await
        .unwrap_err();
    let EngineError::InvalidPolicy(problems) = err else {
        panic!("expected an invalid policy, got {err:?}");
    };
    let paths: Vec<&str> = problems.0.iter().map(|p| p.path.as_str()).collect();
    assert_eq!(
        paths,
        ["rules[1].locked", "rules[1].must_match[0]"],
        "{problems}"
    );
    let locks = examples.replace(
        "must_match = [{ tool = \"shell_cmd\", args = { command = \"wget x\" } }]\n",
        "",
    );
    let err = t
        .engine
        .set_world_policy(&admin("root"), world, &locks)
        .await
        .unwrap_err();
    let EngineError::InvalidPolicy(problems) = err else {
        panic!("expected an invalid policy, got {err:?}");
    };
    let paths: Vec<&str> = problems.0.iter().map(|p| p.path.as_str()).collect();
    assert_eq!(paths, ["rules[1].locked"], "{problems}");

    let state = t.engine.world_policy(world).await.unwrap();
    assert_eq!(state.current.unwrap().version, 1);
    let r = shell(&t, &world.to_string(), "cat x").await;
    assert!(matches!(r, GateResult::Allowed { .. }), "{r:?}");
}

#[tokio::test]
async fn a_change_applies_to_the_next_call_and_pending_holds_keep_their_version() {
    let t = engine().await;
    let world = Uuid::now_v7();
    let w = world.to_string();
    let asks = "[[rules]]\ntools = [\"shell_cmd\"]\naction = \"ask\"\n";
    let allows = "[[rules]]\ntools = [\"shell_cmd\"]\naction = \"allow\"\n";

    let before = held(shell(&t, &w, "cat x").await);
    assert_eq!(before.policy.as_ref().unwrap().world, None);
    let v1 = t
        .engine
        .set_world_policy(&admin("root"), world, asks)
        .await
        .unwrap();
    let pending = held(shell(&t, &w, "cat x").await);
    assert_eq!(pending.policy.as_ref().unwrap().world, Some(1));
    let v2 = t
        .engine
        .set_world_policy(&admin("carol"), world, allows)
        .await
        .unwrap();
    assert_eq!((v1.version, v2.version), (1, 2));
    let r = shell(&t, &w, "cat x").await;
    assert!(matches!(r, GateResult::Allowed { .. }), "{r:?}");

    let still = t.engine.hold(pending.id, &Scope::any()).await.unwrap();
    assert!(still.is_open());
    assert_eq!(still.policy, pending.policy);
    assert_eq!(still.policy.unwrap().base, t.engine.layers().base_digest());

    let history = t.engine.world_policy_history(world).await.unwrap();
    let versions: Vec<(u64, &str)> = history
        .iter()
        .map(|p| (p.version, p.by.name.as_deref().unwrap_or("")))
        .collect();
    assert_eq!(versions, [(1, "root"), (2, "carol")]);

    // Every change is in the audit log with who made it and the digest of its text.
    let events = t
        .engine
        .store()
        .all_events(&EventFilter {
            world: Some(w.clone()),
            ..EventFilter::default()
        })
        .await
        .unwrap();
    let changes: Vec<(Option<String>, Option<u64>, String)> = events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::PolicyChanged {
                version, digest, ..
            } => Some((e.actor.name.clone(), *version, digest.clone())),
            _ => None,
        })
        .collect();
    let sha = |t: &str| holdpoint_core::canonical::sha256_hex(t.as_bytes());
    assert_eq!(
        changes,
        [
            (Some("root".into()), Some(1), sha(asks)),
            (Some("carol".into()), Some(2), sha(allows)),
        ]
    );
    assert!(t.engine.verify_audit().await.unwrap().is_ok());
}

#[tokio::test]
async fn a_worlds_deadlines_cannot_be_longer_than_the_bases_max_deadline() {
    let base = format!("max_deadline = \"1h\"\n{BASE}");
    let t = TestEngine::new(Policy::from_toml(&base).unwrap()).await;
    let world = Uuid::now_v7();
    let longer = r#"
default_deadline = "never"
max_deadline = "never"

[tools.deploy]
deadline = "3d"

[[rules]]
name = "cat waits long"
tools = ["shell_cmd"]
action = "ask"
command = { program = "cat" }
deadline = "2d"
"#;
    t.engine
        .set_world_policy(&admin("root"), world, longer)
        .await
        .unwrap();
    let w = world.to_string();
    let waits = |h: &Hold| h.deadline.map(|d| d.duration_since(h.created_at));
    let hour = Some(std::time::Duration::from_secs(3600));
    // The world's default, a tool's deadline and a rule's: each cut to the base's ceiling.
    assert_eq!(waits(&held(tool(&t, &w, "fs__write_file").await)), hour);
    assert_eq!(waits(&held(tool(&t, &w, "deploy").await)), hour);
    assert_eq!(waits(&held(shell(&t, &w, "cat notes").await)), hour);
    // A request may not ask for longer than the base allows, nor for never.
    let mut req = approval("shell_cmd", json!({ "command": "cat x" }));
    if let holdpoint_protocol::HoldRequest::Approval(a) = &mut req {
        a.deadline = Some(holdpoint_protocol::Deadline::Never);
    }
    let res = t
        .engine
        .gate(&agent("bot"), gate(&w, None, vec![req]))
        .await
        .unwrap();
    assert!(
        matches!(&res.results[0], GateResult::Invalid { .. }),
        "{:?}",
        res.results[0]
    );
    // A shorter deadline of the world's own stands.
    let shorter = "default_deadline = \"10m\"\n";
    t.engine
        .set_world_policy(&admin("root"), world, shorter)
        .await
        .unwrap();
    assert_eq!(
        waits(&held(tool(&t, &w, "fs__write_file").await)),
        Some(std::time::Duration::from_secs(600))
    );
}

#[tokio::test]
async fn a_locked_ask_without_a_deadline_waits_as_the_base_says_not_the_world() {
    // The base: holds wait 20 minutes, `git push` 15 and fails closed; at most a day.
    let base = r#"
default_deadline = "20m"

[tools.shell_cmd]
deadline = "15m"
on_timeout = "deny"

[[rules]]
name = "pushing needs a person"
tools = ["shell_cmd"]
action = "ask"
command = { program = "git", args = ["push"] }
locked = true

[[rules]]
name = "deploys need a person"
tools = ["deploy"]
action = "ask"
locked = true
"#;
    let t = TestEngine::new(Policy::from_toml(base).unwrap()).await;
    let world = Uuid::now_v7();
    // The world would stretch every wait as far as it can and approve on timeout.
    let world_policy = r#"
default_deadline = "never"
max_deadline = "never"

[tools.shell_cmd]
deadline = "1d"
on_timeout = "approve"
"#;
    t.engine
        .set_world_policy(&admin("root"), world, world_policy)
        .await
        .unwrap();
    let w = world.to_string();
    let waits = |h: &Hold| h.deadline.map(|d| d.duration_since(h.created_at));
    let minutes = |m: u64| Some(std::time::Duration::from_secs(m * 60));

    let push = held(shell(&t, &w, "git push origin main").await);
    assert_eq!(
        (waits(&push), push.on_timeout.clone()),
        (minutes(15), holdpoint_protocol::OnTimeout::Deny),
        "the base's [tools.shell_cmd] decides the locked rule's hold"
    );
    let deploy = held(tool(&t, &w, "deploy").await);
    assert_eq!(waits(&deploy), minutes(20), "the base's default_deadline");
    // What the world's own mode asks keeps the world's settings.
    let other = held(shell(&t, &w, "cat notes").await);
    assert_eq!(
        (waits(&other), other.on_timeout),
        (minutes(24 * 60), holdpoint_protocol::OnTimeout::Approve)
    );
    // Explain says the same as the hold.
    let args = json!({"command": "git push"});
    let e = t.engine.explain(&w, None, &Call::new("shell_cmd", &args));
    assert_eq!(
        e.ask.map(|a| a.deadline),
        Some(holdpoint_protocol::Deadline::After(
            std::time::Duration::from_secs(900)
        ))
    );
}

#[tokio::test]
async fn a_worlds_checks_and_examples_run_against_the_policy_in_force() {
    let t = engine().await;
    let world = Uuid::now_v7();
    // Alone, this world allows every shell line; over the base, `git push` still asks (a
    // locked rule) and `rm` is denied: checks that say otherwise are refused…
    let wrong = r#"
[[rules]]
name = "all shell"
tools = ["shell_cmd"]
action = "allow"
must_match = [{ tool = "shell_cmd", args = { command = "git push" } }]

[[checks]]
tool = "shell_cmd"
args = { command = "git push origin main" }
expect = "allow"
"#;
    let Err(EngineError::InvalidPolicy(problems)) = t
        .engine
        .set_world_policy(&admin("root"), world, wrong)
        .await
    else {
        panic!("a check the base makes false was accepted");
    };
    let paths: Vec<&str> = problems.0.iter().map(|p| p.path.as_str()).collect();
    assert_eq!(paths, ["checks[0].expect"], "{problems}");
    assert!(
        problems.0[0].message.contains("pushing needs two"),
        "{problems}"
    );
    // …and so are they by replay, which checks a candidate alike.
    assert!(matches!(
        t.engine.replay_world_policy(world, wrong, None).await,
        Err(EngineError::InvalidPolicy(_))
    ));

    // …while checks that hold only because the base decides pass.
    let right = r#"
[[rules]]
name = "all shell"
tools = ["shell_cmd"]
action = "allow"
must_match = [{ tool = "shell_cmd", args = { command = "cat x" } }]

[[checks]]
tool = "shell_cmd"
args = { command = "rm -rf build" }
expect = "deny"
rule = "no rm"

[[checks]]
tool = "shell_cmd"
args = { command = "git push origin main" }
expect = "ask"
"#;
    let v = t
        .engine
        .set_world_policy(&admin("root"), world, right)
        .await
        .unwrap();
    assert_eq!(v.version, 1);
    // A must_match that fails is still found (the world's rule, not the base's at its position).
    let unmatched = "[[rules]]\nname = \"cat\"\ntools = [\"shell_cmd\"]\naction = \"allow\"\ncommand = { program = \"cat\" }\nmust_match = [{ tool = \"shell_cmd\", args = { command = \"git push\" } }]\n";
    let Err(EngineError::InvalidPolicy(problems)) = t
        .engine
        .set_world_policy(&admin("root"), world, unmatched)
        .await
    else {
        panic!("an example its rule does not match was accepted");
    };
    assert_eq!(problems.0[0].path, "rules[0].must_match[0]", "{problems}");
}

#[tokio::test]
async fn world_policies_are_in_force_again_after_a_restart() {
    let t = engine().await;
    let world = Uuid::now_v7();
    let allows = "[[rules]]\ntools = [\"shell_cmd\"]\naction = \"allow\"\n";
    t.engine
        .set_world_policy(&admin("root"), world, allows)
        .await
        .unwrap();
    let (dir, clock) = t.shut_down().await;
    let store = std::sync::Arc::new(
        holdpoint_store::SqliteStore::open(dir.path().join(holdpoint_store::DATABASE_FILE))
            .unwrap(),
    );
    let t = TestEngine::on(
        holdpoint_test_support::TempStore { store, dir },
        Policy::from_toml(BASE).unwrap(),
        clock,
    )
    .await;
    let r = shell(&t, &world.to_string(), "cat x").await;
    assert!(matches!(r, GateResult::Allowed { .. }), "{r:?}");
}

#[tokio::test]
async fn a_base_reload_rebuilds_every_world_and_is_recorded() {
    let t = engine().await;
    let world = Uuid::now_v7();
    t.engine
        .set_world_policy(&admin("root"), world, LOOSE_WORLD)
        .await
        .unwrap();
    let w = world.to_string();
    assert!(matches!(
        shell(&t, &w, "curl x").await,
        GateResult::Allowed { .. }
    ));
    let stricter = format!(
        "{BASE}\n[[rules]]\nname = \"no curl\"\ntools = [\"shell_cmd\"]\naction = \"deny\"\ncommand = {{ program = \"curl\" }}\nlocked = true\n"
    );
    let system = Actor::of(Source::System);
    let r = t
        .engine
        .reload_policy(system.clone(), Policy::from_toml(&stricter).unwrap())
        .await
        .unwrap();
    assert!(r.changed);
    assert!(matches!(
        shell(&t, &w, "curl x").await,
        GateResult::Denied { .. }
    ));
    let again = t
        .engine
        .reload_policy(system, Policy::from_toml(&stricter).unwrap())
        .await
        .unwrap();
    assert!(!again.changed);
    let events = t
        .engine
        .store()
        .all_events(&EventFilter::default())
        .await
        .unwrap();
    let reloads = events
        .iter()
        .filter(|e| matches!(&e.payload, EventPayload::PolicyChanged { world: None, digest, .. } if *digest == r.digest))
        .count();
    assert_eq!(reloads, 1);
}

#[tokio::test]
async fn replay_gives_exactly_the_differences_over_recorded_calls() {
    let t = engine().await;
    let world = Uuid::now_v7();
    let w = world.to_string();
    let now = "[[rules]]\nname = \"ls\"\ntools = [\"shell_cmd\"]\naction = \"allow\"\ncommand = { program = \"ls\" }\n";
    t.engine
        .set_world_policy(&admin("root"), world, now)
        .await
        .unwrap();
    // The fixture: one call of each fate.
    assert!(matches!(
        shell(&t, &w, "ls").await,
        GateResult::Allowed { .. }
    ));
    assert!(matches!(
        shell(&t, &w, "rm x").await,
        GateResult::Denied { .. }
    ));
    let approved = held(shell(&t, &w, "cat a").await);
    let refused = held(shell(&t, &w, "cat b").await);
    held(shell(&t, &w, "make").await);
    let decide = |h: &Hold, d: holdpoint_protocol::Decision| {
        let engine = t.engine.clone();
        let id = h.id;
        async move {
            engine
                .decide(
                    &holdpoint_test_support::approver("ana"),
                    id,
                    d,
                    &Scope::any(),
                    None,
                )
                .await
                .unwrap()
        }
    };
    decide(
        &approved,
        holdpoint_protocol::Decision::Approve {
            scope: Default::default(),
            expires_in: None,
            digest: None,
            reason: None,
        },
    )
    .await;
    decide(
        &refused,
        holdpoint_protocol::Decision::Deny { reason: None },
    )
    .await;

    // The candidate asks for ls (no rule), allows cat, and cannot unlock rm.
    let candidate = "[[rules]]\ntools = [\"shell_cmd\"]\naction = \"allow\"\ncommand = { program = \"cat\" }\n[[rules]]\ntools = [\"shell_cmd\"]\naction = \"allow\"\ncommand = { program = \"rm\" }\n";
    let report = t
        .engine
        .replay_world_policy(world, candidate, None)
        .await
        .unwrap();
    assert_eq!((report.calls, report.unchanged), (5, 2));
    let changes: Vec<(&str, CallVerdict, u64, Vec<String>)> = report
        .changes
        .iter()
        .map(|c| {
            (
                c.before.as_str(),
                c.after,
                c.count,
                c.examples
                    .iter()
                    .map(|e| e.arguments["command"].as_str().unwrap().to_owned())
                    .collect(),
            )
        })
        .collect();
    assert_eq!(
        changes,
        [
            ("allowed", CallVerdict::Ask, 1, vec!["ls".to_owned()]),
            ("approved", CallVerdict::Allow, 1, vec!["cat a".to_owned()]),
            (
                "denied_by_person",
                CallVerdict::Allow,
                1,
                vec!["cat b".to_owned()]
            ),
        ]
    );
    assert_eq!(report.changes[1].examples[0].hold, Some(approved.id));

    // Only the recent calls, with since; and an invalid candidate is refused.
    t.clock.advance(std::time::Duration::from_secs(3600));
    assert!(matches!(
        shell(&t, &w, "ls").await,
        GateResult::Allowed { .. }
    ));
    let recent = t
        .engine
        .replay_world_policy(world, candidate, Some(std::time::Duration::from_secs(60)))
        .await
        .unwrap();
    assert_eq!((recent.calls, recent.changes[0].count), (1, 1));
    assert!(matches!(
        t.engine.replay_world_policy(world, "mode = 3", None).await,
        Err(EngineError::InvalidPolicy(_))
    ));
}

#[tokio::test]
async fn replay_counts_the_grants_in_force_at_each_call() {
    let t = engine().await;
    let world = Uuid::now_v7();
    let w = world.to_string();
    let now = "[[rules]]\nname = \"ls\"\ntools = [\"shell_cmd\"]\naction = \"allow\"\ncommand = { program = \"ls\" }\n";
    t.engine
        .set_world_policy(&admin("root"), world, now)
        .await
        .unwrap();
    // `cat a` approved for ten minutes: allowed by the grant at 5, asked again at 11.
    let first = held(shell(&t, &w, "cat a").await);
    t.engine
        .decide(
            &holdpoint_test_support::approver("ana"),
            first.id,
            holdpoint_protocol::Decision::Approve {
                scope: holdpoint_protocol::ApproveScope::AlwaysArgs,
                expires_in: Some(holdpoint_protocol::Deadline::After(
                    std::time::Duration::from_secs(600),
                )),
                digest: None,
                reason: None,
            },
            &Scope::any(),
            None,
        )
        .await
        .unwrap();
    t.clock.advance(std::time::Duration::from_secs(300));
    let r = shell(&t, &w, "cat a").await;
    assert!(
        matches!(
            &r,
            GateResult::Allowed {
                decided_by: DecidedBy::Grant { .. },
                ..
            }
        ),
        "{r:?}"
    );
    assert!(matches!(
        shell(&t, &w, "ls").await,
        GateResult::Allowed { .. }
    ));
    t.clock.advance(std::time::Duration::from_secs(360));
    held(shell(&t, &w, "cat a").await);

    // A candidate that asks for everything: the call the grant allowed stays allowed, the
    // one a rule allowed would now ask, and the holds were asked anyway.
    let report = t
        .engine
        .replay_world_policy(world, "mode = \"manual\"\n", None)
        .await
        .unwrap();
    assert_eq!(
        (report.calls, report.unchanged, report.granted),
        (4, 3, 1),
        "{report:?}"
    );
    let changes: Vec<(&str, CallVerdict, u64)> = report
        .changes
        .iter()
        .map(|c| (c.before.as_str(), c.after, c.count))
        .collect();
    assert_eq!(changes, [("allowed", CallVerdict::Ask, 1)]);
    assert_eq!(report.changes[0].examples[0].arguments["command"], "ls");
}

#[tokio::test]
async fn replay_reads_the_log_a_page_at_a_time_to_its_end() {
    let t = engine().await;
    let world = Uuid::now_v7();
    let w = world.to_string();
    let now = "[[rules]]\nname = \"ls\"\ntools = [\"shell_cmd\"]\naction = \"allow\"\ncommand = { program = \"ls\" }\n";
    t.engine
        .set_world_policy(&admin("root"), world, now)
        .await
        .unwrap();
    // More calls than one page of the log holds, the last on a later page.
    let items: Vec<_> = (0..50)
        .map(|i| approval("shell_cmd", json!({ "command": format!("ls {i}") })))
        .collect();
    for _ in 0..25 {
        t.engine
            .gate(&agent("bot"), gate(&w, None, items.clone()))
            .await
            .unwrap();
    }
    let report = t
        .engine
        .replay_world_policy(world, "mode = \"manual\"\n", None)
        .await
        .unwrap();
    assert_eq!((report.calls, report.unchanged), (1250, 0));
    assert_eq!(report.changes[0].count, 1250);
    assert_eq!(report.changes[0].examples.len(), 5);
}

#[tokio::test]
async fn a_base_reload_that_would_break_a_worlds_checks_is_refused_and_the_old_base_stays() {
    let t = engine().await;
    let world = Uuid::now_v7();
    // The world counts on `rm` being denied, which the base's locked rule says.
    let counts_on_no_rm = r#"
[[checks]]
tool = "shell_cmd"
args = { command = "rm -rf build" }
expect = "deny"
"#;
    t.engine
        .set_world_policy(&admin("root"), world, counts_on_no_rm)
        .await
        .unwrap();
    let rm_rule = "[[rules]]\nname = \"no rm\"\ntools = [\"shell_cmd\"]\naction = \"deny\"\ncommand = { program = \"rm\" }\nlocked = true\n";
    let without_rm = BASE.replace(rm_rule, "");
    assert_ne!(without_rm, BASE);
    let Err(EngineError::InvalidPolicy(problems)) = t
        .engine
        .reload_policy(
            Actor::of(Source::System),
            Policy::from_toml(&without_rm).unwrap(),
        )
        .await
    else {
        panic!("a base that breaks a world's check was taken");
    };
    assert_eq!(problems.0.len(), 1, "{problems}");
    assert_eq!(
        problems.0[0].path,
        format!("world {world}: checks[0].expect"),
        "{problems}"
    );
    // The old base is still in force.
    assert!(matches!(
        shell(&t, &world.to_string(), "rm -rf build").await,
        GateResult::Denied { .. }
    ));
}
