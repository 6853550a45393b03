//! The built-in tools: what the LLM is told of them, how their calls are gated, and running
//! them.

mod external;
pub(crate) mod fs;
pub(crate) mod remote;
mod shell;

use std::path::Path;
use std::sync::Arc;

use globset::Glob;
use holdpoint_llm::ToolSpec;
use holdpoint_protocol::{
    Agent, McpToolInfo, NewAgent, QuestionOption, QuestionRequest, World, WorldId,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::error::RuntimeError;

pub use external::ExternalTools;
pub use fs::FileNow;
pub use remote::{check as check_remote_agents, hide_secrets as hide_remote_secrets};
pub use shell::ShellLimits;

/// Every built-in tool's name.
pub const BUILT_IN_TOOLS: &[&str] = &[
    "shell_cmd",
    "read_file",
    "write_file",
    "list_files",
    "ask_human",
    "human_intervention_request",
    "create_agent",
    "load_skill",
];

/// How a call of a tool is decided.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Gate {
    /// Policy decides: allow, ask or deny.
    Policy,
    /// A person must approve, whatever policy would allow (deny rules still deny).
    AlwaysAsk,
    /// The call is a question for a person.
    Question,
    /// A person allows loading the skill once, for the session, or not at all.
    Skill,
}

pub(crate) struct ToolDef {
    pub(crate) name: &'static str,
    pub(crate) description: &'static str,
    pub(crate) gate: Gate,
    pub(crate) schema: fn() -> Value,
    /// The argument that names a path in the world's directory, if the tool takes one.
    pub(crate) path: Option<&'static str>,
    /// Why a person is asked whatever policy allows (`Gate::AlwaysAsk`), as the hold says.
    pub(crate) always_asks: Option<&'static str>,
}

fn object(properties: Value, required: &[&str]) -> Value {
    json!({ "type": "object", "properties": properties, "required": required, "additionalProperties": false })
}

fn question_schema() -> Value {
    object(
        json!({
            "question": {"type": "string", "description": "What to ask, in one or two sentences."},
            "options": {
                "type": "array", "minItems": 1,
                "description": "The choices. The person can only pick among these: there is no free-text answer.",
                "items": {"type": "object", "additionalProperties": false, "required": ["id", "label"], "properties": {
                    "id": {"type": "string", "description": "Short identifier, e.g. \"yes\"."},
                    "label": {"type": "string"},
                    "description": {"type": "string"}
                }}
            },
            "multiple": {"type": "boolean", "description": "Several options may be chosen."},
            "confirm": {"type": "boolean", "description": "The person must confirm the choice before it counts."},
            "default_option": {"type": "string", "description": "The option applied if nobody answers in time."},
            "context": {"type": "object", "description": "Data that helps the person decide, shown with the question."},
            "timeout": {"type": "string", "description": "How long to wait, e.g. \"10m\"."}
        }),
        &["question", "options"],
    )
}

const TOOLS: &[ToolDef] = &[
    ToolDef {
        name: "shell_cmd",
        description: "Run a shell command line in the world's working directory. Returns exit code, stdout and stderr.",
        gate: Gate::Policy,
        path: Some("cwd"),
        always_asks: None,
        schema: || {
            object(
                json!({
                    "command": {"type": "string", "minLength": 1},
                    "timeout_secs": {"type": "integer", "minimum": 1},
                    "cwd": {"type": "string", "description": "A subdirectory of the world's directory."}
                }),
                &["command"],
            )
        },
    },
    ToolDef {
        name: "read_file",
        description: "Read a text file of the world's working directory.",
        gate: Gate::Policy,
        path: Some("path"),
        always_asks: None,
        schema: || {
            object(
                json!({"path": {"type": "string", "minLength": 1}}),
                &["path"],
            )
        },
    },
    ToolDef {
        name: "write_file",
        description: "Write (or append to) a file in the world's working directory, creating directories as needed.",
        gate: Gate::Policy,
        path: Some("path"),
        always_asks: None,
        schema: || {
            object(
                json!({"path": {"type": "string", "minLength": 1}, "content": {"type": "string"}, "append": {"type": "boolean"}}),
                &["path", "content"],
            )
        },
    },
    ToolDef {
        name: "list_files",
        description: "List the files of a directory of the world's working directory.",
        gate: Gate::Policy,
        path: Some("path"),
        always_asks: None,
        schema: || {
            object(
                json!({"path": {"type": "string"}, "recursive": {"type": "boolean"}}),
                &[],
            )
        },
    },
    ToolDef {
        name: "ask_human",
        description: "Ask a person a multiple-choice question and wait for the answer. Use it when you need a decision you should not make alone.",
        gate: Gate::Question,
        path: None,
        always_asks: None,
        schema: question_schema,
    },
    ToolDef {
        name: "human_intervention_request",
        description: "The same as ask_human.",
        gate: Gate::Question,
        path: None,
        always_asks: None,
        schema: question_schema,
    },
    ToolDef {
        name: "create_agent",
        description: "Create another agent in this world (a person must approve). It uses your LLM unless a model is given.",
        gate: Gate::AlwaysAsk,
        path: None,
        always_asks: Some("creating an agent always needs a person"),
        schema: || {
            object(
                json!({
                    "name": {"type": "string"},
                    "system_prompt": {"type": "string"},
                    "model": {"type": "string"},
                    "tools": {"type": "array", "items": {"type": "string"}}
                }),
                &["name", "system_prompt"],
            )
        },
    },
    ToolDef {
        name: "load_skill",
        description: "Load the instructions of one of the world's skills (a person must allow it).",
        gate: Gate::Skill,
        path: None,
        always_asks: None,
        schema: || {
            object(
                json!({"name": {"type": "string", "description": "The skill's name, without .md"}}),
                &["name"],
            )
        },
    },
];

/// Refuses, before anyone is asked, a call that could never run: a path that is absolute or
/// leaves the world's directory. Running checks again, for links changed meanwhile.
pub(crate) fn check_path(def: &ToolDef, dir: &Path, args: &Value) -> Result<(), String> {
    match def
        .path
        .and_then(|field| Some((field, args.get(field)?.as_str()?)))
    {
        Some((field, rel)) => fs::confine(dir, rel)
            .map(drop)
            .map_err(|e| format!("`{field}`: {e}")),
        None => Ok(()),
    }
}

/// The tool an agent may call under `name`.
pub(crate) fn find(agent: &Agent, name: &str) -> Option<&'static ToolDef> {
    TOOLS
        .iter()
        .find(|t| t.name == name)
        .filter(|t| allowed(agent, t.name))
}

pub(crate) fn allowed(agent: &Agent, tool: &str) -> bool {
    match &agent.tools {
        None => true,
        Some(patterns) => patterns
            .iter()
            .any(|p| p == tool || Glob::new(p).is_ok_and(|g| g.compile_matcher().is_match(tool))),
    }
}

/// The world's external tools (its MCP servers' and the configuration file's) that an agent
/// may call: all of them when its `tools` is unset, else those its names or globs match
/// (`fs__read_text_file`, `fs__*`).
pub(crate) async fn external(
    host: &dyn Host,
    agent: &Agent,
) -> Result<Vec<McpToolInfo>, RuntimeError> {
    let Some(source) = host.external_tools() else {
        return Ok(Vec::new());
    };
    let world = host.world(agent.world).await?;
    let mut tools = source.tools(&world).await;
    tools.retain(|t| allowed(agent, &t.name));
    Ok(tools)
}

/// What the agent's LLM is told of its tools: the built-in ones, then `external`.
pub(crate) fn specs(agent: &Agent, external: &[McpToolInfo]) -> Vec<ToolSpec> {
    TOOLS
        .iter()
        .filter(|t| allowed(agent, t.name))
        .map(|t| ToolSpec {
            name: t.name.into(),
            description: t.description.into(),
            parameters: (t.schema)(),
        })
        .chain(external.iter().map(external::spec))
        .collect()
}

/// A question tool's arguments as a question (`timeout` is the question's deadline).
pub(crate) fn question(call_id: &str, args: &Value) -> Result<QuestionRequest, String> {
    let mut args = args.clone();
    if let Some(obj) = args.as_object_mut()
        && let Some(t) = obj.remove("timeout")
    {
        obj.insert("deadline".into(), t);
    }
    let mut q = holdpoint_core::hold::parse_question(&args).map_err(|e| e.to_string())?;
    q.tool_call_id = Some(call_id.to_owned());
    Ok(q)
}

/// Skill names: letters, digits, `_` and `-`.
fn skill_path(dir: &Path, name: &str) -> Result<std::path::PathBuf, String> {
    if name.is_empty()
        || name.len() > 64
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        return Err(format!(
            "{name:?} is not a skill name (letters, digits, '_' and '-')"
        ));
    }
    let path = dir.join("skills").join(format!("{name}.md"));
    if !path.is_file() {
        let mut known: Vec<String> = std::fs::read_dir(dir.join("skills"))
            .map(|d| {
                d.filter_map(Result::ok)
                    .filter_map(|e| {
                        e.file_name()
                            .to_str()?
                            .strip_suffix(".md")
                            .map(str::to_owned)
                    })
                    .collect()
            })
            .unwrap_or_default();
        known.sort();
        let known = if known.is_empty() {
            "none".to_owned()
        } else {
            known.join(", ")
        };
        return Err(format!(
            "this world has no skill {name:?} (skills: {known})"
        ));
    }
    Ok(path)
}

/// The question that asks a person whether to load a skill.
pub(crate) fn skill_question(
    call_id: &str,
    dir: &Path,
    args: &Value,
) -> Result<(String, QuestionRequest), String> {
    let name = args["name"]
        .as_str()
        .ok_or("`name` is required")?
        .to_owned();
    skill_path(dir, &name)?;
    let option = |id: &str, label: &str| QuestionOption {
        id: id.into(),
        label: label.into(),
        description: None,
    };
    let q = QuestionRequest {
        tool_call_id: Some(call_id.to_owned()),
        question: format!("The agent wants to load the skill {name:?}. Allow it?"),
        options: vec![
            option("yes_once", "Yes, this time"),
            option("yes_in_session", "Yes, for this chat"),
            option("no", "No"),
        ],
        multiple: false,
        confirm: false,
        default_option: Some("no".into()),
        context: None,
        deadline: None,
    };
    Ok((name, q))
}

/// What the tools ask of the runtime they run in, which implements it: so the tools know
/// nothing of the runtime itself, and the runtime depends on them, not they on it.
#[async_trait::async_trait]
pub(crate) trait Host: Send + Sync {
    /// The most bytes a file tool reads or writes.
    fn max_file(&self) -> usize;
    fn shell(&self) -> &ShellLimits;
    /// The world's MCP tools, when the server plugged them in.
    fn external_tools(&self) -> Option<&Arc<dyn ExternalTools>>;
    /// The client of remote A2A agents, and their cards.
    fn remotes(&self) -> &remote::Remotes;
    async fn world(&self, id: WorldId) -> Result<World, RuntimeError>;
    /// An agent of `world`, by name or id.
    async fn find_agent(&self, world: WorldId, id_or_name: &str) -> Result<Agent, RuntimeError>;
    /// Creates an agent in `parent`'s world, as `parent`.
    async fn create_agent(&self, parent: &Agent, new: NewAgent) -> Result<Agent, RuntimeError>;
}

/// Everything a tool may need while it runs.
pub(crate) struct ToolContext<'a> {
    pub(crate) host: &'a dyn Host,
    pub(crate) agent: &'a Agent,
    pub(crate) dir: &'a Path,
    pub(crate) cancel: &'a CancellationToken,
}

/// Runs an allowed call: its output, or what went wrong.
pub(crate) async fn run(ctx: &ToolContext<'_>, name: &str, args: &Value) -> Result<Value, String> {
    let max_file = ctx.host.max_file();
    match name {
        "shell_cmd" => shell::run(ctx.dir, args, ctx.host.shell(), ctx.cancel).await,
        "read_file" => fs::read_file(ctx.dir, args, max_file),
        "write_file" => fs::write_file(ctx.dir, args, max_file),
        "list_files" => fs::list_files(ctx.dir, args),
        "load_skill" => {
            let name = args["name"].as_str().ok_or("`name` is required")?;
            let text =
                std::fs::read_to_string(skill_path(ctx.dir, name)?).map_err(|e| e.to_string())?;
            Ok(json!({ "skill": name, "instructions": text }))
        }
        "create_agent" => {
            let mut llm = ctx.agent.llm.clone();
            if let Some(model) = args["model"].as_str() {
                llm.model = model.to_owned();
            }
            let tools = args
                .get("tools")
                .map(|t| serde_json::from_value(t.clone()))
                .transpose()
                .map_err(|e| format!("tools: {e}"))?;
            let new = NewAgent {
                name: args["name"].as_str().unwrap_or_default().to_owned(),
                llm,
                system_prompt: args["system_prompt"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                tools,
                max_steps: None,
            };
            let agent = ctx
                .host
                .create_agent(ctx.agent, new)
                .await
                .map_err(|e| e.to_string())?;
            Ok(json!({ "agent": { "id": agent.id, "name": agent.name } }))
        }
        other => run_external(ctx, other, args).await,
    }
}

/// Calls a tool of one of the world's MCP servers with exactly `args`; its output is the
/// server's result (content and `isError`).
async fn run_external(ctx: &ToolContext<'_>, name: &str, args: &Value) -> Result<Value, String> {
    let Some(source) = ctx.host.external_tools() else {
        return Err(format!("{name} cannot be run directly"));
    };
    let world = ctx
        .host
        .world(ctx.agent.world)
        .await
        .map_err(|e| e.to_string())?;
    let output = tokio::select! {
        () = ctx.cancel.cancelled() => return Err("the turn was canceled while the tool ran".into()),
        output = source.call(&world, name, args) => output?,
    };
    Ok(external::output_json(&output))
}
