//! The headers every response carries, whatever answered it (a page, an asset, the API, an
//! error): one layer, outermost, so no route can forget them.

use axum::extract::Request;
use axum::http::{HeaderName, HeaderValue, header};
use axum::middleware::Next;
use axum::response::Response;

/// Scripts, styles, images and connections only from this server; no inline script or style
/// (so text that slips into markup cannot run), no framing (clickjacking), no `<base>`, and
/// forms post only here.
pub const CONTENT_SECURITY_POLICY: &str =
    "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

const SECURITY: [(HeaderName, &str); 2] = [
    (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
    // A response is only what its Content-Type says (a JSON body is never run as a script).
    (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
];

/// No URL of this server (a sign-in link holds a token) goes anywhere as a `Referer`. The
/// sign-in page alone says `same-origin` instead (`auth::sign_in_page`), so that its form's
/// POST carries this server's origin rather than `null`; that one is kept.
const REFERRER_POLICY: &str = "no-referrer";

pub async fn security(req: Request, next: Next) -> Response {
    let mut response = next.run(req).await;
    let headers = response.headers_mut();
    for (name, value) in SECURITY {
        headers.insert(name, HeaderValue::from_static(value));
    }
    let kept = headers
        .get(header::REFERRER_POLICY)
        .is_some_and(|v| v == crate::auth::SIGN_IN_REFERRER_POLICY);
    if !kept {
        headers.insert(
            header::REFERRER_POLICY,
            HeaderValue::from_static(REFERRER_POLICY),
        );
    }
    response
}
