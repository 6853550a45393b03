//! The inbox as a triage tool: a burst of thousands of holds leaves the tab responsive (the
//! list stays a page long and counts the rest), two panes on a desktop with holds decided by
//! the keyboard alone, a phone's width, the true counts, and the first-run page.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{Browser, PHONE, row};
use crate::suite::{ASK_ALL, Api, TestServer, approval, held, question, raise};

/// A laptop's screen, for the layout.
const LAPTOP: (u32, u32) = (1366, 800);
/// The inbox's page size.
const PAGE: usize = 50;

/// A server whose agents may keep any number of holds pending.
async fn roomy() -> TestServer {
    TestServer::with(ASK_ALL, |s| {
        s.limits.pending_holds_per_token = u64::MAX;
        s.limits.pending_holds_per_world = u64::MAX;
        s.limits.requests_per_second = u32::MAX;
        s.limits.request_burst = u32::MAX;
    })
    .await
}

async fn pending_count(t: &TestServer) -> u64 {
    t.api.get("/api/v1/holds/counts").await.expect(200)["pending"]
        .as_u64()
        .unwrap()
}

/// `n` approvals raised as `agent` in `world`, in batches of `size`, `parallel` requests at
/// a time.
async fn burst(agent: &Api, world: &str, n: usize, size: usize, parallel: usize) {
    let mut started = 0;
    while started < n {
        let mut requests = Vec::new();
        for _ in 0..parallel {
            if started >= n {
                break;
            }
            let items: Vec<Value> = (started..(started + size).min(n))
                .map(|i| approval("shell_cmd", json!({"command": format!("job {i}")})))
                .collect();
            started += items.len();
            requests.push(raise(agent, world, items));
        }
        futures_util::future::join_all(requests).await;
    }
}

#[tokio::test]
async fn a_burst_of_thousands_of_holds_leaves_the_inbox_responsive_and_counted() {
    const N: usize = 3000;
    let t = roomy().await;
    t.world("lab").await;
    let agent = t.caller("deploy-bot", "agent", None).await;
    let alice = t.token("alice", "approver", None).await;
    let b = Browser::sized(&t, "triage-burst", LAPTOP).await;
    b.sign_in(&alice).await;
    b.wait_for(".first-run:not([hidden])").await;

    // The page records its longest task (a task that kept it from answering input).
    b.eval(
        "window.longest = 0; new PerformanceObserver((list) => { for (const e of list.getEntries()) \
         window.longest = Math.max(window.longest, e.duration); }).observe({type: 'longtask'}); \
         return true",
    )
    .await;
    // While the holds are raised, the page keeps answering: a script's round trip through
    // WebDriver, measured again and again. The bounds are generous, for a loaded two-core
    // machine running other browsers beside this one; drawing every hold took seconds.
    let raising = burst(&agent, "lab", N, 50, 4);
    let probing = async {
        let mut slowest = Duration::ZERO;
        let mut probes = 0;
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let started = Instant::now();
            let shown = b
                .eval("return document.querySelectorAll('li.row').length")
                .await;
            slowest = slowest.max(started.elapsed());
            probes += 1;
            // Never more than a page and one batch drawn, whatever arrives.
            let shown = shown.as_u64().unwrap() as usize;
            assert!(shown <= 2 * PAGE, "{shown} rows drawn");
            if pending_count(&t).await == N as u64 || Instant::now() > deadline {
                return (slowest, probes);
            }
        }
    };
    let ((), (slowest, probes)) = tokio::join!(raising, probing);
    assert!(
        slowest < Duration::from_secs(5),
        "the page took {slowest:?} to answer a script during the burst ({probes} probes)"
    );
    let longest = b.eval("return window.longest").await.as_f64().unwrap();
    assert!(
        longest < 1000.0,
        "the page was busy for {longest} ms at a stretch"
    );
    // The rest are counted, truly: the header and title say every pending hold, the list
    // how many arrived that it does not show.
    b.wait_until(
        &format!(
            "return document.getElementById('pending-count').textContent === '{N}' \
             && document.title === '({N}) Holdpoint'"
        ),
        "the header to count every hold",
    )
    .await;
    let drawn = b
        .eval("return document.querySelectorAll('li.row').length")
        .await
        .as_u64()
        .unwrap() as usize;
    assert!(drawn <= 2 * PAGE, "{drawn} rows drawn");
    b.wait_text(
        "button.arrivals:not([hidden])",
        &format!("{} new holds — show", N - drawn),
    )
    .await;
    // Still answering keys: j moves at once.
    let first = b
        .eval("return document.querySelector('li.row[aria-current=true]').dataset.hold")
        .await;
    b.keys("j").await;
    b.wait_until(
        &format!(
            "return document.querySelector('li.row[aria-current=true]').dataset.hold !== {first}"
        ),
        "j to move",
    )
    .await;
    // "Show" reads the newest page again.
    b.click("button.arrivals").await;
    b.wait_for("button.arrivals[hidden]").await;
    b.wait_until(
        &format!("return document.querySelectorAll('li.row').length === {PAGE}"),
        "the first page",
    )
    .await;
    // The newest batch first, its holds in the order they were raised; the first selected.
    let newest = t
        .api
        .get("/api/v1/holds?order=newest&limit=1")
        .await
        .expect(200)["items"][0]["batch"]
        .clone();
    b.wait_until(
        &format!(
            "const first = document.querySelector('li.row'); \
             return first.matches('[aria-current=true]') && first.dataset.batch === {newest}"
        ),
        "the newest batch's first hold to be current",
    )
    .await;
    b.close().await;
}

/// The page's layout facts at a desktop size.
const LAYOUT: &str = "
    const list = document.querySelector('.queue').getBoundingClientRect();
    const card = document.querySelector('.detail').getBoundingClientRect();
    const rows = [...document.querySelectorAll('li.row')];
    const fields = [...document.querySelectorAll('form.filters > *')];
    const kind = document.getElementById('filter-kind');
    const cut = kind.getBoundingClientRect().width;
    kind.style.flex = 'none'; kind.style.width = 'auto'; kind.style.maxWidth = 'none';
    const natural = kind.getBoundingClientRect().width;
    kind.style.flex = ''; kind.style.width = ''; kind.style.maxWidth = '';
    return {
      side_by_side: card.left >= list.right && Math.abs(card.top - list.top) < 60,
      above_the_fold: rows.filter(r => r.getBoundingClientRect().bottom <= innerHeight).length,
      one_line_rows: rows.every(r => r.getBoundingClientRect().height < 48),
      filter_lines: new Set(fields.map(f => Math.round(f.getBoundingClientRect().top / 10))).size,
      kind_cut: natural - cut > 1,
      sideways: document.documentElement.scrollWidth > innerWidth,
    };";

#[tokio::test]
async fn two_panes_and_twenty_holds_decided_with_the_keyboard_alone() {
    let t = TestServer::start().await;
    t.world("lab").await;
    let agent = t.caller("deploy-bot", "agent", None).await;
    let mut ids = Vec::new();
    for i in 0..20 {
        let mut item = approval("shell_cmd", json!({"command": format!("deploy {i}")}));
        if i == 0 {
            item = approval("fs__rm", json!({"path": "/srv/old"}));
            item["annotations"] = json!({"destructive": true});
            item["mcp"] = json!({"server": "fs", "tool": "rm"});
        }
        ids.push(held(&raise(&agent, "lab", vec![item]).await, 0));
    }
    // Newest first.
    ids.reverse();
    let alice = t.token("alice", "approver", None).await;
    let b = Browser::sized(&t, "triage-keys", LAPTOP).await;
    b.sign_in(&alice).await;
    b.wait_for(&row(&ids[19])).await;
    b.wait_for(&format!(".detail article.hold[data-hold='{}']", ids[0]))
        .await;
    // The risk marks of the MCP server's declaration.
    b.wait_text(&format!("{} .marks .risk", row(&ids[19])), "destructive")
        .await;
    b.screenshot("laptop").await;
    let layout = b.eval(LAYOUT).await;
    assert_eq!(layout["side_by_side"], true, "{layout}");
    assert!(layout["above_the_fold"].as_u64().unwrap() >= 12, "{layout}");
    assert_eq!(layout["one_line_rows"], true, "{layout}");
    assert_eq!(
        layout["filter_lines"], 1,
        "the filters on one line: {layout}"
    );
    assert_eq!(
        layout["kind_cut"], false,
        "the kind filter is cut off: {layout}"
    );
    assert_eq!(layout["sideways"], false, "{layout}");

    // ? shows the keys.
    b.keys("?").await;
    b.wait_for(".keys-help:not([hidden])").await;
    b.keys("?").await;
    b.wait_for(".keys-help[hidden]").await;

    // x selects the first five (x, then j), A approves them in one go.
    for _ in 0..5 {
        b.keys("xj").await;
    }
    b.wait_text(".picked-line", "5 selected").await;
    b.keys("A").await;
    for id in &ids[..5] {
        b.wait_text(
            &format!("{} .outcome-mark", row(id)),
            "Approved once by alice",
        )
        .await;
    }
    // The next open hold is the current one; a approves, d and Enter deny (with a reason
    // typed on the way), e opens the editor.
    b.wait_until(
        &format!(
            "return document.activeElement.matches(\"{}[aria-current=true]\")",
            row(&ids[5])
        ),
        "the sixth hold to be current",
    )
    .await;
    for i in 5..20 {
        let keys = match i % 3 {
            0 => "a".to_owned(),
            1 => "d\u{E007}".to_owned(),
            _ => "dnot now\u{E007}".to_owned(),
        };
        b.keys(&keys).await;
        if i < 19 {
            b.wait_until(
                &format!(
                    "return document.activeElement.matches(\"{}[aria-current=true]\")",
                    row(&ids[i + 1])
                ),
                &format!("hold {} to be current", i + 1),
            )
            .await;
        }
    }
    for (i, id) in ids.iter().enumerate() {
        let hold = wait_decided(&t, id).await;
        let outcome = &hold["outcome"];
        let expected = if i < 5 || i % 3 == 0 {
            "approved"
        } else {
            "denied"
        };
        assert_eq!(outcome["status"], expected, "hold {i}: {hold}");
        assert_eq!(outcome["decided_by"], json!(["alice"]));
        if i >= 5 && i % 3 == 2 {
            assert_eq!(outcome["reason"], "not now");
        }
        if expected == "approved" {
            assert_eq!(outcome["scope"], "once");
        }
    }
    // e opens the editor of the current hold; keys typed there are text.
    let last = held(
        &raise(
            &agent,
            "lab",
            vec![approval("shell_cmd", json!({"command": "make"}))],
        )
        .await,
        0,
    );
    b.click(&row(&last)).await;
    b.keys("e").await;
    b.wait_until(
        "return document.activeElement.matches('.detail textarea[name=arguments]')",
        "e to open the editor",
    )
    .await;
    b.keys("a").await;
    assert_eq!(
        t.api
            .get(&format!("/api/v1/holds/{last}"))
            .await
            .expect(200)["hold"]["status"],
        "pending"
    );
    // / goes to the filters.
    b.client
        .execute(
            "document.querySelector('li.row[aria-current=true]').focus()",
            vec![],
        )
        .await
        .unwrap();
    b.keys("/").await;
    b.wait_until(
        "return document.activeElement.id === 'filter-tool'",
        "/ to go to the filters",
    )
    .await;
    b.close().await;
}

/// The hold once it is decided (the keyboard's decisions are sent without waiting).
async fn wait_decided(t: &TestServer, id: &str) -> Value {
    let deadline = Instant::now() + super::PATIENCE;
    loop {
        let hold = t.api.get(&format!("/api/v1/holds/{id}")).await.expect(200)["hold"].clone();
        if hold["status"] != "pending" || Instant::now() > deadline {
            return hold;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn on_a_phone_the_list_then_the_card_and_nothing_scrolls_sideways() {
    let t = TestServer::start().await;
    t.world("lab").await;
    let agent = t.caller("deploy-bot", "agent", None).await;
    let long = "x".repeat(300);
    let mut ids = Vec::new();
    for command in [
        "ls -la /srv/a-rather-long-directory-name/and/more",
        long.as_str(),
    ] {
        ids.push(held(
            &raise(
                &agent,
                "lab",
                vec![approval("shell_cmd", json!({"command": command}))],
            )
            .await,
            0,
        ));
    }
    ids.push(held(
        &raise(
            &agent,
            "lab",
            vec![question("Roll back the release?", &["yes", "no"])],
        )
        .await,
        0,
    ));
    let b = Browser::sized(&t, "triage-phone", PHONE).await;
    b.sign_in(&t.token("alice", "approver", None).await).await;
    for id in &ids {
        b.wait_for(&row(id)).await;
    }
    b.wait_for(".detail article.hold").await;
    b.screenshot("phone").await;
    let facts = b
        .eval(
            "const header = [...document.querySelector('header').children]\
               .filter(e => e.getBoundingClientRect().width > 1);\
             const list = document.querySelector('.queue').getBoundingClientRect();\
             const card = document.querySelector('.detail').getBoundingClientRect();\
             return {\
               sideways: document.documentElement.scrollWidth > innerWidth,\
               header_rows: new Set(header.map(e => Math.round(e.getBoundingClientRect().top / 10))).size,\
               card_below: card.top >= list.bottom,\
             }",
        )
        .await;
    assert_eq!(facts["sideways"], false, "{facts}");
    assert_eq!(facts["header_rows"], 1, "the header in one row: {facts}");
    assert_eq!(facts["card_below"], true, "{facts}");
    // A tap shows the hold's card.
    b.click(&row(&ids[0])).await;
    b.wait_for(&format!(".detail article.hold[data-hold='{}']", ids[0]))
        .await;
    assert_eq!(
        b.eval("return document.documentElement.scrollWidth > innerWidth")
            .await,
        json!(false)
    );
    b.close().await;
}

#[tokio::test]
async fn the_counts_are_true_by_world_and_kind_and_a_batch_split_across_pages_is_decided_whole() {
    let t = TestServer::start().await;
    let lab = t.world("lab").await;
    let prod = t.world("prod").await;
    let agent = t.caller("deploy-bot", "agent", None).await;
    for _ in 0..3 {
        raise(&agent, "lab", vec![approval("deploy", json!({}))]).await;
    }
    for _ in 0..2 {
        raise(&agent, "lab", vec![question("Go?", &["y", "n"])]).await;
    }
    for _ in 0..4 {
        raise(&agent, "prod", vec![approval("deploy", json!({}))]).await;
    }
    // The API: every open hold, by world and kind; a credential of one world counts its own.
    let counts = t.api.get("/api/v1/holds/counts").await.expect(200);
    assert_eq!(counts["pending"], 9, "{counts}");
    let (lab, prod) = (lab["id"].as_str().unwrap(), prod["id"].as_str().unwrap());
    let mut expected = vec![
        json!({"world": lab, "kind": "approval", "pending": 3}),
        json!({"world": lab, "kind": "question", "pending": 2}),
        json!({"world": prod, "kind": "approval", "pending": 4}),
    ];
    expected.sort_by_key(|v| (v["world"].to_string(), v["kind"].to_string()));
    assert_eq!(counts["worlds"], json!(expected));
    let prod_only = t.caller("pat", "approver", Some("prod")).await;
    let counts = prod_only.get("/api/v1/holds/counts").await.expect(200);
    assert_eq!(counts["pending"], 4, "{counts}");
    agent.get("/api/v1/holds/counts").await.expect(403);

    let b = Browser::sized(&t, "triage-counts", LAPTOP).await;
    b.sign_in(&t.token("alice", "approver", None).await).await;
    b.wait_until(
        "return document.getElementById('pending-count').textContent === '9'",
        "the header's count",
    )
    .await;
    let options = "return [...document.querySelectorAll('#filter-world option, #filter-kind option')]\
                   .map(o => o.textContent)";
    b.wait_until(
        &format!("return JSON.stringify((() => {{ {options} }})()).includes('prod (4)')"),
        "the world filter's counts",
    )
    .await;
    assert_eq!(
        b.eval(options).await,
        json!([
            "All worlds (9)",
            "lab (5)",
            "prod (4)",
            "Approvals and questions (9)",
            "Approvals (7)",
            "Questions (2)"
        ])
    );

    // A batch of 60, newest: the first page holds 50 of it, the inbox shows all of it, with
    // its true size, and "Approve all once" decides every one.
    let items: Vec<Value> = (0..60)
        .map(|i| approval("shell_cmd", json!({"command": format!("step {i}")})))
        .collect();
    let created = raise(&agent, "lab", items).await;
    let batch = created["batch"].as_str().unwrap().to_owned();
    b.goto("/").await;
    let group = format!("li.batch[data-batch='{batch}']");
    b.wait_text(
        &format!("{group} .batch-title"),
        "60 holds asked together by deploy-bot (60 still open)",
    )
    .await;
    b.wait_until(
        "return document.getElementById('pending-count').textContent === '69'",
        "the header's count",
    )
    .await;
    b.click(&format!("{group} [data-batch-decision=approve]"))
        .await;
    b.wait_text(&format!("{group} .batch-title"), "(0 still open)")
        .await;
    assert_eq!(
        b.eval(&format!(
            "return document.querySelector(\"{group} .batch-error\").textContent"
        ))
        .await,
        json!("")
    );
    for i in 0..60 {
        let id = held(&created, i);
        let hold = t.api.get(&format!("/api/v1/holds/{id}")).await.expect(200);
        assert_eq!(hold["hold"]["status"], "approved", "{i}");
    }
    b.wait_until(
        "return document.getElementById('pending-count').textContent === '9'",
        "the count after the batch",
    )
    .await;
    b.close().await;
}

#[tokio::test]
async fn the_first_run_inbox_says_what_a_hold_is_and_how_to_raise_one() {
    let t = TestServer::start().await;
    t.world("lab").await;
    let b = Browser::sized(&t, "triage-first-run", PHONE).await;
    b.sign_in(&t.token("alice", "approver", None).await).await;
    let page = b.wait_for(".first-run:not([hidden])").await;
    let text = page.text().await.unwrap();
    for words in [
        "A hold is",
        "curl",
        "holdpoint ask",
        "holdpoint mcp",
        "Chats",
    ] {
        assert!(text.contains(words), "{words:?} is not in {text:?}");
    }
    // Names go with roles: no role-less element carries an aria-label.
    let labelled = b
        .eval(
            "return [...document.querySelectorAll('main div[aria-label], main span[aria-label], main p[aria-label]')]\
             .filter(e => !e.getAttribute('role')).map(e => e.outerHTML.slice(0, 80))",
        )
        .await;
    assert_eq!(labelled, json!([]));
    assert_eq!(
        b.eval("return document.documentElement.scrollWidth > innerWidth")
            .await,
        json!(false)
    );
    // The first hold replaces it.
    let agent = t.caller("deploy-bot", "agent", None).await;
    let id = held(
        &raise(&agent, "lab", vec![approval("deploy", json!({}))]).await,
        0,
    );
    b.wait_for(&row(&id)).await;
    b.wait_for(".first-run[hidden]").await;
    b.close().await;
}
