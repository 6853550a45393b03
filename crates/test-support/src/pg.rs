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
        Some(Self::in_database(&test_database_url()?).await)
    }

    /// A schema of its own in the database at `base`.
    pub async fn in_database(base: &str) -> TempSchema {
        let base = base.to_owned();
        let schema = format!("test_{}", uuid::Uuid::now_v7().simple());
        let client = connect(&base).await;
        client
            .batch_execute(&format!("CREATE SCHEMA {schema}"))
            .await
            .unwrap();
        let sep = if base.contains('?') { '&' } else { '?' };
        let url = format!("{base}{sep}options=-c%20search_path%3D{schema}");
        TempSchema { url, base, schema }
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

/// A TCP relay in front of the test database, to take the database away from a server and
/// give it back: while cut, connections through it are closed and new ones are dropped at
/// once, as when the database's host goes down.
pub struct Relay {
    /// `url` with the relay's address in place of the database's.
    pub url: String,
    open: tokio::sync::watch::Sender<bool>,
    /// Connections relayed now.
    live: tokio::sync::watch::Sender<usize>,
    task: tokio::task::JoinHandle<()>,
}

impl Relay {
    /// A relay for the database `url` names (host and port given in it).
    pub async fn start(url: &str) -> Relay {
        let config: tokio_postgres::Config = url.parse().unwrap();
        let host = match config.get_hosts().first() {
            Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
            _ => panic!("the test database URL names a TCP host"),
        };
        let port = config.get_ports().first().copied().unwrap_or(5432);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let relay_port = listener.local_addr().unwrap().port();
        let upstream = format!("{host}:{port}");
        let relayed = url.replacen(
            &format!("@{upstream}/"),
            &format!("@127.0.0.1:{relay_port}/"),
            1,
        );
        assert_ne!(
            relayed, url,
            "the test database URL is written USER:PASSWORD@HOST:PORT/DATABASE"
        );
        let (open, watch) = tokio::sync::watch::channel(true);
        let (live, _) = tokio::sync::watch::channel(0usize);
        let counter = live.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((mut inbound, _)) = listener.accept().await else {
                    return;
                };
                if !*watch.borrow() {
                    continue;
                }
                let mut cut = watch.clone();
                let upstream = upstream.clone();
                let counter = counter.clone();
                counter.send_modify(|n| *n += 1);
                tokio::spawn(async move {
                    if let Ok(mut outbound) = tokio::net::TcpStream::connect(&upstream).await {
                        tokio::select! {
                            _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                            _ = cut.wait_for(|open| !open) => {}
                        }
                    }
                    drop(inbound);
                    counter.send_modify(|n| *n -= 1);
                });
            }
        });
        Relay {
            url: relayed,
            open,
            live,
            task,
        }
    }

    /// Closes every connection through the relay and refuses new ones; returns once all
    /// are closed.
    pub async fn cut(&self) {
        self.open.send_replace(false);
        let _ = self.live.subscribe().wait_for(|n| *n == 0).await;
    }

    /// Lets connections through again.
    pub fn restore(&self) {
        self.open.send_replace(true);
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.task.abort();
    }
}
