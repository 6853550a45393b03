//! The sign-in page, and every answer a browser gets when signing in does not work: the same
//! page with the form and a sentence saying why, never the API's JSON, so the person can paste
//! another token at once.
//!
//! The page is served with `Referrer-Policy: same-origin` rather than the `no-referrer` every
//! other response carries: under `no-referrer` a browser sends `Origin: null` with the form's
//! POST, which the guard cannot tell from a page of another origin (a sandboxed frame, a
//! `data:` page, another site that hides its referrer). With `same-origin` the browser names
//! this server's origin in the POST, and still sends no `Referer` to any other site.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};

use crate::error::ApiError;

const SIGN_IN: &str = include_str!("../../ui/signin.html");
/// Where the sign-in page says what went wrong.
const MESSAGE: &str = "<!-- message -->";

/// The referrer policy of the sign-in pages (see the module's documentation).
pub const SIGN_IN_REFERRER_POLICY: &str = "same-origin";

/// The sign-in page, saying `message` (plain text) when there is one.
pub fn sign_in_page(status: StatusCode, message: Option<&str>) -> Response {
    let notice = message
        .map(|m| format!("<p class=\"error\" role=\"alert\">{}</p>", escape(m)))
        .unwrap_or_default();
    let mut response = (
        status,
        // It depends on who asks, so no cache keeps it.
        [(header::CACHE_CONTROL, "no-store")],
        Html(SIGN_IN.replace(MESSAGE, &notice)),
    )
        .into_response();
    response.headers_mut().insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static(SIGN_IN_REFERRER_POLICY),
    );
    response
}

/// Why signing in did not work, as the sign-in page says it: an unknown or revoked token, an
/// agent's token, a page of another origin, or whatever else refused it (its message). The
/// token itself is never repeated.
pub fn sign_in_refused(e: &ApiError) -> Response {
    let message = match e.status {
        StatusCode::UNAUTHORIZED => {
            "That token is unknown or has been revoked: it may be an old sign-in link. \
             Paste a current token (an admin can create a new token)."
                .to_owned()
        }
        StatusCode::FORBIDDEN if e.code == "agent_token" => {
            "Agent tokens cannot sign in here: use a person's token (admin or approver).".to_owned()
        }
        StatusCode::FORBIDDEN => format!(
            "Signing in was refused: {} Open this server's own sign-in page and paste the \
             token there.",
            sentence(&e.message)
        ),
        _ => format!("Signing in did not work: {}", sentence(&e.message)),
    };
    sign_in_page(e.status, Some(&message))
}

/// `text` as a sentence: a capital first letter and a full stop.
fn sentence(text: &str) -> String {
    let mut chars = text.trim().chars();
    let mut out: String = chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default();
    if !out.ends_with(['.', '!', '?']) {
        out.push('.');
    }
    out
}

/// `text` safe inside an element: it can carry what a request sent (an `Origin`, a `Host`).
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_text_and_sentences() {
        assert_eq!(
            escape("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
        assert_eq!(
            sentence("requests from x are refused"),
            "Requests from x are refused."
        );
        assert_eq!(sentence("done."), "Done.");
    }
}
