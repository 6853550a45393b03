//! MCP for Holdpoint: the configured upstream MCP servers.
//!
//! This is the only crate that uses the MCP SDK (`rmcp`); none of its types shows in this
//! crate's API.

#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod config;

pub use config::{ConfigProblem, McpSettings, UpstreamConfig};
