//! Deciding holds at the terminal, as `chat` and `holds watch` do: a numbered menu of exactly
//! the decisions a hold offers (`menu.rs`, pure), "decide all" for batches, and the prompt
//! that asks and records (`prompt.rs`), with the fail-closed default when no one is there to
//! ask.

mod menu;
mod prompt;

pub use menu::{option_ids, result_text};
pub use prompt::{Decider, learn_agents};

/// How showing holds to a person ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Handled {
    /// Every hold shown is decided (here or elsewhere).
    Done,
    /// Ctrl-C at a prompt.
    Interrupted,
    /// The input ended at a prompt.
    Eof,
}
