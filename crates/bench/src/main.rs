//! Holdpoint's benchmarks. Run them optimised, in the `profiling` profile (the release build
//! with line tables, so a profiler's samples map to source lines):
//!
//!     cargo run --profile profiling -p holdpoint-bench -- all
//!
//! Each prints its figures; none asserts a target (speed is measured here, not in tests).

mod a2a;
mod channels;
mod compare;
mod cpu;
mod cycle;
mod disk;
mod fanout;
mod floor;
mod http;
mod inbox;
mod mcp;
mod mcp_http;
mod pending;
mod policy;
mod stats;
mod takeover;
mod timers;
mod verify;
mod wire;

use std::path::PathBuf;

use anyhow::Context;
use cap::Cap;
use clap::{Parser, Subcommand};

/// Concurrent callers of the durable cycle: up to 256 shows latency under load; beyond, how far
/// group commit takes throughput.
const CYCLE_LEVELS: [usize; 6] = [1, 16, 64, 256, 512, 1024];
/// Concurrent callers of the HTTP cycle.
const HTTP_LEVELS: [usize; 2] = [1, 16];
/// How long each level runs, after half a second of warm-up.
const SECONDS: f64 = 4.0;
/// How long policy evaluation runs.
const POLICY_SECONDS: f64 = 3.0;

/// Counts the Rust heap, so memory per pending hold can be measured exactly; underneath, the
/// allocator the `holdpoint` binary uses.
#[global_allocator]
static ALLOCATOR: Cap<mimalloc::MiMalloc> = Cap::new(mimalloc::MiMalloc, usize::MAX);

#[derive(Parser)]
#[command(
    name = "holdpoint-bench",
    about = "Holdpoint's benchmarks (run with --profile profiling)"
)]
struct Cli {
    /// Where databases are created [default: a temporary directory under ./target].
    #[arg(long, global = true, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Run the durable and HTTP cycles on PostgreSQL (a schema of their own in this
    /// database, dropped afterwards) instead of SQLite.
    #[arg(long, global = true, value_name = "URL")]
    database_url: Option<String>,
    #[command(subcommand)]
    bench: Bench,
}

#[derive(Subcommand)]
enum Bench {
    /// Policy evaluation with 100 rules, on one core.
    Policy {
        #[arg(long, default_value_t = POLICY_SECONDS)]
        seconds: f64,
    },
    /// Durable hold cycles (create → decide → outcome observed) on SQLite (or PostgreSQL).
    Cycle {
        /// Concurrent callers (repeat for several runs).
        #[arg(long = "concurrency", default_values_t = CYCLE_LEVELS)]
        concurrency: Vec<usize>,
        #[arg(long, default_value_t = SECONDS)]
        seconds: f64,
    },
    /// Full cycles over HTTP on loopback against an in-process `holdpoint serve`.
    Http {
        /// Concurrent callers (repeat for several runs).
        #[arg(long = "concurrency", default_values_t = HTTP_LEVELS)]
        concurrency: Vec<usize>,
        #[arg(long, default_value_t = SECONDS)]
        seconds: f64,
    },
    /// The HTTP cycle on SQLite, on PostgreSQL with one node, and spread over several nodes
    /// on one PostgreSQL database (needs --database-url), in one run.
    Nodes {
        /// Nodes to spread the cycle over.
        #[arg(long, default_value_t = 3)]
        nodes: usize,
        /// Concurrent callers (repeat for several runs).
        #[arg(long = "concurrency", default_values_t = HTTP_LEVELS)]
        concurrency: Vec<usize>,
        #[arg(long, default_value_t = SECONDS)]
        seconds: f64,
    },
    /// The MCP gateway over HTTP: a call of an asked tool at `/mcp/{world}` → hold → decision
    /// over the API → the call's result.
    McpHttp {
        /// Concurrent callers (repeat for several runs).
        #[arg(long = "concurrency", default_values_t = HTTP_LEVELS)]
        concurrency: Vec<usize>,
        #[arg(long, default_value_t = SECONDS)]
        seconds: f64,
    },
    /// A turn through A2A beside the same turn through the REST API: an allowed tool call,
    /// then the answer (`SendMessage` blocking, against a message and the chat's live stream).
    A2a {
        /// Concurrent callers (repeat for several runs).
        #[arg(long = "concurrency", default_values_t = HTTP_LEVELS)]
        concurrency: Vec<usize>,
        #[arg(long, default_value_t = SECONDS)]
        seconds: f64,
    },
    /// Email notices: a hold created until its mail is accepted by a local SMTP server, and a
    /// decision link confirmed until the agent's wait returns, holds one at a time.
    Channels {
        #[arg(long, default_value_t = 200)]
        holds: usize,
    },
    /// Memory per pending hold, first-page latency and restart with many pending; the
    /// restart timed twice, the second time with the database out of the page cache.
    Pending {
        #[arg(long, default_value_t = 100_000)]
        holds: usize,
        /// Keep the database at PATH: the run that creates it raises the holds and times
        /// the first pages; a later run with the same --holds finds them there and times
        /// only the restarts (ten million take minutes to raise).
        #[arg(long, value_name = "PATH")]
        database: Option<PathBuf>,
    },
    /// Many deadlines: pending holds whose deadlines fall evenly over `--spread` seconds,
    /// timed out by the engine on the system clock; how late each timeout is, and memory.
    /// Not part of `all` (it lasts the spread).
    Timers {
        #[arg(long, default_value_t = 100_000)]
        holds: usize,
        /// Seconds over which the deadlines fall (an hour by default; shorter puts the same
        /// deadlines closer together).
        #[arg(long, default_value_t = 3600.0)]
        spread: f64,
        /// Seconds from the start to the first deadline (time to raise them all).
        #[arg(long, default_value_t = 60.0)]
        lead: f64,
    },
    /// `audit verify` over a log of about this many events (holds raised, then withdrawn):
    /// the chain and the stored state compared with it, on a store opened afresh.
    Verify {
        #[arg(long, default_value_t = 1_000_000)]
        events: usize,
    },
    /// The web inbox with many pending holds: the server's time for the first page, and in a
    /// real browser (Chromium and chromedriver, so it is not part of `all`) the inbox's first
    /// paint, the time from a hold's creation until the inbox shows it (its row, or the count
    /// of new holds), a burst raised into an open inbox (its longest main-thread task, and
    /// when every hold is accounted for) and approvals decided with the keyboard alone.
    /// The browser is not started where --reloads, --arriving, --burst and --triage are all 0.
    Inbox {
        #[arg(long, default_value_t = 10_000)]
        holds: usize,
        /// Requests timed for each part of the first page.
        #[arg(long, default_value_t = 300)]
        requests: usize,
        /// Times the inbox is loaded afresh, each timed from the navigation's start to its
        /// first rows in the page (0: skipped).
        #[arg(long, default_value_t = 10)]
        reloads: usize,
        /// Holds created one by one while the browser shows the inbox (0: skipped).
        #[arg(long, default_value_t = 100)]
        arriving: usize,
        /// Holds raised as fast as the API takes them (64 a request, 4 requests in flight)
        /// into an open inbox (0: skipped).
        #[arg(long, default_value_t = 10_000)]
        burst: usize,
        /// Approvals raised, then decided one by one with the key `a`, each timed from the
        /// key press to the decision on the live stream (0: skipped).
        #[arg(long, default_value_t = 20)]
        triage: usize,
    },
    /// The MCP gateway's added latency for an allowed call over stdio: the same client and
    /// upstream, directly and through `holdpoint mcp` (built beside this program:
    /// `cargo build --profile profiling -p holdpoint-cli -p holdpoint-bench`).
    Mcp {
        /// Calls timed each way.
        #[arg(long, default_value_t = 10_000)]
        calls: usize,
        /// The `holdpoint` binary [default: the one beside this program].
        #[arg(long, value_name = "PATH")]
        holdpoint: Option<PathBuf>,
    },
    /// Takeover on PostgreSQL (needs --database-url): the time from a node's death to its
    /// turns running on another node, two `holdpoint serve` processes (built beside this
    /// program, as for `mcp`), so it is not part of `all`.
    Takeover {
        /// Turns waiting on holds on the node that dies.
        #[arg(long, default_value_t = 20)]
        turns: usize,
        /// The nodes' `server.turn_lease`, in milliseconds.
        #[arg(long, default_value_t = 5000)]
        lease_ms: u64,
        /// The `holdpoint` binary [default: the one beside this program].
        #[arg(long, value_name = "PATH")]
        holdpoint: Option<PathBuf>,
    },
    /// Fan-out and soak: live event streams on one `holdpoint serve` (built beside this
    /// program, as for `mcp`) while holds are raised and decided at a steady rate: delivery
    /// to the slowest reader, the server's memory and descriptors over time, and what happens
    /// to readers that stop reading. Not part of `all` (10 minutes by default).
    Fanout {
        /// Live streams, those that stop reading included.
        #[arg(long, default_value_t = 1000)]
        subscribers: usize,
        /// Streams that stop reading once open.
        #[arg(long, default_value_t = 10)]
        stalled: usize,
        #[arg(long, default_value_t = 600.0)]
        seconds: f64,
        /// Holds raised and answered per second.
        #[arg(long, default_value_t = 10.0)]
        rate: f64,
        /// Seconds between samples of the server's memory.
        #[arg(long, default_value_t = 10.0)]
        sample: f64,
        /// The server's `server.send_timeout`, in seconds.
        #[arg(long, default_value_t = 30)]
        send_timeout: u64,
        /// Bytes of context each question carries (bigger events fill a stopped reader's
        /// buffers sooner; at most 65,000).
        #[arg(long, default_value_t = 0)]
        payload: usize,
        /// The `holdpoint` binary [default: the one beside this program].
        #[arg(long, value_name = "PATH")]
        holdpoint: Option<PathBuf>,
    },
    /// Two builds' figures side by side: the outputs of the same benchmarks run in several
    /// rounds by each (`scripts/bench-compare` builds both and runs them interleaved).
    Compare {
        /// The base build's outputs, one file per round.
        #[arg(long, required = true, num_args = 1.., value_name = "FILE")]
        base: Vec<PathBuf>,
        /// The head build's outputs, one file per round, in the same order.
        #[arg(long, required = true, num_args = 1.., value_name = "FILE")]
        head: Vec<PathBuf>,
    },
    /// The benchmark's upstream MCP server on stdio (started by `mcp`).
    #[command(hide = true)]
    McpUpstream,
    /// All of the above with their defaults, except `inbox`, `mcp`, `takeover` and `verify`
    /// (and `nodes` only with --database-url).
    All,
}

fn bench_dir(flag: Option<PathBuf>) -> anyhow::Result<tempfile::TempDir> {
    let base = flag.unwrap_or_else(|| PathBuf::from("target"));
    std::fs::create_dir_all(&base)?;
    Ok(tempfile::Builder::new()
        .prefix("holdpoint-bench-")
        .tempdir_in(base)?)
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match &cli.bench {
        Bench::McpUpstream => return mcp::serve_upstream(),
        Bench::Compare { base, head } => return compare::run(base, head),
        _ => {}
    }
    if cfg!(debug_assertions) {
        println!("warning: a debug build; run with --profile profiling for meaningful figures\n");
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    match cli.bench {
        Bench::Policy { seconds } => {
            policy::run(seconds);
            runtime.block_on(policy::replay_stored(&bench_dir(cli.dir)?, 100_000))?;
        }
        Bench::Cycle {
            concurrency,
            seconds,
        } => runtime.block_on(cycle::run(
            &bench_dir(cli.dir)?,
            cli.database_url.as_deref(),
            &concurrency,
            seconds,
        ))?,
        Bench::Http {
            concurrency,
            seconds,
        } => runtime.block_on(http::run(
            &bench_dir(cli.dir)?,
            cli.database_url.as_deref(),
            &concurrency,
            seconds,
        ))?,
        Bench::Nodes {
            nodes,
            concurrency,
            seconds,
        } => {
            let url = cli
                .database_url
                .as_deref()
                .context("nodes share a PostgreSQL database: give --database-url")?;
            runtime.block_on(http::compare_nodes(
                &bench_dir(cli.dir)?,
                url,
                nodes,
                &concurrency,
                seconds,
            ))?
        }
        Bench::McpHttp {
            concurrency,
            seconds,
        } => runtime.block_on(mcp_http::run(&bench_dir(cli.dir)?, &concurrency, seconds))?,
        Bench::A2a {
            concurrency,
            seconds,
        } => runtime.block_on(a2a::run(&bench_dir(cli.dir)?, &concurrency, seconds))?,
        Bench::Pending { holds, database } => {
            let database = match database {
                Some(path) => pending::Database::Kept(path),
                None => pending::Database::Temporary(bench_dir(cli.dir)?),
            };
            runtime.block_on(pending::run(&database, holds))?
        }
        Bench::Channels { holds } => {
            runtime.block_on(channels::run(&bench_dir(cli.dir)?, holds.max(1)))?
        }
        Bench::Timers {
            holds,
            spread,
            lead,
        } => runtime.block_on(timers::run(
            &bench_dir(cli.dir)?,
            holds.max(1),
            std::time::Duration::from_secs_f64(spread.max(0.0)),
            std::time::Duration::from_secs_f64(lead.max(0.0)),
        ))?,
        Bench::Verify { events } => runtime.block_on(verify::run(&bench_dir(cli.dir)?, events))?,
        Bench::Inbox {
            holds,
            requests,
            reloads,
            arriving,
            burst,
            triage,
        } => runtime.block_on(inbox::run(
            &bench_dir(cli.dir)?,
            holds,
            requests,
            inbox::Browsing {
                arriving,
                reloads,
                burst,
                triage,
            },
        ))?,
        Bench::Mcp { calls, holdpoint } => {
            runtime.block_on(mcp::run(&bench_dir(cli.dir)?, calls, holdpoint))?
        }
        Bench::Takeover {
            turns,
            lease_ms,
            holdpoint,
        } => runtime.block_on(takeover::run(
            &bench_dir(cli.dir)?,
            cli.database_url.as_deref(),
            holdpoint,
            turns.max(1),
            std::time::Duration::from_millis(lease_ms),
        ))?,
        Bench::Fanout {
            subscribers,
            stalled,
            seconds,
            rate,
            sample,
            send_timeout,
            payload,
            holdpoint,
        } => runtime.block_on(fanout::run(
            &bench_dir(cli.dir)?,
            holdpoint,
            fanout::Options {
                subscribers,
                stalled: stalled.min(subscribers),
                seconds,
                rate: rate.max(0.1),
                sample: sample.max(0.1),
                send_timeout: send_timeout.max(1),
                payload: payload.min(65_000),
            },
        ))?,
        // Answered above, before a runtime is made.
        Bench::McpUpstream | Bench::Compare { .. } => {}
        Bench::All => {
            policy::run(POLICY_SECONDS);
            runtime.block_on(policy::replay_stored(&bench_dir(cli.dir.clone())?, 100_000))?;
            runtime.block_on(cycle::run(
                &bench_dir(cli.dir.clone())?,
                cli.database_url.as_deref(),
                &CYCLE_LEVELS,
                SECONDS,
            ))?;
            runtime.block_on(http::run(
                &bench_dir(cli.dir.clone())?,
                cli.database_url.as_deref(),
                &HTTP_LEVELS,
                SECONDS,
            ))?;
            if let Some(url) = cli.database_url.as_deref() {
                runtime.block_on(http::compare_nodes(
                    &bench_dir(cli.dir.clone())?,
                    url,
                    3,
                    &HTTP_LEVELS,
                    SECONDS,
                ))?;
            }
            runtime.block_on(mcp_http::run(
                &bench_dir(cli.dir.clone())?,
                &HTTP_LEVELS,
                SECONDS,
            ))?;
            runtime.block_on(a2a::run(
                &bench_dir(cli.dir.clone())?,
                &HTTP_LEVELS,
                SECONDS,
            ))?;
            runtime.block_on(channels::run(&bench_dir(cli.dir.clone())?, 200))?;
            let database = pending::Database::Temporary(bench_dir(cli.dir.clone())?);
            runtime.block_on(pending::run(&database, 100_000))?;
        }
    }
    Ok(())
}
