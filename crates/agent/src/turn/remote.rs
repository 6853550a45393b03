//! Running a call of a remote A2A agent (`a2a__NAME`), which policy allowed or a person
//! approved: the message is sent, in the chat's conversation with that agent, and the answer
//! read until the remote task ends or waits for input. What the remote agent says as it works
//! is recorded as it comes (`turn.tool_text`, attributed to the call), so people follow it in
//! the chat; the LLM gets the call's result only.
//!
//! What the remote agent asks its caller to confirm, in Google ADK's shape, kagent's or
//! Holdpoint's own, becomes holds in this chat, raised while the call runs. This is the one
//! place holds are raised from inside a running tool, so the seam is here rather than in the
//! engine: they are raised through the same gate as a step's (deny rules deny them; they always
//! ask, since the remote agent wants a person), as one batch that the turn is saved `waiting`
//! with (a cancel withdraws it, as any batch), and each outcome goes back to the remote agent in
//! the shape it asked in, in the same task and context: a person's approval confirms; anything
//! else (a denial with its reason, the deadline's fail-closed outcome, a withdrawal) refuses.
//!
//! A task that waits for words (input-required without a confirmation) is the call's result,
//! and its question is shown in the chat: the person's next message there is its answer,
//! sent in their own words when the agent calls the remote agent again.
//!
//! The chat's context with each remote agent is kept (`RecordKind::A2aContext`), saved with
//! the turn, so a later call goes on with the same remote conversation.

use std::time::Duration;

use holdpoint_a2a::client::{Answer, Card, Confirmation, Outgoing, Progress, Remote, Reply, State};
use holdpoint_core::record::{decode, put};
use holdpoint_core::store::RecordKind;
use holdpoint_core::{AgentAsking, Scope};
use holdpoint_protocol::{
    ApprovalRequest, DecisionKind, GateRequest, GateResult, HoldId, HoldRequest, LineageStep,
    MessageRole, Outcome, OutcomeStatus, QuestionOption, QuestionRequest, TurnId, TurnStatus,
    Verdict,
};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use uuid::Uuid;

use super::driver::{Driver, Stop};
use crate::tools::remote::{self, PREFIX};

/// Most rounds of confirmations one call answers before it is given up.
const MAX_ROUNDS: usize = 32;

/// The most of what a remote agent had said that a failure's message repeats.
const MAX_SAID: usize = 2000;

/// Where a chat's conversation with a remote agent stands.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(super) struct Context {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) context_id: Option<String>,
    /// A task waiting for the caller's words: the next message answers it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) task_id: Option<String>,
}

/// A question in words that a remote task waits on: the turn it was asked in, and what it
/// asks. Kept beside the context in its record.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct Asked {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    asked_in: Option<TurnId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    question: Option<String>,
}

/// The record: the context and the question pending, if any.
#[derive(Default, Serialize, Deserialize)]
struct Record {
    #[serde(flatten)]
    context: Context,
    #[serde(flatten)]
    asked: Asked,
    /// The remote agent the context is with: an entry changed to name another starts afresh.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    url: Option<String>,
}

/// The stored context: its record's id and version, and what it says.
pub(super) struct Stored {
    id: Uuid,
    version: u64,
    pub(super) context: Context,
    asked: Asked,
    url: Option<String>,
}

const CANCELED: &str =
    "the turn was canceled while the remote agent worked; its task was canceled too";

/// What the LLM is told when a remote task waits for words.
const ASKED: &str = "The remote agent asks the person this, and waits. It is shown in the chat. End your turn now, asking the person the question in its own words; do not answer it yourself. When the person has answered, call this tool again: their message is sent to the remote agent as the answer, in their words.";
const STILL_ASKED: &str = "The remote agent still waits for the person's answer to its question, which only the person's next message can give: end your turn now, asking them.";

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
        let Some((name, settings)) = remote::find(&self.rt.inner.remote, &world, &self.agent, tool)
        else {
            return Ok(Err(format!(
                "{tool} is no longer one of the world's remote agents"
            )));
        };
        let (name, settings) = (name.to_owned(), settings.clone());
        let Some(message) = args.get("message").and_then(Value::as_str) else {
            return Ok(Err("`message` (a string) is required".into()));
        };
        let url = match (&settings.agent, &settings.url) {
            (Some(sub), _) => return self.run_nested(i, &name, sub, message).await,
            (None, Some(url)) => url.clone(),
            (None, None) => return Ok(Err(format!("{tool} names no agent"))),
        };
        let card = match self.rt.inner.remote.card(&url, &settings).await {
            Ok(card) => card,
            Err(e) => return Ok(Err(e)),
        };
        let reach = remote::reach(&settings);
        let mut stored = self.stored_context(&name).await?;
        // A context and a task are the remote agent's: another agent knows neither.
        if stored.url.as_ref().is_some_and(|was| *was != url) {
            stored.context = Context::default();
            stored.asked = Asked::default();
        }
        stored.url = Some(url.clone());
        // A question in words is answered by the person's next message, in their words.
        let mut text = message.to_owned();
        let mut answered_with = None;
        if stored.context.task_id.is_some()
            && let Some(asked_in) = stored.asked.asked_in
        {
            if asked_in == self.turn.id {
                return Ok(Ok(json!({
                    "state": "input-required",
                    "text": stored.asked.question.clone().unwrap_or_default(),
                    "note": STILL_ASKED,
                })));
            }
            if let Some(words) = self.persons_words().await? {
                text.clone_from(&words);
                answered_with = Some(words);
            }
        }
        let mut out = Outgoing {
            context_id: stored.context.context_id.clone(),
            task_id: stored.context.task_id.clone(),
            text: Some(text),
            confirmations: Vec::new(),
        };
        let call = self.turn.calls[i].call.id.clone();
        // Everything the remote agent said in this call, as it came: a failure repeats it.
        let said = Mutex::new(String::new());
        for _ in 0..MAX_ROUNDS {
            let seen = Mutex::new(out.task_id.clone());
            let reply = match self
                .exchange(&card, &reach, &out, &call, &seen, &said)
                .await
            {
                Some(reply) => reply,
                None => {
                    let task = seen.lock().clone();
                    cancel_remote(self, &card, &reach, task).await;
                    return Ok(Err(CANCELED.into()));
                }
            };
            let reply = match reply {
                Ok(reply) => reply,
                Err(e) => {
                    // Nothing may be left running over there (a timeout, say).
                    let task = seen.lock().clone();
                    cancel_remote(self, &card, &reach, task).await;
                    return Ok(Err(format!(
                        "the remote agent {name:?} failed: {e}{}",
                        had_said(&said.lock())
                    )));
                }
            };
            let waiting = reply.state == State::InputRequired;
            let words = waiting && reply.confirmations.is_empty();
            let context = Context {
                context_id: reply
                    .context_id
                    .clone()
                    .or(stored.context.context_id.clone()),
                task_id: reply.task_id.clone().filter(|_| waiting),
            };
            let asked = match words {
                true => Asked {
                    asked_in: Some(self.turn.id),
                    question: Some(reply.text.clone()),
                },
                false => Asked::default(),
            };
            self.keep(&name, &mut stored, context, asked).await?;
            match reply.state {
                State::InputRequired if !reply.confirmations.is_empty() => {
                    let Some(answers) = self.confirm(i, &name, &reply.confirmations).await? else {
                        cancel_remote(self, &card, &reach, reply.task_id.clone()).await;
                        return Ok(Err(CANCELED.into()));
                    };
                    out = Outgoing {
                        context_id: stored.context.context_id.clone(),
                        task_id: reply.task_id.clone(),
                        text: None,
                        confirmations: reply.confirmations.into_iter().zip(answers).collect(),
                    };
                }
                State::InputRequired => {
                    return Ok(Ok(json!({
                        "state": "input-required",
                        "text": reply.text,
                        "note": ASKED,
                    })));
                }
                State::Completed => {
                    let mut result = json!({"state": "completed", "text": reply.text});
                    if let Some(words) = answered_with {
                        result["answered_with"] = json!(words);
                    }
                    return Ok(Ok(result));
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
            "the remote agent {name:?} asked for confirmations more than {MAX_ROUNDS} times in one call"
        )))
    }

    /// Sends `out` and reads the answer, recording its text as it comes as the call's
    /// (`turn.tool_text`) and in `said`, and its task in `seen`; `None` when the turn was
    /// canceled meanwhile.
    async fn exchange(
        &self,
        card: &Card,
        reach: &Remote,
        out: &Outgoing,
        call: &str,
        seen: &Mutex<Option<String>>,
        said: &Mutex<String>,
    ) -> Option<Result<Reply, holdpoint_a2a::client::ClientError>> {
        let (tx, rx) = mpsc::unbounded_channel::<String>();
        let client = &self.rt.inner.remote.client;
        let send = async move {
            // Owns the sender, so the recorder ends once the answer is read.
            let on_progress = move |p: Progress<'_>| match p {
                Progress::Task(t) => *seen.lock() = Some(t.to_owned()),
                Progress::Text(t) => {
                    said.lock().push_str(t);
                    let _ = tx.send(t.to_owned());
                }
            };
            client.send(card, reach, out, &on_progress).await
        };
        let both = async { tokio::join!(send, self.stream_text(rx, Some(call))) };
        tokio::select! {
            () = self.cancel.cancelled() => None,
            (reply, ()) = both => Some(reply),
        }
    }

    /// The message of the person that started this turn.
    async fn persons_words(&self) -> Result<Option<String>, Stop> {
        let history = self.rt.history(self.turn.chat).await?;
        Ok(history
            .into_iter()
            .rev()
            .find(|m| m.role == MessageRole::User && m.turn == Some(self.turn.id))
            .and_then(|m| m.content))
    }

    pub(super) async fn stored_context(&self, name: &str) -> Result<Stored, Stop> {
        let chat = *self.turn.chat.as_uuid();
        let record = self
            .rt
            .store()
            .record_by_key(RecordKind::A2aContext, Some(chat), name)
            .await
            .map_err(|e| Stop::Failed(e.to_string()))?;
        Ok(match record {
            Some(r) => {
                let (id, version) = (r.id, r.version);
                let record: Record = decode(r).unwrap_or_default();
                Stored {
                    id,
                    version,
                    context: record.context,
                    asked: record.asked,
                    url: record.url,
                }
            }
            None => Stored {
                id: Uuid::now_v7(),
                version: 0,
                context: Context::default(),
                asked: Asked::default(),
                url: None,
            },
        })
    }

    /// Saves the chat's context with the remote agent, with the turn, when it changed.
    pub(super) async fn keep_context(
        &mut self,
        name: &str,
        stored: &mut Stored,
        context: Context,
    ) -> Result<(), Stop> {
        self.keep(name, stored, context, Asked::default()).await
    }

    /// Saves the context and the question pending, with the turn, when they changed.
    async fn keep(
        &mut self,
        name: &str,
        stored: &mut Stored,
        context: Context,
        asked: Asked,
    ) -> Result<(), Stop> {
        if context == stored.context && asked == stored.asked {
            return Ok(());
        }
        let record = Record {
            context,
            asked,
            url: stored.url.clone(),
        };
        let write = put(
            RecordKind::A2aContext,
            stored.id,
            Some(*self.turn.chat.as_uuid()),
            Some(name.to_owned()),
            stored.version + 1,
            &record,
        )
        .map_err(|e| Stop::Failed(e.to_string()))?;
        self.save(vec![write], vec![]).await?;
        stored.version += 1;
        stored.context = record.context;
        stored.asked = record.asked;
        Ok(())
    }

    /// Asks a person, in this chat, whether the remote agent may run what it asks to confirm:
    /// all of it as one batch, each answered as its hold's outcome says; `None` when the turn
    /// was canceled meanwhile.
    async fn confirm(
        &mut self,
        i: usize,
        name: &str,
        asked: &[Confirmation],
    ) -> Result<Option<Vec<Answer>>, Stop> {
        let call = self.turn.calls[i].call.id.clone();
        let items = asked
            .iter()
            .map(|c| {
                if let Some(q) = &c.question {
                    return HoldRequest::Question(QuestionRequest {
                        tool_call_id: Some(call.clone()),
                        question: format!("The remote A2A agent {name:?} asks: {}", q.text),
                        options: q
                            .options
                            .iter()
                            .map(|(id, label)| QuestionOption {
                                id: id.clone(),
                                label: label.clone(),
                                description: None,
                            })
                            .collect(),
                        multiple: q.multiple,
                        confirm: false,
                        default_option: None,
                        context: None,
                        deadline: None,
                    });
                }
                let hint = c
                    .hint
                    .as_deref()
                    .map(|h| format!(" It says: {h}"))
                    .unwrap_or_default();
                HoldRequest::Approval(ApprovalRequest {
                    tool_call_id: Some(call.clone()),
                    tool: format!("{PREFIX}{name}/{}", tool_name(&c.tool)),
                    arguments: match &c.arguments {
                        v @ Value::Object(_) => v.clone(),
                        other => json!({ "value": other }),
                    },
                    schema: None,
                    annotations: None,
                    description: Some(format!(
                        "The remote A2A agent {name:?} asks to confirm its tool {:?} before it runs it.{hint}",
                        c.tool
                    )),
                    deadline: None,
                    always_ask: true,
                    // What goes back is yes or no: no edits, and nothing remembered.
                    offers: Some(vec![DecisionKind::ApproveOnce, DecisionKind::Deny]),
                    mcp: None,
                })
            })
            .collect();
        let ids: Vec<&str> = asked.iter().map(|c| c.id.as_str()).collect();
        let request = GateRequest {
            world: self.turn.world.to_string(),
            chat: Some(self.conversation().to_string()),
            agent: Some(self.agent.id.to_string()),
            items,
            // A retried raise of the same confirmations gets the same holds.
            idempotency_key: Some(format!(
                "turn:{}:call:{call}:a2a:{}",
                self.turn.id,
                &holdpoint_core::canonical::sha256_hex(ids.join("\n").as_bytes())[..32]
            )),
        };
        let because = vec![
            Some(format!(
                "the remote agent {name:?} asks a person to confirm this call"
            ));
            asked.len()
        ];
        let remote = LineageStep {
            name: name.to_owned(),
            agent: None,
            chat: None,
            tool_call_id: None,
        };
        let mut lineage = self.lineage_through(Some(&call));
        lineage.push(remote);
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
        if response.results.len() != asked.len() {
            return Err(Stop::Failed(
                "the gate answered another number of items".into(),
            ));
        }
        let mut answers: Vec<Option<Answer>> = Vec::new();
        let mut held: Vec<(usize, HoldId)> = Vec::new();
        for (n, result) in response.results.iter().enumerate() {
            answers.push(match result {
                GateResult::Held { hold } => {
                    held.push((n, hold.id));
                    None
                }
                GateResult::Allowed { .. } => Some(yes()),
                GateResult::Denied { decided_by, .. } => Some(no(format!(
                    "Holdpoint's policy denies it ({decided_by:?})"
                ))),
                GateResult::Invalid { field, message } => {
                    tracing::warn!(turn = %self.turn.id, %field, %message, "a remote agent's confirmation could not be raised; refused");
                    Some(no(format!("it cannot be asked: {field}: {message}")))
                }
            });
        }
        if !held.is_empty() {
            // Waiting, with the holds as the turn's batch: shown as a waiting turn, and a
            // cancel withdraws them as any batch.
            self.turn.status = TurnStatus::Waiting;
            self.turn.batch = response.batch;
            self.save(vec![], vec![]).await?;
            for (n, hold) in held {
                let Some(outcome) = self.outcome(hold).await? else {
                    return Ok(None);
                };
                answers[n] = Some(answer(&outcome, asked[n].question.is_some()));
            }
            self.turn.status = TurnStatus::Running;
            self.turn.batch = None;
            self.save(vec![], vec![]).await?;
        }
        Ok(Some(
            answers
                .into_iter()
                .map(|a| a.unwrap_or_else(|| no(String::new())))
                .collect(),
        ))
    }

    /// Waits for `hold`'s outcome; `None` when the turn was canceled meanwhile (the batch
    /// stays the turn's: ending the turn withdraws it).
    async fn outcome(&self, hold: HoldId) -> Result<Option<Outcome>, Stop> {
        let scope = Scope::any();
        loop {
            let wait = self
                .rt
                .engine()
                .wait(hold, Duration::from_secs(3600), &scope);
            tokio::select! {
                () = self.cancel.cancelled() => return Ok(None),
                r = wait => match r {
                    Ok(Some(outcome)) => return Ok(Some(outcome)),
                    Ok(None) => continue,
                    Err(e) => return Err(Stop::Failed(format!("waiting for hold {hold} failed: {e}"))),
                },
            }
        }
    }
}

fn yes() -> Answer {
    Answer {
        confirmed: true,
        reason: None,
        options: Vec::new(),
    }
}

fn no(reason: String) -> Answer {
    Answer {
        confirmed: false,
        reason: (!reason.is_empty()).then_some(reason),
        options: Vec::new(),
    }
}

/// What a hold's outcome answers: a person's approval (or a deadline's outcome that policy
/// made an approval) confirms, and a question's options applied answer it; anything else
/// refuses, saying why.
fn answer(outcome: &Outcome, question: bool) -> Answer {
    if question && outcome.status != OutcomeStatus::Canceled && !outcome.options.is_empty() {
        return Answer {
            options: outcome.options.iter().map(|o| o.id.clone()).collect(),
            ..yes()
        };
    }
    if !question
        && outcome.status != OutcomeStatus::Canceled
        && outcome.verdict == Some(Verdict::Approve)
    {
        return yes();
    }
    let why = match (outcome.status, &outcome.reason) {
        (_, Some(reason)) if !reason.trim().is_empty() => reason.clone(),
        (OutcomeStatus::TimedOut, _) => "nobody decided before the deadline".into(),
        (OutcomeStatus::Canceled, _) => "the request was withdrawn".into(),
        _ => "a person declined".into(),
    };
    no(why)
}

/// What a remote agent had said before it failed, for the failure's message.
fn had_said(said: &str) -> String {
    let said = said.trim();
    if said.is_empty() {
        return String::new();
    }
    let mut end = said.len().min(MAX_SAID);
    while !said.is_char_boundary(end) {
        end -= 1;
    }
    let more = if end < said.len() { "…" } else { "" };
    format!(" (it had said: {:?}{more})", &said[..end])
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
