//! Email notices end to end, as a person sees them:
//!
//! 1. **mailed**: an agent `POST`s an approval to `/api/v1/worlds/{w}/holds`; measured from
//!    the request's start until the local SMTP server has accepted the notice's message (the
//!    end of its `DATA`, before it answers `250`);
//! 2. **confirmed**: the agent waits on the hold (`…/holds/{id}/wait`); the person opens the
//!    mail's approve link (`GET /d/{token}`, not timed) and confirms it (`POST`); measured from
//!    the confirm's start until the agent's wait returns.
//!
//! Holds are raised one at a time, so each figure is one notice's path through an idle
//! server: the sender's log follower, the notice's record, the SMTP conversation (lettre, a
//! pooled connection) and the link's check and decision. The SMTP server is a minimal one here
//! (enough of RFC 5321 for lettre), so its own time is next to nothing.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use holdpoint_server::Settings;
use holdpoint_server::channels::ChannelSettings;
use holdpoint_server::channels::email::{EmailSettings, Security};
use holdpoint_server::channels::route::Route;
use serde::Deserialize;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use crate::http::{Raised, WORLD, start_with};
use crate::stats::{Latencies, ms};

/// Where the links point; the bench opens their paths on the server itself.
const PUBLIC_URL: &str = "http://holdpoint.bench";

/// A message the SMTP server accepted: when, its raw text, and how long its end (`.`) came
/// after the rest of it.
struct Accepted {
    at: Instant,
    data: String,
    end_wait: Duration,
}

/// Answers SMTP on `listener`, one task per connection, handing each message to `out`.
fn smtp_sink(listener: TcpListener, out: mpsc::UnboundedSender<Accepted>) {
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let out = out.clone();
            tokio::spawn(async move {
                if let Err(e) = smtp_session(socket, out).await {
                    eprintln!("smtp sink: {e}");
                }
            });
        }
    });
}

async fn smtp_session(
    socket: tokio::net::TcpStream,
    out: mpsc::UnboundedSender<Accepted>,
) -> anyhow::Result<()> {
    let (read, mut write) = socket.into_split();
    let mut lines = BufReader::new(read);
    write.write_all(b"220 bench ESMTP\r\n").await?;
    let mut line = String::new();
    loop {
        line.clear();
        if lines.read_line(&mut line).await? == 0 {
            return Ok(());
        }
        let verb = line.get(..4).unwrap_or("").to_ascii_uppercase();
        let reply: &[u8] = match verb.as_str() {
            "EHLO" => b"250-bench\r\n250 8BITMIME\r\n",
            "HELO" | "MAIL" | "RCPT" | "RSET" | "NOOP" => b"250 OK\r\n",
            "QUIT" => {
                write.write_all(b"221 bye\r\n").await?;
                return Ok(());
            }
            "DATA" => {
                write.write_all(b"354 go on\r\n").await?;
                // Read as it arrives, to see when the message's end came after the rest.
                let mut data = Vec::new();
                let mut before_end = Instant::now();
                let at = loop {
                    let chunk = lines.fill_buf().await?;
                    if chunk.is_empty() {
                        return Ok(());
                    }
                    let n = chunk.len();
                    data.extend_from_slice(chunk);
                    lines.consume(n);
                    let now = Instant::now();
                    if data.ends_with(b"\r\n.\r\n") || data == b".\r\n" {
                        if n > 5 {
                            before_end = now;
                        }
                        break now;
                    }
                    before_end = now;
                };
                let data = String::from_utf8_lossy(&data).into_owned();
                let _ = out.send(Accepted {
                    at,
                    data,
                    end_wait: at.duration_since(before_end),
                });
                b"250 accepted\r\n"
            }
            _ => b"502 not here\r\n",
        };
        write.write_all(reply).await?;
    }
}

/// The body's text with quoted-printable soft line breaks and escapes undone (the links of a
/// long plain-text part are wrapped so).
fn unquote(data: &str) -> String {
    let joined = data.replace("=\r\n", "").replace("=\n", "");
    let bytes = joined.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'='
            && i + 2 < bytes.len()
            && let Ok(b) = u8::from_str_radix(&joined[i + 1..i + 3], 16)
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The path (`/d/…`) of the first link of a message.
fn first_link(data: &str) -> anyhow::Result<String> {
    let text = unquote(data);
    let start = text
        .find(&format!("{PUBLIC_URL}/d/"))
        .context("a notice without a link")?;
    let path: String = text[start + PUBLIC_URL.len()..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || "/-_.".contains(*c))
        .collect();
    Ok(path)
}

/// `{"hold": …}` of a wait.
#[derive(Deserialize)]
struct Waited {
    decided: bool,
}

pub async fn run(dir: &tempfile::TempDir, holds: usize) -> anyhow::Result<()> {
    println!(
        "== Email notices: hold created -> mail accepted by a local SMTP server; link confirmed -> agent's wait returns ({holds} holds, one at a time)"
    );
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    let (tx, mut mails) = mpsc::unbounded_channel();
    smtp_sink(listener, tx);

    let channels = ChannelSettings {
        email: Some(EmailSettings {
            host: "127.0.0.1".into(),
            port: Some(port),
            security: Security::None,
            from: "holdpoint@example.com".into(),
            username_env: None,
            password_env: None,
            public_url: PUBLIC_URL.into(),
            link_lifetime: Duration::from_secs(3600),
            attempts: 3,
            backoff: Duration::from_millis(100),
            timeout: Duration::from_secs(10),
        }),
        routes: vec![Route {
            to: vec!["approver@example.com".into()],
            decides_as: Some("bench-approver".into()),
            ..Route::default()
        }],
        ..ChannelSettings::default()
    };
    let settings = Settings {
        channels,
        ..Settings::default()
    };
    let (server, admin) = start_with(dir.path(), settings).await?;
    let agent = admin.token("bench-agent", "agent").await?;
    let agent = Arc::new(agent);
    let anonymous = reqwest::Client::new();
    let base = server.url();

    let mut mailed = Vec::with_capacity(holds);
    let mut end_waits = Vec::with_capacity(holds);
    let mut confirmed = Vec::with_capacity(holds);
    for i in 0..holds {
        let started = Instant::now();
        let raised: Raised = agent
            .post(
                &format!("/api/v1/worlds/{WORLD}/holds"),
                json!({"items": [{"kind": "approval", "tool": "deploy", "arguments": {"n": i}}]}),
                201,
            )
            .await?;
        let hold = raised.ids().next().context("no hold raised")?;
        let mail = tokio::time::timeout(Duration::from_secs(30), mails.recv())
            .await
            .context("no mail within 30s")?
            .context("the SMTP server stopped")?;
        mailed.push(mail.at.duration_since(started));
        end_waits.push(mail.end_wait);
        let path = first_link(&mail.data)?;

        let waiting = {
            let agent = agent.clone();
            tokio::spawn(async move {
                let r = agent
                    .http
                    .get(format!(
                        "{}/api/v1/holds/{hold}/wait?timeout=30s",
                        agent.base
                    ))
                    .bearer_auth(&agent.token)
                    .send()
                    .await?;
                let waited: Waited = r.json().await?;
                anyhow::Ok((Instant::now(), waited.decided))
            })
        };
        let page = anonymous
            .get(format!("{base}{path}"))
            .send()
            .await?
            .text()
            .await?;
        let csrf = page
            .split_once("name=\"csrf\" value=\"")
            .and_then(|(_, rest)| rest.split('"').next())
            .with_context(|| format!("no confirm form on the link's page: {page}"))?
            .to_owned();
        // The token is URL-safe base64, so the form needs no escaping.
        if !csrf
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_".contains(c))
        {
            bail!("a CSRF token that is not URL-safe: {csrf:?}");
        }
        let sent = Instant::now();
        let r = anonymous
            .post(format!("{base}{path}"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(format!("csrf={csrf}"))
            .send()
            .await?;
        if !r.status().is_success() {
            bail!("confirm: {} {}", r.status(), r.text().await?);
        }
        let (returned, decided) = waiting.await??;
        if !decided {
            bail!("the wait returned undecided");
        }
        confirmed.push(returned.saturating_duration_since(sent));
    }
    let mailed = Latencies::new(mailed);
    let confirmed = Latencies::new(confirmed);
    let end_waits = Latencies::new(end_waits);
    println!(
        "  hold created -> mail accepted:   p50 {}  p99 {}  max {}  (n = {})",
        ms(mailed.percentile(50.0)),
        ms(mailed.percentile(99.0)),
        ms(mailed.percentile(100.0)),
        mailed.len()
    );
    // lettre writes a message's end (`.`) apart from its body: with Nagle's algorithm on its
    // socket, that small write waits for the body's acknowledgement, which the receiver may
    // delay (40 ms on Linux).
    println!(
        "    of which the message's end after its body: p50 {}  p99 {}",
        ms(end_waits.percentile(50.0)),
        ms(end_waits.percentile(99.0)),
    );
    println!(
        "  link confirmed -> wait returns:  p50 {}  p99 {}  (n = {})",
        ms(confirmed.percentile(50.0)),
        ms(confirmed.percentile(99.0)),
        confirmed.len()
    );
    server.stop().await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_are_found_in_quoted_printable_text() {
        let data = "Subject: x\r\n\r\nApprove once:\r\nhttp://holdpoint.bench/d/eyJhIjoxfQ.ab=\r\nc-_d\r\n=3D\r\n";
        assert_eq!(first_link(data).unwrap(), "/d/eyJhIjoxfQ.abc-_d");
    }
}
