//! The rules about roles: who may decide holds.

use holdpoint_protocol::Role;

/// Whether this role may decide holds at all (a rule may narrow it further by name).
pub fn may_decide(role: Role) -> bool {
    matches!(role, Role::Admin | Role::Approver)
}
