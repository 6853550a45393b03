//! `holdpoint worlds routes`: a world's own notice routes (`notice_routes`), listed, set and
//! cleared through the API. They are the shape of the configuration file's
//! `[[channels.routes]]`, without `world`, and apply to the world's holds beside the file's
//! (docs/channels.md). The server checks them against its `[channels]` and names the field at
//! fault.

use std::path::PathBuf;

use clap::Subcommand;
use holdpoint_protocol::{Route, WorldChanges};
use serde::Deserialize;

use super::Common;
use crate::Failure;
use crate::connect::client_failure;
use crate::terminal::safe::clean_line;

#[derive(Subcommand)]
pub enum WorldRoutesCommand {
    /// List the world's own notice routes.
    #[command(after_help = "Example:\n  holdpoint worlds routes list lab")]
    List {
        /// The world (name or id).
        world: String,
        #[command(flatten)]
        common: Common,
    },
    /// Replace the world's own notice routes with those of a file (admins).
    #[command(
        after_help = "Examples:\n  holdpoint worlds routes set lab routes.json\n  holdpoint worlds routes set lab routes.toml\n\n\
A .toml file holds [[routes]] tables, each as a [[channels.routes]] of the configuration file \
without world; any other file (or - for standard input) a JSON list of them:\n\n  \
[{\"tool\": \"deploy_*\", \"to\": [\"dana@example.com\"], \"as\": \"dana\", \"groups\": [\"oncall\"]}]\n\n\
The groups and the email and Slack settings they need are the configuration file's."
    )]
    Set {
        /// The world (name or id).
        world: String,
        /// The routes: a .toml file of [[routes]], a JSON list, or - for JSON on standard input.
        file: PathBuf,
        #[command(flatten)]
        common: Common,
    },
    /// Remove all of the world's own notice routes (admins); the file's still apply.
    #[command(after_help = "Example:\n  holdpoint worlds routes clear lab")]
    Clear {
        /// The world (name or id).
        world: String,
        #[command(flatten)]
        common: Common,
    },
}

pub async fn run(cmd: WorldRoutesCommand) -> Result<(), Failure> {
    let (world, routes, common) = match cmd {
        WorldRoutesCommand::List { world, common } => {
            let w = common.client()?.world(&world).await;
            let w = w.map_err(client_failure)?;
            return show(&common, &w.notice_routes);
        }
        WorldRoutesCommand::Set {
            world,
            file,
            common,
        } => (world, read(&file)?, common),
        WorldRoutesCommand::Clear { world, common } => (world, Vec::new(), common),
    };
    let body = WorldChanges {
        notice_routes: Some(routes),
        ..Default::default()
    };
    let w = common.client()?.update_world(&world, &body).await;
    let w = w.map_err(client_failure)?;
    show(&common, &w.notice_routes)
}

/// The routes in `file`: `[[routes]]` tables in a `.toml` file, else a JSON list.
fn read(file: &std::path::Path) -> Result<Vec<Route>, Failure> {
    let name = file.display().to_string();
    let text = if name == "-" {
        std::io::read_to_string(std::io::stdin())
    } else {
        std::fs::read_to_string(file)
    }
    .map_err(|e| Failure::Usage(format!("cannot read {name}: {e}")))?;
    if file.extension().is_some_and(|e| e == "toml") {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Tables {
            #[serde(default)]
            routes: Vec<Route>,
        }
        let tables: Tables = toml::from_str(&text)
            .map_err(|e| Failure::Usage(format!("{name}: not [[routes]] tables: {e}")))?;
        return Ok(tables.routes);
    }
    serde_json::from_str(&text)
        .map_err(|e| Failure::Usage(format!("{name}: not a JSON list of routes: {e}")))
}

fn show(common: &Common, routes: &[Route]) -> Result<(), Failure> {
    if common.json {
        return super::print_json(&routes);
    }
    if routes.is_empty() {
        println!("No notice routes of its own.");
    }
    for (i, r) in routes.iter().enumerate() {
        println!("{}", line(i, r));
    }
    Ok(())
}

/// One route on a line: what it matches, then who it notifies and when again.
fn line(i: usize, r: &Route) -> String {
    let mut parts = vec![format!("[{i}]")];
    let mut add = |label: &str, value: Option<String>| {
        if let Some(v) = value.filter(|v| !v.is_empty()) {
            parts.push(format!("{label} {v}"));
        }
    };
    add("tool", r.tool.clone());
    add("kind", r.kind.map(|k| format!("{k:?}").to_lowercase()));
    add(
        "annotations",
        r.annotations
            .and_then(|a| serde_json::to_string(&a).ok())
            .filter(|a| a != "{}"),
    );
    add("rule", r.rule.clone());
    add("to", Some(r.to.join(", ")));
    add("slack", Some(r.slack.join(", ")));
    add("groups", Some(r.groups.join(", ")));
    add("as", r.decides_as.clone());
    add("escalate after", r.escalate_after.clone());
    add("escalate to", Some(r.escalate_to.join(", ")));
    add("last notice", r.last_notice.clone());
    clean_line(&parts.join("  "))
}
