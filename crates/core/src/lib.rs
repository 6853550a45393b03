//! Holdpoint's engine: policy evaluation, the hold lifecycle, grants, deadlines and timeout
//! outcomes, quorum, and the audit hash chain.
//!
//! `core` is plain data and functions over two traits: [`store::Store`] (durable state and
//! committed events) and [`clock::Clock`] (time). It knows no HTTP, no SQL and no terminal.
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod audit;
pub mod canonical;
pub mod clock;
mod engine;
mod error;
pub mod hold;
pub mod lease;
pub mod limits;
pub mod mcp;
pub mod policy;
pub mod record;
pub mod roles;
pub mod store;

pub use engine::{
    AgentAsking, Engine, EngineBuilder, EventStream, HumanChannel, PendingLimit, PendingLimits,
    Scope, StartError, verify,
};
pub use error::{EngineError, ValidationError};
