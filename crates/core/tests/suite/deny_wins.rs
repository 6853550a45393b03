//! Whatever the layers, locks, modes and grants: a call the policy in force denies never
//! passes the gate, and the screen of calls that are not approvals (questions, skills)
//! refuses it too. Checked against a model of the layers written here, not the engine's.

use holdpoint_core::Scope;
use holdpoint_core::policy::{Call, Policy};
use holdpoint_protocol::{ApproveScope, Decision, GateResult, HoldRequest};
use holdpoint_test_support::{TestEngine, admin, agent, approval, approver, gate};
use proptest::prelude::*;
use serde_json::json;
use uuid::Uuid;

/// Built-in tools, the system gates among them, and an MCP tool.
const TOOLS: &[&str] = &[
    "shell_cmd",
    "load_skill",
    "create_agent",
    "ask_human",
    "fs__write_file",
];
const ACTIONS: &[&str] = &["allow", "ask", "deny"];
const MODES: &[&str] = &["manual", "auto_approve", "auto_deny"];

#[derive(Debug, Clone)]
struct GenRule {
    /// An index into `TOOLS`, or `TOOLS.len()` for `*`.
    tool: usize,
    action: usize,
    locked: bool,
}

impl GenRule {
    fn pattern(&self) -> &'static str {
        TOOLS.get(self.tool).copied().unwrap_or("*")
    }

    fn matches(&self, tool: &str) -> bool {
        self.tool >= TOOLS.len() || TOOLS[self.tool] == tool
    }
}

#[derive(Debug, Clone)]
struct Case {
    tool: usize,
    base_mode: usize,
    base: Vec<GenRule>,
    /// The world's own policy: its mode and rules.
    world: Option<(usize, Vec<GenRule>)>,
    /// A grant made before the policy changed: for the chat, or for the tool in the world.
    grant: Option<ApproveScope>,
}

fn rule(lockable: bool) -> impl Strategy<Value = GenRule> {
    (
        0..=TOOLS.len(),
        0..ACTIONS.len(),
        any::<bool>().prop_map(move |l| l && lockable),
    )
        .prop_map(|(tool, action, locked)| GenRule {
            tool,
            action,
            locked,
        })
}

fn case() -> impl Strategy<Value = Case> {
    (
        0..TOOLS.len(),
        0..MODES.len(),
        prop::collection::vec(rule(true), 0..4),
        prop::option::of((0..MODES.len(), prop::collection::vec(rule(false), 0..4))),
        prop::option::of(prop::sample::select(vec![
            ApproveScope::Chat,
            ApproveScope::AlwaysArgs,
            ApproveScope::AlwaysTool,
        ])),
    )
        .prop_map(|(tool, base_mode, base, world, grant)| Case {
            tool,
            base_mode,
            base,
            world,
            grant,
        })
}

fn text(mode: usize, rules: &[GenRule]) -> String {
    let mut out = format!("mode = \"{}\"\n", MODES[mode]);
    for (i, r) in rules.iter().enumerate() {
        out.push_str(&format!(
            "\n[[rules]]\nname = \"r{i}\"\ntools = [\"{}\"]\naction = \"{}\"\nlocked = {}\n",
            r.pattern(),
            ACTIONS[r.action],
            r.locked
        ));
    }
    out
}

/// The model: in a world with a policy of its own, the base's locked rules and the world's
/// rules decide, else every rule of the base; a deny among those that match denies; with
/// none matching, the mode in force (the world's, or the base's) decides.
fn denied(c: &Case) -> bool {
    let tool = TOOLS[c.tool];
    let (mode, rules): (usize, Vec<&GenRule>) = match &c.world {
        Some((mode, own)) => (
            *mode,
            c.base.iter().filter(|r| r.locked).chain(own).collect(),
        ),
        None => (c.base_mode, c.base.iter().collect()),
    };
    let matching: Vec<&&GenRule> = rules.iter().filter(|r| r.matches(tool)).collect();
    if matching.is_empty() {
        MODES[mode] == "auto_deny"
    } else {
        matching.iter().any(|r| ACTIONS[r.action] == "deny")
    }
}

async fn run(c: Case) -> Result<(), TestCaseError> {
    let tool = TOOLS[c.tool];
    let t = TestEngine::new(Policy::default()).await;
    let world = Uuid::now_v7();
    let w = world.to_string();
    let chat = Some("chat-1");
    let args = json!({"name": "deploy"});
    let ask = |always_ask: bool| {
        let mut item = approval(tool, args.clone());
        if let HoldRequest::Approval(a) = &mut item {
            a.always_ask = always_ask;
        }
        gate(&w, chat, vec![item])
    };

    // Someone said "yes" for this chat or world while nothing was denied.
    if let Some(scope) = c.grant {
        let res = t.engine.gate(&agent("bot"), ask(false)).await.unwrap();
        let Some(GateResult::Held { hold }) = res.results.into_iter().next() else {
            return Err(TestCaseError::fail("the empty manual policy did not ask"));
        };
        let approve = Decision::Approve {
            scope,
            expires_in: None,
            digest: None,
            reason: None,
        };
        t.engine
            .decide(&approver("ana"), hold.id, approve, &Scope::any(), None)
            .await
            .unwrap();
    }

    // Then the policy changed: the base reloaded, a world's own set.
    t.engine
        .set_policy(Policy::from_toml(&text(c.base_mode, &c.base)).unwrap())
        .unwrap();
    if let Some((mode, rules)) = &c.world {
        t.engine
            .set_world_policy(&admin("root"), world, &text(*mode, rules))
            .await
            .unwrap();
    }

    let expect_deny = denied(&c);
    let call = Call::new(tool, &args);
    prop_assert_eq!(t.engine.screen(&w, &call).is_some(), expect_deny);
    for always_ask in [false, true] {
        let res = t.engine.gate(&agent("bot"), ask(always_ask)).await.unwrap();
        let result = &res.results[0];
        if expect_deny {
            prop_assert!(
                matches!(result, GateResult::Denied { .. }),
                "denied by policy, yet {result:?} (always_ask {always_ask})"
            );
        } else {
            prop_assert!(
                !matches!(result, GateResult::Denied { .. }),
                "nothing denies, yet {result:?}"
            );
            if always_ask {
                prop_assert!(matches!(result, GateResult::Held { .. }), "{result:?}");
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn nothing_the_policy_denies_passes_the_gate(c in case()) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(run(c))?;
    }
}
