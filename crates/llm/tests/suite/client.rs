use std::collections::BTreeMap;
use std::time::Duration;

use holdpoint_llm::{ChatRequest, LlmClient, LlmError, Timeouts, ToolSpec};
use holdpoint_protocol::{LlmSettings, Message, MessageRole, Timestamp, ToolCall};
use holdpoint_test_support::llm::{ScriptedLlm, Step, call};
use pretty_assertions::assert_eq;
use serde_json::json;

fn settings(llm: &ScriptedLlm) -> LlmSettings {
    LlmSettings {
        base_url: llm.base_url(),
        model: "test-model".into(),
        api_key_env: None,
        headers: BTreeMap::new(),
        temperature: None,
    }
}

fn client() -> LlmClient {
    LlmClient::new(Timeouts {
        connect: Duration::from_secs(2),
        first_byte: Duration::from_secs(5),
        idle: Duration::from_millis(300),
        retries: 2,
        backoff: Duration::from_millis(10),
    })
    .unwrap()
}

fn user(text: &str) -> Vec<Message> {
    vec![Message {
        role: MessageRole::User,
        content: Some(text.into()),
        tool_calls: vec![],
        tool_call_id: None,
        turn: None,
        at: Timestamp::EPOCH,
    }]
}

async fn complete(s: &LlmSettings) -> (Result<holdpoint_llm::Completion, LlmError>, Vec<String>) {
    let mut pieces = Vec::new();
    let messages = user("hi");
    let tools = [ToolSpec {
        name: "read_file".into(),
        description: "Read a file".into(),
        parameters: json!({"type": "object"}),
    }];
    let req = ChatRequest {
        settings: s,
        system: "Be brief.",
        messages: &messages,
        tools: &tools,
    };
    let result = client()
        .complete(req, &mut |t: &str| pieces.push(t.to_owned()))
        .await;
    (result, pieces)
}

#[tokio::test]
async fn streams_text_and_sends_what_the_agent_configured() {
    let llm = ScriptedLlm::start(vec![Step::Text(vec![
        "Hel".into(),
        "lo, ".into(),
        "world".into(),
    ])])
    .await;
    let mut s = settings(&llm);
    s.api_key_env = Some("HOME".into());
    s.headers.insert("X-Title".into(), "holdpoint-test".into());
    s.temperature = Some(0.25);
    let (result, pieces) = complete(&s).await;
    let c = result.unwrap();
    assert_eq!(c.text, "Hello, world");
    assert_eq!(pieces, vec!["Hel", "lo, ", "world"]);
    assert_eq!(c.finish_reason.as_deref(), Some("stop"));
    assert_eq!(c.usage.map(|u| u.prompt_tokens), Some(10));
    let req = &llm.requests()[0];
    assert_eq!(
        req.headers["authorization"],
        format!("Bearer {}", std::env::var("HOME").unwrap()).as_str()
    );
    assert_eq!(req.headers["x-title"], "holdpoint-test");
    assert_eq!(req.body["model"], "test-model");
    assert_eq!(req.body["stream"], true);
    assert_eq!(req.body["temperature"], 0.25);
    assert_eq!(
        req.messages(),
        vec![
            json!({"role": "system", "content": "Be brief."}),
            json!({"role": "user", "content": "hi"})
        ]
    );
    assert_eq!(req.body["tools"][0]["function"]["name"], "read_file");
}

#[tokio::test]
async fn accumulates_interleaved_tool_call_fragments() {
    let calls = vec![
        call(
            "call_a",
            "read_file",
            json!({"path": "notes/a long file name.txt"}),
        ),
        call(
            "call_b",
            "write_file",
            json!({"path": "b.txt", "content": "x".repeat(50)}),
        ),
    ];
    let llm = ScriptedLlm::start(vec![Step::Calls {
        text: Some("Let me look.".into()),
        calls: calls.clone(),
        fragments: 7,
    }])
    .await;
    let (result, _) = complete(&settings(&llm)).await;
    let c = result.unwrap();
    assert_eq!(c.text, "Let me look.");
    let expected: Vec<ToolCall> = calls
        .iter()
        .map(|c| ToolCall {
            id: c.id.clone(),
            name: c.name.clone(),
            arguments: c.arguments.clone(),
        })
        .collect();
    assert_eq!(c.tool_calls, expected);
}

#[tokio::test]
async fn sends_the_conversation_with_tool_calls_and_results() {
    let llm = ScriptedLlm::start(vec![Step::text("done")]).await;
    let s = settings(&llm);
    let at = Timestamp::EPOCH;
    let messages = vec![
        Message {
            role: MessageRole::User,
            content: Some("read a".into()),
            tool_calls: vec![],
            tool_call_id: None,
            turn: None,
            at,
        },
        Message {
            role: MessageRole::Assistant,
            content: None,
            tool_calls: vec![ToolCall {
                id: "c1".into(),
                name: "read_file".into(),
                arguments: "{\"path\":\"a\"}".into(),
            }],
            tool_call_id: None,
            turn: None,
            at,
        },
        Message {
            role: MessageRole::Tool,
            content: Some("{\"status\":\"executed\"}".into()),
            tool_calls: vec![],
            tool_call_id: Some("c1".into()),
            turn: None,
            at,
        },
    ];
    client()
        .complete(
            ChatRequest {
                settings: &s,
                system: "",
                messages: &messages,
                tools: &[],
            },
            &mut |_: &str| {},
        )
        .await
        .unwrap();
    let sent = llm.requests()[0].messages();
    assert_eq!(
        sent[1],
        json!({"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"a\"}"}}]})
    );
    assert_eq!(
        sent[2],
        json!({"role": "tool", "tool_call_id": "c1", "content": "{\"status\":\"executed\"}"})
    );
    assert!(
        llm.requests()[0].body.get("tools").is_none(),
        "no tools, no tools field"
    );
}

#[tokio::test]
async fn a_bad_key_is_not_retried_and_says_where_the_key_comes_from() {
    let llm = ScriptedLlm::start(vec![Step::Status(401, "invalid api key".into())]).await;
    let mut s = settings(&llm);
    s.api_key_env = Some("HOME".into());
    let (result, _) = complete(&s).await;
    let err = result.unwrap_err();
    assert!(
        matches!(err, LlmError::Unauthorized { status: 401, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("check the key in $HOME"), "{err}");
    assert_eq!(llm.requests().len(), 1);
}

#[tokio::test]
async fn a_missing_key_fails_before_any_request() {
    let llm = ScriptedLlm::start(vec![Step::text("never")]).await;
    let mut s = settings(&llm);
    s.api_key_env = Some("HOLDPOINT_TEST_KEY_THAT_IS_NOT_SET".into());
    let (result, _) = complete(&s).await;
    assert_eq!(
        result.unwrap_err(),
        LlmError::MissingApiKey {
            var: "HOLDPOINT_TEST_KEY_THAT_IS_NOT_SET".into()
        }
    );
    assert!(llm.requests().is_empty());
}

#[tokio::test]
async fn not_found_names_the_model() {
    let llm = ScriptedLlm::start(vec![Step::Status(404, "no such model".into())]).await;
    let err = complete(&settings(&llm)).await.0.unwrap_err();
    assert!(err.to_string().contains("\"test-model\""), "{err}");
}

#[tokio::test]
async fn server_errors_are_retried_then_reported() {
    let llm = ScriptedLlm::start(vec![
        Step::Status(500, "boom".into()),
        Step::Status(503, "busy".into()),
        Step::Status(500, "boom again".into()),
    ])
    .await;
    let err = complete(&settings(&llm)).await.0.unwrap_err();
    assert!(matches!(err, LlmError::Server { status: 500, .. }), "{err}");
    assert!(err.to_string().contains("boom again"));
    assert_eq!(llm.requests().len(), 3, "one attempt and two retries");
}

#[tokio::test]
async fn a_rate_limit_is_waited_out() {
    let llm = ScriptedLlm::start(vec![
        Step::Status(429, "slow down".into()),
        Step::text("fine"),
    ])
    .await;
    let (result, _) = complete(&settings(&llm)).await;
    assert_eq!(result.unwrap().text, "fine");
    assert_eq!(llm.requests().len(), 2);
}

#[tokio::test]
async fn broken_streams_fail_clearly_and_are_not_repeated() {
    for (step, expected) in [
        (Step::Malformed, "could not be read"),
        (Step::Stall, "stalled"),
        (Step::Hangup, "lost mid-answer"),
    ] {
        let llm = ScriptedLlm::start(vec![step, Step::text("must not be used")]).await;
        let (result, pieces) = complete(&settings(&llm)).await;
        let err = result.unwrap_err();
        assert!(err.to_string().contains(expected), "{err}");
        assert_eq!(
            llm.requests().len(),
            1,
            "{expected}: a half-streamed answer is not repeated"
        );
        assert!(!pieces.is_empty());
    }
}

#[tokio::test]
async fn an_unreachable_server_is_named() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let s = LlmSettings {
        base_url: format!("http://127.0.0.1:{port}/v1"),
        model: "m".into(),
        api_key_env: None,
        headers: BTreeMap::new(),
        temperature: None,
    };
    let err = complete(&s).await.0.unwrap_err();
    assert!(matches!(err, LlmError::Connect { .. }), "{err}");
    assert!(
        err.to_string().contains(&format!("127.0.0.1:{port}")),
        "{err}"
    );
    let s = LlmSettings {
        base_url: "localhost:11434".into(),
        ..s
    };
    assert!(matches!(
        complete(&s).await.0.unwrap_err(),
        LlmError::Settings { .. }
    ));
}

#[tokio::test]
async fn a_whole_json_answer_is_accepted() {
    let body = json!({"choices": [{"message": {"role": "assistant", "content": "plain"}, "finish_reason": "stop"}]});
    let llm = ScriptedLlm::start(vec![Step::Whole(body)]).await;
    assert_eq!(complete(&settings(&llm)).await.0.unwrap().text, "plain");
}

#[tokio::test]
async fn dropping_the_request_cancels_it() {
    let llm = ScriptedLlm::start(vec![Step::Stall]).await;
    let s = settings(&llm);
    let messages = user("hi");
    let req = ChatRequest {
        settings: &s,
        system: "",
        messages: &messages,
        tools: &[],
    };
    let slow = LlmClient::new(Timeouts {
        idle: Duration::from_secs(60),
        ..Timeouts::default()
    })
    .unwrap();
    let outcome = tokio::time::timeout(
        Duration::from_millis(200),
        slow.complete(req, &mut |_: &str| {}),
    )
    .await;
    assert!(outcome.is_err(), "still waiting when dropped");
    assert_eq!(llm.requests().len(), 1);
}
