//! What the server does for a caller, whichever door the caller came in by: a REST route, the
//! MCP gateway (over HTTP, or on stdio in this process), or A2A. Each function takes the
//! [`App`](crate::app::App) and the [`Caller`](crate::auth::Caller), finds what the caller may
//! see (a credential limited to a world sees that world; an agent sees what it raised) and
//! calls the engine or the runtime once. Routes only extract a request and call one function
//! here; the protocol adapters call the same functions, so each rule is written once.
//!
//! Who may call at all is the door's business: the routes' access table
//! (`routes/table.rs`), and each adapter's own check for its role.

pub mod chats;
pub mod holds;
pub mod in_process;

/// Who raises holds: agents, and admins trying things out.
pub(crate) const RAISERS: &[holdpoint_protocol::Role] = &[
    holdpoint_protocol::Role::Agent,
    holdpoint_protocol::Role::Admin,
];
