use std::time::Duration;

use holdpoint_core::Scope;
use holdpoint_protocol::{ApproveScope, Decision, HoldSpec, HoldStatus, OnTimeout, TurnStatus};
use holdpoint_test_support::llm::{Step, call};
use pretty_assertions::assert_eq;
use serde_json::json;

use holdpoint_test_support::admin;

use super::{Harness, by, next_hold, turn_end};

fn ask(id: &str, confirm: bool) -> Step {
    Step::calls(vec![call(
        id,
        "ask_human",
        json!({"question": "Deploy now?", "options": [{"id": "yes", "label": "Deploy"}, {"id": "no", "label": "Wait"}], "confirm": confirm, "context": {"version": "2.1"}}),
    )])
}

#[tokio::test]
async fn a_question_with_confirm_is_confirmed_or_canceled() {
    let h = Harness::new(
        "",
        vec![
            ask("q1", true),
            Step::text("deploying"),
            ask("q2", true),
            Step::text("ok"),
        ],
    )
    .await;
    let mut events = h.events().await;
    let first = h.send("ship it").await;
    let hold = next_hold(&mut events).await;
    let HoldSpec::Question(q) = &hold.spec else {
        panic!("{:?}", hold.spec)
    };
    assert_eq!((q.question.as_str(), q.confirm), ("Deploy now?", true));
    assert_eq!(q.context.as_ref().unwrap()["version"], "2.1");
    h.decide(
        &hold,
        Decision::Answer {
            options: vec!["yes".into()],
        },
    )
    .await;
    h.decide(&hold, Decision::Confirm).await;
    turn_end(&h.rt, &mut events, first.id).await;
    assert_eq!(
        h.llm.requests()[1].tool_result("q1").unwrap(),
        json!({"status": "answer", "outcome": "confirmed", "options": [{"id": "yes", "label": "Deploy"}], "decided_by": ["alice"]})
    );

    let second = h.send("again").await;
    let hold = next_hold(&mut events).await;
    h.decide(
        &hold,
        Decision::Answer {
            options: vec!["yes".into()],
        },
    )
    .await;
    h.decide(&hold, Decision::Cancel { reason: None }).await;
    turn_end(&h.rt, &mut events, second.id).await;
    let result = h.llm.requests()[3].tool_result("q2").unwrap();
    assert_eq!(
        (result["outcome"].clone(), result.get("options")),
        (json!("canceled"), None),
        "a cancel never reports a choice"
    );
}

#[tokio::test]
async fn a_question_nobody_answered_is_told_as_no_answer() {
    let deploy = call(
        "q",
        "ask_human",
        json!({"question": "Deploy to production?", "options": [{"id": "deploy", "label": "Deploy"}, {"id": "abort", "label": "Abort"}], "timeout": "10m"}),
    );
    let h = Harness::new(
        "",
        vec![Step::calls(vec![deploy]), Step::text("nobody answered")],
    )
    .await;
    let mut events = h.events().await;
    let turn = h.send("ship it").await;
    let hold = next_hold(&mut events).await;
    assert_eq!(hold.on_timeout, OnTimeout::NoAnswer);
    h.clock.advance(Duration::from_secs(601));
    turn_end(&h.rt, &mut events, turn.id).await;
    let timed_out = h.engine.hold(hold.id, &Scope::any()).await.unwrap();
    assert_eq!(timed_out.status, HoldStatus::TimedOut);
    assert_eq!(
        h.llm.requests()[1].tool_result("q").unwrap(),
        json!({"status": "timed_out", "applied": "no_answer"}),
        "the first option is not an answer nobody chose"
    );
}

#[tokio::test]
async fn a_free_text_question_is_refused_without_a_hold() {
    let bad = call(
        "q",
        "human_intervention_request",
        json!({"question": "Your name?", "options": [{"id": "a", "label": "A"}], "free_text": true}),
    );
    let h = Harness::new("", vec![Step::calls(vec![bad]), Step::text("sorry")]).await;
    let mut events = h.events().await;
    let turn = h.send("hi").await;
    let done = turn_end(&h.rt, &mut events, turn.id).await;
    assert_eq!(done.status, TurnStatus::Finished);
    let result = h.llm.requests()[1].tool_result("q").unwrap();
    assert_eq!(result["status"], "invalid_arguments");
    assert!(
        result["error"].as_str().unwrap().contains("options-only"),
        "{result}"
    );
    assert!(
        h.engine
            .holds(&Default::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
}

#[tokio::test]
async fn an_invalid_call_is_told_its_error_without_positions_in_holdpoints_batch() {
    // Two questions in one step: the engine gets both in one batch, and refuses the second's
    // duplicate option id as `items[1].options[1].id`, a position the LLM never saw.
    let fine = call(
        "q1",
        "ask_human",
        json!({"question": "Deploy now?", "options": [{"id": "yes", "label": "Deploy"}, {"id": "no", "label": "Wait"}]}),
    );
    let twice = call(
        "q2",
        "ask_human",
        json!({"question": "Which region?", "options": [{"id": "eu", "label": "Europe"}, {"id": "eu", "label": "Also Europe"}]}),
    );
    let h = Harness::new("", vec![Step::calls(vec![fine, twice]), Step::text("ok")]).await;
    let mut events = h.events().await;
    let turn = h.send("ship it").await;
    let hold = next_hold(&mut events).await;
    h.decide(
        &hold,
        Decision::Answer {
            options: vec!["yes".into()],
        },
    )
    .await;
    turn_end(&h.rt, &mut events, turn.id).await;
    assert_eq!(
        h.llm.requests()[1].tool_result("q2").unwrap(),
        json!({"status": "invalid_arguments", "error": "options[1].id: \"eu\" is used by an earlier option; ids must be unique"})
    );
}

#[tokio::test]
async fn create_agent_always_asks() {
    let create = call(
        "c",
        "create_agent",
        json!({"name": "reviewer", "system_prompt": "Review."}),
    );
    let h = Harness::new(
        "mode = \"auto_approve\"",
        vec![Step::calls(vec![create]), Step::text("created")],
    )
    .await;
    let mut events = h.events().await;
    let turn = h.send("make a reviewer").await;
    let hold = next_hold(&mut events).await;
    let offers: Vec<&str> = hold.offers.iter().map(|k| k.as_str()).collect();
    assert!(!offers.contains(&"approve_always_tool"), "{offers:?}");
    assert_eq!(
        (hold.rule.as_ref(), hold.asks_because.as_deref()),
        (
            None,
            Some(
                "creating an agent always needs a person \
                 (policy alone would allow it: no rule matched and the mode is auto_approve)"
            )
        ),
        "the hold says why it asks where policy allows"
    );
    h.decide(
        &hold,
        Decision::Approve {
            scope: ApproveScope::Once,
            expires_in: None,
            digest: None,
            reason: None,
        },
    )
    .await;
    turn_end(&h.rt, &mut events, turn.id).await;
    let agent = h.rt.find_agent(h.world.id, "reviewer").await.unwrap();
    assert_eq!(
        (agent.system_prompt.as_str(), agent.llm.model.as_str()),
        ("Review.", "scripted")
    );
}

#[tokio::test]
async fn create_agent_allowed_by_a_rule_asks_and_says_why() {
    let create = call(
        "c",
        "create_agent",
        json!({"name": "reviewer", "system_prompt": "Review."}),
    );
    let policy = r#"
[[rules]]
name = "agents are fine"
tools = ["create_agent"]
action = "allow"
"#;
    let h = Harness::new(policy, vec![Step::calls(vec![create]), Step::text("ok")]).await;
    let mut events = h.events().await;
    h.send("make a reviewer").await;
    let hold = next_hold(&mut events).await;
    assert_eq!(hold.rule, None);
    assert_eq!(
        hold.asks_because.as_deref(),
        Some(
            "creating an agent always needs a person \
             (policy alone would allow it: rule \"agents are fine\")"
        )
    );
}

#[tokio::test]
async fn a_skill_allowed_for_the_session_is_not_asked_again_in_that_chat() {
    let load = || Step::calls(vec![call("s", "load_skill", json!({"name": "deploy"}))]);
    let h = Harness::new(
        "",
        vec![
            load(),
            Step::text("1"),
            load(),
            Step::text("2"),
            load(),
            Step::text("3"),
        ],
    )
    .await;
    std::fs::write(
        h.world_dir().join("skills/deploy.md"),
        "# Deploying\nAlways tag first.",
    )
    .unwrap();
    let mut events = h.events().await;
    let first = h.send("load it").await;
    let hold = next_hold(&mut events).await;
    let HoldSpec::Question(q) = &hold.spec else {
        panic!()
    };
    assert_eq!(
        q.options.iter().map(|o| o.id.as_str()).collect::<Vec<_>>(),
        vec!["yes_once", "yes_in_session", "no"]
    );
    h.decide(
        &hold,
        Decision::Answer {
            options: vec!["yes_in_session".into()],
        },
    )
    .await;
    turn_end(&h.rt, &mut events, first.id).await;
    assert_eq!(
        h.llm.requests()[1].tool_result("s").unwrap()["output"]["instructions"],
        "# Deploying\nAlways tag first."
    );
    let second = h.send("again").await;
    turn_end(&h.rt, &mut events, second.id).await;
    assert_eq!(
        h.llm.requests()[3].tool_result("s").unwrap()["approved_by"],
        "session"
    );
    let other = h.new_chat().await;
    h.rt.send_message(&by(), h.world.id, other.id, "elsewhere")
        .await
        .unwrap();
    let hold = next_hold(&mut events).await;
    assert_eq!(hold.chat.as_deref(), Some(other.id.to_string().as_str()));
}

/// A base policy whose locked rule denies loading skills, in every world.
const NO_SKILLS: &str = r#"
[[rules]]
name = "no skills"
tools = ["load_skill"]
action = "deny"
locked = true
"#;

#[tokio::test]
async fn a_locked_deny_of_load_skill_wins_over_yes_for_this_chat() {
    let load = || Step::calls(vec![call("s", "load_skill", json!({"name": "deploy"}))]);
    let h = Harness::new(
        "",
        vec![
            load(),
            Step::text("1"),
            load(),
            Step::text("2"),
            load(),
            Step::text("3"),
        ],
    )
    .await;
    std::fs::write(h.world_dir().join("skills/deploy.md"), "# Deploying").unwrap();
    let mut events = h.events().await;
    let first = h.send("load it").await;
    let hold = next_hold(&mut events).await;
    h.decide(
        &hold,
        Decision::Answer {
            options: vec!["yes_in_session".into()],
        },
    )
    .await;
    turn_end(&h.rt, &mut events, first.id).await;
    assert_eq!(
        h.llm.requests()[1].tool_result("s").unwrap()["output"]["instructions"],
        "# Deploying"
    );

    // The base now locks a deny: the chat's earlier "yes" no longer counts…
    h.engine
        .set_policy(holdpoint_core::policy::Policy::from_toml(NO_SKILLS).unwrap())
        .unwrap();
    let second = h.send("again").await;
    turn_end(&h.rt, &mut events, second.id).await;
    assert_eq!(
        h.llm.requests()[3].tool_result("s").unwrap(),
        json!({"status": "denied_by_policy", "rule": "rule \"no skills\""})
    );
    // …and a fresh chat is refused, not asked.
    let other = h.new_chat().await;
    let third =
        h.rt.send_message(&by(), h.world.id, other.id, "elsewhere")
            .await
            .unwrap();
    turn_end(&h.rt, &mut events, third.id).await;
    assert_eq!(
        h.llm.requests()[5].tool_result("s").unwrap()["status"],
        "denied_by_policy"
    );
    assert_eq!(
        count_holds(&h).await,
        1,
        "only the first load asked a person"
    );
}

#[tokio::test]
async fn a_worlds_deny_refuses_skills_and_questions_before_anyone_is_asked() {
    let h = Harness::new(
        "",
        vec![
            Step::calls(vec![
                call("s", "load_skill", json!({"name": "deploy"})),
                call(
                    "q",
                    "ask_human",
                    json!({"question": "Deploy now?", "options": [{"id": "yes", "label": "Deploy"}]}),
                ),
            ]),
            Step::text("done"),
        ],
    )
    .await;
    std::fs::write(h.world_dir().join("skills/deploy.md"), "# Deploying").unwrap();
    let world_policy = r#"
[[rules]]
name = "this world loads no skills"
tools = ["load_skill"]
action = "deny"

[[rules]]
name = "nobody to ask here"
tools = ["ask_human"]
action = "deny"
"#;
    h.engine
        .set_world_policy(&admin("root"), *h.world.id.as_uuid(), world_policy)
        .await
        .unwrap();
    let mut events = h.events().await;
    let turn = h.send("load it").await;
    turn_end(&h.rt, &mut events, turn.id).await;
    let request = &h.llm.requests()[1];
    assert_eq!(
        request.tool_result("s").unwrap(),
        json!({"status": "denied_by_policy", "rule": "rule \"this world loads no skills\""})
    );
    assert_eq!(
        request.tool_result("q").unwrap(),
        json!({"status": "denied_by_policy", "rule": "rule \"nobody to ask here\""})
    );
    assert_eq!(count_holds(&h).await, 0);
}

/// How many holds the engine has raised, open or decided.
async fn count_holds(h: &Harness) -> usize {
    let query = holdpoint_protocol::HoldQuery {
        status: holdpoint_protocol::StatusFilter::Any,
        ..Default::default()
    };
    h.engine.holds(&query).await.unwrap().items.len()
}
