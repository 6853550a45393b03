//! Webhooks: each subscribed hold event of a world is POSTed to the subscriber's URL, signed.
//!
//! Headers of a delivery:
//! - `X-Holdpoint-Event`: the event type (`hold.created`, …)
//! - `X-Holdpoint-Delivery`: the delivery's id (the same on every retry)
//! - `X-Holdpoint-Timestamp`: Unix seconds when this attempt was signed
//! - `X-Holdpoint-Signature`: `sha256=` and the hex HMAC-SHA256, keyed with the webhook's
//!   secret, of `<timestamp>.<body>`
//!
//! The body is the event as the log holds it. A delivery is recorded (pending) together with
//! the follower's position before it is sent, so after a restart pending deliveries are sent
//! again and no event is skipped; receivers may see an event twice and should use the
//! delivery id to drop repeats. Failed attempts are retried with exponential backoff; every
//! attempt is recorded.
//!
//! Where several nodes share a database, one of them sends: the node holding the `webhooks`
//! lease, renewed as often as turn leases. Another takes over once it ends, from the stored
//! cursor, resending what was pending (`crate::delivery`, shared with email notices).

use hmac::{Hmac, KeyInit, Mac};
use holdpoint_core::record::put;
use holdpoint_core::store::{EventFilter, RecordKind, Write};
use holdpoint_protocol::{
    Actor, DeliveriesPage, DeliveryStatus, Event, EventPayload, Timestamp, Webhook,
    WebhookDelivery, WebhookId, WorldId,
};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use holdpoint_agent::Runtime;
use holdpoint_core::record::Records;
use tokio_util::sync::CancellationToken;

use crate::delivery::{Cursor, Sender, back_off};

use crate::config::WebhookSettings;
use crate::error::ApiError;

/// What a subscription may receive; and what it receives by default.
pub const EVENT_TYPES: &[&str] = &[
    "hold.created",
    "hold.reminded",
    "hold.decided",
    "hold.expired",
    "hold.withdrawn",
];
pub const DEFAULT_EVENTS: &[&str] = &[
    "hold.created",
    "hold.reminded",
    "hold.decided",
    "hold.expired",
];
const CURSOR: &str = "webhooks";

#[derive(Serialize, Deserialize, Clone)]
pub(crate) struct Subscription {
    pub(crate) webhook: Webhook,
    pub(crate) secret: String,
}

/// The subscriptions the sender delivers to, by world: read once when it starts, then kept
/// up to date from the log it follows (`webhook.created`, `webhook.deleted`,
/// `world.deleted`), so each event is matched against the subscriptions made before it
/// without a read of its own.
#[derive(Default)]
pub(crate) struct Subscribed(std::collections::HashMap<WorldId, Vec<Subscription>>);

impl Subscribed {
    fn add(&mut self, world: WorldId, sub: Subscription) {
        let subs = self.0.entry(world).or_default();
        subs.retain(|s| s.webhook.id != sub.webhook.id);
        subs.push(sub);
    }

    fn remove(&mut self, id: WebhookId) {
        for subs in self.0.values_mut() {
            subs.retain(|s| s.webhook.id != id);
        }
    }

    fn forget(&mut self, world: WorldId) {
        self.0.remove(&world);
    }

    fn of(&self, world: WorldId) -> impl Iterator<Item = &Subscription> {
        self.0.get(&world).into_iter().flatten()
    }
}

#[derive(Serialize, Deserialize, Clone)]
struct Delivery {
    delivery: WebhookDelivery,
    version: u64,
}

/// Subscriptions and their deliveries. Cheap to clone.
#[derive(Clone)]
pub struct Webhooks {
    runtime: Runtime,
    settings: WebhookSettings,
    http: reqwest::Client,
    /// Cancelled when the server stops: the follower and retries end.
    shutdown: CancellationToken,
}

impl Webhooks {
    pub fn new(runtime: Runtime, settings: WebhookSettings, shutdown: CancellationToken) -> Self {
        let http = reqwest::Client::builder()
            .timeout(settings.timeout)
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("holdpoint-webhooks/", env!("CARGO_PKG_VERSION")))
            .build()
            .unwrap_or_default();
        Webhooks {
            runtime,
            settings,
            http,
            shutdown,
        }
    }

    fn records(&self) -> &Records {
        self.runtime.records()
    }

    fn now(&self) -> Timestamp {
        self.runtime.engine().clock().now()
    }

    /// A world's subscriptions, every one of them.
    pub(crate) async fn subscriptions(
        &self,
        world: WorldId,
    ) -> Result<Vec<Subscription>, ApiError> {
        Ok(self
            .records()
            .all(RecordKind::Webhook, Some(*world.as_uuid()))
            .await?)
    }

    pub(crate) async fn subscription(
        &self,
        id: WebhookId,
    ) -> Result<Option<Subscription>, ApiError> {
        Ok(self
            .records()
            .get(RecordKind::Webhook, *id.as_uuid())
            .await?)
    }

    /// Stores a new subscription, logged as `by`'s (`webhook.created`, without the secret).
    pub(crate) async fn save_subscription(
        &self,
        by: &Actor,
        s: &Subscription,
        world: WorldId,
    ) -> Result<(), ApiError> {
        let write = put(
            RecordKind::Webhook,
            *s.webhook.id.as_uuid(),
            Some(*world.as_uuid()),
            None,
            1,
            s,
        )?;
        let event = self.runtime.event_by(
            by,
            world,
            None,
            EventPayload::WebhookCreated {
                webhook: s.webhook.clone(),
            },
        );
        self.records().commit(vec![write], vec![event]).await?;
        Ok(())
    }

    /// Removes a subscription with its deliveries, logged as `by`'s (`webhook.deleted`).
    pub(crate) async fn delete_subscription(
        &self,
        by: &Actor,
        webhook: &Webhook,
    ) -> Result<(), ApiError> {
        let id = *webhook.id.as_uuid();
        let writes = vec![
            Write::DeleteRecords {
                kind: RecordKind::WebhookDelivery,
                parent: id,
            },
            Write::DeleteRecord {
                kind: RecordKind::Webhook,
                id,
            },
        ];
        let event = self.runtime.event_by(
            by,
            &webhook.world,
            None,
            EventPayload::WebhookDeleted {
                webhook: webhook.clone(),
            },
        );
        self.records().commit(writes, vec![event]).await?;
        Ok(())
    }

    /// A page of webhook `id`'s deliveries, oldest first, after position `after`.
    pub(crate) async fn deliveries(
        &self,
        id: WebhookId,
        after: Option<u64>,
        limit: usize,
    ) -> Result<DeliveriesPage, ApiError> {
        let page = self
            .records()
            .page::<Delivery>(
                RecordKind::WebhookDelivery,
                Some(*id.as_uuid()),
                after,
                limit,
            )
            .await?;
        let next = (page.len() == limit)
            .then(|| page.last().map(|p| p.position))
            .flatten();
        let items = page.into_iter().map(|p| p.item.delivery).collect();
        Ok(DeliveriesPage { items, next })
    }

    /// Every delivery to webhook `id`, oldest first.
    async fn stored(&self, id: WebhookId) -> Result<Vec<Delivery>, ApiError> {
        Ok(self
            .records()
            .all(RecordKind::WebhookDelivery, Some(*id.as_uuid()))
            .await?)
    }

    /// Deletes the finished deliveries (delivered or failed) last changed before `before`;
    /// returns how many. Pending ones stay, whatever their age: they are still to be sent.
    pub(crate) async fn forget_deliveries(&self, before: Timestamp) -> Result<usize, ApiError> {
        const PER_TRANSACTION: usize = 500;
        let mut forgotten = 0;
        for world in self.runtime.worlds().await.map_err(ApiError::from)? {
            for sub in self.subscriptions(world.id).await? {
                let old: Vec<Write> = self
                    .stored(sub.webhook.id)
                    .await?
                    .into_iter()
                    .filter(|d| {
                        d.delivery.status != DeliveryStatus::Pending
                            && d.delivery.updated_at < before
                    })
                    .map(|d| Write::DeleteRecord {
                        kind: RecordKind::WebhookDelivery,
                        id: d.delivery.id,
                    })
                    .collect();
                forgotten += old.len();
                for chunk in old.chunks(PER_TRANSACTION) {
                    self.records().commit(chunk.to_vec(), vec![]).await?;
                }
            }
        }
        Ok(forgotten)
    }

    /// Starts delivering on whichever node holds the `webhooks` lease (`delivery::start`).
    pub async fn start(&self) -> Result<(), ApiError> {
        crate::delivery::start(self).await
    }

    /// Records the deliveries an event calls for (with the new cursor), then sends them.
    /// `known` is the subscriptions as of the event, kept up to date from the log itself.
    async fn schedule_event(
        &self,
        event: &Event,
        known: &mut Subscribed,
        cursor: &mut Cursor,
    ) -> Result<(), ApiError> {
        let world = event
            .world
            .as_deref()
            .and_then(|w| w.parse::<WorldId>().ok());
        match (&event.payload, world) {
            (EventPayload::WebhookCreated { webhook }, Some(world)) => {
                // The event leaves the secret out: the subscription is read once, here.
                if let Some(sub) = self.subscription(webhook.id).await? {
                    known.add(world, sub);
                }
            }
            (EventPayload::WebhookDeleted { webhook }, _) => known.remove(webhook.id),
            (EventPayload::WorldDeleted { world }, _) => known.forget(*world),
            _ => {}
        }
        let kind = event.payload.type_name();
        if !EVENT_TYPES.contains(&kind) {
            return Ok(());
        }
        let Some(world) = world else {
            return Ok(());
        };
        let subs: Vec<Subscription> = known
            .of(world)
            .filter(|s| s.webhook.events.iter().any(|e| e == kind))
            .cloned()
            .collect();
        if subs.is_empty() {
            return Ok(());
        }
        let mut writes = Vec::new();
        let mut scheduled = Vec::new();
        for sub in subs {
            let d = Delivery {
                delivery: WebhookDelivery {
                    id: uuid::Uuid::now_v7(),
                    webhook: sub.webhook.id,
                    event: event.seq,
                    event_type: kind.to_owned(),
                    status: DeliveryStatus::Pending,
                    attempts: 0,
                    last_status: None,
                    last_error: None,
                    updated_at: self.now(),
                },
                version: 1,
            };
            writes.push(put(
                RecordKind::WebhookDelivery,
                d.delivery.id,
                Some(*sub.webhook.id.as_uuid()),
                None,
                1,
                &d,
            )?);
            scheduled.push((sub, d));
        }
        writes.push(cursor.to(event.seq)?);
        self.records().commit(writes, vec![]).await?;
        cursor.moved();
        for (sub, d) in scheduled {
            tokio::spawn(self.clone().send(sub, d));
        }
        Ok(())
    }

    async fn send(self, sub: Subscription, mut d: Delivery) {
        let settings = &self.settings;
        let event = match self
            .records()
            .store()
            .events(
                d.delivery.event.saturating_sub(1),
                &EventFilter::default(),
                1,
            )
            .await
        {
            Ok(page) => page.events.into_iter().next(),
            Err(e) => {
                tracing::warn!(error = %e, "could not read an event to deliver");
                return;
            }
        };
        let Some(event) = event.filter(|e| e.seq == d.delivery.event) else {
            return;
        };
        let Ok(body) = serde_json::to_vec(&*event) else {
            return;
        };
        while d.delivery.attempts < settings.attempts {
            if !back_off(&self.shutdown, settings.backoff, d.delivery.attempts).await {
                return;
            }
            let timestamp = self.now().as_millis().max(0) as u64 / 1000;
            let response = self
                .http
                .post(&sub.webhook.url)
                .header("content-type", "application/json")
                .header("x-holdpoint-event", &d.delivery.event_type)
                .header("x-holdpoint-delivery", d.delivery.id.to_string())
                .header("x-holdpoint-timestamp", timestamp.to_string())
                .header(
                    "x-holdpoint-signature",
                    signature(&sub.secret, timestamp, &body),
                )
                .body(body.clone())
                .send()
                .await;
            d.delivery.attempts += 1;
            match response {
                Ok(r) if r.status().is_success() => {
                    d.delivery.status = DeliveryStatus::Delivered;
                    d.delivery.last_status = Some(r.status().as_u16());
                    d.delivery.last_error = None;
                }
                Ok(r) => {
                    d.delivery.last_status = Some(r.status().as_u16());
                    d.delivery.last_error = Some(format!("the receiver answered {}", r.status()));
                }
                Err(e) => {
                    d.delivery.last_status = None;
                    d.delivery.last_error = Some(holdpoint_protocol::error_chain(&e));
                }
            }
            if d.delivery.status == DeliveryStatus::Pending
                && d.delivery.attempts >= settings.attempts
            {
                d.delivery.status = DeliveryStatus::Failed;
            }
            d.delivery.updated_at = self.now();
            d.version += 1;
            let saved = match put(
                RecordKind::WebhookDelivery,
                d.delivery.id,
                Some(*sub.webhook.id.as_uuid()),
                None,
                d.version,
                &d,
            ) {
                Ok(w) => self
                    .records()
                    .commit(vec![w], vec![])
                    .await
                    .map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            if let Err(e) = saved {
                tracing::warn!(delivery = %d.delivery.id, error = %e, "could not record a webhook attempt");
                return;
            }
            if d.delivery.status != DeliveryStatus::Pending {
                return;
            }
        }
    }
}

#[async_trait::async_trait]
impl Sender for Webhooks {
    const NAME: &'static str = CURSOR;
    type State = Subscribed;

    fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    fn shutdown(&self) -> &CancellationToken {
        &self.shutdown
    }

    fn stopping_with(&self, stop: CancellationToken) -> Self {
        Webhooks {
            shutdown: stop,
            ..self.clone()
        }
    }

    /// Resends what was pending; the subscriptions as they are now.
    async fn resume(&self) -> Result<Subscribed, ApiError> {
        let mut known = Subscribed::default();
        for world in self.runtime.worlds().await.map_err(ApiError::from)? {
            for sub in self.subscriptions(world.id).await? {
                for d in self.stored(sub.webhook.id).await? {
                    if d.delivery.status == DeliveryStatus::Pending {
                        tokio::spawn(self.clone().send(sub.clone(), d));
                    }
                }
                known.add(world.id, sub);
            }
        }
        Ok(known)
    }

    async fn schedule(
        &self,
        event: &Event,
        known: &mut Subscribed,
        cursor: &mut Cursor,
    ) -> Result<(), ApiError> {
        self.schedule_event(event, known, cursor).await
    }
}

/// The signature header's value for `body` signed at `timestamp`.
pub fn signature(secret: &str, timestamp: u64, body: &[u8]) -> String {
    // HMAC takes keys of any length: this never fails.
    let Ok(mut mac) = <Hmac<Sha256> as KeyInit>::new_from_slice(secret.as_bytes()) else {
        return String::new();
    };
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    let tag = mac.finalize().into_bytes();
    format!(
        "sha256={}",
        tag.iter().map(|b| format!("{b:02x}")).collect::<String>()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_are_hmac_sha256_of_timestamp_and_body() {
        // python3 -c "import hmac,hashlib; print(hmac.new(b'key', b'1.{}', hashlib.sha256).hexdigest())"
        assert_eq!(
            signature("key", 1, b"{}"),
            "sha256=1ba6b8171186efc613e8bcc0cbdab2748f24984d7c5a84faa2637afa0e40d224"
        );
        assert_ne!(signature("key", 1, b"{}"), signature("key", 2, b"{}"));
        assert_ne!(signature("key", 1, b"{}"), signature("other", 1, b"{}"));
    }
}
