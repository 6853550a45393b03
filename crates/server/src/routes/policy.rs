//! Worlds' own policies (read, set, their versions), reloading the base policy file, and
//! rules suggested from holds.

use axum::Json;
use axum::extract::{Path, State};
use holdpoint_core::policy::{Action, suggest};
use holdpoint_protocol::{
    Deadline, ErrorBody, HoldId, HoldSpec, PolicyReloaded, ReplayReport, ReplayRequest, SetPolicy,
    SuggestedRule, Verdict, WorldPolicy, WorldPolicyState,
};

use crate::app::App;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::extract::Body;

/// A world's own policy (absent when the base alone applies), the digest of the base it lies
/// on, the base's locked rules and its mode floor (people only).
#[utoipa::path(get, path = "/api/v1/worlds/{world}/policy", tag = "policy", params(("world" = String, Path, description = "The world's id or name")),
    responses((status = 200, body = WorldPolicyState), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn world_policy(
    State(app): State<App>,
    caller: Caller,
    Path(world): Path<String>,
) -> Result<Json<WorldPolicyState>, ApiError> {
    let w = app.world(&caller, &world).await?;
    Ok(Json(app.engine().world_policy(*w.id.as_uuid()).await?))
}

/// Gives a world a new version of its own policy (admins). The text is checked whole — parsed,
/// its `must_match`/`must_not_match` examples and `[[checks]]` run — before it applies; an
/// invalid one is refused with every problem in `details.problems` (`path`, `message`) and the
/// policy in force stays. The change is recorded in the audit log (`policy.changed`, with who
/// made it and the SHA-256 of the text) and applies to the next call; pending holds keep the
/// version that raised them.
#[utoipa::path(put, path = "/api/v1/worlds/{world}/policy", tag = "policy", params(("world" = String, Path, description = "The world's id or name")), request_body = SetPolicy,
    responses((status = 200, body = WorldPolicy), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, description = "Another change was made meanwhile (code `policy_changed`)", body = ErrorBody),
        (status = 422, description = "The policy is invalid (code `invalid_policy`, `details.problems`), or the body is", body = ErrorBody)))]
pub async fn set_world_policy(
    State(app): State<App>,
    caller: Caller,
    Path(world): Path<String>,
    Body(req): Body<SetPolicy>,
) -> Result<Json<WorldPolicy>, ApiError> {
    let w = app.world(&caller, &world).await?;
    Ok(Json(
        app.engine()
            .set_world_policy(&caller.principal, *w.id.as_uuid(), &req.text)
            .await?,
    ))
}

/// Every version of a world's policy, oldest first, with who set each and when (people only).
#[utoipa::path(get, path = "/api/v1/worlds/{world}/policy/history", tag = "policy", params(("world" = String, Path, description = "The world's id or name")),
    responses((status = 200, body = Vec<WorldPolicy>), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn history(
    State(app): State<App>,
    caller: Caller,
    Path(world): Path<String>,
) -> Result<Json<Vec<WorldPolicy>>, ApiError> {
    let w = app.world(&caller, &world).await?;
    Ok(Json(
        app.engine().world_policy_history(*w.id.as_uuid()).await?,
    ))
}

/// Reads the server's policy file again (admins), with the checks of a start: an invalid file
/// is refused with every problem named (`details.problems`) and the policy in force stays. A
/// changed text is recorded in the audit log (`policy.changed` without a world).
#[utoipa::path(post, path = "/api/v1/policy/reload", tag = "policy",
    responses((status = 200, body = PolicyReloaded), (status = 403, body = ErrorBody),
        (status = 409, description = "The server runs without a policy file (code `no_policy_file`)", body = ErrorBody),
        (status = 422, description = "The file is invalid or unreadable (code `invalid_policy`, `details.problems`)", body = ErrorBody)))]
pub async fn reload(
    State(app): State<App>,
    caller: Caller,
) -> Result<Json<PolicyReloaded>, ApiError> {
    let actor = holdpoint_core::roles::actor_of(&caller.principal);
    Ok(Json(app.reload_policy(actor).await?))
}

/// The narrowest rule that would have decided this hold's call as it was decided — `allow` for
/// an approval (or a pending hold), `deny` for a denial — as a `[[rules]]` entry with the call
/// as its own `must_match` example (for an approval with edited arguments, the call as
/// approved: the edited arguments), to review, edit and add to the world's policy (people
/// only). A question has no call to make a rule from (422).
#[utoipa::path(get, path = "/api/v1/holds/{hold}/suggested-rule", tag = "policy", params(("hold" = HoldId, Path)),
    responses((status = 200, body = SuggestedRule), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 422, description = "A question, or arguments a policy file cannot write (a null)", body = ErrorBody)))]
pub async fn suggested_rule(
    State(app): State<App>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<SuggestedRule>, ApiError> {
    let id = super::holds::hold_id(&id)?;
    let hold = app.engine().hold(id, &caller.scope()).await?;
    let spec = match &hold.spec {
        HoldSpec::Approval(spec) => spec,
        HoldSpec::Question(_) => {
            return Err(ApiError::field(
                "hold",
                "a question has no call to make a rule from",
            ));
        }
    };
    let denied = hold
        .outcome
        .as_ref()
        .is_some_and(|o| o.verdict == Some(Verdict::Deny));
    let action = if denied { Action::Deny } else { Action::Allow };
    // An approval decides the arguments that ran: after an edit, the person's, not the call
    // they rewrote.
    let arguments = hold
        .outcome
        .as_ref()
        .filter(|o| o.verdict == Some(Verdict::Approve))
        .and_then(|o| o.arguments.as_ref())
        .unwrap_or(&spec.arguments);
    let rule = suggest::rule_for(&spec.tool, arguments, action)
        .map_err(|e| ApiError::field("arguments", e.0))?;
    Ok(Json(SuggestedRule {
        action: action.verdict(),
        rule,
    }))
}

/// What a candidate policy, as the world's, would have decided for the calls recorded in the
/// world's log (of the last `since`, or all), against what happened: counts and the first
/// examples of each difference (allowed → ask, approved by a person → allow, …). Nothing
/// changes (people only).
#[utoipa::path(post, path = "/api/v1/worlds/{world}/policy/replay", tag = "policy", params(("world" = String, Path, description = "The world's id or name")), request_body = ReplayRequest,
    responses((status = 200, body = ReplayReport), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 422, description = "The candidate is invalid (code `invalid_policy`, `details.problems`), or `since` is", body = ErrorBody)))]
pub async fn replay(
    State(app): State<App>,
    caller: Caller,
    Path(world): Path<String>,
    Body(req): Body<ReplayRequest>,
) -> Result<Json<ReplayReport>, ApiError> {
    let w = app.world(&caller, &world).await?;
    let since = match req.since {
        None => None,
        Some(Deadline::After(d)) => Some(d),
        Some(Deadline::Never) => {
            return Err(ApiError::field(
                "since",
                "a duration such as \"7d\"; leave it out for every recorded call",
            ));
        }
    };
    Ok(Json(
        app.engine()
            .replay_world_policy(*w.id.as_uuid(), &req.text, since)
            .await?,
    ))
}
