//! `holdpoint serve` with its data directory on a small filesystem that fills up: new holds
//! are refused with a clear error, while holds already raised are still read, decided and
//! waited on; after space is freed new holds are taken again, and after a restart everything
//! acknowledged is there and the audit log verifies. While short of space nothing but
//! decisions, withdrawals and timeouts is written (calls the policy allows or denies, admin
//! writes: 507 with `Retry-After`), so they cannot use up the space kept for decisions, and
//! `/readyz` says the server is not ready, and how much space it needs.

use std::time::Duration;

use holdpoint_test_support::eventually;
use holdpoint_test_support::http::{Api, Method};
use holdpoint_test_support::serve::{ServeCommand, Stderr};
use holdpoint_test_support::tmpfs::Tmpfs;
use serde_json::{Value, json};

/// Raises an approval of `deploy` as `agent`; the reply, within a few seconds (a full disk
/// must not make a request hang).
async fn raise(agent: &Api, n: usize) -> holdpoint_test_support::http::Reply {
    let request = agent
        .request(Method::POST, "/api/v1/worlds/lab/holds")
        .json(&json!({"items": [{"kind": "approval", "tool": "deploy", "arguments": {"n": n}}]}));
    tokio::time::timeout(Duration::from_secs(10), agent.send(request))
        .await
        .expect("raising a hold on a full disk hung")
}

fn hold_id(raised: &Value) -> String {
    raised["results"][0]["hold"]["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

async fn token(admin: &Api, name: &str, role: &str) -> String {
    let body = if role == "agent" {
        json!({"name": name, "role": role, "world": "lab"})
    } else {
        json!({"name": name, "role": role})
    };
    admin.post("/api/v1/tokens", body).await.expect(201)["token"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn a_full_disk_refuses_new_holds_and_keeps_deciding_the_ones_it_has() {
    let Some(fs) = Tmpfs::mount(32) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("holdpoint.toml");
    std::fs::write(&config, "[log]\nlevel = \"warn\"\n").unwrap();
    let command = ServeCommand::new(env!("CARGO_BIN_EXE_holdpoint"), fs.path().join("data"))
        .arg("--config")
        .arg(config)
        .stderr(Stderr::AppendTo(dir.path().join("serve.log")));
    let mut server = command.spawn();
    let url = server.listening().await.expect("the server did not start");
    let admin_token = std::fs::read_to_string(command.data.join("admin-token")).unwrap();
    let admin = Api::new(&url, Some(admin_token.trim()));
    admin
        .post("/api/v1/worlds", json!({"name": "lab"}))
        .await
        .expect(201);
    let agent = admin.as_token(&token(&admin, "bot", "agent").await);
    let alice = admin.as_token(&token(&admin, "alice", "approver").await);
    let mut raised = Vec::new();
    for n in 0..6 {
        raised.push(hold_id(&raise(&agent, n).await.expect(201)));
    }

    // The disk fills up (another program's file, say).
    assert!(fs.fill("ballast") > 0);
    // The first commit to find the disk full is made in the space set aside for it (it may
    // be this raise, or the server's own housekeeping); from then on new holds are refused.
    let first = raise(&agent, 6).await;
    match first.status {
        201 => raised.push(hold_id(&first.body)),
        507 => {}
        status => panic!("{status}: {}", first.text),
    }
    for n in 7..10 {
        let (code, message) = raise(&agent, n).await.error(507);
        assert_eq!(code, "storage_full", "{message}");
        assert!(message.contains("MiB free"), "{message}");
    }
    // What is there is still read, decided, and waited on.
    let pending = alice.get("/api/v1/holds?world=lab").await.expect(200);
    assert_eq!(pending["items"].as_array().unwrap().len(), raised.len());
    let mut decided = Vec::new();
    for (i, id) in raised.iter().enumerate().take(4) {
        let action = if i % 2 == 0 { "approve" } else { "deny" };
        let reply = alice
            .post(
                &format!("/api/v1/holds/{id}/decision"),
                json!({"action": action}),
            )
            .await
            .expect(200);
        decided.push((id.clone(), reply["hold"]["status"].clone()));
        let waited = agent
            .get(&format!("/api/v1/holds/{id}/wait?timeout=5s"))
            .await
            .expect(200);
        assert_eq!(waited["decided"], true, "{waited}");
    }
    assert_eq!(decided[0].1, "approved");
    assert_eq!(decided[1].1, "denied");

    // Space is freed: new holds are taken again.
    std::fs::remove_file(fs.path().join("ballast")).unwrap();
    let agent_ref = &agent;
    let late = eventually(|| async move {
        let reply = raise(agent_ref, 100).await;
        if reply.status == 201 {
            return Ok(hold_id(&reply.body));
        }
        assert_eq!(reply.status, 507, "{}", reply.text);
        Err("new holds were still refused after space was freed".to_owned())
    })
    .await;
    raised.push(late);

    // After a restart, everything acknowledged is there, and the log verifies.
    assert!(server.terminate().await.success());
    let mut server = command.spawn();
    let url = server
        .listening()
        .await
        .expect("the server did not start again");
    let admin = Api::new(&url, Some(admin_token.trim()));
    for id in &raised {
        let hold = admin.get(&format!("/api/v1/holds/{id}")).await.expect(200);
        let want = decided
            .iter()
            .find(|(d, _)| d == id)
            .map_or(json!("pending"), |(_, s)| s.clone());
        assert_eq!(hold["hold"]["status"], want, "{hold}");
    }
    assert!(server.terminate().await.success());
    let data = command.data.display().to_string();
    let out = super::holdpoint(&["audit", "verify", "--data", &data]);
    assert_eq!(out.status.code(), Some(0), "{}", super::stdout(&out));
}

/// A gate of `tool` with about 200 KiB of arguments (the log records them) as `agent`.
async fn call(agent: &Api, tool: &str, n: usize) -> holdpoint_test_support::http::Reply {
    let padding = "x".repeat(200 * 1024);
    let request = agent
        .request(Method::POST, "/api/v1/worlds/lab/holds")
        .json(&json!({"items": [{"kind": "approval", "tool": tool, "arguments": {"n": n, "padding": padding}}]}));
    tokio::time::timeout(Duration::from_secs(10), agent.send(request))
        .await
        .expect("a call on a full disk hung")
}

/// A refusal for want of space: 507 `storage_full` with `Retry-After`, saying how much is free
/// and how much is needed.
#[track_caller]
fn assert_short(reply: holdpoint_test_support::http::Reply, what: &str) {
    assert_eq!(reply.status, 507, "{what}: {}", reply.text);
    assert!(
        reply.headers.contains_key("retry-after"),
        "{what}: no Retry-After: {:?}",
        reply.headers
    );
    let (code, message) = reply.error(507);
    assert_eq!(code, "storage_full", "{what}: {message}");
    assert!(
        message.contains("MiB free") && message.contains("16.0 MiB needed"),
        "{what}: {message}"
    );
}

#[tokio::test]
async fn while_short_of_space_only_decisions_withdrawals_and_timeouts_are_written() {
    let Some(fs) = Tmpfs::mount(32) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("holdpoint.toml");
    std::fs::write(&config, "[log]\nlevel = \"warn\"\n").unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        "mode = \"manual\"\n\
         [[rules]]\nname = \"reads\"\ntools = [\"read\"]\naction = \"allow\"\n\
         [[rules]]\nname = \"no rm\"\ntools = [\"rm\"]\naction = \"deny\"\n",
    )
    .unwrap();
    let command = ServeCommand::new(env!("CARGO_BIN_EXE_holdpoint"), fs.path().join("data"))
        .arg("--config")
        .arg(config)
        .arg("--policy")
        .arg(policy)
        .stderr(Stderr::AppendTo(dir.path().join("serve.log")));
    let mut server = command.spawn();
    let url = server.listening().await.expect("the server did not start");
    let admin_token = std::fs::read_to_string(command.data.join("admin-token")).unwrap();
    let admin = Api::new(&url, Some(admin_token.trim()));
    admin
        .post("/api/v1/worlds", json!({"name": "lab"}))
        .await
        .expect(201);
    let (agent_token, alice_token) = (
        token(&admin, "bot", "agent").await,
        token(&admin, "alice", "approver").await,
    );
    let agent = admin.as_token(&agent_token);
    let alice = admin.as_token(&alice_token);
    let mut raised = Vec::new();
    for n in 0..6 {
        raised.push(hold_id(&raise(&agent, n).await.expect(201)));
    }
    let allowed = call(&agent, "read", 0).await.expect(200);
    assert_eq!(allowed["results"][0]["result"], "allowed", "{allowed}");
    admin.anonymous().get("/readyz").await.expect(200);

    // The disk fills up; calls go on until one finds it full.
    assert!(fs.fill("ballast") > 0);
    let mut n = 1;
    loop {
        let reply = call(&agent, "read", n).await;
        match reply.status {
            200 => n += 1,
            507 => break,
            status => panic!("{status}: {}", reply.text),
        }
        assert!(n < 500, "500 calls of 200 KiB fitted on a full disk");
    }

    // Short of space: the probe says so, and how much is needed.
    let (code, message) = admin.anonymous().get("/readyz").await.error(503);
    assert_eq!(code, "storage_full", "{message}");
    assert!(
        message.contains("MiB free") && message.contains("16.0 MiB needed"),
        "{message}"
    );
    // Nothing but what resolves holds is written: more than the space kept for decisions
    // (8 MiB) in calls allowed and denied, and admin writes, are all refused…
    for n in 0..60 {
        let tool = if n % 2 == 0 { "read" } else { "rm" };
        assert_short(call(&agent, tool, 1000 + n).await, tool);
    }
    assert_short(raise(&agent, 6).await, "a new hold");
    assert_short(
        admin.post("/api/v1/worlds", json!({"name": "lab2"})).await,
        "a world",
    );
    assert_short(
        admin
            .post(
                "/api/v1/tokens",
                json!({"name": "carol", "role": "approver"}),
            )
            .await,
        "a token",
    );
    assert_short(
        admin
            .post(
                "/api/v1/worlds/lab/webhooks",
                json!({"url": "http://127.0.0.1:9/hook"}),
            )
            .await,
        "a webhook",
    );
    // …so every hold raised can still be decided, or withdrawn, and waited on; after a
    // restart on the full disk too (the space set aside last time is what opening the
    // database needs).
    let mut server = server;
    let (mut admin, mut agent, mut alice) = (admin, agent, alice);
    for (i, id) in raised.iter().enumerate() {
        if i == 4 {
            assert!(server.terminate().await.success());
            server = command.spawn();
            let url = server
                .listening()
                .await
                .expect("the server did not start again on the full disk");
            admin = Api::new(&url, Some(admin_token.trim()));
            agent = admin.as_token(&agent_token);
            alice = admin.as_token(&alice_token);
            let (code, message) = admin.anonymous().get("/readyz").await.error(503);
            assert_eq!(code, "storage_full", "{message}");
            assert_short(
                admin.post("/api/v1/worlds", json!({"name": "lab2"})).await,
                "a world after the restart",
            );
        }
        let reply = if i == 5 {
            agent
                .post(&format!("/api/v1/holds/{id}/withdraw"), json!({}))
                .await
        } else {
            let action = if i % 2 == 0 { "approve" } else { "deny" };
            alice
                .post(
                    &format!("/api/v1/holds/{id}/decision"),
                    json!({"action": action}),
                )
                .await
        };
        let decided = reply.expect(200);
        assert_ne!(decided["hold"]["status"], "pending", "{decided}");
        let waited = agent
            .get(&format!("/api/v1/holds/{id}/wait?timeout=5s"))
            .await
            .expect(200);
        assert_eq!(waited["decided"], true, "{waited}");
    }

    // Space is freed: the server is ready again and takes every write.
    std::fs::remove_file(fs.path().join("ballast")).unwrap();
    let probe = admin.anonymous();
    let probe = &probe;
    eventually(|| async move {
        match probe.get("/readyz").await.status {
            200 => Ok(()),
            503 => Err("/readyz still refused after space was freed".to_owned()),
            status => panic!("/readyz: {status}"),
        }
    })
    .await;
    admin
        .post("/api/v1/worlds", json!({"name": "lab2"}))
        .await
        .expect(201);
    call(&agent, "read", 2000).await.expect(200);

    assert!(server.terminate().await.success());
    let data = command.data.display().to_string();
    let out = super::holdpoint(&["audit", "verify", "--data", &data]);
    assert_eq!(out.status.code(), Some(0), "{}", super::stdout(&out));
}
