//! Remote A2A agents as tools: each of a world's `a2a_agents` is offered to its agents as
//! `a2a__NAME`, taking a message in words. The call goes through policy like any tool's; how it
//! runs, and how what the remote agent asks to confirm becomes a hold in the chat, is in
//! `turn/remote.rs`. Here: the settings' rules, the tool as the LLM is told of it, and the
//! remote agents' cards, read through `holdpoint_a2a::client` and kept a while.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use holdpoint_a2a::client::{Card, Client, Remote};
use holdpoint_llm::ToolSpec;
use holdpoint_protocol::{Agent, RemoteAgentConfig, World};
use parking_lot::Mutex;
use serde_json::{Value, json};

use super::Host;
use crate::error::RuntimeError;

/// What the tools' names start with: `a2a__bank`.
pub(crate) const PREFIX: &str = "a2a__";

/// The longest name of a remote agent.
const MAX_NAME: usize = 40;
/// Most remote agents a world may name.
const MAX_AGENTS: usize = 32;
/// Longest URL.
const MAX_URL: usize = 2048;
/// When `timeout` is not given.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
const TIMEOUTS: (Duration, Duration) = (Duration::from_secs(1), Duration::from_secs(86_400));
/// How long a card read is used before it is read again; a card that could not be read.
const CARD_FRESH: Duration = Duration::from_secs(300);
const CARD_FAILED: Duration = Duration::from_secs(10);
/// The longest a card may take (less when `timeout` is less): every step of a turn that offers
/// the tool describes it from the card, so a remote agent that hangs must not hold the turn.
const CARD_TIMEOUT: Duration = Duration::from_secs(10);

/// What a secret's value is shown as.
const HIDDEN: &str = "(hidden)";

/// Checks a world's remote agents, naming the field at fault (`a2a_agents.bank.url`); the
/// configuration file's are checked alike.
pub fn check(agents: &BTreeMap<String, RemoteAgentConfig>) -> Result<(), RuntimeError> {
    if agents.len() > MAX_AGENTS {
        return Err(RuntimeError::invalid(
            "a2a_agents",
            format!(
                "{} remote agents are named; at most {MAX_AGENTS} are allowed",
                agents.len()
            ),
        ));
    }
    for (name, remote) in agents {
        let at = |field: &str| format!("a2a_agents.{name}.{field}");
        let allowed = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
        if name.is_empty()
            || name.len() > MAX_NAME
            || !name.chars().all(allowed)
            || name.contains("__")
            || name.starts_with('_')
            || name.ends_with('_')
        {
            return Err(RuntimeError::invalid(
                &format!(
                    "a2a_agents.{}",
                    name.chars().take(MAX_NAME + 1).collect::<String>()
                ),
                format!(
                    "not a remote agent's name: use 1 to {MAX_NAME} letters, digits, - and _, without __ and not starting or ending with _ (the tool is {PREFIX}NAME)"
                ),
            ));
        }
        match (&remote.url, &remote.agent) {
            (Some(url), None) => check_url(&at("url"), url)?,
            (None, Some(agent)) => {
                if agent.trim().is_empty() {
                    return Err(RuntimeError::invalid(&at("agent"), "must not be empty"));
                }
                if !remote.headers.is_empty() {
                    return Err(RuntimeError::invalid(
                        &at("headers"),
                        "an agent of the world is called without HTTP: headers apply only to a remote agent's url",
                    ));
                }
            }
            (Some(_), Some(_)) => {
                return Err(RuntimeError::invalid(
                    &at("agent"),
                    "give either url (a remote A2A agent) or agent (an agent of this world), not both",
                ));
            }
            (None, None) => {
                return Err(RuntimeError::invalid(
                    &at("url"),
                    "give url (a remote A2A agent's card or base URL) or agent (an agent of this world)",
                ));
            }
        }
        crate::catalog::check_headers_at(&at("headers"), &remote.headers)?;
        if let Some(t) = &remote.timeout {
            parse_timeout(t).map_err(|m| RuntimeError::invalid(&at("timeout"), m))?;
        }
    }
    Ok(())
}

fn check_url(field: &str, url: &str) -> Result<(), RuntimeError> {
    let trimmed = url.trim();
    if !(trimmed.starts_with("http://") || trimmed.starts_with("https://"))
        || trimmed.len() > MAX_URL
        || trimmed.chars().any(char::is_whitespace)
    {
        return Err(RuntimeError::invalid(
            field,
            format!(
                "{:?} is not an http:// or https:// URL (the Agent Card's, or the agent's base URL)",
                url.chars().take(100).collect::<String>()
            ),
        ));
    }
    Ok(())
}

fn parse_timeout(text: &str) -> Result<Duration, String> {
    holdpoint_core::limits::duration_within(text, TIMEOUTS, "\"120s\" or \"5m\"")
}

/// How long the remote agent may take over one request.
pub(crate) fn timeout(remote: &RemoteAgentConfig) -> Duration {
    remote
        .timeout
        .as_deref()
        .and_then(|t| parse_timeout(t).ok())
        .unwrap_or(DEFAULT_TIMEOUT)
}

/// The remote agents as they may be shown: the values of their headers hidden.
pub fn hide_secrets(agents: &mut BTreeMap<String, RemoteAgentConfig>) {
    for remote in agents.values_mut() {
        for value in remote.headers.values_mut() {
            *value = HIDDEN.to_owned();
        }
    }
}

/// A card read, or why it could not be, and when.
type CardRead = (Instant, Result<Card, String>);

/// The client, the cards read lately, and the configuration file's remote agents.
#[derive(Default)]
pub(crate) struct Remotes {
    pub(crate) client: Client,
    cards: Mutex<HashMap<String, CardRead>>,
    /// Offered to every world, beside its own (`[a2a.agents.NAME]`).
    file: BTreeMap<String, RemoteAgentConfig>,
}

/// How a remote agent is reached.
pub(crate) fn reach(remote: &RemoteAgentConfig) -> Remote {
    Remote {
        headers: remote.headers.clone(),
        timeout: timeout(remote),
    }
}

impl Remotes {
    pub(crate) fn new(file: BTreeMap<String, RemoteAgentConfig>) -> Remotes {
        Remotes {
            file,
            ..Remotes::default()
        }
    }

    /// The remote agents offered to `world`'s agents: its own, and the configuration file's
    /// that it does not name itself.
    pub(crate) fn offered<'w>(
        &'w self,
        world: &'w World,
    ) -> impl Iterator<Item = (&'w String, &'w RemoteAgentConfig)> {
        world.a2a_agents.iter().chain(
            self.file
                .iter()
                .filter(|(name, _)| !world.a2a_agents.contains_key(*name)),
        )
    }

    /// The remote agent's card: read again once it is old, or soon when it could not be read.
    pub(crate) async fn card(&self, url: &str, remote: &RemoteAgentConfig) -> Result<Card, String> {
        // The headers are part of the key: other credentials may be shown another card.
        let key = serde_json::to_string(remote).unwrap_or_default();
        if let Some((at, card)) = self.cards.lock().get(&key) {
            let fresh = if card.is_ok() {
                CARD_FRESH
            } else {
                CARD_FAILED
            };
            if at.elapsed() < fresh {
                return card.clone();
            }
        }
        let mut reach = reach(remote);
        reach.timeout = reach.timeout.min(CARD_TIMEOUT);
        let card = self
            .client
            .card(url.trim(), &reach)
            .await
            .map_err(|e| e.to_string());
        let mut cards = self.cards.lock();
        cards.retain(|_, (at, _)| at.elapsed() < CARD_FRESH);
        cards.insert(key, (Instant::now(), card.clone()));
        card
    }
}

/// The remote agent an agent may call as `tool`: its name and settings (the world's own, else
/// the configuration file's).
pub(crate) fn find<'w>(
    remotes: &'w Remotes,
    world: &'w World,
    agent: &Agent,
    tool: &str,
) -> Option<(&'w str, &'w RemoteAgentConfig)> {
    let name = tool.strip_prefix(PREFIX)?;
    let (name, remote) = world
        .a2a_agents
        .get_key_value(name)
        .or_else(|| remotes.file.get_key_value(name))?;
    super::allowed(agent, tool).then_some((name.as_str(), remote))
}

/// The tools of the remote agents offered to `world`'s agents, by name.
pub(crate) fn tool_names(remotes: &Remotes, world: &World) -> Vec<String> {
    remotes
        .offered(world)
        .map(|(name, _)| format!("{PREFIX}{name}"))
        .collect()
}

/// The arguments' schema: a message in words.
pub(crate) fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {"message": {"type": "string", "minLength": 1,
            "description": "What to say to the remote agent, in words."}},
        "required": ["message"],
        "additionalProperties": false,
    })
}

/// The tools of the world's remote agents `agent` may call, described from their cards.
pub(crate) async fn specs(host: &dyn Host, agent: &Agent) -> Result<Vec<ToolSpec>, RuntimeError> {
    let world = host.world(agent.world).await?;
    let mut specs = Vec::new();
    for (name, remote) in host.remotes().offered(&world) {
        let tool = format!("{PREFIX}{name}");
        if !super::allowed(agent, &tool) {
            continue;
        }
        let description = match (&remote.agent, &remote.url) {
            (Some(sub), _) => match host.find_agent(agent.world, sub).await {
                Ok(sub) => describe_sub_agent(name, &sub),
                Err(e) => {
                    format!("The agent {sub:?} of this world, which cannot be called now: {e}.")
                }
            },
            (None, Some(url)) => match host.remotes().card(url, remote).await {
                Ok(card) => describe(name, &card),
                Err(e) => format!(
                    "The remote A2A agent {name:?}. (Its Agent Card could not be read just now: {e}.)"
                ),
            },
            (None, None) => continue,
        };
        specs.push(ToolSpec {
            name: tool,
            description,
            parameters: schema(),
        });
    }
    Ok(specs)
}

/// A sub-agent's tool: its name, and what its instructions say first.
fn describe_sub_agent(name: &str, sub: &Agent) -> String {
    let mut text = format!("The agent {:?} of this world", sub.name);
    if sub.name != name {
        text.push_str(&format!(" (as {name:?})"));
    }
    let gist: String = sub
        .system_prompt
        .lines()
        .next()
        .unwrap_or("")
        .trim()
        .chars()
        .take(300)
        .collect();
    if gist.is_empty() {
        text.push('.');
    } else {
        text.push_str(&format!(", whose instructions begin: {gist:?}."));
    }
    text.push_str(
        " Send it a message in words; it works on it in a chat of its own (its calls may wait for a person) and its answer is the result. A later call in this chat continues the same conversation.",
    );
    text
}

fn describe(name: &str, card: &Card) -> String {
    let mut text = format!("The remote A2A agent {name:?}");
    if !card.name.is_empty() && card.name != name {
        text.push_str(&format!(" ({})", card.name));
    }
    if card.description.is_empty() {
        text.push('.');
    } else {
        text.push_str(&format!(": {}", card.description.trim()));
        if !text.ends_with('.') {
            text.push('.');
        }
    }
    let skills: Vec<String> = card
        .skills
        .iter()
        .map(|(n, d)| match d.trim() {
            "" => n.clone(),
            d => format!("{n}: {d}"),
        })
        .collect();
    if !skills.is_empty() {
        text.push_str(&format!(" Skills: {}.", skills.join("; ")));
    }
    text.push_str(
        " Send it a message in words; its answer is the result. A later call in this chat continues the same conversation.",
    );
    let max = 4096;
    if text.len() > max {
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(name: &str, remote: RemoteAgentConfig) -> BTreeMap<String, RemoteAgentConfig> {
        BTreeMap::from([(name.to_owned(), remote)])
    }

    fn field(e: RuntimeError) -> String {
        match e {
            RuntimeError::Invalid { error } => error.field,
            other => panic!("{other}"),
        }
    }

    #[test]
    fn remote_agents_are_checked_naming_the_field() {
        let ok = RemoteAgentConfig {
            url: Some("http://127.0.0.1:9200".into()),
            agent: None,
            headers: BTreeMap::from([("Authorization".into(), "Bearer x".into())]),
            timeout: Some("30s".into()),
        };
        check(&one("bank", ok.clone())).unwrap();
        assert_eq!(
            field(check(&one("a__b", ok.clone())).unwrap_err()),
            "a2a_agents.a__b"
        );
        let bad_url = RemoteAgentConfig {
            url: Some("ftp://x".into()),
            ..ok.clone()
        };
        assert_eq!(
            field(check(&one("bank", bad_url)).unwrap_err()),
            "a2a_agents.bank.url"
        );
        let bad_timeout = RemoteAgentConfig {
            timeout: Some("soon".into()),
            ..ok.clone()
        };
        assert_eq!(
            field(check(&one("bank", bad_timeout)).unwrap_err()),
            "a2a_agents.bank.timeout"
        );
        let bad_header = RemoteAgentConfig {
            headers: BTreeMap::from([("X".into(), "a\nb".into())]),
            ..ok
        };
        assert_eq!(
            field(check(&one("bank", bad_header)).unwrap_err()),
            "a2a_agents.bank.headers.X"
        );
    }

    #[test]
    fn the_tool_is_described_from_the_card() {
        let card = Card {
            name: "banker".into(),
            description: "Moves money after confirmation".into(),
            skills: vec![("transfer".into(), "Transfer money.".into())],
            endpoint: "http://x/".into(),
            version: holdpoint_a2a::Version::V1,
        };
        let text = describe("bank", &card);
        assert!(
            text.starts_with("The remote A2A agent \"bank\" (banker): Moves money after confirmation. Skills: transfer: Transfer money."),
            "{text}"
        );
    }
}
