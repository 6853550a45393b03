//! Which people a hold is mailed to: the `[[channels.routes]]` rules, and its world's own
//! (`notice_routes`, set through the API, the same shape without `world`), each matching holds
//! by world, tool and kind, and naming addresses. Every route that matches adds its addresses
//! (each address once, with the first matching route's name to decide as).
//!
//! A route also matches by the tool's MCP annotations and by the policy rule that asked, may
//! name groups of `[channels.groups]` beside addresses, and says when a hold is notified again
//! (`escalate_after`/`escalate_to`, `last_notice`: `schedule.rs` sends those).

use std::collections::BTreeMap;

use globset::{Glob, GlobMatcher};
use holdpoint_protocol::{Hold, HoldSpec, ToolAnnotations};
pub use holdpoint_protocol::{Route, RouteAnnotations};
use serde::{Deserialize, Serialize};

use super::schedule::Timing;

/// `[channels.groups]`: each group's members by name (`oncall = ["a@x.com", …]`).
pub type Groups = BTreeMap<String, Vec<Member>>;

/// A member of a group: an address (deciding as that address), or
/// `{ address = "a@x.com", as = "alice" }`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum Member {
    Address(String),
    Named(NamedMember),
}

#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct NamedMember {
    pub address: String,
    #[serde(rename = "as")]
    pub decides_as: String,
}

impl Member {
    fn recipient(&self) -> Recipient {
        let (address, decides_as) = match self {
            Member::Address(a) => (a, a),
            Member::Named(m) => (&m.address, &m.decides_as),
        };
        Recipient {
            channel: "email",
            address: address.clone(),
            decides_as: decides_as.clone(),
        }
    }
}

/// Who a group notifies, checked: each member's address and name.
fn group_members(groups: &Groups) -> Result<BTreeMap<String, Vec<Recipient>>, (String, String)> {
    let mut out = BTreeMap::new();
    for (name, members) in groups {
        let key = |i: usize| format!("channels.groups.{name}[{i}]");
        if name.trim().is_empty() {
            return Err((
                "channels.groups".into(),
                "a group's name must not be empty".into(),
            ));
        }
        if members.is_empty() {
            return Err((format!("channels.groups.{name}"), "has no members".into()));
        }
        let mut recipients = Vec::new();
        for (i, m) in members.iter().enumerate() {
            let r = m.recipient();
            if !plausible_address(&r.address) {
                return Err((key(i), format!("{:?} is not an email address", r.address)));
            }
            if r.decides_as.trim().is_empty() {
                return Err((format!("{}.as", key(i)), "must not be empty".into()));
            }
            recipients.push(r);
        }
        out.insert(name.clone(), recipients);
    }
    Ok(out)
}

/// What a route reaches beyond its own addresses: its groups' members, and when it notifies
/// again.
#[derive(Clone, Debug, Default)]
pub struct Reach {
    pub members: Vec<Recipient>,
    pub annotations: Option<ToolAnnotations>,
    pub timing: Timing,
}

/// A recipient of a hold's notice.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recipient {
    /// `email` or `slack`: the channel `address` is of.
    pub channel: &'static str,
    pub address: String,
    pub decides_as: String,
}

/// The routes, their globs compiled.
#[derive(Clone, Debug, Default)]
pub struct Routes(Vec<(Route, Option<GlobMatcher>)>, Vec<Reach>);

impl Routes {
    /// The routes of the configuration; a bad glob is an error naming the route.
    pub fn new(routes: &[Route]) -> Result<Routes, (String, String)> {
        Routes::with_groups(routes, &Groups::new())
    }

    /// The routes of the configuration with its groups; a group a route names that `groups`
    /// lacks is an error naming the route.
    pub fn with_groups(routes: &[Route], groups: &Groups) -> Result<Routes, (String, String)> {
        Routes::compile(routes, groups, "channels.routes")
    }

    /// A world's own routes (its `notice_routes`) with the configuration's groups; errors name
    /// the field as the API does (`notice_routes[1].to[0]`). They match the world's holds only,
    /// so a `world` in one is refused.
    pub fn of_world(routes: &[Route], groups: &Groups) -> Result<Routes, (String, String)> {
        if let Some(i) = routes.iter().position(|r| r.world.is_some()) {
            return Err((
                format!("notice_routes[{i}].world"),
                "a world's own route matches its holds only: leave world out".into(),
            ));
        }
        Routes::compile(routes, groups, "notice_routes")
    }

    /// `routes` checked and compiled, each error naming its field under `field`.
    fn compile(routes: &[Route], groups: &Groups, field: &str) -> Result<Routes, (String, String)> {
        let members = group_members(groups)?;
        let mut compiled = Vec::new();
        let mut reach = Vec::new();
        for (i, r) in routes.iter().enumerate() {
            let key = |k: &str| format!("{field}[{i}].{k}");
            let glob = match &r.tool {
                Some(t) => Some(
                    Glob::new(t)
                        .map_err(|e| (key("tool"), format!("{t:?} is not a glob: {e}")))?
                        .compile_matcher(),
                ),
                None => None,
            };
            if r.to.is_empty() && r.slack.is_empty() && r.groups.is_empty() {
                return Err((
                    key("to"),
                    "names no address (nor any Slack member or channel)".into(),
                ));
            }
            if let Some((j, id)) = r.slack.iter().enumerate().find(|(_, id)| !slack_id(id)) {
                return Err((
                    key(&format!("slack[{j}]")),
                    format!(
                        "{id:?} is not a Slack member or channel id (such as U024BE7LH or C024BE91L)"
                    ),
                ));
            }
            if let Some((j, a)) = r.to.iter().enumerate().find(|(_, a)| !plausible_address(a)) {
                return Err((
                    key(&format!("to[{j}]")),
                    format!("{a:?} is not an email address"),
                ));
            }
            if r.decides_as.as_deref().is_some_and(|a| a.trim().is_empty()) {
                return Err((key("as"), "must not be empty".into()));
            }
            let mut reached = Vec::new();
            for (j, g) in r.groups.iter().enumerate() {
                let Some(m) = members.get(g) else {
                    return Err((
                        key(&format!("groups[{j}]")),
                        format!("no group {g:?} in [channels.groups]"),
                    ));
                };
                reached.extend(m.iter().cloned());
            }
            if r.rule.as_deref().is_some_and(|n| n.trim().is_empty()) {
                return Err((key("rule"), "must not be empty".into()));
            }
            reach.push(Reach {
                members: reached,
                annotations: r.annotations.map(Into::into),
                timing: Timing::new(r, &format!("{field}[{i}]"), &members)?,
            });
            compiled.push((r.clone(), glob));
        }
        Ok(Routes(compiled, reach))
    }

    /// The routes `hold` of the world named `world_name` matches: each one's index, what it
    /// reaches, and its own recipients (not yet those of any other route).
    pub fn matching(&self, hold: &Hold, world_name: &str) -> Vec<(usize, &Reach, Vec<Recipient>)> {
        let mut out = Vec::new();
        for (i, ((route, glob), reach)) in self.0.iter().zip(&self.1).enumerate() {
            if !matches(route, glob.as_ref(), reach, hold, world_name) {
                continue;
            }
            let addresses = route.to.iter().map(|a| ("email", a));
            let mut own: Vec<Recipient> = addresses
                .chain(route.slack.iter().map(|id| ("slack", id)))
                .map(|(channel, address)| Recipient {
                    channel,
                    address: address.clone(),
                    decides_as: route.decides_as.clone().unwrap_or_else(|| address.clone()),
                })
                .collect();
            own.extend(reach.members.iter().cloned());
            out.push((i, reach, own));
        }
        out
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// These routes, then `more`'s: the configuration's with a world's own.
    pub fn and(&self, more: &Routes) -> Routes {
        let mut all = self.clone();
        all.0.extend(more.0.iter().cloned());
        all.1.extend(more.1.iter().cloned());
        all
    }

    /// Who hold `hold` of the world named `world_name` is mailed to.
    pub fn recipients(&self, hold: &Hold, world_name: &str) -> Vec<Recipient> {
        let mut out: Vec<Recipient> = Vec::new();
        for (_, _, own) in self.matching(hold, world_name) {
            for r in own {
                if !out.iter().any(|o| o.same(&r)) {
                    out.push(r);
                }
            }
        }
        out
    }
}

/// Whether `route` (its glob `glob`, its reach `reach`) matches `hold` of world `world_name`.
fn matches(
    route: &Route,
    glob: Option<&GlobMatcher>,
    reach: &Reach,
    hold: &Hold,
    world_name: &str,
) -> bool {
    if let Some(w) = &route.world
        && w != world_name
        && *w != hold.world
    {
        return false;
    }
    if route.kind.is_some_and(|k| k != hold.kind()) {
        return false;
    }
    if let Some(glob) = glob
        && !hold.tool().is_some_and(|t| glob.is_match(t))
    {
        return false;
    }
    if let Some(want) = &reach.annotations {
        let HoldSpec::Approval(a) = &hold.spec else {
            return false;
        };
        if !want.required_of(a.annotations.as_ref()) {
            return false;
        }
    }
    if let Some(rule) = &route.rule
        && hold.rule.as_ref().is_none_or(|r| r.name != *rule)
    {
        return false;
    }
    true
}

/// How much of a world's holds the routes reach, as far as can be known without a hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorldReach {
    /// No route names the world (nor every world).
    None,
    /// Only routes that also match by tool, kind, annotations or rule.
    Some,
    All,
}

impl Routes {
    /// How much of the holds of the world named `name` (id `id`) the routes reach.
    pub fn reach_of_world(&self, name: &str, id: &str) -> WorldReach {
        let mut reach = WorldReach::None;
        for (route, _) in &self.0 {
            if route.world.as_deref().is_some_and(|w| w != name && w != id) {
                continue;
            }
            let narrowed = route.tool.is_some()
                || route.kind.is_some()
                || route.annotations.is_some()
                || route.rule.is_some();
            if !narrowed {
                return WorldReach::All;
            }
            reach = WorldReach::Some;
        }
        reach
    }
}

impl Recipient {
    /// The same person over the same channel (addresses compared without case).
    pub fn same(&self, other: &Recipient) -> bool {
        self.channel == other.channel && self.address.eq_ignore_ascii_case(&other.address)
    }
}

/// Whether any route names an email address (`email`) or a Slack recipient (`slack`).
pub fn names(routes: &[Route], channel: &str) -> bool {
    routes.iter().any(|r| match channel {
        "slack" => !r.slack.is_empty(),
        _ => !r.to.is_empty() || !r.groups.is_empty(),
    })
}

/// A Slack member, bot or conversation id: an upper-case letter, then upper-case letters and
/// digits (`U024BE7LH`, `W…`, `C…`, `G…`, `D…`).
pub fn slack_id(id: &str) -> bool {
    id.len() >= 3
        && id.len() <= 32
        && id.starts_with(['U', 'W', 'C', 'G', 'D', 'B'])
        && id
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
}

/// `local@domain`, with nothing that could break a header.
fn plausible_address(a: &str) -> bool {
    let Some((local, domain)) = a.split_once('@') else {
        return false;
    };
    !local.is_empty()
        && domain.contains('.')
        && !a
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || "<>,;\"".contains(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_checked() {
        assert!(plausible_address("alice@example.com"));
        assert!(!plausible_address("alice"));
        assert!(!plausible_address("a b@example.com"));
        assert!(!plausible_address("a@b.c\r\nBcc: x@y.z"));
        let bad = Routes::new(&[Route {
            tool: Some("[".into()),
            to: vec!["a@b.c".into()],
            ..Route::default()
        }])
        .unwrap_err();
        assert_eq!(bad.0, "channels.routes[0].tool");
        let none = Routes::new(&[Route::default()]).unwrap_err();
        assert_eq!(none.0, "channels.routes[0].to");
        let bad = Routes::new(&[Route {
            slack: vec!["#general".into()],
            ..Route::default()
        }])
        .unwrap_err();
        assert_eq!(bad.0, "channels.routes[0].slack[0]");
        assert!(slack_id("U024BE7LH") && slack_id("C024BE91L") && !slack_id("u024"));
    }

    #[test]
    fn routes_name_slack_recipients_beside_addresses() {
        let routes = Routes::new(&[Route {
            to: vec!["a@b.c".into()],
            slack: vec!["U024BE7LH".into(), "C024BE91L".into()],
            decides_as: Some("alice".into()),
            ..Route::default()
        }])
        .unwrap();
        let hold: Hold = serde_json::from_value(serde_json::json!({
            "id": holdpoint_protocol::HoldId::random(), "batch": holdpoint_protocol::BatchId::random(),
            "world": "w", "requested_by": "bot", "created_at": "2026-01-01T00:00:00Z",
            "on_timeout": {"action": "deny"}, "approvers": [], "quorum": 1, "offers": [],
            "spec": {"kind": "approval", "tool": "t", "arguments": {}, "digest": "d"}, "status": "pending",
            "votes": [], "version": 1
        }))
        .unwrap();
        let got: Vec<(&str, String)> = routes
            .recipients(&hold, "w")
            .into_iter()
            .map(|r| (r.channel, r.address))
            .collect();
        assert_eq!(
            got,
            [
                ("email", "a@b.c".to_owned()),
                ("slack", "U024BE7LH".to_owned()),
                ("slack", "C024BE91L".to_owned())
            ]
        );
    }
}
