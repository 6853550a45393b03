pub mod ask;
pub mod audit;
pub mod chat;
pub mod completions;
pub mod exec;
pub mod holds;
pub mod policy;
pub mod raise;
pub mod serve;

use crate::Failure;

/// The async runtime the networked commands run on.
pub fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::Check(format!("cannot start: {e}")))
}
