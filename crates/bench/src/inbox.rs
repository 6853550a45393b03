//! The web inbox with many pending holds, against an in-process `holdpoint serve` on loopback:
//!
//! 1. **first page**: the server's time to answer what a browser asks for to show the inbox —
//!    the signed-in shell (`GET /` with a session cookie) and the inbox's first listing
//!    (`GET /api/v1/holds?limit=50`, newest and most urgent first) — over a keep-alive
//!    connection (see wire.rs), each request timed from its first byte sent to its last byte
//!    read;
//! 2. **arrival**: from the moment a hold is created through the API until the inbox of a real
//!    browser (Debian's Chromium, driven through chromedriver) shows it: its row
//!    (`[data-hold="ID"]`) where the list has room, else the count of the holds that arrived
//!    beyond it ("37 new holds — show") one higher. A MutationObserver in the page notes
//!    `Date.now()` at the first animation frame after the change; the bench notes the wall
//!    clock before each `POST`. Both clocks are this machine's;
//! 3. **first paint**: the inbox loaded afresh (`GET /`, signed in) again and again, each
//!    time from the navigation's start until its first rows are in the page (the mark
//!    `holdpoint:first-rows` that inbox.js makes when it first draws rows; both on the page's
//!    clock);
//! 4. **burst**: thousands of holds raised as fast as the API takes them (64 a request, several
//!    requests in flight) into an open inbox: the longest task that kept the page's main
//!    thread busy (a `PerformanceObserver` of `longtask` entries, installed before the
//!    burst), and the time from the first request sent until the inbox accounts for every
//!    hold (its rows and its count of new holds, at the animation frame after the change);
//! 5. **triage**: approvals decided with the keyboard alone (`a` approves the selected hold,
//!    and the selection moves on to the next), each from the key press sent through
//!    WebDriver until the person's live stream (`GET /api/v1/events`) tells of the decision.

use std::net::SocketAddr;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use fantoccini::actions::InputSource;
use holdpoint_protocol::sse::SseDecoder;
use holdpoint_test_support::chromium::Chromium;
use serde_json::{Value, json};

use crate::http::{Caller, Raised, WORLD, start};
use crate::stats::{Latencies, ms};
use crate::wire::Connection;

/// How long the browser may take to show a card (or the signed-in page) before the run fails.
const PATIENCE: Duration = Duration::from_secs(30);

/// Installed in the inbox: notes when each row first appears and when the count of new holds
/// rises (at the animation frame after the change, when it is painted), and lets the bench
/// wait for either.
const OBSERVER: &str = r#"
const seen = new Map(), counted = [], waiting = [];
let last = 0;
const arrivals = () => {
  const b = document.querySelector("button.arrivals");
  return b && !b.hidden ? parseInt(b.textContent, 10) || 0 : 0;
};
const check = () => {
  for (const w of [...waiting]) {
    const c = counted.find((x) => x.n > w.before);
    const at = seen.has(w.id) ? seen.get(w.id) : c && c.at;
    if (at !== undefined) { waiting.splice(waiting.indexOf(w), 1); w.resolve(at); }
  }
};
new MutationObserver((records) => {
  for (const r of records) for (const n of r.addedNodes) {
    if (n.nodeType !== Node.ELEMENT_NODE) continue;
    const rows = [...n.querySelectorAll("[data-hold]")];
    if (n.matches("[data-hold]")) rows.push(n);
    for (const row of rows) {
      const id = row.dataset.hold;
      if (!seen.has(id)) requestAnimationFrame(() => { if (!seen.has(id)) seen.set(id, Date.now()); check(); });
    }
  }
  const n = arrivals();
  if (n > last) { last = n; requestAnimationFrame(() => { counted.push({ n, at: Date.now() }); check(); }); }
}).observe(document.body, { childList: true, subtree: true, characterData: true, attributes: true, attributeFilter: ["hidden"] });
window.holdpointBenchCounted = arrivals;
window.holdpointBenchSeen = (id, before) => new Promise((resolve) => { waiting.push({ id, before, resolve }); check(); });
"#;

/// Waits (asynchronously, in the page) until the inbox shows the hold `arguments[0]` (its
/// row, or a count of new holds above `arguments[1]`); returns when, in milliseconds since
/// the epoch.
const WAIT_FOR_CARD: &str = r#"
const done = arguments[arguments.length - 1];
window.holdpointBenchSeen(arguments[0], arguments[1]).then(done);
"#;

/// A question with a deadline `minutes` from now.
fn question(minutes: usize) -> Value {
    json!({
        "kind": "question",
        "question": "Proceed with the deployment?",
        "options": [{"id": "yes", "label": "Yes"}, {"id": "no", "label": "No"}],
        "deadline": format!("{minutes}m"),
    })
}

/// Raises `holds` pending questions, 64 a request, with deadlines spread over 30 minutes to
/// 10 hours in no particular order of creation, so that most urgent first is not oldest first.
async fn fill(server: SocketAddr, agent: &str, holds: usize) -> anyhow::Result<()> {
    const PER_REQUEST: usize = 64;
    let mut line = Connection::open(server, agent).await?;
    let path = format!("/api/v1/worlds/{WORLD}/holds");
    for first in (0..holds).step_by(PER_REQUEST) {
        let items: Vec<Value> = (first..holds.min(first + PER_REQUEST))
            .map(|i| question(30 + (i * 7919) % 570))
            .collect();
        let body = serde_json::to_vec(&json!({ "items": items }))?;
        line.send("POST", &path, Some(&body), 201).await?;
    }
    Ok(())
}

/// Signs in with a person's token as a browser does; returns the session cookie
/// (`name=value`).
async fn session_cookie(base: &str, token: &str) -> anyhow::Result<String> {
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()?;
    let answer = http
        // Tokens are URL-safe.
        .get(format!("{base}/login?token={token}"))
        .send()
        .await?;
    if answer.status().as_u16() != 303 {
        bail!("signing in answered {}", answer.status());
    }
    let cookie = answer
        .headers()
        .get(reqwest::header::SET_COOKIE)
        .context("signing in set no cookie")?
        .to_str()?;
    Ok(cookie
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_owned())
}

/// Times `runs` requests for `path` (after a few to warm up), each a `200`.
async fn timed(line: &mut Connection, path: &str, runs: usize) -> anyhow::Result<Latencies> {
    for _ in 0..runs / 10 {
        line.send("GET", path, None, 200).await?;
    }
    let mut samples = Vec::with_capacity(runs);
    for _ in 0..runs {
        let start = Instant::now();
        line.send("GET", path, None, 200).await?;
        samples.push(start.elapsed());
    }
    Ok(Latencies::new(samples))
}

fn report(name: &str, lat: &Latencies) {
    println!(
        "  {name:<44} p50 {:>10}   p99 {:>10}   ({} requests)",
        ms(lat.percentile(50.0)),
        ms(lat.percentile(99.0)),
        lat.len()
    );
}

async fn first_page(server: SocketAddr, cookie: &str, runs: usize) -> anyhow::Result<()> {
    let mut line = Connection::session(server, cookie).await?;
    let shell = timed(&mut line, "/", runs).await?;
    report("GET / (the signed-in shell)", &shell);
    for order in ["newest", "urgent"] {
        let path = format!("/api/v1/holds?limit=50&order={order}");
        let lat = timed(&mut line, &path, runs).await?;
        report(&format!("GET {path}"), &lat);
        // The page needs both, one after the other.
        let mut both = Vec::with_capacity(runs);
        for _ in 0..runs {
            let start = Instant::now();
            line.send("GET", "/", None, 200).await?;
            line.send("GET", &path, None, 200).await?;
            both.push(start.elapsed());
        }
        report(&format!("  shell + {order} first"), &Latencies::new(both));
    }
    Ok(())
}

fn epoch_ms(t: SystemTime) -> anyhow::Result<f64> {
    Ok(t.duration_since(UNIX_EPOCH)?.as_secs_f64() * 1000.0)
}

/// What the browser's part of the benchmark does (each part skipped at 0).
pub struct Browsing {
    /// Holds created one by one while the inbox is open.
    pub arriving: usize,
    /// Times the inbox is loaded afresh for its first paint.
    pub reloads: usize,
    /// Holds raised at once into an open inbox.
    pub burst: usize,
    /// Approvals decided with the keyboard.
    pub triage: usize,
}

impl Browsing {
    fn any(&self) -> bool {
        self.arriving + self.reloads + self.burst + self.triage > 0
    }
}

/// Loads the inbox (signed in) and waits for its first rows.
async fn open_inbox(b: &fantoccini::Client, base: &str) -> anyhow::Result<()> {
    b.goto(&format!("{base}/")).await?;
    b.wait()
        .at_most(PATIENCE)
        .for_element(fantoccini::Locator::Css("li.row[data-hold]"))
        .await
        .context("the inbox showed no hold")?;
    Ok(())
}

fn distribution(name: &str, lat: &Latencies, what: &str) {
    println!(
        "  {name:<44} p50 {:>10}   p90 {:>10}   max {}   ({} {what})",
        ms(lat.percentile(50.0)),
        ms(lat.percentile(90.0)),
        ms(lat.percentile(100.0)),
        lat.len()
    );
}

/// The inbox's first paint, loaded afresh `reloads` times.
async fn first_paint(b: &fantoccini::Client, base: &str, reloads: usize) -> anyhow::Result<()> {
    const MARK: &str = r#"
const m = performance.getEntriesByName("holdpoint:first-rows")[0];
const nav = performance.getEntriesByType("navigation")[0];
return m ? m.startTime - (nav ? nav.startTime : 0) : null;
"#;
    let mut samples = Vec::with_capacity(reloads);
    for _ in 0..reloads {
        open_inbox(b, base).await?;
        let at = b.execute(MARK, vec![]).await?;
        let at = at
            .as_f64()
            .context("the inbox made no mark holdpoint:first-rows")?;
        samples.push(Duration::from_secs_f64(at.max(0.0) / 1000.0));
    }
    distribution(
        "navigation -> first rows in the page",
        &Latencies::new(samples),
        "loads",
    );
    Ok(())
}

async fn arrivals(
    b: &fantoccini::Client,
    server: SocketAddr,
    base: &str,
    agent: &str,
    count: usize,
) -> anyhow::Result<()> {
    open_inbox(b, base).await?;
    // The card of the selected hold is shown too.
    b.wait()
        .at_most(PATIENCE)
        .for_element(fantoccini::Locator::Css("article[data-hold]"))
        .await
        .context("the inbox showed no card")?;
    b.execute(OBSERVER, vec![]).await?;
    let mut line = Connection::open(server, agent).await?;
    let path = format!("/api/v1/worlds/{WORLD}/holds");
    let body = serde_json::to_vec(&json!({ "items": [question(30)] }))?;
    let mut samples = Vec::with_capacity(count);
    let mut created = Vec::with_capacity(count);
    for _ in 0..count {
        let before = b
            .execute("return window.holdpointBenchCounted()", vec![])
            .await?;
        let sent = SystemTime::now();
        let start = Instant::now();
        let answer = line.send("POST", &path, Some(&body), 201).await?;
        created.push(start.elapsed());
        let raised: Raised = serde_json::from_slice(&answer)?;
        let id = raised.ids().next().context("no hold raised")?;
        let seen = b
            .execute_async(WAIT_FOR_CARD, vec![json!(id), before])
            .await
            .with_context(|| format!("the inbox did not show {id}"))?;
        let seen = seen.as_f64().context("the page noted no time")?;
        let waited = (seen - epoch_ms(sent)?).max(0.0);
        samples.push(Duration::from_secs_f64(waited / 1000.0));
    }
    let created = Latencies::new(created);
    let lat = Latencies::new(samples);
    println!(
        "  {:<44} p50 {:>10}   p99 {:>10}   ({} holds)",
        "POST …/holds (one question), answered",
        ms(created.percentile(50.0)),
        ms(created.percentile(99.0)),
        created.len()
    );
    println!(
        "  {:<44} p50 {:>10}   p90 {:>10}   max {}",
        "created -> shown in the inbox (row or count)",
        ms(lat.percentile(50.0)),
        ms(lat.percentile(90.0)),
        ms(lat.percentile(100.0))
    );
    Ok(())
}

/// Installed in a freshly loaded inbox before a burst of `arguments[0]` holds: records the
/// page's long tasks, and when its rows and count of new holds account for the whole burst
/// (at the animation frame after the change). Returns what they accounted for before.
const BURST_WATCH: &str = r#"
const target = arguments[0];
const shown = () => {
  const b = document.querySelector("button.arrivals");
  const n = b && !b.hidden ? parseInt(b.textContent, 10) || 0 : 0;
  return n + document.querySelectorAll("li.row").length;
};
const w = { before: shown(), now: 0, longest: 0, long: 0, done: null };
window.holdpointBenchBurst = w;
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) { w.longest = Math.max(w.longest, e.duration); if (e.duration > 50) w.long += 1; }
}).observe({ type: "longtask" });
new MutationObserver(() => {
  if (w.done !== null) return;
  w.now = shown() - w.before;
  if (w.now >= target) requestAnimationFrame(() => { if (w.done === null) w.done = Date.now(); });
}).observe(document.body, { childList: true, subtree: true, characterData: true, attributes: true, attributeFilter: ["hidden"] });
return w.before;
"#;

/// How many requests of a burst are in flight at once.
const BURST_IN_FLIGHT: usize = 4;

/// Raises `count` questions, 64 a request, over [`BURST_IN_FLIGHT`] connections at once.
async fn raise_burst(server: SocketAddr, agent: String, count: usize) -> anyhow::Result<Duration> {
    const PER_REQUEST: usize = 64;
    let next = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let path = format!("/api/v1/worlds/{WORLD}/holds");
    let start = Instant::now();
    let mut lines = tokio::task::JoinSet::new();
    for _ in 0..BURST_IN_FLIGHT {
        let mut line = Connection::open(server, &agent).await?;
        let (next, path) = (next.clone(), path.clone());
        lines.spawn(async move {
            loop {
                let first = next.fetch_add(PER_REQUEST, std::sync::atomic::Ordering::Relaxed);
                if first >= count {
                    return anyhow::Ok(());
                }
                let items: Vec<Value> = (first..count.min(first + PER_REQUEST))
                    .map(|i| question(30 + (i * 7919) % 570))
                    .collect();
                let body = serde_json::to_vec(&json!({ "items": items }))?;
                line.send("POST", &path, Some(&body), 201).await?;
            }
        });
    }
    while let Some(done) = lines.join_next().await {
        done??;
    }
    Ok(start.elapsed())
}

async fn burst(
    b: &fantoccini::Client,
    server: SocketAddr,
    base: &str,
    agent: &str,
    count: usize,
) -> anyhow::Result<()> {
    open_inbox(b, base).await?;
    b.execute(BURST_WATCH, vec![json!(count)]).await?;
    let sent = SystemTime::now();
    let raising = tokio::spawn(raise_burst(server, agent.to_owned(), count));
    // Generous: a debug build on a loaded machine raises a few hundred holds a second.
    let deadline = Instant::now() + PATIENCE + Duration::from_millis(10 * count as u64);
    let done = loop {
        let w = b
            .execute("return window.holdpointBenchBurst", vec![])
            .await?;
        if let Some(at) = w["done"].as_f64() {
            break at;
        }
        if Instant::now() > deadline {
            bail!(
                "the inbox accounted for {} of the burst's {count} holds",
                w["now"].as_u64().unwrap_or(0)
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let raised = raising.await??;
    // The long tasks of the last frames are reported a moment later.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let w = b
        .execute("return window.holdpointBenchBurst", vec![])
        .await?;
    println!(
        "  {:<44} {:.1} s ({:.0} holds/s; 64 a request, {BURST_IN_FLIGHT} in flight)",
        format!("burst of {count} holds raised in"),
        raised.as_secs_f64(),
        count as f64 / raised.as_secs_f64().max(1e-9)
    );
    println!(
        "  {:<44} {}",
        "first sent -> all counted in the inbox",
        ms(Duration::from_secs_f64(
            (done - epoch_ms(sent)?).max(0.0) / 1000.0
        ))
    );
    // Chromium reports only the tasks over 50 ms.
    let long = w["long"].as_u64().unwrap_or(0);
    let longest = match w["longest"].as_f64() {
        Some(longest) if long > 0 => ms(Duration::from_secs_f64(longest / 1000.0)),
        _ => "< 50 ms".to_owned(),
    };
    println!(
        "  {:<44} max {longest}   ({long} tasks over 50 ms)",
        "longest main-thread task during the burst",
    );
    Ok(())
}

/// Reads the person's live stream, sending on `decided` each hold decided and when.
async fn follow_decisions(
    mut stream: reqwest::Response,
    decided: tokio::sync::mpsc::UnboundedSender<(String, Instant)>,
) -> anyhow::Result<()> {
    let mut frames = SseDecoder::default();
    while let Some(chunk) = stream.chunk().await? {
        frames.push(&chunk);
        while let Some(frame) = frames.next_frame() {
            if frame.event != "hold.decided" {
                continue;
            }
            let data: Value = serde_json::from_str(&frame.data)?;
            if let Some(hold) = data["hold"].as_str() {
                let _ = decided.send((hold.to_owned(), Instant::now()));
            }
        }
    }
    Ok(())
}

/// Reads the selected row's hold.
const SELECTED: &str = r#"
const r = document.querySelector("li.row[aria-current=true]");
return r ? r.dataset.hold : null;
"#;

async fn triage(
    b: &fantoccini::Client,
    server: SocketAddr,
    base: &str,
    person: &str,
    agent: &str,
    count: usize,
) -> anyhow::Result<()> {
    // Approvals, each its own request (so its own row), the newest at the top of the inbox.
    let mut line = Connection::open(server, agent).await?;
    let path = format!("/api/v1/worlds/{WORLD}/holds");
    let mut raised = std::collections::HashSet::new();
    for i in 0..count {
        let item = json!({
            "kind": "approval",
            "tool": "shell_cmd",
            "arguments": {"command": format!("make deploy-{i}")},
        });
        let body = serde_json::to_vec(&json!({ "items": [item] }))?;
        let answer = line.send("POST", &path, Some(&body), 201).await?;
        let ids: Raised = serde_json::from_slice(&answer)?;
        raised.extend(ids.ids());
    }
    let stream = reqwest::Client::new()
        .get(format!("{base}/api/v1/events?world={WORLD}"))
        .bearer_auth(person)
        .send()
        .await?
        .error_for_status()?;
    let (tx, mut decided) = tokio::sync::mpsc::unbounded_channel();
    let follower = tokio::spawn(follow_decisions(stream, tx));
    open_inbox(b, base).await?;
    b.wait()
        .at_most(PATIENCE)
        .for_element(fantoccini::Locator::Css("article[data-hold]"))
        .await
        .context("the inbox showed no card")?;
    let mut samples = Vec::with_capacity(count);
    for _ in 0..count {
        let selected = b.execute(SELECTED, vec![]).await?;
        let selected = selected.as_str().context("no hold is selected")?.to_owned();
        if !raised.remove(&selected) {
            bail!("the selected hold {selected} is not one of the approvals raised to triage");
        }
        let key = fantoccini::actions::KeyActions::new("keys".into())
            .then(fantoccini::actions::KeyAction::Down { value: 'a' })
            .then(fantoccini::actions::KeyAction::Up { value: 'a' });
        let start = Instant::now();
        b.perform_actions(key).await?;
        let at = loop {
            let (hold, at) = tokio::time::timeout(PATIENCE, decided.recv())
                .await
                .with_context(|| format!("{selected} was not decided"))?
                .context("the live stream ended")?;
            if hold == selected {
                break at;
            }
        };
        samples.push(at.saturating_duration_since(start));
    }
    follower.abort();
    distribution(
        "key a -> decision on the live stream",
        &Latencies::new(samples),
        "holds",
    );
    Ok(())
}

pub async fn run(
    dir: &tempfile::TempDir,
    holds: usize,
    requests: usize,
    browsing: Browsing,
) -> anyhow::Result<()> {
    println!("== the web inbox with {holds} pending holds");
    let (server, admin) = start(dir, None).await?;
    let agent: Caller = admin.token("bench-agent", "agent").await?;
    let person = admin.token("bench-person", "approver").await?;
    let started = Instant::now();
    fill(server.addr(), &agent.token, holds).await?;
    println!(
        "  raised in {:.1} s; times measured over loopback by a keep-alive client",
        started.elapsed().as_secs_f64()
    );
    let cookie = session_cookie(&server.url(), &person.token).await?;
    first_page(server.addr(), &cookie, requests).await?;
    if browsing.any() {
        let (addr, base) = (server.addr(), server.url());
        let browser = Chromium::start(1280, 900, PATIENCE)
            .await
            .map_err(anyhow::Error::msg)?;
        let b = &browser.client;
        b.update_timeouts(fantoccini::wd::TimeoutConfiguration::new(
            Some(PATIENCE),
            Some(PATIENCE),
            None,
        ))
        .await?;
        // Signs in: the session's cookie is the browser's from now on.
        b.goto(&format!("{base}/login?token={}", person.token))
            .await?;
        println!("  in Chromium (its clock and this program's are this machine's):");
        if browsing.reloads > 0 {
            first_paint(b, &base, browsing.reloads).await?;
        }
        if browsing.arriving > 0 {
            arrivals(b, addr, &base, &agent.token, browsing.arriving).await?;
        }
        if browsing.burst > 0 {
            burst(b, addr, &base, &agent.token, browsing.burst).await?;
        }
        if browsing.triage > 0 {
            triage(b, addr, &base, &person.token, &agent.token, browsing.triage).await?;
        }
        browser.client.close().await?;
    }
    server.stop().await?;
    println!();
    Ok(())
}
