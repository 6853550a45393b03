//! Tokens, roles, browser sessions, CSRF, Host and Origin.

use reqwest::Method;
use serde_json::json;

use super::{Api, TestServer, browser, held, question, raise};

#[tokio::test]
async fn the_first_start_writes_an_admin_token_only_its_owner_can_read() {
    use std::os::unix::fs::PermissionsExt;
    let t = TestServer::start().await;
    let file = t.server.admin_token_file();
    let mode = std::fs::metadata(file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    assert_eq!(
        std::fs::read_to_string(file).unwrap().trim(),
        t.server.admin_token().unwrap()
    );
    let login = t.server.login_url().unwrap();
    assert!(
        login.starts_with(&format!("{}/login?token=hp_", t.server.url())),
        "{login}"
    );
    let me = t.api.get("/api/v1/session").await.expect(200);
    assert_eq!(
        (me["name"].as_str(), me["role"].as_str()),
        (Some("admin"), Some("admin"))
    );
}

#[tokio::test]
async fn calls_without_a_valid_token_are_refused() {
    let t = TestServer::start().await;
    let anonymous = t.api.anonymous();
    let reply = anonymous.get("/api/v1/worlds").await;
    assert_eq!(reply.headers.get("www-authenticate").unwrap(), "Bearer");
    assert_eq!(reply.error(401).0, "unauthorized");
    let (code, message) = t
        .api
        .as_token("hp_made_up")
        .get("/api/v1/holds")
        .await
        .error(401);
    assert_eq!(code, "unauthorized");
    assert!(message.contains("unknown or revoked"), "{message}");
    // Health, readiness and the API description need no token.
    anonymous.get("/healthz").await.expect(200);
    anonymous.get("/readyz").await.expect(200);
    anonymous.get("/api/v1/openapi.json").await.expect(200);
}

#[tokio::test]
async fn only_admins_manage_tokens_and_revoked_tokens_stop_working() {
    let t = TestServer::start().await;
    let alice = t.caller("alice", "approver", None).await;
    let (code, message) = alice
        .post("/api/v1/tokens", json!({"name": "eve", "role": "admin"}))
        .await
        .error(403);
    assert_eq!(code, "forbidden");
    assert!(
        message.contains("role admin") && message.contains("alice is approver"),
        "{message}"
    );
    alice.get("/api/v1/tokens").await.error(403);

    let listed = t.api.get("/api/v1/tokens").await.expect(200);
    let names: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["admin", "alice"]);
    // Secrets are shown once, never listed.
    assert!(!listed.to_string().contains("hp_"));

    let alice_id = listed[1]["id"].as_str().unwrap();
    t.api
        .delete(&format!("/api/v1/tokens/{alice_id}"))
        .await
        .expect(204);
    alice.get("/api/v1/holds").await.error(401);
    t.api
        .delete(&format!("/api/v1/tokens/{alice_id}"))
        .await
        .error(404);
}

#[tokio::test]
async fn token_requests_are_validated() {
    let t = TestServer::start().await;
    let (_, message) = t
        .api
        .post("/api/v1/tokens", json!({"name": "x", "role": "root"}))
        .await
        .error(422);
    assert!(
        message.starts_with("role: unknown variant `root`"),
        "{message}"
    );
    let (_, message) = t
        .api
        .post("/api/v1/tokens", json!({"name": "", "role": "agent"}))
        .await
        .error(422);
    assert!(message.starts_with("name:"), "{message}");
    let (_, message) = t
        .api
        .post("/api/v1/tokens", json!({"role": "agent"}))
        .await
        .error(422);
    assert_eq!(message, "name: is required");
    // An admin limited to a world could create worlds and unlimited tokens.
    t.world("lab").await;
    let (_, message) = t
        .api
        .post(
            "/api/v1/tokens",
            json!({"name": "lab-admin", "role": "admin", "world": "lab"}),
        )
        .await
        .error(422);
    assert!(
        message.starts_with("world: admins are not limited"),
        "{message}"
    );
    let (_, message) = t
        .api
        .post(
            "/api/v1/tokens",
            json!({"name": "bot", "role": "agent", "world": "nowhere"}),
        )
        .await
        .error(404);
    assert!(message.contains("nowhere"), "{message}");
}

#[tokio::test]
async fn an_agent_cannot_decide_and_a_second_decision_gets_the_recorded_one() {
    let t = TestServer::start().await;
    t.world("lab").await;
    let agent = t.caller("bot", "agent", None).await;
    let alice = t.caller("alice", "approver", None).await;
    let bob = t.caller("bob", "approver", None).await;
    let hold = held(
        &raise(&agent, "lab", vec![question("Deploy?", &["yes", "no"])]).await,
        0,
    );
    let decision = json!({"action": "answer", "options": ["yes"]});
    let path = format!("/api/v1/holds/{hold}/decision");

    let (code, _) = agent.post(&path, decision.clone()).await.error(403);
    assert_eq!(code, "forbidden");
    let first = alice.post(&path, decision.clone()).await.expect(200);
    assert_eq!(first["hold"]["outcome"]["decided_by"], json!(["alice"]));

    let second = bob
        .post(&path, json!({"action": "answer", "options": ["no"]}))
        .await;
    let body = second.expect(409);
    assert_eq!(body["error"]["code"], "already_decided");
    assert_eq!(
        body["error"]["details"]["hold"]["outcome"],
        first["hold"]["outcome"]
    );
}

#[tokio::test]
async fn holds_of_other_worlds_and_made_up_ids_are_not_found() {
    let t = TestServer::start().await;
    t.world("lab").await;
    t.world("prod").await;
    let lab_agent = t.caller("lab-bot", "agent", Some("lab")).await;
    let prod_approver = t.caller("pat", "approver", Some("prod")).await;
    let hold = held(
        &raise(&lab_agent, "lab", vec![question("Go?", &["yes", "no"])]).await,
        0,
    );

    let decision = json!({"action": "answer", "options": ["yes"]});
    let (code, _) = prod_approver
        .post(&format!("/api/v1/holds/{hold}/decision"), decision.clone())
        .await
        .error(404);
    assert_eq!(code, "not_found");
    prod_approver
        .get(&format!("/api/v1/holds/{hold}"))
        .await
        .error(404);
    let listed = prod_approver.get("/api/v1/holds").await.expect(200);
    assert_eq!(listed["items"], json!([]));
    // A world-limited credential cannot see or use other worlds.
    prod_approver.get("/api/v1/worlds/lab").await.error(404);
    lab_agent
        .post(
            "/api/v1/worlds/prod/holds",
            json!({"items": [question("Go?", &["yes"])]}),
        )
        .await
        .error(404);
    let worlds = prod_approver.get("/api/v1/worlds").await.expect(200);
    assert_eq!(worlds.as_array().unwrap().len(), 1);

    for id in ["0192f0c0-0000-7000-8000-000000000000", "not-an-id"] {
        t.api
            .post(&format!("/api/v1/holds/{id}/decision"), decision.clone())
            .await
            .error(404);
        t.api.get(&format!("/api/v1/holds/{id}")).await.error(404);
    }
}

#[tokio::test]
async fn browser_sessions_need_the_csrf_token_to_change_anything() {
    let t = TestServer::start().await;
    let (cookie, csrf) = browser(&t, t.server.admin_token().unwrap()).await;
    let api = t.api.anonymous();
    let world = |name: &str| json!({"name": name});

    // Reading needs only the cookie.
    api.send(
        api.request(Method::GET, "/api/v1/worlds")
            .header("cookie", &cookie),
    )
    .await
    .expect(200);
    let (code, _) = api
        .send(
            api.request(Method::POST, "/api/v1/worlds")
                .header("cookie", &cookie)
                .json(&world("a")),
        )
        .await
        .error(403);
    assert_eq!(code, "csrf_token_missing");
    let wrong = api
        .request(Method::POST, "/api/v1/worlds")
        .header("cookie", &cookie)
        .header("x-csrf-token", "0".repeat(64));
    let (code, _) = api.send(wrong.json(&world("b"))).await.error(403);
    assert_eq!(code, "csrf_token_invalid");
    let right = api
        .request(Method::POST, "/api/v1/worlds")
        .header("cookie", &cookie)
        .header("x-csrf-token", &csrf);
    api.send(right.json(&world("c"))).await.expect(201);

    // Logging out ends the session.
    let out = api
        .request(Method::POST, "/api/v1/logout")
        .header("cookie", &cookie)
        .header("x-csrf-token", &csrf);
    api.send(out).await.expect(204);
    api.send(
        api.request(Method::GET, "/api/v1/worlds")
            .header("cookie", &cookie),
    )
    .await
    .error(401);
}

#[tokio::test]
async fn agents_cannot_sign_in_and_revoking_a_token_ends_its_sessions() {
    let t = TestServer::start().await;
    let bot = t.token("bot", "agent", None).await;
    // A browser's link: the sign-in page says why (tests/suite/ui.rs).
    for (link, status) in [
        (format!("/login?token={bot}"), 403),
        ("/login?token=hp_unknown".to_owned(), 401),
        ("/login".to_owned(), 400),
    ] {
        let reply = t.api.anonymous().get(&link).await;
        assert_eq!(reply.status, status, "{link}");
        assert!(reply.headers.get("set-cookie").is_none(), "{link}");
    }

    let alice = t.token("alice", "approver", None).await;
    let (cookie, _) = browser(&t, &alice).await;
    let tokens = t.api.get("/api/v1/tokens").await.expect(200);
    let id = tokens
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "alice")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    t.api
        .delete(&format!("/api/v1/tokens/{id}"))
        .await
        .expect(204);
    let api = t.api.anonymous();
    api.send(
        api.request(Method::GET, "/api/v1/holds")
            .header("cookie", &cookie),
    )
    .await
    .error(401);
}

#[tokio::test]
async fn foreign_hosts_and_origins_are_refused() {
    let t = TestServer::start().await;
    let api = &t.api;
    // A DNS-rebinding page reaches the port under another name.
    let (code, _) = api
        .send(
            api.request(Method::GET, "/api/v1/worlds")
                .header("host", "evil.example:7717"),
        )
        .await
        .error(421);
    assert_eq!(code, "unknown_host");
    api.send(
        api.request(Method::GET, "/metrics")
            .header("host", "evil.example"),
    )
    .await
    .error(421);
    // Probes answer whatever the name: orchestrators call them by address.
    api.send(
        api.request(Method::GET, "/healthz")
            .header("host", "10.0.0.7:7717"),
    )
    .await
    .expect(200);
    // Another site's page calling the API.
    let (code, _) = api
        .send(
            api.request(Method::POST, "/api/v1/worlds")
                .header("origin", "https://evil.example")
                .json(&json!({"name": "x"})),
        )
        .await
        .error(403);
    assert_eq!(code, "forbidden");
    // The server's own pages may.
    let own = t.server.url();
    api.send(
        api.request(Method::POST, "/api/v1/worlds")
            .header("origin", own)
            .json(&json!({"name": "x"})),
    )
    .await
    .expect(201);
    let port = t.server.addr().port();
    api.send(
        api.request(Method::GET, "/api/v1/worlds")
            .header("host", format!("localhost:{port}")),
    )
    .await
    .expect(200);
}

#[tokio::test]
async fn configured_host_names_are_accepted() {
    let t = TestServer::with(super::ASK_ALL, |s| {
        s.server.allowed_hosts = vec!["holdpoint.example.com".into()]
    })
    .await;
    let api = &t.api;
    api.send(
        api.request(Method::GET, "/api/v1/worlds")
            .header("host", "holdpoint.example.com"),
    )
    .await
    .expect(200);
    api.send(
        api.request(Method::GET, "/api/v1/worlds")
            .header("origin", "https://holdpoint.example.com"),
    )
    .await
    .expect(200);
    api.send(
        api.request(Method::GET, "/api/v1/worlds")
            .header("host", "other.example.com"),
    )
    .await
    .error(421);
}

#[tokio::test]
async fn creating_and_revoking_a_token_is_logged_with_who_did_it_and_never_the_secret() {
    let t = TestServer::start().await;
    t.world("lab").await;
    let carol = t.caller("carol", "admin", None).await;
    let from = t
        .server
        .app()
        .store()
        .audit_head()
        .await
        .unwrap()
        .unwrap()
        .seq;
    let created = carol
        .post(
            "/api/v1/tokens",
            json!({"name": "ci", "role": "approver", "world": "lab"}),
        )
        .await
        .expect(201);
    let id = created["info"]["id"].as_str().unwrap();
    let secret = created["token"].as_str().unwrap();
    carol
        .delete(&format!("/api/v1/tokens/{id}"))
        .await
        .expect(204);

    let events = t
        .api
        .get(&format!("/api/v1/audit/events?after={from}"))
        .await
        .expect(200)["events"]
        .clone();
    let events = events.as_array().unwrap();
    let carol_actor = json!({"source": "person", "name": "carol", "role": "admin"});
    let logged: Vec<_> = events
        .iter()
        .map(|e| {
            (
                e["payload"]["type"].as_str().unwrap(),
                e["actor"].clone(),
                e["payload"]["token"]["id"].as_str().unwrap(),
                e["payload"]["token"]["name"].as_str().unwrap(),
                e["payload"]["token"]["role"].as_str().unwrap(),
                e["payload"]["token"]["world"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        logged,
        [
            (
                "token.created",
                carol_actor.clone(),
                id,
                "ci",
                "approver",
                "lab"
            ),
            ("token.revoked", carol_actor, id, "ci", "approver", "lab"),
        ]
    );
    let text = serde_json::to_string(events).unwrap();
    assert!(!text.contains(secret), "the secret is in the log: {text}");
}

#[tokio::test]
async fn every_token_is_listed_however_many_there_are() {
    use holdpoint_core::record::put;
    use holdpoint_core::store::RecordKind;
    let t = TestServer::start().await;
    let admin = t.api.get("/api/v1/tokens").await.expect(200)[0].clone();
    // More than the one page of 10,000 the listing used to read, stored in one transaction
    // (as tokens are stored: under the SHA-256 of a secret).
    const MANY: usize = 10_001;
    let writes = (0..MANY)
        .map(|i| {
            let id = uuid::Uuid::now_v7();
            let token = json!({"id": id, "name": format!("bot-{i}"), "role": "agent",
                "created_at": admin["created_at"]});
            put(
                RecordKind::Token,
                id,
                None,
                Some(format!("{i:064x}")),
                1,
                &token,
            )
            .unwrap()
        })
        .collect();
    t.server
        .app()
        .records()
        .commit(writes, vec![])
        .await
        .unwrap();
    let listed = t.api.get("/api/v1/tokens").await.expect(200);
    let listed = listed.as_array().unwrap();
    assert_eq!(listed.len(), MANY + 1);
    assert_eq!(listed[0], admin);
    assert_eq!(listed[MANY]["name"], format!("bot-{}", MANY - 1));
}

#[tokio::test]
async fn only_admins_see_token_events_in_the_stream_and_the_audit_log() {
    let t = TestServer::start().await;
    t.world("lab").await;
    let agent = t.caller("bot", "agent", None).await;
    let alice = t.caller("alice", "approver", None).await;
    let from = t.api.get("/api/v1/audit/verify").await.expect(200)["events"]
        .as_u64()
        .unwrap();
    let mut admin_stream = t.api.events("", None).await;
    let mut approver_stream = alice.events("", None).await;
    let mut agent_stream = agent.events("", None).await;

    let created = t
        .api
        .post("/api/v1/tokens", json!({"name": "ci", "role": "agent"}))
        .await
        .expect(201);
    let id = created["info"]["id"].as_str().unwrap();
    t.api
        .delete(&format!("/api/v1/tokens/{id}"))
        .await
        .expect(204);
    // Something everyone sees, after the token events.
    let hold = held(
        &raise(&agent, "lab", vec![question("Go?", &["yes"])]).await,
        0,
    );

    for stream in [&mut approver_stream, &mut agent_stream] {
        let m = stream.next().await;
        assert_eq!(
            (m.event.as_str(), m.data["hold"].as_str()),
            ("hold.created", Some(hold.as_str()))
        );
    }
    let seen: Vec<String> = [
        admin_stream.next().await,
        admin_stream.next().await,
        admin_stream.next().await,
    ]
    .into_iter()
    .map(|m| m.event)
    .collect();
    assert_eq!(seen, ["token.created", "token.revoked", "hold.created"]);

    let listed = |api: &Api| {
        let api = api.clone();
        async move {
            api.get(&format!("/api/v1/audit/events?after={from}"))
                .await
                .expect(200)["events"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e["payload"]["type"].as_str().unwrap().to_owned())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        listed(&t.api).await,
        ["token.created", "token.revoked", "hold.created"]
    );
    assert_eq!(listed(&alice).await, ["hold.created"]);
}

/// Who may call each route, written out here so that a route's access changes only on
/// purpose: `probe` and `public` need no token, `signed` any caller, and otherwise the roles
/// allowed.
const ACCESS: &[(&str, &str, &str)] = &[
    ("GET", "/", "public"),
    ("GET", "/holds/{hold}", "public"),
    ("GET", "/worlds", "public"),
    ("GET", "/worlds/{world}", "public"),
    ("GET", "/worlds/{world}/chats/{chat}", "public"),
    ("GET", "/worlds/{world}/policy", "public"),
    ("GET", "/worlds/{world}/policy/from/{hold}", "public"),
    ("GET", "/manage", "public"),
    ("GET", "/manage/{section}", "public"),
    ("GET", "/signin", "public"),
    ("POST", "/signin", "public"),
    ("GET", "/ui/{*asset}", "public"),
    ("GET", "/healthz", "probe"),
    ("GET", "/readyz", "probe"),
    ("GET", "/metrics", "public"),
    ("GET", "/login", "public"),
    ("GET", "/api/v1/openapi.json", "public"),
    ("GET", "/api/v1/session", "signed"),
    ("POST", "/api/v1/logout", "signed"),
    ("GET", "/api/v1/tokens", "admin"),
    ("POST", "/api/v1/tokens", "admin"),
    ("DELETE", "/api/v1/tokens/{token}", "admin"),
    ("GET", "/api/v1/worlds", "signed"),
    ("POST", "/api/v1/worlds", "admin"),
    ("GET", "/api/v1/worlds/{world}", "signed"),
    ("PATCH", "/api/v1/worlds/{world}", "admin"),
    ("DELETE", "/api/v1/worlds/{world}", "admin"),
    ("GET", "/api/v1/worlds/{world}/mcp-servers", "agent admin"),
    ("GET", "/api/v1/worlds/{world}/agents", "signed"),
    ("POST", "/api/v1/worlds/{world}/agents", "admin"),
    ("GET", "/api/v1/worlds/{world}/agents/{agent}", "signed"),
    ("PATCH", "/api/v1/worlds/{world}/agents/{agent}", "admin"),
    ("DELETE", "/api/v1/worlds/{world}/agents/{agent}", "admin"),
    ("GET", "/api/v1/worlds/{world}/chats", "admin approver"),
    ("POST", "/api/v1/worlds/{world}/chats", "admin approver"),
    (
        "GET",
        "/api/v1/worlds/{world}/chats/{chat}",
        "admin approver",
    ),
    (
        "PATCH",
        "/api/v1/worlds/{world}/chats/{chat}",
        "admin approver",
    ),
    (
        "DELETE",
        "/api/v1/worlds/{world}/chats/{chat}",
        "admin approver",
    ),
    (
        "GET",
        "/api/v1/worlds/{world}/chats/{chat}/messages",
        "admin approver",
    ),
    (
        "POST",
        "/api/v1/worlds/{world}/chats/{chat}/messages",
        "admin approver",
    ),
    (
        "GET",
        "/api/v1/worlds/{world}/turns/{turn}",
        "admin approver",
    ),
    (
        "POST",
        "/api/v1/worlds/{world}/turns/{turn}/cancel",
        "admin approver",
    ),
    ("POST", "/api/v1/worlds/{world}/holds", "agent admin"),
    ("GET", "/api/v1/holds", "admin approver"),
    ("GET", "/api/v1/holds/counts", "admin approver"),
    ("GET", "/api/v1/holds/{hold}", "signed"),
    ("GET", "/api/v1/holds/{hold}/file", "admin approver"),
    ("GET", "/api/v1/holds/{hold}/notices", "admin approver"),
    ("GET", "/d/{token}", "public"),
    ("POST", "/d/{token}", "public"),
    ("POST", "/slack/interactions", "public"),
    ("POST", "/api/v1/holds/{hold}/decision", "signed"),
    ("POST", "/api/v1/holds/{hold}/default", "signed"),
    ("POST", "/api/v1/batches/{batch}/decision", "signed"),
    ("GET", "/api/v1/holds/{hold}/wait", "signed"),
    ("POST", "/api/v1/holds/{hold}/withdraw", "signed"),
    ("GET", "/api/v1/worlds/{world}/grants", "admin approver"),
    ("DELETE", "/api/v1/grants/{grant}", "admin approver"),
    ("GET", "/api/v1/policy", "admin approver"),
    ("POST", "/api/v1/policy/explain", "admin approver"),
    ("POST", "/api/v1/policy/reload", "admin"),
    ("GET", "/api/v1/worlds/{world}/policy", "admin approver"),
    ("PUT", "/api/v1/worlds/{world}/policy", "admin"),
    (
        "GET",
        "/api/v1/worlds/{world}/policy/history",
        "admin approver",
    ),
    (
        "POST",
        "/api/v1/worlds/{world}/policy/replay",
        "admin approver",
    ),
    (
        "GET",
        "/api/v1/holds/{hold}/suggested-rule",
        "admin approver",
    ),
    ("GET", "/api/v1/worlds/{world}/webhooks", "admin"),
    ("POST", "/api/v1/worlds/{world}/webhooks", "admin"),
    ("DELETE", "/api/v1/webhooks/{webhook}", "admin"),
    ("GET", "/api/v1/webhooks/{webhook}/deliveries", "admin"),
    ("GET", "/api/v1/audit/events", "admin approver"),
    ("GET", "/api/v1/audit/verify", "admin"),
    ("GET", "/api/v1/events", "signed"),
    ("POST", "/mcp/{world}", "agent"),
    ("GET", "/mcp/{world}", "agent"),
    ("DELETE", "/mcp/{world}", "agent"),
    ("POST", "/a2a/{world}/{agent}", "signed"),
    (
        "GET",
        "/a2a/{world}/{agent}/.well-known/agent-card.json",
        "signed",
    ),
];

#[tokio::test]
async fn every_route_refuses_the_callers_its_access_does_not_allow() {
    use holdpoint_protocol::Role;
    use holdpoint_server::Access;

    let t = TestServer::start().await;
    t.world("lab").await;
    let callers = [
        ("admin", t.api.clone()),
        ("approver", t.caller("alice", "approver", None).await),
        ("agent", t.caller("bot", "agent", None).await),
    ];
    let anonymous = t.api.anonymous();
    let declared = holdpoint_server::operations();
    let mut unlisted = Vec::new();
    for (method, template, access) in &declared {
        let Some((_, _, expected)) = ACCESS
            .iter()
            .find(|(m, p, _)| *m == method.as_str() && p == template)
        else {
            unlisted.push(format!("{method} {template}"));
            continue;
        };
        let role = |name: &str| match name {
            "admin" => Role::Admin,
            "approver" => Role::Approver,
            _ => Role::Agent,
        };
        let allowed: Option<Vec<Role>> = match *expected {
            "probe" => {
                assert_eq!(*access, Access::Probe, "{method} {template}");
                None
            }
            "public" => {
                assert_eq!(*access, Access::Public, "{method} {template}");
                None
            }
            "signed" => {
                assert_eq!(*access, Access::Signed, "{method} {template}");
                Some(vec![Role::Admin, Role::Approver, Role::Agent])
            }
            roles => {
                let roles: Vec<Role> = roles.split(' ').map(role).collect();
                assert!(
                    matches!(access, Access::Roles(r) if *r == roles.as_slice()),
                    "{method} {template}: {access:?}"
                );
                Some(roles)
            }
        };
        // Any value fills a path parameter: access is checked before the handler reads it.
        let path = template
            .split('/')
            .map(|s| if s.starts_with('{') { "x" } else { s })
            .collect::<Vec<_>>()
            .join("/");
        let method = Method::from_bytes(method.as_str().as_bytes()).unwrap();
        let status = anonymous
            .send(anonymous.request(method.clone(), &path))
            .await
            .status;
        let Some(allowed) = allowed else {
            assert!(
                ![401, 403].contains(&status),
                "{method} {path} is public, yet a stranger got {status}"
            );
            continue;
        };
        assert_eq!(status, 401, "{method} {path} without a token");
        for (name, api) in &callers {
            if allowed.contains(&role(name)) {
                continue;
            }
            let status = api.send(api.request(method.clone(), &path)).await.status;
            assert_eq!(status, 403, "{method} {path} as {name}");
        }
    }
    assert!(
        unlisted.is_empty(),
        "routes whose access this test does not state yet: {unlisted:?}"
    );
    assert_eq!(
        declared.len(),
        ACCESS.len(),
        "a stated route is not declared"
    );
}

#[tokio::test]
async fn an_agent_sees_only_the_holds_it_raised_and_nothing_of_people_s_work() {
    let t = TestServer::start().await;
    t.world("lab").await;
    let bot = t.caller("bot", "agent", None).await;
    let other = t.caller("other-bot", "agent", None).await;
    let mut stream = bot.events("", None).await;
    let theirs = held(
        &raise(&other, "lab", vec![question("Theirs?", &["yes"])]).await,
        0,
    );
    let mine = held(
        &raise(&bot, "lab", vec![question("Mine?", &["yes"])]).await,
        0,
    );

    // By id: its own hold, and another agent's as if it did not exist.
    bot.get(&format!("/api/v1/holds/{mine}")).await.expect(200);
    bot.get(&format!("/api/v1/holds/{theirs}")).await.error(404);
    bot.get(&format!("/api/v1/holds/{theirs}/wait?timeout=1s"))
        .await
        .error(404);
    bot.post(
        &format!("/api/v1/holds/{theirs}/withdraw"),
        json!({"reason": "mine now"}),
    )
    .await
    .error(404);

    // On the live stream: its own hold's events only, whatever comes between them.
    super::answer(&t.api, &theirs, "yes").await.expect(200);
    super::answer(&t.api, &mine, "yes").await.expect(200);
    let seen: Vec<(String, String)> = [stream.next().await, stream.next().await]
        .into_iter()
        .map(|m| (m.event, m.data["hold"].as_str().unwrap_or("").to_owned()))
        .collect();
    assert_eq!(
        seen,
        [
            ("hold.created".to_owned(), mine.clone()),
            ("hold.decided".to_owned(), mine.clone())
        ]
    );

    // People's work: listings of holds, chats, grants and the policy (explain would tell a
    // program which calls pass unasked).
    for (method, path, body) in [
        (Method::GET, "/api/v1/holds", None),
        (Method::GET, "/api/v1/holds/counts", None),
        (
            Method::POST,
            "/api/v1/policy/explain",
            Some(json!({"world": "lab", "tool": "shell_cmd", "arguments": {"command": "ls"}})),
        ),
        (Method::GET, "/api/v1/worlds/lab/chats", None),
        (Method::POST, "/api/v1/worlds/lab/chats", Some(json!({}))),
        (Method::GET, "/api/v1/worlds/lab/grants", None),
    ] {
        let mut request = bot.request(method.clone(), path);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let (code, _) = bot.send(request).await.error(403);
        assert_eq!(code, "forbidden", "{method} {path}");
    }
}
