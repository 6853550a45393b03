//! One terminal session: lines typed, the live event stream, and Ctrl-C, waited on together.

use std::collections::VecDeque;
use std::io::Write;

use holdpoint_protocol::{Event, HoldId};
use tokio::signal::unix::{Signal, SignalKind, signal};

use super::input::Input;
use crate::Failure;
use crate::client::EventStream;
use crate::connect::client_failure;

/// What came of waiting for something.
pub enum Happened {
    Line(String),
    /// The input ended (Ctrl-D, or the end of a pipe).
    Eof,
    /// Ctrl-C.
    Interrupted,
    /// An event arrived (from the stream, or held back while a prompt waited).
    Event(Box<Event>),
    /// The hold a prompt was about was decided, expired or withdrawn meanwhile.
    Resolved(Box<Event>),
    /// The server ended the stream (it is stopping).
    Ended,
}

pub struct Console {
    input: Input,
    events: EventStream,
    /// Events that arrived while a prompt waited, in order.
    backlog: VecDeque<Event>,
    interrupt: Signal,
    /// Whether a person is there to answer prompts.
    pub interactive: bool,
}

impl Console {
    pub fn new(events: EventStream, interactive: bool) -> Result<Console, Failure> {
        let interrupt = signal(SignalKind::interrupt())
            .map_err(|e| Failure::Check(format!("error: cannot handle Ctrl-C: {e}")))?;
        Ok(Console {
            input: Input::stdin(),
            events,
            backlog: VecDeque::new(),
            interrupt,
            interactive,
        })
    }

    /// The next event, or Ctrl-C.
    pub async fn next_event(&mut self) -> Result<Happened, Failure> {
        if let Some(e) = self.backlog.pop_front() {
            return Ok(Happened::Event(Box::new(e)));
        }
        tokio::select! {
            e = self.events.next() => Ok(match e.map_err(client_failure)? {
                Some(e) => Happened::Event(Box::new(e)),
                None => Happened::Ended,
            }),
            _ = self.interrupt.recv() => Ok(Happened::Interrupted),
        }
    }

    /// Prints `prompt` and waits for a line. Events that arrive meanwhile are kept for
    /// [`Console::next_event`], except one that resolves `about`, which ends the wait.
    pub async fn prompt(
        &mut self,
        prompt: &str,
        about: Option<HoldId>,
    ) -> Result<Happened, Failure> {
        print!("{prompt}");
        let _ = std::io::stdout().flush();
        loop {
            tokio::select! {
                line = self.input.line() => {
                    return Ok(match line {
                        Some(l) => Happened::Line(l),
                        None => Happened::Eof,
                    });
                }
                _ = self.interrupt.recv() => {
                    println!();
                    return Ok(Happened::Interrupted);
                }
                e = self.events.next() => match e.map_err(client_failure)? {
                    Some(e) if about.is_some() && e.hold == about && e.payload.resolution().is_some() => {
                        println!();
                        return Ok(Happened::Resolved(Box::new(e)));
                    }
                    Some(e) => self.backlog.push_back(e),
                    None => return Ok(Happened::Ended),
                },
            }
        }
    }

    /// A line of input without the live stream (for messages in a pipe).
    pub async fn line(&mut self) -> Happened {
        tokio::select! {
            line = self.input.line() => match line {
                Some(l) => Happened::Line(l),
                None => Happened::Eof,
            },
            _ = self.interrupt.recv() => Happened::Interrupted,
        }
    }
}
