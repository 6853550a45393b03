//! The crash loop: a real `holdpoint serve` under a steady load (`load`), killed with
//! SIGKILL at random moments and started again on the same data directory, over and over;
//! then the promises checked (`check`) and their counts printed. One definition, run by the
//! `holdpoint` suite's `chaos` test with a few kills and by `holdpoint-chaos` (`scripts/chaos`)
//! with as many as asked.

pub mod check;
pub mod load;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use holdpoint_core::store::EventFilter;
use serde_json::json;
use tokio::task::JoinSet;

use crate::PATIENCE;
use crate::http::Api;
use crate::llm::ScriptedLlm;
use crate::serve::{self, Serve, ServeCommand, Stderr};
use check::{Observed, Report};
use load::{APPROVER, Load, Target, WORLD};

/// A run: the `holdpoint` binary, a directory of its own, how many kills, the seed.
#[derive(Clone, Debug)]
pub struct Config {
    pub holdpoint: PathBuf,
    pub dir: PathBuf,
    pub kills: usize,
    pub seed: u64,
    /// Print a line every this many kills (0: never).
    pub progress: usize,
}

/// When a kill comes: at any moment, or just after something the clients saw.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Moment {
    /// After a random time under load.
    Anytime,
    /// Just after a raise was acknowledged: other writes in flight.
    AfterRaise,
    /// Just after a decision was acknowledged.
    AfterDecision,
    /// Just after a live-stream client got an event: streams mid-flight.
    MidStream,
    /// Just after the tool appended its line, while it still runs.
    MidTool,
    /// Killed again while starting (recovering) after the kill.
    MidStart,
}

const MOMENTS: [Moment; 6] = [
    Moment::Anytime,
    Moment::AfterRaise,
    Moment::AfterDecision,
    Moment::MidStream,
    Moment::MidTool,
    Moment::MidStart,
];

/// How long a hold may be past its deadline, once the server is up, before it must have
/// an outcome.
const GRACE: Duration = Duration::from_secs(3);

/// A seed from the clock, for runs that were not given one.
pub fn fresh_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Runs the loop and checks; prints the seed first and the report last.
pub async fn run(config: &Config) -> Report {
    println!(
        "chaos: {} kills, seed {} (repeat with --seed {})",
        config.kills, config.seed, config.seed
    );
    let began = Instant::now();
    let mut rng = fastrand::Rng::with_seed(config.seed);
    std::fs::create_dir_all(&config.dir).unwrap();
    let config_file = config.dir.join("holdpoint.toml");
    std::fs::write(&config_file, "[log]\nlevel = \"warn\"\n").unwrap();
    let effects = config.dir.join("effects");
    let log = config.dir.join("serve.log");
    let command = ServeCommand::new(&config.holdpoint, config.dir.join("data"))
        .arg("--config")
        .arg(config_file)
        .stderr(Stderr::AppendTo(log));
    let mut retried = 0;
    let (mut server, url) = start(&command, &mut retried).await;
    // When the server was up: (listening, killed), in milliseconds since the epoch.
    let mut ups: Vec<(i64, i64)> = Vec::new();
    let mut up_since = millis_now();
    let admin_token = std::fs::read_to_string(command.data.join("admin-token"))
        .unwrap()
        .trim()
        .to_owned();
    let llm = ScriptedLlm::answering(load::scripted(effects.clone())).await;
    let tokens = setup(&Api::new(&url, Some(&admin_token)), &llm).await;

    let (url_tx, target) = Target::new();
    url_tx.send_replace(Some(url));
    let load = Load {
        target,
        ledger: Arc::default(),
        moments: Arc::default(),
        quiet: Arc::new(AtomicBool::new(false)),
        stop: Arc::new(AtomicBool::new(false)),
    };
    const FOLLOWERS: usize = 2;
    load.ledger
        .followed
        .lock()
        .unwrap()
        .resize(FOLLOWERS, Default::default());
    let (mut busy, mut steady) = (JoinSet::new(), JoinSet::new());
    for (i, token) in tokens.agents.iter().enumerate() {
        let seed = rng.u64(..);
        busy.spawn(load::raise(
            load.clone(),
            token.clone(),
            format!("bot{i}"),
            fastrand::Rng::with_seed(seed),
        ));
        let seed = rng.u64(..);
        steady.spawn(load::wait(
            load.clone(),
            token.clone(),
            format!("bot{i}"),
            fastrand::Rng::with_seed(seed),
        ));
    }
    for i in 0..2 {
        busy.spawn(load::chat(
            load.clone(),
            admin_token.clone(),
            format!("c{i}"),
        ));
        let seed = rng.u64(..);
        steady.spawn(load::decide(
            load.clone(),
            tokens.approver.clone(),
            fastrand::Rng::with_seed(seed),
        ));
    }
    for i in 0..FOLLOWERS {
        steady.spawn(load::follow(load.clone(), admin_token.clone(), i));
    }

    let mut kinds: BTreeMap<Moment, usize> = BTreeMap::new();
    for k in 1..=config.kills {
        let moment = MOMENTS[rng.usize(..MOMENTS.len())];
        *kinds.entry(moment).or_default() += 1;
        tokio::time::sleep(Duration::from_millis(rng.u64(100..700))).await;
        at(moment, &load, &effects).await;
        url_tx.send_replace(None);
        ups.push((up_since, millis_now()));
        server.kill().await;
        if moment == Moment::MidStart {
            let starting = command.spawn();
            tokio::time::sleep(Duration::from_millis(rng.u64(0..300))).await;
            starting.kill().await;
        }
        let (started, url) = start(&command, &mut retried).await;
        server = started;
        up_since = millis_now();
        url_tx.send_replace(Some(url));
        if config.progress > 0 && k % config.progress == 0 {
            println!(
                "  {k} kills, {:.0?}, {} holds acknowledged",
                began.elapsed(),
                load.ledger.raised.lock().unwrap().len()
            );
        }
    }
    let url = url_tx.borrow().clone().unwrap();
    let admin = Api::new(&url, Some(&admin_token));
    let agent = Api::new(&url, Some(&tokens.agents[0]));

    // The load winds down: no more holds or messages; what is under way is decided and
    // ends, deadlines pass. Then a last hold marks the end of the log for the streams.
    load.quiet.store(true, Ordering::SeqCst);
    while let Some(r) = busy.join_next().await {
        r.unwrap();
    }
    let mut report_notes = Vec::new();
    if let Err(e) = settled(&admin, &load).await {
        report_notes.push(e);
    }
    let marker = agent
        .post(
            &format!("/api/v1/worlds/{WORLD}/holds"),
            json!({"items": [{"kind": "question", "question": "The end?", "options": [{"id": "yes", "label": "Yes"}]}]}),
        )
        .await
        .expect(201)["results"][0]["hold"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    if let Err(e) = streamed(&load, &marker).await {
        report_notes.push(e);
    }
    load.stop.store(true, Ordering::SeqCst);
    while let Some(r) = steady.join_next().await {
        r.unwrap();
    }
    let stopped = server.terminate().await;
    if !stopped.success() {
        report_notes.push(format!("the server did not stop cleanly: {stopped}"));
    }
    drop(llm);

    ups.push((up_since, millis_now()));
    let observed = observe(&config.holdpoint, &command.data, &effects, &load, &ups).await;
    let mut report = check::check(&observed);
    report.violations.extend(report_notes);
    report.count("kills (SIGKILL)", config.kills);
    for (moment, n) in kinds {
        report.count(
            match moment {
                Moment::Anytime => "  at a random moment",
                Moment::AfterRaise => "  just after a raise was acknowledged",
                Moment::AfterDecision => "  just after a decision was acknowledged",
                Moment::MidStream => "  mid-stream (just after an event was sent)",
                Moment::MidTool => "  mid-tool (after its write, before its end)",
                Moment::MidStart => "  and again while starting",
            },
            n,
        );
    }
    report.count("starts that failed and were tried again", retried);
    println!(
        "chaos: seed {}, {} kills in {:.1?}\n{report}",
        config.seed,
        config.kills,
        began.elapsed()
    );
    report
}

fn millis_now() -> i64 {
    holdpoint_core::clock::now().as_millis()
}

/// Starts the server and waits until it listens. A start that fails (a process that still
/// held the database's lock, say) is printed with the processes holding the lock then,
/// counted in `retried`, and tried again, up to [`PATIENCE`]: a server that cannot start
/// again at all fails the run.
async fn start(command: &ServeCommand, retried: &mut usize) -> (Serve, String) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let mut server = command.spawn();
        if let Some(url) = server.listening().await {
            return (server, url);
        }
        *retried += 1;
        let lock = command
            .data
            .join(format!("{}.lock", holdpoint_store::DATABASE_FILE));
        let log = match &command.stderr {
            Stderr::AppendTo(path) => std::fs::read_to_string(path).unwrap_or_default(),
            _ => String::new(),
        };
        let last = log.lines().last().unwrap_or("").to_owned();
        println!(
            "  a start failed ({last}); the database's lock was held by {:?}; starting again",
            serve::holders(&lock)
        );
        assert!(
            tokio::time::Instant::now() < deadline,
            "the server could not start again"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The tokens the load uses.
struct Tokens {
    approver: String,
    agents: Vec<String>,
}

/// A world, its agent on the scripted LLM, an approver, two agents' tokens.
async fn setup(admin: &Api, llm: &ScriptedLlm) -> Tokens {
    admin
        .post("/api/v1/worlds", json!({"name": WORLD}))
        .await
        .expect(201);
    admin
        .post(
            &format!("/api/v1/worlds/{WORLD}/agents"),
            json!({"name": "helper", "llm": {"base_url": llm.base_url(), "model": "scripted"}}),
        )
        .await
        .expect(201);
    let token = |name: &str, role: &str| {
        let body = if role == "agent" {
            json!({"name": name, "role": role, "world": WORLD})
        } else {
            json!({"name": name, "role": role})
        };
        async move {
            admin.post("/api/v1/tokens", body).await.expect(201)["token"]
                .as_str()
                .unwrap()
                .to_owned()
        }
    };
    Tokens {
        approver: token(APPROVER, "approver").await,
        agents: vec![token("bot0", "agent").await, token("bot1", "agent").await],
    }
}

/// Waits for the moment to kill at (at most a couple of seconds: the load may not offer it).
async fn at(moment: Moment, load: &Load, effects: &Path) {
    let size = || std::fs::metadata(effects).map_or(0, |m| m.len());
    let wait = async {
        match moment {
            Moment::Anytime | Moment::MidStart => {}
            Moment::AfterRaise => load.moments.raised.notified().await,
            Moment::AfterDecision => load.moments.decided.notified().await,
            Moment::MidStream => load.moments.event.notified().await,
            Moment::MidTool => {
                let before = size();
                while size() == before {
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(2), wait).await;
}

/// Waits until nothing is pending and every turn the streams saw start has ended; `Err`
/// says what is still under way after [`PATIENCE`] (the checks then name it).
async fn settled(admin: &Api, load: &Load) -> Result<(), String> {
    let deadline = tokio::time::Instant::now() + PATIENCE + GRACE;
    let mut ended = std::collections::HashSet::new();
    loop {
        let pending = admin.get("/api/v1/holds?limit=5").await.expect(200);
        let pending = pending["items"].as_array().map_or(0, Vec::len);
        let mut turns: Vec<String> = load.ledger.turns.lock().unwrap().clone();
        for f in load.ledger.followed.lock().unwrap().iter() {
            turns.extend(f.turns.iter().cloned());
        }
        let mut active = 0;
        for turn in turns {
            if ended.contains(&turn) {
                continue;
            }
            let t = admin
                .get(&format!("/api/v1/worlds/{WORLD}/turns/{turn}"))
                .await
                .expect(200);
            if matches!(t["status"].as_str(), Some("running" | "waiting")) {
                active += 1;
            } else {
                ended.insert(turn);
            }
        }
        if pending == 0 && active == 0 {
            return Ok(());
        }
        if tokio::time::Instant::now() > deadline {
            return Err(format!(
                "after the load stopped, {pending} holds were still pending and {active} turns under way"
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until every stream client has received the hold `marker`'s creation.
async fn streamed(load: &Load, marker: &str) -> Result<(), String> {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let behind = load
            .ledger
            .followed
            .lock()
            .unwrap()
            .iter()
            .filter(|f| !f.seen.iter().any(|(_, h)| h.as_deref() == Some(marker)))
            .count();
        if behind == 0 {
            return Ok(());
        }
        if tokio::time::Instant::now() > deadline {
            return Err(format!(
                "{behind} stream clients never received the last event"
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// What the checks look at, read once the server has stopped.
async fn observe(
    holdpoint: &Path,
    data: &Path,
    effects: &Path,
    load: &Load,
    ups: &[(i64, i64)],
) -> Observed {
    let audit = tokio::process::Command::new(holdpoint)
        .args(["audit", "verify", "--data"])
        .arg(data)
        .env_remove("HOLDPOINT_DATA")
        .output()
        .await
        .unwrap();
    let audit = if audit.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}{}",
            String::from_utf8_lossy(&audit.stdout),
            String::from_utf8_lossy(&audit.stderr)
        ))
    };
    let database = holdpoint_store::Database::open_read_only(None, data)
        .await
        .unwrap();
    let store = database.store();
    let log = store.all_events(&EventFilter::default()).await.unwrap();
    let mut holds = std::collections::HashMap::new();
    for e in &log {
        if let (Some(id), "hold.created") = (e.hold, e.payload.type_name())
            && let Some(hold) = store.hold(id).await.unwrap()
        {
            holds.insert(id.to_string(), hold);
        }
    }
    database.close().await;
    let ledger = &load.ledger;
    Observed {
        raised: ledger.raised.lock().unwrap().clone(),
        decided: ledger.decided.lock().unwrap().clone(),
        waited: ledger.waited.lock().unwrap().clone(),
        turns: ledger.turns.lock().unwrap().clone(),
        followed: ledger.followed.lock().unwrap().clone(),
        log,
        holds,
        effects: std::fs::read_to_string(effects).unwrap_or_default(),
        audit,
        now: holdpoint_core::clock::now(),
        up: ups.to_vec(),
        grace_ms: GRACE.as_millis() as i64,
    }
}

/// Runs the loop in a directory of its own under `base`, kept when a check failed.
pub async fn run_in(base: &Path, holdpoint: PathBuf, kills: usize, seed: u64) -> Report {
    let dir = tempfile::Builder::new()
        .prefix("holdpoint-chaos-")
        .tempdir_in(base)
        .unwrap();
    let report = run(&Config {
        holdpoint,
        dir: dir.path().to_owned(),
        kills,
        seed,
        progress: 0,
    })
    .await;
    if !report.ok() {
        println!("the run's files are kept in {}", dir.keep().display());
    }
    report
}
