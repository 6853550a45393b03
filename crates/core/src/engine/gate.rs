//! The gate: policy (with grants) decides each requested call; what must be asked becomes a
//! hold, and the holds of one request form one batch. One commit records everything.

use std::sync::Arc;

use holdpoint_protocol::{
    Actor, ApprovalRequest, AskInfo, BatchId, DecidedBy, EventPayload, Explanation, GateRequest,
    GateResponse, GateResult, Hold, HoldRequest, LineageStep, MatchedRule, PolicyLayer, Principal,
    Source,
};

use super::decide::{Attempt, Idem, commit_error};
use super::open::PendingLimit;
use super::{Answered, Engine};
use crate::audit::EventDraft;
use crate::canonical;
use crate::error::{EngineError, ValidationError};
use crate::hold::{
    self, HoldContext, check_held_arguments, check_name, validate_approval, validate_question,
};
use crate::policy::{Action, Call, Policy};
use crate::roles;
use crate::store::{PreparedEvent, Synced, Transaction, Write};

/// What decides a call: the strictest rule, except that a grant allows what a rule would ask.
struct CallDecision {
    action: Action,
    decided_by: DecidedBy,
    /// The rule whose ask settings apply, when the call is asked.
    ask_rule: Option<usize>,
    /// Asked only because the request always asks: policy alone would allow it.
    forced: bool,
}

/// What Holdpoint's own agents say beside a gate request ([`Engine::gate_as_agent`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct AgentAsking<'a> {
    /// Item `i`'s reason to always ask (creating an agent always needs a person), shown on its
    /// hold where policy alone would have allowed the call.
    pub because: &'a [Option<String>],
    /// A sub-agent's lineage, set on its holds (`Hold::lineage`); the request's chat is the
    /// conversation's, the first step's.
    pub lineage: &'a [LineageStep],
}

impl Engine {
    #[allow(clippy::too_many_arguments)]
    fn decide_call(
        &self,
        policy: &Policy,
        world: &str,
        chat: Option<&str>,
        call: &Call<'_>,
        digest: &str,
        always_ask: bool,
        now: holdpoint_protocol::Timestamp,
    ) -> CallDecision {
        let eval = policy.evaluate(call);
        let decided_by = policy.decided_by(&eval);
        let ask_rule = eval.rule.filter(|_| eval.action == Action::Ask);
        if eval.action == Action::Deny {
            return CallDecision {
                action: Action::Deny,
                decided_by,
                ask_rule: None,
                forced: false,
            };
        }
        if always_ask {
            return CallDecision {
                action: Action::Ask,
                decided_by,
                ask_rule,
                forced: eval.action == Action::Allow,
            };
        }
        if let Some(grant) = self
            .inner
            .grants
            .read()
            .find(world, chat, call.tool, digest, now)
        {
            return CallDecision {
                action: Action::Allow,
                decided_by: DecidedBy::Grant { grant },
                ask_rule: None,
                forced: false,
            };
        }
        CallDecision {
            action: eval.action,
            decided_by,
            ask_rule,
            forced: false,
        }
    }

    /// Whether policy denies a call in `world`: `Some` with what denied it (a rule of either
    /// layer, locked or not, or the mode `auto_deny`). For calls a person is asked about in
    /// another way than an approval — a question, a skill to load — whose tools policy
    /// governs all the same: the caller refuses a denied call before it asks anyone or
    /// honours an earlier "yes", as the gate refuses a denied approval before it looks at
    /// grants.
    pub fn screen(&self, world: &str, call: &Call<'_>) -> Option<DecidedBy> {
        let (policy, _) = self.policy_for(world);
        let eval = policy.evaluate(call);
        (eval.action == Action::Deny).then(|| policy.decided_by(&eval))
    }

    /// What would be decided for a call in `world` / `chat`, and why (rules, grants, mode).
    pub fn explain(&self, world: &str, chat: Option<&str>, call: &Call<'_>) -> Explanation {
        let (policy, _) = self.policy_for(world);
        let digest = canonical::digest(call.arguments);
        let d = self.decide_call(&policy, world, chat, call, &digest, false, self.now());
        let (eval, matched) = policy.explain(call);
        let layer = match d.decided_by {
            DecidedBy::Grant { .. } => PolicyLayer::World,
            _ => policy.layer_of(eval.rule),
        };
        let matched = matched
            .into_iter()
            .map(|m| MatchedRule {
                rule: m.rule,
                action: m.action.verdict(),
            })
            .collect();
        let ask = (d.action == Action::Ask).then(|| {
            let s = policy.ask_settings(call.tool, d.ask_rule);
            AskInfo {
                rule: s.rule,
                deadline: s.deadline,
                on_timeout: s.on_timeout,
                approvers: s.approvers,
                quorum: s.quorum,
                offers: s.offers,
            }
        });
        Explanation {
            decision: d.action.verdict(),
            decided_by: d.decided_by,
            layer,
            matched,
            ask,
        }
    }

    /// Decides every item of a request: allowed and denied calls are answered at once (and
    /// recorded); calls to ask and questions become holds of one batch. Items that are
    /// malformed come back `invalid` and raise nothing.
    pub async fn gate(
        &self,
        who: &Principal,
        req: GateRequest,
    ) -> Result<GateResponse, EngineError> {
        self.gate_items(who, req, false, AgentAsking::default(), Answered::Durable)
            .await
            .map(|(response, _done)| response)
    }

    /// Like [`Engine::gate`], for Holdpoint's own agents, with what only they may say (an API
    /// caller cannot): why they always ask for some calls, and the lineage of a sub-agent.
    pub async fn gate_as_agent(
        &self,
        who: &Principal,
        req: GateRequest,
        asking: AgentAsking<'_>,
    ) -> Result<GateResponse, EngineError> {
        self.gate_items(who, req, false, asking, Answered::Durable)
            .await
            .map(|(response, _done)| response)
    }

    /// Like [`Engine::gate`], but all or nothing: when any item is malformed, nothing is
    /// raised or recorded and the error names that item's field (for clients that send
    /// requests themselves, rather than relaying an LLM's calls).
    pub async fn gate_all(
        &self,
        who: &Principal,
        req: GateRequest,
    ) -> Result<GateResponse, EngineError> {
        self.gate_items(who, req, true, AgentAsking::default(), Answered::Durable)
            .await
            .map(|(response, _done)| response)
    }

    /// Like [`Engine::gate_all`], but a request whose every item is allowed is answered once
    /// its record is written (it survives a crash of this process), before it is durable: the
    /// [`Synced`] returned resolves once it is. For the MCP gateway, which forwards the
    /// allowed call meanwhile and answers its client only after the sync, so that the fsync
    /// overlaps the upstream's work. Anything else (a denial, a hold) is answered durable.
    pub async fn gate_all_written(
        &self,
        who: &Principal,
        req: GateRequest,
    ) -> Result<(GateResponse, Synced), EngineError> {
        self.gate_items(who, req, true, AgentAsking::default(), Answered::Written)
            .await
    }

    async fn gate_items(
        &self,
        who: &Principal,
        req: GateRequest,
        all_or_nothing: bool,
        asking: AgentAsking<'_>,
        answered: Answered,
    ) -> Result<(GateResponse, Synced), EngineError> {
        let limits = &self.inner.limits;
        check_name("world", &req.world, limits.name)?;
        for (field, value) in [("chat", &req.chat), ("agent", &req.agent)] {
            if let Some(v) = value {
                check_name(field, v, limits.name)?;
            }
        }
        if req.items.is_empty() {
            return Err(
                ValidationError::new("items", "give at least one approval or question").into(),
            );
        }
        if req.items.len() > limits.batch {
            return Err(ValidationError::new(
                "items",
                format!(
                    "{} items given; at most {} per request",
                    req.items.len(),
                    limits.batch
                ),
            )
            .into());
        }
        let idem = Idem::new(limits, "gate", who, req.idempotency_key.as_deref(), &req)?;
        let attempt = self.gate_once(who, &req, all_or_nothing, asking, answered, idem.as_ref());
        self.once(idem.as_ref(), attempt, |r| (r, Synced::done()))
            .await
    }

    /// One attempt at [`Engine::gate_items`]'s request, its key's record committed with it.
    async fn gate_once(
        &self,
        who: &Principal,
        req: &GateRequest,
        all_or_nothing: bool,
        asking: AgentAsking<'_>,
        answered: Answered,
        idem: Option<&Idem>,
    ) -> Result<Attempt<(GateResponse, Synced)>, EngineError> {
        let because = asking.because;
        let limits = &self.inner.limits;
        // Grants are consulted in memory: first bring them up to what other nodes committed
        // (a grant revoked there must not allow a call here).
        if req.items.iter().any(|i| hold::consults_grants(i.kind())) {
            self.catch_up().await?;
        }
        let (policy, version) = self.policy_for(&req.world);
        let now = self.now();
        let batch = BatchId::random();
        let ctx = HoldContext {
            world: &req.world,
            chat: req.chat.as_deref(),
            agent: req.agent.as_deref(),
            requested_by: &who.name,
            batch,
            now,
            remind_before: policy.remind_before(),
            policy: Some(&version),
            lineage: asking.lineage,
        };
        let mut tx = Transaction::default();
        let mut results = Vec::with_capacity(req.items.len());
        let mut held = false;
        for (i, item) in req.items.iter().enumerate() {
            let at = || format!("items[{i}]");
            let result = match item {
                HoldRequest::Approval(a) => {
                    let because = because.get(i).and_then(Option::as_deref);
                    self.gate_approval(&policy, &ctx, who, a, because, &mut tx)
                }
                HoldRequest::Question(q) => validate_question(q, limits).and_then(|spec| {
                    let deadline = match q.deadline {
                        Some(d) => policy
                            .check_requested_deadline(d)
                            .map_err(|m| ValidationError::new("deadline", m))?,
                        None => policy.question_deadline(),
                    };
                    let hold = hold::question_hold(&ctx, spec, q.tool_call_id.as_ref(), deadline);
                    Ok(raise(hold, who, now, &mut tx))
                }),
            };
            results.push(match result {
                Ok(r) => {
                    held |= matches!(r, GateResult::Held { .. });
                    r
                }
                Err(e) if all_or_nothing => return Err(e.within(&at()).into()),
                Err(e) => {
                    let e = e.within(&at());
                    GateResult::Invalid {
                        field: e.field,
                        message: e.message,
                    }
                }
            });
        }
        let response = GateResponse {
            batch: held.then_some(batch),
            results,
        };
        if tx.events.is_empty() {
            return Ok(Attempt::Uncommitted((response, Synced::done())));
        }
        if all_or_nothing {
            self.admit(who, &req.world, &response)?;
        }
        if let Some(idem) = idem {
            tx.writes.push(idem.record(&response, now)?);
        }
        // Only allowed calls are answered before they are durable: a denial is final, and a
        // hold is shown to people, so both are answered durable.
        let answered = match answered {
            Answered::Written
                if response
                    .results
                    .iter()
                    .all(|r| matches!(r, GateResult::Allowed { .. })) =>
            {
                Answered::Written
            }
            _ => Answered::Durable,
        };
        match self.commit_as(tx, answered).await {
            Ok((_, synced)) => Ok(Attempt::Committed((response, synced))),
            Err(e) => Err(commit_error(e)),
        }
    }

    /// Refuses a raise that would leave more holds open than the caps allow. A retry of a
    /// raise that was answered is answered again, whatever is open now (a refusal here is
    /// followed by a read of its key, [`Engine::once`]). Nothing is written before the count,
    /// so a refused raise leaves nothing behind. Raises in flight at once are not counted against each other, so each cap can be passed
    /// by the holds of the raises being committed at that moment.
    fn admit(
        &self,
        who: &Principal,
        world: &str,
        response: &GateResponse,
    ) -> Result<(), EngineError> {
        let new = response
            .results
            .iter()
            .filter(|r| matches!(r, GateResult::Held { .. }))
            .count() as u64;
        if new == 0 {
            return Ok(());
        }
        let exceeded = self
            .inner
            .open
            .lock()
            .exceeds(&self.inner.pending, world, &who.name, new);
        let Some((limit, cap)) = exceeded else {
            return Ok(());
        };
        let whose = match limit {
            PendingLimit::PerWorld => format!("world {world}"),
            PendingLimit::PerRaiser => who.name.clone(),
        };
        Err(EngineError::Limited {
            limit,
            cap,
            message: format!(
                "{whose} has as many pending holds as allowed ({cap}), or would with these {new}; \
                 nothing was raised: retry once some are decided"
            ),
        })
    }

    fn gate_approval(
        &self,
        policy: &Policy,
        ctx: &HoldContext<'_>,
        who: &Principal,
        a: &ApprovalRequest,
        because: Option<&str>,
        tx: &mut Transaction,
    ) -> Result<GateResult, ValidationError> {
        validate_approval(a, &self.inner.limits)?;
        let requested = match a.deadline {
            Some(d) => Some(
                policy
                    .check_requested_deadline(d)
                    .map_err(|m| ValidationError::new("deadline", m))?,
            ),
            None => None,
        };
        let digest = canonical::digest(&a.arguments);
        let call = Call {
            tool: &a.tool,
            arguments: &a.arguments,
            annotations: a.annotations.as_ref(),
        };
        let d = self.decide_call(
            policy,
            ctx.world,
            ctx.chat,
            &call,
            &digest,
            a.always_ask,
            ctx.now,
        );
        // The arguments of a call allowed or denied at once are recorded with it (a policy
        // can be replayed over them) up to the size a hold may keep; past it, its digest.
        let recorded = || {
            (canonical::to_string(&a.arguments).len() <= self.inner.limits.arguments)
                .then(|| a.arguments.clone())
        };
        let call_event = |payload| EventDraft {
            at: ctx.now,
            world: Some(ctx.world.to_owned()),
            chat: ctx.chat.map(str::to_owned),
            hold: None,
            actor: Actor::of(Source::Policy),
            payload,
        };
        match d.action {
            Action::Allow => {
                let payload = EventPayload::CallAllowed {
                    tool: a.tool.clone(),
                    digest: digest.clone(),
                    arguments: recorded(),
                    annotations: a.annotations,
                    tool_call_id: a.tool_call_id.clone(),
                    decided_by: d.decided_by.clone(),
                };
                tx.events.push(call_event(payload).into());
                Ok(GateResult::Allowed {
                    digest,
                    decided_by: d.decided_by,
                })
            }
            Action::Deny => {
                let payload = EventPayload::CallDenied {
                    tool: a.tool.clone(),
                    digest: digest.clone(),
                    arguments: recorded(),
                    annotations: a.annotations,
                    tool_call_id: a.tool_call_id.clone(),
                    decided_by: d.decided_by.clone(),
                };
                tx.events.push(call_event(payload).into());
                Ok(GateResult::Denied {
                    digest,
                    decided_by: d.decided_by,
                })
            }
            Action::Ask => {
                check_held_arguments(a, &self.inner.limits)?;
                let settings = policy.ask_settings(&a.tool, d.ask_rule);
                let mut hold = hold::approval_hold(
                    ctx,
                    a,
                    digest,
                    &settings,
                    requested.unwrap_or(settings.deadline),
                );
                if d.forced {
                    hold.asks_because = Some(asks_because(a, because, &d.decided_by));
                }
                let approves = hold.offers.iter().any(|k| k.approves());
                let denies = hold.offers.iter().any(|k| k.denies());
                if !(approves && denies) {
                    return Err(ValidationError::new(
                        "offers",
                        "the hold would offer no way to approve or no way to deny",
                    ));
                }
                Ok(raise(hold, who, ctx.now, tx))
            }
        }
    }
}

/// Why a call policy alone would allow is asked: the caller's reason, else what Holdpoint
/// knows of the request, with what policy said.
fn asks_because(a: &ApprovalRequest, because: Option<&str>, policy: &DecidedBy) -> String {
    let why = match (because, &a.mcp) {
        (Some(why), _) => why.to_owned(),
        (None, Some(mcp)) => format!(
            "the configuration of the MCP server {:?} requires a person's approval for its tool {:?}",
            mcp.server, mcp.tool
        ),
        (None, None) => "its caller asks a person for it, whatever policy decides".to_owned(),
    };
    let by = match policy {
        DecidedBy::Rule { rule } => rule.to_string(),
        DecidedBy::Mode { mode } => format!("no rule matched and the mode is {mode}"),
        DecidedBy::Grant { grant } => format!("grant {grant}"),
    };
    format!("{why} (policy alone would allow it: {by})")
}

fn raise(
    hold: Hold,
    who: &Principal,
    now: holdpoint_protocol::Timestamp,
    tx: &mut Transaction,
) -> GateResult {
    // One hold, shared by the event, the write and the answer.
    let hold = Arc::new(hold);
    let event = EventDraft {
        at: now,
        world: Some(hold.world.clone()),
        chat: hold.chat.clone(),
        hold: Some(hold.id),
        actor: roles::actor_of(who),
        payload: EventPayload::HoldCreated { hold: hold.clone() },
    };
    tx.events.push(PreparedEvent::from(event));
    tx.writes.push(Write::InsertHold(hold.clone()));
    GateResult::Held { hold }
}
