use std::time::Duration;

use holdpoint_core::Scope;
use holdpoint_core::policy::{Call, Policy};
use holdpoint_protocol::{
    ApproveScope, CallVerdict, DecidedBy, Decision, GateResult, GrantScope, Hold,
};
use holdpoint_test_support::{TestEngine, agent, approval, approver, gate};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

const POLICY: &str = r#"
[[rules]]
name = "shell asks"
tools = ["shell_cmd"]
action = "ask"

[[rules]]
name = "no rm"
tools = ["shell_cmd"]
action = "deny"
command = { program = "rm" }
"#;

async fn call(t: &TestEngine, chat: &str, args: Value) -> GateResult {
    let res = t
        .engine
        .gate(
            &agent("bot"),
            gate("w", Some(chat), vec![approval("shell_cmd", args)]),
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

async fn approve(t: &TestEngine, h: &Hold, scope: ApproveScope) {
    t.engine
        .decide(
            &approver("alice"),
            h.id,
            Decision::Approve {
                scope,
                expires_in: None,
                digest: None,
                reason: None,
            },
            &Scope::any(),
            None,
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn approve_for_this_chat_skips_the_same_call_in_that_chat_only() {
    let t = TestEngine::new(Policy::from_toml(POLICY).unwrap()).await;
    let h = held(call(&t, "c1", json!({"command": "make test"})).await);
    approve(&t, &h, ApproveScope::Chat).await;
    let grant = t.engine.grants(Some("w")).await.unwrap().remove(0);
    assert_eq!(
        (grant.scope, grant.chat.as_deref(), grant.from_hold),
        (GrantScope::Chat, Some("c1"), h.id)
    );
    // The follower applies committed grants; a decision's grant is in force for the next gate.
    let again = call(&t, "c1", json!({"command": "make test"})).await;
    assert_eq!(
        again,
        GateResult::Allowed {
            digest: h.digest().unwrap().into(),
            decided_by: DecidedBy::Grant { grant: grant.id }
        }
    );
    held(call(&t, "c2", json!({"command": "make test"})).await);
    held(call(&t, "c1", json!({"command": "make deploy"})).await);
}

#[tokio::test]
async fn grants_never_override_a_deny_rule_and_can_be_revoked() {
    let t = TestEngine::new(Policy::from_toml(POLICY).unwrap()).await;
    let h = held(call(&t, "c1", json!({"command": "ls"})).await);
    approve(&t, &h, ApproveScope::AlwaysTool).await;
    assert!(matches!(
        call(&t, "c9", json!({"command": "ls -la"})).await,
        GateResult::Allowed { .. }
    ));
    assert!(
        matches!(
            call(&t, "c9", json!({"command": "rm -rf /"})).await,
            GateResult::Denied { .. }
        ),
        "deny rules come first"
    );
    let args = json!({"command": "cat x"});
    let explained = t
        .engine
        .explain("w", Some("c9"), &Call::new("shell_cmd", &args));
    assert_eq!(explained.decision, CallVerdict::Allow);
    assert!(matches!(explained.decided_by, DecidedBy::Grant { .. }));
    assert_eq!(
        explained
            .matched
            .iter()
            .map(|m| m.rule.name.as_str())
            .collect::<Vec<_>>(),
        vec!["shell asks"]
    );

    let grant = t.engine.grants(Some("w")).await.unwrap().remove(0);
    let err = t
        .engine
        .revoke_grant(&agent("bot"), grant.id, &Scope::any())
        .await
        .unwrap_err();
    assert_eq!(err.code(), "forbidden");
    let revoked = t
        .engine
        .revoke_grant(&approver("alice"), grant.id, &Scope::any())
        .await
        .unwrap();
    assert!(revoked.revoked_at.is_some());
    assert_eq!(
        t.engine
            .revoke_grant(&approver("alice"), grant.id, &Scope::any())
            .await
            .unwrap_err()
            .code(),
        "already_revoked"
    );
    held(call(&t, "c9", json!({"command": "ls -la"})).await);
    assert!(t.engine.grants(Some("w")).await.unwrap().is_empty());
}

#[tokio::test]
async fn approve_always_for_these_arguments() {
    let t = TestEngine::new(Policy::from_toml(POLICY).unwrap()).await;
    let h = held(call(&t, "c1", json!({"command": "git fetch"})).await);
    approve(&t, &h, ApproveScope::AlwaysArgs).await;
    assert!(matches!(
        call(&t, "c2", json!({"command": "git fetch"})).await,
        GateResult::Allowed { .. }
    ));
    held(call(&t, "c2", json!({"command": "git fetch --all"})).await);
}

#[tokio::test]
async fn grants_survive_a_restart() {
    let t = TestEngine::new(Policy::from_toml(POLICY).unwrap()).await;
    let h = held(call(&t, "c1", json!({"command": "ls"})).await);
    approve(&t, &h, ApproveScope::AlwaysArgs).await;
    let (dir, clock) = t.shut_down().await;
    let temp = holdpoint_test_support::TempStore {
        store: std::sync::Arc::new(
            holdpoint_store::SqliteStore::open(dir.path().join(holdpoint_store::DATABASE_FILE))
                .unwrap(),
        ),
        dir,
    };
    let t = TestEngine::on(temp, Policy::from_toml(POLICY).unwrap(), clock).await;
    assert!(matches!(
        call(&t, "c5", json!({"command": "ls"})).await,
        GateResult::Allowed { .. }
    ));
}

async fn approve_for(
    t: &TestEngine,
    h: &Hold,
    scope: ApproveScope,
    expires_in: &str,
) -> Result<(), holdpoint_core::EngineError> {
    t.engine
        .decide(
            &approver("alice"),
            h.id,
            Decision::Approve {
                scope,
                expires_in: Some(expires_in.parse().unwrap()),
                digest: None,
                reason: None,
            },
            &Scope::any(),
            None,
        )
        .await
        .map(|_| ())
}

#[tokio::test]
async fn a_grant_for_ten_minutes_allows_at_nine_and_asks_again_at_eleven() {
    let t = TestEngine::new(Policy::from_toml(POLICY).unwrap()).await;
    let args = json!({"command": "make test"});
    let h = held(call(&t, "c1", args.clone()).await);
    approve_for(&t, &h, ApproveScope::Chat, "10m")
        .await
        .unwrap();
    let grant = t.engine.grants(Some("w")).await.unwrap().remove(0);
    assert_eq!(
        grant.expires_at,
        Some(grant.created_at.saturating_add(Duration::from_secs(600)))
    );
    assert!(!grant.expired);

    t.clock.advance(Duration::from_secs(9 * 60));
    assert!(matches!(
        call(&t, "c1", args.clone()).await,
        GateResult::Allowed { .. }
    ));
    // Exactly at its end it no longer matches.
    t.clock.advance(Duration::from_secs(60));
    held(call(&t, "c1", args.clone()).await);
    t.clock.advance(Duration::from_secs(60));
    held(call(&t, "c1", args).await);
    let listed = t.engine.grants(Some("w")).await.unwrap();
    assert_eq!(
        listed.iter().map(|g| (g.id, g.expired)).collect::<Vec<_>>(),
        [(grant.id, true)]
    );
}

#[tokio::test]
async fn only_remembered_approvals_expire() {
    let t = TestEngine::new(Policy::from_toml(POLICY).unwrap()).await;
    let h = held(call(&t, "c1", json!({"command": "make"})).await);
    let err = approve_for(&t, &h, ApproveScope::Once, "10m")
        .await
        .unwrap_err();
    assert!(err.to_string().contains("expires_in"), "{err}");
    let err = approve_for(&t, &h, ApproveScope::AlwaysTool, "never")
        .await
        .unwrap_err();
    assert!(err.to_string().contains("expires_in"), "{err}");
    assert!(t.engine.hold(h.id, &Scope::any()).await.unwrap().is_open());
}
