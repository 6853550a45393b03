//! PostgreSQL for tests: the database `scripts/test` makes for a run, and a schema of its own
//! for each test, dropped afterwards.

use std::sync::Arc;

use holdpoint_core::store::Store;
use holdpoint_store::PgStore;

use crate::contract::Fixture;

/// The variable that names the test run's database (`scripts/test` sets it).
pub const URL_VARIABLE: &str = "HOLDPOINT_TEST_DATABASE_URL";

/// The test run's database, or `None` (with a line saying the test is skipped) when there is
/// none here. Under CI (`CI=true`) a missing database fails the test instead: CI must run
/// every PostgreSQL test.
pub fn test_database_url() -> Option<String> {
    match std::env::var(URL_VARIABLE) {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            if std::env::var("CI").is_ok_and(|v| v == "true") {
                panic!(
                    "{URL_VARIABLE} is not set: under CI every PostgreSQL test must run (scripts/test sets it)"
                );
            }
            eprintln!(
                "skipped: this test needs PostgreSQL; set {URL_VARIABLE} (scripts/test does) to run it"
            );
            None
        }
    }
}

/// A schema of its own in the test run's database, dropped when this is dropped. Its `url`
/// connects with that schema as the search path, so a store opened on it sees nothing else.
pub struct TempSchema {
    pub url: String,
    base: String,
    schema: String,
}

impl TempSchema {
    /// `None` when there is no test database (see [`test_database_url`]).
    pub async fn new() -> Option<TempSchema> {
        let base = test_database_url()?;
        let schema = format!("test_{}", uuid::Uuid::now_v7().simple());
        let client = connect(&base).await;
        client
            .batch_execute(&format!("CREATE SCHEMA {schema}"))
            .await
            .unwrap();
        let sep = if base.contains('?') { '&' } else { '?' };
        let url = format!("{base}{sep}options=-c%20search_path%3D{schema}");
        Some(TempSchema { url, base, schema })
    }

    /// A store on this schema, migrated and empty.
    pub async fn store(&self) -> Arc<PgStore> {
        Arc::new(PgStore::open(&self.url).await.unwrap())
    }
}

impl Drop for TempSchema {
    fn drop(&mut self) {
        let (base, schema) = (self.base.clone(), self.schema.clone());
        // Dropping runs outside any runtime's reach (perhaps inside one that is ending), so
        // the schema is dropped from a thread with a runtime of its own.
        let done = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                let client = connect(&base).await;
                client
                    .batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
                    .await
            })
        })
        .join();
        if let Ok(Err(e)) = done {
            eprintln!("could not drop the test schema {}: {e}", self.schema);
        }
    }
}

async fn connect(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap_or_else(|e| panic!("cannot connect to the test database: {e}"));
    tokio::spawn(connection);
    client
}

/// A fresh PostgreSQL store for the contract suite, in a schema of its own.
pub async fn fixture() -> Option<Fixture> {
    let schema = TempSchema::new().await?;
    let store = schema.store().await;
    Some(Fixture {
        store: store.clone() as Arc<dyn Store>,
        guard: Box::new((store, schema)),
    })
}
