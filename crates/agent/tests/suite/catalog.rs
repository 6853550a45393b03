use holdpoint_protocol::{AgentChanges, ChatChanges, NewAgent, NewChat, NewWorld, WorldChanges};
use holdpoint_test_support::llm::Step;
use pretty_assertions::assert_eq;

use super::{Harness, by, llm_settings};

#[tokio::test]
async fn worlds_agents_and_chats_can_be_created_listed_changed_and_deleted() {
    let h = Harness::new("", vec![Step::text("hi")]).await;
    let rt = &h.rt;
    assert_eq!(rt.find_world("lab").await.unwrap().id, h.world.id);
    assert_eq!(
        rt.find_world(&h.world.id.to_string()).await.unwrap().name,
        "lab"
    );
    let other = rt
        .create_world(
            &by(),
            NewWorld {
                name: "ops".into(),
                description: Some("operations".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(
        rt.worlds()
            .await
            .unwrap()
            .iter()
            .map(|w| w.name.as_str())
            .collect::<Vec<_>>(),
        vec!["lab", "ops"]
    );
    let renamed = rt
        .update_world(
            &by(),
            other.id,
            WorldChanges {
                name: Some("ops-2".into()),
                description: None,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!((renamed.name.as_str(), renamed.version), ("ops-2", 2));
    assert!(rt.find_world("ops").await.is_err());
    let err = rt
        .update_world(
            &by(),
            other.id,
            WorldChanges {
                name: Some("lab".into()),
                description: None,
                ..Default::default()
            },
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), "name_taken");

    let new_agent = |name: &str| NewAgent {
        name: name.into(),
        llm: llm_settings(&h.llm),
        system_prompt: String::new(),
        tools: Some(vec!["read_*".into()]),
        max_steps: Some(5),
    };
    let a = rt
        .create_agent(&by(), other.id, new_agent("scout"))
        .await
        .unwrap();
    assert_eq!(
        rt.create_agent(&by(), other.id, new_agent("scout"))
            .await
            .unwrap_err()
            .code(),
        "name_taken"
    );
    rt.create_agent(&by(), h.world.id, new_agent("scout"))
        .await
        .unwrap();
    let changed = rt
        .update_agent(
            &by(),
            other.id,
            a.id,
            AgentChanges {
                system_prompt: Some("Look.".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(
        (changed.system_prompt.as_str(), changed.max_steps),
        ("Look.", 5)
    );
    let chat = rt
        .create_chat(
            &by(),
            other.id,
            NewChat {
                agent: "scout".into(),
                title: Some("first".into()),
            },
        )
        .await
        .unwrap();
    assert_eq!(rt.chats(other.id).await.unwrap(), vec![chat.clone()]);
    assert_eq!(
        rt.delete_agent(&by(), other.id, a.id)
            .await
            .unwrap_err()
            .code(),
        "agent_in_use"
    );
    rt.delete_chat(&by(), other.id, chat.id).await.unwrap();
    rt.delete_agent(&by(), other.id, a.id).await.unwrap();
    assert!(rt.agents(other.id).await.unwrap().is_empty());
    rt.delete_world(&by(), other.id).await.unwrap();
    assert_eq!(rt.worlds().await.unwrap().len(), 1);
    assert_eq!(rt.world(other.id).await.unwrap_err().code(), "not_found");
}

#[tokio::test]
async fn bad_input_names_the_field() {
    let h = Harness::new("", vec![]).await;
    let rt = &h.rt;
    let cases = [
        (
            rt.create_world(
                &by(),
                NewWorld {
                    name: "no spaces".into(),
                    description: None,
                    ..Default::default()
                },
            )
            .await
            .unwrap_err(),
            "name",
        ),
        (
            rt.create_world(
                &by(),
                NewWorld {
                    name: String::new(),
                    description: None,
                    ..Default::default()
                },
            )
            .await
            .unwrap_err(),
            "name",
        ),
        (
            rt.create_agent(
                &by(),
                h.world.id,
                NewAgent {
                    name: "x".into(),
                    llm: holdpoint_protocol::LlmSettings {
                        base_url: "localhost:1".into(),
                        ..llm_settings(&h.llm)
                    },
                    system_prompt: String::new(),
                    tools: None,
                    max_steps: None,
                },
            )
            .await
            .unwrap_err(),
            "llm.base_url",
        ),
        (
            rt.create_agent(
                &by(),
                h.world.id,
                NewAgent {
                    name: "x".into(),
                    llm: llm_settings(&h.llm),
                    system_prompt: String::new(),
                    tools: None,
                    max_steps: Some(0),
                },
            )
            .await
            .unwrap_err(),
            "max_steps",
        ),
        (
            rt.create_agent(
                &by(),
                h.world.id,
                NewAgent {
                    name: "x".into(),
                    llm: llm_settings(&h.llm),
                    system_prompt: String::new(),
                    tools: Some(vec!["a[".into()]),
                    max_steps: None,
                },
            )
            .await
            .unwrap_err(),
            "tools[0]",
        ),
        (
            rt.create_chat(
                &by(),
                h.world.id,
                NewChat {
                    agent: "nobody".into(),
                    title: None,
                },
            )
            .await
            .unwrap_err(),
            "",
        ),
        (
            rt.send_message(&by(), h.world.id, h.chat.id, "  ")
                .await
                .unwrap_err(),
            "text",
        ),
    ];
    for (err, field) in cases {
        match &err {
            holdpoint_agent::RuntimeError::Invalid { error } => {
                assert_eq!(error.field, field, "{err}")
            }
            holdpoint_agent::RuntimeError::NotFound { .. } => assert_eq!(field, "", "{err}"),
            other => panic!("{other:?}"),
        }
    }
}

#[tokio::test]
async fn a_busy_chat_cannot_be_deleted_or_handed_to_another_agent() {
    let h = Harness::new(
        "",
        vec![Step::Delay(
            std::time::Duration::from_secs(2),
            Box::new(Step::text("slow")),
        )],
    )
    .await;
    let turn = h.send("hi").await;
    assert_eq!(
        h.rt.delete_chat(&by(), h.world.id, h.chat.id)
            .await
            .unwrap_err()
            .code(),
        "turn_in_progress"
    );
    assert_eq!(
        h.rt.send_message(&by(), h.world.id, h.chat.id, "more")
            .await
            .unwrap_err()
            .code(),
        "turn_in_progress"
    );
    // The running turn keeps its agent; a new title is fine meanwhile.
    h.rt.create_agent(&by(), h.world.id, another_agent(&h, "scout"))
        .await
        .unwrap();
    let handover = ChatChanges {
        title: None,
        agent: Some("scout".into()),
    };
    let err =
        h.rt.update_chat(&by(), h.world.id, h.chat.id, handover.clone())
            .await;
    assert_eq!(err.unwrap_err().code(), "turn_in_progress");
    let renamed = ChatChanges {
        title: Some("renamed".into()),
        agent: None,
    };
    let chat =
        h.rt.update_chat(&by(), h.world.id, h.chat.id, renamed)
            .await
            .unwrap();
    assert_eq!((chat.title.as_str(), chat.agent), ("renamed", h.agent.id));
    let mut events = h.events().await;
    h.rt.cancel_turn(&by(), h.world.id, turn.id).await.unwrap();
    let _ = &mut events;
    // Once the turn is over, the chat can change hands.
    let chat =
        h.rt.update_chat(&by(), h.world.id, h.chat.id, handover)
            .await
            .unwrap();
    assert_ne!(chat.agent, h.agent.id);
    h.rt.delete_chat(&by(), h.world.id, h.chat.id)
        .await
        .unwrap();
}

/// Listings read every page: an agent used only by a chat past the first thousand is still
/// in use.
#[tokio::test]
async fn more_chats_than_a_page_are_all_counted() {
    let h = Harness::new("", vec![]).await;
    h.rt.create_agent(&by(), h.world.id, another_agent(&h, "late"))
        .await
        .unwrap();
    let chat = |agent: &str| NewChat {
        agent: agent.into(),
        title: None,
    };
    for _ in 0..1000 {
        h.rt.create_chat(&by(), h.world.id, chat(&h.agent.name))
            .await
            .unwrap();
    }
    let last =
        h.rt.create_chat(&by(), h.world.id, chat("late"))
            .await
            .unwrap();
    let chats = h.rt.chats(h.world.id).await.unwrap();
    assert_eq!(chats.len(), 1002);
    assert_eq!(chats.last().map(|c| c.id), Some(last.id));
    let refused =
        h.rt.delete_agent(&by(), h.world.id, last.agent)
            .await
            .unwrap_err();
    assert_eq!(refused.code(), "agent_in_use");
}

/// A second agent for the harness's world, on the same scripted LLM.
fn another_agent(h: &Harness, name: &str) -> NewAgent {
    NewAgent {
        name: name.into(),
        llm: llm_settings(&h.llm),
        system_prompt: String::new(),
        tools: None,
        max_steps: None,
    }
}
