//! Holdpoint's durable storage: [`holdpoint_core::store::Store`] on SQLite (the default, no
//! setup) and on PostgreSQL (a database several processes can share).
//!
//! SQLite runs in WAL mode with `synchronous = NORMAL`, and Holdpoint syncs the WAL itself: a
//! commit is acknowledged only after an fsync of the WAL that covers it, so it survives a
//! process crash and a power loss. One writer thread applies transactions in groups, one fsync
//! per group, which is what makes durable writes fast under concurrency. Readers use their own
//! connections and never wait for the writer. The PostgreSQL store keeps the same shape: one
//! writer per process committing groups, readers on connections of their own (see `pg`).
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod cache;
mod group;
mod pages;
mod pg;
mod rows;
mod sqlite;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use holdpoint_core::store::Store;

pub use pg::{PgStore, check_url, redact};
pub use sqlite::SqliteStore;

/// The database file inside a data directory.
pub const DATABASE_FILE: &str = "holdpoint.db";

/// Why a database could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("{path}: {message}")]
    Io { path: PathBuf, message: String },
    #[error(
        "{path} is in use by another holdpoint process (stop it first, or give this one another --data directory)"
    )]
    Locked { path: PathBuf },
    #[error("{path}: no Holdpoint database here")]
    Missing { path: PathBuf },
    #[error("{path}: {message}")]
    Database { path: PathBuf, message: String },
    /// A PostgreSQL database that could not be reached, entered or migrated; the message
    /// names the database (never the password) and what to fix.
    #[error("{message}")]
    Postgres { message: String },
}

/// The store a server runs on: SQLite in its data directory, or PostgreSQL.
#[derive(Debug, Clone)]
pub enum Database {
    Sqlite(Arc<SqliteStore>),
    Postgres(Arc<PgStore>),
}

impl Database {
    /// PostgreSQL when `url` is given, else SQLite in `data_dir`.
    pub async fn open(url: Option<&str>, data_dir: &Path) -> Result<Database, OpenError> {
        Ok(match url {
            Some(url) => Database::Postgres(Arc::new(PgStore::open(url).await?)),
            None => Database::Sqlite(Arc::new(SqliteStore::open(data_dir.join(DATABASE_FILE))?)),
        })
    }

    /// For reading only, beside a server that writes.
    pub async fn open_read_only(url: Option<&str>, data_dir: &Path) -> Result<Database, OpenError> {
        Ok(match url {
            Some(url) => Database::Postgres(Arc::new(PgStore::open_read_only(url).await?)),
            None => Database::Sqlite(Arc::new(SqliteStore::open_read_only(
                data_dir.join(DATABASE_FILE),
            )?)),
        })
    }

    pub fn store(&self) -> Arc<dyn Store> {
        match self {
            Database::Sqlite(s) => s.clone(),
            Database::Postgres(s) => s.clone(),
        }
    }

    /// Writes out what is queued and releases the database.
    pub async fn close(&self) {
        match self {
            Database::Sqlite(s) => s.close().await,
            Database::Postgres(s) => s.close().await,
        }
    }
}
