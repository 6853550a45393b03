//! The writer's connection: commits on it are durable whatever the server's default, and it
//! is opened again, its statements prepared again, when it was lost.

use holdpoint_core::store::StoreError;
use tokio_postgres::{Client, SimpleQueryMessage};

use super::{Writer, statements};
use crate::pg::conn::Target;

/// The writer's connection and its backend's process id (whose notifications the tail
/// skips). Acknowledged commits must survive a crash of the database server, whatever the
/// server's default for `synchronous_commit`.
pub(in crate::pg) async fn connect(target: &Target) -> Result<(Client, i32), String> {
    let client = target.connect().await?;
    let messages = client
        .simple_query("SET synchronous_commit = on; SELECT pg_backend_pid()")
        .await
        .map_err(|e| target.explain(&e))?;
    let pid = messages
        .iter()
        .find_map(|m| match m {
            SimpleQueryMessage::Row(r) => r.get(0).and_then(|v| v.parse().ok()),
            _ => None,
        })
        .unwrap_or(0);
    Ok((client, pid))
}

impl Writer {
    /// The writer's connection, opened again if it was lost.
    pub(super) async fn client(&mut self) -> Result<&Client, StoreError> {
        if self.client.as_ref().is_none_or(Client::is_closed) {
            self.client = None;
            self.statements.clear();
            self.head = None;
            let (client, pid) = connect(&self.target).await.map_err(StoreError::new)?;
            self.publisher.set_writer_pid(pid);
            self.client = Some(client);
        }
        let client = self
            .client
            .as_ref()
            .ok_or_else(|| StoreError::new("no connection"))?;
        if self.statements.is_empty() {
            self.statements = statements::prepare(client).await?;
        }
        Ok(client)
    }
}
