//! The prompt: shows a hold's menu at the terminal, asks for what a choice needs (a reason,
//! new arguments, the confirm step), records the decision, and applies the fail-closed default
//! when no one is there to ask.

use holdpoint_core::clock;
use holdpoint_protocol::{
    ApplyDefault, DecideBatchRequest, DecideOutcome, DecideResult, Decision, Hold, HoldSpec,
    SeenHold, Timestamp,
};
use serde_json::Value;

use crate::Failure;
use crate::client::{Client, ClientError};
use crate::connect::client_failure;
use crate::present::{self, AgentNames};
use crate::terminal::safe::{clean, clean_line as clean_line_of};
use crate::terminal::{Console, Happened};

use super::Handled;
use super::menu::{Choice, batch_menu, decided_together, menu, parse_choice, result_text};

/// Shows holds to a person and records what they decide, or applies the fail-closed default
/// when no one is there.
pub struct Decider<'a> {
    pub client: &'a Client,
    pub console: &'a mut Console,
    /// Recorded as the reason when the default is applied.
    pub no_one: &'a str,
    /// The agents' names, learnt per world as its holds are shown.
    pub agents: AgentNames,
}

/// Learns the names of the agents of `world`, for the cards of its holds. A caller who may
/// not list them learns none, and the cards name the principal that raised each hold instead.
pub async fn learn_agents(client: &Client, world: &str, names: &mut AgentNames) {
    let agents = client.agents(world).await.unwrap_or_default();
    names.add(world, &agents);
}

impl Decider<'_> {
    /// A hold's card, with the names of its world's agents.
    async fn card(&mut self, hold: &Hold, now: Timestamp) -> String {
        if !self.agents.knows(&hold.world) {
            learn_agents(self.client, &hold.world, &mut self.agents).await;
        }
        present::card(hold, now, &self.agents)
    }

    /// Decides a batch's open holds: "decide all" when several approvals are open, else one
    /// by one.
    pub async fn batch(&mut self, holds: Vec<Hold>) -> Result<Handled, Failure> {
        if !self.console.interactive {
            for hold in &holds {
                self.apply_default(hold).await?;
            }
            return Ok(Handled::Done);
        }
        let approvals: Vec<&Hold> = holds.iter().filter(|h| decided_together(h)).collect();
        let mut rest = holds.clone();
        if approvals.len() > 1 {
            match self.decide_all(&approvals).await? {
                Some(decided) => rest.retain(|h| !decided.contains(&h.id.to_string())),
                None => return Ok(Handled::Interrupted),
            }
        }
        for hold in rest {
            match self.one(&hold).await? {
                Handled::Done => {}
                other => return Ok(other),
            }
        }
        Ok(Handled::Done)
    }

    /// The fail-closed default for one hold, said on the terminal.
    pub async fn apply_default(&mut self, hold: &Hold) -> Result<(), Failure> {
        let body = ApplyDefault {
            reason: Some(self.no_one.to_owned()),
        };
        let decided = match self.client.apply_default(hold.id, &body, None).await {
            Ok(r) => r.hold,
            Err(e) => e.already_decided().ok_or_else(|| client_failure(e))?,
        };
        println!(
            "Hold {} ({}): no one to ask here; {}",
            hold.id,
            present::summary(hold),
            decided
                .outcome
                .as_ref()
                .map(|o| present::outcome_by(o, &self.agents))
                .unwrap_or_default()
        );
        Ok(())
    }

    /// Offers one decision for every approval of a batch. Returns the ids it decided (none
    /// when the person chose one by one), or `None` on Ctrl-C or the end of input.
    async fn decide_all(&mut self, approvals: &[&Hold]) -> Result<Option<Vec<String>>, Failure> {
        let now = clock::now();
        println!("\nThe agent asks for {} calls at once:", approvals.len());
        for (i, h) in approvals.iter().enumerate() {
            let card = self.card(h, now).await;
            println!("\n[{}/{}] {card}", i + 1, approvals.len());
        }
        let items = batch_menu(approvals);
        let batch = approvals[0].batch;
        loop {
            println!("Decide all:");
            for (i, (label, _)) in items.iter().enumerate() {
                println!("  {}) {label}", i + 1);
            }
            let line = match self
                .console
                .prompt(&format!("choose 1-{}: ", items.len()), None)
                .await?
            {
                Happened::Line(l) => l,
                Happened::Eof | Happened::Interrupted | Happened::Ended => return Ok(None),
                Happened::Event(_) | Happened::Resolved(_) => continue,
            };
            let picked = match parse_choice(&line, items.len(), false) {
                Ok(p) => p[0],
                Err(e) => {
                    println!("{e}");
                    continue;
                }
            };
            let Some(decision) = items[picked].1.clone() else {
                return Ok(Some(Vec::new()));
            };
            let seen: Vec<SeenHold> = approvals
                .iter()
                .filter_map(|h| {
                    Some(SeenHold {
                        hold: h.id,
                        digest: h.digest()?.to_owned(),
                    })
                })
                .collect();
            let body = DecideBatchRequest { seen, decision };
            match self.client.decide_batch(batch, &body, None).await {
                Ok(r) => {
                    for d in &r.holds {
                        println!("  {} → {}", present::summary(&d.hold), result_text(d));
                    }
                    return Ok(Some(
                        r.holds.iter().map(|d| d.hold.id.to_string()).collect(),
                    ));
                }
                Err(e @ ClientError::Api { status: 409, .. }) => {
                    println!(
                        "{}; deciding one by one instead",
                        clean_line_of(&e.to_string())
                    );
                    return Ok(Some(Vec::new()));
                }
                Err(ClientError::Api { message, .. }) => println!("{}", clean(&message)),
                Err(e) => return Err(client_failure(e)),
            }
        }
    }

    /// One hold's menu, asked until it is decided here or elsewhere.
    pub async fn one(&mut self, hold: &Hold) -> Result<Handled, Failure> {
        if !self.console.interactive {
            self.apply_default(hold).await?;
            return Ok(Handled::Done);
        }
        let card = self.card(hold, clock::now()).await;
        println!("\n{card}");
        let items = menu(hold);
        let several = match &hold.spec {
            HoldSpec::Approval(_) => false,
            HoldSpec::Question(q) => q.multiple,
        };
        loop {
            for (i, c) in items.iter().enumerate() {
                println!("  {}) {}", i + 1, c.label(hold));
            }
            let prompt = if several {
                format!("choose 1-{} (several: 1,3): ", items.len())
            } else {
                format!("choose 1-{}: ", items.len())
            };
            let line = match self.ask(&prompt, hold).await? {
                Asked::Line(l) => l,
                Asked::Over(h) => return Ok(h),
            };
            let picked = match parse_choice(&line, items.len(), several) {
                Ok(p) => p,
                Err(e) => {
                    println!("{e}");
                    continue;
                }
            };
            let chosen: Vec<&Choice> = picked.iter().map(|&i| &items[i]).collect();
            let Some(decision) = self.decision(hold, &chosen).await? else {
                continue;
            };
            match self.record(hold, &decision).await? {
                Some(r) if r.result == DecideOutcome::AwaitingConfirm => {
                    return self.confirm(&r.hold).await;
                }
                Some(_) => return Ok(Handled::Done),
                None => continue,
            }
        }
    }

    /// The second step of a question with `confirm`.
    async fn confirm(&mut self, hold: &Hold) -> Result<Handled, Failure> {
        let chosen = hold
            .pending_answer
            .as_ref()
            .map(|a| {
                a.options
                    .iter()
                    .map(|o| clean_line_of(&o.label))
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_default();
        loop {
            println!("Confirm {chosen}?\n  1) confirm\n  2) cancel the question");
            let line = match self.ask("choose 1-2: ", hold).await? {
                Asked::Line(l) => l,
                Asked::Over(h) => return Ok(h),
            };
            let decision = match parse_choice(&line, 2, false) {
                Ok(p) if p[0] == 0 => Decision::Confirm,
                Ok(_) => Decision::Cancel { reason: None },
                Err(e) => {
                    println!("{e}");
                    continue;
                }
            };
            if self.record(hold, &decision).await?.is_some() {
                return Ok(Handled::Done);
            }
        }
    }

    /// The decision for what was picked, asking for what it needs (a reason, new
    /// arguments); `None` to show the menu again.
    async fn decision(
        &mut self,
        hold: &Hold,
        chosen: &[&Choice],
    ) -> Result<Option<Decision>, Failure> {
        let digest = hold.digest().map(str::to_owned);
        Ok(Some(match chosen {
            [Choice::Approve(scope)] => Decision::Approve {
                scope: *scope,
                expires_in: None,
                digest,
                reason: None,
            },
            [Choice::Deny] => Decision::Deny {
                reason: self.reason(hold).await?,
            },
            [Choice::DenyStop] => Decision::DenyStop {
                reason: self.reason(hold).await?,
            },
            [Choice::Cancel] => Decision::Cancel { reason: None },
            [Choice::Edit] => match self.new_arguments(hold).await? {
                Some(arguments) => Decision::Edit {
                    arguments,
                    reason: None,
                },
                None => return Ok(None),
            },
            options if options.iter().all(|c| matches!(c, Choice::Option(_))) => Decision::Answer {
                options: options
                    .iter()
                    .filter_map(|c| match c {
                        Choice::Option(id) => Some(id.clone()),
                        _ => None,
                    })
                    .collect(),
            },
            _ => {
                println!("choose options only, or cancel on its own");
                return Ok(None);
            }
        }))
    }

    async fn reason(&mut self, hold: &Hold) -> Result<Option<String>, Failure> {
        match self
            .console
            .prompt(
                "reason (told to the agent; Enter for none): ",
                Some(hold.id),
            )
            .await?
        {
            Happened::Line(l) if !l.trim().is_empty() => Ok(Some(l.trim().to_owned())),
            _ => Ok(None),
        }
    }

    /// New arguments: in `$VISUAL` or `$EDITOR` on the JSON when one is set, else typed on
    /// one line. `None` when nothing usable came back.
    async fn new_arguments(&mut self, hold: &Hold) -> Result<Option<Value>, Failure> {
        let a = match &hold.spec {
            HoldSpec::Approval(a) => a,
            HoldSpec::Question(_) => return Ok(None),
        };
        let text = match std::env::var("VISUAL").or_else(|_| std::env::var("EDITOR")) {
            Ok(editor) if !editor.trim().is_empty() => {
                match crate::editor::edit(&editor, &a.arguments).await {
                    Ok(t) => t,
                    Err(e) => {
                        println!("{}", clean(&e.to_string()));
                        return Ok(None);
                    }
                }
            }
            _ => match self
                .console
                .prompt(
                    "new arguments as JSON on one line (Enter to go back): ",
                    Some(hold.id),
                )
                .await?
            {
                Happened::Line(l) if !l.trim().is_empty() => l,
                _ => return Ok(None),
            },
        };
        match serde_json::from_str::<Value>(&text) {
            Ok(v) if v == a.arguments => {
                println!("the arguments are unchanged; choose approve to run them as they are");
                Ok(None)
            }
            Ok(v) => Ok(Some(v)),
            Err(e) => {
                println!("that is not JSON ({e}); the hold is unchanged");
                Ok(None)
            }
        }
    }

    /// Sends a decision. `None` when it was refused for a reason the person can fix (the
    /// menu is shown again); a hold decided meanwhile counts as done.
    async fn record(
        &mut self,
        hold: &Hold,
        decision: &Decision,
    ) -> Result<Option<DecideResult>, Failure> {
        match self
            .client
            .decide(&hold.id.to_string(), decision, None)
            .await
        {
            Ok(r) => {
                println!("→ {}", result_text(&r));
                Ok(Some(r))
            }
            Err(e) => match e.already_decided() {
                Some(h) => {
                    let o = h.outcome.as_ref();
                    let o = o.map(|o| present::outcome_by(o, &self.agents));
                    let o = o.unwrap_or_default();
                    println!("already decided: {o}");
                    Ok(Some(DecideResult {
                        result: DecideOutcome::AlreadyDecided,
                        hold: h,
                    }))
                }
                None if matches!(
                    e,
                    ClientError::Api {
                        status: 400..=499,
                        ..
                    }
                ) =>
                {
                    println!("{}", clean(&e.to_string()));
                    Ok(None)
                }
                None => Err(client_failure(e)),
            },
        }
    }

    /// A prompt about `hold`; a decision made elsewhere meanwhile ends it.
    async fn ask(&mut self, prompt: &str, hold: &Hold) -> Result<Asked, Failure> {
        Ok(match self.console.prompt(prompt, Some(hold.id)).await? {
            Happened::Line(l) => Asked::Line(l),
            Happened::Resolved(e) => {
                let o = e.payload.resolution();
                let o = o.map(|o| present::outcome_by(o, &self.agents));
                println!("decided elsewhere: {}", o.unwrap_or_default());
                Asked::Over(Handled::Done)
            }
            Happened::Interrupted => Asked::Over(Handled::Interrupted),
            // A prompt keeps other events for later; it never returns one.
            Happened::Eof | Happened::Ended | Happened::Event(_) => Asked::Over(Handled::Eof),
        })
    }
}

enum Asked {
    Line(String),
    Over(Handled),
}
