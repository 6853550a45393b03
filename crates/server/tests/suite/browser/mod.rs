//! The web interface in a real Chromium (Debian's `chromium`, driven through `chromedriver`
//! over WebDriver), against a real server on port 0 and its SQLite store.
//!
//! Each `Browser` is its own chromedriver and Chromium with a fresh profile, so two of them
//! are two people (or two devices) with separate cookies. Waiting is always on a condition
//! with a deadline, never a sleep. When a wait or a check fails, a screenshot of the page is
//! saved under `target/tmp/browser/` (the test binary's `CARGO_TARGET_TMPDIR`) before the
//! test panics.

// Helpers used by the tests of the areas to come are kept together here.
#![allow(dead_code)]

mod chat;
mod hold;
mod inbox;
mod manage;
mod signin;

use std::process::Stdio;
use std::time::{Duration, Instant};

use fantoccini::actions::InputSource;
use fantoccini::elements::Element;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use super::TestServer;

/// How long a wait may take before the test fails: generous for a loaded two-core machine.
pub const PATIENCE: Duration = Duration::from_secs(15);

/// Flags Chromium needs as root in a sandboxed machine with no outside network.
const CHROMIUM_FLAGS: &[&str] = &[
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
];

/// A phone's width, for the layout tests.
pub const PHONE: (u32, u32) = (375, 812);

pub struct Browser {
    pub client: Client,
    pub base: String,
    name: String,
    _driver: Child,
    _profile: TempDir,
}

impl Browser {
    /// A browser with no session, at a desktop size. `name` names its screenshots.
    pub async fn open(t: &TestServer, name: &str) -> Browser {
        Self::sized(t, name, (1280, 900)).await
    }

    /// A browser whose window is `width` × `height` CSS pixels.
    pub async fn sized(t: &TestServer, name: &str, (width, height): (u32, u32)) -> Browser {
        let mut driver = Command::new("chromedriver")
            .arg("--port=0")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| {
                panic!("chromedriver could not start ({e}); scripts/test installs Debian's chromium-driver")
            });
        let stdout = driver.stdout.take().unwrap();
        let mut lines = BufReader::new(stdout).lines();
        let port = loop {
            let line = tokio::time::timeout(PATIENCE, lines.next_line())
                .await
                .expect("chromedriver said nothing")
                .unwrap()
                .expect("chromedriver ended before it started");
            if let Some(rest) = line.split("started successfully on port ").nth(1) {
                break rest.trim_end_matches('.').trim().to_owned();
            }
        };
        // Keep reading so chromedriver never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        let profile = tempfile::tempdir().unwrap();
        let mut args: Vec<String> = CHROMIUM_FLAGS.iter().map(|f| f.to_string()).collect();
        args.push(format!("--user-data-dir={}", profile.path().display()));
        args.push(format!("--window-size={width},{height}"));
        let mut caps = serde_json::Map::new();
        caps.insert("browserName".into(), json!("chrome"));
        caps.insert(
            "goog:chromeOptions".into(),
            json!({"binary": "/usr/bin/chromium", "args": args}),
        );
        // A dialog (an XSS payload's `alert`, say) is left open, so the next command fails.
        caps.insert("unhandledPromptBehavior".into(), json!("ignore"));
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        let client = ClientBuilder::new(connector)
            .capabilities(caps)
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
            .expect("chromedriver would not start a Chromium session");
        let browser = Browser {
            client,
            base: t.server.url(),
            name: name.to_owned(),
            _driver: driver,
            _profile: profile,
        };
        // Headless windows may come out smaller than asked; the viewport is what matters.
        browser.client.set_window_size(width, height).await.unwrap();
        browser
    }

    /// A browser signed in with `token` through the sign-in link, on the inbox.
    pub async fn signed_in(t: &TestServer, name: &str, token: &str) -> Browser {
        let b = Self::open(t, name).await;
        b.sign_in(token).await;
        b
    }

    /// Follows the sign-in link and waits for the signed-in page.
    pub async fn sign_in(&self, token: &str) {
        self.goto(&format!("/login?token={token}")).await;
        self.wait_for("#who:not(:empty)").await;
    }

    /// Opens a path of the server (`/holds/…`).
    pub async fn goto(&self, path: &str) {
        self.client
            .goto(&format!("{}{path}", self.base))
            .await
            .unwrap_or_else(|e| panic!("{path} did not open: {e}"));
    }

    /// The path the page is at.
    pub async fn path(&self) -> String {
        self.client.current_url().await.unwrap().path().to_owned()
    }

    /// The first element matching `css`, once there is one.
    pub async fn wait_for(&self, css: &str) -> Element {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Ok(el) = self.client.find(Locator::Css(css)).await {
                return el;
            }
            if Instant::now() > deadline {
                self.fail(&format!("nothing matched {css:?}")).await;
            }
            self.pause().await;
        }
    }

    /// Waits until no element matches `css`.
    pub async fn wait_gone(&self, css: &str) {
        let script = format!("return document.querySelector({}) === null", json!(css));
        self.wait_until(&script, &format!("{css:?} to go")).await;
    }

    /// Waits until the element matching `css` has text containing `text`.
    pub async fn wait_text(&self, css: &str, text: &str) -> Element {
        let script = format!(
            "return [...document.querySelectorAll({})].some(e => e.textContent.includes({}))",
            json!(css),
            json!(text)
        );
        self.wait_until(&script, &format!("{css:?} to say {text:?}"))
            .await;
        self.wait_for(css).await
    }

    /// Waits until `script` (a function body) returns true.
    pub async fn wait_until(&self, script: &str, what: &str) {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Ok(Value::Bool(true)) = self.client.execute(script, vec![]).await {
                return;
            }
            if Instant::now() > deadline {
                self.fail(&format!("waited for {what}")).await;
            }
            self.pause().await;
        }
    }

    /// Runs `script` (a function body) in the page and returns what it returns.
    pub async fn eval(&self, script: &str) -> Value {
        match self.client.execute(script, vec![]).await {
            Ok(v) => v,
            Err(e) => self.fail(&format!("script failed: {e}")).await,
        }
    }

    /// Clicks the first element matching `css`, once there is one.
    pub async fn click(&self, css: &str) {
        let el = self.wait_for(css).await;
        if let Err(e) = el.click().await {
            self.fail(&format!("could not click {css:?}: {e}")).await;
        }
    }

    /// Types into the element matching `css` (after clearing it).
    pub async fn fill(&self, css: &str, text: &str) {
        let el = self.wait_for(css).await;
        el.clear().await.unwrap();
        if let Err(e) = el.send_keys(text).await {
            self.fail(&format!("could not type into {css:?}: {e}"))
                .await;
        }
    }

    /// Presses keys on whatever has focus (`fantoccini::key::Key` values as chars, or text).
    pub async fn keys(&self, keys: &str) {
        let actions = fantoccini::actions::KeyActions::new("keys".into());
        let actions = keys.chars().fold(actions, |a, c| {
            a.then(fantoccini::actions::KeyAction::Down { value: c })
                .then(fantoccini::actions::KeyAction::Up { value: c })
        });
        if let Err(e) = self.client.perform_actions(actions).await {
            self.fail(&format!("could not press {keys:?}: {e}")).await;
        }
    }

    /// Fails the test unless `ok`, with a screenshot.
    pub async fn check(&self, ok: bool, what: &str) {
        if !ok {
            self.fail(what).await;
        }
    }

    /// Saves a screenshot of the page and fails the test.
    pub async fn fail(&self, what: &str) -> ! {
        let shot = self.screenshot("failure").await;
        panic!("{}: {what} (screenshot: {shot})", self.name);
    }

    /// Saves a screenshot under the test's output directory; returns its path.
    pub async fn screenshot(&self, label: &str) -> String {
        let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("browser");
        let path = dir.join(format!("{}-{label}.png", self.name));
        match self.client.screenshot().await {
            Ok(png) => {
                let _ = std::fs::create_dir_all(&dir);
                let _ = std::fs::write(&path, png);
                path.display().to_string()
            }
            Err(e) => format!("none ({e})"),
        }
    }

    async fn pause(&self) {
        // Polling the page is the wait: WebDriver has no event to wait on.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    /// Ends the Chromium session.
    pub async fn close(self) {
        let _ = self.client.close().await;
    }
}
