//! The LLM answer's parsers over any bytes: the streamed answer (SSE `data:` lines of JSON
//! chunks with tool-call fragments) and the one-document answer. However the body is cut into
//! pieces, the stream reads the same; text handed out as it arrives is the answer's text.
//! The first byte chooses where the body is cut.
#![no_main]

use holdpoint_llm::{Completion, LlmError, StreamReader, whole};
use libfuzzer_sys::fuzz_target;

/// The body read in pieces of `size` bytes, and the text handed out as it arrived.
fn read(body: &[u8], size: usize) -> (Result<Completion, LlmError>, String) {
    let mut reader = StreamReader::default();
    let mut streamed = String::new();
    let mut on_text = |t: &str| streamed.push_str(t);
    for piece in body.chunks(size.max(1)) {
        match reader.push(piece, &mut on_text) {
            Ok(Some(done)) => return (Ok(done), streamed),
            Ok(None) => {}
            Err(e) => return (Err(e), streamed),
        }
    }
    (reader.end(), streamed)
}

fn describe(r: &Result<Completion, LlmError>) -> String {
    match r {
        Ok(c) => format!("{c:?}"),
        Err(e) => format!("error: {e}"),
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&cut, body)) = data.split_first() else {
        return;
    };
    let (whole_body, text) = read(body, body.len());
    let (pieces, _) = read(body, usize::from(cut));
    assert_eq!(
        describe(&pieces),
        describe(&whole_body),
        "the answer depends on how it was cut"
    );
    if let Ok(c) = &whole_body {
        assert_eq!(c.text, text, "the text handed out is not the answer's");
        for call in &c.tool_calls {
            assert!(!call.name.is_empty() && !call.id.is_empty(), "{call:?}");
        }
    }
    let mut handed = String::new();
    if let Ok(c) = whole(body, &mut |t: &str| handed.push_str(t)) {
        assert_eq!(c.text, handed);
    }
});
