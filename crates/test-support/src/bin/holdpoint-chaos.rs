//! `holdpoint-chaos`: the crash loop with as many kills as asked (`scripts/chaos` builds and
//! runs it). Exits 1 when a check failed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use clap::Parser;
use holdpoint_test_support::chaos::{self, Config};

/// Kill `holdpoint serve` with SIGKILL at random moments under load, restart it, and check
/// that nothing acknowledged was lost and nothing was done twice.
#[derive(Parser)]
#[command(name = "holdpoint-chaos")]
struct Args {
    /// How many times the server is killed.
    #[arg(default_value_t = 100)]
    kills: usize,
    /// The seed of the random choices [default: from the clock; printed].
    #[arg(long)]
    seed: Option<u64>,
    /// The `holdpoint` binary [default: the one beside this program].
    #[arg(long, value_name = "PATH")]
    holdpoint: Option<PathBuf>,
    /// Where the run's files go [default: a new directory under the system's temporary one];
    /// kept afterwards.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Print a line every this many kills.
    #[arg(long, default_value_t = 10)]
    progress: usize,
}

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    let holdpoint = args.holdpoint.unwrap_or_else(|| {
        let me = std::env::current_exe().unwrap();
        me.with_file_name("holdpoint")
    });
    let dir = args.dir.unwrap_or_else(|| {
        tempfile::Builder::new()
            .prefix("holdpoint-chaos-")
            .tempdir()
            .unwrap()
            .keep()
    });
    println!("chaos: files in {}", dir.display());
    let config = Config {
        holdpoint,
        dir,
        kills: args.kills,
        seed: args.seed.unwrap_or_else(chaos::fresh_seed),
        progress: args.progress,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let report = runtime.block_on(chaos::run(&config));
    if report.ok() {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::FAILURE
    }
}
