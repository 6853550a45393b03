//! The HTTP API as the CLI uses it: the typed client of `holdpoint-client`, a method per
//! operation with one error type, and the live event stream.

pub use holdpoint_client::{Client, ClientError, EventStream};
