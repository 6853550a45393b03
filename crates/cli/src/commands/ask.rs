//! `holdpoint ask`: a question for a person, from a script; the answer on stdout.

use clap::Args;
use holdpoint_protocol::{
    Deadline, GateResult, HoldRequest, OutcomeStatus, QuestionOption, QuestionRequest,
};
use serde_json::json;

use super::raise::{self, Target, status};
use super::runtime;
use crate::Failure;

#[derive(Args)]
#[command(
    after_help = "Examples:\n  holdpoint ask \"Deploy v2 to production?\" --option deploy --option abort --default abort --timeout 30m\n  choice=$(holdpoint ask \"Which region?\" --option eu='Europe' --option us='United States')\n  holdpoint ask \"Drop the staging database?\" --confirm && ./drop-staging.sh\n\n\
The chosen option ids are printed on stdout, one per line. Without --option the options are\n\
`yes` and `no`. The question is raised as an agent (the token must be an agent's or an\n\
admin's) and waits until someone answers or its deadline passes.\n\n\
Exit status:\n  0    answered, or confirmed\n  123  canceled (or withdrawn)\n  124  timed out (an option the timeout applied is still printed)\n  125  Holdpoint could not ask (no server, a refused token or request)\n  130  interrupted with Ctrl-C (the question is withdrawn)\n  2    bad usage: nothing was asked"
)]
pub struct AskArgs {
    /// The question, as the person will read it.
    question: String,
    /// An option: its id, or `id=Label` [default: yes and no].
    #[arg(long = "option", value_name = "ID[=LABEL]")]
    options: Vec<String>,
    /// Several options may be chosen.
    #[arg(long)]
    multiple: bool,
    /// After choosing, the person must confirm, or cancel.
    #[arg(long)]
    confirm: bool,
    /// The option applied when the deadline passes, and by clients with no one to ask.
    #[arg(long, value_name = "ID")]
    default: Option<String>,
    /// How long the question may wait, such as `90s`, `30m` or `2h` [default: the policy's
    /// deadline for questions].
    #[arg(long, value_name = "DURATION")]
    timeout: Option<Deadline>,
    /// Print the hold's outcome as JSON instead of the option ids.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    target: Target,
}

/// `yes`, or `yes=Yes, do it`.
fn option(spec: &str) -> QuestionOption {
    let (id, label) = spec.split_once('=').unwrap_or((spec, spec));
    QuestionOption {
        id: id.trim().to_owned(),
        label: label.trim().to_owned(),
        description: None,
    }
}

pub fn run(args: AskArgs) -> Result<(), Failure> {
    runtime()?.block_on(ask(args))
}

async fn ask(args: AskArgs) -> Result<(), Failure> {
    let client = args.target.client()?;
    let options = if args.options.is_empty() {
        vec![option("yes=Yes"), option("no=No")]
    } else {
        args.options.iter().map(|o| option(o)).collect()
    };
    let question = QuestionRequest {
        tool_call_id: None,
        question: args.question.clone(),
        options,
        multiple: args.multiple,
        confirm: args.confirm,
        default_option: args.default.clone(),
        context: None,
        deadline: args.timeout,
    };
    let hold = match args
        .target
        .raise(&client, HoldRequest::Question(question))
        .await?
    {
        GateResult::Held { hold } => hold,
        GateResult::Invalid { field, message } => {
            return Err(raise::error(format!("{field}: {message}")));
        }
        other => {
            return Err(raise::error(format!(
                "unexpected answer to a question: {other:?}"
            )));
        }
    };
    let decided = raise::outcome(&client, &hold, "answer it").await?;
    let Some(outcome) = decided.outcome else {
        return Err(raise::error("the hold was decided without an outcome"));
    };
    if args.json {
        let text = json!({"hold": decided.id, "outcome": outcome}).to_string();
        println!("{}", crate::terminal::safe::json_text(&text));
    } else {
        for o in &outcome.options {
            println!("{}", o.id);
        }
    }
    let code = match outcome.status {
        OutcomeStatus::Answered | OutcomeStatus::Confirmed => return Ok(()),
        OutcomeStatus::TimedOut => status::TIMED_OUT,
        _ => status::DENIED,
    };
    if !args.json {
        eprintln!("{}", crate::present::outcome(&outcome));
    }
    Err(Failure::Exit(code))
}
