//! The Slack channel: `[channels.slack]`, the Web API calls Holdpoint makes (`auth.test`,
//! `chat.postMessage`, `chat.update`, `views.open`), the hold's card in Block Kit, and the
//! interaction requests Slack sends back when someone presses a button (`POST
//! /slack/interactions`, signed with the app's signing secret).
//!
//! Who may decide from Slack is `users`' mapping of Slack members to approvers' names: the
//! clicking member's name is what the decision is recorded as (via `slack`), and a member it
//! does not name decides nothing. Every text an agent or LLM wrote is escaped for mrkdwn.

use std::collections::BTreeMap;
use std::time::Duration;

use axum::http::{HeaderMap, StatusCode};
use hmac::{Hmac, KeyInit, Mac};
use holdpoint_protocol::{
    DecideOutcome, Decision, Hold, HoldId, HoldSpec, Notice, NoticePurpose, OnTimeout, Outcome,
    PostedMessage, Timestamp,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::Sha256;

use super::page::{card_text, label};
use super::{Channels, SLACK, decision_of, decisions};
use crate::error::ApiError;

/// `[channels.slack]`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SlackSettings {
    /// The environment variable holding the app's bot token (`xoxb-…`): never in the file.
    pub bot_token_env: String,
    /// The environment variable holding the app's signing secret, which interaction
    /// requests are verified with.
    pub signing_secret_env: String,
    /// The Web API's base URL; another one only for a test server.
    #[serde(default = "api_url")]
    pub api_url: String,
    /// Slack members (`U024BE7LH`) and the approvers' names they decide as. A member not
    /// named here may not decide from Slack.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub users: BTreeMap<String, String>,
    /// Attempts per notice (and per update of a message), the first included.
    #[serde(default = "attempts")]
    pub attempts: u32,
    /// The wait before the second attempt; it doubles each time.
    #[serde(default = "backoff", with = "crate::config::duration")]
    pub backoff: Duration,
    /// Per Web API call.
    #[serde(default = "timeout", with = "crate::config::duration")]
    pub timeout: Duration,
}

fn api_url() -> String {
    "https://slack.com/api".into()
}
fn attempts() -> u32 {
    10
}
fn backoff() -> Duration {
    Duration::from_secs(2)
}
fn timeout() -> Duration {
    Duration::from_secs(10)
}

/// Interaction requests signed longer ago than this are refused (Slack's own advice), so a
/// captured request cannot be replayed later.
const MAX_AGE_SECS: i64 = 5 * 60;

/// The modal asking for a deny's reason.
const DENY_REASON_VIEW: &str = "holdpoint_deny_reason";
/// The button opening it: not a decision of its own.
const DENY_WITH_REASON: &str = "deny_with_reason";

impl SlackSettings {
    /// What can be checked without connecting, each problem naming its key.
    pub fn check(&self) -> Result<(), (String, String)> {
        let bad = |k: &str, m: String| Err((format!("channels.slack.{k}"), m));
        for (key, var) in [
            ("bot_token_env", &self.bot_token_env),
            ("signing_secret_env", &self.signing_secret_env),
        ] {
            if var.trim().is_empty() {
                return bad(key, "must name an environment variable".into());
            }
            if std::env::var(var).map_or(true, |v| v.trim().is_empty()) {
                return bad(key, format!("names ${var}, which is not set"));
            }
        }
        let url = reqwest::Url::parse(&self.api_url).ok();
        if !url.is_some_and(|u| matches!(u.scheme(), "https" | "http") && u.has_host()) {
            return bad(
                "api_url",
                format!(
                    "{:?} is not an http(s) URL (Slack's is https://slack.com/api)",
                    self.api_url
                ),
            );
        }
        if self.attempts == 0 {
            return bad("attempts", "must be at least 1".into());
        }
        if self.timeout.is_zero() {
            return bad("timeout", "must be more than 0s".into());
        }
        for (member, name) in &self.users {
            if !super::route::slack_id(member) || member.starts_with(['C', 'G', 'D']) {
                return bad(
                    &format!("users.{member}"),
                    "is not a Slack member id (such as U024BE7LH)".into(),
                );
            }
            if name.trim().is_empty() {
                return bad(&format!("users.{member}"), "must name an approver".into());
            }
        }
        Ok(())
    }
}

/// The Slack channel as configured: its secrets read, its HTTP client made.
pub struct Slack {
    pub settings: SlackSettings,
    token: String,
    secret: String,
    http: reqwest::Client,
}

/// What a Web API call came to.
#[derive(Debug)]
pub enum CallError {
    /// Slack could not be reached, or answered with an HTTP error (retried).
    Unreachable(String),
    /// Slack answered `ok: false` with this error (`invalid_auth`, `channel_not_found`).
    Refused(String),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Unreachable(e) => write!(f, "{e}"),
            CallError::Refused(e) => write!(f, "Slack refused it: {e}"),
        }
    }
}

impl Slack {
    /// The channel `settings` describe, its secrets read from the environment.
    pub fn new(settings: &SlackSettings) -> Result<Slack, String> {
        settings.check().map_err(|(k, m)| format!("{k}: {m}"))?;
        let read = |var: &str| std::env::var(var).map_err(|_| format!("${var} is not set"));
        let http = reqwest::Client::builder()
            .timeout(settings.timeout)
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("holdpoint/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Slack {
            token: read(&settings.bot_token_env)?,
            secret: read(&settings.signing_secret_env)?,
            settings: settings.clone(),
            http,
        })
    }

    /// Calls Web API method `method` with `body`; its answer when `ok`.
    pub async fn call(&self, method: &str, body: &Value) -> Result<Value, CallError> {
        self.call_within(method, body, self.settings.timeout).await
    }

    /// `call`, given up after `timeout`.
    async fn call_within(
        &self,
        method: &str,
        body: &Value,
        timeout: Duration,
    ) -> Result<Value, CallError> {
        let url = format!("{}/{method}", self.settings.api_url.trim_end_matches('/'));
        let response = self
            .http
            .post(&url)
            .timeout(timeout)
            .bearer_auth(&self.token)
            .json(body)
            .send()
            .await
            .map_err(|e| {
                CallError::Unreachable(format!(
                    "cannot reach {url}: {}",
                    holdpoint_protocol::error_chain(&e)
                ))
            })?;
        let status = response.status();
        if !status.is_success() {
            return Err(CallError::Unreachable(format!("{url} answered {status}")));
        }
        let answer: Value = response.json().await.map_err(|e| {
            CallError::Unreachable(format!("{url} answered something not JSON: {e}"))
        })?;
        if answer["ok"] == true {
            Ok(answer)
        } else {
            Err(CallError::Refused(
                answer["error"]
                    .as_str()
                    .unwrap_or("no error given")
                    .to_owned(),
            ))
        }
    }

    /// `auth.test`: whether the token is one Slack accepts; the bot's user and team.
    pub async fn auth_test(&self) -> Result<String, CallError> {
        let a = self.call("auth.test", &json!({})).await?;
        Ok(format!(
            "{} in {}",
            a["user"].as_str().unwrap_or("?"),
            a["team"].as_str().unwrap_or("?")
        ))
    }

    /// Whether `body` was signed by Slack with the signing secret at a time within five
    /// minutes of `now`: `Err` says why not.
    pub fn verify(&self, headers: &HeaderMap, body: &[u8], now: Timestamp) -> Result<(), String> {
        let header = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .ok_or_else(|| format!("no {name} header"))
        };
        let timestamp = header("x-slack-request-timestamp")?;
        let signature = header("x-slack-signature")?;
        let at: i64 = timestamp
            .trim()
            .parse()
            .map_err(|_| "X-Slack-Request-Timestamp is not a number of seconds".to_owned())?;
        if (now.as_millis() / 1000 - at).abs() > MAX_AGE_SECS {
            return Err(
                "X-Slack-Request-Timestamp is more than 5 minutes from now: a replay, or a clock far off"
                    .into(),
            );
        }
        let tag = signature
            .strip_prefix("v0=")
            .and_then(from_hex)
            .ok_or_else(|| "X-Slack-Signature is not v0=<hex>".to_owned())?;
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(self.secret.as_bytes())
            .map_err(|_| "no signing secret".to_owned())?;
        mac.update(b"v0:");
        mac.update(timestamp.as_bytes());
        mac.update(b":");
        mac.update(body);
        // Constant time.
        mac.verify_slice(&tag)
            .map_err(|_| "X-Slack-Signature does not match the body".to_owned())
    }

    /// The approver's name member `user` decides as, if any.
    pub fn approver(&self, user: &str) -> Option<&str> {
        self.settings.users.get(user).map(String::as_str)
    }
}

fn from_hex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) || !s.is_ascii() {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).ok())
        .collect()
}

/// `text` safe in mrkdwn: Slack's control characters `&`, `<` and `>` escaped (so no
/// `<!channel>`, `<@U…>` or `<http://…|label>` of an agent's making), and no triple backtick
/// that would close a code block early.
pub fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace("```", "`\u{200b}``")
}

/// At most `max` characters of `text` (Block Kit's sections take 3000).
fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut s: String = text.chars().take(max).collect();
    s.push('…');
    s
}

/// A time as people read it in a message: `2026-11-27 14:02 UTC`.
pub fn minute(t: Timestamp) -> String {
    let s = t.to_string();
    match (s.get(..10), s.get(11..16)) {
        (Some(day), Some(time)) => format!("{day} {time} UTC"),
        _ => s,
    }
}

/// What a button says about its hold and decision: its `value`.
#[derive(Serialize, Deserialize, Debug, PartialEq, Eq)]
pub struct ButtonValue {
    pub hold: HoldId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// A decision as links name them (`approve_once`, `deny`, `answer:OPTION`), or
    /// `deny_with_reason`, which opens the modal.
    pub decision: String,
}

/// The hold's card as blocks: what is asked, the arguments as a code block, where, by whom,
/// until when and what happens then.
fn card(hold: &Hold, world: &str) -> Vec<Value> {
    let mut blocks = Vec::new();
    match &hold.spec {
        HoldSpec::Approval(a) => {
            blocks.push(section(format!(
                "*Approve `{}`?*",
                escape(&clip(&a.tool, 200))
            )));
            let args = serde_json::to_string_pretty(&a.arguments).unwrap_or_default();
            blocks.push(section(format!("```{}```", escape(&clip(&args, 2800)))));
            if let Some(d) = &a.description {
                blocks.push(json!({"type": "context", "elements": [{"type": "mrkdwn",
                    "text": format!("Why (as the agent says): {}", escape(&clip(d, 1500)))}]}));
            }
        }
        HoldSpec::Question(q) => {
            blocks.push(section(format!(
                "*Question:* {}",
                escape(&clip(&q.question, 2800))
            )));
        }
    }
    let deadline = hold.deadline.map_or_else(|| "none".to_owned(), minute);
    let at_timeout = match &hold.on_timeout {
        OnTimeout::Deny => "denied".to_owned(),
        OnTimeout::Approve => "approved".to_owned(),
        OnTimeout::Choose { option } => format!("answered {}", escape(option)),
        OnTimeout::NoAnswer => "ends unanswered".to_owned(),
    };
    let mut fields = vec![
        field("World", &escape(world)),
        field(
            "Agent",
            &escape(hold.agent.as_deref().unwrap_or(&hold.requested_by)),
        ),
        field("Deadline", &deadline),
    ];
    if hold.deadline.is_some() {
        fields.push(field("At the deadline", &at_timeout));
    }
    blocks.push(json!({"type": "section", "fields": fields}));
    blocks
}

fn section(text: String) -> Value {
    json!({"type": "section", "text": {"type": "mrkdwn", "text": text}})
}

fn field(name: &str, value: &str) -> Value {
    json!({"type": "mrkdwn", "text": format!("*{name}:*\n{value}")})
}

/// The message of a hold's notice: the card and a button per decision it offers (and deny
/// with a reason, for approvals).
pub fn message(hold: &Hold, world: &str) -> (String, Vec<Value>) {
    let mut buttons = Vec::new();
    let mut offered = decisions(hold);
    if offered.iter().any(|d| d == "deny") {
        offered.push(DENY_WITH_REASON.to_owned());
    }
    for decision in offered {
        let text = if decision == DENY_WITH_REASON {
            "Deny with a reason…".to_owned()
        } else {
            label(hold, &decision)
        };
        let value = ButtonValue {
            hold: hold.id,
            digest: hold.digest().map(str::to_owned),
            decision: decision.clone(),
        };
        let mut button = json!({
            "type": "button",
            "action_id": format!("holdpoint:{decision}"),
            "text": {"type": "plain_text", "text": clip(&text, 70)},
            "value": serde_json::to_string(&value).unwrap_or_default(),
        });
        match decision.as_str() {
            "approve_once" => button["style"] = json!("primary"),
            "deny" => button["style"] = json!("danger"),
            _ => {}
        }
        buttons.push(button);
    }
    let mut blocks = card(hold, world);
    if !buttons.is_empty() {
        blocks.push(json!({"type": "actions", "block_id": "holdpoint", "elements": buttons}));
    }
    (fallback(hold, world), blocks)
}

/// The message once the hold is decided: the card, what was decided, and no buttons.
pub fn decided(hold: &Hold, world: &str) -> (String, Vec<Value>) {
    let outcome = hold.outcome.as_ref().map_or_else(
        || {
            format!(
                "No longer open: {}",
                status_word(&format!("{:?}", hold.status))
            )
        },
        outcome_text,
    );
    let mut blocks = card(hold, world);
    blocks.push(section(format!("*{}*", escape(&outcome))));
    (format!("{outcome}: {}", fallback(hold, world)), blocks)
}

/// "Approved by alice at 2026-11-27 14:02 UTC", with the reason if one was given.
pub fn outcome_text(o: &Outcome) -> String {
    let status = status_word(&format!("{:?}", o.status));
    let by = if o.decided_by.is_empty() {
        String::new()
    } else {
        format!(" by {}", o.decided_by.join(", "))
    };
    let mut text = format!("{status}{by} at {}", minute(o.decided_at));
    if let Some(r) = &o.reason {
        text.push_str(&format!(" — {}", clip(r, 500)));
    }
    text
}

/// `TimedOut` → `Timed out`.
fn status_word(debug: &str) -> String {
    let mut out = String::new();
    for (i, c) in debug.chars().enumerate() {
        if c.is_uppercase() && i > 0 {
            out.push(' ');
            out.extend(c.to_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// The notification's text (what a phone shows): one line, escaped.
fn fallback(hold: &Hold, world: &str) -> String {
    let first = card_text(hold)
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned();
    escape(&clip(&format!("Holdpoint, world {world}: {first}"), 300))
}

/// The modal asking for the reason of a deny of the hold `value` names.
fn reason_modal(value: &ButtonValue) -> Value {
    // Slack hands it back with the submission, signed like the rest.
    let metadata = json!({"hold": value.hold, "digest": value.digest});
    json!({
        "type": "modal",
        "callback_id": DENY_REASON_VIEW,
        "private_metadata": metadata.to_string(),
        "title": {"type": "plain_text", "text": "Deny"},
        "submit": {"type": "plain_text", "text": "Deny"},
        "close": {"type": "plain_text", "text": "Cancel"},
        "blocks": [{
            "type": "input",
            "block_id": "reason",
            "label": {"type": "plain_text", "text": "Why is it denied? The agent reads this."},
            "element": {"type": "plain_text_input", "action_id": "reason", "multiline": true,
                "max_length": 2000},
        }],
    })
}

/// What an accepted interaction request is answered with: 200, and a JSON body for a modal
/// whose submission is refused (none otherwise).
pub type Answer = Option<Value>;

fn ok() -> Answer {
    None
}

impl Channels {
    /// `POST /slack/interactions`: a button pressed or the reason modal submitted, verified as
    /// Slack's. Decides at once (the engine's decide is quick), so the answer comes well within
    /// Slack's 3 seconds; what the member is told goes to `response_url` after.
    pub async fn slack_interaction(
        &self,
        headers: &HeaderMap,
        body: &[u8],
    ) -> Result<Answer, ApiError> {
        let Some(slack) = self.slack.clone() else {
            return Err(ApiError::new(
                StatusCode::NOT_FOUND,
                "not_configured",
                "Slack is not configured on this server ([channels.slack])",
            ));
        };
        if let Err(why) = slack.verify(headers, body, self.now()) {
            return Err(ApiError::unauthorized(why));
        }
        let payload = form_urlencoded::parse(body)
            .find(|(k, _)| k == "payload")
            .and_then(|(_, v)| serde_json::from_str::<Value>(&v).ok());
        let Some(p) = payload else {
            return Err(ApiError::param(
                "payload",
                "expected a form field payload holding JSON",
            ));
        };
        Ok(match p["type"].as_str() {
            Some("block_actions") => self.pressed(&slack, &p).await,
            Some("view_submission") if p["view"]["callback_id"] == DENY_REASON_VIEW => {
                self.reason_given(&slack, &p).await
            }
            // Nothing of ours (a modal closed, a shortcut): acknowledged, nothing done.
            _ => ok(),
        })
    }

    /// A button of one of our messages.
    async fn pressed(&self, slack: &Slack, p: &Value) -> Answer {
        let user = p["user"]["id"].as_str().unwrap_or_default();
        let respond = p["response_url"].as_str().map(str::to_owned);
        let Some(value) = p["actions"][0]["value"]
            .as_str()
            .and_then(|v| serde_json::from_str::<ButtonValue>(v).ok())
        else {
            return ok();
        };
        let Some(approver) = slack.approver(user).map(str::to_owned) else {
            self.tell(respond, format!(
                "You may not decide holds from Slack: your Slack member ({}) is not mapped to an approver in Holdpoint's [channels.slack.users]. Nothing was decided.",
                escape(user)
            ));
            return ok();
        };
        if value.decision == DENY_WITH_REASON {
            if let Err(why) = self.still_decidable(&value).await {
                self.tell(respond, why);
                return ok();
            }
            let view = reason_modal(&value);
            let trigger = p["trigger_id"].as_str().unwrap_or_default();
            // Slack's trigger lasts 3 seconds, and the press must be answered within them.
            let within = slack.settings.timeout.min(Duration::from_millis(2500));
            if let Err(e) = slack
                .call_within(
                    "views.open",
                    &json!({"trigger_id": trigger, "view": view}),
                    within,
                )
                .await
            {
                tracing::warn!(hold = %value.hold, error = %e, "could not open Slack's reason modal");
                self.tell(
                    respond,
                    format!("Could not open the form for a reason ({e}). Nothing was decided."),
                );
            }
            return ok();
        }
        match self.decide_from_slack(&approver, &value, None).await {
            Ok(DecideOutcome::VoteRecorded) => self.tell(
                respond,
                "Your approval is counted; the hold waits for more approvers.".into(),
            ),
            Ok(_) => {}
            Err(why) => self.tell(respond, why),
        }
        ok()
    }

    /// The reason modal submitted: denies with that reason.
    async fn reason_given(&self, slack: &Slack, p: &Value) -> Answer {
        let errors = |text: String| {
            Some(json!({"response_action": "errors", "errors": {"reason": clip(&text, 150)}}))
        };
        let user = p["user"]["id"].as_str().unwrap_or_default();
        let Some(approver) = slack.approver(user).map(str::to_owned) else {
            return errors(
                "You may not decide holds from Slack: your member is not mapped to an approver."
                    .into(),
            );
        };
        let meta: Value = p["view"]["private_metadata"]
            .as_str()
            .and_then(|m| serde_json::from_str(m).ok())
            .unwrap_or_default();
        let Ok(hold) = serde_json::from_value::<HoldId>(meta["hold"].clone()) else {
            return errors("This form names no hold. Nothing was decided.".into());
        };
        let reason = p["view"]["state"]["values"]["reason"]["reason"]["value"]
            .as_str()
            .map(str::trim)
            .filter(|r| !r.is_empty())
            .map(str::to_owned);
        let value = ButtonValue {
            hold,
            digest: meta["digest"].as_str().map(str::to_owned),
            decision: "deny".into(),
        };
        match self.decide_from_slack(&approver, &value, reason).await {
            // An empty answer closes the modal.
            Ok(_) => ok(),
            Err(why) => errors(why),
        }
    }

    /// Whether the hold `value` names can still be decided as the button says; else what to
    /// tell the member.
    async fn still_decidable(&self, value: &ButtonValue) -> Result<Hold, String> {
        let hold = self
            .runtime
            .engine()
            .hold(value.hold, &holdpoint_core::Scope::default())
            .await
            .map_err(|_| "This hold is no longer known. Nothing was decided.".to_owned())?;
        if let Some(o) = &hold.outcome {
            return Err(format!(
                "This hold was already decided: {}. Nothing more was decided.",
                escape(&outcome_text(o))
            ));
        }
        if hold.digest().map(str::to_owned) != value.digest {
            return Err(
                "The hold's arguments are not the ones this message shows. Nothing was decided."
                    .into(),
            );
        }
        Ok(hold)
    }

    /// Decides as `approver` via Slack what `value` says (denying with `reason`); else what to
    /// tell the member.
    async fn decide_from_slack(
        &self,
        approver: &str,
        value: &ButtonValue,
        reason: Option<String>,
    ) -> Result<DecideOutcome, String> {
        let hold = self.still_decidable(value).await?;
        let Some(mut decision) = decision_of(&value.decision, value.digest.clone()) else {
            return Err("This button names no decision. Nothing was decided.".into());
        };
        if let Decision::Deny { reason: r } = &mut decision {
            *r = reason;
        }
        match self.decide_as(approver, SLACK, hold.id, decision).await {
            Ok(r) => Ok(r.result),
            // Decided meanwhile (a double click's second request): say how.
            Err(e) => Err(match self.still_decidable(value).await {
                Err(why) => why,
                Ok(_) => format!("Not decided: {}", escape(&e.message)),
            }),
        }
    }

    /// Tells the member who pressed a button `text`, only them, after the answer went back.
    fn tell(&self, response_url: Option<String>, text: String) {
        let (Some(url), Some(slack)) = (response_url, self.slack.clone()) else {
            return;
        };
        tokio::spawn(async move {
            let body =
                json!({"response_type": "ephemeral", "replace_original": false, "text": text});
            if let Err(e) = slack.http.post(&url).json(&body).send().await {
                tracing::warn!(error = %e, "could not answer a Slack member");
            }
        });
    }

    /// Posts the notice's message; the message it posted.
    pub(super) async fn post(
        &self,
        slack: &Slack,
        notice: &Notice,
        hold: &Hold,
        world: &str,
    ) -> Result<PostedMessage, String> {
        let (mut text, mut blocks) = message(hold, world);
        // A reminder, an escalation or the last notice says so first.
        if notice.purpose != NoticePurpose::First {
            let (_, intro) = super::schedule::intro(notice, hold, world);
            blocks.insert(0, section(format!("*{}*", escape(&intro))));
            text = format!("{intro} {text}");
        }
        let a = slack
            .call(
                "chat.postMessage",
                &json!({"channel": &notice.recipient, "text": text, "blocks": blocks, "unfurl_links": false}),
            )
            .await
            .map_err(|e| e.to_string())?;
        match (a["channel"].as_str(), a["ts"].as_str()) {
            (Some(channel), Some(ts)) => Ok(PostedMessage {
                channel: channel.to_owned(),
                ts: ts.to_owned(),
            }),
            _ => Err("chat.postMessage answered no channel and ts".into()),
        }
    }

    /// Updates the messages posted for hold `id` to show how it was decided, retrying while
    /// Slack fails.
    pub(super) async fn show_outcome(self, id: HoldId) {
        let Some(slack) = self.slack.clone() else {
            return;
        };
        let Ok(stored) = self.stored(id).await else {
            return;
        };
        let messages: Vec<PostedMessage> = stored
            .into_iter()
            .filter_map(|s| s.notice.message)
            .collect();
        if messages.is_empty() {
            return;
        }
        let Ok(hold) = self
            .runtime
            .engine()
            .hold(id, &holdpoint_core::Scope::default())
            .await
        else {
            return;
        };
        let world = self.world_name(&hold).await;
        let (text, blocks) = decided(&hold, &world);
        for m in messages {
            let mut attempts = 0;
            while attempts < slack.settings.attempts {
                if !crate::delivery::back_off(&self.shutdown, slack.settings.backoff, attempts)
                    .await
                {
                    return;
                }
                attempts += 1;
                let body =
                    json!({"channel": m.channel, "ts": m.ts, "text": text, "blocks": blocks});
                match slack.call("chat.update", &body).await {
                    Ok(_) => break,
                    // A message deleted meanwhile, say: nothing to retry.
                    Err(CallError::Refused(e)) => {
                        tracing::warn!(hold = %id, error = %e, "Slack refused to update a hold's message");
                        break;
                    }
                    Err(e) => {
                        tracing::warn!(hold = %id, error = %e, attempts, "could not update a hold's Slack message");
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> SlackSettings {
        SlackSettings {
            bot_token_env: "PATH".into(),
            signing_secret_env: "PATH".into(),
            api_url: api_url(),
            users: BTreeMap::from([("U024BE7LH".into(), "alice".into())]),
            attempts: 3,
            backoff: backoff(),
            timeout: timeout(),
        }
    }

    #[test]
    fn settings_are_checked_naming_the_key() {
        assert_eq!(settings().check(), Ok(()));
        let unset = SlackSettings {
            signing_secret_env: "HOLDPOINT_TEST_UNSET_SLACK_SECRET".into(),
            ..settings()
        };
        let (key, message) = unset.check().unwrap_err();
        assert_eq!(key, "channels.slack.signing_secret_env");
        assert!(
            message.contains("$HOLDPOINT_TEST_UNSET_SLACK_SECRET"),
            "{message}"
        );
        let url = SlackSettings {
            api_url: "slack.com/api".into(),
            ..settings()
        };
        assert_eq!(url.check().unwrap_err().0, "channels.slack.api_url");
        let mut users = settings();
        users.users.insert("C024BE91L".into(), "ops".into());
        assert_eq!(
            users.check().unwrap_err().0,
            "channels.slack.users.C024BE91L"
        );
    }

    #[test]
    fn signatures_are_checked_with_the_secret_and_the_time() {
        let slack = Slack::new(&settings()).unwrap();
        let secret = std::env::var("PATH").unwrap();
        let body = b"payload=%7B%7D";
        let sign = |ts: i64, body: &[u8]| {
            let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(secret.as_bytes()).unwrap();
            mac.update(format!("v0:{ts}:").as_bytes());
            mac.update(body);
            let tag = mac.finalize().into_bytes();
            let hex: String = tag.iter().map(|b| format!("{b:02x}")).collect();
            let mut h = HeaderMap::new();
            h.insert("x-slack-request-timestamp", ts.to_string().parse().unwrap());
            h.insert("x-slack-signature", format!("v0={hex}").parse().unwrap());
            h
        };
        let now = Timestamp::from_millis(1_800_000_000_000);
        let secs = now.as_millis() / 1000;
        assert_eq!(slack.verify(&sign(secs, body), body, now), Ok(()));
        assert!(
            slack
                .verify(&sign(secs, body), b"payload=%7B%7D ", now)
                .is_err()
        );
        assert!(slack.verify(&sign(secs - 360, body), body, now).is_err());
        assert!(slack.verify(&HeaderMap::new(), body, now).is_err());
    }

    #[test]
    fn agent_text_cannot_mention_link_or_close_the_code_block() {
        assert_eq!(
            escape("<!channel> & <http://x|y> ```"),
            "&lt;!channel&gt; &amp; &lt;http://x|y&gt; `\u{200b}``"
        );
        assert_eq!(status_word("TimedOut"), "Timed out");
        assert_eq!(
            minute(Timestamp::from_millis(1_800_000_000_000)),
            "2027-01-15 08:00 UTC"
        );
    }
}
