//! Running a call of a remote A2A agent (`a2a__NAME`), which policy allowed or a person
//! approved: the message is sent, in the chat's conversation with that agent, and the answer
//! read until the remote task ends or waits for input.
//!
//! What the remote agent asks a person to confirm (Google ADK's `adk_request_confirmation`)
//! becomes a hold in this chat, raised while the call runs. This is the one place a hold is
//! raised from inside a running tool, so the seam is here rather than in the engine: the hold
//! is raised through the same gate as a step's (deny rules deny it; it always asks, since the
//! remote agent wants a person), the turn is saved `waiting` with it as its batch (a cancel
//! withdraws it, as any batch), and the outcome goes back to the remote agent in ADK's shape
//! in the same task and context: a person's approval confirms, anything else (a denial, the
//! deadline's fail-closed outcome, a withdrawal) refuses.
//!
//! The chat's context with each remote agent is kept (`RecordKind::A2aContext`), saved with
//! the turn, so a later call goes on with the same remote conversation, and a task left
//! waiting for words (input-required without a confirmation) gets the next message.

use std::time::Duration;

use holdpoint_a2a::client::{Card, Confirmation, Outgoing, Remote, State};
use holdpoint_core::Scope;
use holdpoint_core::record::{decode, put};
use holdpoint_core::store::RecordKind;
use holdpoint_protocol::{
    ApprovalRequest, DecisionKind, GateRequest, GateResult, HoldRequest, OutcomeStatus, TurnStatus,
    Verdict,
};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use uuid::Uuid;

use super::driver::{Driver, Stop};
use crate::tools::remote::{self, PREFIX};

/// Most confirmations one call answers before it is given up.
const MAX_ROUNDS: usize = 32;

/// Where a chat's conversation with a remote agent stands.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct Context {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    context_id: Option<String>,
    /// A task waiting for the caller's words: the next message answers it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    task_id: Option<String>,
}

/// The stored context: its record's id and version, and what it says.
struct Stored {
    id: Uuid,
    version: u64,
    context: Context,
}

const CANCELED: &str =
    "the turn was canceled while the remote agent worked; its task was canceled too";

impl Driver<'_> {
    /// Runs call `i` of `tool`: the remote agent's answer, or why there is none. `Err` only
    /// for what stops the turn (a save that failed).
    pub(super) async fn run_remote(
        &mut self,
        i: usize,
        tool: &str,
        args: &Value,
    ) -> Result<Result<Value, String>, Stop> {
        let world = self.rt.world(self.agent.world).await?;
        let Some((name, settings)) = remote::find(&world, &self.agent, tool) else {
            return Ok(Err(format!(
                "{tool} is no longer one of the world's remote agents"
            )));
        };
        let (name, settings) = (name.to_owned(), settings.clone());
        let Some(message) = args.get("message").and_then(Value::as_str) else {
            return Ok(Err("`message` (a string) is required".into()));
        };
        let card = match self.rt.inner.remote.card(&settings).await {
            Ok(card) => card,
            Err(e) => return Ok(Err(e)),
        };
        let reach = remote::reach(&settings);
        let mut stored = self.stored_context(&name).await?;
        let mut out = Outgoing {
            context_id: stored.context.context_id.clone(),
            task_id: stored.context.task_id.clone(),
            text: Some(message.to_owned()),
            confirmations: Vec::new(),
        };
        for _ in 0..MAX_ROUNDS {
            let seen = Mutex::new(out.task_id.clone());
            let on_task = |t: &str| *seen.lock() = Some(t.to_owned());
            let client = &self.rt.inner.remote.client;
            let reply = tokio::select! {
                () = self.cancel.cancelled() => {
                    let task = seen.lock().clone();
                    cancel_remote(self, &card, &reach, task).await;
                    return Ok(Err(CANCELED.into()));
                }
                reply = client.send(&card, &reach, &out, &on_task) => reply,
            };
            let reply = match reply {
                Ok(reply) => reply,
                Err(e) => {
                    // Nothing may be left running over there (a timeout, say).
                    let task = seen.lock().clone();
                    cancel_remote(self, &card, &reach, task).await;
                    return Ok(Err(format!("the remote agent {name:?} failed: {e}")));
                }
            };
            let waiting = reply.state == State::InputRequired;
            let context = Context {
                context_id: reply
                    .context_id
                    .clone()
                    .or(stored.context.context_id.clone()),
                task_id: reply.task_id.clone().filter(|_| waiting),
            };
            self.keep_context(&name, &mut stored, context).await?;
            match reply.state {
                State::InputRequired if !reply.confirmations.is_empty() => {
                    let mut answers = Vec::new();
                    for c in &reply.confirmations {
                        match self.confirm(i, &name, c).await? {
                            Some(confirmed) => answers.push((c.id.clone(), confirmed)),
                            None => {
                                cancel_remote(self, &card, &reach, reply.task_id.clone()).await;
                                return Ok(Err(CANCELED.into()));
                            }
                        }
                    }
                    out = Outgoing {
                        context_id: stored.context.context_id.clone(),
                        task_id: reply.task_id.clone(),
                        text: None,
                        confirmations: answers,
                    };
                }
                State::InputRequired => {
                    return Ok(Ok(json!({
                        "state": "input-required",
                        "text": reply.text,
                        "note": "The remote agent waits for an answer in words: ask the person if you cannot answer yourself, then call this tool again with the answer; it goes on with the same task.",
                    })));
                }
                State::Completed => {
                    return Ok(Ok(json!({"state": "completed", "text": reply.text})));
                }
                State::AuthRequired => {
                    return Ok(Err(format!(
                        "the remote agent {name:?} asks for authentication, which Holdpoint cannot give it (set its headers): {}",
                        reply.text
                    )));
                }
                other => {
                    let state = format!("{other:?}").to_lowercase();
                    return Ok(Err(format!(
                        "the remote agent's task ended {state}: {}",
                        reply.text
                    )));
                }
            }
        }
        Ok(Err(format!(
            "the remote agent {name:?} asked for more than {MAX_ROUNDS} confirmations in one call"
        )))
    }

    async fn stored_context(&self, name: &str) -> Result<Stored, Stop> {
        let chat = *self.turn.chat.as_uuid();
        let record = self
            .rt
            .store()
            .record_by_key(RecordKind::A2aContext, Some(chat), name)
            .await
            .map_err(|e| Stop::Failed(e.to_string()))?;
        Ok(match record {
            Some(r) => Stored {
                id: r.id,
                version: r.version,
                context: decode(r).unwrap_or_default(),
            },
            None => Stored {
                id: Uuid::now_v7(),
                version: 0,
                context: Context::default(),
            },
        })
    }

    /// Saves the chat's context with the remote agent, with the turn, when it changed.
    async fn keep_context(
        &mut self,
        name: &str,
        stored: &mut Stored,
        context: Context,
    ) -> Result<(), Stop> {
        if context == stored.context {
            return Ok(());
        }
        let write = put(
            RecordKind::A2aContext,
            stored.id,
            Some(*self.turn.chat.as_uuid()),
            Some(name.to_owned()),
            stored.version + 1,
            &context,
        )
        .map_err(|e| Stop::Failed(e.to_string()))?;
        self.save(vec![write], vec![]).await?;
        stored.version += 1;
        stored.context = context;
        Ok(())
    }

    /// Asks a person, in this chat, whether the remote agent may run what it asks to confirm:
    /// whether it is confirmed, or `None` when the turn was canceled meanwhile.
    async fn confirm(
        &mut self,
        i: usize,
        name: &str,
        c: &Confirmation,
    ) -> Result<Option<bool>, Stop> {
        let call = self.turn.calls[i].call.id.clone();
        let tool = format!("{PREFIX}{name}/{}", tool_name(&c.tool));
        let arguments = match &c.arguments {
            v @ Value::Object(_) => v.clone(),
            other => json!({ "value": other }),
        };
        let hint = c
            .hint
            .as_deref()
            .map(|h| format!(" It says: {h}"))
            .unwrap_or_default();
        let request = GateRequest {
            world: self.turn.world.to_string(),
            chat: Some(self.turn.chat.to_string()),
            agent: Some(self.agent.id.to_string()),
            items: vec![HoldRequest::Approval(ApprovalRequest {
                tool_call_id: Some(call.clone()),
                tool,
                arguments,
                schema: None,
                annotations: None,
                description: Some(format!(
                    "The remote A2A agent {name:?} asks to confirm its tool {:?} before it runs it.{hint}",
                    c.tool
                )),
                deadline: None,
                always_ask: true,
                // The answer ADK takes is yes or no: no edits, and nothing remembered.
                offers: Some(vec![DecisionKind::ApproveOnce, DecisionKind::Deny]),
                mcp: None,
            })],
            // A retried raise of the same confirmation gets the same hold.
            idempotency_key: Some(format!("turn:{}:call:{call}:a2a:{}", self.turn.id, c.id)),
        };
        let because = [Some(format!(
            "the remote agent {name:?} asks a person to confirm this call"
        ))];
        let response = self
            .rt
            .engine()
            .gate_because(&self.principal(), request, &because)
            .await
            .map_err(|e| Stop::Failed(e.to_string()))?;
        let hold = match response.results.first() {
            Some(GateResult::Held { hold }) => hold.id,
            Some(GateResult::Allowed { .. }) => return Ok(Some(true)),
            Some(GateResult::Denied { .. }) => return Ok(Some(false)),
            Some(GateResult::Invalid { field, message }) => {
                tracing::warn!(turn = %self.turn.id, %field, %message, "a remote agent's confirmation could not be raised; refused");
                return Ok(Some(false));
            }
            None => return Err(Stop::Failed("the gate answered nothing".into())),
        };
        // Waiting, with the hold as the turn's batch: shown as a waiting turn, and a cancel
        // withdraws it as any batch.
        self.turn.status = TurnStatus::Waiting;
        self.turn.batch = response.batch;
        self.save(vec![], vec![]).await?;
        let scope = Scope::any();
        let outcome = loop {
            let wait = self
                .rt
                .engine()
                .wait(hold, Duration::from_secs(3600), &scope);
            tokio::select! {
                // The batch stays the turn's: ending the turn withdraws it.
                () = self.cancel.cancelled() => return Ok(None),
                r = wait => match r {
                    Ok(Some(outcome)) => break outcome,
                    Ok(None) => continue,
                    Err(e) => return Err(Stop::Failed(format!("waiting for hold {hold} failed: {e}"))),
                },
            }
        };
        self.turn.status = TurnStatus::Running;
        self.turn.batch = None;
        self.save(vec![], vec![]).await?;
        Ok(Some(
            outcome.status != OutcomeStatus::Canceled && outcome.verdict == Some(Verdict::Approve),
        ))
    }
}

/// A remote tool's name as a part of a hold's tool name (letters, digits, `_ - . :`).
fn tool_name(tool: &str) -> String {
    let name: String = tool
        .chars()
        .take(64)
        .map(|c| {
            if c.is_ascii_alphanumeric() || "_-.:".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    if name.is_empty() { "tool".into() } else { name }
}

/// Asks the remote agent to cancel `task`, if there is one; a failure is only logged.
async fn cancel_remote(d: &Driver<'_>, card: &Card, reach: &Remote, task: Option<String>) {
    let Some(task) = task else { return };
    if let Err(e) = d.rt.inner.remote.client.cancel(card, reach, &task).await {
        tracing::info!(turn = %d.turn.id, %task, error = %e, "the remote agent's task could not be canceled");
    }
}
