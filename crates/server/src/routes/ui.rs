//! The web interface's shell: the pages a browser opens (`/`, `/signin`) and the static files
//! they load (`/ui/…`), all embedded in the binary. Everything past the shell is done by the
//! pages' ES modules through the public API, as any other client would.

use std::sync::LazyLock;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use holdpoint_protocol::SignInForm;
use sha2::{Digest, Sha256};

use crate::app::App;
use crate::auth::{self, session_cookie, sign_in_refused};
use crate::error::ApiError;
use crate::extract::Form;

use super::access::session_started;

/// A file the pages load: its name under `/ui/` and its content.
struct Asset {
    name: &'static str,
    body: &'static [u8],
}

/// An embedded file of `crates/server/ui/`.
macro_rules! asset {
    ($name:literal) => {
        Asset {
            name: $name,
            body: include_bytes!(concat!("../../ui/", $name)),
        }
    };
}

/// The type of an asset, by its extension.
fn content_type(name: &str) -> &'static str {
    match name.rsplit_once('.').map(|(_, ext)| ext) {
        Some("css") => "text/css; charset=utf-8",
        Some("js") => "text/javascript; charset=utf-8",
        Some("svg") => "image/svg+xml",
        _ => "application/octet-stream",
    }
}

/// Every file under `/ui/`. URLs stay the same across versions (so modules can import each
/// other by name with no build step); `ETag` + `Cache-Control: no-cache` make a browser ask
/// again each time and get `304 Not Modified` while the file is unchanged.
const ASSETS: &[Asset] = &[
    asset!("app.css"),
    asset!("app.js"),
    asset!("api.js"),
    asset!("dom.js"),
    asset!("live.js"),
    asset!("wire.js"),
    asset!("live-worker.js"),
    asset!("card.js"),
    asset!("diff.js"),
    asset!("inbox.js"),
    asset!("hold.js"),
    asset!("chats.js"),
    asset!("manage.js"),
    asset!("policy.js"),
    asset!("icon.svg"),
];

/// The web interface's pages: each is the shell, whose `app.js` renders the page its path
/// names. A path of the API or of `/ui/` is never one of them.
pub const PAGES: &[&str] = &[
    "/",
    "/holds/{hold}",
    "/worlds",
    "/worlds/{world}",
    "/worlds/{world}/chats/{chat}",
    "/worlds/{world}/policy",
    "/worlds/{world}/policy/from/{hold}",
    "/manage",
    "/manage/{section}",
];

const SHELL: &str = include_str!("../../ui/shell.html");
/// A page that loads itself again at once (no script: the CSP allows none inline).
const AGAIN: &str = "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta http-equiv=\"refresh\" content=\"0\"><title>Holdpoint</title></head>\
<body><p>Opening Holdpoint…</p></body></html>";

/// Each asset's `ETag`: a digest of its content, computed once.
static ETAGS: LazyLock<Vec<String>> = LazyLock::new(|| {
    ASSETS
        .iter()
        .map(|a| {
            let digest = Sha256::digest(a.body);
            let hex: String = digest[..12].iter().map(|b| format!("{b:02x}")).collect();
            format!("\"{hex}\"")
        })
        .collect()
});

/// A static file of the web interface.
pub async fn asset(Path(name): Path<String>, headers: HeaderMap) -> Result<Response, ApiError> {
    let Some(i) = ASSETS.iter().position(|a| a.name == name) else {
        return Err(ApiError::not_found("asset", format!("/ui/{name}")));
    };
    let (asset, etag) = (&ASSETS[i], ETAGS[i].as_str());
    let cached = headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|tag| tag.trim() == etag || tag.trim() == "*");
    let common = [(header::ETAG, etag), (header::CACHE_CONTROL, "no-cache")];
    if cached {
        return Ok((StatusCode::NOT_MODIFIED, common).into_response());
    }
    Ok((
        common,
        [(header::CONTENT_TYPE, content_type(asset.name))],
        asset.body,
    )
        .into_response())
}

/// Every page of the web interface (`/`, `/holds/…`, `/worlds/…`, `/manage/…`): the signed-in shell, or (without a valid session) a redirect to sign-in.
pub async fn index(State(app): State<App>, headers: HeaderMap) -> Result<Response, ApiError> {
    let session = match session_cookie(&headers) {
        Some(cookie) => app.credentials().by_session(&cookie).await?,
        None => None,
    };
    if session.is_none() && cross_site(&headers) {
        // A `SameSite=Strict` cookie is withheld from every request of a navigation that
        // another site started, redirects included: after the sign-in link was followed from
        // a chat or a mail, the cookie `/login` just set is not sent here. The same page asks
        // again by itself, a navigation of this site's own, which carries it; with no cookie
        // it comes back same-origin and goes on to sign-in below.
        return Ok(page(StatusCode::OK, AGAIN.to_owned()));
    }
    if session.is_none() {
        return Ok((
            StatusCode::SEE_OTHER,
            [
                (header::LOCATION, "/signin"),
                (header::CACHE_CONTROL, "no-store"),
            ],
        )
            .into_response());
    }
    Ok(page(StatusCode::OK, SHELL.to_owned()))
}

/// The sign-in page for a browser: a form to paste a token (it posts to `POST /signin`).
#[utoipa::path(get, path = "/signin", tag = "access",
    responses((status = 200, description = "The sign-in page", content_type = "text/html"),
        (status = 421, description = "The Host header does not name this server: the sign-in page, saying so", content_type = "text/html")))]
pub async fn sign_in_page() -> Response {
    auth::sign_in_page(StatusCode::OK, None)
}

/// Sign a browser in with a pasted token (the form of `GET /signin`): sets the session cookie
/// and redirects to `/`. Whatever refuses it — a token that is unknown or revoked, an agent's
/// token, a page of another origin — gets the sign-in page again, saying why, never
/// repeating the token. Needs no cookie, and a browser page of another origin is refused, so
/// another site cannot sign a browser in behind its back (the sign-in page's
/// `Referrer-Policy: same-origin` lets the browser name this origin in the form's POST).
#[utoipa::path(post, path = "/signin", tag = "access",
    request_body(content = SignInForm, content_type = "application/x-www-form-urlencoded"),
    responses((status = 303, description = "Signed in; the session cookie is set"),
        (status = 401, description = "The token is unknown or revoked: the sign-in page, saying so", content_type = "text/html"),
        (status = 403, description = "An agent's token, or a page of another origin: the sign-in page, saying so", content_type = "text/html"),
        (status = 421, description = "The Host header does not name this server: the sign-in page, saying so", content_type = "text/html")))]
pub async fn sign_in(
    State(app): State<App>,
    Form(form): Form<SignInForm>,
) -> Result<Response, ApiError> {
    match app.credentials().log_in(form.token.trim()).await {
        Ok(cookie) => Ok(session_started(&cookie)),
        Err(e) if e.status.is_client_error() => Ok(sign_in_refused(&e)),
        Err(e) => Err(e),
    }
}

/// Whether the browser says another site started this navigation (`Sec-Fetch-Site`).
fn cross_site(headers: &HeaderMap) -> bool {
    headers
        .get("sec-fetch-site")
        .is_some_and(|v| v.as_bytes() == b"cross-site")
}

/// A page: it depends on who asks, so no cache keeps it.
fn page(status: StatusCode, html: String) -> Response {
    (status, [(header::CACHE_CONTROL, "no-store")], Html(html)).into_response()
}
