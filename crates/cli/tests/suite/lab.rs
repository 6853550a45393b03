//! A real server (in this process, on port 0, on SQLite in a temporary directory) with a world
//! `lab` whose agent `helper` talks to a scripted LLM; and `holdpoint` run against it, in a
//! pseudo-terminal or with pipes.

use std::io::{Read, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};

use holdpoint_server::{Server, Settings};
use holdpoint_test_support::PATIENCE;
use holdpoint_test_support::http::Api;
use holdpoint_test_support::llm::{ScriptedLlm, Step};
use portable_pty::{CommandBuilder, PtySize, native_pty_system};
use serde_json::{Value, json};
use tokio::sync::watch;

pub struct Lab {
    pub server: Server,
    pub llm: ScriptedLlm,
    pub admin: Api,
    pub token: String,
    pub dir: tempfile::TempDir,
}

impl Lab {
    pub async fn start(steps: Vec<Step>) -> Lab {
        Lab::with_policy(steps, None).await
    }

    /// With a policy file of this text.
    pub async fn with_policy(steps: Vec<Step>, policy: Option<&str>) -> Lab {
        Lab::with_settings(steps, policy, Settings::default()).await
    }

    /// With a policy file of this text, and these settings (the address and the policy file
    /// aside).
    pub async fn with_settings(
        steps: Vec<Step>,
        policy: Option<&str>,
        mut settings: Settings,
    ) -> Lab {
        let dir = tempfile::tempdir().unwrap();
        settings.server.bind = "127.0.0.1:0".parse().unwrap();
        if let Some(text) = policy {
            let file = dir.path().join("policy.toml");
            std::fs::write(&file, text).unwrap();
            settings.policy.file = Some(file);
        }
        let server = Server::start(&dir.path().join("data"), &settings)
            .await
            .unwrap();
        let token = server.admin_token().unwrap().to_owned();
        let admin = Api::new(&server.url(), Some(&token));
        let llm = ScriptedLlm::start(steps).await;
        admin
            .post("/api/v1/worlds", json!({"name": "lab"}))
            .await
            .expect(201);
        admin
            .post(
                "/api/v1/worlds/lab/agents",
                json!({"name": "helper", "llm": {"base_url": llm.base_url(), "model": "scripted"}}),
            )
            .await
            .expect(201);
        Lab {
            server,
            llm,
            admin,
            token,
            dir,
        }
    }

    /// A token of this role, named `name`.
    pub async fn token(&self, name: &str, role: &str) -> String {
        self.admin
            .post("/api/v1/tokens", json!({"name": name, "role": role}))
            .await
            .expect(201)["token"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// `holdpoint ARGS` against this server, as a child with pipes.
    pub fn command(&self, args: &[&str], token: &str) -> tokio::process::Command {
        let mut c = tokio::process::Command::new(env!("CARGO_BIN_EXE_holdpoint"));
        c.args(args)
            .env("HOLDPOINT_SERVER", self.server.url())
            .env("HOLDPOINT_TOKEN", token)
            .env("HOLDPOINT_DATA", self.dir.path().join("elsewhere"))
            .env_remove("HOLDPOINT_CONFIG")
            .env_remove("HOLDPOINT_WORLD")
            .kill_on_drop(true);
        c
    }

    /// `holdpoint ARGS` against this server, in a pseudo-terminal.
    pub fn terminal(&self, args: &[&str], env: &[(&str, &str)]) -> Terminal {
        let mut c = CommandBuilder::new(env!("CARGO_BIN_EXE_holdpoint"));
        c.args(args);
        c.env("HOLDPOINT_SERVER", self.server.url());
        c.env("HOLDPOINT_TOKEN", &self.token);
        c.env("HOLDPOINT_DATA", self.dir.path().join("elsewhere"));
        c.env("TERM", "dumb");
        for v in ["HOLDPOINT_CONFIG", "HOLDPOINT_WORLD", "EDITOR", "VISUAL"] {
            c.env_remove(v);
        }
        for (k, v) in env {
            c.env(k, v);
        }
        c.cwd(self.dir.path());
        Terminal::spawn(c)
    }

    /// The first pending hold, once there is one.
    pub async fn pending_hold(&self) -> Value {
        self.first_listed("/api/v1/holds").await
    }

    /// The first hold raised, pending or not, once there is one.
    pub async fn first_hold(&self) -> Value {
        self.first_listed("/api/v1/holds?status=any").await
    }

    /// The first hold the listing `list` has, once there is one: the stream of events is
    /// opened first, so a hold raised while the list is read is seen on it.
    async fn first_listed(&self, list: &str) -> Value {
        let mut events = self.admin.events("", None).await;
        let page = self.admin.get(list).await.expect(200);
        if let Some(h) = page["items"].get(0) {
            return h.clone();
        }
        let created = events.next_of("hold.created").await;
        created.data["payload"]["hold"].clone()
    }

    pub async fn hold(&self, id: &str) -> Value {
        self.admin
            .get(&format!("/api/v1/holds/{id}"))
            .await
            .expect(200)["hold"]
            .clone()
    }

    pub fn data(&self) -> &Path {
        self.dir.path()
    }
}

/// A child process on a pseudo-terminal, and everything it printed.
pub struct Terminal {
    child: Option<Box<dyn portable_pty::Child + Send + Sync>>,
    writer: Box<dyn Write + Send>,
    output: Arc<Mutex<String>>,
    grew: watch::Receiver<usize>,
    /// How far `expect` has read.
    cursor: usize,
    _master: Box<dyn portable_pty::MasterPty + Send>,
}

impl Terminal {
    fn spawn(command: CommandBuilder) -> Terminal {
        let pair = native_pty_system()
            .openpty(PtySize {
                rows: 50,
                cols: 200,
                pixel_width: 0,
                pixel_height: 0,
            })
            .unwrap();
        let child = pair.slave.spawn_command(command).unwrap();
        drop(pair.slave);
        let mut reader = pair.master.try_clone_reader().unwrap();
        let writer = pair.master.take_writer().unwrap();
        let output = Arc::new(Mutex::new(String::new()));
        let (grow, grew) = watch::channel(0);
        let out = output.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n @ 1..) = reader.read(&mut buf) {
                let mut o = out.lock().unwrap();
                o.push_str(&String::from_utf8_lossy(&buf[..n]).replace('\r', ""));
                let _ = grow.send(o.len());
            }
        });
        Terminal {
            child: Some(child),
            writer,
            output,
            grew,
            cursor: 0,
            _master: pair.master,
        }
    }

    /// Everything printed so far.
    pub fn transcript(&self) -> String {
        self.output.lock().unwrap().clone()
    }

    /// Waits until `needle` is printed (after what earlier calls found); returns the output
    /// up to and including it.
    pub async fn expect(&mut self, needle: &str) -> String {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            {
                let out = self.output.lock().unwrap();
                if let Some(at) = out[self.cursor..].find(needle) {
                    let end = self.cursor + at + needle.len();
                    let seen = out[self.cursor..end].to_owned();
                    self.cursor = end;
                    return seen;
                }
            }
            if tokio::time::timeout_at(deadline, self.grew.changed())
                .await
                .is_err()
            {
                panic!(
                    "{needle:?} was not printed in time; the output after the last match:\n{}",
                    &self.transcript()[self.cursor..]
                );
            }
        }
    }

    /// Types a line and Enter.
    pub fn line(&mut self, text: &str) {
        self.writer
            .write_all(format!("{text}\r").as_bytes())
            .unwrap();
        self.writer.flush().unwrap();
    }

    pub fn ctrl_c(&mut self) {
        self.writer.write_all(b"\x03").unwrap();
        self.writer.flush().unwrap();
    }

    pub fn ctrl_d(&mut self) {
        self.writer.write_all(b"\x04").unwrap();
        self.writer.flush().unwrap();
    }

    /// Waits for the child to exit; its exit code.
    pub async fn exit_code(mut self) -> u32 {
        let mut child = self.child.take().unwrap();
        let mut killer = child.clone_killer();
        let waited = tokio::task::spawn_blocking(move || child.wait());
        match tokio::time::timeout(PATIENCE, waited).await {
            Ok(status) => status.unwrap().unwrap().exit_code(),
            Err(_) => {
                let _ = killer.kill();
                panic!(
                    "the process did not exit; it printed:\n{}",
                    self.transcript()
                );
            }
        }
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.kill();
        }
    }
}
