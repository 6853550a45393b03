//! Canonical JSON and argument digests, over any JSON text: the canonical text is JSON of the
//! same value, the same written from the value's `Serialize`, canonicalising it again changes
//! nothing, and its digest is the digest of the value it was made from.
#![no_main]

use holdpoint_core::canonical;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Ok(value) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let text = canonical::to_string(&value);
    assert_eq!(
        canonical::to_string_of(&value).ok().as_deref(),
        Some(text.as_str()),
        "written from the value's Serialize, the canonical text differs"
    );
    let back: Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(e) => panic!("the canonical text {text:?} is not JSON: {e}"),
    };
    assert_eq!(
        canonical::to_string(&back),
        text,
        "canonicalising the canonical text changed it"
    );
    let digest = canonical::digest(&value);
    assert_eq!(digest, canonical::sha256_hex(text.as_bytes()));
    assert_eq!(
        canonical::digest(&back),
        digest,
        "the re-read canonical text has another digest"
    );
    assert_eq!(digest.len(), 64);
});
