//! The web interface in a real Chromium (Debian's `chromium`, driven through `chromedriver`
//! over WebDriver), against a real server on port 0 and its SQLite store.
//!
//! Each `Browser` is its own chromedriver and Chromium with a fresh profile, so two of them
//! are two people (or two devices) with separate cookies. Waiting is always on a condition
//! with a deadline, never a sleep. When a wait or a check fails, a screenshot of the page is
//! saved under `target/tmp/browser/` (the test binary's `CARGO_TARGET_TMPDIR`) before the
//! test panics.

mod accessibility;
mod chat;
mod email_link;
mod hold;
mod inbox;
mod live;
mod manage;
mod mcp_card;
mod nested;
mod notified;
mod policy;
mod signin;
mod triage;

use std::time::{Duration, Instant};

use fantoccini::Locator;
use fantoccini::actions::InputSource;
use fantoccini::elements::Element;
use holdpoint_test_support::chromium::Chromium;
use serde_json::{Value, json};

use super::TestServer;

/// How long a wait may take before the test fails: generous for a loaded two-core machine.
pub const PATIENCE: Duration = Duration::from_secs(15);

/// A phone's width, for the layout tests.
pub const PHONE: (u32, u32) = (375, 812);

/// The hold card of hold `id`.
pub fn card(id: &str) -> String {
    format!("article.hold[data-hold='{id}']")
}

/// The inbox's row of hold `id`.
pub fn row(id: &str) -> String {
    format!("li.row[data-hold='{id}']")
}

/// A world `lab`, an agent that raises holds in it, and an approver `alice` signed in on the
/// inbox.
pub async fn lab(t: &TestServer, name: &str) -> (super::Api, Browser) {
    t.world("lab").await;
    let agent = t.caller("deploy-bot", "agent", None).await;
    let alice = t.token("alice", "approver", None).await;
    let b = Browser::signed_in(t, name, &alice).await;
    b.wait_for("form.filters").await;
    (agent, b)
}

pub struct Browser {
    chromium: Chromium,
    pub base: String,
    name: String,
}

impl std::ops::Deref for Browser {
    type Target = Chromium;

    fn deref(&self) -> &Chromium {
        &self.chromium
    }
}

impl Browser {
    /// A browser with no session, at a desktop size. `name` names its screenshots.
    pub async fn open(t: &TestServer, name: &str) -> Browser {
        Self::sized(t, name, (1280, 900)).await
    }

    /// A browser whose window is `width` × `height` CSS pixels.
    pub async fn sized(t: &TestServer, name: &str, (width, height): (u32, u32)) -> Browser {
        let chromium = Chromium::start(width, height, PATIENCE)
            .await
            .unwrap_or_else(|e| panic!("{e} (scripts/test installs chromium and chromium-driver)"));
        Browser {
            chromium,
            base: t.server.url(),
            name: name.to_owned(),
        }
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
        let _ = self.chromium.client.close().await;
    }
}
