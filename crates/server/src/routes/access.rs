//! Tokens (admins) and browser sessions.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use holdpoint_protocol::{
    CreatedToken, ErrorBody, LoginParams, NewToken, Role, SessionInfo, TokenId, TokenInfo,
};

use crate::app::App;
use crate::auth::{
    Caller, SESSION_COOKIE, SESSION_TTL, session_cookie, sign_in_page, sign_in_refused,
};
use crate::error::ApiError;
use crate::extract::{Body, Params};

/// Every token, without its secret (admins).
#[utoipa::path(get, path = "/api/v1/tokens", tag = "access", responses((status = 200, body = Vec<TokenInfo>), (status = 403, body = ErrorBody)))]
pub async fn tokens(State(app): State<App>) -> Result<Json<Vec<TokenInfo>>, ApiError> {
    Ok(Json(app.credentials().tokens().await?))
}

/// Create a token for a person (`admin`, `approver`) or an agent (`agent`). Its secret is in
/// the answer, this once.
#[utoipa::path(post, path = "/api/v1/tokens", tag = "access", request_body = NewToken,
    responses((status = 201, body = CreatedToken), (status = 403, body = ErrorBody), (status = 422, body = ErrorBody)))]
pub async fn create_token(
    State(app): State<App>,
    caller: Caller,
    Body(new): Body<NewToken>,
) -> Result<(StatusCode, Json<CreatedToken>), ApiError> {
    if new.role == Role::Admin && new.world.is_some() {
        // An admin can create worlds and tokens: a world limit would not hold.
        return Err(ApiError::field(
            "world",
            "admins are not limited to a world; give a person of one world the approver role",
        ));
    }
    let world = match &new.world {
        Some(w) => Some(app.world(&caller, w).await?),
        None => None,
    };
    let created = app
        .credentials()
        .create_token(
            &caller.actor(),
            &new.name,
            new.role,
            world.as_ref().map(|w| w.id),
            world.map(|w| w.name),
        )
        .await?;
    Ok((StatusCode::CREATED, Json(created)))
}

/// Revoke a token; its browser sessions end too.
#[utoipa::path(delete, path = "/api/v1/tokens/{token}", tag = "access", params(("token" = TokenId, Path)),
    responses((status = 204), (status = 404, body = ErrorBody)))]
pub async fn revoke_token(
    State(app): State<App>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let id: TokenId = id.parse().map_err(|_| ApiError::not_found("token", &id))?;
    app.credentials().revoke_token(&caller.actor(), id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Who is calling, and (for browser sessions) the CSRF token to send with changes.
#[utoipa::path(get, path = "/api/v1/session", tag = "access", responses((status = 200, body = SessionInfo), (status = 401, body = ErrorBody)))]
pub async fn session(caller: Caller) -> Json<SessionInfo> {
    Json(SessionInfo {
        name: caller.principal.name,
        role: caller.principal.role,
        world: caller.world.map(|w| w.to_string()),
        csrf_token: caller.csrf,
    })
}

/// End the browser session.
#[utoipa::path(post, path = "/api/v1/logout", tag = "access", responses((status = 204)))]
pub async fn logout(State(app): State<App>, headers: HeaderMap) -> Result<Response, ApiError> {
    if let Some(cookie) = session_cookie(&headers) {
        app.credentials().log_out(&cookie).await?;
    }
    let cookie = format!("{SESSION_COOKIE}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0");
    Ok((StatusCode::NO_CONTENT, [(header::SET_COOKIE, cookie)]).into_response())
}

/// Sign a browser in with a person's token: sets the session cookie and redirects to `/`, the
/// web interface. The link is a secret: it holds the token. A link that does not sign in (its
/// token unknown or revoked, an agent's, or no token at all) gets the sign-in page, saying
/// why, where a token can be pasted.
#[utoipa::path(get, path = "/login", tag = "access", params(LoginParams),
    responses((status = 303, description = "Signed in; the session cookie is set"),
        (status = 400, description = "No token in the link: the sign-in page, saying so", content_type = "text/html"),
        (status = 401, description = "The token is unknown or revoked: the sign-in page, saying so", content_type = "text/html"),
        (status = 403, description = "An agent's token (agents do not sign in to the web interface), or a page of another origin: the sign-in page, saying so", content_type = "text/html"),
        (status = 421, description = "The Host header does not name this server: the sign-in page, saying so", content_type = "text/html")))]
pub async fn login(
    State(app): State<App>,
    params: Result<Params<LoginParams>, ApiError>,
) -> Result<Response, ApiError> {
    let Ok(Params(q)) = params else {
        return Ok(sign_in_page(
            StatusCode::BAD_REQUEST,
            Some("This sign-in link has no token in it: paste your token here instead."),
        ));
    };
    match app.credentials().log_in(&q.token).await {
        Ok(cookie) => Ok(session_started(&cookie)),
        Err(e) if e.status.is_client_error() => Ok(sign_in_refused(&e)),
        Err(e) => Err(e),
    }
}

/// The answer that starts a browser session: the cookie, and a redirect to `/`, a URL without
/// the token (so it stays out of the history and of any `Referer`), that no cache keeps.
pub(super) fn session_started(cookie: &str) -> Response {
    let set = format!(
        "{SESSION_COOKIE}={cookie}; HttpOnly; SameSite=Strict; Path=/; Max-Age={}",
        SESSION_TTL.as_secs()
    );
    (
        StatusCode::SEE_OTHER,
        [
            (header::SET_COOKIE, set),
            (header::LOCATION, "/".to_owned()),
            (header::CACHE_CONTROL, "no-store".to_owned()),
        ],
    )
        .into_response()
}
