//! `holdpoint mcp` with real MCP peers on both sides: the official Python SDK's client
//! connects to it over stdio, and its upstream is a server written with the same SDK
//! (`tests/mcp/upstream.py`), which logs every call it runs. The Python SDK is installed into
//! `.venv-mcp` by scripts/test.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use holdpoint_server::Settings;
use holdpoint_test_support::PATIENCE;
use holdpoint_test_support::http::Api;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

use super::lab::Lab;

/// Reading is allowed, `delete_all` never, `fail` allowed by name; the rest is asked.
const POLICY: &str = r#"
mode = "manual"

[[rules]]
name = "reading is fine"
tools = ["up__*"]
action = "allow"
annotations = { read_only = true }

[[rules]]
name = "failing is fine"
tools = ["up__fail"]
action = "allow"

[[rules]]
name = "never delete everything"
tools = ["up__delete_all"]
action = "deny"
"#;

/// How long an MCP client may take to end: it starts Python, `holdpoint mcp` and the
/// upstreams (some of them twice, after failed starts that back off 1s, then 2s), on a machine
/// that runs other tests meanwhile. Only a client that hangs waits this long.
const CLIENT_PATIENCE: Duration = Duration::from_secs(4 * PATIENCE.as_secs());

/// Waits for the MCP client `child` to end, which it must do well and in time; the JSON
/// lines it printed, and its standard error.
pub(super) async fn finished(child: tokio::process::Child) -> (Vec<Value>, String) {
    let out = ended(child).await;
    let stderr = super::stderr(&out);
    assert!(out.status.success(), "the MCP client failed: {stderr}");
    let lines = super::stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (lines, stderr)
}

/// Waits for the MCP client `child` to end, which it must do well and in time; the last line
/// it printed (a call's result).
pub(super) async fn result_of(child: tokio::process::Child) -> Value {
    let (mut lines, stderr) = finished(child).await;
    lines
        .pop()
        .unwrap_or_else(|| panic!("the MCP client printed nothing: {stderr}"))
}

/// Waits for the MCP client `child` to end, which it must do in time and with a failure; its
/// standard error.
pub(super) async fn failed(child: tokio::process::Child) -> String {
    let out = ended(child).await;
    assert!(
        !out.status.success(),
        "the MCP client succeeded: {}",
        super::stdout(&out)
    );
    super::stderr(&out)
}

async fn ended(child: tokio::process::Child) -> std::process::Output {
    tokio::time::timeout(CLIENT_PATIENCE, child.wait_with_output())
        .await
        .expect("the MCP client did not finish in time")
        .unwrap()
}

/// The Python with the official `mcp` package: `$HOLDPOINT_TEST_PYTHON`, else the virtual
/// environment scripts/test makes.
pub(super) fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("HOLDPOINT_TEST_PYTHON") {
        return p.into();
    }
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv-mcp/bin/python");
    assert!(
        venv.exists(),
        "{} is missing: scripts/test installs the official MCP SDK there (or set HOLDPOINT_TEST_PYTHON)",
        venv.display()
    );
    venv
}

pub(super) fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/mcp")
        .join(name)
}

/// A server with [`POLICY`], a configuration file naming the upstream, and an agent token.
pub(super) struct Gateway {
    pub(super) lab: Lab,
    config: PathBuf,
    /// What the upstreams log (`$UPSTREAM_LOG`).
    pub(super) upstream_log: PathBuf,
    pub(super) agent: String,
    /// alice's, an approver's.
    pub(super) approver_token: String,
    pub(super) approver: Api,
    /// Whether the client reaches the server's `/mcp/lab` (else it starts `holdpoint mcp`).
    http: bool,
    _logs: tempfile::TempDir,
}

impl Gateway {
    /// For `holdpoint mcp`: `extra` is added to the upstream's section (`tools = …`, say).
    pub(super) async fn start(extra: &str) -> Gateway {
        Gateway::open(extra, false).await
    }

    /// For the server's `/mcp/lab`: the server itself is configured with the upstream.
    pub(super) async fn served(extra: &str) -> Gateway {
        Gateway::open(extra, true).await
    }

    async fn open(extra: &str, http: bool) -> Gateway {
        let logs = tempfile::tempdir().unwrap();
        let text = format!(
            "{}{extra}\n",
            upstream_section(&logs.path().join("upstream.log"))
        );
        Gateway::configured(POLICY, &text, logs, http).await
    }

    /// For `holdpoint mcp`, with `policy`, and `config` as the configuration file it reads
    /// (its `[mcp.servers.NAME]` sections). The upstreams inherit `$UPSTREAM_LOG`, which names
    /// [`Gateway::upstream_log`], from the client.
    pub(super) async fn with(policy: &str, config: &str) -> Gateway {
        Gateway::configured(policy, config, tempfile::tempdir().unwrap(), false).await
    }

    /// For the server's `/mcp/lab`, with `policy`, and the server configured with `config`'s
    /// `[mcp.servers.NAME]` sections.
    pub(super) async fn served_with(policy: &str, config: &str) -> Gateway {
        Gateway::configured(policy, config, tempfile::tempdir().unwrap(), true).await
    }

    /// `logs` holds the upstreams' log.
    async fn configured(policy: &str, text: &str, logs: tempfile::TempDir, http: bool) -> Gateway {
        let upstream_log = logs.path().join("upstream.log");
        let mut settings = Settings::default();
        if http {
            let table: toml::Table = toml::from_str(text).unwrap();
            settings.mcp = table["mcp"].clone().try_into().unwrap();
        }
        let lab = Lab::with_settings(vec![], Some(policy), settings).await;
        let config = lab.data().join("config.toml");
        std::fs::write(&config, text).unwrap();
        let agent = lab.token("coder", "agent").await;
        let approver_token = lab.token("alice", "approver").await;
        let approver = lab.admin.as_token(&approver_token);
        Gateway {
            upstream_log,
            config,
            agent,
            approver_token,
            approver,
            lab,
            http,
            _logs: logs,
        }
    }

    /// `client.py ARGS`: it starts `holdpoint mcp --world lab` as the agent, or reaches the
    /// server's `/mcp/lab` with the agent's token.
    pub(super) fn client(&self, args: &[&str]) -> tokio::process::Command {
        self.client_script("client.py", args)
    }

    /// The client script `name` (under tests/mcp) with `ARGS`, in the environment in which
    /// `client.py` runs.
    pub(super) fn client_script(&self, name: &str, args: &[&str]) -> tokio::process::Command {
        Client {
            server: Some(&self.lab.server.url()),
            http: self.http,
            token: &self.agent,
            config: &self.config,
            data: &self.lab.data().join("elsewhere"),
            upstream_log: Some(&self.upstream_log),
        }
        .command(name, args)
    }

    /// Runs the client to its end; the JSON lines it printed.
    pub(super) async fn run(&self, args: &[&str]) -> Vec<Value> {
        finished(self.client(args).spawn().unwrap()).await.0
    }

    /// Calls `tool` and returns its result. Large arguments go through a file (one command
    /// line argument may not exceed 128 KiB).
    pub(super) async fn call(&self, tool: &str, arguments: Value) -> Value {
        let arguments = arguments.to_string();
        let file = tempfile::NamedTempFile::new().unwrap();
        let passed = if arguments.len() > 64 * 1024 {
            std::fs::write(file.path(), &arguments).unwrap();
            format!("@{}", file.path().display())
        } else {
            arguments
        };
        let client = self.client(&["call", tool, &passed]).spawn();
        result_of(client.unwrap()).await
    }

    /// What the upstreams logged: the calls they ran (and, for `tests/mcp/fault.py`, its
    /// starts).
    pub(super) fn upstream_calls(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.upstream_log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    pub(super) async fn decide(&self, hold: &Value, body: Value) {
        let id = hold["id"].as_str().unwrap();
        self.approver
            .post(&format!("/api/v1/holds/{id}/decision"), body)
            .await
            .expect(200);
    }

    /// Waits until the hold `id` is resolved; the hold. The stream of events is opened first,
    /// so a resolution while the hold is read is seen on it.
    pub(super) async fn resolved(&self, id: &str) -> Value {
        let mut events = self.lab.admin.events("", None).await;
        let hold = self.lab.hold(id).await;
        if hold["outcome"].is_object() {
            return hold;
        }
        loop {
            let event = events.next().await;
            if event.data["hold"] == id && RESOLVING.contains(&event.event.as_str()) {
                return self.lab.hold(id).await;
            }
        }
    }
}

/// The events that resolve a hold.
pub(super) const RESOLVING: [&str; 3] = ["hold.decided", "hold.expired", "hold.withdrawn"];

/// How an MCP client script reaches Holdpoint, and as whom, for world `lab`.
pub(super) struct Client<'a> {
    /// The server that `holdpoint mcp` reaches, or none: then it runs Holdpoint in its own
    /// process.
    pub(super) server: Option<&'a str>,
    /// Whether the client reaches the server's `/mcp/lab` itself (else it starts `holdpoint
    /// mcp`).
    pub(super) http: bool,
    /// An agent's token.
    pub(super) token: &'a str,
    /// `holdpoint mcp`'s configuration file (its `[mcp.servers.NAME]` sections).
    pub(super) config: &'a Path,
    /// `holdpoint mcp`'s data directory.
    pub(super) data: &'a Path,
    /// `$UPSTREAM_LOG`, which the upstreams inherit (none: they inherit none).
    pub(super) upstream_log: Option<&'a Path>,
}

impl Client<'_> {
    /// The client script `name` (under tests/mcp) with `args`: its output piped, killed when
    /// dropped. Of the test's own environment, nothing that would steer Holdpoint or the
    /// upstreams reaches it.
    pub(super) fn command(&self, name: &str, args: &[&str]) -> tokio::process::Command {
        let mut c = tokio::process::Command::new(python());
        c.arg(script(name))
            .args(args)
            .env("HOLDPOINT_BIN", env!("CARGO_BIN_EXE_holdpoint"))
            .env("HOLDPOINT_WORLD", "lab")
            .env("HOLDPOINT_TOKEN", self.token)
            .env("HOLDPOINT_CONFIG", self.config)
            .env("HOLDPOINT_DATA", self.data)
            .env_remove("HOLDPOINT_SERVER")
            .env_remove("HOLDPOINT_MCP_URL")
            .env_remove("UPSTREAM_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if let Some(server) = self.server {
            c.env("HOLDPOINT_SERVER", server);
            if self.http {
                c.env("HOLDPOINT_MCP_URL", format!("{server}/mcp/lab"));
            }
        }
        if let Some(log) = self.upstream_log {
            c.env("UPSTREAM_LOG", log);
        }
        c
    }
}

/// The `[mcp.servers.up]` section: `tests/mcp/upstream.py`, logging the calls it runs to `log`.
pub(super) fn upstream_section(log: &Path) -> String {
    format!(
        "[mcp.servers.up]\ncommand = {:?}\nargs = [{:?}]\nenv = {{ UPSTREAM_LOG = {:?} }}\n",
        python().display().to_string(),
        script("upstream.py").display().to_string(),
        log.display().to_string(),
    )
}

pub(super) fn text(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or("")
        .to_owned()
}

#[tokio::test]
async fn the_gateway_lists_upstream_tools_by_server_and_name_with_their_schemas_and_its_own() {
    let gw = Gateway::start("").await;
    let lines = gw.run(&["list"]).await;
    assert_eq!(lines[0]["protocol_version"], "2025-11-25");
    let tools = lines[1]["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "ask_human",
            "request_approval",
            "up__echo",
            "up__write_note",
            "up__delete_all",
            "up__fail"
        ]
    );
    let echo = &tools[2];
    assert_eq!(echo["inputSchema"]["properties"]["text"]["type"], "string");
    assert_eq!(echo["annotations"]["readOnlyHint"], true);
    assert_eq!(tools[3]["annotations"]["destructiveHint"], true);
}

#[tokio::test]
async fn an_allowed_call_is_forwarded_and_its_result_kept_intact() {
    let gw = Gateway::start("").await;
    let echoed = gw.call("up__echo", json!({"text": "hi"})).await;
    assert_eq!(echoed["isError"], false);
    assert_eq!(text(&echoed), "echo: hi");
    assert_eq!(echoed["structuredContent"], json!({"result": "echo: hi"}));
    // An upstream's own error stays an error, with its message.
    let failed = gw.call("up__fail", json!({"message": "disk full"})).await;
    assert_eq!(failed["isError"], true);
    assert!(text(&failed).contains("disk full"), "{failed}");
    assert_eq!(
        gw.upstream_calls(),
        [
            json!({"tool": "echo", "arguments": {"text": "hi"}}),
            json!({"tool": "fail", "arguments": {"message": "disk full"}})
        ]
    );
    // Nothing was asked.
    let holds = gw.lab.admin.get("/api/v1/holds").await.expect(200);
    assert_eq!(holds["items"], json!([]));
}

/// An allowed call needs no hold, so arguments larger than a hold may keep are forwarded
/// (the log records their digest); arguments that do not match the tool's schema are said
/// to be so, and nothing runs.
async fn large_and_malformed_allowed_calls(gw: &Gateway) {
    let big = "b".repeat(400 * 1024);
    let echoed = gw.call("up__echo", json!({ "text": big })).await;
    assert_eq!(echoed["isError"], false, "{}", &echoed.to_string()[..300]);
    assert_eq!(text(&echoed), format!("echo: {big}"));
    let events = gw
        .lab
        .admin
        .get("/api/v1/audit/events?limit=500")
        .await
        .expect(200);
    let allowed = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| &e["payload"])
        .find(|p| p["type"] == "call.allowed")
        .expect("the allowed call is in the log");
    assert_eq!(allowed["tool"], "up__echo", "{allowed}");
    assert!(allowed["digest"].is_string(), "{allowed}");
    assert!(
        allowed.get("arguments").is_none(),
        "arguments past limits.arguments are not kept: {}",
        &allowed.to_string()[..200.min(allowed.to_string().len())]
    );

    let malformed = gw.call("up__echo", json!({ "text": 5 })).await;
    assert_eq!(malformed["isError"], true, "{malformed}");
    let said = text(&malformed);
    assert!(
        said.contains("up__echo was not called")
            && said.contains("arguments do not match the tool's schema")
            && said.contains("text: 5 is not of type"),
        "{said}"
    );
    assert!(!said.contains("could not be asked"), "{said}");
    assert_eq!(gw.upstream_calls().len(), 1, "only the large call ran");
}

#[tokio::test]
async fn over_stdio_large_allowed_calls_run_and_malformed_ones_are_schema_errors() {
    large_and_malformed_allowed_calls(&Gateway::start("").await).await;
}

#[tokio::test]
async fn over_http_large_allowed_calls_run_and_malformed_ones_are_schema_errors() {
    large_and_malformed_allowed_calls(&Gateway::served("").await).await;
}

#[tokio::test]
async fn a_denied_call_is_an_error_naming_the_rule_and_never_reaches_the_upstream() {
    let gw = Gateway::start("").await;
    let denied = gw.call("up__delete_all", json!({"confirm": true})).await;
    assert_eq!(denied["isError"], true);
    let said = text(&denied);
    assert!(said.contains("up__delete_all was not called"), "{said}");
    assert!(said.contains("never delete everything"), "{said}");
    assert_eq!(gw.upstream_calls(), Vec::<Value>::new());
}

#[tokio::test]
async fn an_asked_call_waits_for_a_person_then_runs_exactly_what_was_approved() {
    let gw = Gateway::start("").await;
    let client = gw
        .client(&[
            "call",
            "up__write_note",
            r#"{"name": "a", "text": "hello"}"#,
        ])
        .spawn()
        .unwrap();
    let hold = gw.lab.pending_hold().await;
    assert_eq!(hold["spec"]["tool"], "up__write_note");
    assert_eq!(
        hold["spec"]["arguments"],
        json!({"name": "a", "text": "hello"})
    );
    assert_eq!(hold["requested_by"], "coder");
    assert_eq!(
        gw.upstream_calls(),
        Vec::<Value>::new(),
        "it ran before approval"
    );
    // The person edits the text: what runs is the recorded edit.
    gw.decide(
        &hold,
        json!({"action": "edit", "arguments": {"name": "a", "text": "hello, edited"}}),
    )
    .await;
    let result = result_of(client).await;
    assert_eq!(result["isError"], false, "{result}");
    // The client is told of the edit, as Holdpoint's own agents are: a note first, and the
    // arguments that ran in `_meta`; then the upstream's own result.
    let note = text(&result);
    assert!(
        note.contains("alice edited the arguments") && note.contains("hello, edited"),
        "{result}"
    );
    assert_eq!(result["content"][1]["text"], "wrote a: hello, edited");
    assert_eq!(
        result["_meta"][holdpoint_mcp::EDITED_META],
        json!({"by": "alice", "arguments": {"name": "a", "text": "hello, edited"}})
    );
    let progress = result["progress"].as_array().unwrap();
    assert!(
        progress[0]
            .as_str()
            .unwrap()
            .contains(hold["id"].as_str().unwrap()),
        "{progress:?}"
    );
    assert_eq!(
        gw.upstream_calls(),
        [json!({"tool": "write_note", "arguments": {"name": "a", "text": "hello, edited"}})]
    );
}

#[tokio::test]
async fn an_asked_call_denied_with_a_reason_is_an_error_with_the_reason() {
    let gw = Gateway::start("").await;
    let client = gw
        .client(&["call", "up__write_note", r#"{"name": "b", "text": "x"}"#])
        .spawn()
        .unwrap();
    let hold = gw.lab.pending_hold().await;
    gw.decide(
        &hold,
        json!({"action": "deny", "reason": "not on a Friday"}),
    )
    .await;
    let result = result_of(client).await;
    assert_eq!(result["isError"], true);
    let said = text(&result);
    assert!(said.contains("denied by alice: not on a Friday"), "{said}");
    assert_eq!(gw.upstream_calls(), Vec::<Value>::new());
}

#[tokio::test]
async fn require_approval_asks_even_where_policy_allows() {
    let gw = Gateway::start(r#"require_approval = ["echo"]"#).await;
    let client = gw
        .client(&["call", "up__echo", r#"{"text": "careful"}"#])
        .spawn()
        .unwrap();
    let hold = gw.lab.pending_hold().await;
    assert_eq!(hold["spec"]["tool"], "up__echo");
    gw.decide(&hold, json!({"action": "approve"})).await;
    let result = result_of(client).await;
    assert_eq!(text(&result), "echo: careful");
}

#[tokio::test]
async fn ask_human_and_request_approval_are_answered_through_the_api() {
    let gw = Gateway::start("").await;
    let question = json!({
        "question": "Which branch?",
        "options": [{"id": "main", "label": "main"}, {"id": "dev", "label": "dev"}],
        "context": {"repo": "holdpoint"}
    });
    let client = gw
        .client(&["call", "ask_human", &question.to_string()])
        .spawn()
        .unwrap();
    let hold = gw.lab.pending_hold().await;
    assert_eq!(hold["spec"]["question"], "Which branch?");
    gw.decide(&hold, json!({"action": "answer", "options": ["dev"]}))
        .await;
    let answer = result_of(client).await;
    assert_eq!(answer["isError"], false, "{answer}");
    let body = &answer["structuredContent"];
    assert_eq!(body["status"], "answered");
    assert_eq!(body["options"], json!([{"id": "dev", "label": "dev"}]));
    assert_eq!(body["by"], json!(["alice"]));

    let request = json!({"action": "deploy", "arguments": {"env": "prod"}, "description": "v2"});
    let client = gw
        .client(&["call", "request_approval", &request.to_string()])
        .spawn()
        .unwrap();
    let hold = gw.lab.pending_hold().await;
    assert_eq!(hold["spec"]["tool"], "deploy");
    gw.decide(&hold, json!({"action": "deny", "reason": "freeze"}))
        .await;
    let answer = result_of(client).await;
    let body = &answer["structuredContent"];
    assert_eq!(body["approved"], false, "{answer}");
    assert_eq!(body["status"], "denied");
    assert_eq!(body["by"], json!(["alice"]));
    assert_eq!(body["reason"], "freeze");
}

/// Reads the client's stdout until a line contains `needle`; that line.
pub(super) async fn until_printed(
    stdout: &mut BufReader<tokio::process::ChildStdout>,
    needle: &str,
) -> String {
    let mut line = String::new();
    loop {
        line.clear();
        let n = tokio::time::timeout(PATIENCE, stdout.read_line(&mut line))
            .await
            .expect("the client printed nothing in time")
            .unwrap();
        assert!(n > 0, "the client ended before printing {needle:?}");
        if line.contains(needle) {
            return line;
        }
    }
}

/// A client that dies while its call waits (`holdpoint mcp`'s standard input ends, or the
/// call's HTTP stream closes, without a word): its hold is withdrawn, approving it is too late,
/// and nothing runs.
pub(super) async fn disconnecting_withdraws_the_hold(gw: &Gateway) {
    let mut client = gw
        .client(&["call", "up__write_note", r#"{"name": "c", "text": "x"}"#])
        .spawn()
        .unwrap();
    let hold = gw.lab.pending_hold().await;
    client.kill().await.unwrap();
    let id = hold["id"].as_str().unwrap();
    let withdrawn = gw.resolved(id).await;
    assert_eq!(withdrawn["status"], "canceled", "{withdrawn}");
    assert_eq!(
        withdrawn["outcome"]["reason"],
        "the MCP client disconnected"
    );
    let (code, _) = gw
        .approver
        .post(
            &format!("/api/v1/holds/{id}/decision"),
            json!({"action": "approve"}),
        )
        .await
        .error(409);
    assert_eq!(code, "already_decided");
    assert_eq!(gw.upstream_calls(), Vec::<Value>::new());
}

/// A client that cancels its call while it waits: its hold is withdrawn, and nothing runs.
pub(super) async fn canceling_withdraws_the_hold(gw: &Gateway) {
    let mut client = gw
        .client(&["cancel", "up__write_note", r#"{"name": "d", "text": "x"}"#])
        .env("CLIENT_LINGER", "30")
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(client.stdout.take().unwrap());
    until_printed(&mut stdout, "\"canceled\"").await;
    let hold = gw.lab.first_hold().await;
    let withdrawn = gw.resolved(hold["id"].as_str().unwrap()).await;
    assert_eq!(withdrawn["status"], "canceled", "{withdrawn}");
    assert_eq!(
        withdrawn["outcome"]["reason"],
        "the MCP client canceled the call"
    );
    assert_eq!(gw.upstream_calls(), Vec::<Value>::new());
    client.kill().await.unwrap();
}

#[tokio::test]
async fn a_client_that_disconnects_while_waiting_withdraws_its_hold() {
    disconnecting_withdraws_the_hold(&Gateway::start("").await).await;
}

#[tokio::test]
async fn a_client_that_cancels_its_call_withdraws_the_hold() {
    canceling_withdraws_the_hold(&Gateway::start("").await).await;
}

#[tokio::test]
async fn require_approval_naming_a_tool_outside_tools_is_refused_naming_the_tool() {
    let gw = Gateway::start("tools = [\"echo\"]\nrequire_approval = [\"write_note\"]").await;
    let stderr = failed(gw.client(&["list"]).spawn().unwrap()).await;
    assert!(
        stderr.contains("mcp.servers.up.require_approval")
            && stderr.contains("\"write_note\" is not among tools"),
        "{stderr}"
    );
}
