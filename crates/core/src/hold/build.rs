//! What every new hold has: where it belongs, who raised it, when, and its deadline. Each
//! kind's module builds its own holds on this.

use std::time::Duration;

use holdpoint_protocol::{
    BatchId, Deadline, Hold, HoldId, HoldSpec, HoldStatus, LineageStep, OnTimeout, PolicyVersion,
    Timestamp,
};

/// Where a new hold belongs, who raised it, and when.
#[derive(Clone, Copy, Debug)]
pub struct HoldContext<'a> {
    pub world: &'a str,
    pub chat: Option<&'a str>,
    pub agent: Option<&'a str>,
    pub requested_by: &'a str,
    pub batch: BatchId,
    pub now: Timestamp,
    /// Reminders fire this long before the deadline (or halfway, for short deadlines).
    pub remind_before: Duration,
    /// The policy in force, recorded on the hold.
    pub policy: Option<&'a PolicyVersion>,
    /// A sub-agent's lineage (`Hold::lineage`); empty for every other hold.
    pub lineage: &'a [LineageStep],
}

impl HoldContext<'_> {
    fn schedule(&self, deadline: Deadline) -> (Option<Timestamp>, Option<Timestamp>) {
        match deadline {
            Deadline::Never => (None, None),
            Deadline::After(d) => {
                let lead = if self.remind_before < d {
                    self.remind_before
                } else {
                    d / 2
                };
                (
                    Some(self.now.saturating_add(d)),
                    Some(self.now.saturating_add(d - lead)),
                )
            }
        }
    }

    pub(super) fn hold(
        &self,
        tool_call_id: Option<&String>,
        deadline: Deadline,
        spec: HoldSpec,
    ) -> Hold {
        let (deadline, remind_at) = self.schedule(deadline);
        Hold {
            id: HoldId::random(),
            batch: self.batch,
            world: self.world.to_owned(),
            chat: self.chat.map(str::to_owned),
            agent: self.agent.map(str::to_owned),
            tool_call_id: tool_call_id.cloned(),
            lineage: self.lineage.to_vec(),
            requested_by: self.requested_by.to_owned(),
            created_at: self.now,
            deadline,
            remind_at,
            reminded: false,
            on_timeout: OnTimeout::Deny,
            rule: None,
            asks_because: None,
            approvers: Vec::new(),
            quorum: 1,
            offers: Vec::new(),
            spec,
            status: HoldStatus::Pending,
            pending_answer: None,
            votes: Vec::new(),
            outcome: None,
            policy: self.policy.cloned(),
            version: 1,
        }
    }
}
