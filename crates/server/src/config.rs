//! The server's settings: a TOML file, then environment variables over it.
//!
//! Every key can be set in the file (`[server] bind = "…"`) or by a variable named after its
//! section and key (`HOLDPOINT_SERVER_BIND`). A variable's value is read as a TOML value when
//! it is one (`30`, `true`, `["a", "b"]`), else as a string. Unknown keys, in the file or in a
//! `HOLDPOINT_<SECTION>_<KEY>` variable, are errors that name the key: a misspelt setting must
//! not be silently ignored.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use holdpoint_mcp::McpSettings;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The default of `server.heartbeat`: often enough for proxies that close idle connections
/// after 30 or 60 seconds.
pub const HEARTBEAT: Duration = Duration::from_secs(15);

/// The default of `server.idempotency_retention`: a week, for clients that retry after a
/// long outage (an hour or a day is common elsewhere).
pub const IDEMPOTENCY_RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);

/// Everything `holdpoint serve` can be told.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Settings {
    pub server: ServerSettings,
    pub policy: PolicySettings,
    pub llm: LlmSettings,
    pub shell: ShellSettings,
    pub webhooks: WebhookSettings,
    pub log: LogSettings,
    pub store: StoreSettings,
    pub limits: LimitSettings,
    /// The upstream MCP servers (`[mcp.servers.NAME]`, see docs/mcp.md). File only: no
    /// environment variables.
    #[serde(skip_serializing_if = "McpSettings::is_empty")]
    pub mcp: McpSettings,
    /// Reaching people: `[channels.email]` and `[[channels.routes]]` (docs/channels.md). File
    /// only: no environment variables (the SMTP credentials are read from the variables it names).
    #[serde(skip_serializing_if = "crate::channels::ChannelSettings::is_empty")]
    pub channels: crate::channels::ChannelSettings,
    /// Remote A2A agents offered to every world's agents (`[a2a.agents.NAME]`, see
    /// docs/a2a.md). File only: no environment variables.
    #[serde(skip_serializing_if = "A2aSettings::is_empty")]
    pub a2a: A2aSettings,
}

/// The `[a2a]` section: remote A2A agents offered to every world's agents as `a2a__NAME`,
/// beside each world's own (`a2a_agents`; a world's entry of the same name wins), as the
/// file's MCP servers are.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct A2aSettings {
    /// By name (`[a2a.agents.NAME]`): `url`, `headers`, `timeout`, as a world's entry.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub agents: BTreeMap<String, holdpoint_protocol::RemoteAgentConfig>,
}

impl A2aSettings {
    pub fn is_empty(&self) -> bool {
        self.agents.is_empty()
    }

    /// The rules a world's remote agents keep, named by the file's key
    /// (`a2a.agents.bank.url`).
    fn check(&self) -> Result<(), ConfigError> {
        holdpoint_agent::check_remote_agents(&self.agents).map_err(|e| {
            let (key, message) = match e {
                holdpoint_agent::RuntimeError::Invalid { error } => (error.field, error.message),
                other => ("a2a.agents".to_owned(), other.to_string()),
            };
            ConfigError {
                key: match key.strip_prefix("a2a_agents") {
                    Some(rest) => format!("a2a.agents{rest}"),
                    None => key,
                },
                origin: None,
                message,
            }
        })
    }
}

/// The shortest time anything is kept for (housekeeping runs hourly). Shorter idempotency
/// retention, and a client retrying a slow request could find its key forgotten.
const MIN_RETENTION: Duration = Duration::from_secs(3600);

/// The shortest `server.turn_lease`: shorter, and renewals (a third of it) would crowd the
/// database and a slow write would lose a live node's turns.
const MIN_TURN_LEASE: Duration = Duration::from_secs(1);

/// The sections, as environment variables name them.
const SECTIONS: [&str; 8] = [
    "server", "policy", "llm", "shell", "webhooks", "log", "store", "limits",
];

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerSettings {
    /// The address to listen on. Only loopback by default: listening on other interfaces is
    /// a choice to make explicitly.
    pub bind: SocketAddr,
    /// More names the server answers to in `Host` (a public name behind a proxy), beyond its
    /// bind address and, for loopback, `localhost`.
    #[serde(deserialize_with = "list")]
    pub allowed_hosts: Vec<String>,
    /// The largest request body, in bytes.
    pub max_body: usize,
    /// The longest `wait` on a hold a client may ask for.
    #[serde(with = "duration")]
    pub max_wait: Duration,
    /// How long a client may take to send a request's headers; a connection that trickles
    /// them in, or sends nothing, is closed.
    #[serde(with = "duration")]
    pub header_timeout: Duration,
    /// How often an idle live event stream gets a heartbeat (a comment line), so that proxies
    /// and clients can tell a quiet stream from a dead one.
    #[serde(with = "duration")]
    pub heartbeat: Duration,
    /// How long the response to a request with an `Idempotency-Key` is kept, so that a retry
    /// with that key gets it again instead of acting twice.
    #[serde(with = "duration")]
    pub idempotency_retention: Duration,
    /// How long a node's claim on a turn under way lasts without renewal (it renews a third
    /// of the way through). When several nodes share a PostgreSQL database and one dies,
    /// another takes its turns over this long after its last renewal.
    #[serde(with = "duration")]
    pub turn_lease: Duration,
    /// How long a client may accept none of the bytes the server has for it (a live event
    /// stream it stopped reading, say) before its connection is closed.
    #[serde(with = "duration")]
    pub send_timeout: Duration,
    /// How long a hold that was waited on (a long poll, the MCP gateway) may go without a
    /// waiter before it is withdrawn: its raiser stopped waiting, so its call cannot run.
    #[serde(with = "duration")]
    pub waiter_grace: Duration,
}

impl Default for ServerSettings {
    fn default() -> Self {
        ServerSettings {
            bind: SocketAddr::from(([127, 0, 0, 1], 7717)),
            allowed_hosts: Vec::new(),
            max_body: 1024 * 1024,
            max_wait: Duration::from_secs(120),
            header_timeout: Duration::from_secs(10),
            heartbeat: HEARTBEAT,
            idempotency_retention: IDEMPOTENCY_RETENTION,
            turn_lease: holdpoint_agent::TURN_LEASE,
            send_timeout: Duration::from_secs(30),
            waiter_grace: WAITER_GRACE,
        }
    }
}

/// `server.waiter_grace` unless set.
pub const WAITER_GRACE: Duration = Duration::from_secs(30);

/// What one client can make the server hold, and how fast it may ask (docs/configuration.md,
/// "Limits"). A limit on one credential is answered 429, one on the whole server 503, both
/// with `Retry-After`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct LimitSettings {
    /// Client connections open at once (fewer when the process may open fewer descriptors:
    /// a quarter of its limit is kept for the rest). When full, the oldest connection that
    /// has sent no request yet is closed for a new one.
    pub connections: usize,
    /// Client connections open at once from one address, counted the same way.
    pub connections_per_address: usize,
    /// Live event streams open on this server, all credentials together. A tenth of them
    /// (at least one) is kept for people's credentials: agents' streams are refused first.
    pub streams: usize,
    /// Live event streams open with one credential (a browser session counts as the token it
    /// signed in with).
    pub streams_per_token: usize,
    /// Long polls (`…/wait`) under way with one credential.
    pub waits_per_token: usize,
    /// Pending holds in one world: a raise that would pass it raises nothing.
    pub pending_holds_per_world: u64,
    /// Pending holds raised by one credential (by its name, the holds' `requested_by`).
    pub pending_holds_per_token: u64,
    /// Requests per second one credential may make, on average.
    pub requests_per_second: u32,
    /// Requests one credential may make at once, above the average, after a quiet time.
    pub request_burst: u32,
}

impl LimitSettings {
    /// No limit at all: for load generators and fuzzers, which drive a server hard from few
    /// credentials to measure or probe what it does, not its limits.
    pub fn lifted() -> LimitSettings {
        LimitSettings {
            connections: usize::MAX,
            connections_per_address: usize::MAX,
            streams: usize::MAX,
            streams_per_token: usize::MAX,
            waits_per_token: usize::MAX,
            pending_holds_per_world: u64::MAX,
            pending_holds_per_token: u64::MAX,
            requests_per_second: u32::MAX,
            request_burst: u32::MAX,
        }
    }
}

impl Default for LimitSettings {
    fn default() -> Self {
        LimitSettings {
            connections: 4096,
            connections_per_address: 1024,
            streams: 1000,
            streams_per_token: 32,
            waits_per_token: 256,
            pending_holds_per_world: 10_000,
            pending_holds_per_token: 1000,
            requests_per_second: 200,
            request_burst: 1000,
        }
    }
}

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct PolicySettings {
    /// The policy file (relative paths are from the configuration file's folder). Without
    /// one, every tool call asks a person.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<PathBuf>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct StoreSettings {
    /// A PostgreSQL database (`postgres://USER:PASSWORD@HOST:PORT/DATABASE`) instead of the
    /// SQLite file in the data directory. Several servers on one database share its holds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct LlmSettings {
    #[serde(with = "duration")]
    pub connect_timeout: Duration,
    /// Until a model's answer starts.
    #[serde(with = "duration")]
    pub first_byte_timeout: Duration,
    /// Between two pieces of a streamed answer.
    #[serde(with = "duration")]
    pub idle_timeout: Duration,
    /// Extra attempts after a rate limit, a server error or a refused connection.
    pub retries: u32,
}

impl Default for LlmSettings {
    fn default() -> Self {
        let t = holdpoint_llm::Timeouts::default();
        LlmSettings {
            connect_timeout: t.connect,
            first_byte_timeout: t.first_byte,
            idle_timeout: t.idle,
            retries: t.retries,
        }
    }
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ShellSettings {
    /// When an agent names no timeout for a command.
    #[serde(with = "duration")]
    pub default_timeout: Duration,
    #[serde(with = "duration")]
    pub max_timeout: Duration,
    /// Bytes of stdout and of stderr kept per command.
    pub max_output: usize,
}

impl Default for ShellSettings {
    fn default() -> Self {
        let s = holdpoint_agent::ShellLimits::default();
        ShellSettings {
            default_timeout: s.default_timeout,
            max_timeout: s.max_timeout,
            max_output: s.max_output,
        }
    }
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct WebhookSettings {
    /// Attempts per delivery, the first included.
    pub attempts: u32,
    /// The wait before the second attempt; it doubles each time.
    #[serde(with = "duration")]
    pub backoff: Duration,
    /// Per attempt.
    #[serde(with = "duration")]
    pub timeout: Duration,
    /// How long the record of a finished delivery (delivered or failed) is kept.
    #[serde(with = "duration")]
    pub keep_deliveries: Duration,
}

impl Default for WebhookSettings {
    fn default() -> Self {
        WebhookSettings {
            attempts: 6,
            backoff: Duration::from_secs(1),
            timeout: Duration::from_secs(10),
            keep_deliveries: Duration::from_secs(30 * 24 * 3600),
        }
    }
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogSettings {
    pub format: LogFormat,
    /// A level (`info`) or per-module directives (`info,holdpoint_server=debug`).
    pub level: String,
}

impl Default for LogSettings {
    fn default() -> Self {
        LogSettings {
            format: LogFormat::Text,
            level: "info".into(),
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Lines for people.
    #[default]
    Text,
    /// One JSON object per line, for log collectors.
    Json,
}

impl std::str::FromStr for LogFormat {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "text" => Ok(LogFormat::Text),
            "json" => Ok(LogFormat::Json),
            other => Err(format!("{other:?} is not a log format: use text or json")),
        }
    }
}

/// A setting that is wrong, named.
#[derive(Debug, thiserror::Error)]
#[error("{key}{}: {message}", origin.as_ref().map(|o| format!(" (from {o})")).unwrap_or_default())]
pub struct ConfigError {
    /// `server.bind`, or the file when the file itself is at fault.
    pub key: String,
    /// The file or the environment variable the value came from.
    pub origin: Option<String>,
    pub message: String,
}

impl Settings {
    /// Reads `file` (if any), then the `HOLDPOINT_<SECTION>_<KEY>` variables among `env`.
    pub fn load(
        file: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Settings, ConfigError> {
        let mut table = match file {
            Some(path) => read_file(path)?,
            None => toml::Table::new(),
        };
        let mut origins: HashMap<String, String> = HashMap::new();
        for (name, raw) in env {
            let Some(rest) = name.strip_prefix("HOLDPOINT_") else {
                continue;
            };
            let rest = rest.to_ascii_lowercase();
            let Some((section, key)) = rest.split_once('_') else {
                continue;
            };
            // HOLDPOINT_DATA, HOLDPOINT_TOKEN and the like are not settings.
            if !SECTIONS.contains(&section) {
                continue;
            }
            let entry = table
                .entry(section.to_owned())
                .or_insert_with(|| toml::Value::Table(toml::Table::new()));
            let toml::Value::Table(section_table) = entry else {
                return Err(ConfigError {
                    key: section.into(),
                    origin: file.map(|f| f.display().to_string()),
                    message: "must be a table ([section])".into(),
                });
            };
            section_table.insert(key.to_owned(), env_value(&raw));
            origins.insert(format!("{section}.{key}"), name);
        }
        let file_origin = file.map(|f| f.display().to_string());
        let mut settings: Settings = serde_path_to_error::deserialize(toml::Value::Table(table))
            .map_err(|e| {
                // The path names an unknown key too (`server.bindd`).
                let key = e.path().to_string();
                let message = e.into_inner().message().trim().to_owned();
                let origin = origins.get(&key).cloned().or_else(|| file_origin.clone());
                ConfigError {
                    key,
                    origin,
                    message,
                }
            })?;
        if let (Some(policy), Some(dir)) = (&settings.policy.file, file.and_then(Path::parent)) {
            settings.policy.file = Some(dir.join(policy));
        }
        settings.check()?;
        Ok(settings)
    }

    /// Rules across keys, and values serde cannot judge.
    fn check(&self) -> Result<(), ConfigError> {
        let bad = |key: &str, message: &str| {
            Err(ConfigError {
                key: key.into(),
                origin: None,
                message: message.into(),
            })
        };
        if self.server.max_body < 1024 {
            return bad("server.max_body", "must be at least 1024 bytes");
        }
        if self.server.max_wait.is_zero() {
            return bad("server.max_wait", "must be longer than zero");
        }
        if self.server.header_timeout.is_zero() {
            return bad("server.header_timeout", "must be longer than zero");
        }
        if self.server.heartbeat.is_zero() {
            return bad("server.heartbeat", "must be longer than zero");
        }
        if self.server.idempotency_retention < MIN_RETENTION {
            return bad(
                "server.idempotency_retention",
                "must be at least 1h (clients retry a request within that long)",
            );
        }
        if self.server.turn_lease < MIN_TURN_LEASE {
            return bad(
                "server.turn_lease",
                "must be at least 1s (a node renews its leases a third of the way through)",
            );
        }
        if self.server.send_timeout.is_zero() {
            return bad("server.send_timeout", "must be longer than zero");
        }
        if self.server.waiter_grace < Duration::from_secs(1) {
            return bad(
                "server.waiter_grace",
                "must be at least 1s (a client between two long polls goes a moment without one)",
            );
        }
        let l = &self.limits;
        for (key, value) in [
            ("limits.connections", l.connections as u64),
            (
                "limits.connections_per_address",
                l.connections_per_address as u64,
            ),
            ("limits.streams", l.streams as u64),
            ("limits.streams_per_token", l.streams_per_token as u64),
            ("limits.waits_per_token", l.waits_per_token as u64),
            ("limits.pending_holds_per_world", l.pending_holds_per_world),
            ("limits.pending_holds_per_token", l.pending_holds_per_token),
            (
                "limits.requests_per_second",
                u64::from(l.requests_per_second),
            ),
            ("limits.request_burst", u64::from(l.request_burst)),
        ] {
            if value == 0 {
                return bad(key, "must be at least 1");
            }
        }
        if l.streams_per_token > l.streams {
            return bad(
                "limits.streams_per_token",
                "must not be more than limits.streams",
            );
        }
        if l.request_burst < l.requests_per_second {
            return bad(
                "limits.request_burst",
                "must be at least limits.requests_per_second",
            );
        }
        if self.webhooks.keep_deliveries < MIN_RETENTION {
            return bad("webhooks.keep_deliveries", "must be at least 1h");
        }
        if let Some(h) = self
            .server
            .allowed_hosts
            .iter()
            .find(|h| h.is_empty() || h.contains(['/', ' ']))
        {
            return bad(
                "server.allowed_hosts",
                &format!(
                    "{h:?} is not a host name (such as holdpoint.example.com or holdpoint.example.com:8443)"
                ),
            );
        }
        if self.shell.default_timeout > self.shell.max_timeout {
            return bad(
                "shell.default_timeout",
                "must not be longer than shell.max_timeout",
            );
        }
        if self.webhooks.attempts == 0 {
            return bad("webhooks.attempts", "must be at least 1");
        }
        // A bare word is a level; tracing would read a misspelt level as a module's name.
        const LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];
        let directives_ok =
            self.log.level.split(',').all(|d| {
                d.contains('=') || LEVELS.contains(&d.trim().to_ascii_lowercase().as_str())
            });
        if !directives_ok || tracing_subscriber::EnvFilter::try_new(&self.log.level).is_err() {
            return bad(
                "log.level",
                "use error, warn, info, debug or trace (or directives such as info,holdpoint_server=debug)",
            );
        }
        if let Some(url) = &self.store.url {
            holdpoint_store::check_url(url).map_err(|message| ConfigError {
                key: "store.url".into(),
                origin: None,
                message,
            })?;
        }
        self.mcp.check().map_err(|p| ConfigError {
            key: p.key,
            origin: None,
            message: p.message,
        })?;
        self.channels
            .check()
            .map_err(|(key, message)| ConfigError {
                key,
                origin: None,
                message,
            })?;
        self.a2a.check()?;
        Ok(())
    }

    /// The settings as TOML, to show a person (what `holdpoint config check` prints): the
    /// database's password and the values of MCP servers' `env` and `headers` and of remote
    /// A2A agents' `headers` (keys, tokens) are hidden.
    pub fn to_toml(&self) -> String {
        let mut shown = self.clone();
        shown.store.url = shown.store.url.as_deref().map(holdpoint_store::redact);
        holdpoint_core::mcp::hide_all_secrets(&mut shown.mcp.servers);
        holdpoint_agent::hide_remote_secrets(&mut shown.a2a.agents);
        toml::to_string(&shown).unwrap_or_default()
    }
}

fn read_file(path: &Path) -> Result<toml::Table, ConfigError> {
    let origin = Some(path.display().to_string());
    let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
        key: "config file".into(),
        origin: origin.clone(),
        message: format!("cannot read it: {e}"),
    })?;
    text.parse::<toml::Table>().map_err(|e| ConfigError {
        key: "config file".into(),
        origin,
        message: e.to_string().trim().to_owned(),
    })
}

/// A variable's value: TOML when it parses as a value, else the text itself.
fn env_value(raw: &str) -> toml::Value {
    format!("v = {raw}")
        .parse::<toml::Table>()
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(raw.to_owned()))
}

/// A list, or (from an environment variable) a comma-separated string.
fn list<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        Text(String),
        List(Vec<String>),
    }
    Ok(
        match OneOrMany::deserialize(d).map_err(|_| {
            serde::de::Error::custom("a list of host names, or one string of comma-separated names")
        })? {
            OneOrMany::Text(s) => s
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect(),
            OneOrMany::List(v) => v,
        },
    )
}

/// Durations as people write them: `30s`, `2m`, `1h 30m`.
pub(crate) mod duration {
    use super::*;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&humantime::format_duration(*d).to_string())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let text = String::deserialize(d).map_err(|_| {
            serde::de::Error::custom("a duration such as \"30s\", \"2m\" or \"1h 30m\"")
        })?;
        humantime::parse_duration(&text).map_err(|e| {
            serde::de::Error::custom(format!(
                "{text:?} is not a duration ({e}); write such as \"30s\", \"2m\" or \"1h 30m\""
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    /// docs/configuration.md shows every setting with its default: it must parse, and say
    /// what the code does.
    #[test]
    fn the_documented_defaults_are_the_defaults() {
        let doc = include_str!("../../../docs/configuration.md");
        let block = doc
            .split("```toml\n")
            .nth(1)
            .and_then(|rest| rest.split("```").next())
            .expect("a toml block in docs/configuration.md");
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("config.toml");
        std::fs::write(&file, block).unwrap();
        let documented = Settings::load(Some(&file), std::iter::empty()).unwrap();
        assert_eq!(documented.to_toml(), Settings::default().to_toml());
        // Every key appears (policy.file, which has no default, as a comment).
        let shown: toml::Table = block.parse().unwrap();
        let all: toml::Table = Settings::default().to_toml().parse().unwrap();
        for section in SECTIONS {
            let keys = |t: &toml::Table| -> Vec<String> {
                t.get(section)
                    .and_then(|s| s.as_table())
                    .map(|s| s.keys().cloned().collect())
                    .unwrap_or_default()
            };
            assert_eq!(keys(&shown), keys(&all), "the keys of [{section}]");
        }
        assert!(block.contains("# file = "), "policy.file is not documented");
    }

    #[test]
    fn mcp_require_approval_outside_tools_is_refused_naming_the_tool() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("config.toml");
        std::fs::write(
            &file,
            "[mcp.servers.fs]\ncommand = \"mcp-fs\"\ntools = [\"read_file\"]\nrequire_approval = [\"write_file\"]\n",
        )
        .unwrap();
        let e = Settings::load(Some(&file), std::iter::empty()).unwrap_err();
        assert_eq!(e.key, "mcp.servers.fs.require_approval");
        assert!(e.message.contains("\"write_file\""), "{e}");
        std::fs::write(
            &file,
            "[mcp.servers.fs]\ncommand = \"mcp-fs\"\ntools = [\"read_file\", \"write_file\"]\nrequire_approval = [\"write_file\"]\n",
        )
        .unwrap();
        let ok = Settings::load(Some(&file), std::iter::empty()).unwrap();
        assert!(ok.mcp.servers["fs"].requires_approval("write_file"));
        let e = Settings::load(Some(&file), [("HOLDPOINT_MCP_SERVERS".into(), "x".into())]);
        assert!(e.is_ok(), "[mcp] is not set from the environment");
    }

    #[test]
    fn the_settings_shown_hide_mcp_servers_secrets() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("config.toml");
        std::fs::write(
            &file,
            "[mcp.servers.gh]\ncommand = \"mcp-gh\"\nenv = { GITHUB_TOKEN = \"ghp_secret\" }\n\
             [mcp.servers.web]\nurl = \"https://mcp.example/\"\nheaders = { Authorization = \"Bearer s3cret\" }\n",
        )
        .unwrap();
        let shown = Settings::load(Some(&file), std::iter::empty())
            .unwrap()
            .to_toml();
        assert!(
            !shown.contains("ghp_secret") && !shown.contains("s3cret"),
            "{shown}"
        );
        let shown: toml::Table = shown.parse().unwrap();
        let servers = &shown["mcp"]["servers"];
        assert_eq!(
            servers["gh"]["env"]["GITHUB_TOKEN"].as_str(),
            Some("(hidden)")
        );
        assert_eq!(servers["gh"]["command"].as_str(), Some("mcp-gh"));
        assert_eq!(
            servers["web"]["headers"]["Authorization"].as_str(),
            Some("(hidden)")
        );
    }

    #[test]
    fn the_database_url_is_checked_and_its_password_never_shown() {
        let env = |v: &str| [("HOLDPOINT_STORE_URL".to_owned(), v.to_owned())];
        let e = Settings::load(None, env("mysql://u:pw@db/holdpoint")).unwrap_err();
        assert_eq!(e.key, "store.url");
        assert_eq!(e.origin.as_deref(), None);
        assert!(e.message.contains("postgres://USER:PASSWORD@HOST"), "{e}");
        assert!(!e.to_string().contains("pw@"), "{e}");
        let ok = Settings::load(None, env("postgres://hp:s3cret@db:5432/holdpoint")).unwrap();
        assert_eq!(
            ok.store.url.as_deref(),
            Some("postgres://hp:s3cret@db:5432/holdpoint")
        );
        let shown = ok.to_toml();
        assert!(!shown.contains("s3cret"), "{shown}");
        assert!(
            shown.contains("postgres://hp:(hidden)@db:5432/holdpoint"),
            "{shown}"
        );
    }

    #[test]
    fn a_turn_lease_is_at_least_a_second() {
        let env = |v: &str| [("HOLDPOINT_SERVER_TURN_LEASE".to_owned(), v.to_owned())];
        let e = Settings::load(None, env("500ms")).unwrap_err();
        assert_eq!(e.key, "server.turn_lease");
        assert!(e.message.contains("at least 1s"), "{e}");
        let ok = Settings::load(None, env("2s")).unwrap();
        assert_eq!(ok.server.turn_lease, Duration::from_secs(2));
        assert_eq!(
            Settings::default().server.turn_lease,
            Duration::from_secs(5)
        );
    }

    #[test]
    fn idempotency_retention_is_at_least_an_hour() {
        let env = |v: &str| {
            [(
                "HOLDPOINT_SERVER_IDEMPOTENCY_RETENTION".to_owned(),
                v.to_owned(),
            )]
        };
        let e = Settings::load(None, env("10m")).unwrap_err();
        assert_eq!(e.key, "server.idempotency_retention");
        assert!(e.message.contains("at least 1h"), "{e}");
        let ok = Settings::load(None, env("1day")).unwrap();
        assert_eq!(
            ok.server.idempotency_retention,
            Duration::from_secs(24 * 3600)
        );
    }

    #[test]
    fn limits_are_checked_naming_the_key() {
        let load = |name: &str, v: &str| Settings::load(None, [(name.to_owned(), v.to_owned())]);
        let e = load("HOLDPOINT_LIMITS_STREAMS_PER_TOKEN", "0").unwrap_err();
        assert_eq!(e.key, "limits.streams_per_token");
        assert!(e.message.contains("at least 1"), "{e}");
        let e = load("HOLDPOINT_LIMITS_STREAMS", "\"many\"").unwrap_err();
        assert_eq!(e.key, "limits.streams");
        assert_eq!(e.origin.as_deref(), Some("HOLDPOINT_LIMITS_STREAMS"));
        let e = load("HOLDPOINT_LIMITS_REQUEST_BURST", "10").unwrap_err();
        assert_eq!(e.key, "limits.request_burst");
        assert!(e.message.contains("limits.requests_per_second"), "{e}");
        let e = load("HOLDPOINT_LIMITS_STREEMS", "10").unwrap_err();
        assert_eq!(e.key, "limits.streems");
        let ok = load("HOLDPOINT_LIMITS_WAITS_PER_TOKEN", "3").unwrap();
        assert_eq!(ok.limits.waits_per_token, 3);
        let e = load("HOLDPOINT_SERVER_SEND_TIMEOUT", "0s").unwrap_err();
        assert_eq!(e.key, "server.send_timeout");
    }
}
