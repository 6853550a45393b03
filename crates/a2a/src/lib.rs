//! A2A for Holdpoint, with no I/O: reading JSON-RPC requests of A2A 1.0 (and 0.3, converted
//! to 1.0's shapes), writing answers and stream events in the caller's version, and the one
//! thing Holdpoint adds to the protocol — held calls as an `input-required` task whose status
//! message carries them in the shapes other agents read (Google ADK's confirmation requests,
//! kagent's tool-approval summary, Holdpoint's own), and the replies, in any of those shapes or
//! in words, read back as decisions. The server puts it on HTTP (`/a2a/{world}/{agent}`).
//!
//! The other direction is `client`, the one module with I/O: remote A2A agents called as
//! tools by the agent runtime (reading a card, streaming a message's answer, answering ADK's
//! confirmation requests, cancelling). It sits on the workspace's reqwest like `holdpoint-llm`,
//! in the layer below the runtime, so that the runtime can call it.
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod client;
pub mod holds;
pub mod jsonrpc;
pub mod v03;

pub use holds::{ReplyError, Target, held_parts, reply_decisions};
pub use jsonrpc::{Method, Request, RpcError, Version};
