//! Fan-out and soak: many live event streams on one `holdpoint serve` (a child process, so its
//! memory and file descriptors are its own) while holds are raised and decided at a steady rate.
//! Some subscribers stop reading: what happens to them, and whether they hold the others back.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use holdpoint_protocol::sse::SseDecoder;
use parking_lot::Mutex;
use reqwest::Client;
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;

use crate::http::{Caller, Raised, WORLD};
use crate::stats::{Latencies, ms};
use crate::takeover::Node;
use crate::wire::Connection;

pub struct Options {
    pub subscribers: usize,
    /// Subscribers among them that stop reading once their stream is open.
    pub stalled: usize,
    pub seconds: f64,
    /// Holds raised (and decided) per second.
    pub rate: f64,
    /// Seconds between two samples of the server's memory and descriptors.
    pub sample: f64,
    /// The server's `server.send_timeout`, in seconds.
    pub send_timeout: u64,
    /// Bytes of context each question carries (bigger events fill a stopped reader sooner).
    pub payload: usize,
}

/// `{"hold": …}`, the data of a live event about a hold.
#[derive(Deserialize)]
struct AboutHold {
    hold: Option<String>,
}

/// An event, by its hold and its type.
type EventKey = (String, String);

/// For each event, how many readers got it, and when the last did.
#[derive(Clone, Default)]
struct Deliveries(Arc<Mutex<HashMap<EventKey, (usize, Instant)>>>);

impl Deliveries {
    fn got(&self, hold: String, event: String, at: Instant) {
        let mut map = self.0.lock();
        let entry = map.entry((hold, event)).or_insert((0, at));
        entry.0 += 1;
        entry.1 = entry.1.max(at);
    }

    fn complete(&self, readers: usize) -> usize {
        let map = self.0.lock();
        map.values().filter(|(n, _)| *n == readers).count()
    }
}

/// What one reader saw: events, and positions that did not follow the one before.
struct Read {
    events: usize,
    out_of_order: usize,
}

/// Reads one live stream until `stop`.
async fn read(
    mut stream: reqwest::Response,
    deliveries: Deliveries,
    mut stop: watch::Receiver<bool>,
) -> anyhow::Result<Read> {
    let mut frames = SseDecoder::default();
    let mut last: Option<u64> = None;
    let mut read = Read {
        events: 0,
        out_of_order: 0,
    };
    loop {
        let chunk = tokio::select! {
            _ = stop.changed() => return Ok(read),
            chunk = stream.chunk() => chunk?,
        };
        let Some(chunk) = chunk else {
            bail!("a live stream ended");
        };
        let at = Instant::now();
        frames.push(&chunk);
        while let Some(frame) = frames.next_frame() {
            let Some(seq) = frame.id.as_deref().and_then(|id| id.parse::<u64>().ok()) else {
                continue;
            };
            if last.is_some_and(|l| seq != l + 1) {
                read.out_of_order += 1;
            }
            last = Some(seq);
            read.events += 1;
            if let Some(hold) = serde_json::from_str::<AboutHold>(&frame.data)?.hold {
                deliveries.got(hold, frame.event, at);
            }
        }
    }
}

/// A subscriber that asks for the stream, then reads nothing (with a small receive buffer, so
/// its side fills soon).
async fn stalled(addr: std::net::SocketAddr, token: &str) -> anyhow::Result<tokio::net::TcpStream> {
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.set_recv_buffer_size(4096)?;
    let mut tcp = socket.connect(addr).await?;
    let request = format!(
        "GET /api/v1/events HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\r\n"
    );
    tcp.write_all(request.as_bytes()).await?;
    Ok(tcp)
}

/// Answers `hold`, noting when the request was sent.
async fn decide(
    decider: &mut Connection,
    hold: String,
    sent: &mut HashMap<EventKey, Instant>,
) -> anyhow::Result<()> {
    let path = format!("/api/v1/holds/{hold}/decision");
    sent.insert((hold, "hold.decided".to_owned()), Instant::now());
    decider
        .send(
            "POST",
            &path,
            Some(br#"{"action": "answer", "options": ["yes"]}"#),
            200,
        )
        .await?;
    Ok(())
}

/// The server's resident memory, the anonymous part of it (heap and stacks, without the
/// database's pages that SQLite maps from its file, which grow with the file), in bytes, and
/// its open descriptors.
fn process(pid: u32) -> (u64, u64, usize) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map_or(0, |kb| kb * 1024)
    };
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count());
    (field("VmRSS:"), field("RssAnon:"), fds)
}

async fn live_streams(admin: &Caller) -> anyhow::Result<u64> {
    let text = admin
        .http
        .get(format!("{}/metrics", admin.base))
        .send()
        .await?
        .text()
        .await?;
    text.lines()
        .find_map(|l| l.strip_prefix("holdpoint_live_streams "))
        .and_then(|n| n.trim().parse().ok())
        .context("no holdpoint_live_streams in /metrics")
}

/// The least-squares slope of `samples` (seconds, bytes), in bytes per minute.
fn slope(samples: &[(f64, u64)]) -> f64 {
    let n = samples.len() as f64;
    if n < 2.0 {
        return 0.0;
    }
    let mean_t = samples.iter().map(|s| s.0).sum::<f64>() / n;
    let mean_y = samples.iter().map(|s| s.1 as f64).sum::<f64>() / n;
    let cov: f64 = samples
        .iter()
        .map(|s| (s.0 - mean_t) * (s.1 as f64 - mean_y))
        .sum();
    let var: f64 = samples.iter().map(|s| (s.0 - mean_t).powi(2)).sum();
    if var == 0.0 { 0.0 } else { cov / var * 60.0 }
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / 1048576.0)
}

pub async fn run(
    dir: &tempfile::TempDir,
    holdpoint: Option<PathBuf>,
    o: Options,
) -> anyhow::Result<()> {
    let holdpoint = crate::mcp::holdpoint_binary(holdpoint)?;
    let readers = o.subscribers.saturating_sub(o.stalled);
    println!(
        "== Fan-out: {} live streams on one holdpoint serve ({readers} reading, {} that stop reading), {:.1} holds/s raised and decided for {:.0} s, {} bytes of context each",
        o.subscribers, o.stalled, o.rate, o.seconds, o.payload
    );
    let data = dir.path().join("data");
    let config = dir.path().join("holdpoint.toml");
    let room = o.subscribers + 16;
    std::fs::write(
        &config,
        format!(
            "[server]\nsend_timeout = \"{}s\"\n[limits]\nstreams = {room}\nstreams_per_token = {room}\n[log]\nlevel = \"warn\"\n",
            o.send_timeout
        ),
    )?;
    let node = Node::start(&holdpoint, &data, &config, None).await?;
    let pid = node.pid().context("the server's process id")?;
    let http = Client::builder().pool_max_idle_per_host(4).build()?;
    let admin = Caller {
        http: http.clone(),
        base: node.url.clone(),
        token: std::fs::read_to_string(data.join("admin-token"))?
            .trim()
            .to_owned(),
    };
    admin
        .post::<IgnoredAny>("/api/v1/worlds", json!({"name": WORLD}), 201)
        .await?;
    let agent = admin.token("fanout-agent", "agent").await?;
    let approver = admin.token("fanout-approver", "approver").await?;
    let reader = admin.token("fanout-reader", "approver").await?;
    let addr: std::net::SocketAddr = node
        .url
        .trim_start_matches("http://")
        .parse()
        .context("the server's address")?;
    let (rss0, anon0, fds0) = process(pid);

    let deliveries = Deliveries::default();
    let (stop, stopped) = watch::channel(false);
    let opening = Instant::now();
    let mut tasks = Vec::with_capacity(readers);
    for _ in 0..readers {
        let response = http
            .get(format!("{}/api/v1/events", reader.base))
            .bearer_auth(&reader.token)
            .send()
            .await?;
        anyhow::ensure!(
            response.status() == 200,
            "a stream was refused: {}",
            response.status()
        );
        tasks.push(tokio::spawn(read(
            response,
            deliveries.clone(),
            stopped.clone(),
        )));
    }
    let mut stalls = Vec::with_capacity(o.stalled);
    for _ in 0..o.stalled {
        stalls.push(stalled(addr, &reader.token).await?);
    }
    println!(
        "  {} streams opened in {:.1} s; before them the server had {} resident ({} anonymous) and {fds0} descriptors",
        o.subscribers,
        opening.elapsed().as_secs_f64(),
        mib(rss0),
        mib(anon0)
    );

    // Samples of the server's memory, descriptors and streams.
    let samples = Arc::new(Mutex::new(Vec::<(f64, u64, usize, Option<u64>, u64)>::new()));
    let sampler = {
        let (samples, admin, mut stopped) = (samples.clone(), admin.clone(), stopped.clone());
        let every = Duration::from_secs_f64(o.sample);
        tokio::spawn(async move {
            let start = Instant::now();
            let mut tick = tokio::time::interval(every);
            println!(
                "  {:>7}  {:>10}  {:>10}  {:>11}  {:>12}",
                "time", "server RSS", "anonymous", "descriptors", "live streams"
            );
            loop {
                tokio::select! {
                    _ = stopped.changed() => return,
                    _ = tick.tick() => {}
                }
                let (rss, anon, fds) = process(pid);
                // `None` when /metrics did not answer (the sample still counts for memory).
                let streams = live_streams(&admin).await.ok();
                let t = start.elapsed().as_secs_f64();
                let shown = streams.map_or_else(|| "-".to_owned(), |n| n.to_string());
                println!(
                    "  {t:>6.0}s  {:>10}  {:>10}  {fds:>11}  {shown:>12}",
                    mib(rss),
                    mib(anon)
                );
                samples.lock().push((t, rss, fds, streams, anon));
            }
        })
    };

    // The steady load: a question raised, and the one before it answered, each tick.
    let mut raiser = Connection::open(addr, &agent.token).await?;
    let mut decider = Connection::open(addr, &approver.token).await?;
    let mut sent: HashMap<EventKey, Instant> = HashMap::new();
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / o.rate));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let path = format!("/api/v1/worlds/{WORLD}/holds");
    let mut previous: Option<String> = None;
    let padding = "x".repeat(o.payload);
    let start = Instant::now();
    let mut raised = 0usize;
    while start.elapsed().as_secs_f64() < o.seconds {
        tick.tick().await;
        let body = format!(
            r#"{{"items": [{{"kind": "question", "question": "Soak {raised}?", "options": [{{"id": "yes", "label": "Yes"}}], "context": {{"padding": "{padding}"}}}}]}}"#
        );
        let at = Instant::now();
        let answer = raiser
            .send("POST", &path, Some(body.as_bytes()), 201)
            .await?;
        let hold = serde_json::from_slice::<Raised>(&answer)?
            .ids()
            .next()
            .context("no hold raised")?;
        sent.insert((hold.clone(), "hold.created".to_owned()), at);
        raised += 1;
        if let Some(prev) = previous.replace(hold) {
            decide(&mut decider, prev, &mut sent).await?;
        }
    }
    if let Some(prev) = previous.take() {
        decide(&mut decider, prev, &mut sent).await?;
    }
    let elapsed = start.elapsed().as_secs_f64();
    // Every reader has every event, or 60 s have passed.
    let settle = Instant::now();
    while deliveries.complete(readers) < sent.len() && settle.elapsed() < Duration::from_secs(60) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let _ = stop.send(true);
    let _ = sampler.await;
    let mut complete_readers = 0;
    let mut out_of_order = 0;
    let mut failed = 0;
    for t in tasks {
        match t.await? {
            Ok(r) => {
                out_of_order += r.out_of_order;
                if r.events >= sent.len() {
                    complete_readers += 1;
                }
            }
            Err(_) => failed += 1,
        }
    }
    let map = deliveries.0.lock().clone();
    let latencies: Vec<Duration> = sent
        .iter()
        .filter_map(|(key, at)| {
            map.get(key)
                .map(|(_, last)| last.saturating_duration_since(*at))
        })
        .collect();
    let everyone = sent
        .keys()
        .filter(|k| map.get(*k).is_some_and(|(n, _)| *n == readers))
        .count();
    let lat = Latencies::new(latencies);
    println!(
        "  {raised} holds raised and decided in {elapsed:.0} s ({:.1}/s): {} events",
        raised as f64 / elapsed,
        sent.len()
    );
    println!(
        "  every reader got every event: {everyone} of {} events reached all {readers}; {complete_readers} of {readers} readers got them all, {out_of_order} out of order, {failed} streams broke",
        sent.len()
    );
    println!(
        "  delivery to the slowest reader (request sent → last reader has it): p50 {}   p99 {}   max {}",
        ms(lat.percentile(50.0)),
        ms(lat.percentile(99.0)),
        ms(lat.percentile(100.0))
    );
    let samples = samples.lock().clone();
    // After the first tenth of the run (or minute, whichever is less): allocations settle.
    let warm = (o.seconds / 10.0).min(60.0);
    for (name, anonymous) in [("server RSS", false), ("of it anonymous", true)] {
        let steady: Vec<(f64, u64)> = samples
            .iter()
            .filter(|s| s.0 >= warm)
            .map(|s| (s.0, if anonymous { s.4 } else { s.1 }))
            .collect();
        if let (Some(first), Some(last)) = (steady.first(), steady.last()) {
            let max = steady.iter().map(|s| s.1).max().unwrap_or(0);
            println!(
                "  {name} from {warm:.0} s: {} → {} (max {}), slope {:+.1} KiB/min over {} samples",
                mib(first.1),
                mib(last.1),
                mib(max),
                slope(&steady) / 1024.0,
                steady.len()
            );
        }
    }
    let fds: Vec<usize> = samples.iter().map(|s| s.2).collect();
    println!(
        "  server descriptors: {} → {} (min {}, max {})",
        fds.first().unwrap_or(&0),
        fds.last().unwrap_or(&0),
        fds.iter().min().unwrap_or(&0),
        fds.iter().max().unwrap_or(&0)
    );
    // The readers that stopped: what reached them, and whether the server let them go.
    let mut closed = 0;
    let mut bytes = Vec::new();
    for mut s in stalls {
        let mut got = 0usize;
        let mut buf = vec![0u8; 64 * 1024];
        let ended = loop {
            match tokio::time::timeout(Duration::from_secs(2), s.read(&mut buf)).await {
                Ok(Ok(0)) | Ok(Err(_)) => break true,
                Ok(Ok(n)) => got += n,
                Err(_) => break false,
            }
        };
        closed += usize::from(ended);
        bytes.push(got);
    }
    if o.stalled > 0 {
        let counted: Vec<(f64, u64)> = samples
            .iter()
            .filter_map(|s| s.3.map(|n| (s.0, n)))
            .collect();
        let dropped_at = counted
            .windows(2)
            .find(|w| w[1].1 < w[0].1)
            .map(|w| format!("the server's stream count fell at about {:.0} s", w[1].0))
            .unwrap_or_else(|| "the server's stream count never fell".into());
        println!(
            "  readers that stopped: {closed} of {} closed by the server (server.send_timeout {} s); {dropped_at}; each had received {} KiB before",
            o.stalled,
            o.send_timeout,
            bytes.iter().sum::<usize>() / bytes.len().max(1) / 1024
        );
    }
    drop(node);
    println!();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_slope_of_a_line_is_its_rise_per_minute() {
        let flat: Vec<(f64, u64)> = (0..10).map(|t| (t as f64, 100)).collect();
        assert_eq!(slope(&flat), 0.0);
        let rising: Vec<(f64, u64)> = (0..10).map(|t| (t as f64, 100 + 2 * t)).collect();
        assert!((slope(&rising) - 120.0).abs() < 1e-9);
    }

    #[test]
    fn a_process_s_memory_and_descriptors_are_read() {
        let (rss, anon, fds) = process(std::process::id());
        assert!(rss >= anon && anon > 0 && fds > 0);
    }
}
