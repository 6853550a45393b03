//! Many live streams at once: every subscriber gets every event in order, and one that stops
//! reading is cut off without holding the others back.

use std::time::Duration;

use holdpoint_test_support::PATIENCE;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{TestServer, answer, approval, held, live_streams, question, raise, streams_become};

/// The position of the newest event.
async fn head(t: &TestServer) -> u64 {
    let head = t.server.app().store().audit_head().await.unwrap();
    head.map_or(0, |h| h.seq)
}

/// Every event after `after`, up to and including `last`, as the admin's stream gives them:
/// their positions, in the order they came.
async fn read_until(mut stream: holdpoint_test_support::http::Sse, last: u64) -> Vec<u64> {
    let mut seen = Vec::new();
    while seen.last() != Some(&last) {
        let m = stream.next().await;
        seen.push(m.id.unwrap());
    }
    seen
}

/// Like [`read_until`], for a position told later, so the stream is read meanwhile.
async fn read_until_told(
    mut stream: holdpoint_test_support::http::Sse,
    mut last: tokio::sync::watch::Receiver<Option<u64>>,
) -> Vec<u64> {
    let mut seen = Vec::new();
    loop {
        if let Some(last) = *last.borrow_and_update()
            && seen.last() == Some(&last)
        {
            return seen;
        }
        tokio::select! {
            m = stream.next() => seen.push(m.id.unwrap()),
            _ = last.changed() => {}
        }
    }
}

#[tokio::test]
async fn a_hundred_subscribers_each_get_every_event_in_order() {
    let t = TestServer::with(super::ASK_ALL, |s| s.limits.streams_per_token = 100).await;
    t.world("lab").await;
    let bot = t.caller("bot", "agent", None).await;
    let alice = t.caller("alice", "approver", None).await;
    let start = head(&t).await;
    let mut streams = Vec::new();
    for _ in 0..100 {
        streams.push(t.api.events("", None).await);
    }
    for i in 0..20 {
        let raised = raise(&bot, "lab", vec![question(&format!("Q{i}?"), &["yes"])]).await;
        answer(&alice, &held(&raised, 0), "yes").await.expect(200);
    }
    let last = head(&t).await;
    let expected: Vec<u64> = super::audit_after(&t, start)
        .await
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(expected.len(), 40, "a hold.created and a hold.decided each");
    let readers: Vec<_> = streams
        .into_iter()
        .map(|s| tokio::spawn(read_until(s, last)))
        .collect();
    for (i, reader) in readers.into_iter().enumerate() {
        let seen = tokio::time::timeout(PATIENCE, reader)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(seen, expected, "subscriber {i}");
    }
}

/// A client that asks for the live stream and then reads nothing, with a small receive
/// buffer so that the server's side fills soon.
async fn stalled_subscriber(t: &TestServer, token: &str) -> tokio::net::TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let addr = t.server.addr();
    let mut tcp = socket.connect(addr).await.unwrap();
    let request = format!(
        "GET /api/v1/events HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\r\n"
    );
    tcp.write_all(request.as_bytes()).await.unwrap();
    tcp
}

#[tokio::test]
async fn a_subscriber_that_stops_reading_is_cut_off_and_the_others_get_every_event() {
    let t = TestServer::with(super::ASK_ALL, |s| {
        s.server.send_timeout = Duration::from_secs(1);
    })
    .await;
    t.world("lab").await;
    let bot_token = t.token("bot", "agent", None).await;
    let bot = t.api.as_token(&bot_token);
    let start = head(&t).await;
    let (tell, told) = tokio::sync::watch::channel(None);
    let mut readers = Vec::new();
    for _ in 0..3 {
        let stream = t.api.events("", None).await;
        readers.push(tokio::spawn(read_until_told(stream, told.clone())));
    }
    let mut stalled = stalled_subscriber(&t, &bot_token).await;
    streams_become(&t, 4).await;
    // Events of about 800 KiB a request, until the stalled subscriber's buffers (its socket's
    // and the server's, some MB on loopback) are full and it is let go of: its stream closes
    // on the server.
    let big = "x".repeat(200 * 1024);
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let mut raised = 0;
    while live_streams(&t).await != 3 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the stalled subscriber was not cut off"
        );
        let items = (0..4)
            .map(|_| approval("write", json!({"text": big})))
            .collect();
        raise(&bot, "lab", items).await;
        raised += 4;
    }
    let last = head(&t).await;
    tell.send(Some(last)).unwrap();
    let expected: Vec<u64> = ((start + 1)..=last).collect();
    assert_eq!(expected.len(), raised);
    for reader in readers {
        let seen = tokio::time::timeout(PATIENCE, reader)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(seen, expected);
    }
    // What reached it before the cut-off, then the end of the connection.
    let mut sink = vec![0u8; 64 * 1024];
    let ended = tokio::time::timeout(PATIENCE, async {
        loop {
            match stalled.read(&mut sink).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "the stalled connection was not closed");
}

/// The next `n` messages of a stream: positions and data.
async fn take(stream: &mut holdpoint_test_support::http::Sse, n: usize) -> Vec<(u64, Value)> {
    let mut seen = Vec::new();
    while seen.len() < n {
        let m = stream.next().await;
        seen.push((m.id.unwrap(), m.data));
    }
    seen
}

#[tokio::test]
async fn streams_of_different_scopes_share_each_event_s_bytes_and_see_only_their_own() {
    let t = TestServer::with(super::ASK_ALL, |_| {}).await;
    t.world("lab").await;
    t.world("ops").await;
    let bot = t.caller("bot", "agent", None).await;
    let other = t.caller("other-bot", "agent", None).await;
    let lab_only = t.caller("lee", "approver", Some("lab")).await;
    let start = head(&t).await;
    // Open together, so each live event is sent to all of them at once.
    let mut everything = t.api.events("", None).await;
    let mut ops = t.api.events("?world=ops", None).await;
    let mut lab = lab_only.events("", None).await;
    let mut own = bot.events("", None).await;
    streams_become(&t, 4).await;
    let mut worlds = std::collections::HashMap::new();
    let mut bots = std::collections::HashMap::new();
    // Each stream's events are spread among the others', so that an event of another scope
    // would come before one of its own and be seen; only the last (a lab event) would reach
    // the ops stream unseen.
    for i in 0..7 {
        let (agent, name, world) = match i % 3 {
            0 => (&bot, "bot", "lab"),
            1 => (&other, "other", "ops"),
            _ => (&bot, "bot", "ops"),
        };
        let hold = held(
            &raise(agent, world, vec![question(&format!("Q{i}?"), &["yes"])]).await,
            0,
        );
        worlds.insert(hold.clone(), world);
        bots.insert(hold, name);
    }
    let log = super::audit_after(&t, start).await;
    let positions = |keep: &dyn Fn(&str) -> bool| -> Vec<u64> {
        log.iter()
            .filter(|e| keep(e["hold"].as_str().unwrap()))
            .map(|e| e["seq"].as_u64().unwrap())
            .collect()
    };
    let all = positions(&|_| true);
    assert_eq!(all.len(), 7);
    let everything = take(&mut everything, all.len()).await;
    assert_eq!(everything.iter().map(|e| e.0).collect::<Vec<_>>(), all);
    for (name, stream, expected) in [
        ("ops", &mut ops, positions(&|h| worlds[h] == "ops")),
        ("lab", &mut lab, positions(&|h| worlds[h] == "lab")),
        ("bot's own", &mut own, positions(&|h| bots[h] == "bot")),
    ] {
        let seen = take(stream, expected.len()).await;
        assert_eq!(
            seen.iter().map(|e| e.0).collect::<Vec<_>>(),
            expected,
            "{name}"
        );
        for (seq, data) in seen {
            let same = everything.iter().find(|e| e.0 == seq).unwrap();
            assert_eq!(data, same.1, "{name}: the event at {seq}");
        }
    }
}
