//! Deciding, withdrawing and revoking: optimistic updates with idempotency keys.

use holdpoint_protocol::{
    Actor, BatchId, DecideBatchRequest, DecideBatchResult, DecideOutcome, DecideResult, Decision,
    EventPayload, Grant, GrantId, Hold, HoldId, Principal, Role, Timestamp,
};
use serde::Serialize;
use serde::de::DeserializeOwned;

use std::sync::Arc;

use super::{Engine, MAX_ATTEMPTS, Scope, Updated};
use crate::audit::EventDraft;
use crate::canonical;
use crate::error::EngineError;
use crate::hold::{self, Transition, check_name};
use crate::roles;
use crate::store::{CommitError, Conflict, PreparedEvent, Transaction, Write};

/// An idempotency key, scoped to the operation and the caller, with the request's digest.
pub(crate) struct Idem {
    key: String,
    fingerprint: String,
}

impl Idem {
    pub(crate) fn new(
        limits: &crate::limits::Limits,
        op: &str,
        who: &Principal,
        key: Option<&str>,
        request: &impl Serialize,
    ) -> Result<Option<Idem>, EngineError> {
        let Some(key) = key else { return Ok(None) };
        check_name("idempotency_key", key, limits.idempotency_key)?;
        let value = serde_json::to_value(request)
            .map_err(|e| EngineError::invalid("invalid_input", "", e.to_string()))?;
        Ok(Some(Idem {
            key: format!("{op}:{}:{key}", who.name),
            fingerprint: canonical::digest(&value),
        }))
    }

    pub(crate) fn record(
        &self,
        response: &impl Serialize,
        at: Timestamp,
    ) -> Result<Write, EngineError> {
        let response = serde_json::to_value(response)
            .map_err(|e| EngineError::Store(crate::store::StoreError::new(e)))?;
        Ok(Write::PutIdempotent {
            key: self.key.clone(),
            fingerprint: self.fingerprint.clone(),
            response,
            at,
        })
    }
}

/// What a batch decision's idempotency key is bound to: the batch with the body, as it has
/// always been fingerprinted (`{batch, seen, decision}`), so a key recorded by an earlier
/// version still replays when the same request is retried.
#[derive(Serialize)]
struct BatchFingerprint<'a> {
    batch: BatchId,
    #[serde(flatten)]
    req: &'a DecideBatchRequest,
}

const KEY_TAKEN: &str = "idempotency_key_taken";

fn transaction(t: Transition) -> Transaction {
    let mut writes = vec![Write::UpdateHold(Arc::new(t.hold))];
    writes.extend(
        t.grants
            .into_iter()
            .map(|g| Write::InsertGrant(Box::new(g))),
    );
    Transaction {
        writes,
        events: t.events.into_iter().map(PreparedEvent::from).collect(),
    }
}

pub(crate) fn commit_error(e: CommitError) -> EngineError {
    match e {
        CommitError::Store(e) => match e.space_short() {
            Some(short) => EngineError::StorageFull(short),
            None => EngineError::Store(e),
        },
        CommitError::Conflict(Conflict::KeyTaken(k)) => EngineError::conflict(KEY_TAKEN, k),
        CommitError::Conflict(c) => EngineError::conflict("conflict", c.to_string()),
    }
}

/// What an attempt at a request under an idempotency key came to ([`Engine::once`]).
pub(crate) enum Attempt<T> {
    /// Committed, with the key's record: the answer.
    Committed(T),
    /// Nothing was committed: the answer, unless the key was used before.
    Uncommitted(T),
}

impl Engine {
    /// Answers a request under idempotency key `idem` by attempting it, reading nothing
    /// first: a first attempt, nearly every request, costs no read of the key. A key used
    /// before is refused by the commit ([`Conflict::KeyTaken`]), and whenever nothing was
    /// committed, error or not, the key's record is read then: a repeat is answered as the
    /// first time was, whatever attempting it again came to (the hold decided meanwhile, the
    /// caps reached, the policy changed). `replayed` makes the recorded response an answer.
    pub(crate) async fn once<T, R: DeserializeOwned>(
        &self,
        idem: Option<&Idem>,
        attempt: impl Future<Output = Result<Attempt<T>, EngineError>>,
        replayed: impl FnOnce(R) -> T,
    ) -> Result<T, EngineError> {
        let uncommitted = match attempt.await {
            Ok(Attempt::Committed(answer)) => return Ok(answer),
            Ok(Attempt::Uncommitted(answer)) => Ok(answer),
            Err(e) => Err(e),
        };
        match self.replay(idem).await? {
            Some(r) => Ok(replayed(r)),
            // The key's record was forgotten between the commit's refusal and this read.
            None => uncommitted.map_err(|e| {
                if e.code() == KEY_TAKEN {
                    EngineError::Busy
                } else {
                    e
                }
            }),
        }
    }

    /// The response recorded under an idempotency key, if the key was used before.
    pub(crate) async fn replay<R: DeserializeOwned>(
        &self,
        idem: Option<&Idem>,
    ) -> Result<Option<R>, EngineError> {
        let Some(idem) = idem else { return Ok(None) };
        match self.inner.store.idempotent(&idem.key).await? {
            None => Ok(None),
            Some(rec) if rec.fingerprint == idem.fingerprint => {
                serde_json::from_value(rec.response)
                    .map(Some)
                    .map_err(|e| EngineError::Store(crate::store::StoreError::new(e)))
            }
            Some(_) => Err(EngineError::conflict(
                "idempotency_mismatch",
                "this idempotency key was already used for a different request",
            )),
        }
    }

    /// Reads a hold, computes a change with `f`, and commits it at the version read; when
    /// another change got there first, reads again and recomputes.
    pub(crate) async fn update<R: Serialize>(
        &self,
        id: HoldId,
        scope: &Scope,
        idem: Option<&Idem>,
        mut f: impl FnMut(&Hold, Timestamp) -> Result<Option<(Transition, R)>, EngineError>,
    ) -> Result<Updated<R>, EngineError> {
        // The first attempt may start from the hold as this node last wrote it. Only a commit
        // is trusted from such a hint (the store checks its version): an answer computed from
        // it, error or "nothing to do", is computed again from the store.
        let mut hint = self.inner.recent.lock().get(id).filter(|h| scope.admits(h));
        for _ in 0..MAX_ATTEMPTS {
            let (hold, from_hint) = match hint.take() {
                Some(h) => (h, true),
                None => (Arc::new(self.hold(id, scope).await?), false),
            };
            let now = self.now();
            let (t, r) = match f(&hold, now) {
                Ok(Some(change)) => change,
                _ if from_hint => continue,
                Ok(None) => return Ok(Updated::Unchanged(Arc::unwrap_or_clone(hold))),
                Err(e) => return Err(e),
            };
            let after = t.hold.clone();
            let mut tx = transaction(t);
            if let Some(idem) = idem {
                tx.writes.push(idem.record(&r, now)?);
            }
            match self.commit(tx).await {
                Ok(_) => return Ok(Updated::Applied(after, r)),
                Err(CommitError::Conflict(Conflict::StaleHold(_))) => {
                    self.inner.recent.lock().forget(id);
                    continue;
                }
                Err(e) => return Err(commit_error(e)),
            }
        }
        Err(EngineError::Busy)
    }

    /// Decides one hold. The first valid decision wins; a later one gets
    /// [`EngineError::AlreadyDecided`] with the recorded decision. Repeating a decision with
    /// the same idempotency key returns the first result.
    pub async fn decide(
        &self,
        who: &Principal,
        id: HoldId,
        decision: Decision,
        scope: &Scope,
        idempotency_key: Option<&str>,
    ) -> Result<DecideResult, EngineError> {
        let limits = &self.inner.limits;
        let op = format!("decide:{id}");
        self.resolve(
            who,
            id,
            scope,
            (&op, idempotency_key, &decision),
            |h, now| hold::decide(h, who, &decision, now, &self.policy_for(&h.world).0, limits),
        )
        .await
    }

    /// Applies the fail-closed default on behalf of `who`, whose client cannot ask anyone
    /// (see [`hold::fail_closed`]). Like a decision, it loses to one recorded first, and
    /// repeating it with the same idempotency key returns the first result.
    pub async fn decide_default(
        &self,
        who: &Principal,
        id: HoldId,
        reason: Option<String>,
        scope: &Scope,
        idempotency_key: Option<&str>,
    ) -> Result<DecideResult, EngineError> {
        let limits = &self.inner.limits;
        let op = format!("default:{id}");
        self.resolve(who, id, scope, (&op, idempotency_key, &reason), |h, now| {
            hold::fail_closed(h, who, reason.clone(), now, limits)
        })
        .await
    }

    /// Commits the change `f` computes for one hold, under the idempotency key `(operation,
    /// key, request)`.
    async fn resolve(
        &self,
        who: &Principal,
        id: HoldId,
        scope: &Scope,
        (op, key, request): (&str, Option<&str>, &impl Serialize),
        mut f: impl FnMut(&Hold, Timestamp) -> Result<hold::Decided, EngineError>,
    ) -> Result<DecideResult, EngineError> {
        let idem = Idem::new(&self.inner.limits, op, who, key, request)?;
        let attempt = async {
            let result = self
                .update(id, scope, idem.as_ref(), |h, now| {
                    let (t, result) = f(h, now)?;
                    let r = DecideResult {
                        result,
                        hold: t.hold.clone(),
                    };
                    Ok(Some((t, r)))
                })
                .await?;
            match result {
                Updated::Applied(_, r) => Ok(Attempt::Committed(r)),
                Updated::Unchanged(_) => Err(EngineError::Busy),
            }
        };
        self.once(idem.as_ref(), attempt, |r| r).await
    }

    /// "Decide all": one approve / deny / deny-and-stop for every approval of a batch, bound
    /// to the holds the person saw. Refused whole if the batch differs from what was seen or
    /// if any open hold refuses the decision; holds decided before are left as they are.
    pub async fn decide_batch(
        &self,
        who: &Principal,
        batch: BatchId,
        req: DecideBatchRequest,
        scope: &Scope,
        idempotency_key: Option<&str>,
    ) -> Result<DecideBatchResult, EngineError> {
        if !matches!(
            req.decision,
            Decision::Approve { .. } | Decision::Deny { .. } | Decision::DenyStop { .. }
        ) {
            return Err(EngineError::invalid(
                "invalid_input",
                "decision.action",
                "deciding a whole batch takes approve, deny or deny_stop",
            ));
        }
        let idem = Idem::new(
            &self.inner.limits,
            &format!("batch:{batch}"),
            who,
            idempotency_key,
            &BatchFingerprint { batch, req: &req },
        )?;
        let attempt = self.decide_batch_once(batch, &req, scope, who, idem.as_ref());
        self.once(idem.as_ref(), attempt, |r| r).await
    }

    async fn decide_batch_once(
        &self,
        batch: BatchId,
        req: &DecideBatchRequest,
        scope: &Scope,
        who: &Principal,
        idem: Option<&Idem>,
    ) -> Result<Attempt<DecideBatchResult>, EngineError> {
        for _ in 0..MAX_ATTEMPTS {
            let holds = self.batch_in_scope(batch, scope).await?;
            // The holds the decision is for: those of the kind that offers it (approvals).
            let approvals: Vec<&Hold> = holds
                .iter()
                .filter(|h| h.kind() == req.decision.kind().hold_kind())
                .collect();
            check_seen(&approvals, req)?;
            let now = self.now();
            let mut tx = Transaction::default();
            let mut results = Vec::with_capacity(approvals.len());
            for h in approvals {
                if !h.is_open() {
                    results.push(DecideResult {
                        result: DecideOutcome::AlreadyDecided,
                        hold: h.clone(),
                    });
                    continue;
                }
                let policy = self.policy_for(&h.world).0;
                let (t, result) =
                    hold::decide(h, who, &req.decision, now, &policy, &self.inner.limits)?;
                results.push(DecideResult {
                    result,
                    hold: t.hold.clone(),
                });
                let part = transaction(t);
                tx.writes.extend(part.writes);
                tx.events.extend(part.events);
            }
            let response = DecideBatchResult { holds: results };
            if tx.writes.is_empty() {
                return Ok(Attempt::Uncommitted(response));
            }
            if let Some(idem) = idem {
                tx.writes.push(idem.record(&response, now)?);
            }
            match self.commit(tx).await {
                Ok(_) => return Ok(Attempt::Committed(response)),
                Err(CommitError::Conflict(Conflict::StaleHold(_))) => continue,
                Err(e) => return Err(commit_error(e)),
            }
        }
        Err(EngineError::Busy)
    }

    async fn batch_in_scope(&self, id: BatchId, scope: &Scope) -> Result<Vec<Hold>, EngineError> {
        let holds: Vec<Hold> = self
            .inner
            .store
            .batch(id)
            .await?
            .into_iter()
            .filter(|h| scope.admits(h))
            .collect();
        if holds.is_empty() {
            return Err(EngineError::NotFound {
                what: "batch",
                id: id.to_string(),
            });
        }
        Ok(holds)
    }

    /// Withdraws a hold: by the agent that raised it, or by an admin. Its outcome is
    /// `canceled`; it can no longer be decided.
    pub async fn withdraw(
        &self,
        who: &Principal,
        id: HoldId,
        reason: Option<String>,
        scope: &Scope,
    ) -> Result<Hold, EngineError> {
        if let Some(r) = &reason {
            check_name("reason", r, self.inner.limits.reason)?;
        }
        let result = self
            .update(id, scope, None, |h, now| {
                if who.role != Role::Admin && h.requested_by != who.name {
                    return Err(EngineError::Forbidden(
                        "only the agent that raised a hold (or an admin) may withdraw it".into(),
                    ));
                }
                if !h.is_open() {
                    return Err(EngineError::AlreadyDecided {
                        hold: Box::new(h.clone()),
                    });
                }
                Ok(hold::withdraw(h, roles::actor_of(who), reason.clone(), now).map(|t| (t, ())))
            })
            .await?;
        match result {
            Updated::Applied(h, ()) | Updated::Unchanged(h) => Ok(h),
        }
    }

    /// Withdraws every open hold of a batch on behalf of `by` (who cancelled its turn, or
    /// Holdpoint itself when the turn ended otherwise). Returns the holds it withdrew.
    pub async fn withdraw_batch(
        &self,
        batch: BatchId,
        by: &Actor,
        reason: &str,
    ) -> Result<Vec<Hold>, EngineError> {
        let mut withdrawn = Vec::new();
        for h in self.inner.store.batch(batch).await? {
            if !h.is_open() {
                continue;
            }
            if let Some(h) = self.withdraw_by(h.id, by, reason).await? {
                withdrawn.push(h);
            }
        }
        Ok(withdrawn)
    }

    /// Withdraws hold `id` on behalf of `by` (Holdpoint itself, say), whoever raised it; the
    /// hold withdrawn, or `None` when it was resolved already.
    pub async fn withdraw_by(
        &self,
        id: HoldId,
        by: &Actor,
        reason: &str,
    ) -> Result<Option<Hold>, EngineError> {
        let r = self
            .update(id, &Scope::any(), None, |h, now| {
                if !h.is_open() {
                    return Err(EngineError::AlreadyDecided {
                        hold: Box::new(h.clone()),
                    });
                }
                Ok(hold::withdraw(h, by.clone(), Some(reason.to_owned()), now).map(|t| (t, ())))
            })
            .await;
        match r {
            Ok(Updated::Applied(h, ())) => Ok(Some(h)),
            Ok(Updated::Unchanged(_)) | Err(EngineError::AlreadyDecided { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Revokes a grant (people only). Calls it allowed are asked again.
    pub async fn revoke_grant(
        &self,
        who: &Principal,
        id: GrantId,
        scope: &Scope,
    ) -> Result<Grant, EngineError> {
        if !roles::may_decide(who.role) {
            return Err(EngineError::Forbidden(
                "agent credentials cannot revoke grants".into(),
            ));
        }
        let not_found = || EngineError::NotFound {
            what: "grant",
            id: id.to_string(),
        };
        let grant = self.inner.store.grant(id).await?.ok_or_else(not_found)?;
        if scope.world.as_ref().is_some_and(|w| *w != grant.world) {
            return Err(not_found());
        }
        if grant.revoked_at.is_some() {
            return Err(EngineError::conflict(
                "already_revoked",
                format!("grant {id} is already revoked"),
            ));
        }
        let now = self.now();
        let event = EventDraft {
            at: now,
            world: Some(grant.world.clone()),
            chat: grant.chat.clone(),
            hold: None,
            actor: roles::actor_of(who),
            payload: EventPayload::GrantRevoked { grant: id },
        };
        let tx = Transaction {
            writes: vec![Write::RevokeGrant { id, at: now }],
            events: vec![event.into()],
        };
        match self.commit(tx).await {
            Ok(_) => Ok(Grant {
                revoked_at: Some(now),
                ..grant
            }),
            Err(CommitError::Conflict(Conflict::NoSuchGrant(_))) => Err(EngineError::conflict(
                "already_revoked",
                format!("grant {id} is already revoked"),
            )),
            Err(e) => Err(commit_error(e)),
        }
    }
}

/// The approvals of the batch must be exactly those seen, with the arguments seen.
fn check_seen(approvals: &[&Hold], req: &DecideBatchRequest) -> Result<(), EngineError> {
    let mismatch = |message: String| EngineError::conflict("batch_mismatch", message);
    for (i, s) in req.seen.iter().enumerate() {
        if req.seen[..i].iter().any(|o| o.hold == s.hold) {
            return Err(mismatch(format!(
                "hold {} is listed twice in `seen`",
                s.hold
            )));
        }
        match approvals.iter().find(|h| h.id == s.hold) {
            None => {
                return Err(mismatch(format!(
                    "hold {} is not an approval of this batch",
                    s.hold
                )));
            }
            Some(h) if h.digest() != Some(s.digest.as_str()) => {
                return Err(mismatch(format!(
                    "the arguments of hold {} differ from those seen",
                    s.hold
                )));
            }
            Some(_) => {}
        }
    }
    if let Some(unseen) = approvals
        .iter()
        .find(|h| !req.seen.iter().any(|s| s.hold == h.id))
    {
        return Err(mismatch(format!(
            "the batch has an approval that was not seen (hold {}): show the whole batch again",
            unseen.id
        )));
    }
    Ok(())
}
