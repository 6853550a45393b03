//! Checks over the workspace as a whole: the crate rules of ARCHITECTURE.md, and that the
//! paths the documents name exist.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
