pub mod ask;
pub mod audit;
pub mod catalog;
pub mod chat;
pub mod completions;
pub mod exec;
pub mod holds;
pub mod mcp;
pub mod policy;
pub mod raise;
pub mod serve;
pub mod world_a2a;
pub mod world_routes;

use serde::Serialize;

use crate::Failure;
use crate::client::{Client, ClientError};
use crate::connect::{Connect, client_failure};
use crate::terminal::safe::{clean_line, json_text};

/// What every command that reads or changes the API's resources takes.
#[derive(clap::Args)]
pub struct Common {
    /// Print JSON (the API's own shapes) instead of text.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub connect: Connect,
}

impl Common {
    pub fn client(&self) -> Result<Client, Failure> {
        self.connect.client()
    }

    /// Says that what a request deleted (`what`: "world lab") is gone, or why not.
    pub fn deleted(&self, done: Result<(), ClientError>, what: &str) -> Result<(), Failure> {
        done.map_err(client_failure)?;
        if self.json {
            return print_json(&serde_json::json!({ "deleted": true }));
        }
        println!("Deleted {}.", clean_line(what));
        Ok(())
    }

    /// One item: its JSON, or `line` of it.
    pub fn show<T: Serialize>(&self, item: &T, line: fn(&T) -> String) -> Result<(), Failure> {
        if self.json {
            return print_json(item);
        }
        println!("{}", line(item));
        Ok(())
    }

    /// A listing: its JSON, or a `line` per item (`none` when there are none).
    pub fn show_all<T: Serialize>(
        &self,
        items: &[T],
        none: &str,
        line: fn(&T) -> String,
    ) -> Result<(), Failure> {
        if self.json {
            return print_json(&items);
        }
        if items.is_empty() {
            println!("{none}");
        }
        for item in items {
            println!("{}", line(item));
        }
        Ok(())
    }
}

/// A whole number from `min` to `max`, for a flag; the error says so in words, not in the
/// parser's ("invalid digit found in string").
pub fn number_between(text: &str, min: u32, max: u32) -> Result<u32, String> {
    match text.trim().parse::<u32>() {
        Ok(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(format!(
            "{:?} is not a whole number from {min} to {max}",
            clean_line(text)
        )),
    }
}

/// The error for a world's named entry (an MCP server, a remote agent) that is not there,
/// listing the names it has: `error: world lab has no MCP server "x" (its servers: a, b)`.
pub fn no_entry<'a>(
    world: &str,
    what: &str,
    plural: &str,
    name: &str,
    known: impl Iterator<Item = &'a String>,
) -> Failure {
    let known: Vec<&str> = known.map(String::as_str).collect();
    let known = if known.is_empty() {
        "none".to_owned()
    } else {
        crate::terminal::safe::clean_line(&known.join(", "))
    };
    Failure::Check(format!(
        "error: world {} has no {what} {:?} (its {plural}: {known})",
        crate::terminal::safe::clean_line(world),
        crate::terminal::safe::clean_line(name),
    ))
}

/// Prints `value` as the API's own JSON (for `--json`).
pub fn print_json(value: &impl Serialize) -> Result<(), Failure> {
    let text =
        serde_json::to_string_pretty(value).map_err(|e| Failure::Check(format!("error: {e}")))?;
    println!("{}", json_text(&text));
    Ok(())
}

/// The async runtime the networked commands run on.
pub fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::Check(format!("cannot start: {e}")))
}

/// A runtime on this thread alone, for `holdpoint mcp`: its work is short steps handed from
/// one task to the next (the client's line, the gate, the upstream's answer), which one thread
/// runs without waking another, while a wake-up across CPUs costs tens of µs on a virtual or
/// loaded machine. Blocking work still goes to the blocking pool, and the store's writer has
/// a thread of its own.
pub fn runtime_on_one_thread() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::Check(format!("cannot start: {e}")))
}

/// Ctrl-C or SIGTERM. Both handlers are installed when this is called, not when the
/// future is first polled.
pub fn stop_signal() -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{Signal, SignalKind, signal};
    let term = signal(SignalKind::terminate());
    let interrupt = signal(SignalKind::interrupt());
    async move {
        let wait = |s: std::io::Result<Signal>| async move {
            match s {
                Ok(mut s) => {
                    s.recv().await;
                }
                Err(_) => std::future::pending().await,
            }
        };
        tokio::select! {
            () = wait(interrupt) => {}
            () = wait(term) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::number_between;

    #[test]
    fn numbers_out_of_range_are_refused_in_words() {
        assert_eq!(number_between("50", 1, 500), Ok(50));
        for bad in ["-1", "0", "501", "ten", "1.5", ""] {
            let e = number_between(bad, 1, 500).unwrap_err();
            assert!(
                e.contains("is not a whole number from 1 to 500"),
                "{bad}: {e}"
            );
            assert!(!e.contains("digit"), "{bad}: {e}");
        }
    }
}
