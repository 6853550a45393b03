//! Holds: listing, one hold with its history, deciding, waiting, raising and withdrawing.

use std::time::Duration;

use std::convert::Infallible;
use std::future::ready;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::{StreamExt, stream};
use holdpoint_core::EngineError;
use holdpoint_core::hold::ReadFields;
use holdpoint_protocol::{
    ApplyDefault, BatchId, DecideBatchRequest, DecideBatchResult, DecideResult, Decision,
    ErrorBody, GateResponse, GateResult, Hold, HoldCounts, HoldDetail, HoldFile, HoldId,
    HoldRequest, HoldsParams, NewHolds, Page, Principal, RAISE_LINES, RaiseSynced, WaitParams,
    WaitResult, Withdraw,
};
use serde::de::DeserializeOwned;

use crate::app::App;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::extract::{Body, Params, parse_value};
use crate::service::holds as service;

/// List holds, oldest first (or newest, or most urgent); pending ones by default.
#[utoipa::path(get, path = "/api/v1/holds", tag = "holds", params(HoldsParams),
    responses((status = 200, body = Page<Hold>), (status = 400, body = ErrorBody)))]
pub async fn list(
    State(app): State<App>,
    caller: Caller,
    Params(q): Params<HoldsParams>,
) -> Result<Json<Page<Hold>>, ApiError> {
    Ok(Json(service::list(&app, &caller, q).await?))
}

/// How many holds are open (pending or awaiting confirmation), in all and by world and kind:
/// the counts an inbox shows, read with one counting query however many holds wait. A
/// credential limited to a world counts that world's.
#[utoipa::path(get, path = "/api/v1/holds/counts", tag = "holds",
    responses((status = 200, body = HoldCounts)))]
pub async fn counts(State(app): State<App>, caller: Caller) -> Result<Json<HoldCounts>, ApiError> {
    Ok(Json(service::counts(&app, &caller).await?))
}

/// One hold and every event about it.
#[utoipa::path(get, path = "/api/v1/holds/{hold}", tag = "holds", params(("hold" = HoldId, Path)),
    responses((status = 200, body = HoldDetail), (status = 404, body = ErrorBody)))]
pub async fn get(
    State(app): State<App>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<HoldDetail>, ApiError> {
    Ok(Json(service::detail(&app, &caller, hold_id(&id)?).await?))
}

/// The file a `write_file` approval would write, as it is now in the hold's world's working
/// directory (the path resolved as the file tools resolve it: never outside the directory),
/// for the web interface to show the difference the call makes. People who may see the hold
/// may read it (agents may not: raising a hold is no way to read a world's files); the text is
/// sent up to the file tools' size limit. A hold that is not such a call,
/// or a path that leaves the directory, is refused (422).
#[utoipa::path(get, path = "/api/v1/holds/{hold}/file", tag = "holds", params(("hold" = HoldId, Path)),
    responses((status = 200, body = HoldFile), (status = 404, body = ErrorBody),
        (status = 422, description = "Not a write_file approval, or a path the file tools refuse", body = ErrorBody)))]
pub async fn file(
    State(app): State<App>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<HoldFile>, ApiError> {
    Ok(Json(service::file(&app, &caller, hold_id(&id)?).await?))
}

pub(crate) fn hold_id(s: &str) -> Result<HoldId, ApiError> {
    s.parse().map_err(|_| ApiError::not_found("hold", s))
}

/// The header in which a person's client names itself when it decides.
const VIA: &str = "Holdpoint-Via";

/// The caller as the decider: with the client it decides through (`Holdpoint-Via`), when it
/// names one, recorded on the resolving event's actor.
fn decider(caller: &Caller, headers: &HeaderMap) -> Result<Principal, ApiError> {
    let Some(value) = headers.get(VIA) else {
        return Ok(caller.principal.clone());
    };
    let via = std::str::from_utf8(value.as_bytes())
        .map_err(|_| ApiError::field(VIA, "must be UTF-8 text"))?;
    holdpoint_core::limits::via(VIA, via)?;
    Ok(caller.principal.clone().via(Some(via.to_owned())))
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
    params(("hold" = HoldId, Path), ("Idempotency-Key" = Option<String>, Header, min_length = 1, max_length = 200, pattern = "^[\\u0020-\\u007e]*[\\u0021-\\u007e][\\u0020-\\u007e]*$", description = "1 to 200 visible ASCII characters (and spaces): the same key with the same request returns the first answer"),
        ("Holdpoint-Via" = Option<String>, Header, min_length = 1, max_length = 200, pattern = "^[\\u0020-\\u007e]*[\\u0021-\\u007e][\\u0020-\\u007e]*$", description = "The client the person decides through, in words (1 to 200 characters, not only white space, no control characters), recorded with the decision: \"MCP elicitation in claude-code 2.1\"")),
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
    let who = decider(&caller, &headers)?;
    Ok(Json(
        service::decide(&app, &caller, &who, id, decision, key.as_deref()).await?,
    ))
}

/// Apply the fail-closed default, for a client that cannot ask anyone (no terminal): an
/// approval is denied; a question gets its default option, else the option `no`, else is
/// canceled. Recorded with source `default` and the caller's name; a person's role is needed,
/// as for any decision.
#[utoipa::path(post, path = "/api/v1/holds/{hold}/default", tag = "holds", request_body = ApplyDefault,
    params(("hold" = HoldId, Path), ("Idempotency-Key" = Option<String>, Header, min_length = 1, max_length = 200, pattern = "^[\\u0020-\\u007e]*[\\u0021-\\u007e][\\u0020-\\u007e]*$", description = "1 to 200 visible ASCII characters (and spaces): the same key with the same request returns the first answer"),
        ("Holdpoint-Via" = Option<String>, Header, min_length = 1, max_length = 200, pattern = "^[\\u0020-\\u007e]*[\\u0021-\\u007e][\\u0020-\\u007e]*$", description = "The client the person decides through, in words (1 to 200 characters, not only white space, no control characters), recorded with the decision: \"MCP elicitation in claude-code 2.1\"")),
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
    let who = decider(&caller, &headers)?;
    Ok(Json(
        service::decide_default(&app, &caller, &who, id, body.reason, key.as_deref()).await?,
    ))
}

/// "Decide all": one decision for every approval of a batch, bound to the ids and argument digests seen. If the batch differs from what was seen, nothing is decided (409).
#[utoipa::path(post, path = "/api/v1/batches/{batch}/decision", tag = "holds", request_body = DecideBatchRequest,
    params(("batch" = BatchId, Path), ("Idempotency-Key" = Option<String>, Header, min_length = 1, max_length = 200, pattern = "^[\\u0020-\\u007e]*[\\u0021-\\u007e][\\u0020-\\u007e]*$", description = "1 to 200 visible ASCII characters (and spaces): the same key with the same request returns the first answer"),
        ("Holdpoint-Via" = Option<String>, Header, min_length = 1, max_length = 200, pattern = "^[\\u0020-\\u007e]*[\\u0021-\\u007e][\\u0020-\\u007e]*$", description = "The client the person decides through, in words (1 to 200 characters, not only white space, no control characters), recorded with the decision: \"MCP elicitation in claude-code 2.1\"")),
    responses((status = 200, body = DecideBatchResult), (status = 409, description = "The batch differs from what was seen", body = ErrorBody)))]
pub async fn decide_batch(
    State(app): State<App>,
    caller: Caller,
    Path(batch): Path<String>,
    headers: HeaderMap,
    Body(req): Body<DecideBatchRequest>,
) -> Result<Json<DecideBatchResult>, ApiError> {
    let batch: BatchId = batch
        .parse()
        .map_err(|_| ApiError::not_found("batch", &batch))?;
    let key = idempotency_key(&headers)?;
    let who = decider(&caller, &headers)?;
    Ok(Json(
        service::decide_batch(&app, &caller, &who, batch, req, key.as_deref()).await?,
    ))
}

/// Wait until the hold is decided or the timeout passes (long polling). The hold keeps its
/// own deadline either way.
#[utoipa::path(get, path = "/api/v1/holds/{hold}/wait", tag = "holds", params(("hold" = HoldId, Path), WaitParams),
    responses((status = 200, body = WaitResult), (status = 404, body = ErrorBody),
        (status = 429, description = "This credential has limits.waits_per_token long polls under way, or made too many requests (limits.requests_per_second); Retry-After says when to try again", body = ErrorBody)))]
pub async fn wait(
    State(app): State<App>,
    caller: Caller,
    Path(id): Path<String>,
    Params(q): Params<WaitParams>,
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
    // Given back when the wait ends, or when the client goes away (the request is dropped).
    let _slot = app.limiter().wait(&caller)?;
    let attend = q.attend.unwrap_or(false);
    Ok(Json(
        service::wait(&app, &caller, id, timeout, attend).await?,
    ))
}

/// Raise holds in a world, as an agent: approvals (policy decides first: allowed and denied
/// calls are answered at once) and questions. The holds of one request form one batch. A
/// malformed item raises nothing at all (422 naming it). Repeating a request with the same
/// `Idempotency-Key` raises nothing new and answers as the first time (keys are remembered for
/// `server.idempotency_retention`, 7 days by default).
///
/// With `Accept: application/x-ndjson` the answer comes in two lines: the `GateResponse`,
/// as soon as the record of calls allowed at once is written (a crash of the server's process
/// cannot lose it), then a `RaiseSynced` once that record is durable (synced to disk). A
/// client may run an allowed call meanwhile, overlapping the sync with its work, and answer
/// its own caller after the second line (`holdpoint mcp --server` does). Anything else is
/// durable before the first line, and the second follows at once.
#[utoipa::path(post, path = "/api/v1/worlds/{world}/holds", tag = "holds", request_body = NewHolds,
    params(("world" = String, Path), ("Idempotency-Key" = Option<String>, Header, min_length = 1, max_length = 200, pattern = "^[\\u0020-\\u007e]*[\\u0021-\\u007e][\\u0020-\\u007e]*$", description = "1 to 200 visible ASCII characters (and spaces): the same key with the same request returns the first answer")),
    responses((status = 201, description = "Holds were raised. As `application/x-ndjson` (when accepted): two lines, a `GateResponse` then a `RaiseSynced` (#/components/schemas/RaiseSynced)", content((GateResponse = "application/json"), (String = "application/x-ndjson"))),
        (status = 200, description = "Nothing needed asking. As `application/x-ndjson` (when accepted): two lines, a `GateResponse` then a `RaiseSynced` (#/components/schemas/RaiseSynced)", content((GateResponse = "application/json"), (String = "application/x-ndjson"))),
        (status = 422, body = ErrorBody),
        (status = 429, description = "The world has limits.pending_holds_per_world pending holds, or this credential limits.pending_holds_per_token, or would with these (nothing was raised); or too many requests (limits.requests_per_second). Retry-After says when to try again", body = ErrorBody),
        (status = 507, description = "The disk holding the data is short of space (`storage_full`, with Retry-After): nothing is raised, and no call is recorded allowed or denied, until space is freed; holds already raised can still be read, decided, withdrawn and waited on. The message and details (free_bytes, needed_bytes) say how much is free and how much is needed", body = ErrorBody)))]
pub async fn create(
    State(app): State<App>,
    caller: Caller,
    Path(world): Path<String>,
    headers: HeaderMap,
    Body(new): Body<serde_json::Value>,
) -> Result<Response, ApiError> {
    let new = new_holds(new)?;
    let key = idempotency_key(&headers)?;
    if !accepts_lines(&headers) {
        let response = service::raise(&app, &caller, &world, new, key).await?;
        return Ok((raised_status(&response), Json(response)).into_response());
    }
    let (response, synced) = service::raise_written(&app, &caller, &world, new, key).await?;
    let status = raised_status(&response);
    let last = async move {
        let synced = match synced.wait().await {
            Ok(()) => RaiseSynced {
                synced: true,
                error: None,
            },
            Err(e) => RaiseSynced {
                synced: false,
                error: Some(ApiError::from(EngineError::Store(e)).detail()),
            },
        };
        Ok::<_, Infallible>(json_line(&synced))
    };
    let lines = stream::once(ready(Ok(json_line(&response)))).chain(stream::once(last));
    Ok((
        status,
        [(header::CONTENT_TYPE, RAISE_LINES)],
        axum::body::Body::from_stream(lines),
    )
        .into_response())
}

/// 201 when the raise raised a hold, else 200 (policy answered every item).
fn raised_status(response: &GateResponse) -> StatusCode {
    if response
        .results
        .iter()
        .any(|r| matches!(r, GateResult::Held { .. }))
    {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    }
}

/// Whether the client takes a raise's answer in two lines ([`RAISE_LINES`]): it names that
/// media type in `Accept`, without `q=0` (which says it does not).
fn accepts_lines(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|range| {
            let mut parts = range.split(';').map(str::trim);
            let named = parts
                .next()
                .is_some_and(|media| media.eq_ignore_ascii_case(RAISE_LINES));
            let refused = parts.any(|p| {
                p.split_once('=').is_some_and(|(name, q)| {
                    name.trim().eq_ignore_ascii_case("q")
                        && q.trim().parse::<f32>().is_ok_and(|q| q == 0.0)
                })
            });
            named && !refused
        })
}

fn json_line(value: &impl serde::Serialize) -> Bytes {
    let mut line = serde_json::to_vec(value).unwrap_or_default();
    line.push(b'\n');
    Bytes::from(line)
}

/// Reads [`NewHolds`]. serde loses the path inside an internally tagged enum, so when the
/// body does not fit, each item is read on its own to name the field at fault.
fn new_holds(body: serde_json::Value) -> Result<NewHolds, ApiError> {
    parse_value::<NewHolds>(body.clone(), "").map_err(|whole| {
        body.get("items")
            .and_then(serde_json::Value::as_array)
            .and_then(|items| {
                items
                    .iter()
                    .enumerate()
                    .find_map(|(i, item)| hold_request(i, item.clone()).err())
            })
            .unwrap_or(whole)
    })
}

fn hold_request(i: usize, item: serde_json::Value) -> Result<HoldRequest, ApiError> {
    holdpoint_core::hold::read_request(item, &Item(format!("items[{i}]")))
}

/// Reads the fields of the item at this path, naming the field at fault under it.
struct Item(String);

impl ReadFields for Item {
    type Error = ApiError;

    fn read<T: DeserializeOwned>(&self, fields: serde_json::Value) -> Result<T, ApiError> {
        parse_value(fields, &self.0)
    }

    fn refuse(&self, field: &str, message: String) -> ApiError {
        ApiError::field(&format!("{}.{field}", self.0), message)
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
    Ok(Json(service::withdraw(&app, &caller, id, w.reason).await?))
}
