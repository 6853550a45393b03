//! Active grants, indexed by world and tool so a policy decision consults them without I/O.
//! Loaded at start and kept current from committed `grant.*` events (any node's).

use std::collections::HashMap;

use holdpoint_protocol::{Grant, GrantId, GrantScope, Timestamp};

#[derive(Debug, Default)]
pub(crate) struct GrantIndex {
    by_world: HashMap<String, HashMap<String, Vec<Grant>>>,
    locations: HashMap<GrantId, (String, String)>,
}

impl GrantIndex {
    pub(crate) fn insert(&mut self, grant: Grant) {
        if grant.revoked_at.is_some() || self.locations.contains_key(&grant.id) {
            return;
        }
        self.locations
            .insert(grant.id, (grant.world.clone(), grant.tool.clone()));
        self.by_world
            .entry(grant.world.clone())
            .or_default()
            .entry(grant.tool.clone())
            .or_default()
            .push(grant);
    }

    pub(crate) fn remove(&mut self, id: GrantId) {
        let Some((world, tool)) = self.locations.remove(&id) else {
            return;
        };
        if let Some(tools) = self.by_world.get_mut(&world) {
            if let Some(list) = tools.get_mut(&tool) {
                list.retain(|g| g.id != id);
                if list.is_empty() {
                    tools.remove(&tool);
                }
            }
            if tools.is_empty() {
                self.by_world.remove(&world);
            }
        }
    }

    /// A grant that allows `tool` with arguments of `digest` in `world` / `chat` at `now`
    /// (a grant for a while matches until the instant it expires, not at it).
    pub(crate) fn find(
        &self,
        world: &str,
        chat: Option<&str>,
        tool: &str,
        digest: &str,
        now: Timestamp,
    ) -> Option<GrantId> {
        let list = self.by_world.get(world)?.get(tool)?;
        list.iter()
            .filter(|g| g.expires_at.is_none_or(|end| now < end))
            .find(|g| match g.scope {
                GrantScope::AlwaysTool => true,
                GrantScope::AlwaysArgs => g.digest.as_deref() == Some(digest),
                GrantScope::Chat => {
                    chat.is_some()
                        && g.chat.as_deref() == chat
                        && g.digest.as_deref() == Some(digest)
                }
            })
            .map(|g| g.id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use holdpoint_protocol::{HoldId, Timestamp};

    const T: Timestamp = Timestamp::EPOCH;

    #[test]
    fn a_grant_for_a_while_matches_until_its_end_exactly() {
        let mut idx = GrantIndex::default();
        let mut g = grant(GrantScope::AlwaysTool, None, None);
        let end = Timestamp::from_millis(600_000);
        g.expires_at = Some(end);
        let id = g.id;
        idx.insert(g);
        let before = Timestamp::from_millis(599_999);
        assert_eq!(idx.find("w", None, "t", "d", before), Some(id));
        assert_eq!(idx.find("w", None, "t", "d", end), None);
    }

    fn grant(scope: GrantScope, chat: Option<&str>, digest: Option<&str>) -> Grant {
        Grant {
            id: GrantId::random(),
            scope,
            world: "w".into(),
            chat: chat.map(Into::into),
            tool: "t".into(),
            digest: digest.map(Into::into),
            created_by: "alice".into(),
            created_at: Timestamp::EPOCH,
            from_hold: HoldId::random(),
            revoked_at: None,
            expires_at: None,
            expired: false,
        }
    }

    #[test]
    fn grants_match_by_scope() {
        let mut idx = GrantIndex::default();
        let chat = grant(GrantScope::Chat, Some("c1"), Some("d1"));
        let chat_id = chat.id;
        idx.insert(chat);
        assert_eq!(idx.find("w", Some("c1"), "t", "d1", T), Some(chat_id));
        assert_eq!(
            idx.find("w", Some("c2"), "t", "d1", T),
            None,
            "another chat"
        );
        assert_eq!(
            idx.find("w", Some("c1"), "t", "d2", T),
            None,
            "other arguments"
        );
        assert_eq!(idx.find("w", None, "t", "d1", T), None);
        assert_eq!(
            idx.find("x", Some("c1"), "t", "d1", T),
            None,
            "another world"
        );
        let args = grant(GrantScope::AlwaysArgs, None, Some("d2"));
        let args_id = args.id;
        idx.insert(args);
        assert_eq!(idx.find("w", Some("c9"), "t", "d2", T), Some(args_id));
        let tool = grant(GrantScope::AlwaysTool, None, None);
        let tool_id = tool.id;
        idx.insert(tool);
        assert_eq!(idx.find("w", None, "t", "anything", T), Some(tool_id));
        idx.remove(tool_id);
        assert_eq!(idx.find("w", None, "t", "anything", T), None);
        idx.remove(chat_id);
        idx.remove(args_id);
        assert!(idx.by_world.is_empty() && idx.locations.is_empty());
    }

    #[test]
    fn revoked_grants_are_not_indexed() {
        let mut idx = GrantIndex::default();
        let mut g = grant(GrantScope::AlwaysTool, None, None);
        g.revoked_at = Some(Timestamp::EPOCH);
        idx.insert(g);
        assert_eq!(idx.find("w", None, "t", "d", T), None);
    }
}
