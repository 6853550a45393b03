//! Several `holdpoint serve` nodes on one PostgreSQL database, and failures: a turn whose node
//! was killed is taken over by another once its lease ends, and its tool runs once; a load
//! with a node killed and restarted loses nothing and does nothing twice; and a database that
//! crashes and comes back under load keeps everything acknowledged, the nodes recovering by
//! themselves; and webhooks, sent by one node, are sent by another once it died, each event
//! scheduled once. A node that stopped while its tool ran and lost its lease saves nothing.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use holdpoint_test_support::http::{Api, Method, Reply, RequestBuilder};
use holdpoint_test_support::llm::{ScriptedLlm, Step, call};
use holdpoint_test_support::pg::TempSchema;
use holdpoint_test_support::{PATIENCE, eventually};
use serde_json::{Value, json};

use super::cluster::Nodes;
use super::serve::{held_turn, wait_until_in_flight};

/// The nodes' turn lease: short, so that a takeover comes soon.
const LEASE: Duration = Duration::from_secs(1);

/// Waits until the turn has ended, reading it on `api`; the turn as it ended.
async fn ended_turn(api: &Api, turn: &str) -> Value {
    eventually(|| async move {
        let t = api
            .get(&format!("/api/v1/worlds/lab/turns/{turn}"))
            .await
            .expect(200);
        match t["status"].as_str() {
            Some("running" | "waiting") => Err(format!("the turn did not end: {t}")),
            _ => Ok(t),
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_whose_node_was_killed_finishes_on_another_node_and_its_tool_runs_once() {
    let Some(schema) = TempSchema::new().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let effect = dir.path().join("effect");
    let llm = ScriptedLlm::start(vec![
        Step::calls(vec![call(
            "c1",
            "shell_cmd",
            json!({"command": format!("echo x >> {}", effect.display())}),
        )]),
        Step::text("Done."),
    ])
    .await;
    let nodes = Nodes::new(dir.path(), &schema.url, Some(LEASE));
    // The first node alone makes the admin token; then the others join.
    let (a, url_a) = nodes.start().await;
    let (b, url_b) = nodes.start().await;
    let (c, url_c) = nodes.start().await;
    let (turn, hold) = held_turn(&nodes.admin(&url_a), &llm, "run it").await;

    // The node driving the turn dies while the turn waits; the hold is decided elsewhere.
    a.kill().await;
    let on_b = nodes.admin(&url_b);
    let decided = Instant::now();
    let decision = on_b
        .post(
            &format!("/api/v1/holds/{hold}/decision"),
            json!({"action": "approve"}),
        )
        .await
        .expect(200);
    assert_eq!(decision["hold"]["status"], "approved", "{decision}");

    // A surviving node takes the turn over once the lease ended, runs the call, and asks
    // the LLM again with its result.
    let requests = llm.wait_for_requests(2).await;
    let took = decided.elapsed();
    assert!(
        took < LEASE + Duration::from_secs(5),
        "the turn went on {took:?} after the decision"
    );
    let result = requests[1].tool_result("c1").unwrap();
    assert_eq!(result["status"], "executed", "{result}");
    let ended = ended_turn(&nodes.admin(&url_c), &turn).await;
    assert_eq!(ended["status"], "finished", "{ended}");
    // The tool ran once, and the LLM was asked exactly twice.
    assert_eq!(std::fs::read_to_string(&effect).unwrap(), "x\n");
    assert_eq!(llm.requests().len(), 2);
    assert_eq!(llm.remaining(), 0);
    for node in [b, c] {
        assert!(node.terminate().await.success());
    }
}

/// A node that stops (SIGSTOP) while its tool runs, for longer than its lease, loses the turn:
/// another node takes it over and reports the call interrupted, without running it again; the
/// first, woken, finishes its tool but saves nothing of it, and asks the LLM nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_lost_its_lease_while_its_tool_ran_saves_nothing_and_the_call_runs_once() {
    let Some(schema) = TempSchema::new().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (effect, go) = (dir.path().join("effect"), dir.path().join("go"));
    // The tool starts, then waits for the test to let it end.
    let command = format!(
        "echo started >> {e}; while [ ! -e {g} ]; do sleep 0.05; done; echo ended >> {e}",
        e = effect.display(),
        g = go.display()
    );
    let llm = ScriptedLlm::start(vec![
        Step::calls(vec![call("c1", "shell_cmd", json!({ "command": command }))]),
        Step::text("Done."),
    ])
    .await;
    let nodes = Nodes::new(dir.path(), &schema.url, Some(LEASE));
    let (a, url_a) = nodes.start().await;
    let (b, url_b) = nodes.start().await;
    let on_a = nodes.admin(&url_a);
    let on_b = nodes.admin(&url_b);
    let (turn, hold) = held_turn(&on_a, &llm, "run it").await;
    let mut events = on_b.events("?world=lab", None).await;
    on_a.post(
        &format!("/api/v1/holds/{hold}/decision"),
        json!({"action": "approve"}),
    )
    .await
    .expect(200);
    events.next_of("turn.tool_started").await;
    // The event comes before the tool's process starts: stopped before, the node would never
    // start it, and the test would be of another case.
    let started = &effect;
    eventually(|| async move {
        match std::fs::read_to_string(started) {
            Ok(text) if text.contains("started") => Ok(()),
            other => Err(format!("the tool has not started: {other:?}")),
        }
    })
    .await;

    // The node running the tool stops answering: its lease runs out, and the other node takes
    // the turn over, reporting the call that was running as interrupted.
    a.signal(rustix::process::Signal::STOP);
    let requests = llm.wait_for_requests(2).await;
    let result = requests[1].tool_result("c1").unwrap();
    assert_eq!(result["status"], "interrupted", "{result}");
    let ended = ended_turn(&on_b, &turn).await;
    assert_eq!(ended["status"], "finished", "{ended}");

    // Woken, the first node finds its lease taken (and stops the tool), or its tool ends
    // first: either way the turn is no longer its own, and it saves nothing. Once it has
    // stopped, whatever it was going to do is done.
    a.signal(rustix::process::Signal::CONT);
    std::fs::write(&go, "").unwrap();
    assert!(a.terminate().await.success());
    let effect = std::fs::read_to_string(&effect).unwrap();
    assert_eq!(
        effect.matches("started").count(),
        1,
        "the tool ran once: {effect}"
    );
    assert_eq!(
        llm.requests().len(),
        2,
        "the first node asked the LLM again"
    );
    let chat = ended["chat"].as_str().unwrap();
    let messages = on_b
        .get(&format!("/api/v1/worlds/lab/chats/{chat}/messages"))
        .await
        .expect(200);
    let tool_results: Vec<&Value> = messages["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["message"]["role"] == "tool")
        .collect();
    assert_eq!(tool_results.len(), 1, "{messages}");
    assert!(
        tool_results[0]["message"]["content"]
            .as_str()
            .unwrap()
            .contains("interrupted"),
        "{messages}"
    );
    assert_eq!(
        on_b.get(&format!("/api/v1/worlds/lab/turns/{turn}"))
            .await
            .expect(200),
        ended
    );
    let report = on_b.get("/api/v1/audit/verify").await.expect(200);
    assert_eq!(report["intact"], true, "{report}");
    assert!(b.terminate().await.success());
}

/// The nodes' URLs as a client knows them: `None` while a node is down.
#[derive(Clone, Default)]
struct Live(Arc<Mutex<Vec<Option<String>>>>);

impl Live {
    fn set(&self, i: usize, url: Option<String>) {
        self.0.lock().unwrap()[i] = url;
    }

    /// Sends a request built by `make` to the nodes in turn, starting with node `first`,
    /// until one answers: a node that is down (or dies before answering) is not a failure
    /// for a client of several nodes, which tries another.
    async fn send(
        &self,
        first: usize,
        token: &str,
        make: impl Fn(&Api) -> RequestBuilder,
    ) -> Reply {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        for n in first.. {
            let url = {
                let urls = self.0.lock().unwrap();
                urls[n % urls.len()].clone()
            };
            if let Some(url) = url {
                let api = Api::new(&url, Some(token));
                if let Ok(reply) = api.try_send(make(&api)).await {
                    return reply;
                }
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no node answered in time"
            );
            tokio::task::yield_now().await;
        }
        unreachable!()
    }
}

/// Holds each agent raises; every third asks with a short deadline and is left to expire.
const PER_AGENT: usize = 18;
const AGENTS: usize = 3;

fn expires(n: usize) -> bool {
    n.is_multiple_of(3)
}

/// Waits until hold `id` has `status`, reading it on `api` (nodes may be killed meanwhile:
/// there is no one stream to wait on).
async fn status_becomes(api: &Api, id: &str, status: &str) {
    eventually(|| async move {
        let hold = api.get(&format!("/api/v1/holds/{id}")).await.expect(200);
        if hold["hold"]["status"] == status {
            Ok(())
        } else {
            Err(format!("hold {id} is not {status}: {hold}"))
        }
    })
    .await
}

/// Waits until the load has raised `count` holds.
async fn raised_at_least<T>(raised: &Mutex<Vec<T>>, count: usize) {
    eventually(|| async move {
        let n = raised.lock().unwrap().len();
        if n >= count {
            Ok(())
        } else {
            Err(format!("the load stalled at {n} holds"))
        }
    })
    .await
}

/// Waits until `count` holds of `tool` are pending, reading them on `api`.
async fn pending(api: &Api, tool: &str, count: usize) {
    eventually(|| async move {
        let page = api
            .get(&format!("/api/v1/holds?tool={tool}&limit=100"))
            .await
            .expect(200);
        if page["items"].as_array().map_or(0, Vec::len) >= count {
            Ok(())
        } else {
            Err(format!("fewer than {count} {tool} holds pending: {page}"))
        }
    })
    .await
}

/// Approves, over and over, the pending holds of `tools` it finds on the nodes, until
/// `stop`; counts the decisions each hold was answered 200 for (acknowledged).
async fn approver(
    live: Live,
    token: String,
    first: usize,
    tools: Arc<Mutex<Vec<&'static str>>>,
    answered: Arc<Mutex<HashMap<String, usize>>>,
    stop: Arc<std::sync::atomic::AtomicBool>,
) {
    let mut n = first;
    while !stop.load(std::sync::atomic::Ordering::SeqCst) {
        let tools = tools.lock().unwrap().clone();
        let mut found = 0;
        for tool in tools {
            n += 1;
            let page = live
                .send(n, &token, |api| {
                    api.request(Method::GET, &format!("/api/v1/holds?tool={tool}&limit=100"))
                })
                .await;
            if page.status == 503 {
                continue; // The database is away: look again shortly.
            }
            let page = page.expect(200);
            for hold in page["items"].as_array().into_iter().flatten() {
                found += 1;
                let id = hold["id"].as_str().unwrap().to_owned();
                n += 1;
                let reply = live
                    .send(n, &token, |api| {
                        api.request(Method::POST, &format!("/api/v1/holds/{id}/decision"))
                            .json(&json!({"action": "approve"}))
                    })
                    .await;
                match reply.status {
                    200 => *answered.lock().unwrap().entry(id).or_default() += 1,
                    // Decided already; or not acknowledged (the database is away): the hold
                    // is found again in the next round if it is still pending.
                    409 | 503 => {}
                    status => panic!("deciding {id}: {status} {}", reply.text),
                }
            }
        }
        if found == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_load_on_three_nodes_with_one_killed_and_restarted_loses_nothing_and_does_nothing_twice()
{
    use holdpoint_core::store::{EventFilter, Store};
    use std::sync::atomic::{AtomicBool, Ordering};

    let Some(schema) = TempSchema::new().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let nodes = Nodes::new(dir.path(), &schema.url, Some(LEASE));
    let live = Live::default();
    let mut served = Vec::new();
    let mut urls = Vec::new();
    for _ in 0..3 {
        let (node, url) = nodes.start().await;
        served.push(Some(node));
        live.0.lock().unwrap().push(Some(url.clone()));
        urls.push(url);
    }
    let admin = nodes.admin(&urls[0]);
    let admin_token = std::fs::read_to_string(nodes.data.join("admin-token"))
        .unwrap()
        .trim()
        .to_owned();
    admin
        .post("/api/v1/worlds", json!({"name": "lab"}))
        .await
        .expect(201);

    // A turn on each node (each agent with an LLM of its own), waiting on a hold for a call
    // that appends a line to a file of its own.
    let mut turns = Vec::new();
    let mut llms = Vec::new();
    for (i, url) in urls.iter().enumerate() {
        let effect = dir.path().join(format!("effect-{i}"));
        let llm = ScriptedLlm::start(vec![
            Step::calls(vec![call(
                "c1",
                "shell_cmd",
                json!({"command": format!("echo x >> {}", effect.display())}),
            )]),
            Step::text("Done."),
        ])
        .await;
        let api = nodes.admin(url);
        let agent = format!("helper{i}");
        api.post(
            "/api/v1/worlds/lab/agents",
            json!({"name": agent, "llm": {"base_url": llm.base_url(), "model": "scripted"}}),
        )
        .await
        .expect(201);
        let chat = api
            .post("/api/v1/worlds/lab/chats", json!({"agent": agent}))
            .await
            .expect(201)["id"]
            .as_str()
            .unwrap()
            .to_owned();
        let turn = api
            .post(
                &format!("/api/v1/worlds/lab/chats/{chat}/messages"),
                json!({"text": "go"}),
            )
            .await
            .expect(202)["turn"]
            .as_str()
            .unwrap()
            .to_owned();
        turns.push((turn, effect));
        llms.push(llm);
    }
    pending(&admin, "shell_cmd", urls.len()).await;

    // Agents raise holds on the nodes in turn (a retry on another node keeps the request's
    // Idempotency-Key); two approvers decide them on the nodes in turn, racing each other.
    let mut agents = Vec::new();
    for i in 0..AGENTS {
        let token = admin
            .post(
                "/api/v1/tokens",
                json!({"name": format!("bot{i}"), "role": "agent", "world": "lab"}),
            )
            .await
            .expect(201)["token"]
            .as_str()
            .unwrap()
            .to_owned();
        agents.push(token);
    }
    let raised: Arc<Mutex<Vec<(String, bool)>>> = Arc::default();
    let mut raisers = tokio::task::JoinSet::new();
    for (i, token) in agents.into_iter().enumerate() {
        let (live, raised) = (live.clone(), raised.clone());
        raisers.spawn(async move {
            for n in 0..PER_AGENT {
                let item = if expires(n) {
                    json!({"kind": "approval", "tool": "expire_me", "arguments": {"agent": i, "n": n}, "deadline": "1s"})
                } else {
                    json!({"kind": "approval", "tool": "deploy", "arguments": {"agent": i, "n": n}})
                };
                let key = format!("bot{i}-{n}");
                let reply = live
                    .send(i + n, &token, |api| {
                        api.request(Method::POST, "/api/v1/worlds/lab/holds")
                            .header("Idempotency-Key", &key)
                            .json(&json!({"items": [item]}))
                    })
                    .await;
                assert!(matches!(reply.status, 200 | 201), "{}", reply.text);
                let id = reply.body["results"][0]["hold"]["id"].as_str().unwrap();
                raised.lock().unwrap().push((id.to_owned(), expires(n)));
            }
        });
    }
    // The turns' holds are decided only once a node died.
    let tools = Arc::new(Mutex::new(vec!["deploy"]));
    let answered: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let mut approvers = tokio::task::JoinSet::new();
    for first in 0..2 {
        approvers.spawn(approver(
            live.clone(),
            admin_token.clone(),
            first,
            tools.clone(),
            answered.clone(),
            stop.clone(),
        ));
    }

    // Mid-load, node 1 is killed (its turn waiting on its hold), then started again.
    raised_at_least(&raised, AGENTS * PER_AGENT / 3).await;
    live.set(1, None);
    served[1].take().unwrap().kill().await;
    tools.lock().unwrap().push("shell_cmd");
    let (restarted, url) = nodes.start().await;
    served[1] = Some(restarted);
    live.set(1, Some(url));
    while let Some(r) = raisers.join_next().await {
        r.unwrap();
    }

    // Every hold acknowledged is there and resolved as it should be; every turn finished.
    let raised = raised.lock().unwrap().clone();
    assert_eq!(raised.len(), AGENTS * PER_AGENT);
    for (id, expires) in &raised {
        let want = if *expires { "timed_out" } else { "approved" };
        status_becomes(&admin, id, want).await;
    }
    for (turn, effect) in &turns {
        let ended = ended_turn(&admin, turn).await;
        assert_eq!(ended["status"], "finished", "{ended}");
        // Its call ran once.
        assert_eq!(std::fs::read_to_string(effect).unwrap(), "x\n");
    }
    stop.store(true, Ordering::SeqCst);
    while let Some(r) = approvers.join_next().await {
        r.unwrap();
    }
    assert!(
        answered.lock().unwrap().values().all(|&n| n == 1),
        "a hold was answered 200 twice: {:?}",
        answered.lock().unwrap()
    );

    // The log: each hold raised once, resolved once, each deadline and reminder applied once.
    let store = schema.store().await;
    let mut seen: HashMap<String, HashMap<&'static str, usize>> = HashMap::new();
    for event in store.all_events(&EventFilter::default()).await.unwrap() {
        if let Some(hold) = &event.hold {
            *seen
                .entry(hold.to_string())
                .or_default()
                .entry(event.payload.type_name())
                .or_default() += 1;
        }
    }
    for (id, expires) in &raised {
        let counts = &seen[id];
        let count = |t: &str| counts.get(t).copied().unwrap_or(0);
        assert_eq!(count("hold.created"), 1, "{id}: {counts:?}");
        let (expired, decided) = if *expires { (1, 0) } else { (0, 1) };
        assert_eq!(count("hold.expired"), expired, "{id}: {counts:?}");
        assert_eq!(count("hold.decided"), decided, "{id}: {counts:?}");
        assert_eq!(count("hold.withdrawn"), 0, "{id}: {counts:?}");
        // Reminded once, half a second before its deadline.
        assert_eq!(count("hold.reminded"), expired, "{id}: {counts:?}");
    }
    for (id, counts) in &seen {
        let resolved: usize = ["hold.decided", "hold.expired", "hold.withdrawn"]
            .iter()
            .map(|t| counts.get(t).copied().unwrap_or(0))
            .sum();
        assert!(
            resolved <= 1,
            "{id} was resolved {resolved} times: {counts:?}"
        );
    }
    let out = super::holdpoint(&["audit", "verify", "--database-url", &schema.url]);
    assert_eq!(out.status.code(), Some(0), "{}", super::stderr(&out));
    for node in served.into_iter().flatten() {
        assert!(node.terminate().await.success());
    }
}

/// A PostgreSQL server of the test's own (initdb and pg_ctl into a temporary directory, on a
/// free port), to stop and start under load: the shared cluster is never restarted. As root
/// (CI), its programs run as the `postgres` user.
struct OwnPostgres {
    dir: tempfile::TempDir,
    bin: PathBuf,
    port: u16,
}

impl OwnPostgres {
    fn start() -> OwnPostgres {
        // The newest installed version (Debian keeps each under /usr/lib/postgresql/N).
        let bin = std::fs::read_dir("/usr/lib/postgresql")
            .expect("PostgreSQL's programs in /usr/lib/postgresql (scripts/test installs them)")
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .max()
            .map(|v| PathBuf::from(format!("/usr/lib/postgresql/{v}/bin")))
            .expect("a PostgreSQL version under /usr/lib/postgresql");
        let dir = tempfile::tempdir().unwrap();
        if rustix::process::getuid().is_root() {
            let chown = std::process::Command::new("chown")
                .arg("postgres")
                .arg(dir.path())
                .status()
                .unwrap();
            assert!(chown.success());
        }
        let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = free.local_addr().unwrap().port();
        drop(free);
        let pg = OwnPostgres { dir, bin, port };
        let data = pg.data();
        pg.run(
            "initdb",
            &["-D", &data, "-A", "trust", "-U", "postgres", "--no-sync"],
        );
        pg.up();
        pg
    }

    fn data(&self) -> String {
        self.dir.path().join("data").display().to_string()
    }

    fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// Runs one of its programs (as `postgres` when this is root), which must succeed.
    fn run(&self, program: &str, args: &[&str]) {
        let path = self.bin.join(program);
        let mut command = if rustix::process::getuid().is_root() {
            let mut c = std::process::Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(&path);
            c
        } else {
            std::process::Command::new(&path)
        };
        let out = command.args(args).output().unwrap();
        assert!(
            out.status.success(),
            "{program} {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn up(&self) {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1",
            self.port,
            self.dir.path().display()
        );
        let log = self.dir.path().join("log").display().to_string();
        self.run(
            "pg_ctl",
            &[
                "start",
                "-w",
                "-D",
                &self.data(),
                "-o",
                &options,
                "-l",
                &log,
            ],
        );
    }

    /// Stops it as a crash would (no shutdown checkpoint: it recovers from its WAL), then
    /// starts it again.
    fn crash_and_restart(&self) {
        self.run(
            "pg_ctl",
            &["stop", "-w", "-m", "immediate", "-D", &self.data()],
        );
        self.up();
    }
}

impl Drop for OwnPostgres {
    fn drop(&mut self) {
        let path = self.bin.join("pg_ctl");
        let data = self.data();
        let args = ["stop", "-m", "immediate", "-D", data.as_str()];
        let _ = if rustix::process::getuid().is_root() {
            std::process::Command::new("runuser")
                .args(["-u", "postgres", "--"])
                .arg(&path)
                .args(args)
                .output()
        } else {
            std::process::Command::new(&path).args(args).output()
        };
    }
}

/// Waits until `api`'s node says it is ready (its database reachable).
async fn ready(api: &Api) {
    eventually(|| async move {
        match api.try_send(api.request(Method::GET, "/readyz")).await {
            Ok(r) if r.status == 200 => Ok(()),
            _ => Err(format!("{} did not become ready", api.base())),
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_database_restarted_under_load_loses_nothing_acknowledged_and_the_nodes_recover() {
    use holdpoint_core::store::{EventFilter, Store};
    use std::sync::atomic::{AtomicBool, Ordering};

    // It needs PostgreSQL's programs, which come with the test database.
    if holdpoint_test_support::pg::test_database_url().is_none() {
        return;
    }
    const HOLDS: usize = 60;
    let pg = OwnPostgres::start();
    let dir = tempfile::tempdir().unwrap();
    let nodes = Nodes::new(dir.path(), &pg.url(), Some(LEASE));
    let live = Live::default();
    let mut served = Vec::new();
    let mut urls = Vec::new();
    for _ in 0..2 {
        let (node, url) = nodes.start().await;
        served.push(node);
        live.0.lock().unwrap().push(Some(url.clone()));
        urls.push(url);
    }
    let admin = nodes.admin(&urls[0]);
    let admin_token = std::fs::read_to_string(nodes.data.join("admin-token"))
        .unwrap()
        .trim()
        .to_owned();
    admin
        .post("/api/v1/worlds", json!({"name": "lab"}))
        .await
        .expect(201);
    let agent = admin
        .post(
            "/api/v1/tokens",
            json!({"name": "bot", "role": "agent", "world": "lab"}),
        )
        .await
        .expect(201)["token"]
        .as_str()
        .unwrap()
        .to_owned();

    // An agent raises holds on the nodes in turn, retrying a refused request (the database
    // is away) with its Idempotency-Key until it is acknowledged; approvers decide them.
    let raised: Arc<Mutex<Vec<String>>> = Arc::default();
    let raiser = {
        let (live, raised) = (live.clone(), raised.clone());
        tokio::spawn(async move {
            for n in 0..HOLDS {
                let key = format!("bot-{n}");
                // Sent again with its key while the database is away, until answered.
                let (live, agent, key) = (&live, &agent, &key);
                let reply = eventually(|| async move {
                    let reply = live
                        .send(n, agent, |api| {
                            api.request(Method::POST, "/api/v1/worlds/lab/holds")
                                .header("Idempotency-Key", key)
                                .json(&json!({"items": [{"kind": "approval", "tool": "deploy", "arguments": {"n": n}}]}))
                        })
                        .await;
                    if reply.status < 500 { Ok(reply) } else { Err(reply.text) }
                })
                .await;
                assert!(matches!(reply.status, 200 | 201), "{}", reply.text);
                let id = reply.body["results"][0]["hold"]["id"].as_str().unwrap();
                raised.lock().unwrap().push(id.to_owned());
            }
        })
    };
    let answered: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let approver = tokio::spawn(approver(
        live.clone(),
        admin_token.clone(),
        0,
        Arc::new(Mutex::new(vec!["deploy"])),
        answered.clone(),
        stop.clone(),
    ));

    // Mid-load the database crashes and comes back; the nodes are left alone.
    raised_at_least(&raised, HOLDS / 3).await;
    pg.crash_and_restart();
    raiser.await.unwrap();
    for url in &urls {
        ready(&nodes.admin(url)).await;
    }

    // Every hold acknowledged is there, and every acknowledged decision stands.
    let raised = raised.lock().unwrap().clone();
    assert_eq!(raised.len(), HOLDS);
    for id in &raised {
        status_becomes(&admin, id, "approved").await;
    }
    stop.store(true, Ordering::SeqCst);
    approver.await.unwrap();
    let answered = answered.lock().unwrap().clone();
    assert!(answered.values().all(|&n| n == 1), "{answered:?}");
    let store = holdpoint_store::PgStore::open(&pg.url()).await.unwrap();
    let mut decided: HashMap<String, usize> = HashMap::new();
    for event in store.all_events(&EventFilter::default()).await.unwrap() {
        if let (Some(hold), "hold.decided") = (&event.hold, event.payload.type_name()) {
            *decided.entry(hold.to_string()).or_default() += 1;
        }
    }
    for id in raised.iter().chain(answered.keys()) {
        assert_eq!(decided.get(id), Some(&1), "{id}");
    }

    // The nodes follow each other again: a hold decided on one answers a wait on the other.
    let raised_late = live
        .send(0, &admin_token, |api| {
            api.request(Method::POST, "/api/v1/worlds/lab/holds")
                .json(&json!({"items": [{"kind": "question", "question": "Still there?", "options": [{"id": "yes", "label": "Yes"}]}]}))
        })
        .await
        .expect(201);
    let late = raised_late["results"][0]["hold"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let waiting = {
        let on_1 = nodes.admin(&urls[1]);
        let late = late.clone();
        tokio::spawn(async move {
            on_1.get(&format!("/api/v1/holds/{late}/wait?timeout=20s"))
                .await
                .expect(200)
        })
    };
    wait_until_in_flight(&nodes.admin(&urls[1]), "/api/v1/holds/{hold}/wait").await;
    admin
        .post(
            &format!("/api/v1/holds/{late}/decision"),
            json!({"action": "answer", "options": ["yes"]}),
        )
        .await
        .expect(200);
    let waited = waiting.await.unwrap();
    assert_eq!(waited["decided"], true, "{waited}");

    let out = super::holdpoint(&["audit", "verify", "--database-url", &pg.url()]);
    assert_eq!(out.status.code(), Some(0), "{}", super::stderr(&out));
    for node in served {
        assert!(node.terminate().await.success());
    }
}

/// What a webhook receiver got: each request's `X-Holdpoint-Delivery` and body.
type Deliveries = Arc<Mutex<Vec<(String, Value)>>>;

/// A webhook receiver on a loopback port, answering every request 204 (keep-alive).
async fn hook_receiver() -> (String, Deliveries) {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let got: Deliveries = Arc::default();
    let deliveries = got.clone();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let got = got.clone();
            tokio::spawn(async move {
                let mut socket = BufReader::new(socket);
                loop {
                    let (mut length, mut delivery) = (0, String::new());
                    loop {
                        let mut line = String::new();
                        if socket.read_line(&mut line).await.unwrap_or(0) == 0 {
                            return;
                        }
                        let line = line.trim_end();
                        if line.is_empty() {
                            break;
                        }
                        if let Some((name, value)) = line.split_once(':') {
                            match name.to_ascii_lowercase().as_str() {
                                "content-length" => length = value.trim().parse().unwrap(),
                                "x-holdpoint-delivery" => delivery = value.trim().to_owned(),
                                _ => {}
                            }
                        }
                    }
                    let mut body = vec![0; length];
                    socket.read_exact(&mut body).await.unwrap();
                    got.lock()
                        .unwrap()
                        .push((delivery, serde_json::from_slice(&body).unwrap()));
                    let reply = b"HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n";
                    if socket.get_mut().write_all(reply).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (url, deliveries)
}

/// Waits until `deliveries` holds events of `count` distinct positions in the log.
async fn delivered(deliveries: &Deliveries, count: usize) {
    eventually(|| async move {
        let seqs: std::collections::HashSet<u64> = deliveries
            .lock()
            .unwrap()
            .iter()
            .map(|(_, e)| e["seq"].as_u64().unwrap())
            .collect();
        if seqs.len() >= count {
            Ok(())
        } else {
            Err(format!("{} of {count} events delivered", seqs.len()))
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn webhooks_are_sent_by_one_node_and_by_another_once_it_died() {
    let Some(schema) = TempSchema::new().await else {
        return;
    };
    const HOLDS: usize = 6;
    let dir = tempfile::tempdir().unwrap();
    let nodes = Nodes::new(dir.path(), &schema.url, Some(LEASE));
    // The first node takes the webhooks lease at its start, before the others exist.
    let mut served = Vec::new();
    let mut apis = Vec::new();
    for _ in 0..3 {
        let (node, url) = nodes.start().await;
        served.push(node);
        apis.push(nodes.admin(&url));
    }
    let (hook, deliveries) = hook_receiver().await;
    apis[1]
        .post("/api/v1/worlds", json!({"name": "lab"}))
        .await
        .expect(201);
    apis[1]
        .post(
            "/api/v1/worlds/lab/webhooks",
            json!({"url": hook, "events": ["hold.created", "hold.decided"]}),
        )
        .await
        .expect(201);
    let agent = apis[1]
        .post(
            "/api/v1/tokens",
            json!({"name": "bot", "role": "agent", "world": "lab"}),
        )
        .await
        .expect(201)["token"]
        .as_str()
        .unwrap()
        .to_owned();
    // Holds raised and decided on every node; each a created and a decided event.
    let cycle = |apis: Vec<Api>, n: usize| {
        let agent = agent.clone();
        async move {
            let on = &apis[n % apis.len()];
            let raised = on
                .as_token(&agent)
                .post(
                    "/api/v1/worlds/lab/holds",
                    json!({"items": [{"kind": "approval", "tool": "deploy", "arguments": {"n": n}}]}),
                )
                .await
                .expect(201);
            let id = raised["results"][0]["hold"]["id"]
                .as_str()
                .unwrap()
                .to_owned();
            apis[(n + 1) % apis.len()]
                .post(
                    &format!("/api/v1/holds/{id}/decision"),
                    json!({"action": "approve"}),
                )
                .await
                .expect(200);
        }
    };
    for n in 0..HOLDS {
        cycle(apis.clone(), n).await;
    }
    delivered(&deliveries, 2 * HOLDS).await;

    // The sending node dies; the others go on, and one of them takes the sending over.
    served.remove(0).kill().await;
    apis.remove(0);
    for n in HOLDS..2 * HOLDS {
        cycle(apis.clone(), n).await;
    }
    delivered(&deliveries, 4 * HOLDS).await;

    // Each event was scheduled once: one delivery id for it, whoever sent it.
    let mut ids: HashMap<u64, std::collections::HashSet<String>> = HashMap::new();
    for (id, event) in deliveries.lock().unwrap().iter() {
        ids.entry(event["seq"].as_u64().unwrap())
            .or_default()
            .insert(id.clone());
    }
    assert_eq!(ids.len(), 4 * HOLDS);
    assert!(ids.values().all(|d| d.len() == 1), "{ids:?}");
    for node in served {
        assert!(node.terminate().await.success());
    }
}
