//! `GET /api/v1/events`: committed events as server-sent events, resumable.

use std::collections::HashMap;
use std::convert::Infallible;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event as Sse, KeepAlive};
use axum::response::{IntoResponse, Response};
use futures_util::stream;
use holdpoint_core::store::EventFilter;
use holdpoint_core::{Engine, Scope};
use holdpoint_protocol::{ErrorBody, Event, EventPayload, HoldId, StreamParams};

use crate::app::App;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::extract::Params;

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
    let engine = app.engine().clone();
    let body = stream::unfold(
        (events, shutdown, slot, raised),
        move |(mut events, shutdown, slot, mut raised)| {
            let caller = caller.clone();
            let engine = engine.clone();
            async move {
                let next = loop {
                    let next = tokio::select! {
                        () = shutdown.cancelled() => return None,
                        e = events.next() => e.ok()?,
                    };
                    let own = match &mut raised {
                        Some(raised) => raised.sees(&engine, &next).await,
                        None => true,
                    };
                    if own && caller.sees(&next) {
                        break next;
                    }
                };
                let message = Sse::default()
                    .id(next.seq.to_string())
                    .event(next.payload.type_name())
                    .json_data(&*next)
                    .unwrap_or_else(|_| Sse::default().comment("an event could not be encoded"));
                Some((
                    Ok::<_, Infallible>(message),
                    (events, shutdown, slot, raised),
                ))
            }
        },
    );
    Ok(axum::response::Sse::new(body)
        .keep_alive(KeepAlive::new().interval(app.config().heartbeat))
        .into_response())
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
