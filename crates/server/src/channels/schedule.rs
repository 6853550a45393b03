//! Notices after the first: a reminder at the hold's reminder time, escalations to a route's
//! next groups while nobody decides (`escalate_after`, `escalate_to`), and a last notice a
//! route's `last_notice` before the deadline saying what the deadline will do.
//!
//! Nothing here is kept only in memory. When each of a hold's notices is due follows from the
//! hold (its creation, reminder time and deadline) and the routes; whether it was recorded
//! follows from the hold's notices. So the timer runs where notices are sent (under the
//! `email` lease, started and stopped with the sender), and on every start it reads the open
//! holds again: a notice that became due while no node ran is recorded and sent then. A
//! scheduled notice's id is derived from (hold, purpose, round, recipient), so recording it
//! twice — two nodes around a takeover, a restart between recording and reading — is refused
//! by the store instead of mailing twice; sending what was recorded but not yet sent is the
//! sender's resume (`resend_pending`).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use holdpoint_core::record::put;
use holdpoint_core::store::{EventFilter, RecordKind};
use holdpoint_protocol::{
    DeliveryStatus, EventPayload, Hold, HoldId, HoldQuery, HoldSpec, Notice, NoticePurpose,
    OnTimeout,
};
use sha2::{Digest, Sha256};

use super::route::{Reach, Recipient, Route};
use super::{Channels, Stored};
use crate::error::ApiError;

/// The shortest and longest delays a route may give.
const DELAYS: (Duration, Duration) = (Duration::from_secs(1), Duration::from_secs(365 * 24 * 3600));

/// When a route notifies again, checked.
#[derive(Clone, Debug, Default)]
pub struct Timing {
    pub escalate_after: Option<Duration>,
    /// Each step's recipients, in order: `escalate_to`'s groups.
    pub escalate_to: Vec<Vec<Recipient>>,
    pub last_notice: Option<Duration>,
}

impl Timing {
    /// Route `r` (the one at `field`, `channels.routes[N]`)'s timing, with `groups`' members;
    /// errors name the key at fault.
    pub(super) fn new(
        r: &Route,
        field: &str,
        groups: &BTreeMap<String, Vec<Recipient>>,
    ) -> Result<Timing, (String, String)> {
        let key = |k: &str| format!("{field}.{k}");
        let delay = |k: &str, text: &Option<String>, example: &str| {
            text.as_deref()
                .map(|t| holdpoint_core::limits::duration_within(t, DELAYS, example))
                .transpose()
                .map_err(|e| (key(k), e))
        };
        let escalate_after = delay("escalate_after", &r.escalate_after, "\"15m\"")?;
        let last_notice = delay("last_notice", &r.last_notice, "\"10m\"")?;
        match (escalate_after.is_some(), r.escalate_to.is_empty()) {
            (true, true) => {
                return Err((key("escalate_to"), "names no group to escalate to".into()));
            }
            (false, false) => {
                return Err((
                    key("escalate_after"),
                    "is needed with escalate_to: how long nobody deciding escalates".into(),
                ));
            }
            _ => {}
        }
        let mut escalate_to = Vec::new();
        let mut seen: BTreeSet<&str> = r.groups.iter().map(String::as_str).collect();
        for g in &r.escalate_to {
            let Some(members) = groups.get(g) else {
                return Err((
                    key("escalate_to"),
                    format!("no group {g:?} in [channels.groups]"),
                ));
            };
            // An escalation goes on to someone new, never back: no loops.
            if !seen.insert(g) {
                return Err((
                    key("escalate_to"),
                    format!("group {g:?} is notified already: an escalation never goes back"),
                ));
            }
            escalate_to.push(members.clone());
        }
        Ok(Timing {
            escalate_after,
            escalate_to,
            last_notice,
        })
    }
}

/// One scheduled notice to some people: when, why, which step.
struct Due {
    at: i64,
    purpose: NoticePurpose,
    round: u32,
    to: Vec<Recipient>,
}

/// `to` with each of `more` not in it yet.
fn add(to: &mut Vec<Recipient>, more: impl IntoIterator<Item = Recipient>) {
    for r in more {
        if !to.iter().any(|t| t.same(&r)) {
            to.push(r);
        }
    }
}

/// Every notice after the first that `hold`, matched by `matched`, calls for. Reminders and
/// the last notice go to everyone notified by then (escalations included); escalations to
/// those not notified yet. Nothing is scheduled at or after the deadline.
fn plan(hold: &Hold, matched: &[(usize, &Reach, Vec<Recipient>)]) -> Vec<Due> {
    let created = hold.created_at.as_millis();
    let deadline = hold.deadline.map_or(i64::MAX, |d| d.as_millis());
    let mut first = Vec::new();
    for (_, _, own) in matched {
        add(&mut first, own.iter().cloned());
    }
    let mut out = Vec::new();
    let mut escalated = first.clone();
    let mut steps: Vec<(i64, u32, &Vec<Recipient>)> = Vec::new();
    for (_, reach, _) in matched {
        let Some(after) = reach.timing.escalate_after else {
            continue;
        };
        let after = i64::try_from(after.as_millis()).unwrap_or(i64::MAX);
        for (k, group) in reach.timing.escalate_to.iter().enumerate() {
            let round = u32::try_from(k + 1).unwrap_or(u32::MAX);
            let at = created.saturating_add(after.saturating_mul(i64::from(round)));
            steps.push((at, round, group));
        }
    }
    steps.sort_by_key(|(at, round, _)| (*at, *round));
    for (at, round, group) in &steps {
        if *at >= deadline {
            continue;
        }
        let fresh: Vec<Recipient> = group
            .iter()
            .filter(|r| !escalated.iter().any(|e| e.same(r)))
            .cloned()
            .collect();
        add(&mut escalated, fresh.iter().cloned());
        if !fresh.is_empty() {
            out.push(Due {
                at: *at,
                purpose: NoticePurpose::Escalation,
                round: *round,
                to: fresh,
            });
        }
    }
    // Everyone notified by `at`.
    let notified_by = |at: i64| {
        let mut to = first.clone();
        for (step_at, _, group) in &steps {
            if *step_at <= at && *step_at < deadline {
                add(&mut to, group.iter().cloned());
            }
        }
        to
    };
    if let Some(r) = hold.remind_at.map(|r| r.as_millis())
        && r < deadline
    {
        out.push(Due {
            at: r,
            purpose: NoticePurpose::Reminder,
            round: 0,
            to: notified_by(r),
        });
    }
    let lead = matched
        .iter()
        .filter_map(|(_, reach, _)| reach.timing.last_notice)
        .max();
    if let (Some(lead), Some(d)) = (lead, hold.deadline) {
        let at = d.saturating_sub(lead).as_millis();
        // A lead as long as the hold's whole time would be sent with the first notice.
        if at > created {
            out.push(Due {
                at,
                purpose: NoticePurpose::Last,
                round: 0,
                to: notified_by(at),
            });
        }
    }
    out.retain(|d| !d.to.is_empty());
    out
}

/// The id of the notice of `hold` for `purpose` and `round` to `to`: the same every time it is
/// computed, so that the store refuses a second record of it.
fn notice_id(hold: HoldId, purpose: NoticePurpose, round: u32, to: &Recipient) -> uuid::Uuid {
    let mut h = Sha256::new();
    h.update(hold.as_uuid().as_bytes());
    h.update(format!("{purpose:?}/{round}/{}/", to.channel).as_bytes());
    h.update(to.address.to_lowercase().as_bytes());
    let digest = h.finalize();
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    uuid::Builder::from_custom_bytes(bytes).into_uuid()
}

/// What a notice's message says first, by its purpose: a prefix for its subject, and its
/// opening line (the last notice's says what the deadline will do, and when).
pub(super) fn intro(notice: &Notice, hold: &Hold, world: &str) -> (&'static str, String) {
    match notice.purpose {
        NoticePurpose::First => ("", format!("A hold in world {world} waits for you.")),
        NoticePurpose::Reminder => (
            "Reminder: ",
            format!("Reminder: a hold in world {world} still waits for a decision."),
        ),
        NoticePurpose::Escalation => (
            "Escalated: ",
            format!("Escalated to you: nobody has decided this hold in world {world} yet."),
        ),
        NoticePurpose::Last => (
            "Last notice: ",
            format!(
                "Last notice: a hold in world {world} still waits. {}",
                timeout_words(hold)
            ),
        ),
    }
}

/// `If nobody decides by 2026-11-27 14:30:00 UTC, this call will be denied.`
pub fn timeout_words(hold: &Hold) -> String {
    let Some(deadline) = hold.deadline else {
        return "It has no deadline.".into();
    };
    let ms = u64::try_from(deadline.as_millis()).unwrap_or(0);
    let at = humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + Duration::from_millis(ms))
        .to_string()
        .replacen('T', " ", 1)
        .replace('Z', " UTC");
    let then = match &hold.on_timeout {
        OnTimeout::Deny => "this call will be denied".to_owned(),
        OnTimeout::Approve => "this call will be approved".to_owned(),
        OnTimeout::Choose { option } => {
            let label = match &hold.spec {
                HoldSpec::Question(q) => q
                    .options
                    .iter()
                    .find(|o| o.id == *option)
                    .map_or(option.as_str(), |o| o.label.as_str()),
                HoldSpec::Approval(_) => option.as_str(),
            };
            format!("the answer {label:?} will be chosen")
        }
        OnTimeout::NoAnswer => "the question will end unanswered".to_owned(),
    };
    format!("If nobody decides by {at}, {then}.")
}

/// Follows the open holds and sends their later notices as they fall due, until sending
/// stops here (`ch`'s shutdown: the lease lost, or the server stopping).
pub(super) async fn run(ch: Channels) {
    if let Err(e) = follow(&ch).await {
        // Started again with the sender, which stops too.
        tracing::warn!(error = %e.message, "stopped scheduling reminders and escalations");
        ch.shutdown.cancel();
    }
}

async fn follow(ch: &Channels) -> Result<(), ApiError> {
    // Without routes in the file, a world's own may still call for later notices.
    if ch.email.is_none() && ch.slack.is_none() {
        return Ok(());
    }
    // Holds raised from here on are heard of; those open now are read below, so none falls
    // between the two (one heard of twice is only visited twice).
    let head = ch
        .runtime
        .records()
        .store()
        .audit_head()
        .await?
        .map_or(0, |h| h.seq);
    let mut events = ch
        .runtime
        .engine()
        .events(Some(head), EventFilter::default())
        .await?;
    let (tx, mut created) = tokio::sync::mpsc::unbounded_channel::<Hold>();
    let stop = ch.shutdown.clone();
    tokio::spawn(async move {
        loop {
            let e = tokio::select! {
                () = stop.cancelled() => return,
                e = events.next() => e,
            };
            match e {
                Ok(e) => {
                    if let EventPayload::HoldCreated { hold } = &e.payload
                        && tx.send((**hold).clone()).is_err()
                    {
                        return;
                    }
                }
                Err(e) => {
                    tracing::error!(error = %e, "the notice timer stopped following the log");
                    stop.cancel();
                    return;
                }
            }
        }
    });

    let mut agenda: BTreeSet<(i64, uuid::Uuid)> = BTreeSet::new();
    let mut query = HoldQuery::default();
    loop {
        let page = ch.runtime.engine().holds(&query).await?;
        for hold in &page.items {
            if let Some(at) = visit(ch, hold).await {
                agenda.insert((at, *hold.id.as_uuid()));
            }
        }
        match page.next {
            Some(next) => query.cursor = Some(next),
            None => break,
        }
    }

    loop {
        let next = agenda.first().map(|(at, _)| *at);
        let wait = next.map_or(Duration::from_secs(3600), |at| {
            Duration::from_millis(u64::try_from(at - ch.now().as_millis()).unwrap_or(0))
        });
        tokio::select! {
            () = ch.shutdown.cancelled() => return Ok(()),
            hold = created.recv() => {
                let Some(hold) = hold else { return Ok(()) };
                if let Some(at) = visit(ch, &hold).await {
                    agenda.insert((at, *hold.id.as_uuid()));
                }
            }
            () = tokio::time::sleep(wait) => {
                let now = ch.now().as_millis();
                while let Some(&(at, id)) = agenda.first() {
                    if at > now {
                        break;
                    }
                    agenda.remove(&(at, id));
                    let id = HoldId::from_uuid(id);
                    let hold = match ch.runtime.engine().hold(id, &holdpoint_core::Scope::default()).await {
                        Ok(h) => h,
                        Err(e) => {
                            tracing::warn!(hold = %id, error = %e, "could not read a hold to notify of again");
                            agenda.insert((now + 1000, *id.as_uuid()));
                            continue;
                        }
                    };
                    if let Some(at) = visit(ch, &hold).await {
                        agenda.insert((at, *id.as_uuid()));
                    }
                }
            }
        }
    }
}

/// Records and sends what of `hold`'s later notices is due; when the next one falls due.
/// A failure is logged and tried again a second later.
async fn visit(ch: &Channels, hold: &Hold) -> Option<i64> {
    if !hold.is_open() {
        return None;
    }
    let (world, routes) = ch.routes_of(hold).await;
    let matched = routes.matching(hold, &world);
    let mut plan = plan(hold, &matched);
    // Only over the channels configured.
    for d in &mut plan {
        d.to.retain(|r| ch.retries(r.channel).is_some());
    }
    plan.retain(|d| !d.to.is_empty());
    let now = ch.now().as_millis();
    let (due, later): (Vec<Due>, Vec<Due>) = plan.into_iter().partition(|d| d.at <= now);
    let next = later.iter().map(|d| d.at).min();
    if due.is_empty() {
        return next;
    }
    match record(ch, hold, due).await {
        Ok(()) => next,
        Err(e) => {
            tracing::warn!(hold = %hold.id, error = %e.message, "could not record a hold's later notices");
            Some(now + 1000)
        }
    }
}

/// Records the notices of `due` not recorded yet, then sends them.
async fn record(ch: &Channels, hold: &Hold, due: Vec<Due>) -> Result<(), ApiError> {
    let stored = ch.stored(hold.id).await?;
    let now = ch.now();
    let mut writes = Vec::new();
    let mut scheduled = Vec::new();
    for d in due {
        for r in d.to {
            let id = notice_id(hold.id, d.purpose, d.round, &r);
            if stored.iter().any(|s| s.notice.id == id) {
                continue;
            }
            let s = Stored {
                notice: Notice {
                    id,
                    hold: hold.id,
                    channel: r.channel.into(),
                    decides_as: ch.decides_as(&r),
                    recipient: r.address,
                    status: DeliveryStatus::Pending,
                    attempts: 0,
                    last_error: None,
                    created_at: now,
                    updated_at: now,
                    sent_at: None,
                    used: None,
                    purpose: d.purpose,
                    round: d.round,
                    message: None,
                },
                version: 1,
            };
            writes.push(put(
                RecordKind::Notice,
                id,
                Some(*hold.id.as_uuid()),
                None,
                1,
                &s,
            )?);
            scheduled.push(s);
        }
    }
    if writes.is_empty() {
        return Ok(());
    }
    ch.runtime.records().commit(writes, vec![]).await?;
    for s in scheduled {
        tokio::spawn(ch.clone().send(s));
    }
    Ok(())
}

/// Warns of each world whose holds no route reaches, or only some of them. Which holds a
/// world's policy raises is not known ahead in general (rules match arguments, agents call any
/// tool), so this is a warning at startup, not an error.
pub(super) async fn warn_unreached(ch: &Channels) {
    let worlds = match ch.runtime.worlds().await {
        Ok(w) => w,
        Err(e) => {
            tracing::warn!(error = %e, "could not list the worlds to check their routes");
            return;
        }
    };
    for w in worlds {
        match ch
            .world_routes(&w)
            .reach_of_world(&w.name, &w.id.to_string())
        {
            super::route::WorldReach::None => tracing::warn!(
                world = %w.name,
                "no [[channels.routes]] nor notice_routes of its own reach this world's holds: nobody is notified of them"
            ),
            super::route::WorldReach::Some => tracing::info!(
                world = %w.name,
                "its routes reach only some of this world's holds (by tool, kind, annotations or rule)"
            ),
            super::route::WorldReach::All => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channels::route::{Groups, Member, Routes};
    use holdpoint_protocol::Timestamp;

    fn hold(created: i64, deadline: i64, remind: Option<i64>) -> Hold {
        let mut h: Hold = serde_json::from_value(serde_json::json!({
            "id": HoldId::random(), "batch": holdpoint_protocol::BatchId::random(),
            "world": "w", "requested_by": "bot", "created_at": "2026-01-01T00:00:00Z",
            "on_timeout": {"action": "deny"}, "approvers": [], "quorum": 1, "offers": [],
            "spec": {"kind": "approval", "tool": "t", "arguments": {}, "digest": "d"},
            "status": "pending",
            "votes": [], "version": 1
        }))
        .unwrap();
        h.created_at = Timestamp::from_millis(created);
        h.deadline = Some(Timestamp::from_millis(deadline));
        h.remind_at = remind.map(Timestamp::from_millis);
        h
    }

    fn groups() -> Groups {
        let mut g = Groups::new();
        g.insert("oncall".into(), vec![Member::Address("c@x.io".into())]);
        g.insert("leads".into(), vec![Member::Address("d@x.io".into())]);
        g
    }

    #[test]
    fn escalations_reminders_and_the_last_notice_are_planned_from_the_hold() {
        let routes = Routes::with_groups(
            &[Route {
                to: vec!["a@x.io".into()],
                escalate_after: Some("10s".into()),
                escalate_to: vec!["oncall".into(), "leads".into()],
                last_notice: Some("5s".into()),
                ..Route::default()
            }],
            &groups(),
        )
        .unwrap();
        let h = hold(0, 25_000, Some(12_000));
        let matched = routes.matching(&h, "w");
        let got: Vec<(i64, NoticePurpose, u32, Vec<String>)> = plan(&h, &matched)
            .into_iter()
            .map(|d| {
                (
                    d.at,
                    d.purpose,
                    d.round,
                    d.to.into_iter().map(|r| r.address).collect(),
                )
            })
            .collect();
        let v = |a: &[&str]| a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            got,
            [
                (10_000, NoticePurpose::Escalation, 1, v(&["c@x.io"])),
                (20_000, NoticePurpose::Escalation, 2, v(&["d@x.io"])),
                (12_000, NoticePurpose::Reminder, 0, v(&["a@x.io", "c@x.io"])),
                (
                    20_000,
                    NoticePurpose::Last,
                    0,
                    v(&["a@x.io", "c@x.io", "d@x.io"])
                ),
            ]
        );
        // Nothing at or after the deadline.
        let early = hold(0, 15_000, None);
        let got: Vec<NoticePurpose> = plan(&early, &routes.matching(&early, "w"))
            .into_iter()
            .map(|d| d.purpose)
            .collect();
        assert_eq!(got, [NoticePurpose::Escalation, NoticePurpose::Last]);
    }

    #[test]
    fn routes_match_by_annotations_and_rule() {
        let routes = Routes::with_groups(
            &[
                Route {
                    annotations: Some(crate::channels::route::RouteAnnotations {
                        destructive: Some(true),
                        ..Default::default()
                    }),
                    groups: vec!["oncall".into()],
                    ..Route::default()
                },
                Route {
                    rule: Some("deploys".into()),
                    to: vec!["b@x.io".into()],
                    ..Route::default()
                },
            ],
            &groups(),
        )
        .unwrap();
        let to = |h: &Hold| -> Vec<String> {
            routes
                .recipients(h, "w")
                .into_iter()
                .map(|r| r.address)
                .collect()
        };
        let mut h = hold(0, 1000, None);
        assert!(to(&h).is_empty());
        if let holdpoint_protocol::HoldSpec::Approval(a) = &mut h.spec {
            a.annotations = Some(holdpoint_protocol::ToolAnnotations {
                destructive: Some(true),
                ..Default::default()
            });
        }
        assert_eq!(to(&h), ["c@x.io"]);
        h.rule = Some(holdpoint_protocol::RuleRef {
            index: 0,
            name: "deploys".into(),
            layer: None,
        });
        assert_eq!(to(&h), ["c@x.io", "b@x.io"]);
        if let holdpoint_protocol::HoldSpec::Approval(a) = &mut h.spec {
            a.annotations = Some(holdpoint_protocol::ToolAnnotations {
                destructive: Some(false),
                ..Default::default()
            });
        }
        assert_eq!(to(&h), ["b@x.io"]);
    }

    #[test]
    fn timing_is_checked_with_the_key_at_fault() {
        let check = |r: Route| Routes::with_groups(&[r], &groups()).unwrap_err();
        let base = || Route {
            to: vec!["a@x.io".into()],
            ..Route::default()
        };
        let e = check(Route {
            escalate_after: Some("soon".into()),
            escalate_to: vec!["oncall".into()],
            ..base()
        });
        assert_eq!(e.0, "channels.routes[0].escalate_after");
        assert!(e.1.contains("\"soon\" is not a duration"), "{}", e.1);
        let e = check(Route {
            escalate_to: vec!["oncall".into()],
            ..base()
        });
        assert_eq!(e.0, "channels.routes[0].escalate_after");
        let e = check(Route {
            escalate_after: Some("1m".into()),
            ..base()
        });
        assert_eq!(e.0, "channels.routes[0].escalate_to");
        let e = check(Route {
            escalate_after: Some("1m".into()),
            escalate_to: vec!["nobody".into()],
            ..base()
        });
        assert_eq!(e.0, "channels.routes[0].escalate_to");
        let e = check(Route {
            groups: vec!["oncall".into()],
            escalate_after: Some("1m".into()),
            escalate_to: vec!["leads".into(), "oncall".into()],
            ..base()
        });
        assert!(e.1.contains("never goes back"), "{}", e.1);
        let e = check(Route {
            last_notice: Some("0s".into()),
            ..base()
        });
        assert_eq!(e.0, "channels.routes[0].last_notice");
        let mut bad = groups();
        bad.insert("x".into(), vec![Member::Address("nope".into())]);
        let e = Routes::with_groups(&[base()], &bad).unwrap_err();
        assert_eq!(e.0, "channels.groups.x[0]");
    }

    #[test]
    fn a_notice_id_is_the_same_for_the_same_notice_only() {
        let h = HoldId::random();
        let r = |a: &str| Recipient {
            channel: "email",
            address: a.into(),
            decides_as: a.into(),
        };
        let id = notice_id(h, NoticePurpose::Escalation, 1, &r("a@x.io"));
        assert_eq!(id, notice_id(h, NoticePurpose::Escalation, 1, &r("A@x.io")));
        assert_ne!(id, notice_id(h, NoticePurpose::Escalation, 2, &r("a@x.io")));
        assert_ne!(id, notice_id(h, NoticePurpose::Last, 1, &r("a@x.io")));
        assert_ne!(
            id,
            notice_id(HoldId::random(), NoticePurpose::Escalation, 1, &r("a@x.io"))
        );
    }
}
