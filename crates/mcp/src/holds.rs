//! Asking Holdpoint: raising one item as an agent, waiting for a hold's outcome while telling
//! the MCP client that it waits, and withdrawing what nobody waits for any more.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use holdpoint_core::store::Synced;
use holdpoint_protocol::{
    DecidedBy, GateResponse, GateResult, Hold, HoldId, HoldRequest, NewHolds, Outcome,
    OutcomeStatus, Source,
};
use parking_lot::Mutex;
use rmcp::RoleServer;
use rmcp::model::{
    JsonObject, MetaObject, NotificationMetaObject, ProgressNotificationParam, ProgressToken,
};
use rmcp::service::Peer;
use tokio::sync::{oneshot, watch};
use tokio_util::sync::CancellationToken;

use crate::reach::{Holdpoint, HoldpointError};

/// The reason recorded when a hold is withdrawn because its client went away.
pub const DISCONNECTED: &str = "the MCP client disconnected";

/// How long one long poll on a hold lasts: the interval of progress notifications.
const POLL: Duration = Duration::from_secs(15);

/// The first pause before waiting again on a Holdpoint that could not be reached; it doubles
/// up to [`RETRY_MAX`] while that lasts.
const RETRY_FIRST: Duration = Duration::from_millis(100);
const RETRY_MAX: Duration = Duration::from_secs(2);

/// How long a raise whose connection broke is sent again while Holdpoint cannot be reached.
const RAISE_PATIENCE: Duration = Duration::from_secs(120);

/// The error of a raise given up because the call was canceled or its client went away
/// while Holdpoint could not be reached.
fn stopped(message: &str) -> HoldpointError {
    HoldpointError::failed(
        "raising a hold",
        format!("{message}; the call ended before Holdpoint answered again"),
    )
}

/// What became of an asked item.
#[derive(Debug)]
pub enum Asked {
    /// Policy (a rule, a grant or the mode) allowed it. Its record is written; the call may
    /// be made now, and its result returned once the record is durable (`Synced`).
    Allowed(Synced),
    /// Policy denied it; the text says which rule or mode.
    Denied(String),
    /// The item was malformed; the text names the field.
    Invalid(String),
    /// A person (or the deadline) decided the hold.
    Decided(Box<Hold>),
    /// The client canceled the request or went away: the hold was withdrawn.
    Withdrawn,
}

/// What ends a wait early: the client canceled the request (or its task), or went away.
pub struct Stops {
    pub canceled: CancellationToken,
    /// The reason recorded when `canceled` withdraws the hold.
    pub canceled_why: &'static str,
    pub disconnected: CancellationToken,
    /// The process serving the gateway shuts down ([`STOPPED`]); first of the three, since
    /// shutting down ends the client's requests too.
    pub shutdown: CancellationToken,
}

/// The reason recorded when a hold is withdrawn because the gateway's process shuts down.
pub const STOPPED: &str = "the MCP gateway stopped: Holdpoint shut down while the call waited";

/// The reason recorded when a client cancels its call.
pub const CANCELED: &str = "the MCP client canceled the call";

/// Where progress notifications of a waiting call go.
pub struct Progress {
    pub peer: Peer<RoleServer>,
    pub token: ProgressToken,
    /// The notifications' `_meta`: a task's ties them to it.
    pub meta: Option<JsonObject>,
}

/// Holdpoint as the gateway's agent sees it: one world, the holds this gateway waits on.
pub struct Holds {
    holdpoint: Arc<dyn Holdpoint>,
    world: String,
    chat: Option<String>,
    /// Holds raised by this process that are still waited on: withdrawn when it stops.
    waiting: Mutex<HashSet<HoldId>>,
    /// Raises under way whose hold, if any, is not in `waiting` yet: [`Holds::withdraw_all`]
    /// lets them finish first, so that a hold committed just as the gateway stops is not
    /// left pending.
    raising: watch::Sender<usize>,
}

impl Holds {
    pub fn new(holdpoint: Arc<dyn Holdpoint>, world: String, chat: Option<String>) -> Holds {
        Holds {
            holdpoint,
            world,
            chat,
            waiting: Mutex::default(),
            raising: watch::Sender::new(0),
        }
    }

    /// Raises `item`, and when a hold is raised, tells `held` and waits for its outcome.
    /// Either of `stops` withdraws the hold.
    pub async fn ask(
        &self,
        item: HoldRequest,
        stops: &Stops,
        progress: Option<Progress>,
        held: Option<oneshot::Sender<Hold>>,
    ) -> Result<Asked, HoldpointError> {
        let body = NewHolds {
            chat: self.chat.clone(),
            items: vec![item],
        };
        let raising = Raising::new(&self.raising);
        let (response, synced) = match self.raise(body, stops).await {
            Ok(answered) => answered,
            Err(HoldpointError::Invalid { field, message }) => {
                return Ok(Asked::Invalid(invalid(&field, &message)));
            }
            Err(e) => return Err(e),
        };
        let Some(result) = response.results.into_iter().next() else {
            return Err(HoldpointError::failed(
                format!("raising a hold in world {:?}", self.world),
                "Holdpoint answered with no result",
            ));
        };
        match result {
            GateResult::Allowed { .. } => Ok(Asked::Allowed(synced)),
            GateResult::Denied { decided_by, .. } => Ok(Asked::Denied(match decided_by {
                DecidedBy::Rule { rule } => format!("denied by Holdpoint's policy ({rule})"),
                DecidedBy::Mode { mode } => format!("denied by Holdpoint's policy ({mode} mode)"),
                DecidedBy::Grant { grant } => format!("denied by Holdpoint (grant {grant})"),
            })),
            GateResult::Invalid { field, message } => Ok(Asked::Invalid(invalid(&field, &message))),
            GateResult::Held { hold } => {
                if let Some(held) = held {
                    let _ = held.send((*hold).clone());
                }
                self.wait(Arc::unwrap_or_clone(hold), stops, progress, raising)
                    .await
            }
        }
    }

    /// Raises `body`'s items. When the connection breaks after the request may have arrived
    /// (Holdpoint restarting under it, say), the hold may well exist: the same request is
    /// sent again, with the same idempotency key so that nothing is raised twice, until
    /// Holdpoint answers, for at most [`RAISE_PATIENCE`]. A server that was never reached
    /// fails at once.
    async fn raise(
        &self,
        body: NewHolds,
        stops: &Stops,
    ) -> Result<(GateResponse, Synced), HoldpointError> {
        let key = uuid::Uuid::now_v7().to_string();
        let since = Instant::now();
        let mut retry: Option<Duration> = None;
        loop {
            match self
                .holdpoint
                .raise_written(&self.world, body.clone(), &key)
                .await
            {
                Err(HoldpointError::Unavailable {
                    message, arrived, ..
                }) if (arrived || retry.is_some()) && since.elapsed() < RAISE_PATIENCE => {
                    let pause = retry.map_or(RETRY_FIRST, |p| (p * 2).min(RETRY_MAX));
                    if retry.is_none() {
                        tracing::warn!(error = %message, "Holdpoint went away while raising a hold; the same request is sent again once it answers");
                    }
                    retry = Some(pause);
                    tokio::select! {
                        biased;
                        () = stops.shutdown.cancelled() => return Err(stopped(&message)),
                        () = stops.disconnected.cancelled() => return Err(stopped(&message)),
                        () = stops.canceled.cancelled() => return Err(stopped(&message)),
                        () = tokio::time::sleep(pause) => {}
                    }
                }
                answered => return answered,
            }
        }
    }

    async fn wait(
        &self,
        hold: Hold,
        stops: &Stops,
        progress: Option<Progress>,
        raising: Raising<'_>,
    ) -> Result<Asked, HoldpointError> {
        let _registered = Registered::new(&self.waiting, hold.id);
        // Waited on now: a withdrawal of everything finds it.
        drop(raising);
        let mut step = 0u32;
        // The hold is durable: when Holdpoint cannot be reached (it restarts, say), the call
        // waits on, and takes the hold up again once it answers.
        let mut retry: Option<Duration> = None;
        loop {
            if let Some(p) = &progress {
                // Best effort: a client that cannot take the notification still gets the result.
                let message = format!(
                    "waiting for a person to decide hold {} in Holdpoint",
                    hold.id
                );
                let mut note = ProgressNotificationParam::new(p.token.clone(), f64::from(step))
                    .with_message(message);
                note.meta = p
                    .meta
                    .clone()
                    .map(|m| NotificationMetaObject(MetaObject(m)));
                let _ = p.peer.notify_progress(note).await;
                step += 1;
            }
            tokio::select! {
                // A client that goes away also has its requests canceled (the SDK cancels them
                // when its input ends, after the relay has told of the end): when both are
                // set, the client went away.
                biased;
                () = stops.shutdown.cancelled() => {
                    self.withdraw(hold.id, STOPPED).await;
                    return Ok(Asked::Withdrawn);
                }
                () = stops.disconnected.cancelled() => {
                    self.withdraw(hold.id, DISCONNECTED).await;
                    return Ok(Asked::Withdrawn);
                }
                () = stops.canceled.cancelled() => {
                    self.withdraw(hold.id, stops.canceled_why).await;
                    return Ok(Asked::Withdrawn);
                }
                waited = self.holdpoint.wait(hold.id, POLL) => match waited {
                    Ok(waited) => {
                        if retry.take().is_some() {
                            tracing::warn!(hold = %hold.id, "Holdpoint answers again: the call waits on its hold");
                        }
                        if waited.decided {
                            return Ok(Asked::Decided(Box::new(waited.hold)));
                        }
                    }
                    Err(HoldpointError::Unavailable { message, .. }) => {
                        let pause = retry.map_or(RETRY_FIRST, |p| (p * 2).min(RETRY_MAX));
                        if retry.is_none() {
                            tracing::warn!(hold = %hold.id, error = %message, "Holdpoint cannot be reached; the call keeps waiting on its hold");
                        }
                        retry = Some(pause);
                        tokio::select! {
                            biased;
                            () = stops.shutdown.cancelled() => {}
                            () = stops.disconnected.cancelled() => {}
                            () = stops.canceled.cancelled() => {}
                            () = tokio::time::sleep(pause) => {}
                        }
                    }
                    Err(e) => return Err(e),
                },
            }
        }
    }

    /// Withdraws a hold nobody waits for any more; one decided meanwhile stays decided.
    async fn withdraw(&self, id: HoldId, reason: &str) {
        match self.holdpoint.withdraw(id, reason).await {
            Ok(()) | Err(HoldpointError::AlreadyDecided(_)) => {}
            Err(e) => tracing::warn!(hold = %id, error = %e, "could not withdraw the hold"),
        }
    }

    /// Withdraws every hold still waited on (the client went away).
    pub async fn withdraw_all(&self, reason: &str) {
        // A raise under way may have committed its hold already: it is waited for (a little).
        let mut raising = self.raising.subscribe();
        let _ = tokio::time::timeout(RAISES_SETTLE, raising.wait_for(|n| *n == 0)).await;
        let ids: Vec<HoldId> = self.waiting.lock().drain().collect();
        for id in ids {
            self.withdraw(id, reason).await;
        }
    }
}

/// How long withdrawing everything waits for the raises under way.
const RAISES_SETTLE: Duration = Duration::from_secs(5);

/// A raise under way, counted in [`Holds::raising`] for as long as this lives.
struct Raising<'a>(&'a watch::Sender<usize>);

impl<'a> Raising<'a> {
    fn new(count: &'a watch::Sender<usize>) -> Raising<'a> {
        count.send_modify(|n| *n += 1);
        Raising(count)
    }
}

impl Drop for Raising<'_> {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}

/// A hold in the waiting set for as long as this lives.
struct Registered<'a> {
    set: &'a Mutex<HashSet<HoldId>>,
    id: HoldId,
}

impl<'a> Registered<'a> {
    fn new(set: &'a Mutex<HashSet<HoldId>>, id: HoldId) -> Registered<'a> {
        set.lock().insert(id);
        Registered { set, id }
    }
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.set.lock().remove(&self.id);
    }
}

/// Why Holdpoint refused a call's item (`field` of it), as the MCP client reads it.
fn invalid(field: &str, message: &str) -> String {
    format!("Holdpoint refused the call: {field} {message}")
}

/// Why an outcome is not an approval, as the MCP client (often an LLM) reads it.
pub fn refusal(outcome: &Outcome) -> String {
    let reason = outcome
        .reason
        .as_deref()
        .map(|r| format!(": {r}"))
        .unwrap_or_else(|| " (no reason given)".into());
    let who = outcome.decided_by.join(", ");
    match (outcome.status, outcome.source) {
        (OutcomeStatus::TimedOut, _) => {
            "no one decided in time: the hold's deadline passed and it timed out".into()
        }
        (_, Source::Default) => format!("denied by default, as no one could be asked{reason}"),
        (OutcomeStatus::Canceled, _) => format!("withdrawn{reason}"),
        (OutcomeStatus::Denied, Source::Person) => format!("denied by {who}{reason}"),
        (status, _) => format!("not approved ({status:?}){reason}"),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use async_trait::async_trait;
    use holdpoint_protocol::WaitResult;
    use serde_json::json;

    use super::*;

    /// Holdpoint whose first raises fail as `failures` says; records each raise's key.
    struct Flaky {
        failures: Mutex<Vec<HoldpointError>>,
        keys: Mutex<Vec<String>>,
    }

    #[async_trait]
    impl Holdpoint for Flaky {
        async fn raise(
            &self,
            _world: &str,
            _new: NewHolds,
            key: &str,
        ) -> Result<GateResponse, HoldpointError> {
            self.keys.lock().push(key.to_owned());
            if let Some(e) = self.failures.lock().pop() {
                return Err(e);
            }
            Ok(GateResponse {
                batch: None,
                results: vec![GateResult::Allowed {
                    digest: "d".into(),
                    decided_by: DecidedBy::Mode {
                        mode: "auto_approve".into(),
                    },
                }],
            })
        }

        async fn wait(&self, _: HoldId, _: Duration) -> Result<WaitResult, HoldpointError> {
            unreachable!("nothing is held")
        }

        async fn withdraw(&self, _: HoldId, _: &str) -> Result<(), HoldpointError> {
            Ok(())
        }
    }

    fn unavailable(arrived: bool) -> HoldpointError {
        HoldpointError::Unavailable {
            what: "raising a hold".into(),
            message: "connection closed before message completed".into(),
            arrived,
        }
    }

    async fn ask(failures: Vec<HoldpointError>) -> (Result<Asked, HoldpointError>, Vec<String>) {
        let flaky = Arc::new(Flaky {
            failures: Mutex::new(failures),
            keys: Mutex::default(),
        });
        let holds = Holds::new(flaky.clone(), "lab".into(), None);
        let item: HoldRequest =
            serde_json::from_value(json!({"kind": "approval", "tool": "t", "arguments": {}}))
                .unwrap();
        let stops = Stops {
            canceled: CancellationToken::new(),
            canceled_why: CANCELED,
            disconnected: CancellationToken::new(),
            shutdown: CancellationToken::new(),
        };
        let asked = holds.ask(item, &stops, None, None).await;
        let keys = flaky.keys.lock().clone();
        (asked, keys)
    }

    #[tokio::test]
    async fn a_raise_whose_connection_broke_is_sent_again_with_the_same_key() {
        // Holdpoint restarted under the request, then refused connections while it started.
        let (asked, keys) = ask(vec![unavailable(false), unavailable(true)]).await;
        assert!(matches!(asked, Ok(Asked::Allowed(_))), "{asked:?}");
        assert_eq!(keys.len(), 3);
        assert!(keys.iter().all(|k| *k == keys[0]), "one key: {keys:?}");
    }

    #[tokio::test]
    async fn a_raise_that_never_reached_holdpoint_fails_at_once() {
        let (asked, keys) = ask(vec![unavailable(false)]).await;
        assert!(
            matches!(asked, Err(HoldpointError::Unavailable { .. })),
            "{asked:?}"
        );
        assert_eq!(keys.len(), 1);
    }
}
