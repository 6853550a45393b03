//! Holds: listing and counting them, one hold with its history, the file a write would
//! change, raising, deciding, waiting and withdrawing.

use std::time::Duration;

use axum::http::StatusCode;
use holdpoint_agent::FileNow;
use holdpoint_protocol::{
    BatchId, DecideBatchRequest, DecideBatchResult, DecideResult, Decision, GateRequest,
    GateResponse, Hold, HoldCounts, HoldDetail, HoldFile, HoldId, HoldQuery, HoldSpec, HoldStatus,
    HoldsParams, NewHolds, Page, Principal, StatusFilter, WaitResult, WorldId,
};

use holdpoint_core::store::Synced;

use crate::app::App;
use crate::auth::Caller;
use crate::error::ApiError;

/// The holds `params` ask for, as the caller may see them: pending ones, oldest first, by
/// default.
pub async fn list(app: &App, caller: &Caller, params: HoldsParams) -> Result<Page<Hold>, ApiError> {
    let world = match (&params.world, caller.world) {
        (Some(w), _) => Some(app.world(caller, w).await?.id.to_string()),
        (None, Some(w)) => Some(w.to_string()),
        (None, None) => None,
    };
    let query = HoldQuery {
        world,
        chat: params.chat,
        status: status_filter(params.status.as_deref())?,
        kind: params.kind,
        batch: params.batch,
        agent: params.agent,
        tool: params.tool,
        order: params.order.unwrap_or_default(),
        cursor: params.cursor,
        limit: params.limit,
    };
    // Everything the engine can find wrong with a listing is in its parameters: 400.
    app.engine().holds(&query).await.map_err(|e| {
        let mut e = ApiError::from(e);
        if e.status == StatusCode::UNPROCESSABLE_ENTITY {
            e.status = StatusCode::BAD_REQUEST;
        }
        e
    })
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

/// How many holds are open, in all and by world and kind, in the caller's world if it is
/// limited to one.
pub async fn counts(app: &App, caller: &Caller) -> Result<HoldCounts, ApiError> {
    let world = caller.world.map(|w| w.to_string());
    Ok(app.engine().hold_counts(world.as_deref()).await?)
}

/// One hold and every event about it.
pub async fn detail(app: &App, caller: &Caller, id: HoldId) -> Result<HoldDetail, ApiError> {
    let scope = caller.scope();
    let hold = app.engine().hold(id, &scope).await?;
    let history = app
        .engine()
        .history(id, &scope)
        .await?
        .into_iter()
        .map(|e| (*e).clone())
        .collect();
    Ok(HoldDetail { hold, history })
}

/// The file a `write_file` approval would write, as it is now in the hold's world's working
/// directory (resolved as the file tools resolve it: never outside the directory).
pub async fn file(app: &App, caller: &Caller, id: HoldId) -> Result<HoldFile, ApiError> {
    let hold = app.engine().hold(id, &caller.scope()).await?;
    let path = match &hold.spec {
        HoldSpec::Approval(a) if a.tool == "write_file" && a.mcp.is_none() => a
            .arguments
            .get("path")
            .and_then(|p| p.as_str())
            .map(str::to_owned),
        HoldSpec::Approval(_) | HoldSpec::Question(_) => None,
    };
    let Some(path) = path else {
        return Err(ApiError::field(
            "hold",
            "only an approval of write_file (with a path) writes a file",
        ));
    };
    let Ok(world) = hold.world.parse::<WorldId>() else {
        return Err(ApiError::field("hold", "the hold's world has no directory"));
    };
    // One file of at most the file tools' limit: read in place.
    let now = app
        .runtime()
        .file_now(world, &path)
        .map_err(|e| ApiError::field("arguments.path", e))?;
    Ok(match now {
        FileNow::Missing => HoldFile {
            path,
            exists: false,
            bytes: 0,
            content: None,
            too_large: false,
        },
        FileNow::File {
            bytes,
            text,
            too_large,
        } => HoldFile {
            path,
            exists: true,
            bytes,
            content: text,
            too_large,
        },
    })
}

/// Decides hold `id` as `who` (the caller, with the client it decides through), within the
/// caller's scope. The first valid decision wins; the engine checks that `who` may decide.
pub async fn decide(
    app: &App,
    caller: &Caller,
    who: &Principal,
    id: HoldId,
    decision: Decision,
    key: Option<&str>,
) -> Result<DecideResult, ApiError> {
    Ok(app
        .engine()
        .decide(who, id, decision, &caller.scope(), key)
        .await?)
}

/// Applies hold `id`'s fail-closed default as `who`.
pub async fn decide_default(
    app: &App,
    caller: &Caller,
    who: &Principal,
    id: HoldId,
    reason: Option<String>,
    key: Option<&str>,
) -> Result<DecideResult, ApiError> {
    Ok(app
        .engine()
        .decide_default(who, id, reason, &caller.scope(), key)
        .await?)
}

/// One decision for every approval of a batch, bound to the ids and digests seen.
pub async fn decide_batch(
    app: &App,
    caller: &Caller,
    who: &Principal,
    batch: BatchId,
    req: DecideBatchRequest,
    key: Option<&str>,
) -> Result<DecideBatchResult, ApiError> {
    Ok(app
        .engine()
        .decide_batch(who, batch, req, &caller.scope(), key)
        .await?)
}

/// Waits at most `timeout` (less when the server stops) for hold `id` to be decided; the hold
/// as it is then. With `attend`, the caller waits for the hold to its end: it is attended
/// while the wait lasts, and when the wait ends undecided its raiser is expected back within
/// server.waiter_grace (`attendance.rs`).
pub async fn wait(
    app: &App,
    caller: &Caller,
    id: HoldId,
    timeout: Duration,
    attend: bool,
) -> Result<WaitResult, ApiError> {
    let scope = caller.scope();
    let waiting = attend.then(|| app.attendance().wait(app.engine(), id));
    let waited = tokio::select! {
        r = app.engine().wait(id, timeout, &scope) => r.map(|_| ()),
        () = app.shutdown().cancelled() => Ok(()),
    };
    let hold = match waited {
        Ok(()) => app.engine().hold(id, &scope).await,
        Err(e) => Err(e),
    };
    let hold = match hold {
        Ok(hold) if hold.outcome.is_none() => hold,
        // Decided, or not the caller's to wait on: nobody is expected back for it.
        other => {
            if let Some(waiting) = waiting {
                waiting.resolved();
            }
            other?
        }
    };
    Ok(WaitResult {
        decided: hold.outcome.is_some(),
        hold,
    })
}

/// Raises `new`'s items in `world` (by id or name, as the caller may see it) as `caller`, all
/// or nothing: policy answers what it can at once, the rest become one batch of holds.
pub async fn raise(
    app: &App,
    caller: &Caller,
    world: &str,
    new: NewHolds,
    idempotency_key: Option<String>,
) -> Result<GateResponse, ApiError> {
    let req = gate_request(app, caller, world, new, idempotency_key).await?;
    Ok(app.engine().gate_all(&caller.principal, req).await?)
}

/// Like [`raise`], but allowed calls are answered once their record is written, with its
/// sync owed (`Engine::gate_all_written`): for the MCP gateway in this process.
pub async fn raise_written(
    app: &App,
    caller: &Caller,
    world: &str,
    new: NewHolds,
    idempotency_key: Option<String>,
) -> Result<(GateResponse, Synced), ApiError> {
    let req = gate_request(app, caller, world, new, idempotency_key).await?;
    Ok(app
        .engine()
        .gate_all_written(&caller.principal, req)
        .await?)
}

async fn gate_request(
    app: &App,
    caller: &Caller,
    world: &str,
    new: NewHolds,
    idempotency_key: Option<String>,
) -> Result<GateRequest, ApiError> {
    let world = app.world(caller, world).await?;
    Ok(GateRequest {
        world: world.id.to_string(),
        chat: new.chat,
        agent: None,
        items: new.items,
        idempotency_key,
    })
}

/// Withdraws hold `id` as `caller` (its raiser, or an admin): it can no longer be decided.
pub async fn withdraw(
    app: &App,
    caller: &Caller,
    id: HoldId,
    reason: Option<String>,
) -> Result<Hold, ApiError> {
    Ok(app
        .engine()
        .withdraw(&caller.principal, id, reason, &caller.scope())
        .await?)
}
