//! The email channel: `[channels.email]`, the SMTP transport (lettre, rustls), and the
//! message a hold's notice is: its card in plain text and HTML, and a link per decision.

use std::time::Duration;

use lettre::message::{Mailbox, MultiPart};
use lettre::transport::smtp::authentication::Credentials;
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
use serde::{Deserialize, Serialize};

use super::page::{card_text, escape};
use holdpoint_protocol::{Hold, Notice};

/// How the connection to the mail server is protected.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Security {
    /// Plain text, then STARTTLS (required): port 587.
    #[default]
    Starttls,
    /// TLS from the start: port 465.
    Tls,
    /// No encryption at all: a relay on this machine or a test server only.
    None,
}

/// `[channels.email]`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct EmailSettings {
    /// The mail server's host name.
    pub host: String,
    /// Its port: 587 with `starttls`, 465 with `tls`, 25 with `none`, unless set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    #[serde(default)]
    pub security: Security,
    /// The sender, `holdpoint@example.com` or `Holdpoint <holdpoint@example.com>`.
    pub from: String,
    /// The environment variable holding the SMTP user name (no authentication when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username_env: Option<String>,
    /// The environment variable holding the SMTP password: the secret is never in the file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password_env: Option<String>,
    /// The address people reach this server at (`https://holdpoint.example.com`): the links'
    /// base.
    pub public_url: String,
    /// The longest a link lasts, whatever the hold's deadline.
    #[serde(default = "link_lifetime", with = "crate::config::duration")]
    pub link_lifetime: Duration,
    /// Attempts per notice, the first included.
    #[serde(default = "attempts")]
    pub attempts: u32,
    /// The wait before the second attempt; it doubles each time.
    #[serde(default = "backoff", with = "crate::config::duration")]
    pub backoff: Duration,
    /// Per attempt: connecting, and the whole conversation.
    #[serde(default = "timeout", with = "crate::config::duration")]
    pub timeout: Duration,
}

fn link_lifetime() -> Duration {
    Duration::from_secs(7 * 24 * 3600)
}
fn attempts() -> u32 {
    10
}
fn backoff() -> Duration {
    Duration::from_secs(2)
}
fn timeout() -> Duration {
    Duration::from_secs(20)
}

/// A problem with `[channels.email]`: the key at fault and what is wrong.
pub type Problem = (String, String);

impl EmailSettings {
    pub fn port(&self) -> u16 {
        self.port.unwrap_or(match self.security {
            Security::Starttls => 587,
            Security::Tls => 465,
            Security::None => 25,
        })
    }

    /// What can be checked without connecting, each problem naming its key.
    pub fn check(&self) -> Result<(), Problem> {
        let bad = |k: &str, m: String| Err((format!("channels.email.{k}"), m));
        if self.host.trim().is_empty() || self.host.contains(['/', ' ', ':']) {
            return bad("host", format!("{:?} is not a host name", self.host));
        }
        if self.from.parse::<Mailbox>().is_err() {
            return bad(
                "from",
                format!(
                    "{:?} is not an address (write holdpoint@example.com or Holdpoint <holdpoint@example.com>)",
                    self.from
                ),
            );
        }
        let url = self.public_url.trim_end_matches('/');
        if !(url.starts_with("https://") || url.starts_with("http://")) || url.contains(' ') {
            return bad(
                "public_url",
                format!(
                    "{:?} is not an http(s) URL (the address people open links at, such as https://holdpoint.example.com)",
                    self.public_url
                ),
            );
        }
        if self.attempts == 0 {
            return bad("attempts", "must be at least 1".into());
        }
        if self.link_lifetime < Duration::from_secs(60) {
            return bad("link_lifetime", "must be at least 1m".into());
        }
        for (key, var) in [
            ("username_env", &self.username_env),
            ("password_env", &self.password_env),
        ] {
            if let Some(var) = var
                && std::env::var_os(var).is_none()
            {
                return bad(key, format!("names ${var}, which is not set"));
            }
        }
        if self.username_env.is_some() != self.password_env.is_some() {
            return bad(
                "password_env",
                "username_env and password_env are set together, or neither".into(),
            );
        }
        Ok(())
    }

    /// The transport these settings describe.
    pub fn transport(&self) -> Result<AsyncSmtpTransport<Tokio1Executor>, String> {
        type T = AsyncSmtpTransport<Tokio1Executor>;
        let builder = match self.security {
            Security::Starttls => T::starttls_relay(&self.host).map_err(|e| e.to_string())?,
            Security::Tls => T::relay(&self.host).map_err(|e| e.to_string())?,
            Security::None => T::builder_dangerous(&self.host),
        };
        let mut builder = builder.port(self.port()).timeout(Some(self.timeout));
        if let (Some(u), Some(p)) = (&self.username_env, &self.password_env) {
            let user = std::env::var(u).map_err(|_| format!("${u} is not set"))?;
            let password = std::env::var(p).map_err(|_| format!("${p} is not set"))?;
            builder = builder.credentials(Credentials::new(user, password));
        }
        Ok(builder.build())
    }

    /// Connects, says EHLO, starts TLS and logs in as configured: what `holdpoint config
    /// check` does, so a wrong host or refused credentials are said at once.
    pub async fn test_connection(&self) -> Result<(), String> {
        let where_ = format!("{}:{}", self.host, self.port());
        let transport = self.transport()?;
        match transport.test_connection().await {
            Ok(true) => Ok(()),
            Ok(false) => Err(format!("the mail server at {where_} did not answer")),
            Err(e) => Err(format!(
                "cannot reach the mail server at {where_}: {}",
                holdpoint_protocol::error_chain(&e)
            )),
        }
    }
}

/// One decision link of a notice: what it does, and its address.
pub struct Link {
    pub label: String,
    pub url: String,
}

/// The message of notice `notice` of `hold`, with its links.
pub fn message(
    settings: &EmailSettings,
    notice: &Notice,
    hold: &Hold,
    world: &str,
    links: &[Link],
) -> Result<Message, String> {
    let from: Mailbox = settings.from.parse().map_err(|e| format!("from: {e}"))?;
    let to = &notice.recipient;
    let to: Mailbox = to.parse().map_err(|e| format!("{to:?}: {e}"))?;
    let (why, intro) = super::schedule::intro(notice, hold, world);
    let subject = match hold.tool() {
        Some(tool) => format!("[Holdpoint] {why}{world}: approve {}?", one_line(tool, 60)),
        None => format!("[Holdpoint] {why}{world}: a question"),
    };
    let card = card_text(hold);
    let mut text = format!("{intro}\n\n{card}\n");
    for l in links {
        text.push_str(&format!("\n{}:\n{}\n", l.label, l.url));
    }
    text.push_str(
        "\nEach link opens a page that asks you to confirm; it works once, for this hold \
         only, until the hold's deadline.\n",
    );
    let mut html = format!(
        "<!doctype html><html><body style=\"font-family:sans-serif;max-width:40em\">\
         <p>{}</p><pre style=\"white-space:pre-wrap;\
         background:#f4f4f4;padding:.75em\">{}</pre><p>",
        escape(&intro),
        escape(&card)
    );
    for l in links {
        html.push_str(&format!(
            "<a href=\"{}\" style=\"display:inline-block;margin:.25em;padding:.6em 1em;\
             border:1px solid #444;border-radius:6px;text-decoration:none\">{}</a> ",
            escape(&l.url),
            escape(&l.label)
        ));
    }
    html.push_str(
        "</p><p style=\"color:#555\">Each link opens a page that asks you to confirm; it \
         works once, for this hold only, until the hold's deadline.</p></body></html>",
    );
    Message::builder()
        .from(from)
        .to(to)
        .subject(subject)
        .message_id(Some(format!("<{}@holdpoint>", notice.id)))
        .multipart(MultiPart::alternative_plain_html(text, html))
        .map_err(|e| e.to_string())
}

/// Sends `message` with `transport`.
pub async fn send(
    transport: &AsyncSmtpTransport<Tokio1Executor>,
    message: Message,
) -> Result<(), String> {
    transport
        .send(message)
        .await
        .map(|_| ())
        .map_err(|e| holdpoint_protocol::error_chain(&e))
}

/// `text` on one line, at most `max` characters.
fn one_line(text: &str, max: usize) -> String {
    let line: String = text.chars().filter(|c| !c.is_control()).take(max).collect();
    if text.chars().count() > max {
        format!("{line}…")
    } else {
        line
    }
}
