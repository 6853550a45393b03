//! Connections: reading the database URL, connecting with errors that say what to fix, a
//! connection with its prepared statements, and the readers' connections, which reconnect
//! when the database comes back.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use holdpoint_core::store::StoreError;
use parking_lot::Mutex;
use tokio_postgres::config::Host;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Config, NoTls, Row, Statement};

/// How long connecting may take before the database counts as unreachable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A parsed database URL, and how to name it without its password.
#[derive(Clone)]
pub(super) struct Target {
    pub(super) config: Config,
    /// `host:port/database`, for messages.
    pub(super) name: String,
}

impl Target {
    pub(super) fn parse(url: &str) -> Result<Target, String> {
        if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
            // Not echoed: whatever it is, it may hold a password.
            return Err(
                "a PostgreSQL URL starts with postgres:// (or postgresql://): write postgres://USER:PASSWORD@HOST:PORT/DATABASE".into(),
            );
        }
        let mut config: Config = url.parse().map_err(|e| {
            format!(
                "{} is not a valid PostgreSQL URL ({e}): write postgres://USER:PASSWORD@HOST:PORT/DATABASE",
                redact(url)
            )
        })?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        if config.get_application_name().is_none() {
            config.application_name("holdpoint");
        }
        // A dead peer is noticed within a minute rather than at the kernel's default of hours.
        config.keepalives_idle(Duration::from_secs(30));
        let host = match config.get_hosts().first() {
            Some(Host::Tcp(h)) => h.clone(),
            Some(Host::Unix(p)) => p.display().to_string(),
            None => "localhost".into(),
        };
        let port = config.get_ports().first().copied().unwrap_or(5432);
        let database = config
            .get_dbname()
            .or(config.get_user())
            .unwrap_or("postgres")
            .to_owned();
        Ok(Target {
            name: format!("{host}:{port}/{database}"),
            config,
        })
    }

    fn user(&self) -> &str {
        self.config.get_user().unwrap_or("(none given)")
    }

    fn database(&self) -> &str {
        self.config
            .get_dbname()
            .or(self.config.get_user())
            .unwrap_or("postgres")
    }

    /// Opens a connection; its messages are handled on a task of their own until it closes.
    pub(super) async fn connect(&self) -> Result<Client, String> {
        let (client, connection) = self
            .config
            .connect(NoTls)
            .await
            .map_err(|e| self.explain(&e))?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::warn!(error = %e, "a PostgreSQL connection ended");
            }
        });
        Ok(client)
    }

    /// A failure to connect, as what to fix.
    pub(super) fn explain(&self, e: &tokio_postgres::Error) -> String {
        let target = &self.name;
        if let Some(db) = e.as_db_error() {
            let code = db.code();
            if *code == SqlState::INVALID_PASSWORD
                || *code == SqlState::INVALID_AUTHORIZATION_SPECIFICATION
            {
                return format!(
                    "PostgreSQL at {target} refused user {:?}: {} (check the user and password in the database URL, and pg_hba.conf)",
                    self.user(),
                    db.message()
                );
            }
            if *code == SqlState::INVALID_CATALOG_NAME {
                return format!(
                    "PostgreSQL at {target}: the database {:?} does not exist (create it, e.g. `createdb -O {} {}`, or correct the database URL)",
                    self.database(),
                    self.user(),
                    self.database()
                );
            }
            return format!("PostgreSQL at {target}: {}", db.message());
        }
        let text = e.to_string();
        if text.starts_with("authentication error") || text.contains("password missing") {
            return format!(
                "PostgreSQL at {target} asks user {:?} for a password the database URL does not give ({text}): write postgres://USER:PASSWORD@HOST:PORT/DATABASE",
                self.user()
            );
        }
        let io = std::error::Error::source(e)
            .and_then(|s| s.downcast_ref::<std::io::Error>())
            .is_some();
        if io || text.starts_with("error connecting") || text.starts_with("timeout") {
            return format!(
                "cannot reach PostgreSQL at {target}: {text} (is it running, and are the host and port in the database URL right?)"
            );
        }
        format!("PostgreSQL at {target}: {text}")
    }
}

/// Whether `url` is a PostgreSQL URL Holdpoint can use; the error says what to write.
pub fn check_url(url: &str) -> Result<(), String> {
    Target::parse(url).map(|_| ())
}

/// `url` with its passwords hidden, fit to print: the one in the user information and a
/// `password` parameter of the query string (which tokio-postgres also reads). A URL that
/// cannot be read as one is not shown at all, since it may hold a password anywhere.
pub fn redact(url: &str) -> String {
    const HIDDEN: &str = "(hidden)";
    let Ok(mut parsed) = url::Url::parse(url) else {
        return "(a URL that cannot be read, not shown)".into();
    };
    if parsed.password().is_some() && parsed.set_password(Some(HIDDEN)).is_err() {
        return "(a URL that cannot be shown)".into();
    }
    if let Some(query) = parsed.query() {
        let shown: Vec<String> = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((key, _)) if key.eq_ignore_ascii_case("password") => format!("{key}={HIDDEN}"),
                _ => pair.to_owned(),
            })
            .collect();
        parsed.set_query(Some(&shown.join("&")));
    }
    parsed.to_string()
}

pub(super) fn sql_error(e: tokio_postgres::Error) -> StoreError {
    StoreError::new(format!("PostgreSQL: {e}"))
}

/// One connection and the statements prepared on it, by their text.
pub(super) struct Conn {
    pub(super) client: Client,
    statements: Mutex<HashMap<String, Statement>>,
}

pub(super) type Params<'a> = &'a [&'a (dyn ToSql + Sync)];

impl Conn {
    pub(super) fn new(client: Client) -> Conn {
        Conn {
            client,
            statements: Mutex::new(HashMap::new()),
        }
    }

    /// The statement for `sql`, prepared once per connection: a query is then one round
    /// trip, and PostgreSQL plans it once.
    pub(super) async fn statement(&self, sql: &str) -> Result<Statement, tokio_postgres::Error> {
        let cached = self.statements.lock().get(sql).cloned();
        if let Some(s) = cached {
            return Ok(s);
        }
        let s = self.client.prepare(sql).await?;
        self.statements.lock().insert(sql.to_owned(), s.clone());
        Ok(s)
    }

    pub(super) async fn query(
        &self,
        sql: &str,
        params: Params<'_>,
    ) -> Result<Vec<Row>, tokio_postgres::Error> {
        let s = self.statement(sql).await?;
        self.client.query(&s, params).await
    }

    pub(super) async fn query_opt(
        &self,
        sql: &str,
        params: Params<'_>,
    ) -> Result<Option<Row>, tokio_postgres::Error> {
        let s = self.statement(sql).await?;
        self.client.query_opt(&s, params).await
    }
}

/// The readers' connections. Each is shared by many reads at once (the driver pipelines
/// them), handed out in turn; one found closed is opened again, so reads recover by
/// themselves when the database comes back.
pub(super) struct Readers {
    target: Target,
    slots: Vec<tokio::sync::Mutex<Option<Arc<Conn>>>>,
    next: AtomicUsize,
}

impl Readers {
    pub(super) fn new(target: Target, size: usize) -> Readers {
        Readers {
            target,
            slots: (0..size).map(|_| tokio::sync::Mutex::new(None)).collect(),
            next: AtomicUsize::new(0),
        }
    }

    /// The next connection, opened if it is not.
    pub(super) async fn get(&self) -> Result<Arc<Conn>, StoreError> {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.slots.len();
        let mut slot = self.slots[i].lock().await;
        if let Some(c) = slot.as_ref().filter(|c| !c.client.is_closed()) {
            return Ok(c.clone());
        }
        *slot = None;
        let conn = Arc::new(Conn::new(
            self.target.connect().await.map_err(StoreError::new)?,
        ));
        *slot = Some(conn.clone());
        Ok(conn)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn passwords_are_hidden() {
        assert_eq!(
            redact("postgres://hp:s3cret@db.example:5433/holdpoint?sslmode=disable"),
            "postgres://hp:(hidden)@db.example:5433/holdpoint?sslmode=disable"
        );
        assert_eq!(
            redact("postgres://hp@db.example/holdpoint"),
            "postgres://hp@db.example/holdpoint"
        );
        assert_eq!(redact("postgres://db/x"), "postgres://db/x");
        // tokio-postgres reads a password from the query string too.
        let shown = redact("postgres://hp@db/x?sslmode=require&password=s3cret&Password=again");
        assert_eq!(
            shown,
            "postgres://hp@db/x?sslmode=require&password=(hidden)&Password=(hidden)"
        );
        let both = redact("postgresql://hp:one@db/x?password=two");
        assert!(!both.contains("one") && !both.contains("two"), "{both}");
        // What cannot be read is not shown.
        assert!(!redact("postgres://hp:s3cret@[bad/x").contains("s3cret"));
    }

    #[test]
    fn a_url_that_is_not_postgres_is_refused_saying_what_to_write() {
        let e = Target::parse("mysql://u:pw@h/d").err().unwrap();
        assert!(e.contains("postgres://USER:PASSWORD@HOST"), "{e}");
        assert!(!e.contains("pw"), "{e}");
        let t = Target::parse("postgres://u:pw@h:6543/d").ok().unwrap();
        assert_eq!(t.name, "h:6543/d");
    }
}
