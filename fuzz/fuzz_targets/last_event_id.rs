//! `Last-Event-ID`, both ends. The input's first line is the header's value: the server must
//! resume the live stream after it when it is the position of an event it has, and refuse it
//! (400, naming the header) otherwise, never start afresh as if it were not there. The rest
//! is a stream as a client reads it (`SseDecoder`): the frames, and so the ids the client
//! would send back, are the same however the bytes arrive; each id goes to the server too.
#![no_main]

use axum::body::Body;
use axum::http::{HeaderValue, Request, StatusCode};
use holdpoint_fuzz::{check_answer, harness};
use holdpoint_protocol::sse::SseDecoder;
use libfuzzer_sys::fuzz_target;

fn frames(stream: &[u8], size: usize) -> Vec<holdpoint_protocol::sse::SseFrame> {
    let mut decoder = SseDecoder::default();
    let mut out = Vec::new();
    for piece in stream.chunks(size) {
        decoder.push(piece);
        out.extend(std::iter::from_fn(|| decoder.next_frame()));
    }
    out
}

fn resume(value: &[u8]) {
    let h = harness();
    let Ok(header) = HeaderValue::from_bytes(value) else {
        return;
    };
    let head = h.head();
    let request = Request::builder()
        .uri("/api/v1/events")
        .header("last-event-id", header)
        .body(Body::empty());
    let Ok(mut request) = request else { return };
    h.defaults(&mut request);
    let answer = h.send(request);
    check_answer("/api/v1/events", &answer);
    // A header is ASCII: `" 1\u{a0}"` is no position, though `trim` would make it one.
    let position = std::str::from_utf8(value)
        .ok()
        .filter(|v| v.is_ascii())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|p| *p <= head);
    match position {
        Some(_) => assert_eq!(answer.status, StatusCode::OK, "{value:?}: {answer:?}"),
        None => {
            assert_eq!(
                answer.status,
                StatusCode::BAD_REQUEST,
                "{value:?} is no event's position (the newest is {head}), yet: {answer:?}"
            );
            let body = answer.json().unwrap_or_default();
            assert_eq!(body["error"]["details"]["field"], "Last-Event-ID", "{body}");
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let (value, stream) = match data.iter().position(|&b| b == b'\n') {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &b""[..]),
    };
    resume(value);
    let whole = frames(stream, stream.len().max(1));
    assert_eq!(
        frames(stream, 1),
        whole,
        "the frames depend on how the bytes arrived"
    );
    for frame in whole.iter().take(4) {
        if let Some(id) = &frame.id {
            resume(id.as_bytes());
        }
    }
});
