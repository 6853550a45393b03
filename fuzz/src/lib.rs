//! What the fuzz targets share: a real server (SQLite in a temporary directory), driven in
//! process through its router, one request at a time.

use std::sync::OnceLock;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, Request, StatusCode, header};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

/// The answer to one request.
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    /// The body; `None` for a live event stream, which never ends.
    pub body: Option<Vec<u8>>,
}

impl Answer {
    pub fn json(&self) -> Option<Value> {
        serde_json::from_slice(self.body.as_deref()?).ok()
    }
}

/// One server for the whole run, with a world `w`, a token of each role and a pending hold.
pub struct Harness {
    runtime: tokio::runtime::Runtime,
    router: axum::Router,
    /// The `Host` the server answers to.
    pub host: String,
    pub admin: String,
    pub agent: String,
    pub approver: String,
    /// A hold raised at the start (the inputs may decide it).
    pub hold: String,
    server: holdpoint_server::Server,
    _dir: tempfile::TempDir,
}

fn fail(what: &str, e: impl std::fmt::Debug) -> ! {
    panic!("the fuzz server could not start: {what}: {e:?}")
}

/// The server, started on first use.
pub fn harness() -> &'static Harness {
    static HARNESS: OnceLock<Harness> = OnceLock::new();
    HARNESS.get_or_init(start)
}

fn start() -> Harness {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| fail("runtime", e));
    let dir = tempfile::tempdir().unwrap_or_else(|e| fail("data directory", e));
    let mut settings = holdpoint_server::Settings::default();
    settings.server.bind = ([127, 0, 0, 1], 0).into();
    // A long poll answers at once: a fuzzer cannot wait.
    settings.server.max_wait = Duration::from_millis(1);
    settings.llm.retries = 0;
    settings.llm.connect_timeout = Duration::from_millis(100);
    settings.webhooks.timeout = Duration::from_millis(100);
    // One admin sends every input as fast as the fuzzer makes them: a rate limit would
    // answer most of them 429 and probe nothing.
    settings.limits = holdpoint_server::config::LimitSettings::lifted();
    let server = runtime
        .block_on(holdpoint_server::Server::start(dir.path(), &settings))
        .unwrap_or_else(|e| fail("server", e));
    let admin = server
        .admin_token()
        .unwrap_or_else(|| fail("admin token", ()))
        .to_owned();
    let router = holdpoint_server::router(server.app().clone());
    let mut h = Harness {
        runtime,
        router,
        host: server.addr().to_string(),
        admin,
        agent: String::new(),
        approver: String::new(),
        hold: String::new(),
        server,
        _dir: dir,
    };
    h.setup();
    h
}

impl Harness {
    fn setup(&mut self) {
        let admin = self.admin.clone();
        self.call("POST", "/api/v1/worlds", &admin, json!({"name": "w"}));
        let token = |h: &Self, name: &str, role: &str, world: Option<&str>| {
            let body = json!({"name": name, "role": role, "world": world});
            h.call("POST", "/api/v1/tokens", &admin, body)["token"]
                .as_str()
                .unwrap_or_else(|| fail("token", name))
                .to_owned()
        };
        self.agent = token(self, "agent", "agent", Some("w"));
        self.approver = token(self, "alice", "approver", None);
        let items = json!({"items": [
            {"kind": "approval", "tool": "shell_cmd", "arguments": {"command": "ls"}}
        ]});
        let agent = self.agent.clone();
        let raised = self.call("POST", "/api/v1/worlds/w/holds", &agent, items);
        self.hold = raised["results"][0]["hold"]["id"]
            .as_str()
            .unwrap_or_else(|| fail("hold", &raised))
            .to_owned();
    }

    /// A setup request that must succeed.
    fn call(&self, method: &str, path: &str, token: &str, body: Value) -> Value {
        let request = Request::builder()
            .method(method)
            .uri(path)
            .header(header::HOST, &self.host)
            .header(header::AUTHORIZATION, format!("Bearer {token}"))
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body.to_string()))
            .unwrap_or_else(|e| fail(path, e));
        let answer = self.send(request);
        if !answer.status.is_success() {
            fail(path, &answer);
        }
        answer.json().unwrap_or(Value::Null)
    }

    /// Sends one request through the router and reads the whole answer (the head only of a
    /// live event stream).
    pub fn send(&self, request: Request<Body>) -> Answer {
        self.runtime.block_on(async {
            let response = match self.router.clone().oneshot(request).await {
                Ok(r) => r,
                Err(e) => match e {},
            };
            let (parts, body) = response.into_parts();
            let streaming = parts
                .headers
                .get(header::CONTENT_TYPE)
                .is_some_and(|t| t.as_bytes().starts_with(b"text/event-stream"));
            let body = if streaming {
                None
            } else {
                match body.collect().await {
                    Ok(b) => Some(b.to_bytes().to_vec()),
                    Err(e) => panic!("the body of a {} answer failed: {e}", parts.status),
                }
            };
            Answer {
                status: parts.status,
                headers: parts.headers,
                body,
            }
        })
    }

    /// The newest event's position.
    pub fn head(&self) -> u64 {
        let store = self.server.app().store().clone();
        match self.runtime.block_on(store.audit_head()) {
            Ok(head) => head.map_or(0, |h| h.seq),
            Err(e) => panic!("the store failed: {e}"),
        }
    }

    /// `{admin}`, `{agent}`, `{approver}`, `{hold}` and `{host}` in `text` replaced.
    pub fn fill(&self, text: &str) -> String {
        text.replace("{admin}", &self.admin)
            .replace("{agent}", &self.agent)
            .replace("{approver}", &self.approver)
            .replace("{hold}", &self.hold)
            .replace("{host}", &self.host)
    }

    /// A request with the admin's token and the server's `Host`, unless it names its own.
    pub fn defaults(&self, request: &mut Request<Body>) {
        let headers = request.headers_mut();
        if !headers.contains_key(header::HOST)
            && let Ok(host) = HeaderValue::from_str(&self.host)
        {
            headers.insert(header::HOST, host);
        }
        if !headers.contains_key(header::AUTHORIZATION)
            && let Ok(bearer) = HeaderValue::from_str(&format!("Bearer {}", self.admin))
        {
            headers.insert(header::AUTHORIZATION, bearer);
        }
    }
}

/// Checks what the API promises for any request: no 5xx (but a 503 that says when to come
/// back), and every error under `/api/` in the one error shape, with a code and a message.
pub fn check_answer(path: &str, answer: &Answer) {
    let status = answer.status;
    let retry_later = status == StatusCode::SERVICE_UNAVAILABLE
        && answer.headers.contains_key(header::RETRY_AFTER);
    assert!(
        !status.is_server_error() || retry_later,
        "{path}: {status} for a client's request: {:?}",
        answer.body.as_deref().map(String::from_utf8_lossy)
    );
    if status.is_client_error() && path.starts_with("/api/") {
        let body = answer.json().unwrap_or(Value::Null);
        let code = body["error"]["code"].as_str().unwrap_or_default();
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(
            !code.is_empty() && !message.is_empty(),
            "{path}: a {status} without the error shape: {:?}",
            answer.body.as_deref().map(String::from_utf8_lossy)
        );
    }
}
