//! What `ask` and `exec` share: raising one hold as an agent, waiting for its outcome with
//! long polls, withdrawing it on Ctrl-C, and the exit statuses scripts can rely on.

use clap::Args;
use holdpoint_protocol::{GateResult, Hold, HoldRequest, NewHolds, WaitParams, Withdraw};
use tokio::signal::unix::{SignalKind, signal};

use crate::Failure;
use crate::client::Client;
use crate::connect::Connect;
use crate::terminal::safe::clean;

/// Exit statuses of `ask` and `exec`, chosen not to collide with the statuses commands
/// commonly use (as `timeout` and `env` do).
pub mod status {
    /// The person denied the call, or canceled the question.
    pub const DENIED: u8 = 123;
    /// The hold's deadline passed first.
    pub const TIMED_OUT: u8 = 124;
    /// Holdpoint could not ask: no server, a refused token, a request it rejected.
    pub const ERROR: u8 = 125;
    /// `exec`: the command was found but could not be run.
    pub const CANNOT_RUN: u8 = 126;
    /// `exec`: the command was not found.
    pub const NOT_FOUND: u8 = 127;
    /// Ctrl-C: the hold was withdrawn.
    pub const INTERRUPTED: u8 = 130;
}

/// Where the hold is raised, and how.
#[derive(Args)]
pub struct Target {
    /// The world to ask in, by name or id [default: $HOLDPOINT_WORLD, else the token's world,
    /// else the only world there is].
    #[arg(long, value_name = "WORLD", env = "HOLDPOINT_WORLD")]
    world: Option<String>,
    /// Filed under this chat name, so that holds can be found and filtered by it.
    #[arg(long, value_name = "NAME")]
    chat: Option<String>,
    #[command(flatten)]
    pub connect: Connect,
}

/// Prints `message` as an error and fails with [`status::ERROR`].
pub fn error(message: impl std::fmt::Display) -> Failure {
    eprintln!("error: {}", clean(&message.to_string()));
    Failure::Exit(status::ERROR)
}

impl Target {
    pub fn client(&self) -> Result<Client, Failure> {
        self.connect.client().map_err(|f| match f {
            Failure::Check(m) | Failure::Usage(m) => error(m.trim_start_matches("error: ")),
            other => other,
        })
    }

    /// The world named, else the token's, else the only one there is.
    pub async fn world(&self, client: &Client) -> Result<String, Failure> {
        if let Some(w) = &self.world {
            return Ok(w.clone());
        }
        let me = client.session().await.map_err(error)?;
        if let Some(w) = me.world {
            return Ok(w);
        }
        let worlds = client.worlds().await.map_err(error)?;
        match worlds.as_slice() {
            [one] => Ok(one.id.to_string()),
            [] => Err(error(
                "there is no world to ask in: create one (`holdpoint worlds create NAME`) or name one with --world",
            )),
            _ => Err(error("there are several worlds: name one with --world")),
        }
    }

    /// The chat name given with --chat.
    pub fn chat(&self) -> Option<&String> {
        self.chat.as_ref()
    }

    /// Raises one item. The request carries an idempotency key, so a retried request raises
    /// nothing twice.
    pub async fn raise(&self, client: &Client, item: HoldRequest) -> Result<GateResult, Failure> {
        let world = self.world(client).await?;
        let body = NewHolds {
            chat: self.chat.clone(),
            items: vec![item],
        };
        let key = uuid::Uuid::now_v7().to_string();
        let response = client
            .raise(&world, &body, Some(&key))
            .await
            .map_err(error)?;
        response
            .results
            .into_iter()
            .next()
            .ok_or_else(|| error("the server answered with no result"))
    }
}

/// Says where to answer, then waits until `hold` is decided. On Ctrl-C the hold is withdrawn
/// (so no one decides a question nobody waits for any more) and the wait fails with
/// [`status::INTERRUPTED`].
pub async fn outcome(client: &Client, hold: &Hold, what: &str) -> Result<Hold, Failure> {
    // Ctrl-C is caught from before the hint on: whoever reacts to the hint (a person, a
    // script) interrupts a process that withdraws its hold, rather than one that dies and
    // leaves the hold waiting for its deadline.
    let mut interrupt = signal(SignalKind::interrupt()).ok();
    waiting_hint(hold, client, what);
    let interrupted = async {
        match &mut interrupt {
            Some(s) => s.recv().await,
            None => std::future::pending().await,
        }
    };
    // This process waits until the hold is decided: should it die, the hold is withdrawn.
    let params = WaitParams {
        timeout: Some("30s".into()),
        attend: Some(true),
    };
    let wait = async {
        loop {
            let r = client.wait(hold.id, &params).await.map_err(error)?;
            if r.decided {
                return Ok(r.hold);
            }
        }
    };
    tokio::select! {
        r = wait => r,
        Some(()) = interrupted => {
            let body = Withdraw { reason: Some("the asking command was interrupted".into()) };
            match client.withdraw(hold.id, &body).await {
                Ok(_) => eprintln!("Interrupted; hold {} withdrawn.", hold.id),
                Err(e) => eprintln!(
                    "Interrupted; hold {} not withdrawn: {}",
                    hold.id,
                    clean(&e.to_string())
                ),
            }
            Err(Failure::Exit(status::INTERRUPTED))
        }
    }
}

/// The hint printed while waiting: where to answer.
fn waiting_hint(hold: &Hold, client: &Client, what: &str) {
    eprintln!(
        "Waiting for a person to {what} (hold {}). Answer at {}, in `holdpoint holds watch`, or with `holdpoint holds {} {} …`.",
        hold.id,
        client.base(),
        if what.starts_with("answer") {
            "answer"
        } else {
            "approve"
        },
        hold.id
    );
}
