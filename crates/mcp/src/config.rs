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
//! ```
//!
//! Plain data with its checks: the server refuses to start with a section that fails them, and
//! so does `holdpoint mcp`.

use std::collections::BTreeMap;

pub use holdpoint_core::mcp::{SEPARATOR, split_tool_name, tool_name};
pub use holdpoint_protocol::{UpstreamConfig, UpstreamTransport as Transport};
use serde::{Deserialize, Serialize};

/// The `[mcp]` section.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct McpSettings {
    /// The upstream servers by name (`[mcp.servers.NAME]`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub servers: BTreeMap<String, UpstreamConfig>,
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

    /// The rules serde cannot check (the same as for a world's servers): names, one
    /// transport per server, `require_approval` within `tools`, sizes.
    pub fn check(&self) -> Result<(), ConfigProblem> {
        holdpoint_core::mcp::check_servers(&self.servers).map_err(|p| ConfigProblem {
            key: p.path("mcp.servers"),
            message: p.message,
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::time::Duration;

    use holdpoint_core::mcp::{
        DEFAULT_CALL_TIMEOUT, DEFAULT_MAX_MESSAGE_SIZE, call_timeout, max_message_size,
    };

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
    fn unknown_keys_are_refused() {
        let e = toml::from_str::<McpSettings>("[servers.x]\ncommand = \"a\"\nrequire = []")
            .unwrap_err();
        assert!(e.to_string().contains("require"), "{e}");
    }

    #[test]
    fn call_timeout_and_max_message_size_are_checked_naming_the_key() {
        let ok = parse(
            "[servers.x]\ncommand = \"a\"\ncall_timeout = \"2m\"\nmax_message_size = \"4MiB\"",
        );
        ok.check().unwrap();
        assert_eq!(call_timeout(&ok.servers["x"]), Duration::from_secs(120));
        assert_eq!(max_message_size(&ok.servers["x"]), 4 * 1024 * 1024);
        let default = parse("[servers.x]\ncommand = \"a\"");
        assert_eq!(call_timeout(&default.servers["x"]), DEFAULT_CALL_TIMEOUT);
        assert_eq!(
            max_message_size(&default.servers["x"]),
            DEFAULT_MAX_MESSAGE_SIZE
        );
        assert_eq!(
            max_message_size(
                &parse("[servers.x]\ncommand = \"a\"\nmax_message_size = \"100000\"").servers["x"]
            ),
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
}
