//! Reaching people where they are: a hold's notice to the people its routes name, by email
//! with signed one-time decision links, or on Slack with buttons (docs/channels.md).
//!
//! - `email.rs` `[channels.email]`, the SMTP transport and the message;
//! - `slack.rs` `[channels.slack]`, the Web API, the Block Kit card and Slack's interactions;
//! - `route.rs` `[[channels.routes]]`, who a hold is sent to;
//! - `links.rs` the links' signatures and the key they are signed with;
//! - `page.rs` the page a link opens.
//!
//! Email and Slack are two transports of one sender: notices are durable as webhook deliveries
//! are (`crate::delivery`): one node sends, under the `email` lease; each `hold.created` event's notices are recorded (one per hold and
//! recipient, `RecordKind::Notice` under the hold) with the cursor's next position before any
//! is sent, every attempt is recorded, and what was pending is sent again after a restart or
//! a takeover: at least once, never again once one succeeded. The sender also follows the
//! holds' resolutions, and updates the Slack messages of a hold decided anywhere to say so.

pub mod email;
pub mod links;
pub mod page;
pub mod route;
pub mod schedule;
pub mod slack;

use std::path::Path;
use std::sync::Arc;

use axum::http::StatusCode;
use holdpoint_agent::Runtime;
use holdpoint_core::Scope;
use holdpoint_core::record::put;
use holdpoint_core::store::RecordKind;
use holdpoint_protocol::{
    ApproveScope, DecideOutcome, DecideResult, Decision, DecisionKind, DeliveryStatus, Event,
    EventPayload, Hold, HoldId, HoldQuery, HoldSpec, Notice, NoticePurpose, Principal, Role,
    Timestamp,
};
use lettre::{AsyncSmtpTransport, Tokio1Executor};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::delivery::{Cursor, Sender, back_off};
use crate::error::ApiError;
use email::EmailSettings;
use links::{Claims, LinkKey};
use route::{Recipient, Route, Routes};
use slack::{Slack, SlackSettings};

/// `[channels]`: the email and Slack channels and the routes to people.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ChannelSettings {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub email: Option<EmailSettings>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slack: Option<SlackSettings>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub routes: Vec<Route>,
    /// Groups of people routes name and escalate to (`oncall = ["a@x.com", …]`).
    #[serde(skip_serializing_if = "route::Groups::is_empty")]
    pub groups: route::Groups,
}

impl ChannelSettings {
    pub fn is_empty(&self) -> bool {
        self.email.is_none() && self.slack.is_none() && self.routes.is_empty()
    }

    /// What can be checked without connecting: the key at fault and what is wrong.
    pub fn check(&self) -> Result<(), (String, String)> {
        if let Some(email) = &self.email {
            email.check()?;
        }
        if let Some(slack) = &self.slack {
            slack.check()?;
        }
        Routes::with_groups(&self.routes, &self.groups)?;
        if self.email.is_none() && route::names(&self.routes, EMAIL) {
            return Err((
                "channels.routes".into(),
                "routes mail people: they need [channels.email]".into(),
            ));
        }
        if self.slack.is_none() && route::names(&self.routes, SLACK) {
            return Err((
                "channels.routes".into(),
                "routes name Slack members or channels: they need [channels.slack]".into(),
            ));
        }
        Ok(())
    }
}

/// The name of the channel, as notices and decisions (`via`) record it.
const EMAIL: &str = "email";
const SLACK: &str = "slack";

#[derive(Serialize, Deserialize, Clone)]
struct Stored {
    notice: Notice,
    version: u64,
}

struct Email {
    settings: EmailSettings,
    transport: AsyncSmtpTransport<Tokio1Executor>,
    key: LinkKey,
}

/// Notices and decision links. Cheap to clone.
#[derive(Clone)]
pub struct Channels {
    runtime: Runtime,
    /// The configuration file's routes; each world's own are added for its holds.
    routes: Arc<Routes>,
    /// `[channels.groups]`, which worlds' routes name too.
    groups: Arc<route::Groups>,
    email: Option<Arc<Email>>,
    slack: Option<Arc<Slack>>,
    shutdown: CancellationToken,
}

impl Channels {
    /// The channels `settings` configure; the link key is read from `data_dir` (made there at
    /// first start).
    pub fn new(
        runtime: Runtime,
        settings: &ChannelSettings,
        data_dir: &Path,
        shutdown: CancellationToken,
    ) -> Result<Channels, String> {
        let routes = Routes::with_groups(&settings.routes, &settings.groups)
            .map_err(|(k, m)| format!("{k}: {m}"))?;
        if routes.is_empty() && (settings.email.is_some() || settings.slack.is_some()) {
            tracing::info!(
                "[channels] are set but no [[channels.routes]]: only holds of worlds with notice_routes of their own are sent"
            );
        }
        let slack = match &settings.slack {
            None => None,
            Some(s) => Some(Arc::new(
                // Its errors name their key.
                Slack::new(s)?,
            )),
        };
        let email = match &settings.email {
            None => None,
            Some(s) => {
                let key = LinkKey::open(data_dir).map_err(|e| {
                    format!(
                        "cannot read or make the link key in {}: {e}",
                        data_dir.display()
                    )
                })?;
                Some(Arc::new(Email {
                    settings: s.clone(),
                    transport: s.transport().map_err(|e| format!("channels.email: {e}"))?,
                    key,
                }))
            }
        };
        Ok(Channels {
            runtime,
            routes: Arc::new(routes),
            groups: Arc::new(settings.groups.clone()),
            email,
            slack,
            shutdown,
        })
    }

    fn now(&self) -> Timestamp {
        self.runtime.engine().clock().now()
    }

    /// Starts sending notices (when a channel is configured). Slack's token is tried first
    /// (`auth.test`): a token Slack refuses can never work, so that stops the start with the
    /// reason; Slack out of reach is only a loud warning, since notices wait and are retried,
    /// and an approval server must not stay down because a chat service is.
    pub async fn start(&self) -> Result<(), ApiError> {
        if let Some(slack) = &self.slack {
            match slack.auth_test().await {
                Ok(bot) => tracing::info!(bot = %bot, "Slack accepted the bot token"),
                Err(slack::CallError::Refused(e)) => {
                    return Err(ApiError::new(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        "slack_token_refused",
                        format!(
                            "channels.slack.bot_token_env: Slack refused the bot token (auth.test: {e})"
                        ),
                    ));
                }
                Err(e) => tracing::warn!(
                    error = %e,
                    "could not check the Slack bot token (auth.test): Slack notices wait until Slack answers"
                ),
            }
        }
        if self.email.is_some() || self.slack.is_some() {
            schedule::warn_unreached(self).await;
            crate::delivery::start(self).await?;
        }
        Ok(())
    }

    /// How often and how patiently a notice over `channel` is tried.
    /// The name a notice to `r` is recorded as deciding as. From Slack, whoever presses
    /// decides, as their own mapped name (a route's `as` is email's): a member's notice
    /// names theirs.
    fn decides_as(&self, r: &Recipient) -> String {
        match (r.channel, &self.slack) {
            (SLACK, Some(slack)) => slack
                .approver(&r.address)
                .map_or_else(|| r.address.clone(), str::to_owned),
            _ => r.decides_as.clone(),
        }
    }

    fn retries(&self, channel: &str) -> Option<(u32, std::time::Duration)> {
        match channel {
            EMAIL => self
                .email
                .as_ref()
                .map(|e| (e.settings.attempts, e.settings.backoff)),
            SLACK => self
                .slack
                .as_ref()
                .map(|s| (s.settings.attempts, s.settings.backoff)),
            _ => None,
        }
    }

    /// One attempt at sending notice `notice` of the open hold `hold`, over its channel.
    async fn attempt(&self, notice: &mut Notice, hold: &Hold) -> Result<(), String> {
        let world = self.world_name(hold).await;
        match (notice.channel.as_str(), &self.email, &self.slack) {
            (EMAIL, Some(email), _) => {
                let links = self.links(email, notice, hold);
                let m = email::message(&email.settings, notice, hold, &world, &links)?;
                email::send(&email.transport, m).await
            }
            (SLACK, _, Some(slack)) => {
                notice.message = Some(self.post(slack, notice, hold, &world).await?);
                Ok(())
            }
            (channel, _, _) => Err(format!("[channels.{channel}] is not configured")),
        }
    }

    /// Every notice of hold `id`, oldest first.
    pub async fn notices(&self, id: HoldId) -> Result<Vec<Notice>, ApiError> {
        Ok(self
            .stored(id)
            .await?
            .into_iter()
            .map(|s| s.notice)
            .collect())
    }

    async fn stored(&self, id: HoldId) -> Result<Vec<Stored>, ApiError> {
        Ok(self
            .runtime
            .records()
            .all(RecordKind::Notice, Some(*id.as_uuid()))
            .await?)
    }

    async fn save(&self, s: &Stored) -> Result<(), ApiError> {
        let w = put(
            RecordKind::Notice,
            s.notice.id,
            Some(*s.notice.hold.as_uuid()),
            None,
            s.version,
            s,
        )?;
        self.runtime.records().commit(vec![w], vec![]).await?;
        Ok(())
    }

    async fn world_name(&self, hold: &Hold) -> String {
        self.runtime
            .find_world(&hold.world)
            .await
            .map_or_else(|_| hold.world.clone(), |w| w.name)
    }

    /// The name of `hold`'s world and the routes for its holds: the configuration's, then the
    /// world's own (read with the world, once per hold).
    async fn routes_of(&self, hold: &Hold) -> (String, Arc<Routes>) {
        match self.runtime.find_world(&hold.world).await {
            Ok(w) => {
                let routes = self.world_routes(&w);
                (w.name, routes)
            }
            Err(_) => (hold.world.clone(), self.routes.clone()),
        }
    }

    /// The routes for world `w`'s holds. A world's routes were checked when saved; one that no
    /// longer compiles (a group since removed from the file) is left out, loudly, and the
    /// file's still apply.
    fn world_routes(&self, w: &holdpoint_protocol::World) -> Arc<Routes> {
        if w.notice_routes.is_empty() {
            return self.routes.clone();
        }
        match Routes::of_world(&w.notice_routes, &self.groups) {
            Ok(own) => Arc::new(self.routes.and(&own)),
            Err((field, message)) => {
                tracing::warn!(world = %w.name, field = %field, error = %message,
                    "a world's notice_routes no longer fit [channels]: they are left out");
                self.routes.clone()
            }
        }
    }

    /// A world's own routes (`notice_routes`, as the API sets them), checked against
    /// `[channels]`: each a route that compiles, naming only groups of `[channels.groups]`, and
    /// only channels that are configured. A 422 names the field at fault.
    pub fn check_world_routes(&self, routes: &[Route]) -> Result<(), ApiError> {
        Routes::of_world(routes, &self.groups).map_err(|(field, m)| ApiError::field(&field, m))?;
        for (i, r) in routes.iter().enumerate() {
            if self.email.is_none() && (!r.to.is_empty() || !r.groups.is_empty()) {
                let field = if r.to.is_empty() { "groups" } else { "to" };
                return Err(ApiError::field(
                    &format!("notice_routes[{i}].{field}"),
                    "mails people, but this server has no [channels.email]",
                ));
            }
            if self.slack.is_none() && !r.slack.is_empty() {
                return Err(ApiError::field(
                    &format!("notice_routes[{i}].slack"),
                    "names Slack members or channels, but this server has no [channels.slack]",
                ));
            }
        }
        Ok(())
    }

    /// Sends notice `s` until it is delivered, its attempts run out, or its hold is decided.
    async fn send(self, mut s: Stored) {
        let Some((attempts, backoff)) = self.retries(&s.notice.channel) else {
            return;
        };
        while s.notice.attempts < attempts {
            if !back_off(&self.shutdown, backoff, s.notice.attempts).await {
                return;
            }
            let hold = match self
                .runtime
                .engine()
                .hold(s.notice.hold, &Scope::default())
                .await
            {
                Ok(h) => h,
                Err(e) => {
                    tracing::warn!(notice = %s.notice.id, error = %e, "could not read a hold to notify of");
                    return;
                }
            };
            let result = if hold.is_open() {
                self.attempt(&mut s.notice, &hold).await
            } else {
                Err("not sent: the hold was decided first".into())
            };
            s.notice.attempts += 1;
            let decided = !hold.is_open();
            match result {
                Ok(()) => {
                    s.notice.status = DeliveryStatus::Delivered;
                    s.notice.last_error = None;
                    s.notice.sent_at = Some(self.now());
                }
                Err(e) => s.notice.last_error = Some(e),
            }
            if s.notice.status == DeliveryStatus::Pending
                && (decided || s.notice.attempts >= attempts)
            {
                s.notice.status = DeliveryStatus::Failed;
            }
            s.notice.updated_at = self.now();
            s.version += 1;
            if let Err(e) = self.save(&s).await {
                tracing::warn!(notice = %s.notice.id, error = %e.message, "could not record a notice's attempt");
                return;
            }
            if s.notice.status != DeliveryStatus::Pending {
                // Decided while the message was being posted: its resolution found no message
                // to update, so it is updated now.
                if s.notice.message.is_some()
                    && let Ok(now) = self.runtime.engine().hold(hold.id, &Scope::default()).await
                    && !now.is_open()
                {
                    self.clone().show_outcome(hold.id).await;
                }
                return;
            }
        }
    }

    /// Decides hold `id` as the approver `name` through channel `via`: the engine's one decide,
    /// which checks that `name` may decide it.
    async fn decide_as(
        &self,
        name: &str,
        via: &str,
        id: HoldId,
        decision: Decision,
    ) -> Result<DecideResult, ApiError> {
        let who = Principal::new(name.to_owned(), Role::Approver).via(Some(via.to_owned()));
        Ok(self
            .runtime
            .engine()
            .decide(&who, id, decision, &Scope::default(), None)
            .await?)
    }

    /// A link per decision the hold offers that a link can make.
    fn links(&self, email: &Email, notice: &Notice, hold: &Hold) -> Vec<email::Link> {
        let lifetime = i64::try_from(email.settings.link_lifetime.as_millis()).unwrap_or(i64::MAX);
        let latest = notice.created_at.as_millis().saturating_add(lifetime);
        let expires = hold.deadline.map_or(latest, |d| d.as_millis().min(latest));
        let base = email.settings.public_url.trim_end_matches('/');
        decisions(hold)
            .into_iter()
            .map(|decision| {
                let label = page::label(hold, &decision);
                let token = email.key.sign(&Claims {
                    notice: notice.id,
                    hold: hold.id,
                    digest: hold.digest().map(str::to_owned),
                    decision,
                    to: notice.recipient.clone(),
                    decides_as: notice.decides_as.clone(),
                    expires,
                });
                email::Link {
                    label,
                    url: format!("{base}/d/{token}"),
                }
            })
            .collect()
    }

    /// The link `token`, checked: its claims, its hold and its notice; else the page refusing it.
    async fn checked(&self, token: &str) -> Result<Checked, (StatusCode, String)> {
        let refused = |status, title: &str, text: &str| (status, page::notice(title, text));
        let not_found = || {
            refused(
                StatusCode::NOT_FOUND,
                "No such link",
                "This link names nothing this server knows. Nothing was decided.",
            )
        };
        let Some(email) = self.email.clone() else {
            return Err(not_found());
        };
        let claims = email.key.verify(token).map_err(|_| {
            refused(
                StatusCode::FORBIDDEN,
                "This link is not valid",
                "It was changed, or it is not one of this server's links. Nothing was decided.",
            )
        })?;
        let hold = self
            .runtime
            .engine()
            .hold(claims.hold, &Scope::default())
            .await
            .map_err(|_| not_found())?;
        let stored = self
            .runtime
            .records()
            .get::<Stored>(RecordKind::Notice, claims.notice)
            .await
            .ok()
            .flatten()
            .ok_or_else(not_found)?;
        let n = &stored.notice;
        if n.hold != claims.hold
            || n.recipient != claims.to
            || n.decides_as != claims.decides_as
            || hold.digest().map(str::to_owned) != claims.digest
        {
            return Err(refused(
                StatusCode::FORBIDDEN,
                "This link is not valid",
                "It does not match the hold it names. Nothing was decided.",
            ));
        }
        let world = self.world_name(&hold).await;
        Ok(Checked {
            email,
            claims,
            hold,
            stored,
            world,
        })
    }

    /// What the link's page says when the link can no longer decide; `None` while it can.
    fn spent(&self, c: &Checked) -> Option<(StatusCode, String)> {
        // Another link of the same mail, once its hold is decided: how, and by whom.
        let other_link = c
            .stored
            .notice
            .used
            .as_ref()
            .is_some_and(|u| *u != c.claims.decision);
        if other_link && !c.hold.is_open() {
            return Some((StatusCode::CONFLICT, decided_page(&c.hold)));
        }
        if let Some(used) = &c.stored.notice.used {
            return Some((
                StatusCode::CONFLICT,
                page::notice(
                    "Already used",
                    &format!(
                        "This link was already used: {} (recorded as {} via email). It works once.",
                        page::label(&c.hold, used),
                        c.stored.notice.decides_as
                    ),
                ),
            ));
        }
        if !c.hold.is_open() {
            return Some((StatusCode::CONFLICT, decided_page(&c.hold)));
        }
        if self.now().as_millis() > c.claims.expires {
            return Some((
                StatusCode::GONE,
                page::notice("This link has expired", "Nothing was decided."),
            ));
        }
        None
    }

    /// `GET /d/{token}`: the hold's card and a button to confirm; decides nothing.
    pub async fn open(&self, token: &str) -> (StatusCode, String) {
        let c = match self.checked(token).await {
            Ok(c) => c,
            Err(page) => return page,
        };
        if let Some(page) = self.spent(&c) {
            return page;
        }
        let csrf = c.email.key.csrf(token);
        (
            StatusCode::OK,
            page::confirm(
                &c.hold,
                &c.world,
                &c.claims.decision,
                &c.claims.decides_as,
                &csrf,
            ),
        )
    }

    /// `POST /d/{token}`: decides the link's hold the link's way, as its recipient via email.
    pub async fn confirm(&self, token: &str, csrf: &str) -> (StatusCode, String) {
        let mut c = match self.checked(token).await {
            Ok(c) => c,
            Err(page) => return page,
        };
        if !c.email.key.csrf_ok(token, csrf) {
            return (
                StatusCode::FORBIDDEN,
                page::notice(
                    "Not confirmed",
                    "The form did not come from this link's page. Open the link again. Nothing was decided.",
                ),
            );
        }
        if let Some(page) = self.spent(&c) {
            return page;
        }
        let Some(decision) = decision_of(&c.claims.decision, c.claims.digest.clone()) else {
            return (
                StatusCode::FORBIDDEN,
                page::notice("This link is not valid", "Nothing was decided."),
            );
        };
        let decided = self
            .decide_as(&c.claims.decides_as, EMAIL, c.hold.id, decision)
            .await;
        match decided {
            Ok(result) => {
                c.stored.notice.used = Some(c.claims.decision.clone());
                c.stored.notice.updated_at = self.now();
                c.stored.version += 1;
                if let Err(e) = self.save(&c.stored).await {
                    tracing::warn!(notice = %c.stored.notice.id, error = %e.message, "could not mark a link used");
                }
                let what = page::label(&c.hold, &c.claims.decision);
                let text = match result.result {
                    DecideOutcome::VoteRecorded => format!(
                        "{what}: your approval is counted; the hold waits for more approvers."
                    ),
                    _ => format!("{what}: recorded as {} via email.", c.claims.decides_as),
                };
                (StatusCode::OK, page::notice("Decided", &text))
            }
            Err(e) => {
                // Decided meanwhile by someone else: say by whom.
                if let Ok(hold) = self
                    .runtime
                    .engine()
                    .hold(c.hold.id, &Scope::default())
                    .await
                    && !hold.is_open()
                {
                    return (StatusCode::CONFLICT, decided_page(&hold));
                }
                (e.status, page::notice("Not decided", &e.message))
            }
        }
    }

    /// Every open hold's pending notices, sent again.
    async fn resend_pending(&self) -> Result<(), ApiError> {
        let mut query = HoldQuery::default();
        loop {
            let page = self.runtime.engine().holds(&query).await?;
            for hold in &page.items {
                for s in self.stored(hold.id).await? {
                    if s.notice.status == DeliveryStatus::Pending {
                        tokio::spawn(self.clone().send(s));
                    }
                }
            }
            match page.next {
                Some(next) => query.cursor = Some(next),
                None => return Ok(()),
            }
        }
    }
}

/// The decisions a notice offers for `hold` (a link or a button each), by name:
/// `approve_once` and `deny` for approvals, `answer:OPTION` for a question without a confirm
/// step.
fn decisions(hold: &Hold) -> Vec<String> {
    let mut decisions = Vec::new();
    match &hold.spec {
        HoldSpec::Approval(_) => {
            for (kind, name) in [
                (DecisionKind::ApproveOnce, "approve_once"),
                (DecisionKind::Deny, "deny"),
            ] {
                if hold.offers.contains(&kind) {
                    decisions.push(name.to_owned());
                }
            }
        }
        HoldSpec::Question(q) => {
            if hold.offers.contains(&DecisionKind::Answer) && !q.confirm {
                decisions.extend(q.options.iter().map(|o| format!("answer:{}", o.id)));
            }
        }
    }
    decisions
}

/// The decision named `name` (as `decisions` names them), an approval bound to `digest`.
fn decision_of(name: &str, digest: Option<String>) -> Option<Decision> {
    Some(match name {
        "approve_once" => Decision::Approve {
            scope: ApproveScope::Once,
            expires_in: None,
            digest,
            reason: None,
        },
        "deny" => Decision::Deny { reason: None },
        d => Decision::Answer {
            options: vec![d.strip_prefix("answer:")?.to_owned()],
        },
    })
}

struct Checked {
    email: Arc<Email>,
    claims: Claims,
    hold: Hold,
    stored: Stored,
    world: String,
}

/// The page for a link whose hold was decided: how, and by whom.
fn decided_page(hold: &Hold) -> String {
    let (status, by) = match &hold.outcome {
        Some(o) => (
            format!("{:?}", o.status).to_lowercase(),
            if o.decided_by.is_empty() {
                format!("{:?}", o.source).to_lowercase()
            } else {
                o.decided_by.join(", ")
            },
        ),
        None => (format!("{:?}", hold.status).to_lowercase(), String::new()),
    };
    let text = if by.is_empty() {
        format!("This hold was already decided: {status}. Nothing more was decided.")
    } else {
        format!("This hold was already decided: {status}, by {by}. Nothing more was decided.")
    };
    page::notice("Already decided", &text)
}

#[async_trait::async_trait]
impl Sender for Channels {
    // The name its lease and cursor were first stored under, when email was the only channel:
    // kept, so that an upgraded server goes on from where it stopped.
    const NAME: &'static str = EMAIL;
    type State = ();

    fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    fn shutdown(&self) -> &CancellationToken {
        &self.shutdown
    }

    fn stopping_with(&self, stop: CancellationToken) -> Self {
        Channels {
            shutdown: stop,
            ..self.clone()
        }
    }

    async fn resume(&self) -> Result<(), ApiError> {
        self.resend_pending().await?;
        // Reminders, escalations and last notices, timed from here while this node sends.
        tokio::spawn(schedule::run(self.clone()));
        Ok(())
    }

    async fn schedule(
        &self,
        event: &Event,
        _: &mut (),
        cursor: &mut Cursor,
    ) -> Result<(), ApiError> {
        // A hold decided anywhere (on another node, before a restart: the log has it): its Slack
        // messages are updated. Nothing is recorded, so the cursor stays where it was and the
        // update is made again should the process stop before it is; updating twice is harmless.
        if let (Some(_), Some(id), Some(_)) = (event.payload.resolution(), event.hold, &self.slack)
        {
            tokio::spawn(self.clone().show_outcome(id));
            return Ok(());
        }
        let EventPayload::HoldCreated { hold } = &event.payload else {
            return Ok(());
        };
        let (world, routes) = self.routes_of(hold).await;
        let recipients: Vec<_> = routes
            .recipients(hold, &world)
            .into_iter()
            .filter(|r| self.retries(r.channel).is_some())
            .collect();
        if recipients.is_empty() {
            return Ok(());
        }
        let now = self.now();
        let mut writes = Vec::new();
        let mut scheduled = Vec::new();
        for r in recipients {
            let s = Stored {
                notice: Notice {
                    id: uuid::Uuid::now_v7(),
                    hold: hold.id,
                    channel: r.channel.into(),
                    decides_as: self.decides_as(&r),
                    recipient: r.address,
                    status: DeliveryStatus::Pending,
                    attempts: 0,
                    last_error: None,
                    created_at: now,
                    updated_at: now,
                    sent_at: None,
                    used: None,
                    purpose: NoticePurpose::First,
                    round: 0,
                    message: None,
                },
                version: 1,
            };
            writes.push(put(
                RecordKind::Notice,
                s.notice.id,
                Some(*hold.id.as_uuid()),
                None,
                1,
                &s,
            )?);
            scheduled.push(s);
        }
        writes.push(cursor.to(event.seq)?);
        self.runtime.records().commit(writes, vec![]).await?;
        cursor.moved();
        for s in scheduled {
            tokio::spawn(self.clone().send(s));
        }
        Ok(())
    }
}
