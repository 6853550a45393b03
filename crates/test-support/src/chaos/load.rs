//! The steady load the crash loop keeps on the server, and what each client was told: agents
//! raising holds and waiting on them, people deciding them, chats whose turns run a tool that
//! appends a line to a file, and clients following the live stream. A request that gets no
//! answer (the server died) is not a failure; what was answered is written in the [`Ledger`].

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::{Notify, watch};

use crate::http::{Api, Method, Reply};
use crate::llm::{Recorded, Step, call};

/// The world the load runs in.
pub const WORLD: &str = "lab";
/// The tool of holds that people decide.
pub const DECIDED: &str = "deploy";
/// The tool of holds nobody decides: their deadline resolves them.
pub const EXPIRING: &str = "expire_me";
/// The deadline of [`EXPIRING`] holds.
pub const EXPIRY: Duration = Duration::from_secs(1);
/// The name of the approvers' token, which their decisions carry.
pub const APPROVER: &str = "approver";

/// Where the server is now: `None` while it is down.
#[derive(Clone)]
pub struct Target {
    url: watch::Receiver<Option<String>>,
}

impl Target {
    pub fn new() -> (watch::Sender<Option<String>>, Target) {
        let (tx, url) = watch::channel(None);
        (tx, Target { url })
    }

    /// The server's URL, once it is up.
    async fn url(&mut self) -> String {
        let url = self.url.wait_for(Option::is_some).await.unwrap();
        url.clone().unwrap()
    }

    /// A client of the server as it is now, as `token`.
    async fn api(&mut self, token: &str) -> Api {
        Api::new(&self.url().await, Some(token))
    }

    /// Sends the request `make` builds until the server answers it (a server that died
    /// before answering is asked again once it is back), or `None` once `stop` is set.
    async fn answer(
        &mut self,
        token: &str,
        stop: &AtomicBool,
        make: impl Fn(&Api) -> crate::http::RequestBuilder,
    ) -> Option<Reply> {
        loop {
            if stop.load(Ordering::SeqCst) {
                return None;
            }
            let api = self.api(token).await;
            if let Ok(reply) = api.try_send(make(&api)).await {
                return Some(reply);
            }
            // Down: wait for the next start (or a moment, if this one is still up).
            let _ = tokio::time::timeout(Duration::from_millis(50), self.url.changed()).await;
        }
    }
}

/// A hold whose raising was acknowledged.
#[derive(Clone, Debug)]
pub struct Raised {
    pub id: String,
    pub key: String,
    pub expiring: bool,
}

/// A decision answered 200.
#[derive(Clone, Debug)]
pub struct Decided {
    pub hold: String,
    /// `approve` or `deny`.
    pub action: String,
}

/// What one live-stream client received, in order, and how often it resumed.
#[derive(Clone, Debug, Default)]
pub struct Followed {
    /// Each message's id and the hold it names, if any.
    pub seen: Vec<(u64, Option<String>)>,
    /// The turns it saw start.
    pub turns: Vec<String>,
    /// Reconnections with `Last-Event-ID`.
    pub resumes: usize,
    /// Resumptions the server refused, with its answer.
    pub refused: Vec<String>,
}

/// What the clients were told.
#[derive(Default)]
pub struct Ledger {
    pub raised: Mutex<Vec<Raised>>,
    pub decided: Mutex<Vec<Decided>>,
    /// A hold's outcome as an agent waiting on it got it.
    pub waited: Mutex<Vec<(String, Value)>>,
    /// Turns whose message was acknowledged (202).
    pub turns: Mutex<Vec<String>>,
    pub followed: Mutex<Vec<Followed>>,
}

/// Moments worth killing the server at, as the clients see them.
#[derive(Default)]
pub struct Moments {
    /// A live-stream client received an event.
    pub event: Notify,
    /// A hold's raising was acknowledged.
    pub raised: Notify,
    /// A decision was acknowledged.
    pub decided: Notify,
}

/// What every worker shares.
#[derive(Clone)]
pub struct Load {
    pub target: Target,
    pub ledger: Arc<Ledger>,
    pub moments: Arc<Moments>,
    /// Set when the raising and chatting stop.
    pub quiet: Arc<AtomicBool>,
    /// Set when everything stops.
    pub stop: Arc<AtomicBool>,
}

/// An agent raising holds: a steady stream, one in four left to expire. A raise the server
/// did not answer is sent again with the same `Idempotency-Key`, so one request is one hold.
pub async fn raise(mut load: Load, token: String, name: String, mut rng: fastrand::Rng) {
    for n in 0.. {
        if load.quiet.load(Ordering::SeqCst) {
            return;
        }
        let expiring = rng.u8(..4) == 0;
        let item = if expiring {
            json!({"kind": "approval", "tool": EXPIRING, "arguments": {"n": n}, "deadline": format!("{}ms", EXPIRY.as_millis())})
        } else {
            json!({"kind": "approval", "tool": DECIDED, "arguments": {"n": n}})
        };
        let key = format!("{name}-{n}");
        let body = json!({"items": [item]});
        let Some(reply) = load
            .target
            .answer(&token, &load.stop, |api| {
                api.request(Method::POST, &format!("/api/v1/worlds/{WORLD}/holds"))
                    .header("Idempotency-Key", &key)
                    .json(&body)
            })
            .await
        else {
            return;
        };
        assert!(
            matches!(reply.status, 200 | 201),
            "raising a hold: {} {}",
            reply.status,
            reply.text
        );
        let id = reply.body["results"][0]["hold"]["id"]
            .as_str()
            .unwrap()
            .to_owned();
        load.ledger
            .raised
            .lock()
            .unwrap()
            .push(Raised { id, key, expiring });
        load.moments.raised.notify_waiters();
        tokio::time::sleep(Duration::from_millis(rng.u64(5..40))).await;
    }
}

/// A person deciding what is pending: holds of [`DECIDED`] approved or denied at random,
/// the turns' calls approved. Each decision answered 200 is acknowledged; one that got no
/// answer is found again if it is still pending.
pub async fn decide(mut load: Load, token: String, mut rng: fastrand::Rng) {
    loop {
        let Some(page) = load
            .target
            .answer(&token, &load.stop, |api| {
                api.request(Method::GET, "/api/v1/holds?limit=100&order=newest")
            })
            .await
        else {
            return;
        };
        let page = page.expect(200);
        let mut found = 0;
        for hold in page["items"].as_array().into_iter().flatten() {
            // Left alone: holds left to expire, and any question (the end's marker).
            let is_call = hold["chat"].is_string();
            if !(is_call || hold["spec"]["tool"] == DECIDED) {
                continue;
            }
            found += 1;
            let id = hold["id"].as_str().unwrap().to_owned();
            let action = if is_call || rng.u8(..3) > 0 {
                "approve"
            } else {
                "deny"
            };
            let api = load.target.api(&token).await;
            let request = api
                .request(Method::POST, &format!("/api/v1/holds/{id}/decision"))
                .json(&json!({"action": action}));
            let Ok(reply) = api.try_send(request).await else {
                continue;
            };
            match reply.status {
                200 => {
                    load.ledger.decided.lock().unwrap().push(Decided {
                        hold: id,
                        action: action.to_owned(),
                    });
                    load.moments.decided.notify_waiters();
                }
                // Decided already (by the other person, or by its deadline).
                409 => {}
                status => panic!("deciding {id}: {status} {}", reply.text),
            }
        }
        if found == 0 {
            if load.stop.load(Ordering::SeqCst) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// An agent waiting on holds it raised (long polls), recording each outcome it was given.
/// An agent's token sees only the holds raised under its `name` (their keys start with it).
pub async fn wait(mut load: Load, token: String, name: String, mut rng: fastrand::Rng) {
    let own = format!("{name}-");
    while !load.stop.load(Ordering::SeqCst) {
        let hold = {
            let raised = load.ledger.raised.lock().unwrap();
            let recent: Vec<&Raised> = raised
                .iter()
                .rev()
                .filter(|r| r.key.starts_with(&own))
                .take(20)
                .collect();
            (!recent.is_empty()).then(|| recent[rng.usize(..recent.len())].id.clone())
        };
        let Some(hold) = hold else {
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        };
        let api = load.target.api(&token).await;
        let path = format!("/api/v1/holds/{hold}/wait?timeout=3s");
        let Ok(reply) = api.try_send(api.request(Method::GET, &path)).await else {
            continue;
        };
        let body = reply.expect(200);
        if body["decided"] == true {
            let outcome = body["hold"]["outcome"].clone();
            load.ledger.waited.lock().unwrap().push((hold, outcome));
        }
    }
}

/// The scripted LLM's answer: a call of `shell_cmd` that appends the user's message (a tag
/// unique to the turn) to `effects` as a line and takes a moment more, so that the server is
/// killed mid-tool now and then; after the tool's result, a final text. The same request
/// gets the same answer, so a turn that asks again after a restart proposes the same call.
pub fn scripted(effects: PathBuf) -> impl Fn(&Recorded) -> Step + Send + Sync + 'static {
    move |request| {
        let messages = request.messages();
        let last = messages.last().cloned().unwrap_or(Value::Null);
        if last["role"] == "tool" {
            return Step::text("Done.");
        }
        let tag = last["content"].as_str().unwrap_or("untagged").to_owned();
        let command = format!("echo {tag} >> {} && sleep 0.1", effects.display());
        Step::calls(vec![call("c1", "shell_cmd", json!({"command": command}))])
    }
}

/// The tag a turn's call appends, read back from its command.
pub fn tag_of(command: &str) -> Option<&str> {
    command.strip_prefix("echo ")?.split_whitespace().next()
}

/// A person chatting: a message (with a tag unique to it) to the agent, and when its turn
/// has ended, the next; a new chat every few messages, so the conversation the LLM is sent
/// stays short. A message whose answer was lost may have started a turn the chat is now busy
/// with: the next message goes to a new chat (the log has the turn).
pub async fn chat(mut load: Load, token: String, name: String) {
    let mut chat: Option<String> = None;
    for n in 0.. {
        if load.quiet.load(Ordering::SeqCst) {
            return;
        }
        if n % 4 == 0 {
            chat = None;
        }
        let id = match chat.clone() {
            Some(id) => id,
            None => {
                let Some(reply) = load
                    .target
                    .answer(&token, &load.quiet, |api| {
                        api.request(Method::POST, &format!("/api/v1/worlds/{WORLD}/chats"))
                            .json(&json!({"agent": "helper"}))
                    })
                    .await
                else {
                    return;
                };
                let id = reply.expect(201)["id"].as_str().unwrap().to_owned();
                chat = Some(id.clone());
                id
            }
        };
        let api = load.target.api(&token).await;
        let request = api
            .request(
                Method::POST,
                &format!("/api/v1/worlds/{WORLD}/chats/{id}/messages"),
            )
            .json(&json!({"text": format!("{name}-{n}")}));
        let reply = match api.try_send(request).await {
            Ok(reply) => reply,
            Err(_) => {
                chat = None;
                continue;
            }
        };
        if reply.status == 409 {
            chat = None;
            continue;
        }
        let turn = reply.expect(202)["turn"].as_str().unwrap().to_owned();
        load.ledger.turns.lock().unwrap().push(turn.clone());
        ended(&mut load, &token, &turn).await;
    }
}

/// Waits until `turn` is no longer under way (or the load stops).
async fn ended(load: &mut Load, token: &str, turn: &str) {
    let path = format!("/api/v1/worlds/{WORLD}/turns/{turn}");
    while let Some(reply) = load
        .target
        .answer(token, &load.stop, |api| api.request(Method::GET, &path))
        .await
    {
        let status = reply.expect(200)["status"].clone();
        if !matches!(status.as_str(), Some("running" | "waiting")) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
}

/// A client following the live stream, resuming with `Last-Event-ID` after each restart.
pub async fn follow(mut load: Load, token: String, index: usize) {
    let mut last: Option<u64> = None;
    let record = |load: &Load, f: &dyn Fn(&mut Followed)| {
        f(&mut load.ledger.followed.lock().unwrap()[index]);
    };
    while !load.stop.load(Ordering::SeqCst) {
        let api = load.target.api(&token).await;
        let mut stream = match api.try_events("", last).await {
            Ok(stream) => stream,
            Err(crate::http::Refused::Unreachable(_)) => {
                let _ = tokio::time::timeout(Duration::from_millis(50), load.target.url.changed())
                    .await;
                continue;
            }
            Err(crate::http::Refused::Status(reply)) => {
                record(&load, &|f| f.refused.push(reply.text.clone()));
                return;
            }
        };
        if last.is_some() {
            record(&load, &|f| f.resumes += 1);
        }
        loop {
            match stream.read(Duration::from_millis(200)).await {
                Ok(Some(message)) => {
                    let Some(id) = message.id else { continue };
                    last = Some(id);
                    let hold = message.data["hold"].as_str().map(str::to_owned);
                    let turn = (message.event == "turn.started")
                        .then(|| message.data["payload"]["turn"].as_str().map(str::to_owned))
                        .flatten();
                    record(&load, &|f| {
                        f.seen.push((id, hold.clone()));
                        f.turns.extend(turn.clone());
                    });
                    load.moments.event.notify_waiters();
                }
                Ok(None) if load.stop.load(Ordering::SeqCst) => return,
                Ok(None) => {}
                Err(_) => break,
            }
        }
    }
}
