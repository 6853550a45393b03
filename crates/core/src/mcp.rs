//! MCP servers as configured, in the configuration file and in a world's settings: the one
//! place their rules live (names, one transport each, `require_approval` within `tools`,
//! bounded sizes), how their secrets are hidden when shown, and which servers a world has.

use std::collections::BTreeMap;
use std::time::Duration;

use holdpoint_protocol::UpstreamConfig;
use sha2::{Digest, Sha256};

/// What separates a server's name from its tool's in the names agents see: `github__get_issue`.
pub const SEPARATOR: &str = "__";

/// The longest server name: names of tools (`server__tool`) stay readable and within the
/// 128 characters MCP clients commonly accept.
pub const MAX_NAME: usize = 40;

/// Most servers a world (or the configuration file) may name.
pub const MAX_SERVERS: usize = 32;
/// Most entries of `args`, `env`, `headers`, `tools` and `require_approval` each.
const MAX_ENTRIES: usize = 256;
/// Longest `command`, `url`, argument, key, value or tool name, in bytes.
const MAX_TEXT: usize = 8 * 1024;

/// What a secret's value is shown as.
pub const HIDDEN: &str = "(hidden)";

/// A problem with a map of servers: in the map itself (`server` is `None`), in a server's name
/// (`field` is `None`) or in one of its fields.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}: {message}", self.path("servers"))]
pub struct ServerProblem {
    pub server: Option<String>,
    pub field: Option<&'static str>,
    pub message: String,
}

impl ServerProblem {
    /// Where the problem is, under the map's own key: `mcp.servers.fs.require_approval` in
    /// the configuration file, `mcp_servers.fs.require_approval` in a world.
    pub fn path(&self, map: &str) -> String {
        match (&self.server, self.field) {
            (None, _) => map.to_owned(),
            (Some(server), None) => format!("{map}.{server}"),
            (Some(server), Some(field)) => format!("{map}.{server}.{field}"),
        }
    }
}

/// Checks every server of a map (the configuration file's or a world's).
pub fn check_servers(servers: &BTreeMap<String, UpstreamConfig>) -> Result<(), ServerProblem> {
    if servers.len() > MAX_SERVERS {
        return Err(ServerProblem {
            server: None,
            field: None,
            message: format!(
                "{} servers are named; at most {MAX_SERVERS} are allowed",
                servers.len()
            ),
        });
    }
    for (name, server) in servers {
        check_server(name, server)?;
    }
    Ok(())
}

/// Checks one server and its name.
pub fn check_server(name: &str, server: &UpstreamConfig) -> Result<(), ServerProblem> {
    check_name(name).map_err(|message| ServerProblem {
        server: Some(name.to_owned()),
        field: None,
        message,
    })?;
    check_fields(server).map_err(|(field, message)| ServerProblem {
        server: Some(name.to_owned()),
        field: Some(field),
        message,
    })
}

/// A server's name: what its tools are prefixed with.
fn check_name(name: &str) -> Result<(), String> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    if name.is_empty() || name.len() > MAX_NAME || !name.chars().all(allowed) {
        return Err(format!(
            "{:?} is not a server name: use 1 to {MAX_NAME} letters, digits, - and _",
            name.chars().take(MAX_NAME + 1).collect::<String>()
        ));
    }
    if name.contains(SEPARATOR) || name.starts_with('_') || name.ends_with('_') {
        return Err(format!(
            "{name:?} is not a server name: it must not contain {SEPARATOR:?} nor start or end with _, as tools are named server{SEPARATOR}tool"
        ));
    }
    Ok(())
}

/// The field at fault and what is wrong with it.
fn check_fields(server: &UpstreamConfig) -> Result<(), (&'static str, String)> {
    check_sizes(server)?;
    match (&server.command, &server.url) {
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
        (Some(_), None) if !server.headers.is_empty() => {
            return Err(("headers", "only for a server reached by url".into()));
        }
        (None, Some(url)) => {
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(("url", format!("{url:?} is not an http:// or https:// URL")));
            }
            if !server.args.is_empty() {
                return Err(("args", "only for a server started with command".into()));
            }
            if !server.env.is_empty() {
                return Err(("env", "only for a server started with command".into()));
            }
        }
        _ => {}
    }
    if let Some(tools) = &server.tools {
        if let Some(empty) = tools.iter().find(|t| t.is_empty()) {
            return Err(("tools", format!("{empty:?} is not a tool name")));
        }
        if let Some(outside) = server.require_approval.iter().find(|t| !tools.contains(t)) {
            return Err((
                "require_approval",
                format!(
                    "{outside:?} is not among tools: require_approval may only name tools that are offered"
                ),
            ));
        }
    }
    if let Some(empty) = server.require_approval.iter().find(|t| t.is_empty()) {
        return Err(("require_approval", format!("{empty:?} is not a tool name")));
    }
    if let Some(timeout) = &server.call_timeout {
        parse_call_timeout(timeout).map_err(|m| ("call_timeout", m))?;
    }
    if let Some(size) = &server.max_message_size {
        parse_message_size(size).map_err(|m| ("max_message_size", m))?;
    }
    Ok(())
}

/// How long one call may wait for its server when `call_timeout` is not given.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// The largest message a server may send when `max_message_size` is not given: tool results
/// are read into memory whole, so this bounds what one call can cost.
pub const DEFAULT_MAX_MESSAGE_SIZE: usize = 1024 * 1024;

/// The range `call_timeout` must be in.
const CALL_TIMEOUTS: (Duration, Duration) =
    (Duration::from_millis(100), Duration::from_secs(86_400));

/// The range `max_message_size` must be in, in bytes: 64 KiB to 256 MiB.
const MESSAGE_SIZES: (usize, usize) = (64 * 1024, 256 * 1024 * 1024);

/// How long one call of `server` may wait (the default where the setting is absent or, in a
/// configuration the checks refuse, invalid).
pub fn call_timeout(server: &UpstreamConfig) -> Duration {
    server
        .call_timeout
        .as_deref()
        .and_then(|t| parse_call_timeout(t).ok())
        .unwrap_or(DEFAULT_CALL_TIMEOUT)
}

/// The largest message `server` may send, in bytes (the default where the setting is absent
/// or, in a configuration the checks refuse, invalid).
pub fn max_message_size(server: &UpstreamConfig) -> usize {
    server
        .max_message_size
        .as_deref()
        .and_then(|s| parse_message_size(s).ok())
        .unwrap_or(DEFAULT_MAX_MESSAGE_SIZE)
}

/// A `call_timeout`: a duration within [`CALL_TIMEOUTS`].
fn parse_call_timeout(text: &str) -> Result<Duration, String> {
    crate::limits::duration_within(text, CALL_TIMEOUTS, "\"60s\" or \"5m\"")
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

/// Bounded counts and lengths, so a world's record stays small.
fn check_sizes(server: &UpstreamConfig) -> Result<(), (&'static str, String)> {
    let long = |text: &str| text.len() > MAX_TEXT;
    let too_long = || format!("an entry is longer than {MAX_TEXT} bytes");
    let too_many = |n: usize| format!("{n} entries; at most {MAX_ENTRIES} are allowed");
    if server.command.as_deref().is_some_and(long) {
        return Err(("command", too_long()));
    }
    if server.url.as_deref().is_some_and(long) {
        return Err(("url", too_long()));
    }
    let lists: [(&'static str, Vec<&str>); 5] = [
        ("args", server.args.iter().map(String::as_str).collect()),
        (
            "env",
            server
                .env
                .iter()
                .flat_map(|(k, v)| [k.as_str(), v.as_str()])
                .collect(),
        ),
        (
            "headers",
            server
                .headers
                .iter()
                .flat_map(|(k, v)| [k.as_str(), v.as_str()])
                .collect(),
        ),
        (
            "tools",
            server.tools.iter().flatten().map(String::as_str).collect(),
        ),
        (
            "require_approval",
            server.require_approval.iter().map(String::as_str).collect(),
        ),
    ];
    for (field, entries) in lists {
        let count = match field {
            "env" | "headers" => entries.len() / 2,
            _ => entries.len(),
        };
        if count > MAX_ENTRIES {
            return Err((field, too_many(count)));
        }
        if entries.iter().any(|e| long(e)) {
            return Err((field, too_long()));
        }
    }
    Ok(())
}

/// The server as it may be shown: the values of `env` and `headers` (keys, tokens) replaced
/// by [`HIDDEN`]; their names stay.
pub fn hide_secrets(server: &mut UpstreamConfig) {
    for value in server.env.values_mut().chain(server.headers.values_mut()) {
        *value = HIDDEN.to_owned();
    }
}

/// Every server of a map, as it may be shown.
pub fn hide_all_secrets(servers: &mut BTreeMap<String, UpstreamConfig>) {
    servers.values_mut().for_each(hide_secrets);
}

/// The servers a world has: the configuration file's and the world's own. A name in both is
/// the world's: a world may replace a shared server (a filesystem server rooted elsewhere,
/// say) without changing the others; and a name added to the file later cannot make a
/// world's saved settings invalid.
pub fn effective_servers(
    file: &BTreeMap<String, UpstreamConfig>,
    world: &BTreeMap<String, UpstreamConfig>,
) -> BTreeMap<String, UpstreamConfig> {
    let mut all = file.clone();
    all.extend(world.iter().map(|(k, v)| (k.clone(), v.clone())));
    all
}

/// The longest name of a tool as agents, clients and policy see it: what LLMs take as a
/// function's name, 1 to 64 letters, digits, `_` and `-`.
pub const MAX_TOOL_NAME: usize = 64;

/// The name agents, MCP clients and policy see for `tool` of `server` (the one mapping; the
/// tool keeps its own name at its server): `server__tool` when that is at most
/// [`MAX_TOOL_NAME`] letters, digits, `_` and `-`; else `server__`, the tool's name with every
/// other character made `_` and cut to fit, `_`, and 8 hex digits of the SHA-256 of the tool's
/// own name, so that names that differ stay apart.
pub fn tool_name(server: &str, tool: &str) -> String {
    let allowed = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    let plain = format!("{server}{SEPARATOR}{tool}");
    if !tool.is_empty() && plain.len() <= MAX_TOOL_NAME && plain.chars().all(allowed) {
        return plain;
    }
    let hash: String = Sha256::digest(tool.as_bytes())
        .iter()
        .take(4)
        .map(|b| format!("{b:02x}"))
        .collect();
    let room = MAX_TOOL_NAME.saturating_sub(server.len() + SEPARATOR.len() + 1 + hash.len());
    let fitted: String = tool
        .chars()
        .map(|c| if allowed(c) { c } else { '_' })
        .take(room)
        .collect();
    format!("{server}{SEPARATOR}{fitted}_{hash}")
}

/// The server of a name agents see, and the rest (the upstream tool's own name, unless
/// [`tool_name`] had to make it fit); `None` for a name without [`SEPARATOR`] (built-in
/// tools, Holdpoint's own MCP tools).
pub fn split_tool_name(name: &str) -> Option<(&str, &str)> {
    name.split_once(SEPARATOR)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn stdio() -> UpstreamConfig {
        UpstreamConfig {
            command: Some("mcp-fs".into()),
            ..UpstreamConfig::default()
        }
    }

    fn one(name: &str, server: UpstreamConfig) -> BTreeMap<String, UpstreamConfig> {
        BTreeMap::from([(name.to_owned(), server)])
    }

    #[test]
    fn require_approval_outside_tools_is_refused_naming_the_tool() {
        let server = UpstreamConfig {
            tools: Some(vec!["read_file".into()]),
            require_approval: vec!["read_file".into(), "write_file".into()],
            ..stdio()
        };
        let e = check_servers(&one("fs", server)).unwrap_err();
        assert_eq!(e.path("m"), "m.fs.require_approval");
        assert!(e.message.contains("\"write_file\""), "{e}");
        let all_tools = UpstreamConfig {
            require_approval: vec!["write_file".into()],
            ..stdio()
        };
        check_servers(&one("fs", all_tools)).unwrap();
    }

    #[test]
    fn a_server_has_exactly_one_transport() {
        let neither = UpstreamConfig::default();
        let field = |s: &UpstreamConfig| check_server("x", s).unwrap_err().field;
        assert_eq!(field(&neither), Some("command"));
        let both = UpstreamConfig {
            url: Some("http://h/mcp".into()),
            ..stdio()
        };
        assert_eq!(field(&both), Some("url"));
        let headers = UpstreamConfig {
            headers: BTreeMap::from([("A".into(), "b".into())]),
            ..stdio()
        };
        assert_eq!(field(&headers), Some("headers"));
        let env = UpstreamConfig {
            url: Some("http://h/mcp".into()),
            env: BTreeMap::from([("A".into(), "b".into())]),
            ..UpstreamConfig::default()
        };
        assert_eq!(field(&env), Some("env"));
        let ftp = UpstreamConfig {
            url: Some("ftp://h/mcp".into()),
            ..UpstreamConfig::default()
        };
        assert!(
            check_server("x", &ftp)
                .unwrap_err()
                .message
                .contains("ftp://")
        );
    }

    #[test]
    fn server_names_cannot_hide_the_separator() {
        for bad in [
            "a__b",
            "_a",
            "a_",
            "a b",
            "",
            "ä",
            &"a".repeat(MAX_NAME + 1),
        ] {
            let e = check_server(bad, &stdio()).unwrap_err();
            assert_eq!(e.path("m"), format!("m.{bad}"), "{bad:?}");
        }
        assert_eq!(
            split_tool_name(&tool_name("git-hub", "get__it")),
            Some(("git-hub", "get__it"))
        );
        assert_eq!(split_tool_name("ask_human"), None);
    }

    #[test]
    fn sizes_are_bounded() {
        let many = UpstreamConfig {
            args: vec!["a".into(); MAX_ENTRIES + 1],
            ..stdio()
        };
        assert_eq!(check_server("x", &many).unwrap_err().field, Some("args"));
        let long = UpstreamConfig {
            env: BTreeMap::from([("K".into(), "v".repeat(MAX_TEXT + 1))]),
            ..stdio()
        };
        assert_eq!(check_server("x", &long).unwrap_err().field, Some("env"));
        let servers: BTreeMap<String, UpstreamConfig> = (0..=MAX_SERVERS)
            .map(|i| (format!("s{i}"), stdio()))
            .collect();
        assert!(
            check_servers(&servers)
                .unwrap_err()
                .message
                .contains("at most")
        );
    }

    #[test]
    fn secrets_are_hidden_and_names_kept() {
        let mut server = UpstreamConfig {
            env: BTreeMap::from([("TOKEN".into(), "s3cret".into())]),
            ..stdio()
        };
        hide_secrets(&mut server);
        assert_eq!(server.env["TOKEN"], HIDDEN);
        assert_eq!(server.command.as_deref(), Some("mcp-fs"));
    }

    #[test]
    fn a_world_server_replaces_the_files_of_the_same_name() {
        let file = BTreeMap::from([("fs".into(), stdio()), ("gh".into(), stdio())]);
        let own = UpstreamConfig {
            command: Some("other".into()),
            ..UpstreamConfig::default()
        };
        let all = effective_servers(&file, &one("fs", own.clone()));
        assert_eq!(all.len(), 2);
        assert_eq!(all["fs"], own);
        assert_eq!(all["gh"], stdio());
    }
}
