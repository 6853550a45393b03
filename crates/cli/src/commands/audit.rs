//! `holdpoint audit verify` and `holdpoint audit head`.

use std::path::PathBuf;
use std::sync::Arc;

use clap::{Args, Subcommand};
use holdpoint_core::store::Store;
use holdpoint_store::Database;
use serde_json::json;

use crate::{Failure, paths};

#[derive(Subcommand)]
pub enum AuditCommand {
    /// Walk the whole audit chain and report the first event that was edited, deleted or
    /// reordered; then check that the holds, grants, messages and turns the store serves are
    /// what the events say, naming each that differs. Reads only; safe while the server runs.
    #[command(
        after_help = "Examples:\n  holdpoint audit verify\n  holdpoint audit verify --data /var/lib/holdpoint --json\n  holdpoint audit verify --expect-head 1042:9f2c…   (compare with a head recorded earlier)"
    )]
    Verify(VerifyArgs),
    /// Print the newest event's position and hash. Keep it somewhere else: a later
    /// `verify --expect-head` then detects even a rewritten chain.
    #[command(after_help = "Example:\n  holdpoint audit head > /safe/place/holdpoint-head")]
    Head(DataArgs),
}

#[derive(Args)]
pub struct DataArgs {
    /// The data directory [default: $HOLDPOINT_DATA, else ~/.local/share/holdpoint].
    #[arg(long, value_name = "DIR")]
    data: Option<PathBuf>,
    /// The PostgreSQL database the servers run on, instead of SQLite in the data directory.
    #[arg(long, value_name = "URL", env = "HOLDPOINT_STORE_URL")]
    database_url: Option<String>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct VerifyArgs {
    #[command(flatten)]
    data: DataArgs,
    /// A head printed earlier by `audit head` (SEQ:HASH): that event must still be in the
    /// chain, unchanged.
    #[arg(long, value_name = "SEQ:HASH")]
    expect_head: Option<String>,
}

pub fn run(cmd: AuditCommand) -> Result<(), Failure> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::Check(format!("cannot start: {e}")))?;
    runtime.block_on(async {
        match cmd {
            AuditCommand::Verify(args) => verify(args).await,
            AuditCommand::Head(args) => head(args).await,
        }
    })
}

async fn open(data: &DataArgs) -> Result<Arc<dyn Store>, Failure> {
    let dir = paths::data_dir(data.data.clone());
    Database::open_read_only(data.database_url.as_deref(), &dir)
        .await
        .map(|d| d.store())
        .map_err(|e| Failure::Usage(e.to_string()))
}

fn storage(e: impl std::fmt::Display) -> Failure {
    Failure::Check(format!("cannot read the audit log: {e}"))
}

async fn verify(a: VerifyArgs) -> Result<(), Failure> {
    let expected = a.expect_head.as_deref().map(parse_head).transpose()?;
    let store = open(&a.data).await?;
    let result = holdpoint_core::verify(store.as_ref())
        .await
        .map_err(storage)?;
    let report = match result {
        Ok(report) => report,
        Err(broken) => {
            if a.data.json {
                println!(
                    "{}",
                    json!({"intact": false, "first_bad_event": broken.seq, "reason": broken.reason})
                );
            }
            return Err(Failure::Check(broken.to_string()));
        }
    };
    if let Some((seq, hash)) = &expected {
        let found = store
            .events(seq - 1, &Default::default(), 1)
            .await
            .map_err(storage)?;
        let ok = found
            .events
            .first()
            .is_some_and(|e| e.seq == *seq && e.hash == *hash);
        if !ok {
            let reason = format!(
                "event {seq} is not the one recorded earlier (hash {hash}): the chain was rewritten"
            );
            if a.data.json {
                println!(
                    "{}",
                    json!({"intact": false, "first_bad_event": seq, "reason": reason})
                );
            }
            return Err(Failure::Check(format!(
                "audit chain broken at event {seq}: {reason}"
            )));
        }
    }
    let state = &report.state;
    if state.mismatched > 0 {
        let summary = format!(
            "the audit chain is intact ({} events), but {} of the holds, grants, messages and turns the store serves differ from what its events say",
            report.events, state.mismatched
        );
        if a.data.json {
            println!(
                "{}",
                json!({"intact": false, "events": report.events, "head": report.head,
                       "reason": summary, "mismatches": state.mismatches,
                       "mismatched": state.mismatched})
            );
        } else {
            for m in &state.mismatches {
                eprintln!("{} {}: {}", m.kind, m.id, m.reason);
            }
            let unlisted = state.mismatched - state.mismatches.len() as u64;
            if unlisted > 0 {
                eprintln!("… and {unlisted} more");
            }
        }
        return Err(Failure::Check(summary));
    }
    if a.data.json {
        println!(
            "{}",
            json!({"intact": true, "events": report.events, "head": report.head,
                   "holds": state.holds, "grants": state.grants,
                   "messages": state.messages, "turns": state.turns})
        );
    } else {
        match &report.head {
            Some(h) => println!(
                "audit chain intact: {} events; head {}:{}",
                report.events, h.seq, h.hash
            ),
            None => println!("audit chain intact: no events yet"),
        }
        println!(
            "stored state matches the log: {} holds, {} active grants, {} messages, {} turns",
            state.holds, state.grants, state.messages, state.turns
        );
    }
    Ok(())
}

fn parse_head(s: &str) -> Result<(u64, String), Failure> {
    let bad = || {
        Failure::Usage(format!(
            "--expect-head {s:?}: write SEQ:HASH as printed by `holdpoint audit head`"
        ))
    };
    let (seq, hash) = s.split_once(':').ok_or_else(bad)?;
    let seq: u64 = seq.parse().map_err(|_| bad())?;
    if seq == 0 || hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(bad());
    }
    Ok((seq, hash.to_ascii_lowercase()))
}

async fn head(a: DataArgs) -> Result<(), Failure> {
    let store = open(&a).await?;
    let head = store.audit_head().await.map_err(storage)?;
    match (a.json, head) {
        (true, h) => println!("{}", json!({ "head": h })),
        (false, Some(h)) => println!("{}:{}", h.seq, h.hash),
        (false, None) => println!("no events yet"),
    }
    Ok(())
}
