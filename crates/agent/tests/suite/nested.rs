//! Sub-agents: an `a2a_agents` entry naming an agent of the same world. Its holds are raised
//! in the caller's chat with their lineage, decided there, covered by the caller's chat
//! grants, and withdrawn with the caller's turn.

use std::collections::BTreeMap;

use holdpoint_protocol::{
    ApproveScope, Decision, HoldStatus, LineageStep, NewAgent, OutcomeStatus, RemoteAgentConfig,
    TurnStatus, WorldChanges,
};
use holdpoint_test_support::llm::{Step, call};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::{Harness, by, llm_settings, next_hold, turn_end};

/// The agents' own calls of sub-agents are allowed; every other call asks.
const POLICY: &str = "[[rules]]\ntools = [\"a2a__*\"]\naction = \"allow\"";

fn approve(scope: ApproveScope) -> Decision {
    Decision::Approve {
        scope,
        expires_in: None,
        digest: None,
        reason: None,
    }
}

/// The harness, with a second agent `researcher` that `helper` calls as `a2a__research`.
async fn harness(steps: Vec<Step>) -> Harness {
    let h = Harness::new(POLICY, steps).await;
    h.rt.create_agent(
        &by(),
        h.world.id,
        NewAgent {
            name: "researcher".into(),
            llm: llm_settings(&h.llm),
            system_prompt: "You look things up.\n\nBe brief.".into(),
            tools: None,
            max_steps: None,
        },
    )
    .await
    .unwrap();
    let sub = RemoteAgentConfig {
        agent: Some("researcher".into()),
        ..RemoteAgentConfig::default()
    };
    h.rt.update_world(
        &by(),
        h.world.id,
        WorldChanges {
            a2a_agents: Some(BTreeMap::from([("research".to_owned(), Some(sub))])),
            ..WorldChanges::default()
        },
    )
    .await
    .unwrap();
    h
}

fn ask_research(id: &str) -> Step {
    Step::calls(vec![call(
        id,
        "a2a__research",
        json!({"message": "count the files"}),
    )])
}

fn shell(id: &str) -> Step {
    Step::calls(vec![call(
        id,
        "shell_cmd",
        json!({"command": "echo ran >> runs.txt; echo 3"}),
    )])
}

fn runs(h: &Harness) -> usize {
    std::fs::read_to_string(h.world_dir().join("runs.txt"))
        .map(|s| s.lines().count())
        .unwrap_or(0)
}

#[tokio::test]
async fn a_sub_agents_hold_is_raised_in_the_callers_chat_with_its_lineage() {
    let h = harness(vec![
        ask_research("p1"),
        shell("s1"),
        Step::text("There are 3."),
        Step::text("The researcher says 3."),
    ])
    .await;
    let mut events = h.events().await;
    let turn = h.send("how many files?").await;
    let hold = next_hold(&mut events).await;

    // Shown in the conversation a person follows, naming who asks and on whose behalf.
    assert_eq!(hold.chat.as_deref(), Some(h.chat.id.to_string().as_str()));
    let names: Vec<&str> = hold.lineage.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["helper", "researcher"]);
    let (caller, sub) = (&hold.lineage[0], &hold.lineage[1]);
    assert_eq!(
        (caller.agent, caller.chat, caller.tool_call_id.as_deref()),
        (Some(h.agent.id), Some(h.chat.id), Some("p1"))
    );
    let sub_chat = h.rt.chat(h.world.id, sub.chat.unwrap()).await.unwrap();
    assert_eq!(Some(sub_chat.agent), sub.agent);
    assert_eq!(hold.agent, sub.agent.map(|a| a.to_string()));
    assert_eq!(hold.tool_call_id.as_deref(), Some("s1"));
    assert_eq!(
        sub_chat.lineage,
        vec![LineageStep {
            name: "helper".into(),
            agent: Some(h.agent.id),
            chat: Some(h.chat.id),
            tool_call_id: Some("p1".into()),
        }]
    );
    // The caller's turn waits on the sub-agent's holds (saved just after they are raised),
    // and its chat is locked by them.
    let deadline = tokio::time::Instant::now() + holdpoint_test_support::PATIENCE;
    loop {
        let waiting = h.rt.turn(turn.id).await.unwrap();
        if (waiting.status, waiting.batch) == (TurnStatus::Waiting, Some(hold.batch)) {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{waiting:?}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(
        h.engine
            .chat_locked(&h.world.id.to_string(), &h.chat.id.to_string())
            .await
            .unwrap()
    );
    assert_eq!(runs(&h), 0, "nothing runs before the decision");

    h.decide(&hold, approve(ApproveScope::Once)).await;
    let done = turn_end(&h.rt, &mut events, turn.id).await;
    assert_eq!(done.status, TurnStatus::Finished);
    assert_eq!(runs(&h), 1, "the sub-agent's call ran exactly once");
    let requests = h.llm.requests();
    let result = requests[3].tool_result("p1").unwrap();
    assert_eq!(result["status"], "executed", "{result}");
    assert_eq!(result["output"]["text"], "There are 3.", "{result}");
    assert_eq!(result["output"]["agent"], "researcher", "{result}");
}

#[tokio::test]
async fn a_grant_for_the_callers_chat_covers_the_sub_agents_calls() {
    let h = harness(vec![
        ask_research("p1"),
        shell("s1"),
        Step::text("3."),
        Step::text("3, it says."),
        ask_research("p2"),
        shell("s2"),
        Step::text("Still 3."),
        Step::text("Still 3, it says."),
    ])
    .await;
    let mut events = h.events().await;
    let first = h.send("how many files?").await;
    let hold = next_hold(&mut events).await;
    h.decide(&hold, approve(ApproveScope::Chat)).await;
    assert_eq!(
        turn_end(&h.rt, &mut events, first.id).await.status,
        TurnStatus::Finished
    );
    let grants = h
        .engine
        .grants(Some(&h.world.id.to_string()))
        .await
        .unwrap();
    assert_eq!(grants.len(), 1);
    assert_eq!(
        grants[0].chat.as_deref(),
        Some(h.chat.id.to_string().as_str()),
        "the grant is the conversation's"
    );

    // The same call again, in the same conversation: the sub-agent (in the same chat of its
    // own) runs it under the grant, asking nobody.
    let second = h.send("and now?").await;
    assert_eq!(
        turn_end(&h.rt, &mut events, second.id).await.status,
        TurnStatus::Finished
    );
    assert_eq!(runs(&h), 2);
    let all = h
        .engine
        .holds(&holdpoint_protocol::HoldQuery {
            world: Some(h.world.id.to_string()),
            status: holdpoint_protocol::StatusFilter::Any,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(all.items.len(), 1, "only the first call asked");
    let requests = h.llm.requests();
    let result = requests[7].tool_result("p2").unwrap();
    assert_eq!(result["output"]["text"], "Still 3.", "{result}");
}

#[tokio::test]
async fn canceling_the_callers_turn_withdraws_the_sub_agents_holds_and_cancels_its_turn() {
    let h = harness(vec![ask_research("p1"), shell("s1")]).await;
    let mut events = h.events().await;
    let turn = h.send("how many files?").await;
    let hold = next_hold(&mut events).await;
    let sub_chat = hold.lineage[1].chat.unwrap();

    let canceled = h.rt.cancel_turn(&by(), h.world.id, turn.id).await.unwrap();
    assert_eq!(canceled.status, TurnStatus::Canceled);
    let withdrawn = h
        .engine
        .hold(hold.id, &holdpoint_core::Scope::any())
        .await
        .unwrap();
    assert_eq!(withdrawn.status, HoldStatus::Canceled);
    assert_eq!(
        withdrawn.outcome.map(|o| o.status),
        Some(OutcomeStatus::Canceled)
    );
    // The sub-agent's turn ended too.
    let deadline = tokio::time::Instant::now() + holdpoint_test_support::PATIENCE;
    while h.rt.active_turn(sub_chat).await.unwrap().is_some() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the sub-agent's turn still runs"
        );
        let _ = tokio::time::timeout(std::time::Duration::from_millis(200), events.next()).await;
    }
    assert_eq!(runs(&h), 0);
}

#[tokio::test]
async fn an_agent_does_not_call_itself() {
    let h = Harness::new(
        POLICY,
        vec![
            Step::calls(vec![call("p1", "a2a__me", json!({"message": "again"}))]),
            Step::text("I cannot call myself."),
        ],
    )
    .await;
    h.rt.update_world(
        &by(),
        h.world.id,
        WorldChanges {
            a2a_agents: Some(BTreeMap::from([(
                "me".to_owned(),
                Some(RemoteAgentConfig {
                    agent: Some("helper".into()),
                    ..RemoteAgentConfig::default()
                }),
            )])),
            ..WorldChanges::default()
        },
    )
    .await
    .unwrap();
    let mut events = h.events().await;
    let turn = h.send("loop").await;
    let end = turn_end(&h.rt, &mut events, turn.id).await;
    assert_eq!(end.status, TurnStatus::Finished);
    let result = h.llm.requests()[1].tool_result("p1").unwrap();
    assert!(
        result.to_string().contains("agents do not call themselves"),
        "{result}"
    );
}

#[tokio::test]
async fn a_sub_agent_must_be_an_agent_of_the_world_and_not_also_a_url() {
    let h = Harness::new(POLICY, vec![]).await;
    let set = |remote: RemoteAgentConfig| WorldChanges {
        a2a_agents: Some(BTreeMap::from([("x".to_owned(), Some(remote))])),
        ..WorldChanges::default()
    };
    let field = |e: holdpoint_agent::RuntimeError| match e {
        holdpoint_agent::RuntimeError::Invalid { error } => error.field,
        other => panic!("{other}"),
    };
    let nobody = RemoteAgentConfig {
        agent: Some("nobody".into()),
        ..RemoteAgentConfig::default()
    };
    let e =
        h.rt.update_world(&by(), h.world.id, set(nobody))
            .await
            .unwrap_err();
    assert_eq!(field(e), "a2a_agents.x.agent");
    let both = RemoteAgentConfig {
        agent: Some("helper".into()),
        url: Some("http://127.0.0.1:9/".into()),
        ..RemoteAgentConfig::default()
    };
    let e =
        h.rt.update_world(&by(), h.world.id, set(both))
            .await
            .unwrap_err();
    assert_eq!(field(e), "a2a_agents.x.agent");
    let neither = RemoteAgentConfig::default();
    let e =
        h.rt.update_world(&by(), h.world.id, set(neither))
            .await
            .unwrap_err();
    assert_eq!(field(e), "a2a_agents.x.url");
    // Nothing was kept of the refused changes.
    assert!(h.rt.world(h.world.id).await.unwrap().a2a_agents.is_empty());
}
