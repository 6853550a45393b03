//! How the gateway reaches Holdpoint: raising a call's hold, waiting on it, withdrawing it.
//!
//! `holdpoint mcp` does it over the HTTP API with an agent's token ([`Client`]); the server,
//! which serves the same gateway at `/mcp/{world}`, does it in its own process on the engine,
//! as the agent whose token opened the MCP session. Either way the gateway asks exactly what
//! an agent may ask, and decides nothing.

use std::time::Duration;

use async_trait::async_trait;
use holdpoint_client::{Client, ClientError};
use holdpoint_core::store::{StoreError, Synced};
use holdpoint_protocol::{GateResponse, HoldId, NewHolds, WaitParams, WaitResult, Withdraw};

/// What the gateway asks of Holdpoint, as one agent.
#[async_trait]
pub trait Holdpoint: Send + Sync {
    /// Raises `new`'s items in `world` (by id or name) as one batch. `key` is the request's
    /// idempotency key: repeating it raises nothing twice.
    async fn raise(
        &self,
        world: &str,
        new: NewHolds,
        key: &str,
    ) -> Result<GateResponse, HoldpointError>;

    /// Like [`Holdpoint::raise`], but an allowed call may be answered once its record is
    /// written (it survives a crash of Holdpoint's process), before it is durable: the call
    /// may be forwarded then, and its result returned once [`Synced`] resolves. Holdpoint in
    /// this process does that, and so does a server over HTTP (its answer in two lines).
    async fn raise_written(
        &self,
        world: &str,
        new: NewHolds,
        key: &str,
    ) -> Result<(GateResponse, Synced), HoldpointError> {
        Ok((self.raise(world, new, key).await?, Synced::done()))
    }

    /// Waits at most `timeout` for hold `id` to be decided; the hold as it is then.
    async fn wait(&self, id: HoldId, timeout: Duration) -> Result<WaitResult, HoldpointError>;

    /// Withdraws hold `id` (it can no longer be decided), recording `reason`.
    async fn withdraw(&self, id: HoldId, reason: &str) -> Result<(), HoldpointError>;
}

/// A request to Holdpoint that failed, saying which and why.
#[derive(Debug, thiserror::Error)]
pub enum HoldpointError {
    /// The hold was decided before it could be withdrawn: it stays decided.
    #[error("hold {0} was already decided")]
    AlreadyDecided(HoldId),
    /// Holdpoint could not be reached, or is restarting or overloaded: the same request may
    /// succeed a moment later. `arrived`: the request may have reached Holdpoint and been
    /// acted on (the connection broke before the answer).
    #[error("{what} failed for now: {message}")]
    Unavailable {
        what: String,
        message: String,
        arrived: bool,
    },
    /// Holdpoint refused the call's item itself (422 naming `field` of it: arguments that
    /// do not match the tool's schema, say): the call's fault, not Holdpoint's.
    #[error("{field}: {message}")]
    Invalid { field: String, message: String },
    /// Holdpoint refused, or answered something unexpected.
    #[error("{what} failed: {message}")]
    Failed { what: String, message: String },
}

impl HoldpointError {
    /// A raise's refusal: `status` and the field it names. A 422 naming a field of the one
    /// item raised is [`HoldpointError::Invalid`]; anything else a failure.
    pub fn refused_raise(
        what: String,
        status: u16,
        field: Option<&str>,
        message: &str,
    ) -> HoldpointError {
        match field.and_then(|f| f.strip_prefix("items[0].").map(|rest| (f, rest))) {
            Some((whole, field)) if status == 422 => HoldpointError::Invalid {
                field: field.to_owned(),
                message: message
                    .strip_prefix(&format!("{whole}: "))
                    .unwrap_or(message)
                    .to_owned(),
            },
            _ => HoldpointError::Failed {
                what,
                message: message.to_owned(),
            },
        }
    }

    pub fn failed(what: impl Into<String>, message: impl Into<String>) -> HoldpointError {
        HoldpointError::Failed {
            what: what.into(),
            message: message.into(),
        }
    }
}

/// `e`, of the request that does `what`: [`HoldpointError::Unavailable`] when it may pass
/// (Holdpoint not reached, a restart say, or 429/502/503/504), else a failure.
fn passing(what: String, e: &ClientError) -> HoldpointError {
    let message = e.to_string();
    match e {
        ClientError::Unreachable { connected, .. } => HoldpointError::Unavailable {
            what,
            message,
            arrived: *connected,
        },
        ClientError::Api {
            status: 429 | 502 | 503 | 504,
            ..
        } => HoldpointError::Unavailable {
            what,
            message,
            arrived: false,
        },
        _ => HoldpointError::Failed { what, message },
    }
}

/// Why raising a hold in `world` failed.
fn raise_refused(world: &str, e: &ClientError) -> HoldpointError {
    let what = format!("raising a hold in world {world:?}");
    match e {
        ClientError::Api {
            status: status @ 422,
            message,
            details,
            ..
        } => HoldpointError::refused_raise(what, *status, details["field"].as_str(), message),
        _ => passing(what, e),
    }
}

/// Over the HTTP API, as the agent whose token the client carries.
#[async_trait]
impl Holdpoint for Client {
    async fn raise(
        &self,
        world: &str,
        new: NewHolds,
        key: &str,
    ) -> Result<GateResponse, HoldpointError> {
        Client::raise(self, world, &new, Some(key))
            .await
            .map_err(|e| raise_refused(world, &e))
    }

    /// The answer comes in two lines: the gate's once written, then whether it was synced.
    async fn raise_written(
        &self,
        world: &str,
        new: NewHolds,
        key: &str,
    ) -> Result<(GateResponse, Synced), HoldpointError> {
        let (response, syncing) = Client::raise_written(self, world, &new, Some(key))
            .await
            .map_err(|e| raise_refused(world, &e))?;
        let synced = Synced::until(async move {
            syncing
                .wait()
                .await
                .map_err(|e| StoreError::new(format!("making the call's record durable: {e}")))
        });
        Ok((response, synced))
    }

    async fn wait(&self, id: HoldId, timeout: Duration) -> Result<WaitResult, HoldpointError> {
        // The gateway waits until the hold is decided: should it die, the hold is withdrawn.
        let params = WaitParams {
            timeout: Some(format!("{}ms", timeout.as_millis())),
            attend: Some(true),
        };
        Client::wait(self, id, &params)
            .await
            .map_err(|e| passing(format!("waiting on hold {id}"), &e))
    }

    async fn withdraw(&self, id: HoldId, reason: &str) -> Result<(), HoldpointError> {
        let body = Withdraw {
            reason: Some(reason.into()),
        };
        match Client::withdraw(self, id, &body).await {
            Ok(_) => Ok(()),
            Err(e) if e.already_decided().is_some() => Err(HoldpointError::AlreadyDecided(id)),
            Err(e) => Err(HoldpointError::failed(
                format!("withdrawing hold {id}"),
                e.to_string(),
            )),
        }
    }
}
