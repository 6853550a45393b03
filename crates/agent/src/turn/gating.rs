//! The gate step: each proposed call is checked (a known tool, JSON arguments), then the
//! engine's gate decides the rest in one batch: allowed, denied, held or invalid.

use holdpoint_core::AgentAsking;
use holdpoint_core::policy::Call;
use holdpoint_core::store::RecordKind;
use holdpoint_protocol::{
    ApprovalRequest, ApprovedBy, CallState, ChatId, DecidedBy, GateRequest, GateResult,
    HoldRequest, ToolResult,
};
use serde_json::Value;

use super::driver::{Driver, Stop};
use super::{finished, outcome};
use crate::tools::{self, Gate};

/// What checking one call before the engine comes to.
enum Gated {
    /// The engine's gate decides it; with why it always asks, when it does.
    Ask(HoldRequest, Option<String>),
    /// It may run without asking anyone (a skill allowed for the rest of the chat).
    Ready(ApprovedBy),
    /// Its result, without asking anyone (the call cannot run as proposed).
    Done(ToolResult),
}

impl Driver<'_> {
    pub(super) async fn gate(&mut self) -> Result<(), Stop> {
        let mut items = Vec::new();
        let mut because = Vec::new();
        let mut slots = Vec::new();
        let mut events = Vec::new();
        let chat = self.turn.chat;
        let turn = self.turn.id;
        for i in 0..self.turn.calls.len() {
            if self.turn.calls[i].state != CallState::Proposed {
                continue;
            }
            match self.gate_item(i, chat).await? {
                Gated::Ask(item, why) => {
                    items.push(item);
                    because.push(why);
                    slots.push(i);
                }
                Gated::Ready(by) => {
                    let rec = &mut self.turn.calls[i];
                    rec.state = CallState::Ready;
                    rec.approved_by = Some(by);
                }
                Gated::Done(result) => {
                    events.push(finished(turn, &mut self.turn.calls[i], result));
                }
            }
        }
        if !items.is_empty() {
            let request = GateRequest {
                world: self.turn.world.to_string(),
                chat: Some(self.conversation().to_string()),
                agent: Some(self.agent.id.to_string()),
                items,
                idempotency_key: Some(format!("turn:{}:step:{}", self.turn.id, self.turn.step)),
            };
            let lineage = self.hold_lineage();
            let asking = AgentAsking {
                because: &because,
                lineage: &lineage,
            };
            let response = self
                .rt
                .engine()
                .gate_as_agent(&self.principal(), request, asking)
                .await
                .map_err(|e| Stop::Failed(e.to_string()))?;
            self.turn.batch = response.batch;
            for (i, result) in slots.into_iter().zip(response.results) {
                let rec = &mut self.turn.calls[i];
                match result {
                    GateResult::Allowed { decided_by, .. } => {
                        rec.state = CallState::Ready;
                        rec.approved_by = Some(if matches!(decided_by, DecidedBy::Grant { .. }) {
                            ApprovedBy::Grant
                        } else {
                            ApprovedBy::Policy
                        });
                    }
                    GateResult::Denied { decided_by, .. } => events.push(finished(
                        turn,
                        rec,
                        ToolResult::DeniedByPolicy {
                            rule: outcome::describe(&decided_by),
                        },
                    )),
                    GateResult::Held { hold } => {
                        rec.state = CallState::Held;
                        rec.hold = Some(hold.id);
                    }
                    GateResult::Invalid { field, message } => {
                        let error = match within_call(&field) {
                            "" => message,
                            field => format!("{field}: {message}"),
                        };
                        events.push(finished(turn, rec, ToolResult::InvalidArguments { error }));
                    }
                }
            }
        }
        let events = events.into_iter().map(|p| self.event(p)).collect();
        self.save(vec![], events).await
    }

    /// Call `i` of a remote A2A agent's tool (`a2a__NAME`): policy decides it as any tool,
    /// before the message is sent. `None` for a name that is no remote agent's.
    async fn gate_remote(&mut self, i: usize) -> Result<Option<Gated>, Stop> {
        let world = self.rt.world(self.agent.world).await?;
        let rec = &mut self.turn.calls[i];
        let Some((name, remote)) =
            tools::remote::find(&self.rt.inner.remote, &world, &self.agent, &rec.call.name)
        else {
            return Ok(None);
        };
        let description = match &remote.agent {
            Some(sub) => format!("A message to {sub:?}, an agent of this world (as {name:?})"),
            None => format!("A message to the remote A2A agent {name:?}"),
        };
        let args: Value = match serde_json::from_str(&rec.call.arguments) {
            Ok(v @ Value::Object(_)) => v,
            _ => {
                return Ok(Some(Gated::Done(ToolResult::InvalidArguments {
                    error: "the arguments must be a JSON object: {\"message\": \"…\"}".into(),
                })));
            }
        };
        rec.arguments = Some(args.clone());
        Ok(Some(Gated::Ask(
            HoldRequest::Approval(ApprovalRequest {
                tool_call_id: Some(rec.call.id.clone()),
                tool: rec.call.name.clone(),
                arguments: args,
                schema: Some(tools::remote::schema()),
                annotations: None,
                description: Some(description),
                deadline: None,
                always_ask: false,
                offers: None,
                mcp: None,
            }),
            None,
        )))
    }

    /// What call `i` comes to before the engine is asked.
    async fn gate_item(&mut self, i: usize, chat: ChatId) -> Result<Gated, Stop> {
        let def = tools::find(&self.agent, &self.turn.calls[i].call.name);
        if def.is_none()
            && let Some(gated) = self.gate_remote(i).await?
        {
            return Ok(gated);
        }
        let external = match def {
            Some(_) => None,
            None => {
                let name = &self.turn.calls[i].call.name;
                let offered = tools::external(self.rt, &self.agent).await?;
                match offered.iter().find(|t| &t.name == name) {
                    Some(tool) => Some(tool.clone()),
                    None => {
                        let world = self.rt.world(self.agent.world).await?;
                        let names: Vec<String> = tools::specs(&self.agent, &offered)
                            .into_iter()
                            .map(|t| t.name)
                            .chain(
                                tools::remote::tool_names(&self.rt.inner.remote, &world)
                                    .into_iter()
                                    .filter(|t| tools::allowed(&self.agent, t)),
                            )
                            .collect();
                        return Ok(Gated::Done(ToolResult::InvalidArguments {
                            error: format!(
                                "there is no tool named {name:?}; the tools are {}",
                                names.join(", ")
                            ),
                        }));
                    }
                }
            }
        };
        let rec = &mut self.turn.calls[i];
        let id = rec.call.id.clone();
        let args: Value = match serde_json::from_str(&rec.call.arguments) {
            Ok(v @ Value::Object(_)) => v,
            Ok(_) => {
                return Ok(Gated::Done(ToolResult::InvalidArguments {
                    error: "the arguments must be a JSON object".into(),
                }));
            }
            Err(e) => {
                return Ok(Gated::Done(ToolResult::InvalidArguments {
                    error: format!("the arguments are not valid JSON: {e}"),
                }));
            }
        };
        rec.arguments = Some(args.clone());
        let Some(def) = def else {
            // A tool of one of the world's MCP servers: policy decides, with its annotations;
            // the engine checks the arguments against its input schema.
            let tool = external.ok_or_else(|| Stop::Failed("a call has no tool".into()))?;
            return Ok(Gated::Ask(
                HoldRequest::Approval(ApprovalRequest {
                    tool_call_id: Some(id),
                    tool: tool.name,
                    arguments: args,
                    schema: Some(tool.input_schema),
                    annotations: tool.annotations,
                    description: None,
                    deadline: None,
                    always_ask: tool.requires_approval,
                    offers: None,
                    mcp: Some(tool.mcp),
                }),
                None,
            ));
        };
        if let Err(error) = tools::check_path(def, &self.dir, &args) {
            return Ok(Gated::Done(ToolResult::InvalidArguments { error }));
        }
        // Policy first, for every tool: what it denies is refused before anyone is asked and
        // whatever "yes for this chat" was said before. Approvals are screened so by the
        // engine's gate itself (a deny before any grant); questions and skills here.
        if matches!(def.gate, Gate::Question | Gate::Skill) {
            let call = Call::new(def.name, &args);
            if let Some(by) = self.rt.engine().screen(&self.turn.world.to_string(), &call) {
                return Ok(Gated::Done(ToolResult::DeniedByPolicy {
                    rule: outcome::describe(&by),
                }));
            }
        }
        Ok(match def.gate {
            Gate::Policy | Gate::AlwaysAsk => Gated::Ask(
                HoldRequest::Approval(ApprovalRequest {
                    tool_call_id: Some(id),
                    tool: def.name.into(),
                    arguments: args,
                    schema: Some((def.schema)()),
                    annotations: None,
                    description: None,
                    deadline: None,
                    always_ask: def.gate == Gate::AlwaysAsk,
                    offers: None,
                    mcp: None,
                }),
                def.always_asks.map(str::to_owned),
            ),
            Gate::Question => match tools::question(&id, &args) {
                Ok(q) => Gated::Ask(HoldRequest::Question(q), None),
                Err(error) => Gated::Done(ToolResult::InvalidArguments { error }),
            },
            Gate::Skill => {
                let name = args["name"].as_str().unwrap_or_default().to_owned();
                let session = self
                    .rt
                    .store()
                    .record_by_key(RecordKind::SkillSession, Some(*chat.as_uuid()), &name)
                    .await
                    .map_err(|e| Stop::Failed(e.to_string()))?;
                if session.is_some() {
                    return Ok(Gated::Ready(ApprovedBy::Session));
                }
                match tools::skill_question(&id, &self.dir, &args) {
                    Ok((_, q)) => Gated::Ask(HoldRequest::Question(q), None),
                    Err(error) => Gated::Done(ToolResult::Failed { error }),
                }
            }
        })
    }
}

/// A field named by the engine's gate, as the LLM knows it: relative to its own call. The
/// engine names fields by their place in the batch it was sent (`items[1].options`), a
/// position of Holdpoint's that matches none of the LLM's calls; the error is reported on the
/// call it is about, so the field names a part of that call's arguments, or nothing.
fn within_call(field: &str) -> &str {
    let Some(rest) = field.strip_prefix("items[") else {
        return field;
    };
    match rest.split_once(']') {
        Some((n, rest)) if n.bytes().all(|b| b.is_ascii_digit()) => {
            rest.strip_prefix('.').unwrap_or(rest)
        }
        _ => field,
    }
}

#[cfg(test)]
mod tests {
    use super::within_call;

    #[test]
    fn fields_are_named_within_the_call() {
        assert_eq!(within_call("items[1].options[0].id"), "options[0].id");
        assert_eq!(within_call("items[12]"), "");
        assert_eq!(within_call("deadline"), "deadline");
        assert_eq!(within_call("items[x].a"), "items[x].a");
    }
}
