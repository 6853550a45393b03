//! Elicitation: a hold raised by a client's call is also put to that client's user, when the
//! client can ask its user (it declared the elicitation capability) and the gateway holds a
//! person's credential to decide with.
//!
//! The first answer wins across every channel: what the user answers here is decided through
//! Holdpoint like any decision (the engine records one winner; losing a race is fine), and the
//! request is withdrawn (`notifications/cancelled`) when the hold is decided elsewhere first.
//! Agent credentials never decide: the gateway raises holds with its agent token and decides
//! only with the [`Approver`]'s, recorded with the client's identity as `via`.

use std::sync::Arc;

use async_trait::async_trait;
use holdpoint_client::Client;
use holdpoint_protocol::{
    ApprovalSpec, ApproveScope, DecideOutcome, Decision, Hold, HoldId, HoldSpec, QuestionSpec,
    Role, VIA_MAX,
};
use rmcp::RoleServer;
use rmcp::model::{
    ClientResult, ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction,
    ElicitationSchema, MetaObject, RequestMetaObject, ServerRequest,
};
use rmcp::service::{ElicitationMode, Peer, PeerRequestOptions};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use crate::reach::HoldpointError;
use crate::tasks::Task;

/// The reason recorded when the user declines an elicitation.
pub const DECLINED: &str = "declined in the MCP client";

/// The reason sent with `notifications/cancelled` when the hold was decided elsewhere.
const DECIDED_ELSEWHERE: &str = "the hold was decided in Holdpoint";

/// How much of a call's arguments the message shows; the rest is in Holdpoint.
const SHOWN_ARGUMENTS: usize = 2000;

/// How the gateway decides as the person who answers its client's elicitations: over the
/// HTTP API with their token (`holdpoint mcp`), or in the server's process as the person whose
/// credential came with the MCP session.
#[async_trait]
pub trait Decider: Send + Sync {
    /// Decides hold `id` as this person, recording `via` (the client it was answered in);
    /// `key` makes a repeated request decide nothing twice.
    async fn decide(
        &self,
        id: HoldId,
        decision: Decision,
        via: &str,
        key: &str,
    ) -> Result<DecideOutcome, HoldpointError>;
}

/// Over the HTTP API, as the person whose token the client carries.
#[async_trait]
impl Decider for Client {
    async fn decide(
        &self,
        id: HoldId,
        decision: Decision,
        via: &str,
        key: &str,
    ) -> Result<DecideOutcome, HoldpointError> {
        let client = self.clone().with_via(via);
        match Client::decide(&client, &id.to_string(), &decision, Some(key)).await {
            Ok(result) => Ok(result.result),
            Err(e) if e.already_decided().is_some() => Err(HoldpointError::AlreadyDecided(id)),
            Err(e) => Err(HoldpointError::failed(
                format!("deciding hold {id}"),
                e.to_string(),
            )),
        }
    }
}

/// A person (an approver or an admin) who decides what the gateway's client's user answers.
/// Never an agent: agent credentials do not decide holds.
#[derive(Clone)]
pub struct Approver {
    name: String,
    decider: Arc<dyn Decider>,
}

impl Approver {
    /// The person `name`, deciding through `decider`, which must act with that person's
    /// credential (an approver's or an admin's).
    pub fn new(name: impl Into<String>, decider: Arc<dyn Decider>) -> Approver {
        Approver {
            name: name.into(),
            decider,
        }
    }

    /// The person whose token `client` carries, over the HTTP API, once the server says the
    /// token is a person's; the error says what is wrong.
    pub async fn over_http(client: Client) -> Result<Approver, String> {
        let me = client
            .session()
            .await
            .map_err(|e| format!("the approver token was refused: {e}"))?;
        if me.role == Role::Agent {
            return Err(format!(
                "the approver token is the agent {:?}'s: an approver's or an admin's is needed, \
                 since agents never decide holds",
                me.name
            ));
        }
        Ok(Approver::new(me.name, Arc::new(client)))
    }

    /// The person's name, as decisions record it.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// One client's user, asked through elicitation, and who decides what they answer.
pub struct Elicitor {
    peer: Peer<RoleServer>,
    decider: Arc<dyn Decider>,
    /// The client, as decisions record it.
    via: String,
}

impl Elicitor {
    /// An elicitor for the client behind `peer`, when it can be asked (it declared form
    /// elicitation) and there is a person's credential to decide with.
    pub fn new(peer: &Peer<RoleServer>, approver: Option<&Approver>) -> Option<Elicitor> {
        let approver = approver?;
        if !peer
            .supported_elicitation_modes()
            .contains(&ElicitationMode::Form)
        {
            return None;
        }
        Some(Elicitor {
            peer: peer.clone(),
            decider: approver.decider.clone(),
            via: via(peer),
        })
    }

    /// Puts `hold` to the user until they answer or `decided` says the hold was decided
    /// elsewhere (then the request is withdrawn). An answer is decided through Holdpoint; a
    /// cancel leaves the hold pending for the other channels. For a call run as `task`, the
    /// requests are tied to it and it needs input while they wait.
    pub async fn run(&self, hold: Hold, decided: CancellationToken, task: Option<&Task>) {
        let (message, form) = match &hold.spec {
            HoldSpec::Approval(a) => approval(&hold, a),
            HoldSpec::Question(q) => question(q),
        };
        let Some(form) = form else {
            return;
        };
        let Some(answer) = self.ask(message, form, &decided, &hold, task).await else {
            return;
        };
        let Some(decision) = decision(&hold, answer) else {
            return;
        };
        let Some(result) = self.decide(&hold, &decision).await else {
            return;
        };
        // A question with a confirm step: the answer waits for its confirmation.
        if result == DecideOutcome::AwaitingConfirm
            && let Decision::Answer { options } = &decision
            && let HoldSpec::Question(q) = &hold.spec
        {
            let message = format!(
                "Confirm your answer to: {}\nYou chose: {}",
                q.question,
                labels(q, options)
            );
            let Some(form) = schema(json!({})) else {
                return;
            };
            let confirm = match self.ask(message, form, &decided, &hold, task).await {
                Some(Answer::Accepted(_)) => Decision::Confirm,
                Some(Answer::Declined) => Decision::Cancel {
                    reason: Some(DECLINED.into()),
                },
                Some(Answer::Canceled) | None => return,
            };
            self.decide(&hold, &confirm).await;
        }
    }

    /// Sends one elicitation request; `None` when the hold was decided elsewhere first (the
    /// request is then canceled) or the client could not be asked.
    async fn ask(
        &self,
        message: String,
        schema: ElicitationSchema,
        decided: &CancellationToken,
        hold: &Hold,
        task: Option<&Task>,
    ) -> Option<Answer> {
        let params = ElicitRequestParams::FormElicitationParams {
            meta: task.map(|t| RequestMetaObject(MetaObject(t.related()))),
            message,
            requested_schema: schema,
        };
        if let Some(task) = task {
            task.asking_the_client(hold.id);
        }
        let answer = self.send(params, decided).await;
        if let Some(task) = task {
            task.asked_the_client(hold.id);
        }
        answer
    }

    /// Sends one elicitation request and waits for its answer, or withdraws it when `decided`.
    async fn send(
        &self,
        params: ElicitRequestParams,
        decided: &CancellationToken,
    ) -> Option<Answer> {
        let request = ServerRequest::ElicitRequest(ElicitRequest::new(params));
        let mut handle = match self
            .peer
            .send_cancellable_request(request, PeerRequestOptions::no_options())
            .await
        {
            Ok(handle) => handle,
            Err(e) => {
                tracing::warn!(error = %e, "could not send the elicitation request");
                return None;
            }
        };
        tokio::select! {
            answered = &mut handle.rx => match answered {
                Ok(Ok(ClientResult::ElicitResult(result))) => Some(Answer::of(result)),
                Ok(Ok(_)) => {
                    tracing::warn!("the client answered the elicitation with another result");
                    None
                }
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "the client failed the elicitation");
                    None
                }
                Err(_) => None,
            },
            () = decided.cancelled() => {
                if let Err(e) = handle.cancel(Some(DECIDED_ELSEWHERE.into())).await {
                    tracing::debug!(error = %e, "could not withdraw the elicitation");
                }
                None
            }
        }
    }

    /// Decides `hold` as the approver; `None` when the decision did not count (lost to one
    /// recorded first, or refused).
    async fn decide(&self, hold: &Hold, decision: &Decision) -> Option<DecideOutcome> {
        let key = uuid::Uuid::now_v7().to_string();
        match self
            .decider
            .decide(hold.id, decision.clone(), &self.via, &key)
            .await
        {
            Ok(result) => Some(result),
            Err(HoldpointError::AlreadyDecided(_)) => None,
            Err(e) => {
                tracing::warn!(hold = %hold.id, error = %e, "the answer given in the MCP client was refused");
                None
            }
        }
    }
}

/// "MCP elicitation in NAME VERSION", from what the client said it is at `initialize`: shown
/// on one line, within the length the API allows, in characters a header can carry.
fn via(peer: &Peer<RoleServer>) -> String {
    let client = peer
        .peer_info()
        .map(|info| format!("{} {}", info.client_info.name, info.client_info.version))
        .unwrap_or_else(|| "an unnamed client".into());
    let text = format!("MCP elicitation in {}", client.trim());
    text.chars()
        .map(|c| {
            if c == ' ' || c.is_ascii_graphic() {
                c
            } else {
                '?'
            }
        })
        .take(VIA_MAX)
        .collect()
}

/// What the user did with an elicitation.
enum Answer {
    Accepted(Map<String, Value>),
    Declined,
    Canceled,
}

impl Answer {
    fn of(result: ElicitResult) -> Answer {
        match result.action {
            ElicitationAction::Accept => match result.content {
                Some(Value::Object(content)) => Answer::Accepted(content),
                _ => Answer::Accepted(Map::new()),
            },
            ElicitationAction::Decline => Answer::Declined,
            _ => Answer::Canceled,
        }
    }
}

/// The decision an answer makes; `None` for a cancel (the hold stays pending for the other
/// channels) or an answer that does not fit the form.
fn decision(hold: &Hold, answer: Answer) -> Option<Decision> {
    let content = match answer {
        Answer::Canceled => return None,
        Answer::Declined => {
            return Some(match &hold.spec {
                HoldSpec::Approval(_) => Decision::Deny {
                    reason: Some(DECLINED.into()),
                },
                HoldSpec::Question(_) => Decision::Cancel {
                    reason: Some(DECLINED.into()),
                },
            });
        }
        Answer::Accepted(content) => content,
    };
    match &hold.spec {
        HoldSpec::Approval(a) => {
            let reason = content
                .get("reason")
                .and_then(Value::as_str)
                .map(str::trim)
                .filter(|r| !r.is_empty())
                .map(str::to_owned);
            match content.get("decision").and_then(Value::as_str) {
                Some("approve") => Some(Decision::Approve {
                    scope: ApproveScope::Once,
                    expires_in: None,
                    // Bound to the arguments shown.
                    digest: Some(a.digest.clone()),
                    reason,
                }),
                Some("deny") => Some(Decision::Deny { reason }),
                _ => None,
            }
        }
        HoldSpec::Question(_) => {
            let options = match content.get("answer") {
                Some(Value::String(id)) => vec![id.clone()],
                Some(Value::Array(ids)) => ids
                    .iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect(),
                _ => return None,
            };
            Some(Decision::Answer { options })
        }
    }
}

fn approval(hold: &Hold, a: &ApprovalSpec) -> (String, Option<ElicitationSchema>) {
    let mut arguments =
        serde_json::to_string_pretty(&a.arguments).unwrap_or_else(|_| a.arguments.to_string());
    if arguments.chars().count() > SHOWN_ARGUMENTS {
        arguments = arguments.chars().take(SHOWN_ARGUMENTS).collect();
        arguments.push_str("\n… (cut here; Holdpoint shows them all)");
    }
    let mut message = format!(
        "Holdpoint asks you to approve a call of {}.\nArguments:\n{arguments}\nDigest: {}",
        a.tool, a.digest
    );
    if let Some(d) = &a.description {
        message.push_str(&format!("\nWhy: {d}"));
    }
    if !hold.lineage.is_empty() {
        message.push_str(&format!(
            "\nThrough agents: {}",
            holdpoint_protocol::lineage_text(&hold.lineage)
        ));
    }
    message.push_str(&format!(
        "\n(Hold {}; it can also be decided in Holdpoint.)",
        hold.id
    ));
    let schema = schema(json!({
        "decision": {
            "type": "string",
            "title": "Decision",
            "oneOf": [
                {"const": "approve", "title": "Approve this call once"},
                {"const": "deny", "title": "Deny it"}
            ]
        },
        "reason": {
            "type": "string",
            "title": "Reason",
            "description": "Optional; the agent is told."
        }
    }))
    .map(|mut s| {
        s.required = Some(vec!["decision".into()]);
        s
    });
    (message, schema)
}

fn question(q: &QuestionSpec) -> (String, Option<ElicitationSchema>) {
    let choices: Vec<Value> = q
        .options
        .iter()
        .map(|o| json!({"const": o.id, "title": o.label}))
        .collect();
    let mut answer = if q.multiple {
        json!({"type": "array", "title": "Answer", "minItems": 1, "items": {"anyOf": choices}})
    } else {
        json!({"type": "string", "title": "Answer", "oneOf": choices})
    };
    if let Some(d) = &q.default_option {
        answer["default"] = if q.multiple { json!([d]) } else { json!(d) };
    }
    let mut message = q.question.clone();
    for o in q.options.iter().filter(|o| o.description.is_some()) {
        message.push_str(&format!(
            "\n- {}: {}",
            o.label,
            o.description.as_deref().unwrap_or_default()
        ));
    }
    if let Some(context) = &q.context {
        message.push_str(&format!("\nContext: {}", Value::Object(context.clone())));
    }
    let schema = schema(json!({ "answer": answer })).map(|mut s| {
        s.required = Some(vec!["answer".into()]);
        s
    });
    (message, schema)
}

/// An object schema with these properties; `None` (and a warning) should the SDK refuse it.
fn schema(properties: Value) -> Option<ElicitationSchema> {
    let schema = json!({"type": "object", "properties": properties});
    serde_json::from_value(schema)
        .map_err(|e| tracing::warn!(error = %e, "could not build the elicitation's form"))
        .ok()
}

fn labels(q: &QuestionSpec, ids: &[String]) -> String {
    ids.iter()
        .map(|id| {
            q.options
                .iter()
                .find(|o| &o.id == id)
                .map_or(id.as_str(), |o| o.label.as_str())
        })
        .collect::<Vec<_>>()
        .join(", ")
}
