//! Which people a hold is mailed to: the `[[channels.routes]]` rules, each matching holds by
//! world, tool and kind, and naming addresses. Every route that matches adds its addresses
//! (each address once, with the first matching route's name to decide as).
//!
//! A route also matches by the tool's MCP annotations and by the policy rule that asked, may
//! name groups of `[channels.groups]` beside addresses, and says when a hold is notified again
//! (`escalate_after`/`escalate_to`, `last_notice`: `schedule.rs` sends those).

use std::collections::BTreeMap;

use globset::{Glob, GlobMatcher};
use holdpoint_protocol::{Hold, HoldKind, HoldSpec, ToolAnnotations};
use serde::{Deserialize, Deserializer, Serialize};

use super::schedule::Timing;

/// One rule of `[[channels.routes]]`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Route {
    /// The world's name (or id); any world when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub world: Option<String>,
    /// A glob over the tool's name (`shell_*`, `github__*`); an approval of any tool when
    /// absent. A route with a tool matches no question.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// `approval` or `question`; either when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<HoldKind>,
    /// The email addresses to send to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub to: Vec<String>,
    /// The Slack members (`U024BE7LH`) and channels (`C024BE91L`) to post to
    /// (`[channels.slack]`). Who may decide from Slack is `[channels.slack.users]`'s.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slack: Vec<String>,
    /// The approver's name a decision through these addresses' links is recorded as (the name
    /// a rule's `approvers` lists); the address itself when absent.
    #[serde(default, rename = "as", skip_serializing_if = "Option::is_none")]
    pub decides_as: Option<String>,
    /// Groups of `[channels.groups]` whose members are mailed too, each deciding as the name
    /// the group gives them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    /// MCP annotations the tool must have (`{ destructive = true }`): each one given must be
    /// set on the tool, and equal. A route with annotations matches no question.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<RouteAnnotations>,
    /// The name of the policy rule that asked for the hold (`rules[N]` for a rule without a
    /// name); a hold no rule asked for (the mode's default, a question) does not match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// When nobody decided within this long (`"15m"`) of the hold's creation, the first group
    /// of `escalate_to` is notified; each next one after as long again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalate_after: Option<String>,
    /// The groups notified one after another while nobody decides (a name or a list).
    #[serde(
        default,
        deserialize_with = "one_or_many",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub escalate_to: Vec<String>,
    /// How long before the deadline a last notice says what the deadline will do (`"10m"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_notice: Option<String>,
}

/// The MCP annotations a route requires, as policy rules write them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RouteAnnotations {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destructive: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotent: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_world: Option<bool>,
}

impl From<RouteAnnotations> for ToolAnnotations {
    fn from(a: RouteAnnotations) -> Self {
        ToolAnnotations {
            read_only: a.read_only,
            destructive: a.destructive,
            idempotent: a.idempotent,
            open_world: a.open_world,
        }
    }
}

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

/// A name, or a list of names.
fn one_or_many<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    Ok(match OneOrMany::deserialize(d)? {
        OneOrMany::One(s) => vec![s],
        OneOrMany::Many(v) => v,
    })
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
        let members = group_members(groups)?;
        let mut compiled = Vec::new();
        let mut reach = Vec::new();
        for (i, r) in routes.iter().enumerate() {
            let key = |k: &str| format!("channels.routes[{i}].{k}");
            let glob = match &r.tool {
                Some(t) => Some(
                    Glob::new(t)
                        .map_err(|e| (key("tool"), format!("{t:?} is not a glob: {e}")))?
                        .compile_matcher(),
                ),
                None => None,
            };
            if r.to.is_empty() && r.slack.is_empty() && r.groups.is_empty() {
                return Err((key("to"), "names no address (nor any Slack member or channel)".into()));
            }
            if let Some(id) = r.slack.iter().find(|id| !slack_id(id)) {
                return Err((
                    key("slack"),
                    format!("{id:?} is not a Slack member or channel id (such as U024BE7LH or C024BE91L)"),
                ));
            }
            if let Some(a) = r.to.iter().find(|a| !plausible_address(a)) {
                return Err((key("to"), format!("{a:?} is not an email address")));
            }
            if r.decides_as.as_deref().is_some_and(|a| a.trim().is_empty()) {
                return Err((key("as"), "must not be empty".into()));
            }
            let mut reached = Vec::new();
            for g in &r.groups {
                let Some(m) = members.get(g) else {
                    return Err((
                        key("groups"),
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
                timing: Timing::new(r, i, &members)?,
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
        && id.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
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
        assert_eq!(bad.0, "channels.routes[0].slack");
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
