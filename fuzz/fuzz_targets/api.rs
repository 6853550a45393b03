//! The API's body, query and header extraction: any request, through the server's router in
//! process. The input is a request as text: `METHOD TARGET`, header lines `Name: value`, a
//! blank line, then the body. `{admin}`, `{agent}`, `{approver}`, `{hold}` and `{host}` stand
//! for the server's tokens, its pending hold and its name; without `Host` or `Authorization`
//! the request goes to the server as the admin (an empty `Authorization:` sends none). No
//! request may get a 5xx or a panic, and every refusal is the API's error shape.
#![no_main]

use axum::body::Body;
use axum::http::{Request, header};
use holdpoint_fuzz::{check_answer, harness};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let h = harness();
    let split = data
        .windows(2)
        .position(|w| w == b"\n\n")
        .map_or((data, &b""[..]), |i| (&data[..i], &data[i + 2..]));
    let (head, body) = split;
    let Ok(head) = std::str::from_utf8(head) else {
        return;
    };
    let head = h.fill(head);
    let mut lines = head.lines();
    let Some((method, target)) = lines.next().and_then(|l| l.split_once(' ')) else {
        return;
    };
    let mut builder = Request::builder().method(method).uri(target);
    let mut anonymous = false;
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            return;
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("authorization") && value.is_empty() {
            anonymous = true;
            continue;
        }
        builder = builder.header(name, value);
    }
    let Ok(mut request) = builder.body(Body::from(body.to_vec())) else {
        return;
    };
    h.defaults(&mut request);
    if anonymous {
        request.headers_mut().remove(header::AUTHORIZATION);
    }
    let path = request.uri().path().to_owned();
    let answer = h.send(request);
    check_answer(&path, &answer);
});
