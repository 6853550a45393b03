//! The think step: the LLM gets the conversation and the tools; its answer and the tool calls
//! it proposes are saved (or the turn finishes, when it proposes none).

use std::time::Instant;

use holdpoint_core::record::put;
use holdpoint_core::store::{RecordKind, Write};
use holdpoint_llm::ChatRequest;
use holdpoint_protocol::{CallRecord, CallState, EventPayload, Message, MessageRole, TurnStatus};
use tokio::sync::mpsc;
use uuid::Uuid;

use super::driver::{Driver, Stop};
use crate::tools;

impl Driver<'_> {
    pub(super) async fn think(&mut self) -> Result<(), Stop> {
        if self.turn.step >= self.agent.max_steps {
            return Err(Stop::Failed(format!(
                "the agent reached its limit of {} LLM calls in one turn (max_steps)",
                self.agent.max_steps
            )));
        }
        let history = self.rt.history(self.turn.chat).await?;
        let external = tools::external(self.rt, &self.agent).await?;
        let mut specs = tools::specs(&self.agent, &external);
        specs.extend(tools::remote::specs(self.rt, &self.agent).await?);
        let request = ChatRequest {
            settings: &self.agent.llm,
            system: &self.agent.system_prompt,
            messages: &history,
            tools: &specs,
        };
        let (tx, rx) = mpsc::unbounded_channel::<String>();
        let llm = self.rt.inner.llm.clone();
        let complete = async move {
            let mut on_text = |t: &str| {
                let _ = tx.send(t.to_owned());
            };
            llm.complete(request, &mut on_text).await
        };
        let both = async { tokio::join!(complete, self.stream_text(rx, None)) };
        let (completion, ()) = tokio::select! {
            () = self.cancel.cancelled() => return Err(Stop::Canceled),
            both = both => both,
        };
        let completion = completion.map_err(|e| Stop::Failed(e.to_string()))?;
        let now = self.rt.now();
        let message = Message {
            role: MessageRole::Assistant,
            content: (!completion.text.is_empty()).then_some(completion.text),
            tool_calls: completion.tool_calls.clone(),
            tool_call_id: None,
            turn: Some(self.turn.id),
            at: now,
        };
        let chat = *self.turn.chat.as_uuid();
        let mut writes = vec![
            put(
                RecordKind::Message,
                Uuid::now_v7(),
                Some(chat),
                None,
                1,
                &message,
            )
            .map_err(|e| Stop::Failed(e.to_string()))?,
        ];
        let mut events = vec![self.event(EventPayload::MessageCreated { message })];
        self.turn.step += 1;
        if completion.tool_calls.is_empty() {
            self.turn.status = TurnStatus::Finished;
            self.turn.finished_at = Some(now);
            writes.push(Write::DeleteRecord {
                kind: RecordKind::ActiveTurn,
                id: *self.turn.id.as_uuid(),
            });
            events.push(self.event(EventPayload::TurnFinished { turn: self.turn.id }));
        } else {
            for call in completion.tool_calls {
                events.push(self.event(EventPayload::TurnToolCall {
                    turn: self.turn.id,
                    call: call.clone(),
                }));
                self.turn.calls.push(CallRecord {
                    call,
                    state: CallState::Proposed,
                    arguments: None,
                    hold: None,
                    approved_by: None,
                    edited: false,
                    result: None,
                });
            }
        }
        self.save(writes, events).await
    }

    /// Records streamed text as `turn.text` events (`turn.tool_text` for what the running call
    /// `call` streams), a piece at most every `text_flush`.
    pub(super) async fn stream_text(
        &self,
        mut rx: mpsc::UnboundedReceiver<String>,
        call: Option<&str>,
    ) {
        let every = self.rt.inner.config.text_flush;
        let mut buffer = String::new();
        let mut since = Instant::now();
        loop {
            let next = if buffer.is_empty() {
                rx.recv().await
            } else {
                match tokio::time::timeout(every.saturating_sub(since.elapsed()), rx.recv()).await {
                    Ok(piece) => piece,
                    Err(_) => {
                        self.emit_text(std::mem::take(&mut buffer), call).await;
                        since = Instant::now();
                        continue;
                    }
                }
            };
            match next {
                Some(piece) => {
                    if buffer.is_empty() {
                        since = Instant::now();
                    }
                    buffer.push_str(&piece);
                }
                None => {
                    if !buffer.is_empty() {
                        self.emit_text(buffer, call).await;
                    }
                    return;
                }
            }
        }
    }

    async fn emit_text(&self, text: String, call: Option<&str>) {
        let turn = self.turn.id;
        let event = self.event(match call {
            None => EventPayload::TurnText { turn, text },
            Some(call) => EventPayload::TurnToolText {
                turn,
                call: call.to_owned(),
                text,
            },
        });
        if let Err(e) = self.rt.commit(vec![], vec![event]).await {
            tracing::warn!(turn = %self.turn.id, error = %e, "could not record streamed text");
        }
    }
}
