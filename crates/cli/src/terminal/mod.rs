//! The terminal: safe printing of untrusted text, lines typed, and sessions that wait on
//! input, live events and Ctrl-C together.

mod console;
mod input;
pub mod safe;

pub use console::{Console, Happened};

/// Whether prompts can be answered: stdin is a terminal and `--non-interactive` was not given.
pub fn interactive(non_interactive: bool) -> bool {
    !non_interactive && std::io::IsTerminal::is_terminal(&std::io::stdin())
}
