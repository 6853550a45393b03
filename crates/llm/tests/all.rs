//! The LLM client against a scripted OpenAI-compatible server on port 0.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
