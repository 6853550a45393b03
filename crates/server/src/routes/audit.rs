//! The audit log: reading it and verifying its chain.

use axum::Json;
use axum::extract::State;
use holdpoint_core::store::EventFilter;
use holdpoint_protocol::{AuditReport, ErrorBody, Event, EventsPage, EventsParams, Order};

use crate::app::App;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::extract::Params;

/// Store reads one request makes at most for the filters the store has no index for (`type`,
/// `actor`): a page then says where to go on (`next`) rather than scanning the whole log.
const READS: usize = 8;

/// A page of the event log, oldest first or newest first, by world, chat, hold, type and
/// actor (people only).
#[utoipa::path(get, path = "/api/v1/audit/events", tag = "audit", params(EventsParams),
    responses((status = 200, body = EventsPage), (status = 400, body = ErrorBody), (status = 403, body = ErrorBody)))]
pub async fn events(
    State(app): State<App>,
    caller: Caller,
    Params(q): Params<EventsParams>,
) -> Result<Json<EventsPage>, ApiError> {
    let world = match (&q.world, caller.world) {
        (Some(w), _) => Some(app.world(&caller, w).await?.id.to_string()),
        (None, w) => w.map(|w| w.to_string()),
    };
    let filter = EventFilter {
        world,
        chat: q.chat,
        hold: q.hold,
    };
    let newest = match q.order.unwrap_or_default() {
        Order::Oldest => false,
        Order::Newest => true,
        Order::Urgent => return Err(ApiError::param("order", "use oldest or newest")),
    };
    if !newest && q.before.is_some() {
        return Err(ApiError::param("before", "goes with order=newest"));
    }
    if newest && q.after.is_some() {
        return Err(ApiError::param(
            "after",
            "goes with order=oldest; use before",
        ));
    }
    let limit = super::page_size(q.limit, super::Listing::Log)?;
    let wanted = |e: &Event| {
        caller.sees(e)
            && q.event_type
                .as_deref()
                .is_none_or(|t| e.payload.type_name() == t)
            && q.actor
                .as_deref()
                .is_none_or(|a| e.actor.name.as_deref() == Some(a))
    };
    // What the store filters by (world, chat, hold) it reads through its indexes; the rest is
    // read a page at a time, up to READS pages, and `next` says where this request stopped.
    let mut position = if newest {
        super::position(q.before)?.unwrap_or(0)
    } else {
        super::position(q.after)?.unwrap_or(0)
    };
    let mut events = Vec::new();
    'reading: for _ in 0..READS {
        let page = if newest {
            let before = (position > 0).then_some(position);
            app.store().events_before(before, &filter, limit).await?
        } else {
            app.store().events(position, &filter, limit).await?
        };
        for e in &page.events {
            if events.len() == limit {
                // Full: the next page starts after the last event taken.
                position = events.last().map_or(position, |e: &Event| e.seq);
                break 'reading;
            }
            if wanted(e) {
                events.push((**e).clone());
            }
        }
        let end = page.events.len() < limit;
        position = page.scanned_to;
        if end || events.len() == limit {
            break;
        }
    }
    Ok(Json(EventsPage {
        next: position,
        events,
    }))
}

/// Walk the whole audit chain, then check that the holds (as raised, their status and
/// outcome) and grants the store serves are what the chain's events say (admins). `intact` is
/// false when the chain is broken or anything differs; `mismatches` names each hold or grant.
#[utoipa::path(get, path = "/api/v1/audit/verify", tag = "audit",
    responses((status = 200, body = AuditReport), (status = 403, body = ErrorBody)))]
pub async fn verify(State(app): State<App>) -> Result<Json<AuditReport>, ApiError> {
    let report = match app.engine().verify_audit().await? {
        Ok(r) => AuditReport {
            intact: r.state.mismatched == 0,
            events: r.events,
            head_seq: r.head.as_ref().map(|h| h.seq),
            head_hash: r.head.map(|h| h.hash),
            first_bad_event: None,
            reason: (r.state.mismatched > 0).then(|| {
                format!(
                    "the audit chain is intact, but {} of the holds, grants, messages and turns the store serves differ from what its events say",
                    r.state.mismatched
                )
            }),
            holds_checked: r.state.holds,
            grants_checked: r.state.grants,
            messages_checked: r.state.messages,
            turns_checked: r.state.turns,
            mismatches: r.state.mismatches,
            mismatched: r.state.mismatched,
        },
        Err(broken) => AuditReport {
            intact: false,
            events: 0,
            head_seq: None,
            head_hash: None,
            first_bad_event: Some(broken.seq),
            reason: Some(broken.reason),
            holds_checked: 0,
            grants_checked: 0,
            messages_checked: 0,
            turns_checked: 0,
            mismatches: Vec::new(),
            mismatched: 0,
        },
    };
    Ok(Json(report))
}
