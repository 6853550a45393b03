//! The `[mcp]` section of the configuration file: the upstream MCP servers whose tools
//! Holdpoint puts holds in front of.
//!
//! ```toml
//! [mcp.servers.github]
//! command = "github-mcp-server"
//! args = ["stdio"]
//! env = { GITHUB_TOKEN = "…" }
//! tools = ["get_issue", "create_issue"]
//! require_approval = ["create_issue"]
//!
//! [mcp.servers.docs]
//! url = "https://docs.example.com/mcp"
//! headers = { Authorization = "Bearer …" }
//! call_timeout = "5m"
//! max_message_size = "4MiB"
//! ```
//!
//! Plain data with its checks: the server refuses to start with a section that fails them, and
//! so does `holdpoint mcp`.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// What separates a server's name from its tool's in the names clients see: `github__get_issue`.
pub const SEPARATOR: &str = "__";

/// The longest server name: names of tools (`server__tool`) stay readable and within the
/// 128 characters MCP clients commonly accept.
const MAX_NAME: usize = 40;

/// How long a call may wait for its upstream's answer when `call_timeout` is not given.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// The largest message an upstream may send when `max_message_size` is not given: tool
/// results are read into memory whole, so this bounds what one call can cost.
pub const DEFAULT_MAX_MESSAGE_SIZE: usize = 1024 * 1024;

/// The range `call_timeout` must be in.
const CALL_TIMEOUTS: (Duration, Duration) =
    (Duration::from_millis(100), Duration::from_secs(86_400));

/// The range `max_message_size` must be in, in bytes: 64 KiB to 256 MiB.
const MESSAGE_SIZES: (usize, usize) = (64 * 1024, 256 * 1024 * 1024);

/// The `[mcp]` section.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct McpSettings {
    /// The upstream servers by name (`[mcp.servers.NAME]`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub servers: BTreeMap<String, UpstreamConfig>,
}

/// One upstream MCP server: started as a child process (`command`) or reached over streamable
/// HTTP (`url`).
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamConfig {
    /// stdio: the program to start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// stdio: its arguments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// stdio: variables set for it, on top of the environment Holdpoint was started with.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Streamable HTTP: the endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Streamable HTTP: headers sent with every request (`Authorization`, say).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// The tools offered, by their upstream names; every tool the server lists when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    /// Tools that always need a person's approval, whatever policy and grants say (deny rules
    /// still deny). Must be among `tools` when `tools` is given.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub require_approval: Vec<String>,
    /// How long one call may wait for the server's answer (`"60s"`, `"5m"`); then the call
    /// fails and the server is told to cancel it. [`DEFAULT_CALL_TIMEOUT`] when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_timeout: Option<String>,
    /// The largest message the server may send (`"1MiB"`, `"512KiB"`, or bytes); a larger
    /// one is refused without being read into memory. [`DEFAULT_MAX_MESSAGE_SIZE`] when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_message_size: Option<String>,
}

/// How an upstream is reached.
#[derive(Clone, Debug, PartialEq)]
pub enum Transport<'a> {
    Stdio {
        command: &'a str,
        args: &'a [String],
        env: &'a BTreeMap<String, String>,
    },
    Http {
        url: &'a str,
        headers: &'a BTreeMap<String, String>,
    },
}

/// A problem with the section, at a key such as `mcp.servers.github.require_approval`.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{key}: {message}")]
pub struct ConfigProblem {
    pub key: String,
    pub message: String,
}

impl McpSettings {
    /// No server configured.
    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    /// The rules serde cannot check: names, one transport per server, and `require_approval`
    /// within `tools`.
    pub fn check(&self) -> Result<(), ConfigProblem> {
        for (name, server) in &self.servers {
            let key = format!("mcp.servers.{name}");
            check_name(name).map_err(|message| ConfigProblem {
                key: key.clone(),
                message,
            })?;
            server.check().map_err(|(field, message)| ConfigProblem {
                key: format!("{key}.{field}"),
                message,
            })?;
        }
        Ok(())
    }
}

impl UpstreamConfig {
    /// How the server is reached; `None` only for a configuration that [`McpSettings::check`]
    /// refuses.
    pub fn transport(&self) -> Option<Transport<'_>> {
        match (&self.command, &self.url) {
            (Some(command), None) => Some(Transport::Stdio {
                command,
                args: &self.args,
                env: &self.env,
            }),
            (None, Some(url)) => Some(Transport::Http {
                url,
                headers: &self.headers,
            }),
            _ => None,
        }
    }

    /// Whether the upstream tool `tool` is offered.
    pub fn offers(&self, tool: &str) -> bool {
        self.tools
            .as_ref()
            .is_none_or(|tools| tools.iter().any(|t| t == tool))
    }

    /// Whether every call of `tool` needs a person.
    pub fn requires_approval(&self, tool: &str) -> bool {
        self.require_approval.iter().any(|t| t == tool)
    }

    /// How long one call may wait for the server (the default where the setting is absent
    /// or, in a configuration that [`McpSettings::check`] refuses, invalid).
    pub fn call_timeout(&self) -> Duration {
        self.call_timeout
            .as_deref()
            .and_then(|t| parse_call_timeout(t).ok())
            .unwrap_or(DEFAULT_CALL_TIMEOUT)
    }

    /// The largest message the server may send, in bytes (the default where the setting is
    /// absent or, in a configuration that [`McpSettings::check`] refuses, invalid).
    pub fn max_message_size(&self) -> usize {
        self.max_message_size
            .as_deref()
            .and_then(|s| parse_message_size(s).ok())
            .unwrap_or(DEFAULT_MAX_MESSAGE_SIZE)
    }

    /// The field at fault and what is wrong with it.
    fn check(&self) -> Result<(), (&'static str, String)> {
        match (&self.command, &self.url) {
            (None, None) => {
                return Err((
                    "command",
                    "give either command (a program started with stdio) or url (streamable HTTP)"
                        .into(),
                ));
            }
            (Some(_), Some(_)) => {
                return Err((
                    "url",
                    "give either command (stdio) or url (streamable HTTP), not both".into(),
                ));
            }
            (Some(command), None) if command.trim().is_empty() => {
                return Err(("command", "must not be empty".into()));
            }
            (Some(_), None) if !self.headers.is_empty() => {
                return Err(("headers", "only for a server reached by url".into()));
            }
            (None, Some(url)) => {
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(("url", format!("{url:?} is not an http:// or https:// URL")));
                }
                if !self.args.is_empty() {
                    return Err(("args", "only for a server started with command".into()));
                }
                if !self.env.is_empty() {
                    return Err(("env", "only for a server started with command".into()));
                }
            }
            _ => {}
        }
        if let Some(tools) = &self.tools {
            if let Some(empty) = tools.iter().find(|t| t.is_empty()) {
                return Err(("tools", format!("{empty:?} is not a tool name")));
            }
            if let Some(outside) = self.require_approval.iter().find(|t| !tools.contains(t)) {
                return Err((
                    "require_approval",
                    format!(
                        "{outside:?} is not among tools: require_approval may only name tools that are offered"
                    ),
                ));
            }
        }
        if let Some(empty) = self.require_approval.iter().find(|t| t.is_empty()) {
            return Err(("require_approval", format!("{empty:?} is not a tool name")));
        }
        if let Some(timeout) = &self.call_timeout {
            parse_call_timeout(timeout).map_err(|m| ("call_timeout", m))?;
        }
        if let Some(size) = &self.max_message_size {
            parse_message_size(size).map_err(|m| ("max_message_size", m))?;
        }
        Ok(())
    }
}

/// A `call_timeout`: a duration within [`CALL_TIMEOUTS`].
fn parse_call_timeout(text: &str) -> Result<Duration, String> {
    let (min, max) = CALL_TIMEOUTS;
    let allowed = || {
        format!(
            "give a duration from {} to {}, such as \"60s\" or \"5m\"",
            humantime::format_duration(min),
            humantime::format_duration(max)
        )
    };
    let d = humantime::parse_duration(text.trim())
        .map_err(|e| format!("{text:?} is not a duration ({e}): {}", allowed()))?;
    if d < min || d > max {
        return Err(format!("{text:?} is out of range: {}", allowed()));
    }
    Ok(d)
}

/// A `max_message_size`: bytes, or a number of `KiB` or `MiB`, within [`MESSAGE_SIZES`].
fn parse_message_size(text: &str) -> Result<usize, String> {
    let (min, max) = MESSAGE_SIZES;
    let allowed =
        "give a size from 64KiB to 256MiB, as bytes or with KiB or MiB (\"1MiB\", \"512KiB\")";
    let t = text.trim();
    let (number, unit) = match t.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => t.split_at(i),
        None => (t, ""),
    };
    let scale: usize = match unit.trim() {
        "" | "B" => 1,
        "KiB" => 1024,
        "MiB" => 1024 * 1024,
        _ => return Err(format!("{text:?} is not a size: {allowed}")),
    };
    let size = number
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(scale))
        .ok_or_else(|| format!("{text:?} is not a size: {allowed}"))?;
    if size < min || size > max {
        return Err(format!("{text:?} is out of range: {allowed}"));
    }
    Ok(size)
}

/// A server's name: what its tools are prefixed with.
fn check_name(name: &str) -> Result<(), String> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    if name.is_empty() || name.len() > MAX_NAME || !name.chars().all(allowed) {
        return Err(format!(
            "{name:?} is not a server name: use 1 to {MAX_NAME} letters, digits, - and _"
        ));
    }
    if name.contains(SEPARATOR) || name.starts_with('_') || name.ends_with('_') {
        return Err(format!(
            "{name:?} is not a server name: it must not contain {SEPARATOR:?} nor start or end with _, as tools are named server{SEPARATOR}tool"
        ));
    }
    Ok(())
}

/// The name clients see for `tool` of `server`.
pub fn tool_name(server: &str, tool: &str) -> String {
    format!("{server}{SEPARATOR}{tool}")
}

/// The server and the upstream tool of a name clients see; `None` for a name without
/// [`SEPARATOR`] (Holdpoint's own tools).
pub fn split_tool_name(name: &str) -> Option<(&str, &str)> {
    name.split_once(SEPARATOR)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn parse(text: &str) -> McpSettings {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn require_approval_outside_tools_is_refused_naming_the_tool() {
        let s = parse(
            r#"[servers.fs]
command = "mcp-fs"
tools = ["read_file"]
require_approval = ["read_file", "write_file"]"#,
        );
        let e = s.check().unwrap_err();
        assert_eq!(e.key, "mcp.servers.fs.require_approval");
        assert!(e.message.contains("\"write_file\""), "{e}");
    }

    #[test]
    fn require_approval_with_all_tools_offered_is_accepted() {
        let s = parse(
            r#"[servers.fs]
command = "mcp-fs"
require_approval = ["write_file"]"#,
        );
        s.check().unwrap();
        let fs = &s.servers["fs"];
        assert!(fs.offers("anything") && fs.requires_approval("write_file"));
        assert!(!fs.requires_approval("read_file"));
    }

    #[test]
    fn a_server_has_exactly_one_transport() {
        let neither = parse("[servers.x]\ntools = []");
        assert_eq!(neither.check().unwrap_err().key, "mcp.servers.x.command");
        let both = parse("[servers.x]\ncommand = \"a\"\nurl = \"http://h/mcp\"");
        assert_eq!(both.check().unwrap_err().key, "mcp.servers.x.url");
        let headers = parse("[servers.x]\ncommand = \"a\"\nheaders = { A = \"b\" }");
        assert_eq!(headers.check().unwrap_err().key, "mcp.servers.x.headers");
        let env = parse("[servers.x]\nurl = \"http://h/mcp\"\nenv = { A = \"b\" }");
        assert_eq!(env.check().unwrap_err().key, "mcp.servers.x.env");
        let scheme = parse("[servers.x]\nurl = \"ftp://h/mcp\"");
        assert!(scheme.check().unwrap_err().message.contains("ftp://"));
        let http = parse("[servers.x]\nurl = \"https://h/mcp\"\nheaders = { A = \"b\" }");
        http.check().unwrap();
        assert!(matches!(
            http.servers["x"].transport(),
            Some(Transport::Http {
                url: "https://h/mcp",
                ..
            })
        ));
    }

    #[test]
    fn server_names_cannot_hide_the_separator() {
        for bad in ["a__b", "_a", "a_", "a b", "", "ä"] {
            let mut s = McpSettings::default();
            s.servers.insert(
                bad.into(),
                UpstreamConfig {
                    command: Some("x".into()),
                    ..Default::default()
                },
            );
            let e = s.check().unwrap_err();
            assert_eq!(e.key, format!("mcp.servers.{bad}"), "{bad:?}");
        }
        assert_eq!(
            split_tool_name(&tool_name("git-hub", "get__it")),
            Some(("git-hub", "get__it"))
        );
        assert_eq!(split_tool_name("ask_human"), None);
    }

    #[test]
    fn call_timeout_and_max_message_size_are_checked_naming_the_key() {
        let ok = parse(
            "[servers.x]\ncommand = \"a\"\ncall_timeout = \"2m\"\nmax_message_size = \"4MiB\"",
        );
        ok.check().unwrap();
        assert_eq!(ok.servers["x"].call_timeout(), Duration::from_secs(120));
        assert_eq!(ok.servers["x"].max_message_size(), 4 * 1024 * 1024);
        let default = parse("[servers.x]\ncommand = \"a\"");
        assert_eq!(default.servers["x"].call_timeout(), DEFAULT_CALL_TIMEOUT);
        assert_eq!(
            default.servers["x"].max_message_size(),
            DEFAULT_MAX_MESSAGE_SIZE
        );
        assert_eq!(
            parse("[servers.x]\ncommand = \"a\"\nmax_message_size = \"100000\"").servers["x"]
                .max_message_size(),
            100_000
        );
        for (setting, key, said) in [
            (
                "call_timeout = \"soon\"",
                "call_timeout",
                "\"soon\" is not a duration",
            ),
            ("call_timeout = \"0s\"", "call_timeout", "out of range"),
            ("call_timeout = \"2d\"", "call_timeout", "out of range"),
            (
                "max_message_size = \"1MB\"",
                "max_message_size",
                "KiB or MiB",
            ),
            (
                "max_message_size = \"1KiB\"",
                "max_message_size",
                "out of range",
            ),
            (
                "max_message_size = \"1024MiB\"",
                "max_message_size",
                "out of range",
            ),
            (
                "max_message_size = \"99999999999999999999\"",
                "max_message_size",
                "not a size",
            ),
        ] {
            let e = parse(&format!("[servers.x]\ncommand = \"a\"\n{setting}"))
                .check()
                .unwrap_err();
            assert_eq!(e.key, format!("mcp.servers.x.{key}"), "{setting}");
            assert!(e.message.contains(said), "{setting}: {e}");
        }
    }

    #[test]
    fn unknown_keys_are_refused() {
        let e = toml::from_str::<McpSettings>("[servers.x]\ncommand = \"a\"\nrequire = []")
            .unwrap_err();
        assert!(e.to_string().contains("require"), "{e}");
    }
}
