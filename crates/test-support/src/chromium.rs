//! A real Chromium (Debian's `chromium`), driven over WebDriver through its `chromedriver`,
//! for the web interface's tests and the inbox benchmark. Each one is its own chromedriver on
//! a free port and its own Chromium with a fresh profile, so two are two separate browsers.

use std::process::Stdio;
use std::time::Duration;

use fantoccini::{Client, ClientBuilder};
use serde_json::json;
use tempfile::TempDir;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// The flags Chromium needs to run headless as root in a machine with no outside network
/// (without the networking ones it floods the closed network with connections).
pub const FLAGS: &[&str] = &[
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

pub struct Chromium {
    pub client: Client,
    /// Killed when this is dropped, and Chromium with it.
    _driver: Child,
    _profile: TempDir,
}

impl Chromium {
    /// A browser whose window is `width` × `height`; `patience` bounds chromedriver's start.
    /// A dialog (an injected `alert`, say) is left open, so the next command fails.
    pub async fn start(width: u32, height: u32, patience: Duration) -> Result<Chromium, String> {
        // Now and then, on a loaded machine, chromedriver exits before it listens; another
        // one is started then, twice at most.
        let mut ended = Vec::new();
        let (driver, port) = loop {
            match Self::driver(patience).await? {
                Ok(started) => break started,
                Err(why) if ended.len() < 2 => ended.push(why),
                Err(why) => {
                    ended.push(why);
                    return Err(format!(
                        "chromedriver ended before it started, three times: {}",
                        ended.join("; ")
                    ));
                }
            }
        };
        let profile = tempfile::tempdir().map_err(|e| e.to_string())?;
        let mut args: Vec<String> = FLAGS.iter().map(|f| f.to_string()).collect();
        args.push(format!("--user-data-dir={}", profile.path().display()));
        args.push(format!("--window-size={width},{height}"));
        let mut caps = serde_json::Map::new();
        caps.insert("browserName".into(), json!("chrome"));
        caps.insert(
            "goog:chromeOptions".into(),
            json!({"binary": "/usr/bin/chromium", "args": args}),
        );
        caps.insert("unhandledPromptBehavior".into(), json!("ignore"));
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        let client = ClientBuilder::new(connector)
            .capabilities(caps)
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
            .map_err(|e| format!("chromedriver would not start a Chromium session: {e}"))?;
        // Headless windows may come out smaller than asked; the viewport is what matters.
        client
            .set_window_size(width, height)
            .await
            .map_err(|e| e.to_string())?;
        Ok(Chromium {
            client,
            _driver: driver,
            _profile: profile,
        })
    }

    /// A chromedriver on a free port, and the port; `Ok(Err(why))` when it ended before it
    /// listened (`why`: its exit status and what it wrote on standard error).
    async fn driver(patience: Duration) -> Result<Result<(Child, String), String>, String> {
        let mut driver = Command::new("chromedriver")
            .arg("--port=0")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| {
                format!("chromedriver could not start ({e}); Debian's chromium-driver installs it")
            })?;
        let stdout = driver.stdout.take().ok_or("chromedriver has no output")?;
        let stderr = driver
            .stderr
            .take()
            .ok_or("chromedriver has no error output")?;
        // Read to the end, so chromedriver never blocks on a full pipe; kept for a failure.
        let said = tokio::spawn(async move {
            let mut said = Vec::new();
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                said.push(line);
            }
            said.join(" / ")
        });
        let mut lines = BufReader::new(stdout).lines();
        loop {
            let line = tokio::time::timeout(patience, lines.next_line())
                .await
                .map_err(|_| "chromedriver said nothing")?
                .map_err(|e| format!("chromedriver's output: {e}"))?;
            let Some(line) = line else {
                let status = driver.wait().await.map_err(|e| e.to_string())?;
                let said = tokio::time::timeout(patience, said)
                    .await
                    .ok()
                    .and_then(Result::ok)
                    .unwrap_or_default();
                return Ok(Err(format!("{status}, saying {said:?}")));
            };
            if let Some(rest) = line.split("started successfully on port ").nth(1) {
                let port = rest.trim_end_matches('.').trim().to_owned();
                tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
                return Ok(Ok((driver, port)));
            }
        }
    }
}
