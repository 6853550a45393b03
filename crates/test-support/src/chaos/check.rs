//! What the crash loop checks once the load has stopped, as a pure function of what the
//! clients were told, what the store holds, what the effects file says and what `holdpoint
//! audit verify` said: so that each check can be shown to fail on a doctored run.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::Arc;

use holdpoint_protocol::{Event, Hold, HoldStatus, Timestamp};
use serde_json::Value;

use super::load::{APPROVER, DECIDED, Decided, EXPIRING, Followed, Raised, tag_of};

/// Everything the checks look at.
pub struct Observed {
    pub raised: Vec<Raised>,
    pub decided: Vec<Decided>,
    pub waited: Vec<(String, Value)>,
    pub turns: Vec<String>,
    pub followed: Vec<Followed>,
    /// The whole log, in order.
    pub log: Vec<Arc<Event>>,
    /// Every hold the log raised, as the store serves it (absent: the store lacks it).
    pub holds: HashMap<String, Hold>,
    /// The file the turns' tool appends to.
    pub effects: String,
    /// `holdpoint audit verify`: passed, or its output.
    pub audit: Result<(), String>,
    /// When the checks ran; a hold whose deadline is earlier than this by `grace` must have
    /// an outcome.
    pub now: Timestamp,
    pub grace_ms: i64,
    /// When the server was up: each start (once it listened) to its kill (the last to the
    /// checks), in milliseconds since the epoch, in order.
    pub up: Vec<(i64, i64)>,
}

/// When a deadline had to be applied by: the first moment from the deadline on when the
/// server was up and stayed up for the grace after it (`None`: it never did).
fn due(deadline: i64, up: &[(i64, i64)], grace: i64) -> Option<i64> {
    up.iter()
        .map(|&(start, end)| (deadline.max(start), end))
        .find(|&(from, end)| from + grace <= end)
        .map(|(from, _)| from)
}

/// The counts of each check (in the order they were made), and what broke a promise.
#[derive(Default, Debug)]
pub struct Report {
    pub counts: Vec<(&'static str, usize)>,
    pub violations: Vec<String>,
}

impl Report {
    /// Adds `n` to the count of `what`.
    pub fn count(&mut self, what: &'static str, n: usize) {
        match self.counts.iter_mut().find(|(w, _)| *w == what) {
            Some((_, count)) => *count += n,
            None => self.counts.push((what, n)),
        }
    }

    /// The count of `what` (0 if never counted).
    pub fn get(&self, what: &str) -> usize {
        self.counts
            .iter()
            .find(|(w, _)| *w == what)
            .map_or(0, |(_, n)| *n)
    }

    fn violate(&mut self, what: String) {
        self.violations.push(what);
    }

    pub fn ok(&self) -> bool {
        self.violations.is_empty()
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (what, n) in &self.counts {
            writeln!(f, "  {what:<52} {n:>8}")?;
        }
        if self.ok() {
            writeln!(f, "  every check passed")
        } else {
            writeln!(f, "  {} violations:", self.violations.len())?;
            for v in self.violations.iter().take(50) {
                writeln!(f, "    - {v}")?;
            }
            Ok(())
        }
    }
}

/// A payload's field, read from its JSON (the type tag is `type`).
fn field<'a>(payload: &'a Value, name: &str) -> &'a Value {
    &payload[name]
}

pub fn check(o: &Observed) -> Report {
    let mut r = Report::default();
    let payloads: Vec<Value> = o
        .log
        .iter()
        .map(|e| serde_json::to_value(&e.payload).unwrap())
        .collect();
    holds(o, &mut r);
    decisions(o, &mut r);
    turns_and_tools(o, &payloads, &mut r);
    streams(o, &mut r);
    match &o.audit {
        Ok(()) => r.count("audit verify passed", 1),
        Err(out) => r.violate(format!("holdpoint audit verify failed: {out}")),
    }
    r
}

/// Every acknowledged hold is there, raised once; every hold resolved at most once; none
/// past its deadline without an outcome.
fn holds(o: &Observed, r: &mut Report) {
    let mut created: HashMap<String, usize> = HashMap::new();
    let mut resolved: HashMap<String, usize> = HashMap::new();
    for e in &o.log {
        let Some(hold) = e.hold.as_ref() else {
            continue;
        };
        let hold = hold.to_string();
        match e.payload.type_name() {
            "hold.created" => *created.entry(hold).or_default() += 1,
            _ if e.payload.resolution().is_some() => *resolved.entry(hold).or_default() += 1,
            _ => {}
        }
    }
    r.count("holds in the log", created.len());
    for (hold, n) in &created {
        if *n > 1 {
            r.violate(format!("hold {hold} was created {n} times in the log"));
        }
    }
    for (hold, n) in &resolved {
        if *n > 1 {
            r.violate(format!("hold {hold} was resolved {n} times"));
        }
    }
    r.count("holds resolved", resolved.len());

    r.count("holds acknowledged to agents", o.raised.len());
    let mut expired = 0;
    for raised in &o.raised {
        let Some(hold) = o.holds.get(&raised.id) else {
            r.violate(format!(
                "acknowledged hold {} is not in the store",
                raised.id
            ));
            continue;
        };
        if !created.contains_key(raised.id.as_str()) {
            r.violate(format!("acknowledged hold {} was never logged", raised.id));
        }
        if raised.expiring {
            if hold.status == HoldStatus::TimedOut {
                expired += 1;
            } else {
                r.violate(format!(
                    "hold {} nobody decided is {:?}, not timed out",
                    raised.id, hold.status
                ));
            }
        }
    }
    r.count("  of which expired at their deadline", expired);
    // One request, one hold: every hold of the raisers' tools was acknowledged once.
    let acknowledged: HashSet<&str> = o.raised.iter().map(|h| h.id.as_str()).collect();
    if acknowledged.len() != o.raised.len() {
        r.violate(format!(
            "{} raises were acknowledged with {} distinct holds",
            o.raised.len(),
            acknowledged.len()
        ));
    }
    for (id, hold) in &o.holds {
        let tool = match &hold.spec {
            holdpoint_protocol::HoldSpec::Approval(a) => a.tool.as_str(),
            holdpoint_protocol::HoldSpec::Question(_) => "",
        };
        if matches!(tool, DECIDED | EXPIRING) && !acknowledged.contains(id.as_str()) {
            r.violate(format!(
                "hold {id} was raised but no raise was acknowledged with it"
            ));
        }
    }
    let mut overdue = 0;
    for (id, hold) in &o.holds {
        if !created.contains_key(id.as_str()) {
            r.violate(format!("hold {id} is in the store but not in the log"));
        }
        let Some(deadline) = hold.deadline else {
            continue;
        };
        let late = o.now.as_millis() - deadline.as_millis();
        if hold.status.is_open() && late > o.grace_ms {
            overdue += 1;
            r.violate(format!(
                "hold {id} is {late} ms past its deadline without an outcome"
            ));
        }
    }
    r.count("holds past their deadline without an outcome", overdue);

    // Each timeout was applied within the grace of when it was due, restarts allowed for.
    let (mut applied, mut latest) = (0, 0);
    for (id, hold) in &o.holds {
        let (Some(deadline), Some(outcome)) = (hold.deadline, &hold.outcome) else {
            continue;
        };
        if hold.status != HoldStatus::TimedOut {
            continue;
        }
        applied += 1;
        let Some(due) = due(deadline.as_millis(), &o.up, o.grace_ms) else {
            continue;
        };
        let late = outcome.decided_at.as_millis() - due;
        latest = latest.max(late);
        if late > o.grace_ms {
            r.violate(format!(
                "hold {id} timed out {late} ms after it was due (the server was up)"
            ));
        }
    }
    r.count("timeouts applied", applied);
    r.count(
        "  the latest, ms after it was due (server up)",
        usize::try_from(latest).unwrap_or(0),
    );
}

/// Every acknowledged decision is what the hold's outcome says, and no hold was answered
/// 200 twice; what waiting agents were told is the outcome the store has.
fn decisions(o: &Observed, r: &mut Report) {
    r.count("decisions acknowledged to people", o.decided.len());
    let mut answered: HashMap<&str, usize> = HashMap::new();
    for d in &o.decided {
        *answered.entry(&d.hold).or_default() += 1;
        let Some(hold) = o.holds.get(&d.hold) else {
            r.violate(format!("decided hold {} is not in the store", d.hold));
            continue;
        };
        let want = if d.action == "approve" {
            HoldStatus::Approved
        } else {
            HoldStatus::Denied
        };
        let by = hold.outcome.as_ref().map(|o| o.decided_by.clone());
        if hold.status != want || by != Some(vec![APPROVER.to_owned()]) {
            r.violate(format!(
                "hold {} was acknowledged as {}d but is {:?} by {by:?}",
                d.hold, d.action, hold.status
            ));
        }
    }
    for (hold, n) in answered {
        if n > 1 {
            r.violate(format!(
                "a decision of hold {hold} was acknowledged {n} times"
            ));
        }
    }
    r.count("outcomes told to waiting agents", o.waited.len());
    for (id, told) in &o.waited {
        let stored = o.holds.get(id).and_then(|h| h.outcome.as_ref());
        let stored = stored.map(|s| serde_json::to_value(s).unwrap());
        if stored.as_ref() != Some(told) {
            r.violate(format!(
                "an agent was told {told} for hold {id}, the store has {stored:?}"
            ));
        }
    }
}

/// Every turn ended (or waits on a pending hold); no call ran twice, as the file says.
fn turns_and_tools(o: &Observed, payloads: &[Value], r: &mut Report) {
    let mut started: Vec<&str> = Vec::new();
    let mut ends: HashMap<&str, Vec<&str>> = HashMap::new();
    let mut chat_of: HashMap<&str, &str> = HashMap::new();
    // Per call (turn, call id): its tag, how often it started, its results.
    let mut tags: HashMap<(&str, &str), String> = HashMap::new();
    let mut runs: HashMap<(&str, &str), usize> = HashMap::new();
    let mut results: HashMap<(&str, &str), Vec<&str>> = HashMap::new();
    for (e, p) in o.log.iter().zip(payloads) {
        let turn = field(p, "turn").as_str().unwrap_or_default();
        match e.payload.type_name() {
            "turn.started" => {
                started.push(turn);
                if let Some(chat) = &e.chat {
                    chat_of.insert(turn, chat);
                }
            }
            "turn.finished" | "turn.failed" | "turn.canceled" | "turn.stopped" => {
                ends.entry(turn).or_default().push(e.payload.type_name());
            }
            "turn.tool_call" => {
                let call = &p["call"];
                let args: Value =
                    serde_json::from_str(call["arguments"].as_str().unwrap_or("null"))
                        .unwrap_or(Value::Null);
                if let (Some(id), Some(tag)) = (
                    call["id"].as_str(),
                    args["command"].as_str().and_then(tag_of),
                ) {
                    tags.insert((turn, id), tag.to_owned());
                }
            }
            "turn.tool_started" => {
                let call = field(p, "call").as_str().unwrap_or_default();
                *runs.entry((turn, call)).or_default() += 1;
            }
            "turn.tool_finished" => {
                let call = field(p, "call").as_str().unwrap_or_default();
                let status = p["result"]["status"].as_str().unwrap_or_default();
                results.entry((turn, call)).or_default().push(status);
            }
            _ => {}
        }
    }
    r.count("turns started", started.len());
    let logged: HashSet<&str> = started.iter().copied().collect();
    for turn in &o.turns {
        if !logged.contains(turn.as_str()) {
            r.violate(format!("acknowledged turn {turn} is not in the log"));
        }
    }
    let pending_chats: HashSet<&str> = o
        .holds
        .values()
        .filter(|h| h.status.is_open())
        .filter_map(|h| h.chat.as_deref())
        .collect();
    let (mut finished, mut waiting) = (0, 0);
    for turn in &started {
        match ends.get(turn).map(Vec::as_slice) {
            Some(["turn.finished"]) => finished += 1,
            Some(other) => r.violate(format!("turn {turn} ended as {other:?}")),
            None if chat_of.get(turn).is_some_and(|c| pending_chats.contains(c)) => waiting += 1,
            None => r.violate(format!(
                "turn {turn} neither ended nor waits on a pending hold"
            )),
        }
    }
    r.count("  finished", finished);
    r.count("  waiting on a pending hold", waiting);

    // The file: each line a call's tag, each at most once.
    let mut lines: HashMap<&str, usize> = HashMap::new();
    for line in o.effects.lines() {
        *lines.entry(line).or_default() += 1;
    }
    r.count(
        "lines the tool appended to the file",
        o.effects.lines().count(),
    );
    let known: HashSet<&str> = tags.values().map(String::as_str).collect();
    for (line, n) in &lines {
        if *n > 1 {
            r.violate(format!("the call tagged {line} ran {n} times"));
        }
        if !known.contains(line) {
            r.violate(format!(
                "the file has {line:?}, which no logged call appends"
            ));
        }
    }
    let (mut executed, mut interrupted, mut not_run) = (0, 0, 0);
    for (call, tag) in &tags {
        let in_file = lines.get(tag.as_str()).copied().unwrap_or(0);
        if runs.get(call).copied().unwrap_or(0) > 1 {
            r.violate(format!("call {call:?} was started more than once"));
        }
        match (results.get(call).map(Vec::as_slice), in_file) {
            (Some(["executed"]), 1) => executed += 1,
            // It may have had its effect before the kill; it was not run again.
            (Some(["interrupted"]), 0 | 1) => interrupted += 1,
            (Some([status]), 0) if *status != "executed" => not_run += 1,
            // Not decided yet (its turn waits on a pending hold).
            (None, 0) => not_run += 1,
            (results, lines) => r.violate(format!(
                "call {call:?} ({tag}) has results {results:?} and {lines} lines in the file"
            )),
        }
    }
    r.count("tool calls run (result executed, one line)", executed);
    r.count(
        "tool calls interrupted by a kill (not run again)",
        interrupted,
    );
    r.count("tool calls not run (no line)", not_run);
}

/// Each live-stream client got every event of the log between its first and its last, once
/// and in order, across its resumptions.
fn streams(o: &Observed, r: &mut Report) {
    let seqs: Vec<u64> = o.log.iter().map(|e| e.seq).collect();
    for (i, f) in o.followed.iter().enumerate() {
        r.count("live-stream resumptions with Last-Event-ID", f.resumes);
        r.count("events received by live-stream clients", f.seen.len());
        for refused in &f.refused {
            r.violate(format!(
                "stream client {i} was refused a resumption: {refused}"
            ));
        }
        let (Some(first), Some(last)) = (f.seen.first(), f.seen.last()) else {
            r.violate(format!("stream client {i} received nothing"));
            continue;
        };
        let want: Vec<u64> = seqs
            .iter()
            .copied()
            .filter(|s| (first.0..=last.0).contains(s))
            .collect();
        let got: Vec<u64> = f.seen.iter().map(|(s, _)| *s).collect();
        if got != want {
            let at = got.iter().zip(&want).position(|(a, b)| a != b);
            r.violate(format!(
                "stream client {i} received {} events where the log has {} (first difference at {at:?})",
                got.len(),
                want.len()
            ));
        }
    }
}
