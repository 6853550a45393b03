//! Fan-out and soak: many live event streams on one `holdpoint serve` (a child process, so its
//! memory and file descriptors are its own) while holds are raised and decided at a steady rate.
//! Some subscribers stop reading: what happens to them, and whether they hold the others back.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use parking_lot::Mutex;
use reqwest::Client;
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;

use crate::cpu::{self, CpuTimes};
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

/// Delivery is measured to the millisecond from each event's first arrival at any reader, in
/// buckets that widen with the delay (1 ms to 500 ms, 10 ms to 5 s, 100 ms to 60 s, then one):
/// a histogram per event, as every (event, reader) pair is counted and 10,000 readers times
/// thousands of events are too many to keep one by one.
const BUCKETS: usize = 500 + 450 + 550 + 1;

fn bucket(ms: u64) -> usize {
    match ms {
        0..500 => ms as usize,
        500..5_000 => 500 + (ms as usize - 500) / 10,
        5_000..60_000 => 950 + (ms as usize - 5_000) / 100,
        _ => BUCKETS - 1,
    }
}

/// Where a bucket starts, in milliseconds.
fn bucket_ms(b: usize) -> f64 {
    match b {
        0..500 => b as f64,
        500..950 => 500.0 + (b - 500) as f64 * 10.0,
        950..1500 => 5_000.0 + (b - 950) as f64 * 100.0,
        _ => 60_000.0,
    }
}

/// What the readers saw of one event (by position).
struct Arrival {
    readers: AtomicU32,
    /// Microseconds from the bench's start to the first reader's and the last reader's copy.
    first: AtomicU64,
    last: AtomicU64,
    /// Readers by how long after `first` their copy came, made by the first reader to come.
    late: OnceLock<Box<[AtomicU16]>>,
}

/// Every reader's arrivals, by event position (positions past the end are not counted; the
/// table is sized for the run).
struct Arrivals {
    start: Instant,
    events: Box<[Arrival]>,
}

impl Arrivals {
    fn new(start: Instant, positions: usize) -> Self {
        let events = (0..positions)
            .map(|_| Arrival {
                readers: AtomicU32::new(0),
                first: AtomicU64::new(u64::MAX),
                last: AtomicU64::new(0),
                late: OnceLock::new(),
            })
            .collect();
        Arrivals { start, events }
    }

    fn got(&self, seq: u64, at: Instant) {
        let Some(a) = self.events.get(seq as usize) else {
            return;
        };
        let us = at.saturating_duration_since(self.start).as_micros() as u64;
        let first = a.first.fetch_min(us, Relaxed).min(us);
        a.last.fetch_max(us, Relaxed);
        // A reader that raced the first one and read an earlier clock counts as the first.
        let late = us.saturating_sub(first) / 1000;
        a.late
            .get_or_init(|| (0..BUCKETS).map(|_| AtomicU16::new(0)).collect())[bucket(late)]
        .fetch_add(1, Relaxed);
        a.readers.fetch_add(1, Relaxed);
    }
}

/// What one reader saw: events, and positions that did not follow the one before.
struct Read {
    events: usize,
    out_of_order: usize,
}

/// A live stream read by hand: the response's head parsed with `httparse`, its chunked body
/// undone, and only each frame's `id` read (the first reader also reads which hold and event
/// each position is, for everyone). Ten thousand readers share two cores with the server, so
/// what each costs per event is kept to finding a few lines in the bytes.
struct Lean {
    tcp: tokio::net::TcpStream,
    body: Body,
}

/// A chunked body, undone as its bytes come.
struct Body {
    /// Bytes read and not yet undone from the chunked encoding.
    raw: Vec<u8>,
    chunk: Chunked,
    /// The stream's text not yet cut into frames.
    text: Vec<u8>,
}

/// Where the chunked decoding is.
#[derive(Clone, Copy)]
enum Chunked {
    /// Reading a chunk's size (hex), so far.
    Size(usize),
    /// After the size: an extension, to the end of the line.
    Extension(usize),
    /// The size line's `\n`.
    SizeEnd(usize),
    /// Bytes of the chunk still to come.
    Data(usize),
    /// The `\r\n` after a chunk's data.
    DataEnd,
}

impl Lean {
    async fn open(addr: std::net::SocketAddr, token: &str) -> anyhow::Result<Lean> {
        let mut tcp = tokio::net::TcpStream::connect(addr).await?;
        let request = format!(
            "GET /api/v1/events HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\r\n"
        );
        tcp.write_all(request.as_bytes()).await?;
        let mut raw = Vec::with_capacity(4096);
        loop {
            if tcp.read_buf(&mut raw).await? == 0 {
                bail!("the server closed a stream before answering");
            }
            let mut headers = [httparse::EMPTY_HEADER; 32];
            let mut response = httparse::Response::new(&mut headers);
            if let httparse::Status::Complete(head) = response.parse(&raw)? {
                anyhow::ensure!(
                    response.code == Some(200),
                    "a stream was refused: {:?}",
                    response.code
                );
                anyhow::ensure!(
                    response.headers.iter().any(|h| {
                        h.name.eq_ignore_ascii_case("transfer-encoding")
                            && h.value.eq_ignore_ascii_case(b"chunked")
                    }),
                    "a stream whose body is not chunked"
                );
                raw.drain(..head);
                let body = Body {
                    raw,
                    chunk: Chunked::Size(0),
                    text: Vec::with_capacity(4096),
                };
                return Ok(Lean { tcp, body });
            }
        }
    }
}

impl Body {
    /// Moves what `raw` holds of the body into `text`; `false` once the body has ended.
    fn dechunk(&mut self) -> anyhow::Result<bool> {
        let mut i = 0;
        while i < self.raw.len() {
            let b = self.raw[i];
            self.chunk = match self.chunk {
                Chunked::Size(n) => match b {
                    b'\r' => Chunked::SizeEnd(n),
                    b';' => Chunked::Extension(n),
                    _ => {
                        let d = (b as char).to_digit(16).context("a bad chunk size")?;
                        Chunked::Size(n * 16 + d as usize)
                    }
                },
                Chunked::Extension(n) if b == b'\r' => Chunked::SizeEnd(n),
                Chunked::Extension(n) => Chunked::Extension(n),
                Chunked::SizeEnd(0) => return Ok(false),
                Chunked::SizeEnd(n) => Chunked::Data(n),
                Chunked::Data(n) => {
                    let take = n.min(self.raw.len() - i);
                    self.text.extend_from_slice(&self.raw[i..i + take]);
                    i += take;
                    self.chunk = if take == n {
                        Chunked::DataEnd
                    } else {
                        Chunked::Data(n - take)
                    };
                    continue;
                }
                Chunked::DataEnd if b == b'\n' => Chunked::Size(0),
                Chunked::DataEnd => Chunked::DataEnd,
            };
            i += 1;
        }
        self.raw.clear();
        Ok(true)
    }
}

/// The value of the line `field: value` in an SSE frame, if it has one.
fn field<'a>(frame: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    frame
        .split(|b| *b == b'\n')
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(b": "))
}

/// Streams opened at once.
const OPENING: usize = 100;

/// Reads one live stream until `stop`. The first reader (`keys`) also tells which hold and
/// event each position is.
async fn read(
    mut stream: Lean,
    arrivals: Arc<Arrivals>,
    keys: Option<Arc<Mutex<HashMap<u64, EventKey>>>>,
    mut stop: watch::Receiver<bool>,
) -> anyhow::Result<Read> {
    let mut last: Option<u64> = None;
    let mut read = Read {
        events: 0,
        out_of_order: 0,
    };
    loop {
        if !stream.body.dechunk()? {
            bail!("a live stream ended");
        }
        let at = Instant::now();
        let mut from = 0;
        while let Some(end) = stream.body.text[from..]
            .windows(2)
            .position(|w| w == b"\n\n")
        {
            let frame = &stream.body.text[from..from + end + 1];
            from += end + 2;
            let Some(seq) = field(frame, b"id")
                .and_then(|id| std::str::from_utf8(id).ok())
                .and_then(|id| id.parse::<u64>().ok())
            else {
                continue;
            };
            if last.is_some_and(|l| seq != l + 1) {
                read.out_of_order += 1;
            }
            last = Some(seq);
            read.events += 1;
            arrivals.got(seq, at);
            if let Some(keys) = &keys {
                let event = field(frame, b"event").unwrap_or_default();
                let data = field(frame, b"data").unwrap_or_default();
                if let Some(hold) = serde_json::from_slice::<AboutHold>(data)?.hold {
                    let event = String::from_utf8_lossy(event).into_owned();
                    keys.lock().insert(seq, (hold, event));
                }
            }
        }
        stream.body.text.drain(..from);
        let n = tokio::select! {
            _ = stop.changed() => return Ok(read),
            n = stream.tcp.read_buf(&mut stream.body.raw) => n?,
        };
        if n == 0 {
            bail!("a live stream ended");
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
    let room = o.subscribers + 64;
    // Every stream is one credential's request: opened by the thousand, they are no burst of
    // one client's.
    std::fs::write(
        &config,
        format!(
            "[server]\nsend_timeout = \"{}s\"\n[limits]\nconnections = {room}\nconnections_per_address = {room}\nstreams = {room}\nstreams_per_token = {room}\nrequests_per_second = 1000000\nrequest_burst = 1000000\n[log]\nlevel = \"warn\"\n",
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

    let (stop, stopped) = watch::channel(false);
    let opening = Instant::now();
    // Positions for every event of the run at the asked rate, and the few before it.
    let positions = (o.rate * o.seconds * 2.0 * 1.5) as usize + 1_000;
    let arrivals = Arc::new(Arrivals::new(opening, positions));
    let keys = Arc::new(Mutex::new(HashMap::new()));
    // Opened a batch at a time, each stream answered before the batch is done, so that the
    // server's accept queue is never asked to hold thousands of connections at once.
    let mut tasks = Vec::with_capacity(readers);
    while tasks.len() < readers {
        let mut opened = tokio::task::JoinSet::new();
        for _ in 0..OPENING.min(readers - tasks.len()) {
            let token = reader.token.clone();
            opened.spawn(async move { Lean::open(addr, &token).await });
        }
        while let Some(stream) = opened.join_next().await {
            let stream = stream??;
            let keys = tasks.is_empty().then(|| keys.clone());
            tasks.push(tokio::spawn(read(
                stream,
                arrivals.clone(),
                keys,
                stopped.clone(),
            )));
        }
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
    let cpu_before = (CpuTimes::now(), cpu::process_ticks(pid));
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
    let everyone = |sent: &HashMap<EventKey, Instant>| {
        let keys = keys.lock();
        keys.iter()
            .filter(|(seq, key)| {
                sent.contains_key(*key)
                    && arrivals
                        .events
                        .get(**seq as usize)
                        .is_some_and(|a| a.readers.load(Relaxed) as usize == readers)
            })
            .count()
    };
    while everyone(&sent) < sent.len() && settle.elapsed() < Duration::from_secs(60) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let cpu_after = (CpuTimes::now(), cpu::process_ticks(pid));
    let window = start.elapsed().as_secs_f64();
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
    // Delivery of each (event, reader) pair, from the request that made the event: the
    // event's first arrival after the request, plus how much later each reader's copy came.
    let keys = keys.lock().clone();
    let mut pairs = vec![0u64; BUCKETS];
    let mut slowest = Vec::new();
    let to = |us: u64| arrivals.start + Duration::from_micros(us);
    for (seq, key) in &keys {
        let (Some(sent_at), Some(a)) = (sent.get(key), arrivals.events.get(*seq as usize)) else {
            continue;
        };
        let first = to(a.first.load(Relaxed)).saturating_duration_since(*sent_at);
        slowest.push(to(a.last.load(Relaxed)).saturating_duration_since(*sent_at));
        if let Some(late) = a.late.get() {
            for (b, n) in late.iter().enumerate() {
                let n = u64::from(n.load(Relaxed));
                if n > 0 {
                    let ms = first.as_secs_f64() * 1000.0 + bucket_ms(b);
                    pairs[bucket(ms.max(0.0) as u64)] += n;
                }
            }
        }
    }
    let all = everyone(&sent);
    let lat = Latencies::new(slowest);
    println!(
        "  {raised} holds raised and decided in {elapsed:.0} s ({:.1}/s): {} events",
        raised as f64 / elapsed,
        sent.len()
    );
    println!(
        "  every reader got every event: {all} of {} events reached all {readers}; {complete_readers} of {readers} readers got them all, {out_of_order} out of order, {failed} streams broke",
        sent.len()
    );
    let total: u64 = pairs.iter().sum();
    let pair = |p: f64| {
        let want = (total as f64 * p / 100.0).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (b, n) in pairs.iter().enumerate() {
            seen += n;
            if seen >= want {
                return format!("{:.0} ms", bucket_ms(b));
            }
        }
        "-".to_owned()
    };
    println!(
        "  delivery to each reader (request sent → that reader has it, over {total} event-reader pairs, to the ms): p50 {}   p99 {}   max {}",
        pair(50.0),
        pair(99.0),
        pair(100.0)
    );
    println!(
        "  delivery to the slowest reader (request sent → last reader has it): p50 {}   p99 {}   max {}",
        ms(lat.percentile(50.0)),
        ms(lat.percentile(99.0)),
        ms(lat.percentile(100.0))
    );
    // The server's CPU time a delivery, whoever else shares the machine: what the readers
    // cost (here, on the same cores) is left out.
    if let ((Some(m0), Some(t0)), (Some(m1), Some(t1))) = (cpu_before, cpu_after)
        && let Some(share) = t1.checked_sub(t0).and_then(|t| m0.share_until(m1, t))
        && total > 0
    {
        let cores = share * cpu::count() as f64;
        let per = cores * window / total as f64;
        println!(
            "  server CPU: {:.1} s over {window:.1} s ({cores:.2} of a core): {:.1} µs a delivery (one event to one reader, with its share of the requests); at that, {:.0} holds/s (two events each) to {} streams would keep {:.1} cores busy",
            cores * window,
            per * 1e6,
            o.rate,
            o.subscribers,
            per * o.rate * 2.0 * o.subscribers as f64
        );
    }
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
    fn each_bucket_starts_where_its_milliseconds_fall() {
        for b in 0..BUCKETS {
            assert_eq!(bucket(bucket_ms(b) as u64), b, "bucket {b}");
        }
        assert_eq!(bucket(499), 499);
        assert_eq!(bucket(509), 500);
        assert_eq!(bucket(3_600_000), BUCKETS - 1);
    }

    #[test]
    fn a_chunked_body_is_undone_however_its_bytes_are_split() {
        let wire = b"5\r\nid: 1\r\n1b;ext=x\r\n\n\ndata: {}\n\nid: 2\ndata: {}\n\r\n0\r\n\r\n";
        let text = b"id: 1\n\ndata: {}\n\nid: 2\ndata: {}\n";
        // Every split of the bytes into two reads, the size line and the data's end included.
        for at in 0..=wire.len() {
            let mut body = Body {
                raw: Vec::new(),
                chunk: Chunked::Size(0),
                text: Vec::new(),
            };
            let mut open = true;
            for part in [&wire[..at], &wire[at..]] {
                body.raw.extend_from_slice(part);
                open = body.dechunk().unwrap();
                if !open {
                    break;
                }
                assert!(body.raw.is_empty(), "split at {at}: all of a read is taken");
            }
            assert!(!open, "split at {at}: the last chunk ends the body");
            assert_eq!(body.text, text, "split at {at}");
        }
        let mut bad = Body {
            raw: b"zz\r\n".to_vec(),
            chunk: Chunked::Size(0),
            text: Vec::new(),
        };
        assert!(bad.dechunk().is_err());
    }

    #[test]
    fn a_process_s_memory_and_descriptors_are_read() {
        let (rss, anon, fds) = process(std::process::id());
        assert!(rss >= anon && anon > 0 && fds > 0);
    }
}
