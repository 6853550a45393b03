//! Where Holdpoint keeps its data.

use std::path::PathBuf;

/// `--data`, else `$HOLDPOINT_DATA`, else `$XDG_DATA_HOME/holdpoint`, else
/// `~/.local/share/holdpoint`, else `./holdpoint-data`.
pub fn data_dir(flag: Option<PathBuf>) -> PathBuf {
    flag.or_else(|| std::env::var_os("HOLDPOINT_DATA").map(PathBuf::from))
        .or_else(|| std::env::var_os("XDG_DATA_HOME").map(|d| PathBuf::from(d).join("holdpoint")))
        .or_else(|| {
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share/holdpoint"))
        })
        .unwrap_or_else(|| PathBuf::from("holdpoint-data"))
}
