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
//!    clock before each `POST`. Both clocks are this machine's.

use std::net::SocketAddr;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
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

async fn arrivals(
    server: SocketAddr,
    base: &str,
    person: &str,
    agent: &str,
    count: usize,
) -> anyhow::Result<()> {
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
    b.goto(&format!("{base}/login?token={person}")).await?;
    // The inbox has shown its first page.
    b.wait()
        .at_most(PATIENCE)
        .for_element(fantoccini::Locator::Css("article[data-hold]"))
        .await
        .context("the inbox showed no hold")?;
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
    browser.client.close().await?;
    Ok(())
}

pub async fn run(
    dir: &tempfile::TempDir,
    holds: usize,
    requests: usize,
    arriving: usize,
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
    if arriving > 0 {
        arrivals(
            server.addr(),
            &server.url(),
            &person.token,
            &agent.token,
            arriving,
        )
        .await?;
    }
    server.stop().await?;
    println!();
    Ok(())
}
