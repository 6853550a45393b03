//! Building a new hold from a validated request and the policy's settings.

use std::time::Duration;

use holdpoint_protocol::{
    ApprovalRequest, ApprovalSpec, BatchId, Deadline, DecisionKind, Hold, HoldId, HoldSpec,
    HoldStatus, OnTimeout, PolicyVersion, QuestionSpec, Timestamp, Verdict,
};

use super::fail_closed_option;
use crate::policy::AskSettings;

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

    fn hold(&self, tool_call_id: Option<&String>, deadline: Deadline, spec: HoldSpec) -> Hold {
        let (deadline, remind_at) = self.schedule(deadline);
        Hold {
            id: HoldId::random(),
            batch: self.batch,
            world: self.world.to_owned(),
            chat: self.chat.map(str::to_owned),
            agent: self.agent.map(str::to_owned),
            tool_call_id: tool_call_id.cloned(),
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

/// An approval hold for a validated request. `deadline` is already resolved (request, rule,
/// tool or default) and checked.
pub fn approval_hold(
    ctx: &HoldContext<'_>,
    req: &ApprovalRequest,
    digest: String,
    settings: &AskSettings,
    deadline: Deadline,
) -> Hold {
    let spec = HoldSpec::Approval(ApprovalSpec {
        tool: req.tool.clone(),
        arguments: req.arguments.clone(),
        digest,
        schema: req.schema.clone(),
        annotations: req.annotations,
        description: req.description.clone(),
        mcp: req.mcp.clone(),
    });
    let mut hold = ctx.hold(req.tool_call_id.as_ref(), deadline, spec);
    hold.on_timeout = match settings.on_timeout {
        Verdict::Approve => OnTimeout::Approve,
        Verdict::Deny => OnTimeout::Deny,
    };
    hold.rule = settings.rule.clone();
    hold.approvers = settings.approvers.clone();
    hold.quorum = settings.quorum;
    hold.offers = settings
        .offers
        .iter()
        .copied()
        .filter(|k| req.offers.as_ref().is_none_or(|narrow| narrow.contains(k)))
        // A chat grant needs a chat; a hold that always asks remembers nothing.
        .filter(|k| *k != DecisionKind::ApproveChat || ctx.chat.is_some())
        .filter(|k| {
            !req.always_ask
                || !matches!(
                    k,
                    DecisionKind::ApproveChat
                        | DecisionKind::ApproveAlwaysArgs
                        | DecisionKind::ApproveAlwaysTool
                )
        })
        .collect();
    hold
}

/// A question hold. On timeout the question's fail-closed option applies (its default, else
/// an option `no`); without one, nobody chose and no option is applied.
pub fn question_hold(
    ctx: &HoldContext<'_>,
    spec: QuestionSpec,
    tool_call_id: Option<&String>,
    deadline: Deadline,
) -> Hold {
    let on_timeout = match fail_closed_option(&spec) {
        Some(o) => OnTimeout::Choose {
            option: o.id.clone(),
        },
        None => OnTimeout::NoAnswer,
    };
    let offers = if spec.confirm {
        DecisionKind::QUESTION.to_vec()
    } else {
        vec![DecisionKind::Answer, DecisionKind::Cancel]
    };
    let mut hold = ctx.hold(tool_call_id, deadline, HoldSpec::Question(spec));
    hold.on_timeout = on_timeout;
    hold.offers = offers;
    hold
}
