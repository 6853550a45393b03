//! Holds: listing, one hold with its history, deciding, waiting, raising and withdrawing.

use std::time::Duration;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use holdpoint_protocol::{
    ApplyDefault, BatchId, DecideBatchRequest, DecideBatchResult, DecideResult, Decision,
    ErrorBody, GateRequest, GateResponse, GateResult, Hold, HoldDetail, HoldId, HoldKind,
    HoldQuery, HoldRequest, HoldStatus, NewHolds, Order, Page, Role, SeenHold, StatusFilter,
    WaitResult, Withdraw,
};
use serde::Deserialize;

use crate::app::App;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::extract::{Body, Params, parse_value};

/// Filters for listing holds.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct HoldsQuery {
    /// A world, by id or name.
    world: Option<String>,
    /// A chat (needs `world`).
    chat: Option<String>,
    /// `pending` (the default: open holds), `resolved`, `any`, or one status (`approved`, …).
    status: Option<String>,
    kind: Option<HoldKind>,
    batch: Option<BatchId>,
    /// `oldest` (the default) or `newest` first.
    order: Option<Order>,
    /// The `next` of the previous page.
    cursor: Option<String>,
    /// At most 500; 50 by default.
    limit: Option<usize>,
}

fn status_filter(s: Option<&str>) -> Result<StatusFilter, ApiError> {
    Ok(match s {
        None | Some("pending" | "open") => StatusFilter::Open,
        Some("resolved") => StatusFilter::Resolved,
        Some("any" | "all") => StatusFilter::Any,
        Some(other) => StatusFilter::Is(HoldStatus::parse(other).ok_or_else(|| {
            ApiError::param("status", "use pending, resolved, any, or a status: pending, awaiting_confirm, approved, denied, answered, confirmed, canceled, timed_out")
        })?),
    })
}

/// List holds, oldest first; pending ones by default.
#[utoipa::path(get, path = "/api/v1/holds", tag = "holds", params(HoldsQuery),
    responses((status = 200, body = Page<Hold>), (status = 400, body = ErrorBody)))]
pub async fn list(
    State(app): State<App>,
    caller: Caller,
    Params(q): Params<HoldsQuery>,
) -> Result<Json<Page<Hold>>, ApiError> {
    let world = match (&q.world, caller.world) {
        (Some(w), _) => Some(app.world(&caller, w).await?.id.to_string()),
        (None, Some(w)) => Some(w.to_string()),
        (None, None) => None,
    };
    let query = HoldQuery {
        world,
        chat: q.chat,
        status: status_filter(q.status.as_deref())?,
        kind: q.kind,
        batch: q.batch,
        order: q.order.unwrap_or_default(),
        cursor: q.cursor,
        limit: q.limit.unwrap_or(0),
    };
    Ok(Json(app.engine().holds(&query).await?))
}

/// One hold and every event about it.
#[utoipa::path(get, path = "/api/v1/holds/{hold}", tag = "holds", params(("hold" = HoldId, Path)),
    responses((status = 200, body = HoldDetail), (status = 404, body = ErrorBody)))]
pub async fn get(
    State(app): State<App>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<HoldDetail>, ApiError> {
    let id = hold_id(&id)?;
    let scope = caller.scope();
    let hold = app.engine().hold(id, &scope).await?;
    let history = app
        .engine()
        .history(id, &scope)
        .await?
        .into_iter()
        .map(|e| (*e).clone())
        .collect();
    Ok(Json(HoldDetail { hold, history }))
}

pub(crate) fn hold_id(s: &str) -> Result<HoldId, ApiError> {
    s.parse().map_err(|_| ApiError::not_found("hold", s))
}

fn idempotency_key(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    headers
        .get("idempotency-key")
        .map(|v| {
            v.to_str()
                .map(str::to_owned)
                .map_err(|_| ApiError::field("Idempotency-Key", "must be visible ASCII"))
        })
        .transpose()
}

/// Decide a hold. The first valid decision wins; a later one gets 409 with the recorded
/// decision. Repeating a request with the same `Idempotency-Key` returns the first result.
#[utoipa::path(post, path = "/api/v1/holds/{hold}/decision", tag = "holds", request_body = Decision,
    params(("hold" = HoldId, Path), ("Idempotency-Key" = Option<String>, Header)),
    responses((status = 200, body = DecideResult), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, description = "Already decided (the recorded decision is in details.hold), or a conflict", body = ErrorBody),
        (status = 422, body = ErrorBody)))]
pub async fn decide(
    State(app): State<App>,
    caller: Caller,
    Path(id): Path<String>,
    headers: HeaderMap,
    Body(decision): Body<Decision>,
) -> Result<Json<DecideResult>, ApiError> {
    let id = hold_id(&id)?;
    let key = idempotency_key(&headers)?;
    Ok(Json(
        app.engine()
            .decide(
                &caller.principal,
                id,
                decision,
                &caller.scope(),
                key.as_deref(),
            )
            .await?,
    ))
}

/// Apply the fail-closed default, for a client that cannot ask anyone (no terminal): an
/// approval is denied; a question gets its default option, else the option `no`, else is
/// canceled. Recorded with source `default` and the caller's name; a person's role is needed,
/// as for any decision.
#[utoipa::path(post, path = "/api/v1/holds/{hold}/default", tag = "holds", request_body = ApplyDefault,
    params(("hold" = HoldId, Path), ("Idempotency-Key" = Option<String>, Header)),
    responses((status = 200, body = DecideResult), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, description = "Already decided (the recorded decision is in details.hold)", body = ErrorBody)))]
pub async fn decide_default(
    State(app): State<App>,
    caller: Caller,
    Path(id): Path<String>,
    headers: HeaderMap,
    Body(body): Body<ApplyDefault>,
) -> Result<Json<DecideResult>, ApiError> {
    let id = hold_id(&id)?;
    let key = idempotency_key(&headers)?;
    Ok(Json(
        app.engine()
            .decide_default(
                &caller.principal,
                id,
                body.reason,
                &caller.scope(),
                key.as_deref(),
            )
            .await?,
    ))
}

/// "Decide all": one decision for every approval of a batch, bound to the holds seen.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BatchDecision {
    /// The approvals of the batch as shown (ids and argument digests).
    seen: Vec<SeenHold>,
    /// `approve`, `deny` or `deny_stop`.
    decision: Decision,
}

/// "Decide all": one decision for every approval of a batch, bound to the ids and argument digests seen. If the batch differs from what was seen, nothing is decided (409).
#[utoipa::path(post, path = "/api/v1/batches/{batch}/decision", tag = "holds", request_body = BatchDecision,
    params(("batch" = BatchId, Path), ("Idempotency-Key" = Option<String>, Header)),
    responses((status = 200, body = DecideBatchResult), (status = 409, description = "The batch differs from what was seen", body = ErrorBody)))]
pub async fn decide_batch(
    State(app): State<App>,
    caller: Caller,
    Path(batch): Path<String>,
    headers: HeaderMap,
    Body(b): Body<BatchDecision>,
) -> Result<Json<DecideBatchResult>, ApiError> {
    let batch: BatchId = batch
        .parse()
        .map_err(|_| ApiError::not_found("batch", &batch))?;
    let key = idempotency_key(&headers)?;
    let req = DecideBatchRequest {
        batch,
        seen: b.seen,
        decision: b.decision,
    };
    Ok(Json(
        app.engine()
            .decide_batch(&caller.principal, req, &caller.scope(), key.as_deref())
            .await?,
    ))
}

/// How long to wait.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct WaitQuery {
    /// Such as `30s` (the default) or `2m`; at most the server's limit (2 minutes).
    timeout: Option<String>,
}

/// Wait until the hold is decided or the timeout passes (long polling). The hold keeps its
/// own deadline either way.
#[utoipa::path(get, path = "/api/v1/holds/{hold}/wait", tag = "holds", params(("hold" = HoldId, Path), WaitQuery),
    responses((status = 200, body = WaitResult), (status = 404, body = ErrorBody)))]
pub async fn wait(
    State(app): State<App>,
    caller: Caller,
    Path(id): Path<String>,
    Params(q): Params<WaitQuery>,
) -> Result<Json<WaitResult>, ApiError> {
    let id = hold_id(&id)?;
    let max = app.config().max_wait;
    let timeout = match q.timeout.as_deref() {
        None => Duration::from_secs(30).min(max),
        Some(t) => humantime::parse_duration(t)
            .ok()
            .filter(|d| *d <= max)
            .ok_or_else(|| {
                ApiError::param(
                    "timeout",
                    format!(
                        "a duration such as \"30s\", at most {}",
                        humantime::format_duration(max)
                    ),
                )
            })?,
    };
    let scope = caller.scope();
    tokio::select! {
        r = app.engine().wait(id, timeout, &scope) => { r?; }
        () = app.shutdown().cancelled() => {}
    }
    let hold = app.engine().hold(id, &scope).await?;
    Ok(Json(WaitResult {
        decided: hold.outcome.is_some(),
        hold,
    }))
}

/// Raise holds in a world, as an agent: approvals (policy decides first: allowed and denied
/// calls are answered at once) and questions. The holds of one request form one batch. A
/// malformed item raises nothing at all (422 naming it). Repeating a request with the same
/// `Idempotency-Key` raises nothing new and answers as the first time (keys are remembered for
/// `server.idempotency_retention`, 7 days by default).
#[utoipa::path(post, path = "/api/v1/worlds/{world}/holds", tag = "holds", request_body = NewHolds,
    params(("world" = String, Path), ("Idempotency-Key" = Option<String>, Header)),
    responses((status = 201, description = "Holds were raised", body = GateResponse), (status = 200, description = "Nothing needed asking", body = GateResponse),
        (status = 422, body = ErrorBody)))]
pub async fn create(
    State(app): State<App>,
    caller: Caller,
    Path(world): Path<String>,
    headers: HeaderMap,
    Body(new): Body<RawHolds>,
) -> Result<(StatusCode, Json<GateResponse>), ApiError> {
    caller.require(&[Role::Agent, Role::Admin])?;
    let world = app.world(&caller, &world).await?;
    let items = new
        .items
        .into_iter()
        .enumerate()
        .map(|(i, item)| hold_request(i, item))
        .collect::<Result<_, _>>()?;
    let req = GateRequest {
        world: world.id.to_string(),
        chat: new.chat,
        agent: None,
        items,
        idempotency_key: idempotency_key(&headers)?,
    };
    let response = app.engine().gate_all(&caller.principal, req).await?;
    let raised = response
        .results
        .iter()
        .any(|r| matches!(r, GateResult::Held { .. }));
    Ok((
        if raised {
            StatusCode::CREATED
        } else {
            StatusCode::OK
        },
        Json(response),
    ))
}

/// [`NewHolds`] as it arrives: each item is read on its own, so that an error names the
/// field inside it (serde loses the path inside an internally tagged enum).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawHolds {
    #[serde(default)]
    chat: Option<String>,
    items: Vec<serde_json::Value>,
}

fn hold_request(i: usize, mut item: serde_json::Value) -> Result<HoldRequest, ApiError> {
    let at = format!("items[{i}]");
    let kind = item.as_object_mut().and_then(|o| o.remove("kind"));
    match kind.as_ref().and_then(|k| k.as_str()) {
        Some("approval") => parse_value(item, &at).map(HoldRequest::Approval),
        Some("question") => parse_value(item, &at).map(HoldRequest::Question),
        _ => Err(ApiError::field(
            &format!("{at}.kind"),
            "must be \"approval\" or \"question\"",
        )),
    }
}

/// Withdraw a hold: by the agent that raised it, or an admin. It can no longer be decided.
#[utoipa::path(post, path = "/api/v1/holds/{hold}/withdraw", tag = "holds", request_body = Withdraw, params(("hold" = HoldId, Path)),
    responses((status = 200, body = Hold), (status = 403, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn withdraw(
    State(app): State<App>,
    caller: Caller,
    Path(id): Path<String>,
    Body(w): Body<Withdraw>,
) -> Result<Json<Hold>, ApiError> {
    let id = hold_id(&id)?;
    Ok(Json(
        app.engine()
            .withdraw(&caller.principal, id, w.reason, &caller.scope())
            .await?,
    ))
}
