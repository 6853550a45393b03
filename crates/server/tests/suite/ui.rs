//! The web interface's shell: its pages, its embedded files, signing in with a pasted token,
//! and the security headers on every response.

use reqwest::Method;

use super::{Api, Reply, TestServer, browser};

const CSP: &str = "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

fn header<'a>(reply: &'a Reply, name: &str) -> &'a str {
    reply
        .headers
        .get(name)
        .map(|v| v.to_str().unwrap())
        .unwrap_or_default()
}

#[track_caller]
fn assert_secured(what: &str, reply: &Reply) {
    assert_eq!(header(reply, "content-security-policy"), CSP, "{what}");
    assert_eq!(header(reply, "x-content-type-options"), "nosniff", "{what}");
    // The sign-in page alone lets the browser name this origin in its form's POST.
    let referrer = if what.starts_with("sign-in page") {
        "same-origin"
    } else {
        "no-referrer"
    };
    assert_eq!(header(reply, "referrer-policy"), referrer, "{what}");
}

/// Posts the sign-in form with `token`, from `origin` when given.
async fn sign_in(api: &Api, token: &str, origin: Option<&str>) -> Reply {
    let body: String = form_urlencoded::Serializer::new(String::new())
        .append_pair("token", token)
        .finish();
    let mut request = api
        .request(Method::POST, "/signin")
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body);
    if let Some(origin) = origin {
        request = request.header("origin", origin);
    }
    api.send(request).await
}

async fn with_cookie(api: &Api, path: &str, cookie: &str) -> Reply {
    api.send(api.request(Method::GET, path).header("cookie", cookie))
        .await
}

/// The session cookie a sign-in set (`name=value`), if any.
fn cookie_of(reply: &Reply) -> Option<String> {
    let set = reply.headers.get("set-cookie")?.to_str().unwrap();
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(set.contains(attribute), "{set}");
    }
    Some(set.split(';').next().unwrap().to_owned())
}

#[tokio::test]
async fn every_kind_of_response_carries_the_security_headers() {
    let t = TestServer::start().await;
    let anonymous = t.api.anonymous();
    let token = t.server.admin_token().unwrap();
    let (cookie, _) = browser(&t, token).await;
    let cases = [
        ("page", with_cookie(&anonymous, "/", &cookie).await, 200),
        (
            "hold page",
            with_cookie(&anonymous, "/holds/anything", &cookie).await,
            200,
        ),
        ("sign-in page", anonymous.get("/signin").await, 200),
        (
            "sign-in page of a revoked link",
            anonymous.get("/login?token=hp_unknown").await,
            401,
        ),
        ("redirect", anonymous.get("/").await, 303),
        (
            "sign-in link",
            anonymous.get(&format!("/login?token={token}")).await,
            303,
        ),
        ("asset", anonymous.get("/ui/app.js").await, 200),
        ("unknown asset", anonymous.get("/ui/nothing.js").await, 404),
        ("API", t.api.get("/api/v1/worlds").await, 200),
        ("API error", anonymous.get("/api/v1/worlds").await, 401),
        ("unknown route", t.api.get("/nowhere").await, 404),
        ("probe", anonymous.get("/healthz").await, 200),
        ("metrics", anonymous.get("/metrics").await, 200),
        (
            "foreign host",
            anonymous
                .send(
                    anonymous
                        .request(Method::GET, "/")
                        .header("host", "evil.example"),
                )
                .await,
            421,
        ),
        (
            "long URI",
            anonymous.get(&format!("/?{}", "a".repeat(9000))).await,
            414,
        ),
    ];
    for (what, reply, status) in &cases {
        assert_eq!(reply.status, *status, "{what}: {}", reply.text);
        assert_secured(what, reply);
    }
}

#[tokio::test]
async fn assets_are_served_with_their_types_and_revalidated_by_etag() {
    let t = TestServer::start().await;
    let api = t.api.anonymous();
    for (path, content_type, start) in [
        ("/ui/app.js", "text/javascript; charset=utf-8", "// "),
        ("/ui/api.js", "text/javascript; charset=utf-8", "// "),
        ("/ui/app.css", "text/css; charset=utf-8", "/* "),
        ("/ui/icon.svg", "image/svg+xml", "<svg "),
    ] {
        let reply = api.get(path).await;
        assert_eq!(reply.status, 200, "{path}");
        assert_eq!(header(&reply, "content-type"), content_type, "{path}");
        assert_eq!(header(&reply, "cache-control"), "no-cache", "{path}");
        assert!(reply.text.starts_with(start), "{path}: {}", reply.text);
        let etag = header(&reply, "etag").to_owned();
        assert!(etag.starts_with('"') && etag.len() > 10, "{path}: {etag}");

        // Unchanged: 304 without the body.
        let again = api
            .send(
                api.request(Method::GET, path)
                    .header("if-none-match", &etag),
            )
            .await;
        assert_eq!(again.status, 304, "{path}");
        assert_eq!(header(&again, "etag"), etag);
        assert!(again.text.is_empty());
        // Another version: the file.
        let stale = api
            .send(
                api.request(Method::GET, path)
                    .header("if-none-match", "\"0123\""),
            )
            .await;
        assert_eq!(stale.status, 200, "{path}");
    }
    // The files differ, so their tags do.
    let js = api.get("/ui/app.js").await;
    let css = api.get("/ui/app.css").await;
    assert_ne!(header(&js, "etag"), header(&css, "etag"));

    for unknown in ["/ui/nothing.js", "/ui/a/b.css", "/ui/..%2Fshell.html"] {
        let (code, message) = api.get(unknown).await.error(404);
        assert_eq!(code, "not_found", "{unknown}");
        assert!(message.contains("/ui/"), "{message}");
    }
}

/// The `src` and `href` values of a page.
fn links(html: &str) -> Vec<String> {
    let mut out = Vec::new();
    for attribute in ["src=\"", "href=\""] {
        for part in html.split(attribute).skip(1) {
            out.push(part.split('"').next().unwrap().to_owned());
        }
    }
    out
}

/// No inline script or style: every `<script>` loads a file and holds nothing, and no element
/// has a `style` attribute, a `<style>` block or an event handler attribute.
#[track_caller]
fn assert_no_inline_code(what: &str, html: &str) {
    let lower = html.to_ascii_lowercase();
    for part in lower.split("<script").skip(1) {
        let (tag, rest) = part.split_once('>').unwrap();
        assert!(tag.contains(" src=\""), "{what}: a script without src");
        assert!(
            rest.starts_with("</script>"),
            "{what}: a script with content"
        );
    }
    assert!(!lower.contains("style="), "{what}: a style attribute");
    assert!(!lower.contains("<style"), "{what}: a style element");
    assert!(
        !lower.contains(" on"),
        "{what}: maybe an event handler: {html}"
    );
    assert!(!lower.contains("javascript:"), "{what}");
}

#[tokio::test]
async fn a_browser_without_a_session_gets_the_sign_in_page() {
    let t = TestServer::start().await;
    let api = t.api.anonymous();
    for cookie in [None, Some("holdpoint_session=hs_madeup")] {
        let mut request = api.request(Method::GET, "/");
        if let Some(cookie) = cookie {
            request = request.header("cookie", cookie);
        }
        let reply = api.send(request).await;
        assert_eq!(reply.status, 303, "{cookie:?}");
        assert_eq!(header(&reply, "location"), "/signin");
    }
    let page = api.get("/signin").await;
    assert_eq!(page.status, 200);
    assert_eq!(header(&page, "content-type"), "text/html; charset=utf-8");
    assert_eq!(header(&page, "cache-control"), "no-store");
    assert!(page.text.contains("<form"), "{}", page.text);
    assert!(page.text.contains("action=\"/signin\""));
    assert!(page.text.contains("name=\"token\""));
    assert!(!page.text.contains("role=\"alert\""), "no error yet");
    assert_no_inline_code("sign-in page", &page.text);
    for link in links(&page.text) {
        assert_eq!(api.get(&link).await.status, 200, "{link}");
    }
}

/// Every ES module of the web interface.
const MODULES: &[&str] = &[
    "app.js",
    "api.js",
    "dom.js",
    "live.js",
    "wire.js",
    "card.js",
    "inbox.js",
    "hold.js",
    "chats.js",
    "manage.js",
    "policy.js",
];

#[tokio::test]
async fn signed_in_the_shell_loads_one_module_and_one_stylesheet_from_ui() {
    let t = TestServer::start().await;
    let api = t.api.anonymous();
    let (cookie, _) = browser(&t, t.server.admin_token().unwrap()).await;
    let shell = with_cookie(&api, "/", &cookie).await;
    assert_eq!(shell.status, 200, "{}", shell.text);
    assert_eq!(header(&shell, "content-type"), "text/html; charset=utf-8");
    assert_eq!(header(&shell, "cache-control"), "no-store");
    assert_no_inline_code("shell", &shell.text);
    assert_eq!(shell.text.matches("<script type=\"module\"").count(), 1);
    assert_eq!(shell.text.matches("rel=\"stylesheet\"").count(), 1);
    let links = links(&shell.text);
    assert!(links.contains(&"/ui/app.js".to_owned()), "{links:?}");
    assert!(links.contains(&"/ui/app.css".to_owned()), "{links:?}");
    // Files come from /ui/ (no other origin); the header's links are the interface's pages.
    for link in links.iter().filter(|l| !l.starts_with('#')) {
        let reply = if link.starts_with("/ui/") {
            api.get(link).await
        } else {
            with_cookie(&api, link, &cookie).await
        };
        assert!(link.starts_with('/') && !link.starts_with("//"), "{link}");
        assert_eq!(reply.status, 200, "{link}");
    }
    // The module reads who is signed in from the public API, and puts text in as text.
    assert!(
        api.get("/ui/api.js")
            .await
            .text
            .contains("\"/api/v1/session\"")
    );
    assert!(api.get("/ui/app.js").await.text.contains("textContent"));
    for script in MODULES {
        let reply = api.get(&format!("/ui/{script}")).await;
        assert_eq!(reply.status, 200, "{script}");
        let text = reply.text;
        for markup in [
            "innerHTML",
            "outerHTML",
            "insertAdjacentHTML",
            "document.write",
        ] {
            assert!(!text.contains(markup), "{script} uses {markup}");
        }
    }
}

#[tokio::test]
async fn the_sign_in_link_redirects_to_a_url_without_the_token() {
    let t = TestServer::start().await;
    let token = t.server.admin_token().unwrap();
    let reply = t
        .api
        .anonymous()
        .get(&format!("/login?token={token}"))
        .await;
    assert_eq!(reply.status, 303);
    assert_eq!(header(&reply, "location"), "/");
    assert_eq!(header(&reply, "cache-control"), "no-store");
    assert_eq!(header(&reply, "referrer-policy"), "no-referrer");
    assert!(cookie_of(&reply).is_some());
}

#[tokio::test]
async fn signing_in_with_a_pasted_token_sets_the_cookie_and_a_bad_token_does_not() {
    let t = TestServer::start().await;
    let api = t.api.anonymous();
    let alice = t.token("alice", "approver", None).await;

    // Pasted with the spaces a copy brings along.
    let reply = sign_in(&api, &format!(" {alice}\n"), Some(&t.server.url())).await;
    assert_eq!(reply.status, 303, "{}", reply.text);
    assert_eq!(header(&reply, "location"), "/");
    assert_eq!(header(&reply, "cache-control"), "no-store");
    let cookie = cookie_of(&reply).expect("a session cookie");
    let session = with_cookie(&api, "/api/v1/session", &cookie)
        .await
        .expect(200);
    assert_eq!(session["name"], "alice");
    assert_eq!(with_cookie(&api, "/", &cookie).await.status, 200);

    // A browser that sends no Origin (a program) signs in too.
    let reply = sign_in(&api, &alice, None).await;
    assert_eq!(reply.status, 303, "{}", reply.text);

    let bad = format!("{alice}x");
    let agent = t.token("bot", "agent", None).await;
    for (token, status, says) in [
        (bad.as_str(), 401, "unknown or has been revoked"),
        ("", 401, "unknown or has been revoked"),
        (agent.as_str(), 403, "Agent tokens cannot sign in"),
    ] {
        let reply = sign_in(&api, token, Some(&t.server.url())).await;
        assert_eq!(reply.status, status, "{token:?}: {}", reply.text);
        assert!(reply.headers.get("set-cookie").is_none(), "{token:?}");
        assert_eq!(header(&reply, "content-type"), "text/html; charset=utf-8");
        assert!(reply.text.contains(says), "{token:?}: {}", reply.text);
        assert!(reply.text.contains("role=\"alert\""));
        assert!(reply.text.contains("<form"), "the form again");
        if !token.is_empty() {
            assert!(!reply.text.contains(token), "the token is repeated");
            assert!(
                !reply.text.contains(&token[3..12]),
                "part of the token is repeated"
            );
        }
        assert_no_inline_code("sign-in page with an error", &reply.text);
    }

    // A form without the field, or not a form.
    let body = api
        .send(
            api.request(Method::POST, "/signin")
                .header("content-type", "application/x-www-form-urlencoded")
                .body("name=alice"),
        )
        .await
        .expect(422);
    assert_eq!(body["error"]["code"], "invalid_input");
    assert_eq!(body["error"]["details"]["field"], "token");
    let (code, _) = api
        .send(
            api.request(Method::POST, "/signin")
                .json(&serde_json::json!({"token": alice})),
        )
        .await
        .error(415);
    assert_eq!(code, "unsupported_media_type");
}

/// A login CSRF (a page signing the visitor in as someone else) comes from a page of another
/// origin, or of none (`Origin: null`); the sign-in page says so, in HTML. A browser that
/// says the form is this origin's own (`Sec-Fetch-Site`, which no page can set) is taken
/// even with `Origin: null`.
#[tokio::test]
async fn the_sign_in_form_refuses_pages_of_other_origins() {
    let t = TestServer::start().await;
    let api = t.api.anonymous();
    let alice = t.token("alice", "approver", None).await;
    let post = |origin: &str, site: Option<&str>| {
        let body: String = form_urlencoded::Serializer::new(String::new())
            .append_pair("token", &alice)
            .finish();
        let mut request = api
            .request(Method::POST, "/signin")
            .header("content-type", "application/x-www-form-urlencoded")
            .header("origin", origin)
            .body(body);
        if let Some(site) = site {
            request = request.header("sec-fetch-site", site);
        }
        request
    };
    for (origin, site) in [
        ("https://evil.example", None),
        ("https://evil.example", Some("same-origin")),
        ("null", None),
        ("null", Some("cross-site")),
        ("null", Some("same-site")),
    ] {
        let reply = api.send(post(origin, site)).await;
        assert_eq!(reply.status, 403, "{origin} {site:?}: {}", reply.text);
        assert!(reply.headers.get("set-cookie").is_none(), "{origin}");
        assert_eq!(header(&reply, "content-type"), "text/html; charset=utf-8");
        assert!(reply.text.contains("role=\"alert\""), "{}", reply.text);
        assert!(
            reply.text.contains("Signing in was refused"),
            "{}",
            reply.text
        );
        assert!(reply.text.contains("action=\"/signin\""), "the form again");
        assert!(!reply.text.contains(&alice[3..12]), "the token is repeated");
        assert!(!reply.text.contains("<script"), "{}", reply.text);
    }
    let reply = api.send(post("null", Some("same-origin"))).await;
    assert_eq!(reply.status, 303, "{}", reply.text);
    assert!(cookie_of(&reply).is_some());

    // Another origin's request to the rest of the API is still the API's error.
    let reply = api
        .send(
            api.request(Method::POST, "/api/v1/logout")
                .header("origin", "null")
                .header("sec-fetch-site", "same-origin"),
        )
        .await;
    assert_eq!(reply.status, 403);
    assert_eq!(reply.body["error"]["code"], "forbidden");
}

/// A sign-in link that does not sign in is the sign-in page saying why, never JSON.
#[tokio::test]
async fn a_sign_in_link_that_does_not_work_is_the_sign_in_page_saying_why() {
    let t = TestServer::start().await;
    let api = t.api.anonymous();
    let bot = t.token("bot", "agent", None).await;
    let alice = t.token("alice", "approver", None).await;
    let foreign = api
        .send(
            api.request(Method::GET, &format!("/login?token={alice}"))
                .header("origin", "https://evil.example"),
        )
        .await;
    // A name the server does not answer to: what it says carries the name, as text.
    let elsewhere = api
        .send(
            api.request(Method::GET, "/signin")
                .header("host", "<b>evil.example"),
        )
        .await;
    assert!(
        elsewhere.text.contains("&lt;b&gt;evil.example"),
        "{}",
        elsewhere.text
    );
    for (what, reply, status, says) in [
        (
            "a revoked token",
            api.get("/login?token=hp_unknown").await,
            401,
            "unknown or has been revoked",
        ),
        (
            "an agent's token",
            api.get(&format!("/login?token={bot}")).await,
            403,
            "Agent tokens cannot sign in",
        ),
        ("no token", api.get("/login").await, 400, "no token in it"),
        ("another origin", foreign, 403, "Signing in was refused"),
        ("another host", elsewhere, 421, "answers to"),
    ] {
        assert_eq!(reply.status, status, "{what}: {}", reply.text);
        assert_eq!(
            header(&reply, "content-type"),
            "text/html; charset=utf-8",
            "{what}"
        );
        assert_eq!(header(&reply, "cache-control"), "no-store", "{what}");
        assert!(reply.headers.get("set-cookie").is_none(), "{what}");
        assert!(reply.text.contains(says), "{what}: {}", reply.text);
        assert!(
            reply.text.contains("action=\"/signin\""),
            "{what}: the form"
        );
        assert!(!reply.text.contains(&bot[3..12]), "{what}: the token");
    }
}

#[tokio::test]
async fn after_signing_out_the_session_no_longer_works() {
    let t = TestServer::start().await;
    let api = t.api.anonymous();
    let alice = t.token("alice", "approver", None).await;
    let reply = sign_in(&api, &alice, Some(&t.server.url())).await;
    let cookie = cookie_of(&reply).unwrap();
    let session = with_cookie(&api, "/api/v1/session", &cookie)
        .await
        .expect(200);
    let csrf = session["csrf_token"].as_str().unwrap();

    let out = api
        .request(Method::POST, "/api/v1/logout")
        .header("cookie", &cookie)
        .header("x-csrf-token", csrf)
        .header("origin", t.server.url());
    let reply = api.send(out).await;
    assert_eq!(reply.status, 204);
    assert!(header(&reply, "set-cookie").contains("Max-Age=0"));

    with_cookie(&api, "/api/v1/session", &cookie)
        .await
        .error(401);
    let home = with_cookie(&api, "/", &cookie).await;
    assert_eq!(home.status, 303);
    assert_eq!(header(&home, "location"), "/signin");
}

/// The tabs' shared stream takes every event type from the start (`EVENT_TYPES` of wire.js,
/// generated from the protocol: see `ui_wire`), so an event that arrives before a view's
/// listener reached the worker is still handed over.
#[tokio::test]
async fn the_shared_live_stream_takes_every_event_type() {
    let t = TestServer::start().await;
    let api = t.api.anonymous();
    let live = api.get("/ui/live.js").await.text;
    assert!(
        live.contains("import { EVENT_TYPES } from \"./wire.js\";"),
        "{live}"
    );
    assert!(live.contains("types: [...new Set([...EVENT_TYPES, ...listeners.keys()])]"));
    let wire = api.get("/ui/wire.js").await;
    assert_eq!(wire.status, 200);
    assert!(
        wire.text
            .contains("export const EVENT_TYPES = Object.freeze([")
    );
    let worker = api.get("/ui/live-worker.js").await;
    assert_eq!(worker.status, 200);
    assert_eq!(
        header(&worker, "content-type"),
        "text/javascript; charset=utf-8"
    );
}
