//! Worlds, agents and chats: creating, listing, changing and deleting them.

use std::collections::BTreeMap;

use holdpoint_core::record::put;
use holdpoint_core::store::{HoldFilter, RecordKind, Write};
use holdpoint_protocol::{
    Actor, Agent, AgentChanges, AgentId, Chat, ChatChanges, ChatId, EventPayload, LineageStep,
    LlmSettings, Message, MessageRole, NewAgent, NewChat, NewWorld, Turn, TurnId, TurnStatus,
    UpstreamConfig, World, WorldChanges, WorldId,
};
use uuid::Uuid;

use crate::error::RuntimeError;
use crate::runtime::Runtime;

/// Most LLM calls a turn may make.
const MAX_STEPS: u32 = 200;
const DEFAULT_STEPS: u32 = 20;
/// Most records a listing returns.
const LISTING: usize = 1000;

/// Names of worlds and agents: letters, digits, `_`, `-`, `.`; 1 to 64 characters.
fn check_name(field: &str, name: &str) -> Result<(), RuntimeError> {
    let ok_start = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric());
    let ok_rest = name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c));
    if name.is_empty() || name.len() > 64 || !ok_start || !ok_rest {
        return Err(RuntimeError::invalid(
            field,
            format!(
                "{:?} is not a valid name: use 1 to 64 letters, digits, '_', '-' or '.', starting with a letter or digit",
                truncate(name)
            ),
        ));
    }
    // Worlds and agents are found by id or by name: a name that reads as an id would be
    // taken for one, and its world or agent could not be reached by name.
    if Uuid::try_parse(name).is_ok() {
        return Err(RuntimeError::invalid(
            field,
            format!("{name:?} reads as an id: a name must not be a UUID"),
        ));
    }
    Ok(())
}

fn truncate(s: &str) -> String {
    s.chars().take(64).collect()
}

fn check_text(field: &str, text: &str, max: usize) -> Result<(), RuntimeError> {
    if text.len() > max {
        return Err(RuntimeError::invalid(
            field,
            format!("is {} bytes long; at most {max} are allowed", text.len()),
        ));
    }
    Ok(())
}

/// A world's MCP servers: the same rules as the configuration file's, named as the API's
/// field (`mcp_servers.fs.require_approval`).
fn check_mcp_servers(servers: &BTreeMap<String, UpstreamConfig>) -> Result<(), RuntimeError> {
    holdpoint_core::mcp::check_servers(servers)
        .map_err(|p| RuntimeError::invalid(&p.path("mcp_servers"), p.message))
}

/// A world as events (the log, live streams, webhooks) carry it: its MCP servers' secrets
/// hidden, as the API shows them. The record keeps them.
fn shown(world: &World) -> World {
    let mut world = world.clone();
    holdpoint_core::mcp::hide_all_secrets(&mut world.mcp_servers);
    crate::tools::remote::hide_secrets(&mut world.a2a_agents);
    world
}

fn check_title(title: &str) -> Result<(), RuntimeError> {
    check_text("title", title, 200)
}

fn check_llm(llm: &LlmSettings) -> Result<(), RuntimeError> {
    let url = llm.base_url.trim();
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(RuntimeError::invalid(
            "llm.base_url",
            "must start with http:// or https:// (for example http://localhost:11434/v1)",
        ));
    }
    if llm.model.trim().is_empty() || llm.model.len() > 200 {
        return Err(RuntimeError::invalid(
            "llm.model",
            "name the model (1 to 200 characters)",
        ));
    }
    if let Some(var) = &llm.api_key_env
        && (var.is_empty() || !var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
    {
        return Err(RuntimeError::invalid(
            "llm.api_key_env",
            "the name of an environment variable (letters, digits, '_')",
        ));
    }
    if let Some(t) = llm.temperature
        && !(0.0..=2.0).contains(&t)
    {
        return Err(RuntimeError::invalid("llm.temperature", "between 0 and 2"));
    }
    check_headers(&llm.headers)
}

/// Headers sent to the LLM with every request: a header's name is an HTTP token, and its
/// value has no control character (a line break would end the header and start another).
fn check_headers(headers: &BTreeMap<String, String>) -> Result<(), RuntimeError> {
    check_headers_at("llm.headers", headers)
}

/// Headers sent with every request, named in errors under `field`.
pub(crate) fn check_headers_at(
    field: &str,
    headers: &BTreeMap<String, String>,
) -> Result<(), RuntimeError> {
    let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    for (name, value) in headers {
        if name.is_empty() || name.len() > 100 || !name.chars().all(token) {
            return Err(RuntimeError::invalid(
                field,
                format!(
                    "{:?} is not a header name: use 1 to 100 letters, digits or !#$%&'*+-.^_`|~",
                    truncate(name)
                ),
            ));
        }
        let field = format!("{field}.{name}");
        if value.chars().any(char::is_control) {
            return Err(RuntimeError::invalid(
                &field,
                "must not contain control characters (a line break would start another header)",
            ));
        }
        check_text(&field, value, 8192)?;
    }
    Ok(())
}

fn check_tools(tools: &Option<Vec<String>>) -> Result<(), RuntimeError> {
    for (i, t) in tools.iter().flatten().enumerate() {
        if t.is_empty() || globset::Glob::new(t).is_err() {
            return Err(RuntimeError::invalid(
                &format!("tools[{i}]"),
                format!("{:?} is not a tool name or glob", truncate(t)),
            ));
        }
    }
    Ok(())
}

fn check_steps(steps: u32) -> Result<u32, RuntimeError> {
    if steps == 0 || steps > MAX_STEPS {
        return Err(RuntimeError::invalid(
            "max_steps",
            format!("between 1 and {MAX_STEPS}"),
        ));
    }
    Ok(steps)
}

impl Runtime {
    // ---- worlds

    /// Creates a world; `by` is who asked, as the audit log records it.
    pub async fn create_world(&self, by: &Actor, new: NewWorld) -> Result<World, RuntimeError> {
        check_name("name", &new.name)?;
        check_text(
            "description",
            new.description.as_deref().unwrap_or_default(),
            4096,
        )?;
        check_mcp_servers(&new.mcp_servers)?;
        crate::tools::remote::check(&new.a2a_agents)?;
        let world = World {
            id: WorldId::random(),
            name: new.name,
            description: new.description,
            mcp_servers: new.mcp_servers,
            a2a_agents: new.a2a_agents,
            notice_routes: new.notice_routes,
            created_at: self.now(),
            version: 1,
        };
        let dir = self.world_dir(world.id);
        std::fs::create_dir_all(dir.join("skills")).map_err(|e| {
            RuntimeError::invalid(
                "name",
                format!("cannot create the world's directory {}: {e}", dir.display()),
            )
        })?;
        let write = put(
            RecordKind::World,
            *world.id.as_uuid(),
            None,
            Some(world.name.clone()),
            1,
            &world,
        )?;
        let event = self.event_by(
            by,
            world.id,
            None,
            EventPayload::WorldCreated {
                world: shown(&world),
            },
        );
        self.commit(vec![write], vec![event]).await?;
        Ok(world)
    }

    pub async fn worlds(&self) -> Result<Vec<World>, RuntimeError> {
        Ok(self.records().all(RecordKind::World, None).await?)
    }

    pub async fn world(&self, id: WorldId) -> Result<World, RuntimeError> {
        self.records()
            .get(RecordKind::World, *id.as_uuid())
            .await?
            .ok_or_else(|| RuntimeError::not_found("world", id))
    }

    /// A world by id or by name.
    pub async fn find_world(&self, id_or_name: &str) -> Result<World, RuntimeError> {
        if let Ok(id) = id_or_name.parse::<WorldId>() {
            return self.world(id).await;
        }
        self.records()
            .by_key(RecordKind::World, None, id_or_name)
            .await?
            .map(|k| k.value)
            .ok_or_else(|| RuntimeError::not_found("world", id_or_name))
    }

    /// Changes a world. A change that leaves it as it was changes nothing: no new version,
    /// no event.
    pub async fn update_world(
        &self,
        by: &Actor,
        id: WorldId,
        changes: WorldChanges,
    ) -> Result<World, RuntimeError> {
        let mut world = self.world(id).await?;
        let before = world.clone();
        if let Some(name) = changes.name {
            check_name("name", &name)?;
            world.name = name;
        }
        if let Some(d) = changes.description {
            check_text("description", &d, 4096)?;
            world.description = Some(d);
        }
        if let Some(servers) = changes.mcp_servers {
            for (name, server) in servers {
                match server {
                    Some(server) => world.mcp_servers.insert(name, server),
                    None => world.mcp_servers.remove(&name),
                };
            }
            check_mcp_servers(&world.mcp_servers)?;
        }
        if let Some(agents) = changes.a2a_agents {
            let mut subs = Vec::new();
            for (name, remote) in agents {
                match remote {
                    Some(remote) => {
                        if let Some(sub) = &remote.agent {
                            subs.push((name.clone(), sub.clone()));
                        }
                        world.a2a_agents.insert(name, remote)
                    }
                    None => world.a2a_agents.remove(&name),
                };
            }
            crate::tools::remote::check(&world.a2a_agents)?;
            // A sub-agent named now must be there now (one deleted later fails its calls).
            for (name, sub) in subs {
                if let Err(RuntimeError::NotFound { .. }) = self.find_agent(world.id, &sub).await {
                    return Err(RuntimeError::invalid(
                        &format!("a2a_agents.{name}.agent"),
                        format!("{sub:?} is no agent of this world: create it first"),
                    ));
                }
            }
        }
        // Checked by the server against its `[channels]` before it calls here.
        if let Some(routes) = changes.notice_routes {
            world.notice_routes = routes;
        }
        if world == before {
            return Ok(world);
        }
        world.version += 1;
        let write = put(
            RecordKind::World,
            *id.as_uuid(),
            None,
            Some(world.name.clone()),
            world.version,
            &world,
        )?;
        let event = self.event_by(
            by,
            id,
            None,
            EventPayload::WorldUpdated {
                world: shown(&world),
            },
        );
        self.commit(vec![write], vec![event]).await?;
        Ok(world)
    }

    /// Deletes a world with its agents, chats and their messages. Refused while a turn runs
    /// in it. Its working directory is kept.
    pub async fn delete_world(&self, by: &Actor, id: WorldId) -> Result<(), RuntimeError> {
        self.world(id).await?;
        let chats = self.chats(id).await?;
        for chat in &chats {
            self.refuse_if_busy(chat.id).await?;
        }
        // Holds raised by programs outside Holdpoint belong to the world, not to a chat.
        let open = self
            .store()
            .holds(&HoldFilter {
                world: Some(id.to_string()),
                limit: 1,
                ..HoldFilter::default()
            })
            .await?;
        if let Some(hold) = open.first() {
            return Err(RuntimeError::Conflict {
                code: "holds_pending",
                message: format!(
                    "hold {} of this world is still pending; decide or withdraw its holds first",
                    hold.item.id
                ),
            });
        }
        let mut writes = Vec::new();
        for chat in &chats {
            writes.extend(chat_removal(chat.id));
        }
        writes.push(Write::DeleteRecords {
            kind: RecordKind::Agent,
            parent: *id.as_uuid(),
        });
        writes.push(Write::DeleteRecords {
            kind: RecordKind::Chat,
            parent: *id.as_uuid(),
        });
        // The world's own policy and its versions go with it (the audit log keeps every
        // change): a world made later, even of the same name, starts from the base.
        writes.push(Write::DeleteRecord {
            kind: RecordKind::WorldPolicy,
            id: *id.as_uuid(),
        });
        writes.push(Write::DeleteRecords {
            kind: RecordKind::PolicyHistory,
            parent: *id.as_uuid(),
        });
        writes.push(Write::DeleteRecord {
            kind: RecordKind::World,
            id: *id.as_uuid(),
        });
        let event = self.event_by(by, id, None, EventPayload::WorldDeleted { world: id });
        self.commit(writes, vec![event]).await?;
        Ok(())
    }

    // ---- agents

    pub async fn create_agent(
        &self,
        by: &Actor,
        world: WorldId,
        new: NewAgent,
    ) -> Result<Agent, RuntimeError> {
        self.world(world).await?;
        check_name("name", &new.name)?;
        check_llm(&new.llm)?;
        check_text("system_prompt", &new.system_prompt, 64 * 1024)?;
        check_tools(&new.tools)?;
        let agent = Agent {
            id: AgentId::random(),
            world,
            name: new.name,
            llm: new.llm,
            system_prompt: new.system_prompt,
            tools: new.tools,
            max_steps: check_steps(new.max_steps.unwrap_or(DEFAULT_STEPS))?,
            created_at: self.now(),
            version: 1,
        };
        self.save_agent(by, &agent, true).await?;
        Ok(agent)
    }

    async fn save_agent(
        &self,
        by: &Actor,
        agent: &Agent,
        created: bool,
    ) -> Result<(), RuntimeError> {
        let write = put(
            RecordKind::Agent,
            *agent.id.as_uuid(),
            Some(*agent.world.as_uuid()),
            Some(agent.name.clone()),
            agent.version,
            agent,
        )?;
        let payload = if created {
            EventPayload::AgentCreated {
                agent: Box::new(agent.clone()),
            }
        } else {
            EventPayload::AgentUpdated {
                agent: Box::new(agent.clone()),
            }
        };
        self.commit(
            vec![write],
            vec![self.event_by(by, agent.world, None, payload)],
        )
        .await?;
        Ok(())
    }

    pub async fn agents(&self, world: WorldId) -> Result<Vec<Agent>, RuntimeError> {
        self.world(world).await?;
        Ok(self
            .records()
            .all(RecordKind::Agent, Some(*world.as_uuid()))
            .await?)
    }

    /// The tools `agent` may call, as its LLM is told of them: the built-in ones it is allowed,
    /// then its world's external ones (the A2A agent card lists them as skills).
    pub async fn agent_tools(
        &self,
        agent: &Agent,
    ) -> Result<Vec<holdpoint_llm::ToolSpec>, RuntimeError> {
        let external = crate::tools::external(self, agent).await?;
        let mut specs = crate::tools::specs(agent, &external);
        specs.extend(crate::tools::remote::specs(self, agent).await?);
        Ok(specs)
    }

    /// An agent of `world`, by id or name.
    pub async fn find_agent(
        &self,
        world: WorldId,
        id_or_name: &str,
    ) -> Result<Agent, RuntimeError> {
        let agent: Option<Agent> = match id_or_name.parse::<AgentId>() {
            Ok(id) => self.records().get(RecordKind::Agent, *id.as_uuid()).await?,
            Err(_) => self
                .records()
                .by_key(RecordKind::Agent, Some(*world.as_uuid()), id_or_name)
                .await?
                .map(|k| k.value),
        };
        agent
            .filter(|a| a.world == world)
            .ok_or_else(|| RuntimeError::not_found("agent", id_or_name))
    }

    /// Changes an agent. A change that leaves it as it was changes nothing: no new version,
    /// no event.
    pub async fn update_agent(
        &self,
        by: &Actor,
        world: WorldId,
        id: AgentId,
        changes: AgentChanges,
    ) -> Result<Agent, RuntimeError> {
        let mut agent = self.find_agent(world, &id.to_string()).await?;
        let before = agent.clone();
        if let Some(name) = changes.name {
            check_name("name", &name)?;
            agent.name = name;
        }
        if let Some(llm) = changes.llm {
            check_llm(&llm)?;
            agent.llm = llm;
        }
        if let Some(p) = changes.system_prompt {
            check_text("system_prompt", &p, 64 * 1024)?;
            agent.system_prompt = p;
        }
        if changes.tools.is_some() {
            check_tools(&changes.tools)?;
            agent.tools = changes.tools;
        }
        if let Some(steps) = changes.max_steps {
            agent.max_steps = check_steps(steps)?;
        }
        if agent == before {
            return Ok(agent);
        }
        agent.version += 1;
        self.save_agent(by, &agent, false).await?;
        Ok(agent)
    }

    /// Deletes an agent that no chat uses.
    pub async fn delete_agent(
        &self,
        by: &Actor,
        world: WorldId,
        id: AgentId,
    ) -> Result<(), RuntimeError> {
        let agent = self.find_agent(world, &id.to_string()).await?;
        let used = self
            .chats(world)
            .await?
            .into_iter()
            .filter(|c| c.agent == id)
            .count();
        if used > 0 {
            return Err(RuntimeError::Conflict {
                code: "agent_in_use",
                message: format!(
                    "agent {:?} has {used} chat(s); delete them first",
                    agent.name
                ),
            });
        }
        let write = Write::DeleteRecord {
            kind: RecordKind::Agent,
            id: *id.as_uuid(),
        };
        self.commit(
            vec![write],
            vec![self.event_by(by, world, None, EventPayload::AgentDeleted { agent: id })],
        )
        .await?;
        Ok(())
    }

    // ---- chats

    pub async fn create_chat(
        &self,
        by: &Actor,
        world: WorldId,
        new: NewChat,
    ) -> Result<Chat, RuntimeError> {
        let agent = self.find_agent(world, &new.agent).await?;
        let title = new
            .title
            .unwrap_or_else(|| format!("Chat with {}", agent.name));
        self.new_chat(by, &agent, title, Vec::new()).await
    }

    /// A new chat with `agent`, started by `by`; a sub-agent's has the `lineage` of its callers.
    pub(crate) async fn new_chat(
        &self,
        by: &Actor,
        agent: &Agent,
        title: String,
        lineage: Vec<LineageStep>,
    ) -> Result<Chat, RuntimeError> {
        check_title(&title)?;
        let chat = Chat {
            id: ChatId::random(),
            world: agent.world,
            agent: agent.id,
            title,
            created_at: self.now(),
            started_by: Some(by.clone()),
            lineage,
            version: 1,
        };
        self.save_chat(by, &chat, true).await?;
        Ok(chat)
    }

    /// A sub-agent's chat, called again: with the lineage of the call it answers now.
    pub(crate) async fn set_chat_lineage(
        &self,
        by: &Actor,
        mut chat: Chat,
        lineage: Vec<LineageStep>,
    ) -> Result<Chat, RuntimeError> {
        if chat.lineage != lineage {
            chat.lineage = lineage;
            chat.version += 1;
            self.save_chat(by, &chat, false).await?;
        }
        Ok(chat)
    }

    /// The agent's last text in `turn`: its answer, once the turn finished.
    pub async fn answer(&self, turn: &Turn) -> Result<Option<String>, RuntimeError> {
        if turn.status != TurnStatus::Finished {
            return Ok(None);
        }
        let mut after = None;
        let mut answer = None;
        loop {
            let page = self.messages(turn.world, turn.chat, after, LISTING).await?;
            let full = page.len() == LISTING;
            after = page.last().map(|(p, _)| *p);
            for (_, m) in page {
                if m.turn == Some(turn.id)
                    && m.role == MessageRole::Assistant
                    && m.content.is_some()
                {
                    answer = m.content;
                }
            }
            if !full {
                return Ok(answer);
            }
        }
    }

    /// Stores a chat at its version, with the event that says so.
    async fn save_chat(&self, by: &Actor, chat: &Chat, created: bool) -> Result<(), RuntimeError> {
        let write = put(
            RecordKind::Chat,
            *chat.id.as_uuid(),
            Some(*chat.world.as_uuid()),
            None,
            chat.version,
            chat,
        )?;
        let (world, id) = (chat.world, Some(chat.id.to_string()));
        let chat = chat.clone();
        let payload = if created {
            EventPayload::ChatCreated { chat }
        } else {
            EventPayload::ChatUpdated { chat }
        };
        self.commit(vec![write], vec![self.event_by(by, world, id, payload)])
            .await?;
        Ok(())
    }

    pub async fn chats(&self, world: WorldId) -> Result<Vec<Chat>, RuntimeError> {
        Ok(self
            .records()
            .all(RecordKind::Chat, Some(*world.as_uuid()))
            .await?)
    }

    pub async fn chat(&self, world: WorldId, id: ChatId) -> Result<Chat, RuntimeError> {
        let chat: Option<Chat> = self.records().get(RecordKind::Chat, *id.as_uuid()).await?;
        chat.filter(|c| c.world == world)
            .ok_or_else(|| RuntimeError::not_found("chat", id))
    }

    /// Renames a chat, or hands it to another of the world's agents (refused while a turn
    /// runs in it: the turn keeps the agent it started with).
    /// A change that leaves the chat as it was changes nothing: no new version, no event.
    pub async fn update_chat(
        &self,
        by: &Actor,
        world: WorldId,
        id: ChatId,
        changes: ChatChanges,
    ) -> Result<Chat, RuntimeError> {
        let mut chat = self.chat(world, id).await?;
        let before = chat.clone();
        if let Some(title) = changes.title {
            check_title(&title)?;
            chat.title = title;
        }
        if let Some(agent) = changes.agent {
            let agent = self.find_agent(world, &agent).await?;
            if agent.id != chat.agent {
                self.refuse_if_busy(id).await?;
                chat.agent = agent.id;
            }
        }
        if chat == before {
            return Ok(chat);
        }
        chat.version += 1;
        self.save_chat(by, &chat, false).await?;
        Ok(chat)
    }

    /// Deletes a chat and its messages. Refused while a turn runs in it.
    pub async fn delete_chat(
        &self,
        by: &Actor,
        world: WorldId,
        id: ChatId,
    ) -> Result<(), RuntimeError> {
        self.chat(world, id).await?;
        self.refuse_if_busy(id).await?;
        let mut writes = chat_removal(id);
        writes.push(Write::DeleteRecord {
            kind: RecordKind::Chat,
            id: *id.as_uuid(),
        });
        let event = self.event_by(
            by,
            world,
            Some(id.to_string()),
            EventPayload::ChatDeleted { chat: id },
        );
        self.commit(writes, vec![event]).await?;
        Ok(())
    }

    /// A chat's messages, oldest first, after position `after` (at most `limit`).
    pub async fn messages(
        &self,
        world: WorldId,
        chat: ChatId,
        after: Option<u64>,
        limit: usize,
    ) -> Result<Vec<(u64, Message)>, RuntimeError> {
        self.chat(world, chat).await?;
        let page = self
            .records()
            .page(
                RecordKind::Message,
                Some(*chat.as_uuid()),
                after,
                limit.clamp(1, LISTING),
            )
            .await?;
        Ok(page.into_iter().map(|p| (p.position, p.item)).collect())
    }

    /// The whole conversation, for the LLM.
    pub(crate) async fn history(&self, chat: ChatId) -> Result<Vec<Message>, RuntimeError> {
        Ok(self
            .records()
            .all(RecordKind::Message, Some(*chat.as_uuid()))
            .await?)
    }

    pub async fn turn(&self, id: TurnId) -> Result<Turn, RuntimeError> {
        self.records()
            .get(RecordKind::Turn, *id.as_uuid())
            .await?
            .ok_or_else(|| RuntimeError::not_found("turn", id))
    }

    /// The turn under way in a chat, if any.
    pub async fn active_turn(&self, chat: ChatId) -> Result<Option<TurnId>, RuntimeError> {
        let active = self
            .records()
            .by_key::<crate::turn::ActiveTurn>(RecordKind::ActiveTurn, None, &chat.to_string())
            .await?;
        Ok(active.map(|k| k.value.turn))
    }

    async fn refuse_if_busy(&self, chat: ChatId) -> Result<(), RuntimeError> {
        if let Some(turn) = self.active_turn(chat).await? {
            return Err(RuntimeError::Conflict {
                code: "turn_in_progress",
                message: format!("turn {turn} is under way in chat {chat}; cancel it first"),
            });
        }
        Ok(())
    }
}

/// The writes that remove a chat's messages, turns, session grants and remote contexts.
fn chat_removal(chat: ChatId) -> Vec<Write> {
    let parent: Uuid = *chat.as_uuid();
    vec![
        Write::DeleteRecords {
            kind: RecordKind::Message,
            parent,
        },
        Write::DeleteRecords {
            kind: RecordKind::Turn,
            parent,
        },
        Write::DeleteRecords {
            kind: RecordKind::SkillSession,
            parent,
        },
        Write::DeleteRecords {
            kind: RecordKind::A2aContext,
            parent,
        },
    ]
}
