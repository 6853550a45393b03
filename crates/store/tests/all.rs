//! The store's integration tests: the contract suite on SQLite, and what is particular to
//! SQLite files (reopening, locking, tampering, crashes).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
