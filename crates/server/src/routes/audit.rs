//! The audit log: reading it and verifying its chain.

use axum::Json;
use axum::extract::State;
use holdpoint_core::store::EventFilter;
use holdpoint_protocol::{AuditReport, ErrorBody, EventsPage, EventsParams};

use crate::app::App;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::extract::Params;

/// A page of the event log (people only).
#[utoipa::path(get, path = "/api/v1/audit/events", tag = "audit", params(EventsParams),
    responses((status = 200, body = EventsPage), (status = 403, body = ErrorBody)))]
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
    let page = app
        .store()
        .events(
            super::position(q.after)?.unwrap_or(0),
            &filter,
            super::page_size(q.limit, super::Listing::Log)?,
        )
        .await?;
    Ok(Json(EventsPage {
        next: page.scanned_to,
        events: page
            .events
            .iter()
            .filter(|e| caller.sees(e))
            .map(|e| (**e).clone())
            .collect(),
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
