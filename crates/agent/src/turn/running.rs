//! Running a call that was allowed or approved. It is saved as running first, so a process
//! that dies meanwhile leaves it to be reported as interrupted, never run twice.

use holdpoint_protocol::{ApprovedBy, CallState, EventPayload, ToolResult};
use serde_json::Value;

use super::driver::{Driver, Stop};
use super::finished;
use crate::tools::{self, ToolContext};

impl Driver<'_> {
    pub(super) async fn run(&mut self, i: usize) -> Result<(), Stop> {
        let rec = &mut self.turn.calls[i];
        rec.state = CallState::Running;
        let (name, call_id) = (rec.call.name.clone(), rec.call.id.clone());
        let started = self.event(EventPayload::TurnToolStarted {
            turn: self.turn.id,
            call: call_id,
            name: name.clone(),
        });
        // Recorded before it runs: a crash from here on reports the call as interrupted.
        self.save(vec![], vec![started]).await?;
        let args = self.turn.calls[i].arguments.clone().unwrap_or(Value::Null);
        let output = if name.starts_with(tools::remote::PREFIX)
            && tools::find(&self.agent, &name).is_none()
        {
            // A remote A2A agent: it may raise holds in this chat while it runs.
            self.run_remote(i, &name, &args).await?
        } else {
            let ctx = ToolContext {
                host: self.rt,
                agent: &self.agent,
                dir: &self.dir,
                cancel: &self.cancel,
            };
            tools::run(&ctx, &name, &args).await
        };
        let turn = self.turn.id;
        let rec = &mut self.turn.calls[i];
        let result = match output {
            Ok(output) => ToolResult::Executed {
                output,
                arguments: rec.edited.then(|| args.clone()),
                approved_by: rec.approved_by.unwrap_or(ApprovedBy::Policy),
            },
            Err(error) => ToolResult::Failed { error },
        };
        let event = finished(turn, rec, result);
        let event = self.event(event);
        self.save(vec![], vec![event]).await
    }
}
