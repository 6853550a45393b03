//! Where Holdpoint keeps its data and its configuration.

use std::path::PathBuf;

use clap::Args;
use holdpoint_server::Settings;

use crate::Failure;

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

/// Where the data and the configuration are.
#[derive(Args)]
pub struct Files {
    /// The data directory [default: $HOLDPOINT_DATA, else ~/.local/share/holdpoint].
    #[arg(long, value_name = "DIR")]
    data: Option<PathBuf>,
    /// The configuration file [default: $HOLDPOINT_CONFIG, else config.toml in the data
    /// directory if there is one].
    #[arg(long, value_name = "FILE", env = "HOLDPOINT_CONFIG")]
    config: Option<PathBuf>,
}

impl Files {
    pub fn data_dir(&self) -> PathBuf {
        data_dir(self.data.clone())
    }

    /// The settings, with the variables of this process over the file.
    pub fn settings(&self) -> Result<Settings, Failure> {
        let default = self.data_dir().join("config.toml");
        let file = self
            .config
            .clone()
            .or_else(|| default.is_file().then_some(default));
        Settings::load(file.as_deref(), std::env::vars())
            .map_err(|e| Failure::Usage(format!("configuration: {e}")))
    }
}
