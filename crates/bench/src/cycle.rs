//! The durable cycle: an agent raises a question, a person answers it, the agent observes the
//! outcome. Every step is committed to SQLite and its WAL fsynced before it is
//! acknowledged (or committed by PostgreSQL, with `--database-url`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use holdpoint_core::{Engine, HumanChannel, Scope};
use holdpoint_protocol::{
    Decision, GateRequest, GateResult, HoldRequest, Principal, QuestionOption, QuestionRequest,
    Role,
};
use holdpoint_store::{Database, PgStore, SqliteStore};
use holdpoint_test_support::pg::TempSchema;

use crate::stats::{Latencies, ms};

pub struct Inbox;

impl HumanChannel for Inbox {
    fn name(&self) -> &str {
        "bench"
    }
}

pub fn ask(world: &str) -> GateRequest {
    let option = |id: &str| QuestionOption {
        id: id.into(),
        label: id.into(),
        description: None,
    };
    GateRequest {
        world: world.into(),
        chat: None,
        agent: Some("bench".into()),
        items: vec![HoldRequest::Question(QuestionRequest {
            tool_call_id: None,
            question: "Proceed with the deployment?".into(),
            options: vec![option("yes"), option("no")],
            multiple: false,
            confirm: false,
            default_option: None,
            context: None,
            deadline: None,
        })],
        idempotency_key: None,
    }
}

async fn one_cycle(engine: &Engine, agent: &Principal, person: &Principal) -> anyhow::Result<()> {
    let res = engine.gate(agent, ask("bench")).await?;
    let Some(GateResult::Held { hold }) = res.results.into_iter().next() else {
        anyhow::bail!("no hold raised")
    };
    let answer = Decision::Answer {
        options: vec!["yes".into()],
    };
    let scope = Scope::any();
    let (observed, decided) = tokio::join!(
        engine.wait(hold.id, Duration::from_secs(30), &scope),
        engine.decide(person, hold.id, answer, &scope, None)
    );
    decided?;
    observed?.ok_or_else(|| anyhow::anyhow!("the outcome was not observed"))?;
    Ok(())
}

async fn level(
    engine: &Engine,
    concurrency: usize,
    seconds: f64,
) -> anyhow::Result<(usize, Duration, Latencies)> {
    let warmup = Instant::now() + Duration::from_millis(500);
    let end = warmup + Duration::from_secs_f64(seconds);
    let mut workers = Vec::new();
    for _ in 0..concurrency {
        let engine = engine.clone();
        workers.push(tokio::spawn(async move {
            let agent = Principal::new("bench-agent", Role::Agent);
            let person = Principal::new("bench-person", Role::Approver);
            let mut samples = Vec::new();
            loop {
                let start = Instant::now();
                if start >= end {
                    return Ok::<_, anyhow::Error>(samples);
                }
                one_cycle(&engine, &agent, &person).await?;
                if start >= warmup {
                    samples.push(start.elapsed());
                }
            }
        }));
    }
    let mut all = Vec::new();
    for w in workers {
        all.extend(w.await??);
    }
    let n = all.len();
    Ok((n, Duration::from_secs_f64(seconds), Latencies::new(all)))
}

pub async fn run(
    dir: &tempfile::TempDir,
    database_url: Option<&str>,
    levels: &[usize],
    seconds: f64,
) -> anyhow::Result<()> {
    println!("== durable cycles: raise a question -> answer it -> outcome observed");
    let schema = match database_url {
        Some(url) => Some(TempSchema::in_database(url).await),
        None => None,
    };
    match &schema {
        Some(_) => println!("   PostgreSQL (acknowledged = committed, synchronous_commit on)"),
        None => {
            println!(
                "   SQLite in {} (WAL fsynced before each acknowledgement: acknowledged = on disk)",
                dir.path().display()
            );
            crate::disk::describe(dir.path());
        }
    }
    for &c in levels {
        let database = match &schema {
            Some(s) => Database::Postgres(Arc::new(PgStore::open(&s.url).await?)),
            None => Database::Sqlite(Arc::new(SqliteStore::open(
                dir.path().join(format!("cycle-{c}.db")),
            )?)),
        };
        let engine = Engine::builder(database.store())
            .channel(Arc::new(Inbox))
            .start()
            .await?;
        let (n, took, lat) = level(&engine, c, seconds).await?;
        println!(
            "  concurrency {c:>4}: {:>8.0} cycles/s   p50 {}   p99 {}   ({} cycles)",
            n as f64 / took.as_secs_f64(),
            ms(lat.percentile(50.0)),
            ms(lat.percentile(99.0)),
            lat.len()
        );
        drop(engine);
        database.close().await;
    }
    println!();
    Ok(())
}
