mod a2a;
mod a2a_sdk;
mod abandoned;
mod access;
mod audit_log;
mod audit_state;
mod browser;
mod catalog;
mod channels;
mod channels_timing;
mod client;
mod events;
mod external;
mod fanout;
mod hold_file;
mod housekeeping;
mod limits;
mod mcp_in_process;
mod ops;
mod policies;
mod postgres;
mod refusals;
pub(crate) mod remote_agents;
mod remote_holdpoint;
mod remote_kagent;
mod revocation;
mod slack;
mod turns;
mod ui;
mod ui_wire;
mod via;
mod webhooks;
mod wire;
mod world_mcp;
mod world_routes;

use std::time::Duration;

use holdpoint_server::{Server, Settings};
pub use holdpoint_test_support::http::{Api, Reply};
use reqwest::Method;
use serde_json::{Value, json};
use tempfile::TempDir;

/// A server on a fresh data directory, listening on a free loopback port.
pub struct TestServer {
    pub server: Server,
    /// The admin.
    pub api: Api,
    /// Kept so the data directory lives as long as the server.
    _dir: TempDir,
}

/// Every call asks a person, except what these rules say.
pub const ASK_ALL: &str = "mode = \"manual\"\n";

impl TestServer {
    pub async fn start() -> Self {
        Self::with(ASK_ALL, |_| {}).await
    }

    /// With a policy, and settings adjusted by `tweak`.
    pub async fn with(policy: &str, tweak: impl FnOnce(&mut Settings)) -> Self {
        let dir = tempfile::tempdir().unwrap();
        Self::on(dir, policy, tweak).await
    }

    /// On `dir`, which may hold an earlier server's data.
    pub async fn on(dir: TempDir, policy: &str, tweak: impl FnOnce(&mut Settings)) -> Self {
        let policy_file = dir.path().join("policy.toml");
        std::fs::write(&policy_file, policy).unwrap();
        let mut settings = Settings::default();
        settings.server.bind = "127.0.0.1:0".parse().unwrap();
        settings.policy.file = Some(policy_file);
        settings.webhooks.backoff = Duration::from_millis(20);
        settings.webhooks.timeout = Duration::from_secs(5);
        settings.llm.retries = 1;
        settings.llm.connect_timeout = Duration::from_secs(2);
        tweak(&mut settings);
        let server = Server::start(dir.path(), &settings).await.unwrap();
        let api = Api::new(&server.url(), server.admin_token());
        TestServer {
            server,
            api,
            _dir: dir,
        }
    }

    /// A new token's secret.
    pub async fn token(&self, name: &str, role: &str, world: Option<&str>) -> String {
        let body = self
            .api
            .post(
                "/api/v1/tokens",
                json!({"name": name, "role": role, "world": world}),
            )
            .await
            .expect(201);
        body["token"].as_str().unwrap().to_owned()
    }

    /// A client for a new caller.
    pub async fn caller(&self, name: &str, role: &str, world: Option<&str>) -> Api {
        self.api.as_token(&self.token(name, role, world).await)
    }

    pub async fn world(&self, name: &str) -> Value {
        self.api
            .post("/api/v1/worlds", json!({"name": name}))
            .await
            .expect(201)
    }
}

/// A world `lab` with an agent `helper` on the LLM at `base_url`, and a chat with it (titled
/// `title`, if given); returns the chat's id.
pub async fn lab_chat(t: &TestServer, base_url: &str, title: Option<&str>) -> String {
    t.world("lab").await;
    t.api
        .post(
            "/api/v1/worlds/lab/agents",
            json!({"name": "helper", "llm": {"base_url": base_url, "model": "scripted"}}),
        )
        .await
        .expect(201);
    let chat = t
        .api
        .post(
            "/api/v1/worlds/lab/chats",
            json!({"agent": "helper", "title": title}),
        )
        .await
        .expect(201);
    chat["id"].as_str().unwrap().to_owned()
}

/// A question for `POST …/holds`.
pub fn question(text: &str, options: &[&str]) -> Value {
    let options: Vec<Value> = options
        .iter()
        .map(|o| json!({"id": o, "label": o}))
        .collect();
    json!({"kind": "question", "question": text, "options": options})
}

/// An approval for `POST …/holds`.
pub fn approval(tool: &str, arguments: Value) -> Value {
    json!({"kind": "approval", "tool": tool, "arguments": arguments})
}

/// Raises holds as `agent` in `world`; returns the gate's response.
pub async fn raise(agent: &Api, world: &str, items: Vec<Value>) -> Value {
    agent
        .post(
            &format!("/api/v1/worlds/{world}/holds"),
            json!({"items": items}),
        )
        .await
        .expect(201)
}

/// `person` answers the question `hold` with `option`.
pub async fn answer(person: &Api, hold: &str, option: &str) -> Reply {
    person
        .post(
            &format!("/api/v1/holds/{hold}/decision"),
            json!({"action": "answer", "options": [option]}),
        )
        .await
}

/// The id of the `i`th hold a gate response raised.
pub fn held(response: &Value, i: usize) -> String {
    response["results"][i]["hold"]["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// Signs a browser in; returns its cookie header and CSRF token.
pub async fn browser(t: &TestServer, token: &str) -> (String, String) {
    let reply = t
        .api
        .anonymous()
        .get(&format!("/login?token={token}"))
        .await;
    assert_eq!(reply.status, 303, "{}", reply.text);
    assert_eq!(reply.headers.get("location").unwrap(), "/");
    let set = reply
        .headers
        .get("set-cookie")
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(set.contains(attribute), "{set}");
    }
    let cookie = set.split(';').next().unwrap().to_owned();
    let api = t.api.anonymous();
    let session = api
        .send(
            api.request(Method::GET, "/api/v1/session")
                .header("cookie", &cookie),
        )
        .await
        .expect(200);
    (cookie, session["csrf_token"].as_str().unwrap().to_owned())
}

/// The audit events after `after`, as the admin reads them.
pub async fn audit_after(t: &TestServer, after: u64) -> Vec<Value> {
    t.api
        .get(&format!("/api/v1/audit/events?after={after}&limit=1000"))
        .await
        .expect(200)["events"]
        .as_array()
        .unwrap()
        .clone()
}

/// The position of the last event in the log.
pub async fn last_seq(t: &TestServer) -> u64 {
    t.server
        .app()
        .store()
        .audit_head()
        .await
        .unwrap()
        .map_or(0, |h| h.seq)
}

/// The live streams the server counts now.
pub async fn live_streams(t: &TestServer) -> u64 {
    let text = t.api.get("/metrics").await.text;
    text.lines()
        .find_map(|l| l.strip_prefix("holdpoint_live_streams "))
        .unwrap()
        .parse()
        .unwrap()
}

/// Waits until the server counts `n` live streams.
pub async fn streams_become(t: &TestServer, n: u64) {
    holdpoint_test_support::eventually(|| async move {
        match live_streams(t).await {
            now if now == n => Ok(()),
            now => Err(format!("{now} live streams, not {n}")),
        }
    })
    .await
}
