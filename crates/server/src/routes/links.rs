//! Decision links sent by email (`crate::channels`): their page, the confirmation that decides,
//! and the notices a hold was sent.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use holdpoint_protocol::{ErrorBody, HoldId, NoticesPage};
use serde::Deserialize;

use crate::app::App;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::extract::Form;

/// The confirm form of a link's page.
#[derive(Deserialize, utoipa::ToSchema)]
pub struct ConfirmForm {
    /// The CSRF token the link's page carries.
    pub csrf: String,
}

/// A link's page: drawn on the server, never kept by a cache, naming this origin in its POST.
fn link_page((status, html): (StatusCode, String)) -> Response {
    let mut response = (status, [(header::CACHE_CONTROL, "no-store")], Html(html)).into_response();
    // The confirm form's POST names this origin (the guard checks it), as the sign-in page's.
    response.headers_mut().insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static(crate::auth::SIGN_IN_REFERRER_POLICY),
    );
    response
}

/// A decision link from an email: a page with the hold's card and a button to confirm. Opening
/// it decides nothing (link scanners and previews open links), and signs no one in.
#[utoipa::path(get, path = "/d/{token}", tag = "holds", params(("token" = String, Path)),
    responses((status = 200, description = "The hold's card and a confirm button", content_type = "text/html"),
        (status = 403, description = "The link was altered or is not this server's", content_type = "text/html"),
        (status = 404, description = "The link names nothing known", content_type = "text/html"),
        (status = 409, description = "Already used, or the hold was already decided", content_type = "text/html"),
        (status = 410, description = "The link expired", content_type = "text/html")))]
pub async fn open(State(app): State<App>, Path(token): Path<String>) -> Response {
    link_page(app.channels().open(&token).await)
}

/// Confirms a decision link: decides its one hold its one way, recorded as the link's
/// recipient via email. Needs the CSRF token of the link's page; works once.
#[utoipa::path(post, path = "/d/{token}", tag = "holds", params(("token" = String, Path)),
    request_body(content = ConfirmForm, content_type = "application/x-www-form-urlencoded"),
    responses((status = 200, description = "Decided", content_type = "text/html"),
        (status = 403, description = "The link was altered, or the form is not its page's", content_type = "text/html"),
        (status = 404, description = "The link names nothing known", content_type = "text/html"),
        (status = 409, description = "Already used, or the hold was already decided", content_type = "text/html"),
        (status = 410, description = "The link expired", content_type = "text/html")))]
pub async fn confirm(
    State(app): State<App>,
    Path(token): Path<String>,
    Form(form): Form<ConfirmForm>,
) -> Response {
    link_page(app.channels().confirm(&token, &form.csrf).await)
}

/// Who was sent a hold's notice, over what, when, and how each delivery went.
#[utoipa::path(get, path = "/api/v1/holds/{hold}/notices", tag = "holds", params(("hold" = HoldId, Path)),
    responses((status = 200, body = NoticesPage), (status = 404, body = ErrorBody)))]
pub async fn notices(
    State(app): State<App>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<NoticesPage>, ApiError> {
    let id: HoldId = id
        .parse()
        .map_err(|_| ApiError::not_found("hold", format!("{id:?}")))?;
    // A hold out of the caller's scope looks like one that does not exist.
    app.engine().hold(id, &caller.scope()).await?;
    Ok(Json(NoticesPage {
        items: app.channels().notices(id).await?,
    }))
}
