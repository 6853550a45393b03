//! Notice routes: which people a hold is sent to (by email, on Slack), and when again. The
//! configuration file's `[[channels.routes]]` and a world's own `notice_routes` are this one
//! shape; a world's own name no `world` (they are its).

use serde::{Deserialize, Deserializer, Serialize};

use crate::{HoldKind, ToolAnnotations};

/// One notice route: the holds it matches (by world, tool, kind, annotations, rule) and the
/// people it notifies (addresses, Slack members and channels, groups of `[channels.groups]`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Route {
    /// The world's name (or id); any world when absent. Only the configuration file's routes
    /// name one: a world's own routes match its holds only, and refuse it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub world: Option<String>,
    /// A glob over the tool's name (`shell_*`, `github__*`); an approval of any tool when
    /// absent. A route with a tool matches no question.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// `approval` or `question`; either when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<HoldKind>,
    /// The email addresses to send to (`[channels.email]`).
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
    #[schema(schema_with = crate::schema::one_or_many_names)]
    pub escalate_to: Vec<String>,
    /// How long before the deadline a last notice says what the deadline will do (`"10m"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_notice: Option<String>,
}

/// The MCP annotations a route requires, as policy rules write them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize, utoipa::ToSchema)]
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escalate_to_reads_one_name_or_many_and_as_is_the_name() {
        let one: Route = serde_json::from_value(serde_json::json!({
            "to": ["a@x.io"], "as": "alice", "escalate_after": "5m", "escalate_to": "oncall"
        }))
        .unwrap();
        assert_eq!(one.escalate_to, ["oncall"]);
        assert_eq!(one.decides_as.as_deref(), Some("alice"));
        let many: Route =
            serde_json::from_value(serde_json::json!({"escalate_to": ["a", "b"]})).unwrap();
        assert_eq!(many.escalate_to, ["a", "b"]);
        assert!(serde_json::from_value::<Route>(serde_json::json!({"too": []})).is_err());
    }
}
