//! The agent runtime against a scripted LLM, on real SQLite files, running real commands.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
