//! `holdpoint holds`: list, show, decide and watch holds from the terminal.

use std::collections::HashSet;

use clap::{Args, Subcommand};
use holdpoint_core::clock;
use holdpoint_protocol::{
    ApproveScope, DecideOutcome, Decision, Event, EventPayload, Hold, HoldId, HoldKind, HoldSpec,
    HoldsParams, Order, StreamParams,
};

use super::{Common, print_json, runtime};

use crate::Failure;
use crate::client::Client;
use crate::connect::client_failure;
use crate::decide::{Decider, Handled, learn_agents, option_ids, result_text};
use crate::present::{self, AgentNames};
use crate::terminal::safe::json_text;
use crate::terminal::{self, Console, Happened};

#[derive(Subcommand)]
pub enum HoldsCommand {
    /// List holds: pending ones, oldest first, unless filtered otherwise.
    #[command(
        after_help = "Examples:\n  holdpoint holds list\n  holdpoint holds list --world lab --kind approval\n  holdpoint holds list --status resolved --json | jq '.items[].outcome'"
    )]
    List(ListArgs),
    /// Show one hold with everything that happened to it.
    #[command(after_help = "Example:\n  holdpoint holds show 0193c2a4-5b1e-7f00-8a1c-3d2e4f5a6b7c")]
    Show(HoldArgs),
    /// Approve an approval hold.
    #[command(
        after_help = "Examples:\n  holdpoint holds approve 0193c2a4-…\n  holdpoint holds approve 0193c2a4-… --scope chat --digest 5f2b…   (only if the arguments are still those)"
    )]
    Approve(ApproveArgs),
    /// Deny an approval hold; the agent is told the reason.
    #[command(
        after_help = "Examples:\n  holdpoint holds deny 0193c2a4-… --reason 'not on Fridays'\n  holdpoint holds deny 0193c2a4-… --stop   (the turn stops too)"
    )]
    Deny(DenyArgs),
    /// Answer a question with one of its options (several where it allows).
    #[command(
        after_help = "Example:\n  holdpoint holds answer 0193c2a4-… deploy\n\nA question with `confirm` then waits for `holdpoint holds confirm ID` (or `cancel`)."
    )]
    Answer(AnswerArgs),
    /// Confirm the answer a question with `confirm` is waiting on.
    #[command(after_help = "Example:\n  holdpoint holds confirm 0193c2a4-…")]
    Confirm(HoldArgs),
    /// Cancel a question (or the answer waiting for its confirm step).
    #[command(after_help = "Example:\n  holdpoint holds cancel 0193c2a4-… --reason 'asked twice'")]
    Cancel(CancelArgs),
    /// Follow holds as they come and decide them at a menu, as `chat` does.
    #[command(
        after_help = "Examples:\n  holdpoint holds watch\n  holdpoint holds watch --world lab\n  holdpoint holds watch --json   (one event per line; decides nothing)\n\n\
Pending holds are shown first, then new ones as they are raised, in any chat. Without a\n\
terminal (or with --non-interactive or --json) watch only reports: it never applies defaults\n\
to other people's holds. Ctrl-C stops watching; holds not decided stay pending."
    )]
    Watch(WatchArgs),
}

#[derive(Args)]
pub struct ListArgs {
    /// Only this world's holds (name or id).
    #[arg(long, value_name = "WORLD")]
    world: Option<String>,
    /// Only this chat's holds (needs --world).
    #[arg(long, value_name = "CHAT", requires = "world")]
    chat: Option<String>,
    /// `pending` (open holds), `resolved`, `any`, or one status such as `approved`.
    #[arg(long, default_value = "pending")]
    status: String,
    #[arg(long, value_parser = hold_kind())]
    kind: Option<HoldKind>,
    /// Only holds of this agent (a runtime agent's id, or the agent an outside program named).
    #[arg(long, value_name = "AGENT")]
    agent: Option<String>,
    /// Only approvals of this tool.
    #[arg(long, value_name = "TOOL")]
    tool: Option<String>,
    /// Most urgent first: soonest deadline first, holds without one last (open holds only).
    #[arg(long)]
    urgent: bool,
    /// At most this many (1 to 500).
    #[arg(long, default_value_t = 50, value_parser = |t: &str| super::number_between(t, 1, 500))]
    limit: u32,
    /// Go on from a previous listing (its `next`).
    #[arg(long)]
    cursor: Option<String>,
    #[command(flatten)]
    common: Common,
}

/// `--kind`: a hold's kind as the wire spells it, the names taken from `HoldKind` itself, so a
/// new kind is offered without a change here.
fn hold_kind() -> impl clap::builder::TypedValueParser<Value = HoldKind> {
    use clap::builder::TypedValueParser;
    use holdpoint_protocol::VariantArray;
    clap::builder::PossibleValuesParser::new(HoldKind::VARIANTS.iter().map(|k| k.as_str()))
        .try_map(|name| HoldKind::parse(&name).ok_or("not a kind of hold"))
}

#[derive(Args)]
pub struct HoldArgs {
    /// The hold's id.
    id: String,
    #[command(flatten)]
    common: Common,
}

#[derive(Args)]
pub struct ApproveArgs {
    /// The hold's id.
    id: String,
    /// How far the approval reaches.
    #[arg(long, default_value = "once", value_parser = ["once", "chat", "always-args", "always-tool"])]
    scope: String,
    /// With --scope chat, always-args or always-tool: the grant lasts this long ("10m",
    /// "2h"), then the call is asked again.
    #[arg(long = "for", value_name = "DURATION", value_parser = parse_duration)]
    for_: Option<holdpoint_protocol::Deadline>,
    /// Approve only if the arguments' digest is this one (as `holds show` prints it).
    #[arg(long)]
    digest: Option<String>,
    /// Recorded with the decision.
    #[arg(long)]
    reason: Option<String>,
    #[command(flatten)]
    common: Common,
}

#[derive(Args)]
pub struct DenyArgs {
    /// The hold's id.
    id: String,
    /// Told to the agent.
    #[arg(long)]
    reason: Option<String>,
    /// Stop the agent's turn as well.
    #[arg(long)]
    stop: bool,
    #[command(flatten)]
    common: Common,
}

#[derive(Args)]
pub struct AnswerArgs {
    /// The hold's id.
    id: String,
    /// The option(s) chosen, by id.
    #[arg(required = true, value_name = "OPTION")]
    options: Vec<String>,
    #[command(flatten)]
    common: Common,
}

#[derive(Args)]
pub struct CancelArgs {
    /// The hold's id.
    id: String,
    #[arg(long)]
    reason: Option<String>,
    #[command(flatten)]
    common: Common,
}

#[derive(Args)]
pub struct WatchArgs {
    /// Only this world's holds (name or id).
    #[arg(long, value_name = "WORLD")]
    world: Option<String>,
    /// Only report; never prompt (as when stdin is not a terminal).
    #[arg(long)]
    non_interactive: bool,
    #[command(flatten)]
    common: Common,
}

/// A duration such as "10m" or "2h" (not "never": a grant for good is one without --for).
fn parse_duration(text: &str) -> Result<holdpoint_protocol::Deadline, String> {
    match text.parse::<holdpoint_protocol::Deadline>() {
        Ok(holdpoint_protocol::Deadline::Never) | Err(_) => Err(format!(
            "{text:?} is not a duration such as \"10m\" or \"2h\""
        )),
        Ok(d) => Ok(d),
    }
}

pub fn run(cmd: HoldsCommand) -> Result<(), Failure> {
    runtime()?.block_on(async move {
        match cmd {
            HoldsCommand::List(a) => list(a).await,
            HoldsCommand::Show(a) => show(a).await,
            HoldsCommand::Approve(a) => {
                let scope = match a.scope.as_str() {
                    "chat" => ApproveScope::Chat,
                    "always-args" => ApproveScope::AlwaysArgs,
                    "always-tool" => ApproveScope::AlwaysTool,
                    _ => ApproveScope::Once,
                };
                let decision = Decision::Approve {
                    scope,
                    expires_in: a.for_,
                    digest: a.digest,
                    reason: a.reason,
                };
                decide(&a.common, &a.id, decision).await
            }
            HoldsCommand::Deny(a) => {
                let decision = if a.stop {
                    Decision::DenyStop { reason: a.reason }
                } else {
                    Decision::Deny { reason: a.reason }
                };
                decide(&a.common, &a.id, decision).await
            }
            HoldsCommand::Answer(a) => {
                let decision = Decision::Answer { options: a.options };
                decide(&a.common, &a.id, decision).await
            }
            HoldsCommand::Confirm(a) => decide(&a.common, &a.id, Decision::Confirm).await,
            HoldsCommand::Cancel(a) => {
                let decision = Decision::Cancel { reason: a.reason };
                decide(&a.common, &a.id, decision).await
            }
            HoldsCommand::Watch(a) => watch(a).await,
        }
    })
}

async fn list(a: ListArgs) -> Result<(), Failure> {
    let client = a.common.connect.client()?;
    let params = HoldsParams {
        world: a.world,
        chat: a.chat,
        status: Some(a.status),
        kind: a.kind,
        agent: a.agent,
        tool: a.tool,
        order: a.urgent.then_some(Order::Urgent),
        limit: Some(usize::try_from(a.limit).unwrap_or(usize::MAX)),
        cursor: a.cursor,
        ..HoldsParams::default()
    };
    let page = client.holds(&params).await.map_err(client_failure)?;
    if a.common.json {
        return print_json(&page);
    }
    if page.items.is_empty() {
        println!("No holds.");
        return Ok(());
    }
    let now = clock::now();
    println!(
        "{:<36}  {:<8}  {:<16}  {:<18}  WHAT",
        "ID", "KIND", "STATUS", "DEADLINE"
    );
    for h in &page.items {
        let deadline = match (h.is_open(), h.deadline) {
            (true, Some(d)) => present::relative(d, now),
            (true, None) => "never".to_owned(),
            (false, _) => "-".to_owned(),
        };
        println!(
            "{:<36}  {:<8}  {:<16}  {:<18}  {}",
            h.id,
            h.kind().as_str(),
            h.status.as_str(),
            deadline,
            present::summary(h)
        );
    }
    if let Some(next) = &page.next {
        // A cursor continues the order it came from.
        let urgent = if a.urgent { "--urgent " } else { "" };
        println!("More: holdpoint holds list {urgent}--cursor {next}");
    }
    Ok(())
}

async fn show(a: HoldArgs) -> Result<(), Failure> {
    let client = a.common.connect.client()?;
    let detail = client.hold(&a.id).await.map_err(client_failure)?;
    if a.common.json {
        return print_json(&detail);
    }
    let hold = &detail.hold;
    let mut agents = AgentNames::default();
    learn_agents(&client, &hold.world, &mut agents).await;
    println!("{}", present::card(hold, clock::now(), &agents));
    println!("  status: {}", hold.status.as_str());
    match &hold.spec {
        HoldSpec::Approval(spec) => println!("  digest: {}", spec.digest),
        HoldSpec::Question(q) => println!("  options: {}", option_ids(q)),
    }
    let offers: Vec<&str> = hold.offers.iter().map(|k| k.as_str()).collect();
    if hold.is_open() {
        println!("  offers: {}", offers.join(", "));
    }
    if let Some(o) = &hold.outcome {
        println!("  outcome: {}", present::outcome_by(o, &agents));
    }
    println!("History:");
    for e in &detail.history {
        println!("  {}", history_line(e, &agents));
    }
    Ok(())
}

fn history_line(e: &Event, agents: &AgentNames) -> String {
    let source = format!("{:?}", e.actor.source).to_lowercase();
    let mut who = match &e.actor.name {
        Some(n) => format!("{} ({source})", present::short(&agents.principal(n), 40)),
        None => source,
    };
    if let Some(via) = &e.actor.via {
        who = format!("{who} via {}", present::short(via, 80));
    }
    let what = match &e.payload {
        EventPayload::HoldDecided { outcome }
        | EventPayload::HoldExpired { outcome }
        | EventPayload::HoldWithdrawn { outcome } => present::outcome_by(outcome, agents),
        EventPayload::HoldVoted {
            approvals, quorum, ..
        } => format!("approval {approvals} of {quorum}"),
        EventPayload::HoldAwaitingConfirm { answer } => {
            let labels: Vec<String> = answer
                .options
                .iter()
                .map(|o| present::short(&o.label, 40))
                .collect();
            format!("chose {}, awaiting confirmation", labels.join(", "))
        }
        other => other.type_name().to_owned(),
    };
    format!("{}  {:<24}  {what}", e.at, who)
}

async fn decide(common: &Common, id: &str, decision: Decision) -> Result<(), Failure> {
    let client = common.connect.client()?;
    let result = match client.decide(id, &decision, None).await {
        Ok(r) => r,
        Err(e) => match e.already_decided() {
            Some(hold) if common.json => {
                print_json(&hold)?;
                return Err(Failure::Exit(1));
            }
            Some(hold) => {
                let o = hold.outcome.as_ref().map(present::outcome);
                return Err(Failure::Check(format!(
                    "error: already decided: {}",
                    o.unwrap_or_default()
                )));
            }
            None => return Err(client_failure(e)),
        },
    };
    if common.json {
        return print_json(&result);
    }
    let hold = &result.hold;
    let kind = match hold.kind() {
        HoldKind::Approval => "Approval",
        HoldKind::Question => "Question",
    };
    println!("{kind} {}: {}", hold.id, result_text(&result));
    if result.result == DecideOutcome::AwaitingConfirm {
        println!(
            "Confirm it with `holdpoint holds confirm {}` (or cancel).",
            hold.id
        );
    }
    Ok(())
}

async fn watch(a: WatchArgs) -> Result<(), Failure> {
    let client = a.common.connect.client()?;
    let interactive = terminal::interactive(a.non_interactive) && !a.common.json;
    // The stream opens first, so that nothing raised while the pending list is read is missed.
    let events = client
        .events(&StreamParams {
            world: a.world.clone(),
            ..StreamParams::default()
        })
        .await
        .map_err(client_failure)?;
    let mut console = Console::new(events, interactive)?;
    let mut watcher = Watcher {
        client: &client,
        seen: HashSet::new(),
        json: a.common.json,
    };
    if !a.common.json {
        println!(
            "Watching holds in {}. Ctrl-C stops.",
            a.world
                .as_deref()
                .map_or("every world".to_owned(), |w| format!("world {w}"))
        );
    }
    let params = HoldsParams {
        world: a.world.clone(),
        limit: Some(500),
        ..HoldsParams::default()
    };
    let pending = client.all_holds(&params).await.map_err(client_failure)?;
    let mut batches: Vec<Vec<Hold>> = Vec::new();
    for h in pending {
        match batches.iter_mut().find(|b| b[0].batch == h.batch) {
            Some(b) => b.push(h),
            None => batches.push(vec![h]),
        }
    }
    for batch in batches {
        if watcher.show(&mut console, batch).await? != Handled::Done {
            return Ok(());
        }
    }
    loop {
        let event = match console.next_event().await? {
            Happened::Event(e) => e,
            Happened::Ended => {
                return Err(Failure::Check("error: the server stopped".into()));
            }
            _ => return Ok(()),
        };
        if watcher.json {
            if event.hold.is_some() {
                let line = serde_json::to_string(&event).unwrap_or_default();
                println!("{}", json_text(&line));
            }
            continue;
        }
        match &event.payload {
            EventPayload::HoldCreated { hold } if !watcher.seen.contains(&hold.id) => {
                let batch = if interactive {
                    let params = HoldsParams {
                        batch: Some(hold.batch),
                        ..HoldsParams::default()
                    };
                    client.all_holds(&params).await.map_err(client_failure)?
                } else {
                    vec![(**hold).clone()]
                };
                if watcher.show(&mut console, batch).await? != Handled::Done {
                    return Ok(());
                }
            }
            payload => {
                if let (Some(id), Some(o)) = (event.hold, payload.resolution()) {
                    println!("Hold {id}: {}", present::outcome(o));
                }
            }
        }
    }
}

struct Watcher<'a> {
    client: &'a Client,
    /// Holds already shown.
    seen: HashSet<HoldId>,
    json: bool,
}

impl Watcher<'_> {
    /// Shows holds: a menu for a person, a line (or JSON) otherwise.
    async fn show(&mut self, console: &mut Console, holds: Vec<Hold>) -> Result<Handled, Failure> {
        let holds: Vec<Hold> = holds
            .into_iter()
            .filter(|h| self.seen.insert(h.id))
            .collect();
        if holds.is_empty() {
            return Ok(Handled::Done);
        }
        if self.json {
            for h in &holds {
                let line = serde_json::to_string(h).unwrap_or_default();
                println!("{}", json_text(&line));
            }
            return Ok(Handled::Done);
        }
        if !console.interactive {
            for h in &holds {
                println!(
                    "Hold {} in {}: {} (pending)",
                    h.id,
                    present::short(&h.world, 40),
                    present::summary(h)
                );
            }
            return Ok(Handled::Done);
        }
        let mut decider = Decider {
            client: self.client,
            console,
            no_one: "",
            agents: AgentNames::default(),
        };
        decider.batch(holds).await
    }
}

#[cfg(test)]
mod tests {
    use super::{HoldKind, hold_kind};

    #[test]
    fn kind_reads_every_hold_kind_as_the_wire_spells_it_and_names_them_when_wrong() {
        use clap::builder::TypedValueParser;
        use holdpoint_protocol::VariantArray;
        let cmd = clap::Command::new("holds");
        let parse = |text: &str| hold_kind().parse_ref(&cmd, None, std::ffi::OsStr::new(text));
        for kind in HoldKind::VARIANTS {
            assert_eq!(parse(kind.as_str()).unwrap(), *kind);
        }
        let refused = parse("decision").unwrap_err().to_string();
        assert!(
            refused.contains("approval") && refused.contains("question"),
            "{refused}"
        );
    }
}
