//! The HTTP API, against a real server on a loopback port with a real SQLite file.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
