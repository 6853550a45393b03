mod audit;
mod catalog;
mod channels;
mod chaos;
mod cluster;
mod connections;
mod disk_full;
mod escalation;
mod holds;
mod lab;
mod mcp;
mod mcp_elicit;
mod mcp_http;
mod mcp_late_upstreams;
mod mcp_restart;
mod mcp_stdio;
mod mcp_task_upstreams;
mod mcp_tasks;
mod mcp_upstreams;
mod nodes;
mod policy;
mod policy_layers;
mod postgres;
mod scripts;
mod serve;
mod takeover;
mod terminal;
mod world_a2a;
mod world_mcp;
mod world_routes;

use std::process::{Command, Output};

/// Runs `holdpoint` with `args`.
pub fn holdpoint(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_holdpoint"))
        .args(args)
        .env_remove("HOLDPOINT_DATA")
        .output()
        .unwrap()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}
