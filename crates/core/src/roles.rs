//! The rules about roles: who may decide holds, and what kind of actor each role acts as.

use holdpoint_protocol::{Actor, Principal, Role, Source};

/// Whether this role may decide holds at all (a rule may narrow it further by name).
pub fn may_decide(role: Role) -> bool {
    matches!(role, Role::Admin | Role::Approver)
}

/// The actor recorded when this principal acts: admins and approvers act as people, agent
/// credentials as agents; the name and role are always kept, and the client it acted through
/// when it named one.
pub fn actor_of(who: &Principal) -> Actor {
    let source = match who.role {
        Role::Admin | Role::Approver => Source::Person,
        Role::Agent => Source::Agent,
    };
    Actor {
        source,
        name: Some(who.name.clone()),
        role: Some(who.role),
        via: who.via.clone(),
    }
}
