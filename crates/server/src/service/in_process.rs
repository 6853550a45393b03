//! The engine in this process behind the MCP gateway's two seams: [`Holdpoint`] (raising,
//! waiting on and withdrawing holds, as an agent) and [`Decider`] (deciding them, as the
//! person who answers a session's elicitations). The gateway of `/mcp/{world}` and the one
//! `holdpoint mcp` runs on stdio in the server's own process ask through these, with the same
//! service functions the API's routes call, without an HTTP exchange per call.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use holdpoint_core::store::Synced;
use holdpoint_mcp::{Approver, Decider, Holdpoint, HoldpointError};
use holdpoint_protocol::{DecideOutcome, Decision, GateResponse, HoldId, NewHolds, WaitResult};

use super::{RAISERS, holds};
use crate::app::App;
use crate::auth::Caller;
use crate::error::ApiError;

/// The person whose token is `token`, as the approver who answers an MCP session's
/// elicitations: a person's valid token, else refused (401 for a token that is not one, 403
/// for an agent's).
pub async fn approver(app: &App, token: &str) -> Result<Approver, ApiError> {
    let Some(person) = app.credentials().by_token(token).await? else {
        return Err(ApiError::unauthorized("the token is not valid"));
    };
    if !holdpoint_core::roles::may_decide(person.principal.role) {
        return Err(ApiError::forbidden(
            "an approver's or an admin's token is needed; agents never decide holds",
        ));
    }
    let name = person.principal.name.clone();
    Ok(Approver::new(
        name,
        Arc::new(AsPerson {
            app: app.clone(),
            person,
        }),
    ))
}

/// The engine in this process as the agent whose token opened an HTTP session (the API's
/// guard checks that token at each request).
pub fn as_session(app: &App, caller: &Caller) -> Arc<dyn Holdpoint> {
    Arc::new(AsAgent {
        app: app.clone(),
        who: Who::Session(caller.clone()),
    })
}

/// The engine in this process, as the person whose token came with the session: what the
/// client's user answers in an elicitation, decided as a decision through the API would be.
struct AsPerson {
    app: App,
    person: Caller,
}

#[async_trait]
impl Decider for AsPerson {
    async fn decide(
        &self,
        id: HoldId,
        decision: Decision,
        via: &str,
        key: &str,
    ) -> Result<DecideOutcome, HoldpointError> {
        let failed = |m: String| HoldpointError::failed(format!("deciding hold {id}"), m);
        holdpoint_core::limits::via("via", via).map_err(|e| failed(e.to_string()))?;
        let who = self.person.principal.clone().via(Some(via.to_owned()));
        let scope = self.person.scope();
        match self
            .app
            .engine()
            .decide(&who, id, decision, &scope, Some(key))
            .await
        {
            Ok(result) => Ok(result.result),
            Err(holdpoint_core::EngineError::AlreadyDecided { .. }) => {
                Err(HoldpointError::AlreadyDecided(id))
            }
            Err(e) => Err(failed(e.to_string())),
        }
    }
}

/// The engine in this process as the holder of `token`, for an MCP gateway on stdio in the
/// process that runs Holdpoint itself (`holdpoint mcp` with no server running): it asks as
/// the sessions of `/mcp/{world}` do, through the API handlers' own functions, without an
/// HTTP exchange per call. The token must be one that may raise holds through the API (an
/// agent's or an admin's), and it is checked again at each call, as the API checks it at
/// each request: a token revoked meanwhile raises nothing more, and each call counts as a
/// request against `limits.requests_per_second`.
pub async fn in_process(app: &App, token: &str) -> Result<Arc<dyn Holdpoint>, ApiError> {
    let caller = token_caller(app, token).await?;
    caller.require(RAISERS)?;
    Ok(Arc::new(AsAgent {
        app: app.clone(),
        who: Who::Token(token.to_owned()),
    }))
}

async fn token_caller(app: &App, token: &str) -> Result<Caller, ApiError> {
    app.credentials()
        .by_token(token)
        .await?
        .ok_or_else(|| ApiError::unauthorized("the token is unknown or revoked"))
}

/// The engine in this process, as the agent whose token opened the session (or who holds
/// the token): what the API's handlers do for that token, through the same functions.
struct AsAgent {
    app: App,
    who: Who,
}

enum Who {
    /// An HTTP session's opener, whose token the API's guard checks at each request.
    Session(Caller),
    /// A token checked and counted at each call (no guard stands before a gateway on stdio).
    Token(String),
}

impl AsAgent {
    async fn caller(&self, what: impl Fn() -> String) -> Result<Caller, HoldpointError> {
        match &self.who {
            Who::Session(caller) => Ok(caller.clone()),
            Who::Token(token) => {
                let caller = token_caller(&self.app, token)
                    .await
                    .map_err(|e| HoldpointError::failed(what(), e.message))?;
                caller
                    .require(RAISERS)
                    .and_then(|()| self.app.limiter().count(&caller))
                    .map_err(|e| HoldpointError::failed(what(), e.message))?;
                Ok(caller)
            }
        }
    }
}

#[async_trait]
impl Holdpoint for AsAgent {
    async fn raise(
        &self,
        world: &str,
        new: NewHolds,
        key: &str,
    ) -> Result<GateResponse, HoldpointError> {
        let (response, synced) = self.raise_written(world, new, key).await?;
        synced.wait().await.map_err(|e| {
            HoldpointError::failed(format!("raising a hold in world {world:?}"), e.to_string())
        })?;
        Ok(response)
    }

    async fn raise_written(
        &self,
        world: &str,
        new: NewHolds,
        key: &str,
    ) -> Result<(GateResponse, Synced), HoldpointError> {
        let what = || format!("raising a hold in world {world:?}");
        let caller = self.caller(what).await?;
        holds::raise_written(&self.app, &caller, world, new, Some(key.to_owned()))
            .await
            .map_err(|e| {
                HoldpointError::refused_raise(
                    what(),
                    e.status.as_u16(),
                    e.details.as_ref().and_then(|d| d["field"].as_str()),
                    &e.message,
                )
            })
    }

    async fn wait(&self, id: HoldId, timeout: Duration) -> Result<WaitResult, HoldpointError> {
        let what = || format!("waiting on hold {id}");
        let caller = self.caller(what).await?;
        holds::wait(&self.app, &caller, id, timeout, true)
            .await
            .map_err(|e| HoldpointError::failed(what(), e.message))
    }

    async fn withdraw(&self, id: HoldId, reason: &str) -> Result<(), HoldpointError> {
        let caller = self.caller(|| format!("withdrawing hold {id}")).await?;
        match holds::withdraw(&self.app, &caller, id, Some(reason.to_owned())).await {
            Ok(_) => Ok(()),
            Err(e) if e.code == "already_decided" => Err(HoldpointError::AlreadyDecided(id)),
            Err(e) => Err(HoldpointError::failed(
                format!("withdrawing hold {id}"),
                e.message,
            )),
        }
    }
}
