//! Calls run as MCP tasks (revision 2025-11-25): the client gets a task at once, the call
//! (and the hold it may wait on) goes on without an open request, and the client polls
//! `tasks/get`, fetches `tasks/result`, or withdraws it with `tasks/cancel`.
//!
//! Tasks live in the gateway's process: when it exits they end, and the holds they waited on
//! are withdrawn like any other (nobody would be there to run the approved call). A task that
//! is over is kept for its time to live, then forgotten.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use holdpoint_protocol::{Hold, HoldId, Timestamp};
use parking_lot::Mutex;
use rmcp::ErrorData;
use rmcp::model::{CallToolResult, JsonObject};
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// How long a task is kept when the client asks for no time to live.
const DEFAULT_TTL: Duration = Duration::from_secs(3600);
/// The longest a task is kept.
const MAX_TTL: Duration = Duration::from_secs(24 * 3600);
/// How often a client is asked to poll.
const POLL_INTERVAL_MS: u64 = 250;
/// The most tasks one gateway keeps (over and under way): a client cannot grow it without bound.
const MAX_TASKS: usize = 1000;
/// The most tasks one `tasks/list` answer shows; `nextCursor` gives the rest.
const LIST_PAGE: usize = 100;
/// The `_meta` key that ties a message to its task.
const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";

/// The reason recorded when a client cancels its task.
pub const CANCELED: &str = "the MCP client canceled the task";

/// How a task ended.
#[derive(Clone)]
enum Ending {
    Completed(Value),
    Failed(ErrorData),
    Cancelled,
}

struct State {
    status: &'static str,
    message: Option<String>,
    updated: Timestamp,
    ending: Option<Ending>,
}

/// One task: a call under way or over.
pub struct Task {
    id: String,
    /// The order of creation in this gateway: `tasks/list`'s order and its cursor.
    number: u64,
    created: Timestamp,
    ttl: Duration,
    state: Mutex<State>,
    ended: watch::Sender<bool>,
    /// Canceled by `tasks/cancel`: the call's wait ends and its hold is withdrawn.
    pub canceled: CancellationToken,
}

/// The tasks of one gateway.
#[derive(Default)]
pub struct Tasks {
    tasks: Mutex<HashMap<String, Arc<Task>>>,
    created: AtomicU64,
}

impl Tasks {
    /// A new task, kept for `ttl` milliseconds as asked (within bounds).
    pub fn create(&self, ttl: Option<u64>) -> Result<Arc<Task>, ErrorData> {
        let ttl = ttl.map_or(DEFAULT_TTL, Duration::from_millis).min(MAX_TTL);
        let now = now();
        let task = Arc::new(Task {
            id: uuid::Uuid::new_v4().to_string(),
            number: self.created.fetch_add(1, Ordering::Relaxed),
            created: now,
            ttl,
            state: Mutex::new(State {
                status: "working",
                message: None,
                updated: now,
                ending: None,
            }),
            ended: watch::channel(false).0,
            canceled: CancellationToken::new(),
        });
        let mut tasks = self.tasks.lock();
        tasks.retain(|_, t| !t.expired(now));
        if tasks.len() >= MAX_TASKS {
            return Err(ErrorData::invalid_request(
                format!("{MAX_TASKS} tasks are kept already: fetch or cancel some first"),
                None,
            ));
        }
        tasks.insert(task.id.clone(), task.clone());
        Ok(task)
    }

    /// The task `id` of a request's `taskId`.
    pub fn get(&self, params: Option<&Value>) -> Result<Arc<Task>, ErrorData> {
        let id = params
            .and_then(|p| p.get("taskId"))
            .and_then(Value::as_str)
            .ok_or_else(|| ErrorData::invalid_params("taskId: a task's id is required", None))?;
        let now = now();
        self.tasks
            .lock()
            .get(id)
            .filter(|t| !t.expired(now))
            .cloned()
            .ok_or_else(|| ErrorData::invalid_params(format!("taskId: no task {id:?}"), None))
    }

    /// `tasks/list`: the tasks kept, oldest first, a page at a time; `params.cursor` is the
    /// `nextCursor` of the page before.
    pub fn list(&self, params: Option<&Value>) -> Result<Value, ErrorData> {
        let after = match params.and_then(|p| p.get("cursor")) {
            None | Some(Value::Null) => None,
            Some(cursor) => Some(
                cursor
                    .as_str()
                    .and_then(|c| c.parse::<u64>().ok())
                    .ok_or_else(|| {
                        ErrorData::invalid_params(
                            format!("cursor: {cursor} is not a cursor this server gave"),
                            None,
                        )
                    })?,
            ),
        };
        let now = now();
        let mut tasks: Vec<Arc<Task>> = self
            .tasks
            .lock()
            .values()
            .filter(|t| !t.expired(now) && after.is_none_or(|a| t.number > a))
            .cloned()
            .collect();
        tasks.sort_by_key(|t| t.number);
        let more = tasks.len() > LIST_PAGE;
        tasks.truncate(LIST_PAGE);
        let mut page = json!({ "tasks": tasks.iter().map(|t| t.describe()).collect::<Vec<_>>() });
        if let (true, Some(last)) = (more, tasks.last()) {
            page["nextCursor"] = json!(last.number.to_string());
        }
        Ok(page)
    }
}

impl Task {
    /// The task as `tasks/get` and the other task requests show it.
    pub fn describe(&self) -> Value {
        let (status, message, updated) = {
            let s = self.state.lock();
            (s.status, s.message.clone(), s.updated)
        };
        let mut task = json!({
            "taskId": self.id,
            "status": status,
            "createdAt": self.created.to_string(),
            "lastUpdatedAt": updated.to_string(),
            "ttl": u64::try_from(self.ttl.as_millis()).unwrap_or(u64::MAX),
            "pollInterval": POLL_INTERVAL_MS,
        });
        if let Some(m) = message {
            task["statusMessage"] = json!(m);
        }
        task
    }

    /// The call waits for a person to decide `hold`.
    pub fn waiting_on(&self, hold: &Hold) {
        self.update(|s| {
            s.message = Some(format!(
                "waiting for a person to decide hold {} in Holdpoint",
                hold.id
            ));
        });
    }

    /// The hold is put to the client's user as well (an elicitation tied to this task): the
    /// task needs their input, unless a person decides elsewhere first.
    pub fn asking_the_client(&self, hold: HoldId) {
        self.update(|s| {
            if s.ending.is_none() {
                s.status = "input_required";
                s.message = Some(format!(
                    "waiting for an answer in this client, or a decision in Holdpoint, on hold {hold}"
                ));
            }
        });
    }

    /// The client's user answered (or the question was withdrawn): the task works on.
    pub fn asked_the_client(&self, hold: HoldId) {
        self.update(|s| {
            if s.status == "input_required" {
                s.status = "working";
                s.message = Some(format!("hold {hold} was answered in this client"));
            }
        });
    }

    /// The `_meta` of every request and notification that belongs to this task.
    pub fn related(&self) -> JsonObject {
        let mut meta = JsonObject::new();
        meta.insert(RELATED_TASK.into(), json!({ "taskId": self.id }));
        meta
    }

    /// The call is over; a task canceled meanwhile stays canceled. A result that is an error
    /// (`isError`) ends the task as failed, as 2025-11-25 has it for tool calls; `tasks/result`
    /// gives it all the same.
    pub fn finish(&self, result: Result<CallToolResult, ErrorData>) {
        let ending = match result.map(serde_json::to_value) {
            Ok(Ok(value)) => Ending::Completed(value),
            Ok(Err(e)) => Ending::Failed(ErrorData::internal_error(e.to_string(), None)),
            Err(e) => Ending::Failed(e),
        };
        self.end(ending);
    }

    /// `tasks/cancel`: ends the task and withdraws what it waited on; a task that is over
    /// cannot be canceled.
    pub fn cancel(&self) -> Result<Value, ErrorData> {
        if !self.end(Ending::Cancelled) {
            return Err(ErrorData::invalid_params(
                format!("taskId: task {} is over already", self.id),
                None,
            ));
        }
        self.canceled.cancel();
        Ok(self.describe())
    }

    /// `tasks/result`: waits until the task is over; the call's result, or its error.
    pub async fn result(&self) -> Result<Value, ErrorData> {
        let mut ended = self.ended.subscribe();
        let _ = ended.wait_for(|over| *over).await;
        let ending = self.state.lock().ending.clone();
        match ending {
            Some(Ending::Completed(mut result)) => {
                if let Some(r) = result.as_object_mut() {
                    r.insert("_meta".into(), Value::Object(self.related()));
                }
                Ok(result)
            }
            Some(Ending::Failed(e)) => Err(e),
            Some(Ending::Cancelled) | None => Err(ErrorData::invalid_params(
                format!("taskId: task {} was cancelled; it has no result", self.id),
                None,
            )),
        }
    }

    /// Records the ending, unless there is one; whether it was recorded.
    fn end(&self, ending: Ending) -> bool {
        let mut recorded = false;
        self.update(|s| {
            if s.ending.is_none() {
                s.status = match &ending {
                    Ending::Completed(result) if result["isError"] == json!(true) => "failed",
                    Ending::Completed(_) => "completed",
                    Ending::Failed(_) => "failed",
                    Ending::Cancelled => "cancelled",
                };
                s.message = None;
                s.ending = Some(ending);
                recorded = true;
            }
        });
        if recorded {
            self.ended.send_replace(true);
        }
        recorded
    }

    fn update(&self, f: impl FnOnce(&mut State)) {
        let mut s = self.state.lock();
        f(&mut s);
        s.updated = now();
    }

    /// Over, and kept past its time to live.
    fn expired(&self, now: Timestamp) -> bool {
        let over = *self.ended.borrow();
        over && now.duration_since(self.created) > self.ttl
    }
}

fn now() -> Timestamp {
    Timestamp::from(SystemTime::now())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::ContentBlock;

    #[test]
    fn tasks_list_pages_with_a_cursor_and_refuses_a_cursor_it_never_gave() {
        let tasks = Tasks::default();
        let made: Vec<String> = (0..LIST_PAGE + 5)
            .map(|_| tasks.create(None).unwrap().id.clone())
            .collect();
        let first = tasks.list(None).unwrap();
        let ids = |page: &Value| -> Vec<String> {
            page["tasks"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["taskId"].as_str().unwrap().to_owned())
                .collect()
        };
        assert_eq!(ids(&first), made[..LIST_PAGE]);
        let cursor = first["nextCursor"].clone();
        let rest = tasks.list(Some(&json!({ "cursor": cursor }))).unwrap();
        assert_eq!(ids(&rest), made[LIST_PAGE..]);
        assert_eq!(rest.get("nextCursor"), None, "{rest}");
        let refused = tasks.list(Some(&json!({"cursor": "later"}))).unwrap_err();
        assert_eq!(refused.code, rmcp::model::ErrorCode::INVALID_PARAMS);
        assert!(refused.message.contains("cursor"), "{}", refused.message);
    }

    #[test]
    fn a_task_needs_input_while_its_client_is_asked_and_fails_with_an_error_result() {
        let tasks = Tasks::default();
        let task = tasks.create(None).unwrap();
        let hold = HoldId::random();
        task.asking_the_client(hold);
        assert_eq!(task.describe()["status"], "input_required");
        task.asked_the_client(hold);
        assert_eq!(task.describe()["status"], "working");
        task.finish(Ok(CallToolResult::error(vec![ContentBlock::text("no")])));
        assert_eq!(task.describe()["status"], "failed");
        // Over is over: a late answer changes nothing.
        task.asking_the_client(hold);
        assert_eq!(task.describe()["status"], "failed");
    }
}
