//! The `holdpoint` binary, run as a child process.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
