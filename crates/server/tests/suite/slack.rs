//! Slack notices of holds against a local server speaking the Slack Web API's shapes
//! (`auth.test`, `chat.postMessage`, `chat.update`, `views.open`, and a `response_url`),
//! which records every call; interaction requests signed as Slack signs them are sent to the
//! server: buttons decide as the member's mapped approver via slack, once, and only when
//! signed, fresh and mapped; deny with a reason goes through a modal; the message is updated
//! in place when the hold is decided anywhere; a Slack down is retried.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use hmac::{Hmac, KeyInit, Mac};
use holdpoint_server::Settings;
use holdpoint_server::channels::ChannelSettings;
use holdpoint_server::channels::route::Route;
use holdpoint_server::channels::slack::SlackSettings;
use holdpoint_test_support::{PATIENCE, eventually};
use parking_lot::Mutex;
use serde_json::{Value, json};
use sha2::Sha256;

use super::channels::{lab, status};
use super::{ASK_ALL, Api, TestServer, approval, held, question, raise};

/// The member mapped to alice; another one mapped to no one.
const ALICE: &str = "U024BE7LH";
const MALLORY: &str = "U0MALLORY";

/// Variables every test process run by cargo has: the bot token and the signing secret are
/// read from the environment, and a test may not change its own environment.
const TOKEN_ENV: &str = "CARGO_PKG_NAME";
const SECRET_ENV: &str = "CARGO_MANIFEST_DIR";

fn env(var: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| panic!("${var} is not set: run the tests with cargo"))
}

/// The local Slack: every Web API call it was made, by method.
#[derive(Clone, Default)]
struct Fake {
    calls: Arc<Mutex<Vec<(String, Value)>>>,
    /// While set, every call answers 503.
    down: Arc<AtomicBool>,
    /// While set, `auth.test` answers `invalid_auth`.
    refuse_token: Arc<AtomicBool>,
}

struct Slack {
    fake: Fake,
    /// The Web API's base URL.
    api: String,
    /// The base of `response_url`s.
    respond: String,
}

async fn web_api(
    State(fake): State<Fake>,
    Path(method): Path<String>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    if fake.down.load(Ordering::SeqCst) {
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    }
    let bearer = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if bearer != format!("Bearer {}", env(TOKEN_ENV)) {
        return Json(json!({"ok": false, "error": "not_authed"})).into_response();
    }
    let answer = match method.as_str() {
        "auth.test" if fake.refuse_token.load(Ordering::SeqCst) => {
            json!({"ok": false, "error": "invalid_auth"})
        }
        "auth.test" => json!({"ok": true, "user": "holdpoint", "team": "Lab"}),
        "chat.postMessage" => {
            let n = fake
                .calls
                .lock()
                .iter()
                .filter(|(m, _)| m == "chat.postMessage")
                .count();
            // A member's messages go to the bot's direct conversation with them.
            let to = body["channel"].as_str().unwrap_or_default();
            let channel = to
                .strip_prefix('U')
                .map_or(to.to_owned(), |rest| format!("D{rest}"));
            json!({"ok": true, "channel": channel, "ts": format!("1800000000.{n:06}")})
        }
        "chat.update" | "views.open" => json!({"ok": true}),
        _ => json!({"ok": false, "error": "unknown_method"}),
    };
    fake.calls.lock().push((method, body));
    Json(answer).into_response()
}

async fn response_url(State(fake): State<Fake>, Json(body): Json<Value>) -> StatusCode {
    fake.calls.lock().push(("response_url".into(), body));
    StatusCode::OK
}

impl Slack {
    async fn start() -> Slack {
        let fake = Fake::default();
        let app = axum::Router::new()
            .route("/api/{method}", axum::routing::post(web_api))
            .route("/respond", axum::routing::post(response_url))
            .with_state(fake.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        Slack {
            fake,
            api: format!("http://{addr}/api"),
            respond: format!("http://{addr}/respond"),
        }
    }

    fn calls(&self, method: &str) -> Vec<Value> {
        self.fake
            .calls
            .lock()
            .iter()
            .filter(|(m, _)| m == method)
            .map(|(_, b)| b.clone())
            .collect()
    }

    /// The `n`th call of `method` (from 1), once it was made.
    async fn nth(&self, method: &str, n: usize) -> Value {
        eventually(|| async {
            let calls = self.calls(method);
            calls
                .get(n - 1)
                .cloned()
                .ok_or_else(|| format!("{} {method} calls so far: {calls:?}", calls.len()))
        })
        .await
    }
}

/// Slack to the local server; holds of world `lab` are posted to alice's member.
fn slack_to(api: &str) -> impl FnOnce(&mut Settings) {
    let api = api.to_owned();
    move |s: &mut Settings| {
        s.channels = ChannelSettings {
            slack: Some(SlackSettings {
                bot_token_env: TOKEN_ENV.into(),
                signing_secret_env: SECRET_ENV.into(),
                api_url: api,
                users: [(ALICE.to_owned(), "alice".to_owned())].into(),
                attempts: 50,
                backoff: Duration::from_millis(100),
                timeout: Duration::from_secs(5),
            }),
            routes: vec![Route {
                world: Some("lab".into()),
                slack: vec![ALICE.into()],
                ..Route::default()
            }],
            ..ChannelSettings::default()
        };
    }
}

fn now_secs() -> i64 {
    i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs(),
    )
    .unwrap()
}

/// Sends `payload` to the server as Slack would, signed at `at` (Unix seconds) with `secret`.
async fn interact(api: &Api, payload: &Value, at: i64, secret: &str) -> (u16, String) {
    let body = form_urlencoded::Serializer::new(String::new())
        .append_pair("payload", &payload.to_string())
        .finish();
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(format!("v0:{at}:{body}").as_bytes());
    let hex: String = mac
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let r = api
        .anonymous()
        .request(reqwest::Method::POST, "/slack/interactions")
        .header("content-type", "application/x-www-form-urlencoded")
        .header("x-slack-request-timestamp", at.to_string())
        .header("x-slack-signature", format!("v0={hex}"))
        .body(body)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

/// A press by `user` of the button of `message` whose action id ends in `decision`.
fn press(slack: &Slack, message: &Value, posted: &Value, user: &str, decision: &str) -> Value {
    let button = button(message, decision);
    json!({
        "type": "block_actions",
        "user": {"id": user},
        "trigger_id": "trigger-1",
        "response_url": slack.respond,
        "container": {"type": "message", "channel_id": posted["channel"], "message_ts": posted["ts"]},
        "actions": [{"action_id": button["action_id"], "value": button["value"], "type": "button"}],
    })
}

fn button(message: &Value, decision: &str) -> Value {
    buttons(message)
        .into_iter()
        .find(|b| b["action_id"] == format!("holdpoint:{decision}"))
        .unwrap_or_else(|| panic!("no {decision} button in {message}"))
}

fn buttons(message: &Value) -> Vec<Value> {
    message["blocks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["type"] == "actions")
        .flat_map(|b| b["elements"].as_array().unwrap().clone())
        .collect()
}

/// Where the server put the message it posted: the fake's answer to the `n`th post.
fn posted(n: usize, message: &Value) -> Value {
    let to = message["channel"].as_str().unwrap();
    json!({"channel": format!("D{}", &to[1..]), "ts": format!("1800000000.{:06}", n)})
}

async fn notices(t: &TestServer, hold: &str) -> Vec<Value> {
    t.api
        .get(&format!("/api/v1/holds/{hold}/notices"))
        .await
        .expect(200)["items"]
        .as_array()
        .unwrap()
        .clone()
}

async fn decided_events(t: &TestServer, hold: &str) -> Vec<Value> {
    let detail = t
        .api
        .get(&format!("/api/v1/holds/{hold}"))
        .await
        .expect(200);
    detail["history"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["payload"]["type"] == "hold.decided")
        .cloned()
        .collect()
}

/// The update of the message `posted`, once one was made.
async fn updated(slack: &Slack, posted: &Value) -> Value {
    eventually(|| async {
        let updates = slack.calls("chat.update");
        updates
            .iter()
            .find(|u| u["channel"] == posted["channel"] && u["ts"] == posted["ts"])
            .cloned()
            .ok_or_else(|| format!("no update of {posted} yet: {updates:?}"))
    })
    .await
}

#[tokio::test]
async fn a_press_in_slack_approves_as_the_mapped_approver_once_and_the_message_says_so() {
    let slack = Slack::start().await;
    let t = TestServer::with(ASK_ALL, slack_to(&slack.api)).await;
    assert_eq!(slack.calls("auth.test").len(), 1);
    let bot = lab(&t).await;
    let hold = held(
        &raise(
            &bot,
            "lab",
            vec![approval(
                "shell_cmd",
                json!({"command": "echo '<!channel> <@U0BOSS> <http://evil|click>' && ls ```"}),
            )],
        )
        .await,
        0,
    );

    let message = slack.nth("chat.postMessage", 1).await;
    assert_eq!(message["channel"], ALICE);
    let shown = message["blocks"].to_string();
    assert!(shown.contains("shell_cmd"), "{shown}");
    // The agent's text mentions no one and links nowhere: Slack's control characters are
    // escaped, and the code block cannot be closed early.
    assert!(shown.contains("&lt;!channel&gt;"), "{shown}");
    assert!(shown.contains("&lt;http://evil|click&gt;"), "{shown}");
    assert!(shown.contains("&amp;&amp; ls"), "{shown}");
    assert!(
        !shown.contains("<!channel>") && !shown.contains("<@U0BOSS>"),
        "{shown}"
    );
    assert!(shown.contains("*World:*\\nlab"), "{shown}");
    assert!(shown.contains("*At the deadline:*\\ndenied"), "{shown}");
    let ids: Vec<Value> = buttons(&message)
        .iter()
        .map(|b| b["action_id"].clone())
        .collect();
    assert_eq!(
        ids,
        [
            "holdpoint:approve_once",
            "holdpoint:deny",
            "holdpoint:deny_with_reason"
        ]
    );
    let value: Value =
        serde_json::from_str(button(&message, "approve_once")["value"].as_str().unwrap()).unwrap();
    assert_eq!(value["hold"], hold.as_str());
    assert_eq!(value["decision"], "approve_once");
    assert_eq!(value["digest"].as_str().map(str::len), Some(64));
    let posted = posted(0, &message);

    // The agent waits while alice presses Approve, twice in a row.
    let waiting = {
        let bot = bot.clone();
        let hold = hold.clone();
        tokio::spawn(async move {
            bot.get(&format!("/api/v1/holds/{hold}/wait?timeout=30s"))
                .await
                .expect(200)
        })
    };
    let approve = press(&slack, &message, &posted, ALICE, "approve_once");
    let secret = env(SECRET_ENV);
    let (first, second) = tokio::join!(
        interact(&t.api, &approve, now_secs(), &secret),
        interact(&t.api, &approve, now_secs(), &secret)
    );
    assert_eq!((first.0, second.0), (200, 200), "{first:?} {second:?}");
    let waited = tokio::time::timeout(PATIENCE, waiting)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(waited["hold"]["status"], "approved", "{waited}");
    assert_eq!(waited["hold"]["outcome"]["decided_by"], json!(["alice"]));
    let decided = decided_events(&t, &hold).await;
    assert_eq!(decided.len(), 1, "decided once: {decided:?}");
    assert_eq!(
        decided[0]["actor"],
        json!({"source": "person", "name": "alice", "role": "approver", "via": "slack"})
    );
    // The second press is told the hold was already decided.
    let told = slack.nth("response_url", 1).await;
    assert_eq!(told["response_type"], "ephemeral");
    assert!(
        told["text"]
            .as_str()
            .unwrap()
            .contains("already decided: Approved by alice"),
        "{told}"
    );

    // The message is updated in place: what was decided, by whom, and no buttons.
    let update = updated(&slack, &posted).await;
    assert!(
        update["text"]
            .as_str()
            .unwrap()
            .contains("Approved by alice at "),
        "{update}"
    );
    assert!(update["blocks"].to_string().contains("UTC"), "{update}");
    assert!(buttons(&update).is_empty(), "{update}");

    // The notice is listed with its message.
    let listed = notices(&t, &hold).await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["channel"], "slack");
    assert_eq!(listed[0]["recipient"], ALICE);
    assert_eq!(listed[0]["decides_as"], "alice");
    assert_eq!(listed[0]["status"], "delivered");
    assert_eq!(listed[0]["message"], posted);
    assert_eq!(slack.calls("chat.postMessage").len(), 1);
}

#[tokio::test]
async fn forged_stale_or_unmapped_presses_decide_nothing() {
    let slack = Slack::start().await;
    let t = TestServer::with(ASK_ALL, slack_to(&slack.api)).await;
    let bot = lab(&t).await;
    let hold = held(
        &raise(
            &bot,
            "lab",
            vec![approval("shell_cmd", json!({"command": "ls"}))],
        )
        .await,
        0,
    );
    let message = slack.nth("chat.postMessage", 1).await;
    let approve = press(
        &slack,
        &message,
        &posted(0, &message),
        ALICE,
        "approve_once",
    );
    let secret = env(SECRET_ENV);

    // Signed with another secret.
    let (code, body) = interact(&t.api, &approve, now_secs(), "not the secret").await;
    assert_eq!(code, 401, "{body}");
    assert!(body.contains("X-Slack-Signature"), "{body}");
    // Signed 6 minutes ago: a replay.
    let (code, body) = interact(&t.api, &approve, now_secs() - 360, &secret).await;
    assert_eq!(code, 401, "{body}");
    assert!(body.contains("5 minutes"), "{body}");
    // Unsigned.
    let r = t
        .api
        .anonymous()
        .request(reqwest::Method::POST, "/slack/interactions")
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("payload={approve}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    assert_eq!(status(&t, &hold).await, "pending");

    // Signed and fresh, by a member mapped to no approver: told so, only them.
    let mallory = press(
        &slack,
        &message,
        &posted(0, &message),
        MALLORY,
        "approve_once",
    );
    let (code, body) = interact(&t.api, &mallory, now_secs(), &secret).await;
    assert_eq!(code, 200, "{body}");
    let told = slack.nth("response_url", 1).await;
    assert_eq!(told["response_type"], "ephemeral");
    assert!(
        told["text"].as_str().unwrap().contains("may not decide"),
        "{told}"
    );
    assert_eq!(status(&t, &hold).await, "pending");
    // A button naming other arguments than the hold's.
    let mut other = approve.clone();
    let mut value: Value =
        serde_json::from_str(other["actions"][0]["value"].as_str().unwrap()).unwrap();
    value["digest"] = json!("0".repeat(64));
    other["actions"][0]["value"] = json!(value.to_string());
    let (code, _) = interact(&t.api, &other, now_secs(), &secret).await;
    assert_eq!(code, 200);
    let told = slack.nth("response_url", 2).await;
    assert!(
        told["text"].as_str().unwrap().contains("not the ones"),
        "{told}"
    );
    assert_eq!(status(&t, &hold).await, "pending");
    assert!(decided_events(&t, &hold).await.is_empty());
    assert!(slack.calls("chat.update").is_empty());
}

#[tokio::test]
async fn deny_with_a_reason_opens_a_modal_whose_submission_denies() {
    let slack = Slack::start().await;
    let t = TestServer::with(ASK_ALL, slack_to(&slack.api)).await;
    let bot = lab(&t).await;
    let hold = held(
        &raise(
            &bot,
            "lab",
            vec![approval("shell_cmd", json!({"command": "rm -rf /"}))],
        )
        .await,
        0,
    );
    let message = slack.nth("chat.postMessage", 1).await;
    let posted = posted(0, &message);
    let secret = env(SECRET_ENV);
    let press = press(&slack, &message, &posted, ALICE, "deny_with_reason");
    let (code, body) = interact(&t.api, &press, now_secs(), &secret).await;
    assert_eq!(code, 200, "{body}");
    let opened = slack.nth("views.open", 1).await;
    assert_eq!(opened["trigger_id"], "trigger-1");
    assert_eq!(opened["view"]["type"], "modal");
    assert_eq!(status(&t, &hold).await, "pending");

    let submission = |user: &str| {
        json!({
            "type": "view_submission",
            "user": {"id": user},
            "view": {
                "callback_id": opened["view"]["callback_id"],
                "private_metadata": opened["view"]["private_metadata"],
                "state": {"values": {"reason": {"reason": {"type": "plain_text_input",
                    "value": "not on the production host"}}}},
            },
        })
    };
    // Mallory's submission is refused in the modal.
    let (code, body) = interact(&t.api, &submission(MALLORY), now_secs(), &secret).await;
    assert_eq!(code, 200);
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["response_action"], "errors", "{answer}");
    assert_eq!(status(&t, &hold).await, "pending");

    let (code, body) = interact(&t.api, &submission(ALICE), now_secs(), &secret).await;
    assert_eq!(code, 200, "{body}");
    assert!(body.is_empty(), "an empty answer closes the modal: {body}");
    let detail = t
        .api
        .get(&format!("/api/v1/holds/{hold}"))
        .await
        .expect(200);
    assert_eq!(detail["hold"]["status"], "denied");
    assert_eq!(
        detail["hold"]["outcome"]["reason"],
        "not on the production host"
    );
    assert_eq!(detail["hold"]["outcome"]["decided_by"], json!(["alice"]));
    assert_eq!(decided_events(&t, &hold).await[0]["actor"]["via"], "slack");
    let update = updated(&slack, &posted).await;
    assert!(
        update["text"]
            .as_str()
            .unwrap()
            .contains("Denied by alice at "),
        "{update}"
    );
    assert!(
        update["blocks"]
            .to_string()
            .contains("not on the production host"),
        "{update}"
    );
}

#[tokio::test]
async fn a_hold_decided_elsewhere_updates_its_message_and_a_question_offers_its_options() {
    let slack = Slack::start().await;
    let t = TestServer::with(ASK_ALL, slack_to(&slack.api)).await;
    let bot = lab(&t).await;
    let hold = held(
        &raise(&bot, "lab", vec![question("Deploy now?", &["yes", "no"])]).await,
        0,
    );
    let message = slack.nth("chat.postMessage", 1).await;
    assert!(
        message["blocks"].to_string().contains("Deploy now?"),
        "{message}"
    );
    let ids: Vec<Value> = buttons(&message)
        .iter()
        .map(|b| b["action_id"].clone())
        .collect();
    assert_eq!(ids, ["holdpoint:answer:yes", "holdpoint:answer:no"]);
    // Answered through the API, not Slack.
    super::answer(&t.api, &hold, "no").await.expect(200);
    let update = updated(&slack, &posted(0, &message)).await;
    assert!(
        update["text"].as_str().unwrap().contains("Answered by "),
        "{update}"
    );
    assert!(buttons(&update).is_empty(), "{update}");
}

#[tokio::test]
async fn a_slack_down_is_retried_with_the_failures_listed_then_the_message_is_posted() {
    let slack = Slack::start().await;
    slack.fake.down.store(true, Ordering::SeqCst);
    // Slack out of reach at the start is a warning, not a failure to start.
    let t = TestServer::with(ASK_ALL, slack_to(&slack.api)).await;
    let bot = lab(&t).await;
    let hold = held(
        &raise(
            &bot,
            "lab",
            vec![approval("shell_cmd", json!({"command": "ls"}))],
        )
        .await,
        0,
    );
    let failing = eventually(|| async {
        let n = notices(&t, &hold).await;
        (n.len() == 1 && n[0]["attempts"].as_u64() >= Some(2))
            .then(|| n[0].clone())
            .ok_or_else(|| format!("no failed attempts yet: {n:?}"))
    })
    .await;
    assert_eq!(failing["status"], "pending", "{failing}");
    assert!(
        failing["last_error"].as_str().unwrap().contains("503"),
        "{failing}"
    );
    slack.fake.down.store(false, Ordering::SeqCst);
    let delivered = eventually(|| async {
        let n = notices(&t, &hold).await;
        (n[0]["status"] == "delivered")
            .then(|| n[0].clone())
            .ok_or_else(|| format!("not delivered yet: {n:?}"))
    })
    .await;
    assert_eq!(delivered.get("last_error"), None, "{delivered}");
    assert!(delivered["message"]["ts"].is_string(), "{delivered}");
    assert_eq!(slack.calls("chat.postMessage").len(), 1);
}

#[tokio::test]
async fn a_bot_token_slack_refuses_stops_the_start() {
    let slack = Slack::start().await;
    slack.fake.refuse_token.store(true, Ordering::SeqCst);
    let dir = tempfile::tempdir().unwrap();
    let mut settings = Settings::default();
    settings.server.bind = "127.0.0.1:0".parse().unwrap();
    slack_to(&slack.api)(&mut settings);
    let Err(e) = holdpoint_server::Server::start(dir.path(), &settings).await else {
        panic!("started with a refused token");
    };
    let e = e.to_string();
    assert!(
        e.contains("channels.slack.bot_token_env") && e.contains("invalid_auth"),
        "{e}"
    );
}

#[tokio::test]
async fn a_message_posted_before_a_restart_is_updated_when_its_hold_is_decided_after() {
    let slack = Slack::start().await;
    let dir = tempfile::tempdir().unwrap();
    let t = TestServer::on(dir, ASK_ALL, slack_to(&slack.api)).await;
    let bot = lab(&t).await;
    let hold = held(
        &raise(
            &bot,
            "lab",
            vec![approval("shell_cmd", json!({"command": "ls"}))],
        )
        .await,
        0,
    );
    let message = slack.nth("chat.postMessage", 1).await;
    eventually(|| async {
        let n = notices(&t, &hold).await;
        (n[0]["status"] == "delivered")
            .then_some(())
            .ok_or_else(|| format!("not delivered yet: {n:?}"))
    })
    .await;
    let TestServer {
        server, _dir: dir, ..
    } = t;
    server.stop().await.unwrap();

    let t = TestServer::on(dir, ASK_ALL, slack_to(&slack.api)).await;
    t.api
        .post(
            &format!("/api/v1/holds/{hold}/decision"),
            json!({"action": "deny", "reason": "not today"}),
        )
        .await
        .expect(200);
    let update = updated(&slack, &posted(0, &message)).await;
    let text = update["text"].as_str().unwrap();
    assert!(
        text.contains("Denied by ") && text.contains("not today"),
        "{update}"
    );
    assert!(buttons(&update).is_empty(), "{update}");
    // Posted once, before the restart only.
    assert_eq!(slack.calls("chat.postMessage").len(), 1);
}

#[tokio::test]
async fn a_reminder_and_the_last_notice_reach_slack_too_and_their_buttons_decide() {
    let slack = Slack::start().await;
    // Reminded a second after it is raised; the last notice a second after that.
    let policy = "mode = \"manual\"\ndefault_deadline = \"60s\"\nremind_before = \"59s\"\n";
    let with_last = |s: &mut Settings| {
        slack_to(&slack.api)(s);
        s.channels.routes[0].last_notice = Some("58s".into());
    };
    let t = TestServer::with(policy, with_last).await;
    let bot = lab(&t).await;
    let hold = held(
        &raise(
            &bot,
            "lab",
            vec![approval("shell_cmd", json!({"command": "make release"}))],
        )
        .await,
        0,
    );
    let first = slack.nth("chat.postMessage", 1).await;
    assert!(
        !first["text"].as_str().unwrap().starts_with("Reminder"),
        "{first}"
    );
    let later = [
        slack.nth("chat.postMessage", 2).await,
        slack.nth("chat.postMessage", 3).await,
    ];
    let said: Vec<&str> = later
        .iter()
        .map(|m| m["blocks"][0]["text"]["text"].as_str().unwrap())
        .collect();
    assert!(
        said.iter().any(|s| s.starts_with("*Reminder: ")),
        "{said:?}"
    );
    assert!(
        said.iter()
            .any(|s| s.starts_with("*Last notice: ") && s.contains("will be denied")),
        "{said:?}"
    );
    for m in &later {
        assert_eq!(m["channel"], ALICE);
    }
    let listed = notices(&t, &hold).await;
    let mut purposes: Vec<&str> = listed
        .iter()
        .map(|n| n["purpose"].as_str().unwrap())
        .collect();
    purposes.sort_unstable();
    assert_eq!(purposes, ["first", "last", "reminder"], "{listed:?}");
    assert!(
        listed.iter().all(|n| n["decides_as"] == "alice"),
        "{listed:?}"
    );
    // The last message's button decides, as alice.
    let approve = press(
        &slack,
        &later[1],
        &posted(2, &later[1]),
        ALICE,
        "approve_once",
    );
    let (code, _) = interact(&t.api, &approve, now_secs(), &env(SECRET_ENV)).await;
    assert_eq!(code, 200);
    assert_eq!(status(&t, &hold).await, "approved");
}
