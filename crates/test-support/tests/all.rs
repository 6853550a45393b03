//! Checks over the workspace as a whole: the crate rules of ARCHITECTURE.md.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
