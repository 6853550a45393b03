//! Holdpoint's durable storage: [`holdpoint_core::store::Store`] on SQLite.
//!
//! SQLite runs in WAL mode with `synchronous = NORMAL`, and Holdpoint syncs the WAL itself: a
//! commit is acknowledged only after an fsync of the WAL that covers it, so it survives a
//! process crash and a power loss. One writer thread applies transactions in groups, one fsync
//! per group, which is what makes durable writes fast under concurrency. Readers use their own
//! connections and never wait for the writer.
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod sqlite;

pub use sqlite::{OpenError, SqliteStore};

/// The database file inside a data directory.
pub const DATABASE_FILE: &str = "holdpoint.db";
