//! Holds: validating what is asked, building the hold, and its lifecycle as pure functions.
//!
//! Every change to a hold is a [`Transition`]: the hold's next version plus the events and
//! grants that go with it. The engine commits a transition at the version it read, so two
//! racing changes cannot both apply.

mod build;
mod machine;
mod validate;

pub use build::{HoldContext, approval_hold, question_hold};
pub use machine::{
    Decided, Transition, decide, expire, fail_closed, fail_closed_option, remind, withdraw,
};

pub use validate::{
    check_held_arguments, check_name, parse_question, validate_approval, validate_question,
};
