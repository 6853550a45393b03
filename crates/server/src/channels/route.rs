//! Which people a hold is mailed to: the `[[channels.routes]]` rules, each matching holds by
//! world, tool and kind, and naming addresses. Every route that matches adds its addresses
//! (each address once, with the first matching route's name to decide as).

use globset::{Glob, GlobMatcher};
use holdpoint_protocol::{Hold, HoldKind};
use serde::{Deserialize, Serialize};

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
    pub to: Vec<String>,
    /// The approver's name a decision through these addresses' links is recorded as (the name
    /// a rule's `approvers` lists); the address itself when absent.
    #[serde(default, rename = "as", skip_serializing_if = "Option::is_none")]
    pub decides_as: Option<String>,
}

/// A recipient of a hold's notice.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recipient {
    pub address: String,
    pub decides_as: String,
}

/// The routes, their globs compiled.
#[derive(Clone, Debug, Default)]
pub struct Routes(Vec<(Route, Option<GlobMatcher>)>);

impl Routes {
    /// The routes of the configuration; a bad glob is an error naming the route.
    pub fn new(routes: &[Route]) -> Result<Routes, (String, String)> {
        let mut compiled = Vec::new();
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
            if r.to.is_empty() {
                return Err((key("to"), "names no address".into()));
            }
            if let Some(a) = r.to.iter().find(|a| !plausible_address(a)) {
                return Err((key("to"), format!("{a:?} is not an email address")));
            }
            if r.decides_as.as_deref().is_some_and(|a| a.trim().is_empty()) {
                return Err((key("as"), "must not be empty".into()));
            }
            compiled.push((r.clone(), glob));
        }
        Ok(Routes(compiled))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Who hold `hold` of the world named `world_name` is mailed to.
    pub fn recipients(&self, hold: &Hold, world_name: &str) -> Vec<Recipient> {
        let mut out: Vec<Recipient> = Vec::new();
        for (route, glob) in &self.0 {
            if let Some(w) = &route.world
                && w != world_name
                && *w != hold.world
            {
                continue;
            }
            if route.kind.is_some_and(|k| k != hold.kind()) {
                continue;
            }
            if let Some(glob) = glob {
                match hold.tool() {
                    Some(tool) if glob.is_match(tool) => {}
                    _ => continue,
                }
            }
            for address in &route.to {
                if out.iter().any(|r| r.address.eq_ignore_ascii_case(address)) {
                    continue;
                }
                out.push(Recipient {
                    address: address.clone(),
                    decides_as: route.decides_as.clone().unwrap_or_else(|| address.clone()),
                });
            }
        }
        out
    }
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
    }
}
