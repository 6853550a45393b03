//! The engine on real SQLite files: raising, deciding, racing, expiring, restarting.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
