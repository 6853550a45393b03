//! The gateway over MCP's streamable HTTP transport (the server's `/mcp/{world}`): sessions,
//! each with a [`Gateway`] of its own, owned by the credential that opened them.
//!
//! The SDK's service does the protocol (sessions, SSE streams, revisions). Around it, this
//! keeps who opened each session (another credential, or another world's endpoint, is
//! refused), withdraws the holds of a session deleted by its client, and treats the response
//! stream of a waiting call that closes before its answer as that call's client gone: its hold
//! is withdrawn, as on stdio when the client goes away. Messages are adapted for 2025-11-25's
//! tasks on their way, as on stdio (`wire`): each request's body, and each server-sent event
//! of a session's answers.

use std::collections::HashMap;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body::{Body, Frame, SizeHint};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, Limited};
use parking_lot::Mutex;
use rmcp::transport::streamable_http_server::session::local::{LocalSessionManager, SessionConfig};
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use crate::gateway::{Gateway, call_key};
use crate::holds::STOPPED;
use crate::wire::{self, Outbound};

/// The header that carries a session's id.
const SESSION_HEADER: &str = "mcp-session-id";

/// How long a session may go without a message before it is closed (and the holds of its
/// waiting calls withdrawn). Long, since a call may wait on a person for that long; a client
/// that went away without a word is noticed sooner by its streams closing.
const IDLE: Duration = Duration::from_secs(60 * 60);

/// How often an open stream carries an SSE comment, so a client that went away is noticed.
const KEEP_ALIVE: Duration = Duration::from_secs(5);

/// Why a request was not served.
#[derive(Debug, thiserror::Error)]
pub enum HttpRefusal {
    /// The session named in `Mcp-Session-Id` was opened by another credential, or at another
    /// world's endpoint.
    #[error(
        "this MCP session was opened by another credential or at another world's endpoint: open one with initialize"
    )]
    NotYours,
    /// The body is larger than the limit.
    #[error("the body is larger than {0} bytes")]
    TooLarge(usize),
    /// The body could not be read.
    #[error("the body could not be read: {0}")]
    Unreadable(String),
}

/// A session: who opened it, where, and the gateway serving it.
struct Session {
    owner: String,
    world: String,
    served: Served,
}

/// What serves a session: its gateway, and the adaptation of its messages to the client.
#[derive(Clone)]
struct Served {
    gateway: Gateway,
    outbound: Arc<Mutex<Outbound>>,
}

/// The HTTP endpoints of every world: their sessions. Cheap to clone.
#[derive(Clone)]
pub struct HttpGateway {
    inner: Arc<Inner>,
}

struct Inner {
    manager: Arc<LocalSessionManager>,
    config: StreamableHttpServerConfig,
    sessions: Mutex<HashMap<String, Session>>,
    /// Canceled when the server stops: each session's gateway is told (see
    /// [`Gateway::stopped_by`]).
    stop: CancellationToken,
}

impl HttpGateway {
    /// `max_body`: the largest message accepted; `stop`: ends every session (the server
    /// stops).
    pub fn new(max_body: usize, stop: CancellationToken) -> HttpGateway {
        let mut manager = LocalSessionManager::default();
        let mut session = SessionConfig::default();
        session.keep_alive = Some(IDLE);
        manager.session_config = session;
        // Host and Origin are the server's guard's to check, against its own names.
        let config = StreamableHttpServerConfig::default()
            .disable_allowed_hosts()
            .with_sse_keep_alive(Some(KEEP_ALIVE))
            .with_max_request_body_bytes(max_body)
            .with_cancellation_token(stop.clone());
        HttpGateway {
            inner: Arc::new(Inner {
                manager: Arc::new(manager),
                config,
                sessions: Mutex::default(),
                stop,
            }),
        }
    }

    /// Serves one request to `world`'s endpoint from `owner` (the caller's credential, as a
    /// key). `open` makes the gateway of a session this request opens.
    pub async fn handle<B>(
        &self,
        request: Request<B>,
        owner: &str,
        world: &str,
        open: impl Fn() -> Gateway + Send + Sync + 'static,
    ) -> Result<Response<McpBody>, HttpRefusal>
    where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let session_id = request
            .headers()
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        // A session this endpoint's caller opened, if the request names one.
        let session = match &session_id {
            Some(id) => self.session(id, owner, world)?,
            None => None,
        };
        // The session's adaptation; a request that opens one starts it afresh.
        let outbound = session
            .as_ref()
            .map_or_else(Arc::default, |s| s.outbound.clone());
        let session = session.map(|s| s.gateway);
        let (parts, body) = request.into_parts();
        let limit = self.inner.config.max_request_body_bytes;
        let body = Limited::new(body, limit)
            .collect()
            .await
            .map_err(|e| {
                if e.is::<http_body_util::LengthLimitError>() {
                    HttpRefusal::TooLarge(limit)
                } else {
                    HttpRefusal::Unreadable(e.to_string())
                }
            })?
            .to_bytes();
        let body = wire::inbound(&body).map_or(body, Bytes::from);
        if parts.method == Method::POST
            && let Err(unreadable) = wire::check(&body)
        {
            // Answered here: the SDK would answer with text, or an error without an id.
            return Ok(json_rpc_error(unreadable.answer));
        }
        let deleting = parts.method == Method::DELETE;
        let mut watch = None;
        if let (Some(gateway), Some(id)) = (&session, &session_id) {
            if parts.method == Method::DELETE {
                // The client ends its session: what it waits on is withdrawn now, not when
                // the SDK's drain of its calls times out.
                gateway.disconnect();
                self.forget(id);
            } else if let Some(key) = waiting_call(&parts.method, &body) {
                watch = Some(CallWatch {
                    token: gateway.watch(key.clone()),
                    gateway: gateway.clone(),
                    key,
                    ended: false,
                });
            }
        }
        let opened: Arc<Mutex<Option<Gateway>>> = Arc::default();
        let slot = opened.clone();
        let stop = self.inner.stop.clone();
        let service = StreamableHttpService::new(
            move || {
                let gateway = open().stopped_by(stop.clone());
                *slot.lock() = Some(gateway.clone());
                Ok(gateway)
            },
            self.inner.manager.clone(),
            self.inner.config.clone(),
        );
        let response = service
            .handle(Request::from_parts(parts, Full::new(body)))
            .await;
        let gateway = opened.lock().take();
        if session_id.is_none()
            && let Some(id) = response
                .headers()
                .get(SESSION_HEADER)
                .and_then(|v| v.to_str().ok())
            && let Some(gateway) = gateway
        {
            let served = Served {
                gateway,
                outbound: outbound.clone(),
            };
            self.opened(id, owner, world, served).await;
        }
        let (mut parts, body) = response.into_parts();
        if deleting && parts.status == StatusCode::ACCEPTED {
            // The session ended: there is nothing to accept later (the SDK's 202 reads as a
            // failure to clients that expect 200 or 204).
            parts.status = StatusCode::NO_CONTENT;
        }
        let body = McpBody {
            body,
            watch,
            outbound,
        };
        Ok(Response::from_parts(parts, body))
    }

    /// The gateway of session `id`, when `owner` opened it at `world`'s endpoint; `None` when
    /// there is no such session (the SDK answers 404).
    fn session(&self, id: &str, owner: &str, world: &str) -> Result<Option<Served>, HttpRefusal> {
        let sessions = self.inner.sessions.lock();
        match sessions.get(id) {
            Some(s) if s.owner == owner && s.world == world => Ok(Some(s.served.clone())),
            Some(_) => Err(HttpRefusal::NotYours),
            None => Ok(None),
        }
    }

    /// Records a session just opened, and forgets those the SDK has closed since (idle).
    async fn opened(&self, id: &str, owner: &str, world: &str, served: Served) {
        let live: Vec<String> = self
            .inner
            .manager
            .sessions
            .read()
            .await
            .keys()
            .map(|k| k.to_string())
            .collect();
        let mut sessions = self.inner.sessions.lock();
        sessions.retain(|k, s| {
            let keep = live.iter().any(|l| l == k);
            if !keep {
                s.served.gateway.disconnect();
            }
            keep
        });
        sessions.insert(
            id.to_owned(),
            Session {
                owner: owner.to_owned(),
                world: world.to_owned(),
                served,
            },
        );
    }

    /// The server stops: withdraws every hold a session's call still waits on, saying so.
    /// Each call's own task withdraws its hold too as it ends, but nothing waits for those
    /// tasks: this is awaited before the store closes.
    pub async fn stopped(&self) {
        let gateways: Vec<Gateway> = self
            .inner
            .sessions
            .lock()
            .values()
            .map(|s| s.served.gateway.clone())
            .collect();
        for gateway in gateways {
            gateway.withdraw_waiting(STOPPED).await;
        }
    }

    fn forget(&self, id: &str) {
        self.inner.sessions.lock().remove(id);
    }
}

/// A JSON-RPC error answering a body that is not one message of MCP: 400, as the
/// transport asks for input the server cannot accept.
fn json_rpc_error(answer: Vec<u8>) -> Response<McpBody> {
    let body = McpBody {
        body: Full::new(Bytes::from(answer)).boxed(),
        watch: None,
        outbound: Arc::default(),
    };
    let mut response = Response::new(body);
    *response.status_mut() = StatusCode::BAD_REQUEST;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}

/// The key of the call a POST body makes, when it is one request that can wait on a hold
/// (`tools/call`).
fn waiting_call(method: &Method, body: &[u8]) -> Option<String> {
    if method != Method::POST {
        return None;
    }
    let message: serde_json::Value = serde_json::from_slice(body).ok()?;
    if message.get("method")?.as_str()? != "tools/call" {
        return None;
    }
    call_key(message.get("id")?)
}

/// A call whose response stream is being sent: if the stream is dropped before its end (the
/// client closed the connection), the call's client is gone.
struct CallWatch {
    gateway: Gateway,
    key: String,
    token: CancellationToken,
    ended: bool,
}

impl Drop for CallWatch {
    fn drop(&mut self) {
        if !self.ended {
            self.token.cancel();
        }
        self.gateway.unwatch(&self.key);
    }
}

/// The body of a response of the MCP endpoint.
pub struct McpBody {
    body: BoxBody<Bytes, Infallible>,
    watch: Option<CallWatch>,
    /// The session's adaptation of its server-sent events.
    outbound: Arc<Mutex<Outbound>>,
}

impl McpBody {
    /// A frame of the answer (one server-sent event), adapted for the session's revision.
    fn adapt(&self, frame: Frame<Bytes>) -> Frame<Bytes> {
        let adapted = frame
            .data_ref()
            .and_then(|event| self.outbound.lock().adapt_event(event));
        match adapted {
            Some(event) => Frame::data(Bytes::from(event)),
            None => frame,
        }
    }
}

impl Body for McpBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.body).poll_frame(cx);
        let ended = matches!(polled, Poll::Ready(None)) || this.body.is_end_stream();
        if let (true, Some(watch)) = (ended, &mut this.watch) {
            watch.ended = true;
        }
        match polled {
            Poll::Ready(Some(Ok(frame))) => Poll::Ready(Some(Ok(this.adapt(frame)))),
            other => other,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
