//! `holdpoint chat`: talk to an agent; its reply streams in, and its holds are decided at a
//! menu (or by the fail-closed default when no one is at a terminal).

use std::collections::HashSet;
use std::io::Write;

use clap::Args;
use holdpoint_protocol::{
    BatchId, Chat, EventPayload, Hold, HoldId, HoldsParams, NewChat, SendMessage, StreamParams,
    ToolResult, TurnId, World,
};

use super::runtime;
use crate::Failure;
use crate::client::{Client, ClientError};
use crate::connect::{Connect, client_failure};
use crate::decide::{Decider, Handled};
use crate::present::{self, AgentNames};
use crate::terminal::safe::clean;
use crate::terminal::{self, Console, Happened};

#[derive(Args)]
#[command(
    after_help = "Examples:\n  holdpoint chat lab\n  holdpoint chat lab --agent reviewer\n  holdpoint chat lab --chat 0193c2a4-…   (go on with a chat)\n  echo 'clean up the build directory' | holdpoint chat lab   (holds get the fail-closed default)\n\n\
Type a message and press Enter; the agent's reply streams in. When the agent needs a decision,\n\
its hold is shown with a numbered menu of exactly the decisions it offers. Ctrl-C during a turn\n\
cancels the turn; Ctrl-D leaves (holds stay pending; come back with --chat).\n\
Without a terminal (or with --non-interactive), messages are read from stdin, one per line, and\n\
every hold gets the fail-closed default: approvals are denied; questions get their default\n\
option, else `no`, else are canceled. Each is recorded with source `default`.\n\
When no server answers (and none was named), Holdpoint runs in this process on the data directory.\n\n\
Exit status: 0 no turn failed; 1 a message was refused (a turn was still running) or its turn\n\
failed (the LLM unreachable or refusing, the step limit), or Holdpoint could not be reached or\n\
refused a request; 2 the command line could not be parsed."
)]
pub struct ChatArgs {
    /// The world, by name or id.
    world: String,
    /// The agent to talk to, by name or id [default: the world's only agent].
    #[arg(long, value_name = "NAME")]
    agent: Option<String>,
    /// Go on with this chat instead of starting a new one.
    #[arg(long, value_name = "ID")]
    chat: Option<String>,
    /// Never prompt: every hold gets the fail-closed default (as when stdin is not a terminal).
    #[arg(long)]
    non_interactive: bool,
    #[command(flatten)]
    connect: Connect,
}

pub fn run(args: ChatArgs) -> Result<(), Failure> {
    runtime()?.block_on(async {
        let connection = args.connect.client_or_embedded().await?;
        let result = chat(&connection.client, &args).await;
        connection.close().await;
        result
    })
}

/// Where the chat is.
struct Place {
    world: World,
    chat: Chat,
}

async fn chat(client: &Client, args: &ChatArgs) -> Result<(), Failure> {
    let place = open_chat(client, args).await?;
    let interactive = terminal::interactive(args.non_interactive);
    let live = StreamParams {
        world: Some(place.world.id.to_string()),
        chat: Some(place.chat.id.to_string()),
        after: None,
    };
    let events = client.events(&live).await.map_err(client_failure)?;
    let mut console = Console::new(events, interactive)?;
    let mut session = Session {
        client,
        place: &place,
        handled: HashSet::new(),
        mid_line: false,
        streaming_call: None,
        unfinished: 0,
    };
    if interactive {
        println!(
            "Chat {} in world {}. Type a message and press Enter; Ctrl-C cancels a turn, Ctrl-D leaves.",
            place.chat.id,
            clean(&place.world.name)
        );
    }
    // A chat taken up again may have holds waiting.
    let pending = session.open_holds(None).await?;
    if !pending.is_empty() {
        match session.decide(&mut console, pending).await? {
            Handled::Done => {}
            _ => return Ok(()),
        }
    }
    loop {
        let read = if interactive {
            console.prompt("you> ", None).await?
        } else {
            console.line().await
        };
        let text = match read {
            Happened::Line(l) if l.trim().is_empty() => continue,
            Happened::Line(l) => l,
            Happened::Eof | Happened::Interrupted | Happened::Ended => break,
            Happened::Event(_) | Happened::Resolved(_) => continue,
        };
        let (world, chat) = (place.world.id.to_string(), place.chat.id.to_string());
        let sent = client
            .send_message(&world, &chat, &SendMessage { text })
            .await;
        let started = match sent {
            Ok(t) => t,
            Err(e @ ClientError::Api { status: 409, .. }) => {
                println!("{}", clean(&e.to_string()));
                session.unfinished += 1;
                continue;
            }
            Err(e) => return Err(client_failure(e)),
        };
        if session.follow(&mut console, started.turn).await? == Ending::Leave {
            break;
        }
    }
    if interactive {
        println!(
            "Left chat {}; go on with: holdpoint chat {} --chat {}",
            place.chat.id,
            clean(&place.world.name),
            place.chat.id
        );
    }
    match session.unfinished {
        0 => Ok(()),
        1 => Err(Failure::Check(
            "error: a message was refused or its turn failed (see above)".into(),
        )),
        n => Err(Failure::Check(format!(
            "error: {n} messages were refused or their turns failed (see above)"
        ))),
    }
}

async fn open_chat(client: &Client, args: &ChatArgs) -> Result<Place, Failure> {
    let world: World = client
        .world(&args.world)
        .await
        .map_err(|e| match e.status() {
            Some(404) => Failure::Check(format!(
                "error: there is no world {:?} (create one with `holdpoint worlds create NAME`; see the README)",
                args.world
            )),
            _ => client_failure(e),
        })?;
    let id = world.id.to_string();
    if let Some(chat) = &args.chat {
        let chat = client.chat(&id, chat).await.map_err(client_failure)?;
        return Ok(Place { world, chat });
    }
    let agent = match &args.agent {
        Some(a) => a.clone(),
        None => {
            let agents = client.agents(&id).await.map_err(client_failure)?;
            match agents.as_slice() {
                [one] => one.name.clone(),
                [] => {
                    return Err(Failure::Check(format!(
                        "error: world {} has no agent to chat with: create one with `holdpoint agents create` (see the README)",
                        clean(&world.name)
                    )));
                }
                many => {
                    let names: Vec<String> = many.iter().map(|a| clean(&a.name).into()).collect();
                    return Err(Failure::Usage(format!(
                        "world {} has several agents ({}): choose one with --agent",
                        clean(&world.name),
                        names.join(", ")
                    )));
                }
            }
        }
    };
    let chat = client
        .create_chat(&id, &NewChat { agent, title: None })
        .await
        .map_err(client_failure)?;
    Ok(Place { world, chat })
}

#[derive(PartialEq, Eq)]
enum Ending {
    /// The turn ended; take the next message.
    Next,
    /// Leave the chat.
    Leave,
}

struct Session<'a> {
    client: &'a Client,
    place: &'a Place,
    /// Holds already shown (a batch's holds arrive as one event each).
    handled: HashSet<HoldId>,
    /// The last text printed did not end its line.
    mid_line: bool,
    /// The tool call whose streamed text is being printed (a remote agent answering).
    streaming_call: Option<String>,
    /// Messages refused, or whose turn failed. Any makes the exit status 1. (A turn that a
    /// person canceled or stopped, or left waiting on a hold, ended as someone chose.)
    unfinished: usize,
}

impl Session<'_> {
    /// The chat's open holds, of one batch or all.
    async fn open_holds(&self, batch: Option<BatchId>) -> Result<Vec<Hold>, Failure> {
        let params = HoldsParams {
            world: Some(self.place.world.id.to_string()),
            chat: Some(self.place.chat.id.to_string()),
            batch,
            limit: Some(500),
            ..HoldsParams::default()
        };
        self.client.all_holds(&params).await.map_err(client_failure)
    }

    async fn decide(
        &mut self,
        console: &mut Console,
        holds: Vec<Hold>,
    ) -> Result<Handled, Failure> {
        self.handled.extend(holds.iter().map(|h| h.id));
        let mut decider = Decider {
            client: self.client,
            console,
            no_one: "no terminal: holdpoint chat ran without one",
            agents: AgentNames::default(),
        };
        decider.batch(holds).await
    }

    fn end_line(&mut self) {
        if self.mid_line {
            println!();
            self.mid_line = false;
        }
    }

    /// Shows a turn until it ends.
    async fn follow(&mut self, console: &mut Console, turn: TurnId) -> Result<Ending, Failure> {
        let mut canceling = false;
        loop {
            let event = match console.next_event().await? {
                Happened::Event(e) => e,
                Happened::Interrupted if canceling => return Ok(Ending::Leave),
                Happened::Interrupted => {
                    canceling = true;
                    self.cancel(turn).await?;
                    continue;
                }
                Happened::Ended => {
                    return Err(Failure::Check(
                        "error: the server stopped; the turn stays stored and resumes when it starts again".into(),
                    ));
                }
                _ => continue,
            };
            match event.payload {
                EventPayload::TurnText { text, .. } => {
                    print!("{}", clean(&text));
                    let _ = std::io::stdout().flush();
                    self.mid_line = !text.ends_with('\n');
                }
                EventPayload::TurnToolText { call, text, .. } => {
                    if self.streaming_call.as_deref() != Some(call.as_str()) {
                        self.end_line();
                        print!("  [{}] ", clean(&call));
                        self.streaming_call = Some(call);
                    }
                    print!("{}", clean(&text));
                    let _ = std::io::stdout().flush();
                    self.mid_line = !text.ends_with('\n');
                }
                EventPayload::TurnToolFinished { result, .. } => {
                    self.streaming_call = None;
                    self.end_line();
                    println!("  {}", tool_result(&result));
                }
                EventPayload::HoldCreated { hold } if !self.handled.contains(&hold.id) => {
                    self.end_line();
                    let batch = self.open_holds(Some(hold.batch)).await?;
                    match self.decide(console, batch).await? {
                        Handled::Done => {}
                        Handled::Interrupted if !canceling => {
                            canceling = true;
                            self.cancel(turn).await?;
                        }
                        Handled::Interrupted | Handled::Eof => {
                            println!("The hold stays pending.");
                            return Ok(Ending::Leave);
                        }
                    }
                }
                EventPayload::HoldExpired { outcome } | EventPayload::HoldWithdrawn { outcome } => {
                    self.end_line();
                    println!(
                        "  hold {}: {}",
                        event.hold.map(|h| h.to_string()).unwrap_or_default(),
                        present::outcome(&outcome)
                    );
                }
                EventPayload::TurnFinished { .. } => {
                    self.end_line();
                    return Ok(Ending::Next);
                }
                EventPayload::TurnFailed { error, .. } => {
                    self.end_line();
                    println!("The turn failed: {}", clean(&error));
                    self.unfinished += 1;
                    return Ok(Ending::Next);
                }
                EventPayload::TurnCanceled { .. } => {
                    self.end_line();
                    println!("Turn canceled.");
                    return Ok(Ending::Next);
                }
                EventPayload::TurnStopped { .. } => {
                    self.end_line();
                    println!("Turn stopped: a call was denied with \"deny and stop\".");
                    return Ok(Ending::Next);
                }
                _ => {}
            }
        }
    }

    async fn cancel(&mut self, turn: TurnId) -> Result<(), Failure> {
        self.end_line();
        println!("Canceling the turn… (Ctrl-C again to leave at once)");
        let world = self.place.world.id.to_string();
        match self.client.cancel_turn(&world, turn).await {
            Ok(_) => Ok(()),
            // The turn ended meanwhile.
            Err(ClientError::Api { status: 409, .. }) => Ok(()),
            Err(e) => Err(client_failure(e)),
        }
    }
}

/// A tool call's result, on one line.
fn tool_result(r: &ToolResult) -> String {
    match r {
        ToolResult::Executed {
            approved_by,
            output,
            ..
        } => {
            let text = output
                .as_str()
                .map_or_else(|| output.to_string(), str::to_owned);
            format!(
                "✓ ran ({}): {}",
                present::short(&approved_by.to_string(), 60),
                present::short(&text, 100)
            )
        }
        ToolResult::Failed { error } => format!("✗ failed: {}", present::short(error, 100)),
        ToolResult::DeniedByPerson { reason, decided_by } => format!(
            "✗ denied by {}{}",
            present::short(&decided_by.join(", "), 80),
            reason
                .as_deref()
                .map(|r| format!(": {}", present::short(r, 80)))
                .unwrap_or_default()
        ),
        ToolResult::DeniedByDefault { applied_by, .. } => format!(
            "✗ denied: the fail-closed default, applied by {}",
            present::short(&applied_by.join(", "), 80)
        ),
        ToolResult::DeniedByPolicy { rule } => {
            format!("✗ denied by policy ({})", present::short(rule, 60))
        }
        ToolResult::TimedOut { applied } => {
            format!("✗ timed out ({})", present::short(applied, 40))
        }
        ToolResult::NotExecuted { reason } => format!("– not run: {}", present::short(reason, 80)),
        ToolResult::Interrupted { note } => format!("? interrupted: {}", present::short(note, 80)),
        ToolResult::InvalidArguments { error } => {
            format!("✗ invalid arguments: {}", present::short(error, 80))
        }
        ToolResult::Answer {
            outcome,
            options,
            by_default,
            ..
        } => {
            let labels: Vec<String> = options
                .iter()
                .map(|o| present::short(&o.label, 40))
                .collect();
            format!(
                "answer: {} {}{}",
                serde_json::to_string(outcome)
                    .unwrap_or_default()
                    .trim_matches('"'),
                labels.join(", "),
                if *by_default {
                    " (the fail-closed default)"
                } else {
                    ""
                }
            )
        }
    }
}
