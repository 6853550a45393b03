//! `GET /api/v1/events`: committed events as server-sent events, resumable.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future as _;
use std::io::Write as _;
use std::pin::Pin;
use std::sync::{Arc, LazyLock, Weak};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures_util::{Stream, stream};
use holdpoint_core::store::EventFilter;
use holdpoint_core::{Engine, EventStream, Scope};
use holdpoint_protocol::{ErrorBody, Event, EventPayload, HoldId, StreamParams};
use parking_lot::Mutex;
use tokio::time::Sleep;
use tokio_util::sync::CancellationToken;

use crate::app::App;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::extract::Params;
use crate::limits::Slot;

/// Live events. An agent's credential gets only the events of the holds raised under its
/// name. Each SSE message has `id` (the event's position), `event` (its type) and
/// `data` (the event as JSON). Reconnecting with `Last-Event-ID` replays exactly what was
/// missed. On an idle stream a comment line is sent as a heartbeat every `server.heartbeat`
/// (15 seconds by default), which keeps proxies from closing it. A reader that accepts nothing
/// for `server.send_timeout` (30 seconds by default) while events wait for it is disconnected;
/// it resumes with `Last-Event-ID`.
#[utoipa::path(get, path = "/api/v1/events", tag = "events", params(StreamParams, ("Last-Event-ID" = Option<u64>, Header)),
    responses((status = 200, description = "A stream of server-sent events: each message's `data` is one `Event` (#/components/schemas/Event) as JSON, its `id` the event's position and its `event` the event's type; the body as a whole is the stream's text, not one JSON value", content_type = "text/event-stream", body = String),
        (status = 400, body = ErrorBody),
        (status = 429, description = "This credential has limits.streams_per_token streams open, or made too many requests (limits.requests_per_second); Retry-After says when to try again", body = ErrorBody),
        (status = 503, description = "This server has limits.streams streams open (agents: nine tenths of it), or the storage is unavailable; Retry-After says when to try again, for the former", body = ErrorBody)))]
pub async fn stream(
    State(app): State<App>,
    caller: Caller,
    headers: HeaderMap,
    Params(q): Params<StreamParams>,
) -> Result<Response, ApiError> {
    if q.chat.is_some() && q.world.is_none() {
        return Err(ApiError::param(
            "chat",
            "filtering by chat needs a world: add world=ID_OR_NAME",
        ));
    }
    let world = match (&q.world, caller.world) {
        (Some(w), _) => Some(app.world(&caller, w).await?.id.to_string()),
        (None, w) => w.map(|w| w.to_string()),
    };
    // A value that is not a position is refused, whatever its bytes: ignoring it would start
    // the stream from now, and what the client missed would be lost without a word.
    let (after, named) = match headers.get("last-event-id") {
        Some(v) => (
            Some(
                v.to_str()
                    .ok()
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .ok_or_else(|| {
                        ApiError::param("Last-Event-ID", "must be an event's position (a number)")
                    })?,
            ),
            "Last-Event-ID",
        ),
        None => (super::position(q.after)?, "after"),
    };
    // A position the log has not reached would silently skip what comes until it does (a
    // client that kept its position across a restore from backup, say).
    if let Some(after) = after {
        let head = app.store().audit_head().await?.map_or(0, |h| h.seq);
        if after > head {
            return Err(ApiError::param(
                named,
                format!("{after} is beyond the newest event ({head}); reconnect without it"),
            ));
        }
    }
    // Taken last, once the request is known to be good; given back when the stream ends.
    let slot = app.limiter().stream(&caller)?;
    let events = app
        .engine()
        .events(
            after,
            EventFilter {
                world,
                chat: q.chat,
                hold: None,
            },
        )
        .await?;
    let shutdown = app.shutdown().clone();
    let raised = caller.is_agent().then(|| Raised {
        name: caller.principal.name.clone(),
        known: HashMap::new(),
    });
    let state = Streaming {
        events,
        shutdown,
        _slot: slot,
        raised,
        caller,
        engine: app.engine().clone(),
    };
    let body = stream::unfold(state, |mut s| async move {
        let next = loop {
            let next = tokio::select! {
                () = s.shutdown.cancelled() => return None,
                e = s.events.next() => e.ok()?,
            };
            let own = match &mut s.raised {
                Some(raised) => raised.sees(&s.engine, &next).await,
                None => true,
            };
            if own && s.caller.sees(&next) {
                break next;
            }
        };
        Some((frame(&next), s))
    });
    let every = app.config().heartbeat;
    let body = Heartbeats {
        inner: Box::pin(body),
        beat: Box::pin(tokio::time::sleep(every)),
        every,
    };
    Ok((
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        Body::from_stream(body),
    )
        .into_response())
}

/// What one stream carries from one event to the next.
struct Streaming {
    events: EventStream,
    shutdown: CancellationToken,
    /// Its place under `limits.streams`, given back when the stream is dropped.
    _slot: Slot,
    raised: Option<Raised>,
    caller: Caller,
    engine: Engine,
}

/// A stream's frames, with a heartbeat whenever it has had nothing to send for `every` (as
/// axum's `KeepAlive` does). The frames' stream is polled, never dropped, while a heartbeat is
/// sent: a page being read from the log for it carries on.
struct Heartbeats<S> {
    inner: Pin<Box<S>>,
    beat: Pin<Box<Sleep>>,
    every: Duration,
}

impl<S: Stream<Item = Bytes>> Stream for Heartbeats<S> {
    type Item = Result<Bytes, Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        let next = match this.inner.as_mut().poll_next(cx) {
            Poll::Ready(Some(frame)) => frame,
            Poll::Ready(None) => return Poll::Ready(None),
            Poll::Pending => {
                ready!(this.beat.as_mut().poll(cx));
                Bytes::from_static(HEARTBEAT)
            }
        };
        let at = tokio::time::Instant::now() + this.every;
        this.beat.as_mut().reset(at);
        Poll::Ready(Some(Ok(next)))
    }
}

/// A comment line: what a heartbeat is (as axum's `KeepAlive` sends it).
const HEARTBEAT: &[u8] = b":\n\n";

/// Frames of the newest events, shared by every stream that sends them. A live event reaches
/// every stream as the same `Arc` (the store's broadcast), and with thousands of streams,
/// encoding it once for each was most of what a stream cost per event; here the first stream
/// to send it encodes it and the others clone the bytes. A slot is found by position and kept
/// by identity: it holds a `Weak` of the event it was made from, which keeps that allocation
/// from being reused, so a frame is only ever handed out for the very event it encodes (even
/// with several servers in one process, whose positions repeat). Few slots are needed, as the
/// streams that keep up send each event within moments of each other; bounded, as frames can
/// be large.
static FRAMES: LazyLock<[Mutex<Option<Cached>>; SLOTS]> =
    LazyLock::new(|| std::array::from_fn(|_| Mutex::new(None)));

const SLOTS: usize = 64;

struct Cached {
    event: Weak<Event>,
    frame: Bytes,
}

/// The SSE message of `event`: `id` its position, `event` its type, `data` it as JSON (one
/// line: JSON as serde writes it has no raw newline).
fn frame(event: &Arc<Event>) -> Bytes {
    // An event read from the log for one stream that was catching up is not shared: encoding
    // it here leaves the slots to the live events.
    if Arc::strong_count(event) == 1 {
        return encode(event);
    }
    let mut slot = FRAMES[(event.seq % SLOTS as u64) as usize].lock();
    if let Some(cached) = &*slot
        && std::ptr::eq(cached.event.as_ptr(), Arc::as_ptr(event))
    {
        return cached.frame.clone();
    }
    // Encoded under the slot's lock, so that the streams woken together by one event wait for
    // one encoding rather than each making its own.
    let frame = encode(event);
    *slot = Some(Cached {
        event: Arc::downgrade(event),
        frame: frame.clone(),
    });
    frame
}

fn encode(event: &Event) -> Bytes {
    let mut out = Vec::with_capacity(256);
    let _ = write!(
        out,
        "id: {}\nevent: {}\ndata: ",
        event.seq,
        event.payload.type_name()
    );
    if serde_json::to_writer(&mut out, event).is_err() {
        return Bytes::from_static(b": an event could not be encoded\n\n");
    }
    out.extend_from_slice(b"\n\n");
    Bytes::from(out)
}

/// What an agent's credential sees of the log: the events of the holds raised under its name.
struct Raised {
    name: String,
    /// Whether each hold met so far was raised under `name`.
    known: HashMap<HoldId, bool>,
}

impl Raised {
    /// Holds remembered at most; past it the memory starts again (and reads what it needs).
    const KNOWN: usize = 10_000;

    async fn sees(&mut self, engine: &Engine, event: &Event) -> bool {
        let Some(id) = event.hold else {
            return false;
        };
        let own = match (&event.payload, self.known.get(&id)) {
            (EventPayload::HoldCreated { hold }, _) => hold.requested_by == self.name,
            (_, Some(own)) => return *own,
            // A hold raised before this stream's first event.
            _ => engine
                .hold(id, &Scope::any())
                .await
                .is_ok_and(|h| h.requested_by == self.name),
        };
        if self.known.len() >= Self::KNOWN {
            self.known.clear();
        }
        self.known.insert(id, own);
        own
    }
}
