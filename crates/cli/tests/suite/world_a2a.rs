//! A world's own remote A2A agents from the terminal (`holdpoint worlds a2a`), and the
//! configuration file's (`[a2a.agents.NAME]`) checked by `holdpoint config check`, naming the
//! key at fault, with their headers hidden.

use serde_json::Value;

use super::lab::Lab;
use super::{holdpoint, stderr, stdout};

async fn run(lab: &Lab, args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut command = lab.command(args, &lab.token);
    for (k, v) in env {
        command.env(k, v);
    }
    let out = tokio::time::timeout(holdpoint_test_support::PATIENCE, command.output())
        .await
        .expect("the command did not finish in time")
        .unwrap();
    (out.status.code().unwrap(), stdout(&out), stderr(&out))
}

#[tokio::test]
async fn a_worlds_remote_agents_are_managed_from_the_terminal_with_their_secrets_hidden() {
    let lab = Lab::start(vec![]).await;
    let add = [
        "worlds",
        "a2a",
        "add",
        "lab",
        "bank",
        "--url",
        "http://127.0.0.1:9/",
        "--bearer-env",
        "HOLDPOINT_TEST_BANK_TOKEN",
        "--header",
        "X-Team=payments",
        "--timeout",
        "30s",
    ];
    let token = [("HOLDPOINT_TEST_BANK_TOKEN", "s3cret")];
    let (code, out, err) = run(&lab, &add, &token).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out.trim(),
        "a2a__bank  http://127.0.0.1:9/  headers: Authorization=(hidden) X-Team=(hidden)  timeout: 30s"
    );
    let (code, listed, _) = run(&lab, &["worlds", "a2a", "list", "lab"], &[]).await;
    assert_eq!((code, listed.as_str()), (0, out.as_str()));
    let (code, listed, _) = run(&lab, &["worlds", "a2a", "list", "lab", "--json"], &[]).await;
    assert_eq!(code, 0);
    let listed: Value = serde_json::from_str(&listed).unwrap();
    assert_eq!(listed["bank"]["headers"]["Authorization"], "(hidden)");
    assert!(!listed.to_string().contains("s3cret"));
    // The token went to the server whole.
    let world = lab.admin.get("/api/v1/worlds/lab").await.expect(200);
    assert_eq!(world["a2a_agents"]["bank"]["url"], "http://127.0.0.1:9/");

    // A bad entry is refused naming the field; a variable that is not set, naming it.
    let (code, _, err) = run(
        &lab,
        &["worlds", "a2a", "add", "lab", "bad", "--url", "ftp://x"],
        &[],
    )
    .await;
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("a2a_agents.bad.url"), "{err}");
    let (code, _, err) = run(
        &lab,
        &[
            "worlds",
            "a2a",
            "add",
            "lab",
            "bad",
            "--url",
            "http://x",
            "--bearer-env",
            "HOLDPOINT_TEST_UNSET_TOKEN",
        ],
        &[],
    )
    .await;
    assert_ne!(code, 0);
    assert!(
        err.contains("HOLDPOINT_TEST_UNSET_TOKEN is not set"),
        "{err}"
    );

    let (code, _, err) = run(&lab, &["worlds", "a2a", "remove", "lab", "bank"], &[]).await;
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = run(&lab, &["worlds", "a2a", "remove", "lab", "bank"], &[]).await;
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("has no remote A2A agent \"bank\""), "{err}");
}

#[test]
fn config_check_checks_the_files_remote_agents_naming_the_key_and_hides_their_headers() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("holdpoint.toml");
    let write = |text: &str| {
        std::fs::write(&file, text).unwrap();
        file.to_str().unwrap().to_owned()
    };
    let bad = write("[a2a.agents.bank]\nurl = \"ftp://bank\"\n");
    let out = holdpoint(&["config", "check", "--config", &bad]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("a2a.agents.bank.url"),
        "{}",
        stderr(&out)
    );
    let bad = write("[a2a.agents.bank]\nurl = \"http://bank\"\ntimeout = \"soon\"\n");
    let out = holdpoint(&["config", "check", "--config", &bad]);
    assert!(
        stderr(&out).contains("a2a.agents.bank.timeout"),
        "{}",
        stderr(&out)
    );
    let bad = write("[a2a.agents.bank]\nuri = \"http://bank\"\n");
    let out = holdpoint(&["config", "check", "--config", &bad]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("uri"), "{}", stderr(&out));

    let good = write(
        "[a2a.agents.bank]\nurl = \"http://bank\"\nheaders = { Authorization = \"Bearer s3cret\" }\n",
    );
    let out = holdpoint(&["config", "check", "--config", &good]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let shown = stdout(&out);
    assert!(
        shown.contains("[a2a.agents.bank]") && shown.contains("(hidden)"),
        "{shown}"
    );
    assert!(!shown.contains("s3cret"), "{shown}");
}
