//! Holdpoint's agent runtime: worlds, agents and chats; the turn loop, in which an agent calls
//! tools, policy decides, holds stop the turn and decisions resume it (after a crash too);
//! and the built-in tools.
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod catalog;
mod error;
mod runtime;
mod tools;
mod turn;

pub use error::RuntimeError;
pub use runtime::{Runtime, RuntimeConfig, ShellLimits, TURN_LEASE};
pub use tools::{BUILT_IN_TOOLS, ExternalTools, FileNow, check_remote_agents, hide_remote_secrets};
