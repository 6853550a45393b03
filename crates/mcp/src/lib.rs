//! MCP for Holdpoint: the configured upstream MCP servers, and the gateway that puts
//! Holdpoint's gate in front of their tools (with Holdpoint's own `ask_human` and
//! `request_approval` beside them).
//!
//! This is the only crate that uses the MCP SDK (`rmcp`); none of its types shows in this
//! crate's API.

#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod config;
mod elicit;
mod gateway;
mod holds;
mod http_gateway;
mod own;
mod plain;
mod reach;
mod stdio;
mod tasks;
mod upstream;
mod wire;

pub use config::{ConfigProblem, McpSettings, UpstreamConfig};
pub use elicit::{Approver, Decider};
pub use gateway::{EDITED_META, Gateway, GatewayError, LATEST_REVISION};
pub use holds::Holds;
pub use http_gateway::{HttpGateway, HttpRefusal, McpBody};
pub use reach::{Holdpoint, HoldpointError};
pub use upstream::{FIRST_LIST_PATIENCE, UpstreamError, Upstreams};
