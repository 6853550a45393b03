use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::{holdpoint, stderr, stdout};

const EXAMPLE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../docs/policy.example.toml"
);

fn decide(tool: &str, args: &str) -> Value {
    let out = holdpoint(&[
        "policy", "check", "--policy", EXAMPLE, "--tool", tool, "--args", args, "--json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    serde_json::from_str(&stdout(&out)).unwrap()
}

#[test]
fn help_lists_the_commands() {
    let out = holdpoint(&["--help"]);
    assert_eq!(out.status.code(), Some(0));
    for word in ["policy", "audit", "Exit status"] {
        assert!(stdout(&out).contains(word), "{word}");
    }
    let out = holdpoint(&["policy", "check", "--help"]);
    assert!(stdout(&out).contains("Examples:"));
}

#[test]
fn the_documented_example_policy_is_valid() {
    let out = holdpoint(&["policy", "check", "--policy", EXAMPLE]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("valid (9 rules, mode manual)"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn prints_the_decision_and_the_rule_that_decided() {
    let d = decide("shell_cmd", r#"{"command": "git status"}"#);
    assert_eq!(
        (d["decision"].clone(), d["rule"].clone()),
        (json!("allow"), json!({"index": 0, "name": "read-only git"}))
    );
    let d = decide("shell_cmd", r#"{"command": "git status && git push"}"#);
    assert_eq!(
        (d["decision"].clone(), d["rule"]["name"].clone()),
        (json!("ask"), json!("pushing needs a person"))
    );
    let d = decide("shell_cmd", r#"{"command": "git status; rm -rf ~"}"#);
    assert_eq!(
        (d["decision"].clone(), d["rule"]["name"].clone()),
        (json!("deny"), json!("never delete recursively"))
    );
    let d = decide("write_file", r#"{"path": "a.txt"}"#);
    assert_eq!(
        (d["decision"].clone(), d["rule"].clone()),
        (json!("ask"), Value::Null)
    );

    let out = holdpoint(&[
        "policy",
        "check",
        "--policy",
        EXAMPLE,
        "--tool",
        "shell_cmd",
        "--args",
        r#"{"command": "git push"}"#,
    ]);
    assert_eq!(
        stdout(&out),
        "decision: ask\nrule:     rules[2] \"pushing needs a person\"\n"
    );
}

#[test]
fn a_rule_without_a_name_is_named_once() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("policy.toml");
    std::fs::write(
        &file,
        "[[rules]]\ntools = [\"deploy\"]\naction = \"deny\"\n\n\
         [[rules]]\nname = \"deploys\"\ntools = [\"deploy\"]\naction = \"ask\"\n",
    )
    .unwrap();
    let out = holdpoint(&[
        "policy",
        "check",
        "--policy",
        file.to_str().unwrap(),
        "--tool",
        "deploy",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let shown = stdout(&out);
    assert_eq!(
        shown,
        "decision: deny\nrule:     rules[0]\nmatched:\n  rules[0] -> deny\n  rules[1] \"deploys\" -> ask\n"
    );
}

#[test]
fn bad_input_exits_2_and_says_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[[rules]]\ntools = [\"x\"]\naction = \"allow\"\n\n[[rules]]\ntools = [\"y\"]\naction = \"deny\"\nargs = [{ pointer = \"/p\", regex = \"(\" }]\n").unwrap();
    let bad = bad.to_str().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (
            &["policy", "check", "--policy", bad],
            "rules[1].args[0].regex: invalid regex",
        ),
        (
            &["policy", "check", "--policy", "/nonexistent.toml"],
            "cannot read the policy file",
        ),
        (
            &[
                "policy", "check", "--policy", EXAMPLE, "--tool", "t", "--args", "{nope",
            ],
            "--args is not valid JSON",
        ),
        (
            &[
                "policy", "check", "--policy", EXAMPLE, "--tool", "t", "--args", "[1]",
            ],
            "--args must be a JSON object",
        ),
        (&["policy", "check", "--tool", "t"], "--policy <FILE>"),
        (&["policy", "frobnicate"], "unrecognized subcommand"),
    ];
    for (args, message) in cases {
        let out = holdpoint(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(stderr(&out).contains(message), "{args:?}: {}", stderr(&out));
    }
}

#[tokio::test]
async fn policy_show_prints_the_servers_policy_to_people_only() {
    use holdpoint_test_support::PATIENCE;

    use super::lab::Lab;

    let text = "mode = \"auto_deny\"\n\n[[rules]]\nname = \"reads\"\ntools = [\"read_file\"]\naction = \"allow\"\n";
    let lab = Lab::with_policy(vec![], Some(text)).await;
    let run = |args: &'static [&'static str], token: String| {
        let mut command = lab.command(args, &token);
        async move {
            tokio::time::timeout(PATIENCE, command.output())
                .await
                .expect("the command did not finish in time")
                .unwrap()
        }
    };
    let out = run(&["policy", "show"], lab.token.clone()).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), text);
    let out = run(&["policy", "show", "--json"], lab.token.clone()).await;
    let shown: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(shown["mode"], "auto_deny");
    assert_eq!(
        shown["rules"],
        json!([{"index": 0, "name": "reads", "action": "allow", "tools": ["read_file"]}])
    );
    let agent = lab
        .admin
        .post("/api/v1/tokens", json!({"name": "bot", "role": "agent"}))
        .await
        .expect(201)["token"]
        .as_str()
        .unwrap()
        .to_owned();
    let out = run(&["policy", "show"], agent).await;
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(stdout(&out).is_empty(), "{}", stdout(&out));
}
