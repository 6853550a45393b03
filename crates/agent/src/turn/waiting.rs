//! Waiting for the holds of the step's batch, one at a time, and applying each outcome to its
//! call.

use std::time::Duration;

use holdpoint_core::Scope;
use holdpoint_core::record::put;
use holdpoint_core::store::RecordKind;
use holdpoint_protocol::{Actor, CallState, HoldId, Outcome, TurnStatus};
use uuid::Uuid;

use super::driver::{Driver, Stop};
use super::outcome;
use crate::tools::{self, Gate};

impl Driver<'_> {
    /// Waits for the next hold of the batch and applies its outcome.
    pub(super) async fn wait(&mut self) -> Result<(), Stop> {
        if self.turn.status != TurnStatus::Waiting {
            self.turn.status = TurnStatus::Waiting;
            self.save(vec![], vec![]).await?;
        }
        let Some(i) = self
            .turn
            .calls
            .iter()
            .position(|c| c.state == CallState::Held)
        else {
            return Ok(());
        };
        let Some(hold) = self.turn.calls[i].hold else {
            return Err(Stop::Failed("a held call has no hold".into()));
        };
        let scope = Scope::any();
        let outcome = loop {
            let wait = self
                .rt
                .engine()
                .wait(hold, Duration::from_secs(3600), &scope);
            tokio::select! {
                () = self.cancel.cancelled() => return Err(Stop::Canceled),
                r = wait => match r {
                    Ok(Some(outcome)) => break outcome,
                    Ok(None) => continue,
                    Err(e) => return Err(Stop::Failed(format!("waiting for hold {hold} failed: {e}"))),
                },
            }
        };
        let gate = tools::find(&self.agent, &self.turn.calls[i].call.name)
            .map_or(Gate::Policy, |d| d.gate);
        let turn = self.turn.id;
        let applied = outcome::apply(turn, &mut self.turn.calls[i], gate, &outcome);
        let mut writes = Vec::new();
        if let Some(skill) = applied.remember_skill {
            // "Yes, for this chat": remembered per world, chat and skill.
            let chat = *self.turn.chat.as_uuid();
            writes.push(
                put(
                    RecordKind::SkillSession,
                    Uuid::now_v7(),
                    Some(chat),
                    Some(skill.clone()),
                    1,
                    &skill,
                )
                .map_err(|e| Stop::Failed(e.to_string()))?,
            );
        }
        let events = applied
            .finished
            .into_iter()
            .map(|p| self.event(p))
            .collect();
        if !self.turn.calls.iter().any(|c| c.state == CallState::Held) {
            self.turn.status = TurnStatus::Running;
        }
        self.save(writes, events).await?;
        if applied.stop {
            return Err(Stop::StoppedByPerson(self.decider(hold, &outcome).await));
        }
        Ok(())
    }

    /// Who decided a hold, with name and role, as its resolving event records them. The
    /// outcome alone keeps only names; should the history be unreadable, it is what is left.
    async fn decider(&self, hold: HoldId, outcome: &Outcome) -> Actor {
        let history = self.rt.engine().history(hold, &Scope::any()).await;
        let recorded = history.ok().and_then(|events| {
            events
                .iter()
                .rev()
                .find(|e| e.payload.resolution().is_some())
                .map(|e| e.actor.clone())
        });
        recorded.unwrap_or_else(|| match outcome.decided_by.first() {
            Some(name) => Actor::named(outcome.source, name.clone()),
            None => Actor::of(outcome.source),
        })
    }
}
