//! A world's own notice routes from the terminal (`holdpoint worlds routes`): set from a TOML
//! or JSON file, listed, refused naming the field the server names, and cleared.

use std::time::Duration;

use holdpoint_server::Settings;
use holdpoint_server::channels::ChannelSettings;
use holdpoint_server::channels::email::{EmailSettings, Security};
use holdpoint_server::channels::route::Member;
use holdpoint_test_support::smtp::free_port;
use serde_json::{Value, json};

use super::lab::Lab;
use super::{stderr, stdout};

async fn run(lab: &Lab, args: &[&str]) -> (i32, String, String) {
    let out = tokio::time::timeout(
        holdpoint_test_support::PATIENCE,
        lab.command(args, &lab.token).output(),
    )
    .await
    .expect("the command did not finish in time")
    .unwrap();
    (out.status.code().unwrap(), stdout(&out), stderr(&out))
}

/// Email (to a port nothing listens on: nothing here is sent) and a group `oncall`.
fn settings() -> Settings {
    let mut channels = ChannelSettings {
        email: Some(EmailSettings {
            host: "127.0.0.1".into(),
            port: Some(free_port()),
            security: Security::None,
            from: "holdpoint@example.com".into(),
            username_env: None,
            password_env: None,
            public_url: "http://127.0.0.1".into(),
            link_lifetime: Duration::from_secs(3600),
            attempts: 1,
            backoff: Duration::from_millis(100),
            timeout: Duration::from_secs(1),
        }),
        ..ChannelSettings::default()
    };
    channels.groups.insert(
        "oncall".into(),
        vec![Member::Address("carol@example.com".into())],
    );
    Settings {
        channels,
        ..Settings::default()
    }
}

#[tokio::test]
async fn a_worlds_routes_are_set_listed_refused_and_cleared_from_the_terminal() {
    let lab = Lab::with_settings(vec![], None, settings()).await;
    let toml = lab.data().join("routes.toml");
    std::fs::write(
        &toml,
        "[[routes]]\ntool = \"deploy_*\"\nto = [\"dana@example.com\"]\nas = \"dana\"\n\
         groups = [\"oncall\"]\nescalate_after = \"15m\"\nescalate_to = \"oncall2\"\n",
    )
    .unwrap();
    // escalate_to names a group the server lacks: refused, naming the field; nothing saved.
    let (code, _, err) = run(
        &lab,
        &["worlds", "routes", "set", "lab", toml.to_str().unwrap()],
    )
    .await;
    assert_ne!(code, 0);
    assert!(err.contains("notice_routes[0].escalate_to"), "{err}");
    let world = lab.admin.get("/api/v1/worlds/lab").await.expect(200);
    assert!(world.get("notice_routes").is_none(), "{world}");

    std::fs::write(
        &toml,
        "[[routes]]\ntool = \"deploy_*\"\nto = [\"dana@example.com\"]\nas = \"dana\"\n\
         groups = [\"oncall\"]\nlast_notice = \"10m\"\n",
    )
    .unwrap();
    let (code, out, err) = run(
        &lab,
        &["worlds", "routes", "set", "lab", toml.to_str().unwrap()],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out.trim(),
        "[0]  tool deploy_*  to dana@example.com  groups oncall  as dana  last notice 10m"
    );
    let (code, listed, _) = run(&lab, &["worlds", "routes", "list", "lab"]).await;
    assert_eq!((code, listed.as_str()), (0, out.as_str()));
    let (code, listed, _) = run(&lab, &["worlds", "routes", "list", "lab", "--json"]).await;
    assert_eq!(code, 0);
    let listed: Value = serde_json::from_str(&listed).unwrap();
    let want = json!([{
        "tool": "deploy_*", "to": ["dana@example.com"], "as": "dana", "groups": ["oncall"],
        "last_notice": "10m"
    }]);
    assert_eq!(listed, want);
    let world = lab.admin.get("/api/v1/worlds/lab").await.expect(200);
    assert_eq!(world["notice_routes"], want);

    // A JSON list, its second route bad: the server's field, and what was saved stays.
    let bad = lab.data().join("bad.json");
    std::fs::write(
        &bad,
        r#"[{"to": ["erin@example.com"]}, {"to": ["erin@example.com", "nope"]}]"#,
    )
    .unwrap();
    let (code, _, err) = run(
        &lab,
        &["worlds", "routes", "set", "lab", bad.to_str().unwrap()],
    )
    .await;
    assert_ne!(code, 0);
    assert!(err.contains("notice_routes[1].to[1]"), "{err}");
    assert!(err.contains("\"nope\" is not an email address"), "{err}");
    // Not routes at all: refused here, before the server is asked.
    std::fs::write(&bad, r#"{"to": ["erin@example.com"]}"#).unwrap();
    let (code, _, err) = run(
        &lab,
        &["worlds", "routes", "set", "lab", bad.to_str().unwrap()],
    )
    .await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("not a JSON list of routes"), "{err}");
    let world = lab.admin.get("/api/v1/worlds/lab").await.expect(200);
    assert_eq!(world["notice_routes"], want);

    // A JSON list on standard input (`-`).
    let mut command = lab.command(&["worlds", "routes", "set", "lab", "-"], &lab.token);
    command
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = command.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    tokio::io::AsyncWriteExt::write_all(
        &mut stdin,
        br#"[{"kind": "question", "groups": ["oncall"]}]"#,
    )
    .await
    .unwrap();
    drop(stdin);
    let out = tokio::time::timeout(holdpoint_test_support::PATIENCE, child.wait_with_output())
        .await
        .expect("the command did not finish in time")
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "[0]  kind question  groups oncall");

    let (code, out, err) = run(&lab, &["worlds", "routes", "clear", "lab"]).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.trim(), "No notice routes of its own.");
    let world = lab.admin.get("/api/v1/worlds/lab").await.expect(200);
    assert!(world.get("notice_routes").is_none(), "{world}");
}
