//! The full cycle over real HTTP on loopback, as an external agent and a person see it:
//!
//! 1. **create**: the agent `POST`s a question to `/api/v1/worlds/{w}/holds`, then long-polls
//!    `…/holds/{id}/wait`;
//! 2. **notify**: the approver's live stream (`GET /api/v1/events`, one stream for all callers)
//!    delivers `hold.created` (measured from the create response; zero when the event came
//!    first);
//! 3. **decide**: the approver `POST`s the answer to `…/holds/{id}/decision`;
//! 4. **resume**: from the moment the decision is sent until the agent's wait returns.
//!
//! The server runs in this process (same SQLite durability as `holdpoint serve`) and is reached
//! only through its socket. The cycles' requests go over lean keep-alive connections, two per
//! caller (see wire.rs); setting up and the approver's stream use reqwest.
//!
//! On PostgreSQL the cycle can also be spread over several nodes (servers in this process on
//! one database, each with its own store connections, tail and engine): caller `i` raises
//! and waits on node `i`, decides on the next node, and the approver's stream is on the last
//! one, so every leg but the create crosses nodes.
//!
//! Each level reports the CPU time a cycle of the processes involved (cpu.rs, [`Involved`]):
//! this one (the nodes and the callers) and PostgreSQL's, whatever else the machine runs.
//! `nodes` ends with PostgreSQL's targets: one node's cycles a second against SQLite's, and
//! several nodes' CPU time a cycle against one node's (on one small machine the nodes share
//! its CPUs, so their rate says little).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use holdpoint_protocol::sse::SseDecoder;
use holdpoint_server::config::LimitSettings;
use holdpoint_server::{Server, Settings};
use holdpoint_test_support::pg::TempSchema;
use parking_lot::Mutex;
use reqwest::{Client, Response};
use serde::Deserialize;
use serde::de::{DeserializeOwned, IgnoredAny};
use serde_json::{Value, json};
use tokio::sync::oneshot;

use crate::cpu::{CpuTimes, Involved, InvolvedShares};
use crate::stats::{Latencies, ms};
use crate::wire::Connection;

pub(crate) const WORLD: &str = "bench";

/// The four legs and the whole cycle, as measured by one caller.
#[derive(Default)]
struct Samples {
    create: Vec<Duration>,
    notify: Vec<Duration>,
    decide: Vec<Duration>,
    resume: Vec<Duration>,
    cycle: Vec<Duration>,
    /// The share of the machine's CPUs busy while the samples were taken.
    busy: Option<f64>,
    /// The share the processes involved took meanwhile: this one (nodes and callers) and
    /// PostgreSQL's.
    involved: Option<InvolvedShares>,
}

impl Samples {
    fn extend(&mut self, other: Samples) {
        self.create.extend(other.create);
        self.notify.extend(other.notify);
        self.decide.extend(other.decide);
        self.resume.extend(other.resume);
        self.cycle.extend(other.cycle);
        self.busy = self.busy.or(other.busy);
        self.involved = self.involved.or(other.involved);
    }
}

// The load generator reads only the fields it needs from each answer, as a lean client would:
// its CPU is taken from the same two cores as the server's.

/// `{"token": …}`, a new token's secret.
#[derive(Deserialize)]
struct NewToken {
    token: String,
}

/// `{"results": [{"hold": {"id": …}}]}`, the holds raised.
#[derive(Deserialize)]
pub(crate) struct Raised {
    results: Vec<RaisedItem>,
}

impl Raised {
    /// The ids of the holds raised, in the order of the request's items.
    pub(crate) fn ids(self) -> impl Iterator<Item = String> {
        self.results
            .into_iter()
            .filter_map(|r| r.hold)
            .map(|h| h.id)
    }
}

#[derive(Deserialize)]
struct RaisedItem {
    hold: Option<HoldRef>,
}

#[derive(Deserialize)]
struct HoldRef {
    id: String,
}

/// `{"decided": …}`, what a wait returned.
#[derive(Deserialize)]
struct Waited {
    decided: bool,
}

/// `{"hold": …}`, the data of a live event about a hold.
#[derive(Deserialize)]
struct AboutHold {
    hold: String,
}

/// A caller of the server's API, to set up (the cycles use [`Connection`]s).
#[derive(Clone)]
pub(crate) struct Caller {
    pub(crate) http: Client,
    pub(crate) base: String,
    pub(crate) token: String,
}

impl Caller {
    pub(crate) async fn post<T: DeserializeOwned>(
        &self,
        path: &str,
        body: Value,
        expect: u16,
    ) -> anyhow::Result<T> {
        let response = self
            .http
            .post(format!("{}{path}", self.base))
            .json(&body)
            .bearer_auth(&self.token)
            .send()
            .await?;
        let status = response.status().as_u16();
        let text = response.text().await?;
        if status != expect {
            bail!("expected status {expect}, got {status}: {text}");
        }
        Ok(serde_json::from_str(&text)?)
    }

    /// A new token of `role`, limited to the bench's world.
    pub(crate) async fn token(&self, name: &str, role: &str) -> anyhow::Result<Caller> {
        let created: NewToken = self
            .post(
                "/api/v1/tokens",
                json!({"name": name, "role": role, "world": WORLD}),
                201,
            )
            .await?;
        Ok(Caller {
            token: created.token,
            ..self.clone()
        })
    }
}

/// When the approver's stream saw a hold, or who waits to hear of it.
enum Sighting {
    Seen(Instant),
    Awaited(oneshot::Sender<Instant>),
}

/// Routes `hold.created` events from the one approver stream to the callers that raised them.
#[derive(Clone, Default)]
struct Sightings(Arc<Mutex<HashMap<String, Sighting>>>);

impl Sightings {
    fn seen(&self, hold: String) {
        let now = Instant::now();
        let mut map = self.0.lock();
        match map.remove(&hold) {
            Some(Sighting::Awaited(tx)) => {
                let _ = tx.send(now);
            }
            _ => {
                map.insert(hold, Sighting::Seen(now));
            }
        }
    }

    async fn wait_for(&self, hold: &str) -> anyhow::Result<Instant> {
        let rx = {
            let mut map = self.0.lock();
            match map.remove(hold) {
                Some(Sighting::Seen(at)) => return Ok(at),
                _ => {
                    let (tx, rx) = oneshot::channel();
                    map.insert(hold.to_owned(), Sighting::Awaited(tx));
                    rx
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(30), rx)
            .await
            .context("the approver's stream never delivered the hold")?
            .context("the approver's stream ended")
    }
}

/// Reads the approver's live stream until it ends, reporting each `hold.created`.
async fn follow(mut stream: Response, sightings: Sightings) -> anyhow::Result<()> {
    let mut frames = SseDecoder::default();
    while let Some(chunk) = stream.chunk().await? {
        frames.push(&chunk);
        while let Some(frame) = frames.next_frame() {
            if frame.event != "hold.created" {
                continue;
            }
            let data: AboutHold = serde_json::from_str(&frame.data)?;
            sightings.seen(data.hold);
        }
    }
    Ok(())
}

const QUESTION: &[u8] = br#"{"items": [{"kind": "question", "question": "Proceed with the deployment?", "options": [{"id": "yes", "label": "Yes"}, {"id": "no", "label": "No"}]}]}"#;
const ANSWER: &[u8] = br#"{"action": "answer", "options": ["yes"]}"#;

/// One caller's connections: the agent's (it creates, then waits) and the approver's.
struct Lines {
    agent: Connection,
    approver: Connection,
}

async fn one_cycle(
    lines: &mut Lines,
    sightings: &Sightings,
    samples: &mut Samples,
) -> anyhow::Result<()> {
    let start = Instant::now();
    let created = lines
        .agent
        .send(
            "POST",
            &format!("/api/v1/worlds/{WORLD}/holds"),
            Some(QUESTION),
            201,
        )
        .await?;
    let created_at = Instant::now();
    let created: Raised = serde_json::from_slice(&created)?;
    let hold = created.ids().next().context("no hold raised")?;
    let wait_path = format!("/api/v1/holds/{hold}/wait?timeout=30s");
    let Lines { agent, approver } = lines;
    let wait = async {
        let waited = agent.send("GET", &wait_path, None, 200).await;
        (waited, Instant::now())
    };
    let answer = async {
        let seen = sightings.wait_for(&hold).await?;
        let sent = Instant::now();
        approver
            .send(
                "POST",
                &format!("/api/v1/holds/{hold}/decision"),
                Some(ANSWER),
                200,
            )
            .await?;
        Ok::<_, anyhow::Error>((seen, sent, Instant::now()))
    };
    let (waited, answered) = tokio::join!(wait, answer);
    let (outcome, returned) = waited;
    let outcome: Waited = serde_json::from_slice(&outcome?)?;
    if !outcome.decided {
        bail!("the wait returned without the outcome");
    }
    let (seen, sent, decided) = answered?;
    samples.create.push(created_at - start);
    samples
        .notify
        .push(seen.saturating_duration_since(created_at));
    samples.decide.push(decided - sent);
    samples
        .resume
        .push(returned.saturating_duration_since(sent));
    samples.cycle.push(returned - start);
    Ok(())
}

async fn level(
    nodes: &[SocketAddr],
    agent: &str,
    approver: &str,
    sightings: &Sightings,
    concurrency: usize,
    seconds: f64,
) -> anyhow::Result<Samples> {
    let mut callers = Vec::new();
    for i in 0..concurrency {
        callers.push(Lines {
            agent: Connection::open(nodes[i % nodes.len()], agent).await?,
            approver: Connection::open(nodes[(i + 1) % nodes.len()], approver).await?,
        });
    }
    let warmup = Instant::now() + Duration::from_millis(500);
    let end = warmup + Duration::from_secs_f64(seconds);
    let mut workers = Vec::new();
    for mut lines in callers {
        let sightings = sightings.clone();
        workers.push(tokio::spawn(async move {
            let mut kept = Samples::default();
            loop {
                let start = Instant::now();
                if start >= end {
                    return Ok::<_, anyhow::Error>(kept);
                }
                let mut one = Samples::default();
                one_cycle(&mut lines, &sightings, &mut one).await?;
                if start >= warmup {
                    kept.extend(one);
                }
            }
        }));
    }
    tokio::time::sleep_until(warmup.into()).await;
    let before = (CpuTimes::now(), Involved::now());
    tokio::time::sleep_until(end.into()).await;
    let after = (CpuTimes::now(), Involved::now());
    let machine = before.0.zip(after.0);
    let mut all = Samples {
        busy: machine.and_then(|(b, a)| b.busy_until(a)),
        involved: machine
            .zip(before.1.zip(after.1))
            .and_then(|(machine, (b, a))| b.until(a, machine)),
        ..Samples::default()
    };
    for w in workers {
        all.extend(w.await??);
    }
    Ok(all)
}

fn report(name: &str, samples: Vec<Duration>) {
    let lat = Latencies::new(samples);
    println!(
        "      {name:<7} p50 {:>10}   p99 {:>10}",
        ms(lat.percentile(50.0)),
        ms(lat.percentile(99.0))
    );
}

pub async fn run(
    dir: &tempfile::TempDir,
    database_url: Option<&str>,
    levels: &[usize],
    seconds: f64,
) -> anyhow::Result<()> {
    println!(
        "== HTTP cycles: agent creates a question -> approver's stream receives it -> approver decides -> agent's wait returns"
    );
    let schema = match database_url {
        Some(url) => Some(TempSchema::in_database(url).await),
        None => None,
    };
    let fsync = match &schema {
        Some(_) => {
            println!(
                "   holdpoint serve on 127.0.0.1 (PostgreSQL: acknowledged = committed, synchronous_commit on)"
            );
            None
        }
        None => {
            println!(
                "   holdpoint serve on 127.0.0.1 (SQLite in {}, WAL fsynced before each acknowledgement)",
                dir.path().display()
            );
            crate::disk::describe(dir.path())
        }
    };
    let store_url = schema.as_ref().map(|s| s.url.as_str());
    let measured = measure(dir.path(), store_url, 1, levels, seconds).await?;
    let cycles: Vec<(usize, Option<Duration>, Duration)> = measured
        .iter()
        .map(|(c, samples)| {
            let rate = samples.cycle.len() as f64 / seconds;
            let cpu = samples.busy.and_then(|b| crate::floor::cpu_per(b, rate));
            let p50 = Latencies::new(samples.cycle.clone()).percentile(50.0);
            (*c, cpu, p50)
        })
        .collect();
    print_levels(measured, seconds);
    // The floor, in the same run: what a bare request costs here.
    for (c, cycle_cpu, cycle_p50) in cycles {
        let floor = crate::floor::measure(c, seconds).await?;
        crate::floor::report(c, &floor, cycle_cpu);
        if c == 1
            && let Some(fsync) = fsync
        {
            let bound = fsync * 2 + floor.p50 * 3;
            println!(
                "      cycle p50 {} = {:.1}× two fsyncs and three bare round trips ({})",
                ms(cycle_p50),
                cycle_p50.as_secs_f64() / bound.as_secs_f64(),
                ms(bound)
            );
        }
    }
    println!();
    Ok(())
}

/// One level's figures, for a summary.
struct Level {
    concurrency: usize,
    /// Cycles a second.
    rate: f64,
    /// CPU time a cycle, of every process involved (the bench's and PostgreSQL's).
    cpu: Option<Duration>,
}

/// Cycles per second, each leg's latency and the CPU time a cycle, per level of concurrency;
/// the figures, for a summary.
fn print_levels(measured: Vec<(usize, Samples)>, seconds: f64) -> Vec<Level> {
    let mut levels = Vec::new();
    for (c, samples) in measured {
        let rate = samples.cycle.len() as f64 / seconds;
        let per_cycle = |share: f64| crate::floor::cpu_per(share, rate);
        let busy = samples.busy.map_or(String::new(), |b| {
            format!(
                "   machine's CPU {:.0}% busy (of {})",
                b * 100.0,
                crate::cpu::count()
            )
        });
        println!(
            "  concurrency {c:>4}: {rate:>8.0} cycles/s   ({} cycles){busy}",
            samples.cycle.len()
        );
        report("create", samples.create);
        report("notify", samples.notify);
        report("decide", samples.decide);
        report("resume", samples.resume);
        report("cycle", samples.cycle);
        let involved = samples.involved.and_then(|shares| {
            Some((
                per_cycle(shares.total())?,
                per_cycle(shares.ours)?,
                per_cycle(shares.postgres)?,
            ))
        });
        if let Some((all, ours, postgres)) = involved {
            // What else kept the machine busy meanwhile (other processes, interrupts): near
            // nothing on a quiet machine.
            let besides =
                samples
                    .busy
                    .zip(samples.involved)
                    .map_or(String::new(), |(busy, involved)| {
                        format!(
                            "; the machine's CPUs {:.0}% busy besides",
                            ((busy - involved.total()) * 100.0).max(0.0)
                        )
                    });
            println!(
                "      CPU     {:.1} µs a cycle (all processes: the bench's, its nodes and callers, {:.1} µs; PostgreSQL's {:.1} µs){besides}",
                crate::floor::micros(all),
                crate::floor::micros(ours),
                crate::floor::micros(postgres)
            );
        }
        levels.push(Level {
            concurrency: c,
            rate,
            cpu: involved.map(|(all, _, _)| all),
        });
    }
    levels
}

/// The callers at which PostgreSQL's targets are set.
const TARGET_CALLERS: usize = 16;
/// PostgreSQL with one node: at least this many times SQLite's cycles a second.
const PG_RATE_TARGET: f64 = 0.75;
/// Several nodes on one database: at most this many times one node's CPU time a cycle.
const NODES_CPU_TARGET: f64 = 1.5;

/// `part ÷ whole` at each level of concurrency both have (and `whole` is not zero at).
fn ratios(part: &[(usize, f64)], whole: &[(usize, f64)]) -> Vec<(usize, f64)> {
    part.iter()
        .filter_map(|(c, p)| {
            let (_, w) = whole.iter().find(|(wc, w)| wc == c && *w > 0.0)?;
            Some((*c, p / w))
        })
        .collect()
}

/// Prints `part ÷ whole` at each level, and whether the ratio at [`TARGET_CALLERS`] meets
/// `target` (`at_least`: reaches it; else stays within it). The ratios are bare numbers and
/// the verdict has a line of its own, so that `compare` reads the ratios as figures and
/// names their line alike whatever they come to.
fn print_ratio(
    title: &str,
    part: &[(usize, f64)],
    whole: &[(usize, f64)],
    target: f64,
    at_least: bool,
) {
    let ratios = ratios(part, whole);
    let verdict = match ratios.iter().find(|(c, _)| *c == TARGET_CALLERS) {
        None => "not measured (no level at its callers)",
        Some((_, r)) if (at_least && *r >= target) || (!at_least && *r <= target) => "met",
        Some(_) => "NOT met",
    };
    let shown: Vec<String> = ratios
        .iter()
        .map(|(c, r)| format!("{c:>4}: {r:.2}"))
        .collect();
    let bound = if at_least { "or more" } else { "or less" };
    println!(
        "    {title:<56} {}   (target at {TARGET_CALLERS} callers: {target} {bound})",
        shown.join("   ")
    );
    println!("      the target is {verdict}");
}

/// The HTTP cycle on SQLite (one node), on PostgreSQL with one node, and spread over `nodes`
/// nodes on one PostgreSQL database, in one run.
pub async fn compare_nodes(
    dir: &tempfile::TempDir,
    database_url: &str,
    nodes: usize,
    levels: &[usize],
    seconds: f64,
) -> anyhow::Result<()> {
    println!(
        "== HTTP cycles on one node and spread over {nodes} (see `http`; caller i raises and waits on node i, decides on node i+1, the approver's stream is on the last node)"
    );
    crate::disk::describe(dir.path());
    let setups = [
        ("SQLite, 1 node".to_owned(), None, 1),
        ("PostgreSQL, 1 node".to_owned(), Some(database_url), 1),
        (
            format!("PostgreSQL, {nodes} nodes"),
            Some(database_url),
            nodes,
        ),
    ];
    let mut summary = Vec::new();
    for (i, (name, url, n)) in setups.into_iter().enumerate() {
        println!("  -- {name}");
        let schema = match url {
            Some(url) => Some(TempSchema::in_database(url).await),
            None => None,
        };
        let store_url = schema.as_ref().map(|s| s.url.as_str());
        let here = dir.path().join(format!("setup{i}"));
        let measured = measure(&here, store_url, n, levels, seconds).await?;
        summary.push((name, print_levels(measured, seconds)));
    }
    println!("  cycles/s by concurrency:");
    for (name, levels) in &summary {
        let rates: Vec<String> = levels
            .iter()
            .map(|l| format!("{:>4}: {:>7.0}", l.concurrency, l.rate))
            .collect();
        println!("    {name:<22} {}", rates.join("   "));
    }
    println!(
        "  CPU time a cycle by concurrency (all processes: the bench's, with its nodes and callers, and PostgreSQL's):"
    );
    for (name, levels) in &summary {
        let cpu: Vec<String> = levels
            .iter()
            .map(|l| match l.cpu {
                Some(cpu) => format!(
                    "{:>4}: {:>7.1} µs",
                    l.concurrency,
                    crate::floor::micros(cpu)
                ),
                None => format!("{:>4}: ?", l.concurrency),
            })
            .collect();
        println!("    {name:<22} {}", cpu.join("   "));
    }
    let rates = |i: usize| -> Vec<(usize, f64)> {
        summary[i]
            .1
            .iter()
            .map(|l| (l.concurrency, l.rate))
            .collect()
    };
    let cpu = |i: usize| -> Vec<(usize, f64)> {
        summary[i]
            .1
            .iter()
            .filter_map(|l| Some((l.concurrency, l.cpu?.as_secs_f64())))
            .collect()
    };
    println!("  PostgreSQL's targets, the ratios by concurrency:");
    print_ratio(
        &format!("cycles/s, {} ÷ {}", summary[1].0, summary[0].0),
        &rates(1),
        &rates(0),
        PG_RATE_TARGET,
        true,
    );
    print_ratio(
        &format!("CPU a cycle, {} ÷ {}", summary[2].0, summary[1].0),
        &cpu(2),
        &cpu(1),
        NODES_CPU_TARGET,
        false,
    );
    println!();
    Ok(())
}

/// A server on loopback with its data in `dir` (and its store in the PostgreSQL database at
/// `store_url`, if given), its admin, and the bench's world.
pub(crate) async fn start(
    dir: &tempfile::TempDir,
    store_url: Option<&str>,
) -> anyhow::Result<(Server, Caller)> {
    start_with(dir.path(), on_store(store_url)).await
}

/// The default settings, with the store in the PostgreSQL database at `store_url` if given.
fn on_store(store_url: Option<&str>) -> Settings {
    let mut settings = Settings::default();
    settings.store.url = store_url.map(str::to_owned);
    settings
}

/// A server with its data in `dir`, bound to a port of loopback. Its `[limits]` are lifted:
/// the load generators measure what the server does, from few credentials, not its limits.
pub(crate) async fn serve(dir: &std::path::Path, mut settings: Settings) -> anyhow::Result<Server> {
    settings.server.bind = "127.0.0.1:0".parse()?;
    settings.limits = LimitSettings::lifted();
    Ok(Server::start(dir, &settings).await?)
}

/// Like [`start`], with `settings` (bound to a port of loopback).
pub(crate) async fn start_with(
    dir: &std::path::Path,
    settings: Settings,
) -> anyhow::Result<(Server, Caller)> {
    let server = serve(dir, settings).await?;
    let http = Client::builder().pool_max_idle_per_host(1024).build()?;
    let admin = Caller {
        http,
        base: server.url(),
        token: server
            .admin_token()
            .context("the server wrote no admin token")?
            .to_owned(),
    };
    admin
        .post::<IgnoredAny>("/api/v1/worlds", json!({"name": WORLD}), 201)
        .await?;
    Ok((server, admin))
}

/// Starts `nodes` servers on one store, sharing the data directory `dir` as nodes must (a
/// volume they all mount), and runs each level of concurrency against them in turn.
async fn measure(
    dir: &std::path::Path,
    store_url: Option<&str>,
    nodes: usize,
    levels: &[usize],
    seconds: f64,
) -> anyhow::Result<Vec<(usize, Samples)>> {
    if nodes > 1 && store_url.is_none() {
        bail!("several nodes need a shared database: give --database-url");
    }
    // The first node makes the admin token and the world; the others share the database.
    let (first, admin) = start_with(dir, on_store(store_url)).await?;
    let mut servers = vec![first];
    for _ in 1..nodes {
        servers.push(serve(dir, on_store(store_url)).await?);
    }
    let addrs: Vec<SocketAddr> = servers.iter().map(Server::addr).collect();
    let stream_from = servers.last().map(Server::url).context("no server")?;
    let http = admin.http.clone();
    let agent = admin.token("bench-agent", "agent").await?;
    let approver = admin.token("bench-approver", "approver").await?;

    let mut measured = Vec::new();
    for &c in levels {
        let sightings = Sightings::default();
        let stream = http
            .get(format!("{stream_from}/api/v1/events?world={WORLD}"))
            .bearer_auth(&approver.token)
            .send()
            .await?
            .error_for_status()?;
        let follower = tokio::spawn(follow(stream, sightings.clone()));
        let samples = level(
            &addrs,
            &agent.token,
            &approver.token,
            &sightings,
            c,
            seconds,
        )
        .await?;
        follower.abort();
        measured.push((c, samples));
    }
    for server in servers {
        server.stop().await?;
    }
    Ok(measured)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The load generator against a real server. A cycle is counted only once it went through
    /// all four legs: a failed request, an unseen event or a wait without the outcome ends the
    /// run with an error.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_load_generator_runs_full_cycles_over_loopback() {
        let dir = tempfile::tempdir().unwrap();
        let measured = measure(dir.path(), None, 1, &[1, 4], 0.3).await.unwrap();
        assert_eq!(measured.len(), 2);
        for (c, samples) in measured {
            let n = samples.cycle.len();
            assert!(n >= c, "{c} callers completed only {n} cycles");
        }
    }

    #[test]
    fn ratios_pair_the_levels_both_measured() {
        let part = [(1, 300.0), (16, 3000.0), (64, 1.0)];
        let whole = [(1, 600.0), (16, 4000.0), (256, 1.0)];
        assert_eq!(ratios(&part, &whole), vec![(1, 0.5), (16, 0.75)]);
        assert_eq!(ratios(&part, &[(1, 0.0)]), vec![], "nothing to divide by");
    }

    /// The same, spread over three nodes on one PostgreSQL database: every cycle's legs but
    /// the create cross nodes.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_load_generator_runs_full_cycles_across_three_nodes() {
        let Some(schema) = TempSchema::new().await else {
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let measured = measure(dir.path(), Some(&schema.url), 3, &[3], 0.3)
            .await
            .unwrap();
        let n = measured[0].1.cycle.len();
        assert!(n >= 3, "3 callers completed only {n} cycles");
    }
}
