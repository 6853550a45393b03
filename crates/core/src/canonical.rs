//! Canonical JSON and argument digests.
//!
//! Canonical form follows RFC 8785 (JCS): object keys sorted by UTF-16 code units, no
//! insignificant whitespace, minimal string escapes, and floating-point numbers written as
//! ECMAScript writes them. One deliberate difference: integers are written exactly, where JCS
//! would first round them to a double (which changes integers beyond 2^53). Arguments that
//! differ must never share a digest.

use std::cmp::Ordering;
use std::fmt::Write as _;

use serde::Serialize;
use serde_json::{Map, Number, Value};
use sha2::{Digest, Sha256};

mod encode;

/// The canonical text of `value`.
pub fn to_string(value: &Value) -> String {
    let mut out = String::with_capacity(64);
    write_value(&mut out, value);
    out
}

/// The canonical text of any serialisable `value`: what [`to_string`] gives for
/// `serde_json::to_value(value)`, written without building the `Value` where it can be
/// (`encode.rs`).
pub fn to_string_of<T: Serialize + ?Sized>(value: &T) -> Result<String, serde_json::Error> {
    match encode::to_string(value) {
        Some(text) => Ok(text),
        None => serde_json::to_value(value).map(|v| to_string(&v)),
    }
}

/// SHA-256 of the canonical text, as 64 lowercase hex digits. This is the argument digest a
/// decision is bound to.
pub fn digest(value: &Value) -> String {
    sha256_hex(to_string(value).as_bytes())
}

/// SHA-256 of `bytes` as lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    s
}

fn write_value(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => write_number(out, n),
        Value::String(s) => write_string(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => write_object(out, map),
    }
}

fn write_object(out: &mut String, map: &Map<String, Value>) {
    let mut entries: Vec<(&String, &Value)> = map.iter().collect();
    // serde_json's map is ordered by UTF-8 bytes, not JCS's order: sort explicitly.
    entries.sort_by(|a, b| key_order(a.0, b.0));
    out.push('{');
    for (i, (key, item)) in entries.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_string(out, key);
        out.push(':');
        write_value(out, item);
    }
    out.push('}');
}

/// JCS's order of object keys: by UTF-16 code units. It differs from the order of UTF-8 bytes
/// (and of code points) only where a supplementary-plane character meets one from U+E000 to
/// U+FFFF, so ASCII keys, nearly all of them, compare as bytes.
fn key_order(a: &str, b: &str) -> Ordering {
    if a.is_ascii() && b.is_ascii() {
        a.cmp(b)
    } else {
        a.encode_utf16().cmp(b.encode_utf16())
    }
}

fn write_string(out: &mut String, s: &str) {
    out.push('"');
    // Copies the runs between characters that need escaping whole; every such character is
    // ASCII, so the runs end on character boundaries.
    let mut run = 0;
    for (i, b) in s.bytes().enumerate() {
        let escaped = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            0x08 => "\\b",
            b'\t' => "\\t",
            b'\n' => "\\n",
            0x0C => "\\f",
            b'\r' => "\\r",
            b if b < 0x20 => "",
            _ => continue,
        };
        out.push_str(&s[run..i]);
        if escaped.is_empty() {
            let _ = write!(out, "\\u{b:04x}");
        } else {
            out.push_str(escaped);
        }
        run = i + 1;
    }
    out.push_str(&s[run..]);
    out.push('"');
}

fn write_number(out: &mut String, n: &Number) {
    if let Some(i) = n.as_i64() {
        let _ = write!(out, "{i}");
    } else if let Some(u) = n.as_u64() {
        let _ = write!(out, "{u}");
    } else if let Some(f) = n.as_f64() {
        write_f64(out, f);
    } else {
        out.push_str("null");
    }
}

/// ECMAScript's Number::toString for finite doubles (JSON has no NaN or infinity).
fn write_f64(out: &mut String, f: f64) {
    if f == 0.0 {
        out.push('0');
        return;
    }
    if f < 0.0 {
        out.push('-');
    }
    // `{:e}` gives the shortest digits that round-trip, as "d.ddde±x".
    let sci = format!("{:e}", f.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let exp: i32 = exp.parse().unwrap_or(0);
    let k = digits.len() as i32;
    let n = exp + 1; // position of the decimal point relative to the digits
    if k <= n && n <= 21 {
        out.push_str(&digits);
        out.extend(std::iter::repeat_n('0', (n - k) as usize));
    } else if 0 < n && n <= 21 {
        out.push_str(&digits[..n as usize]);
        out.push('.');
        out.push_str(&digits[n as usize..]);
    } else if -6 < n && n <= 0 {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', (-n) as usize));
        out.push_str(&digits);
    } else {
        out.push_str(&digits[..1]);
        if k > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        let e = n - 1;
        let _ = write!(out, "e{}{}", if e >= 0 { "+" } else { "-" }, e.abs());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn keys_are_sorted_and_whitespace_dropped() {
        let v = json!({"b": [1, 2, {"z": null, "a": true}], "a": "x"});
        assert_eq!(to_string(&v), r#"{"a":"x","b":[1,2,{"a":true,"z":null}]}"#);
    }

    #[test]
    fn strings_use_minimal_escapes() {
        let v = json!("é\u{1f600}\"\\\n\u{01}\u{7f}/");
        assert_eq!(to_string(&v), "\"é\u{1f600}\\\"\\\\\\n\\u0001\u{7f}/\"");
    }

    #[test]
    fn keys_sort_by_utf16_code_units() {
        // U+FF61 sorts after U+1F600 in UTF-8 bytes but before it in UTF-16 code units.
        let v = json!({"\u{1f600}": 1, "\u{ff61}": 2});
        assert_eq!(to_string(&v), "{\"\u{1f600}\":1,\"\u{ff61}\":2}");
    }

    #[test]
    fn floats_follow_ecmascript() {
        let cases = [
            (0.0, "0"),
            (-0.0, "0"),
            (1.0, "1"),
            (-1.5, "-1.5"),
            (0.1, "0.1"),
            (1e21, "1e+21"),
            (1e20, "100000000000000000000"),
            (1.5e-7, "1.5e-7"),
            (0.000001, "0.000001"),
            (123.456, "123.456"),
            (4.5e300, "4.5e+300"),
            (5e-324, "5e-324"),
        ];
        for (f, expected) in cases {
            assert_eq!(to_string(&json!(f)), expected, "for {f:e}");
        }
    }

    #[test]
    fn integers_are_exact() {
        assert_eq!(
            to_string(&json!(12345678901234567890u64)),
            "12345678901234567890"
        );
        assert_eq!(to_string(&json!(-9007199254740993i64)), "-9007199254740993");
    }

    #[test]
    fn digest_is_sha256_of_canonical_text() {
        // sha256("{}")
        assert_eq!(
            digest(&json!({})),
            "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
        );
        assert_eq!(
            digest(&json!({"a": 1, "b": 2})),
            digest(&json!({"b": 2, "a": 1}))
        );
        assert_ne!(digest(&json!({"a": 1})), digest(&json!({"a": "1"})));
    }

    pub(super) fn arb_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|i| json!(i)),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(|f| json!(f)),
            ".{0,8}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 32, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::btree_map(".{0,6}", inner, 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    /// `value` as JSON text with its object keys in an order and whitespace between its
    /// tokens that `seed` picks.
    fn scrambled(value: &Value, seed: &mut u64, out: &mut String) {
        fn next(seed: &mut u64) -> u64 {
            // xorshift64: any seed but zero gives a long sequence.
            *seed ^= *seed << 13;
            *seed ^= *seed >> 7;
            *seed ^= *seed << 17;
            *seed
        }
        fn space(seed: &mut u64, out: &mut String) {
            const WHITESPACE: [&str; 6] = ["", "", " ", "\n", "\t", "\r\n  "];
            out.push_str(WHITESPACE[(next(seed) % 6) as usize]);
        }
        space(seed, out);
        match value {
            Value::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    scrambled(item, seed, out);
                }
                space(seed, out);
                out.push(']');
            }
            Value::Object(map) => {
                let mut entries: Vec<(&String, &Value)> = map.iter().collect();
                // Fisher-Yates.
                for i in (1..entries.len()).rev() {
                    entries.swap(i, (next(seed) % (i as u64 + 1)) as usize);
                }
                out.push('{');
                for (i, (key, item)) in entries.into_iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    space(seed, out);
                    out.push_str(&serde_json::to_string(key).unwrap());
                    space(seed, out);
                    out.push(':');
                    scrambled(item, seed, out);
                }
                space(seed, out);
                out.push('}');
            }
            other => out.push_str(&other.to_string()),
        }
        space(seed, out);
    }

    /// The keys of every object in a JSON text, in the order the text has them.
    fn key_orders(text: &str) -> Vec<Vec<String>> {
        use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

        struct Keys(Vec<Vec<String>>);
        impl<'de> Deserialize<'de> for Keys {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                d.deserialize_any(KeysVisitor)
            }
        }
        struct KeysVisitor;
        impl<'de> Visitor<'de> for KeysVisitor {
            type Value = Keys;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("JSON")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Keys, A::Error> {
                let (mut keys, mut inner) = (Vec::new(), Vec::new());
                while let Some(k) = map.next_key::<String>()? {
                    keys.push(k);
                    inner.extend(map.next_value::<Keys>()?.0);
                }
                inner.insert(0, keys);
                Ok(Keys(inner))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Keys, A::Error> {
                let mut inner = Vec::new();
                while let Some(k) = seq.next_element::<Keys>()? {
                    inner.extend(k.0);
                }
                Ok(Keys(inner))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Keys, E> {
                Ok(Keys(Vec::new()))
            }
            fn visit_i64<E>(self, _: i64) -> Result<Keys, E> {
                Ok(Keys(Vec::new()))
            }
            fn visit_u64<E>(self, _: u64) -> Result<Keys, E> {
                Ok(Keys(Vec::new()))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Keys, E> {
                Ok(Keys(Vec::new()))
            }
            fn visit_str<E>(self, _: &str) -> Result<Keys, E> {
                Ok(Keys(Vec::new()))
            }
            fn visit_unit<E>(self) -> Result<Keys, E> {
                Ok(Keys(Vec::new()))
            }
        }
        serde_json::from_str::<Keys>(text).unwrap().0
    }

    /// Object keys where UTF-8 and UTF-16 order disagree (U+FF61 and U+1F600), among others.
    pub(super) fn arb_keyed_json() -> impl Strategy<Value = Value> {
        let key = prop_oneof![".{0,4}", "[a\u{ff61}\u{1f600}\u{e000}]{1,3}",];
        prop::collection::btree_map(key, arb_json(), 0..8)
            .prop_map(|m| Value::Object(m.into_iter().collect()))
    }

    proptest! {
        /// Every object's keys in the canonical text are in UTF-16 code unit order.
        #[test]
        fn keys_are_in_utf16_order(v in arb_keyed_json()) {
            for keys in key_orders(&to_string(&v)) {
                for pair in keys.windows(2) {
                    prop_assert!(
                        pair[0].encode_utf16().lt(pair[1].encode_utf16()),
                        "{:?} before {:?}", pair[0], pair[1]
                    );
                }
            }
        }

        /// The same value written with its keys in any order and any whitespace has the one
        /// canonical text and digest.
        #[test]
        fn key_order_and_whitespace_do_not_matter(v in arb_json(), seed in 1..u64::MAX) {
            let mut seed = seed;
            let mut text = String::new();
            scrambled(&v, &mut seed, &mut text);
            let read: Value = serde_json::from_str(&text).unwrap();
            prop_assert_eq!(to_string(&read), to_string(&v), "from {}", text);
            prop_assert_eq!(digest(&read), digest(&v));
        }

        #[test]
        fn canonical_text_is_json_of_the_same_value(v in arb_json()) {
            let text = to_string(&v);
            let back: Value = serde_json::from_str(&text).unwrap();
            // Floats may come back as integers ("1" for 1.0); compare canonical forms.
            prop_assert_eq!(to_string(&back), text);
        }

        #[test]
        fn strings_round_trip(s in any::<String>()) {
            let back: String = serde_json::from_str(&to_string(&json!(s))).unwrap();
            prop_assert_eq!(back, s);
        }

        #[test]
        fn floats_round_trip(f in any::<f64>().prop_filter("finite", |f| f.is_finite())) {
            let text = to_string(&json!(f));
            let back: f64 = text.parse().unwrap();
            prop_assert_eq!(back, if f == 0.0 { 0.0 } else { f });
        }
    }
}
