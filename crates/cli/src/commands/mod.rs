pub mod ask;
pub mod audit;
pub mod catalog;
pub mod chat;
pub mod completions;
pub mod exec;
pub mod holds;
pub mod policy;
pub mod raise;
pub mod serve;

use serde::Serialize;

use crate::Failure;

/// Prints `value` as the API's own JSON (for `--json`).
pub fn print_json(value: &impl Serialize) -> Result<(), Failure> {
    let text =
        serde_json::to_string_pretty(value).map_err(|e| Failure::Check(format!("error: {e}")))?;
    println!("{text}");
    Ok(())
}

/// The async runtime the networked commands run on.
pub fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::Check(format!("cannot start: {e}")))
}
