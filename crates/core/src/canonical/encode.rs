//! Canonical text written straight from a value's `Serialize`, without building a
//! `serde_json::Value` first.
//!
//! Every event's canonical text is hashed into the audit chain, and the events are the
//! engine's most frequent writes: going through a `Value` tree (a string and a map node for
//! every field, all freed again) was a fifth of the CPU of raising holds. Here each member of an
//! object is written where it will end up, and only an object whose members did not come in
//! key order is rearranged, by copying its text once.
//!
//! The result is exactly what `serde_json::to_value` followed by [`super::to_string`] gives.
//! What that path does in ways not worth repeating here (a raw JSON value, a float map key,
//! integers beyond 64 bits) makes this writer give up, and [`super::to_string_of`] takes the
//! `Value` path instead.

use std::fmt::{self, Display, Write as _};
use std::ops::Range;

use serde::ser::{self, Serialize};

use super::{key_order, write_f64, write_string};

/// The canonical text of `value`, or `None` where it takes the `Value` path.
pub(super) fn to_string<T: Serialize + ?Sized>(value: &T) -> Option<String> {
    let mut encoder = Encoder::default();
    value.serialize(&mut encoder).ok()?;
    Some(encoder.out)
}

/// Why this writer gave up: something only the `Value` path handles (or an error of the
/// value's own, which that path meets too).
#[derive(Debug)]
pub(super) struct GiveUp;

impl Display for GiveUp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("not written directly")
    }
}

impl std::error::Error for GiveUp {}

impl ser::Error for GiveUp {
    fn custom<T: Display>(_: T) -> Self {
        GiveUp
    }
}

/// serde_json's name for a raw JSON value, which its `to_value` parses.
const RAW_VALUE: &str = "$serde_json::private::RawValue";

#[derive(Default)]
struct Encoder {
    out: String,
    /// The members of the objects being written, innermost object's last.
    members: Vec<Member>,
    /// Where an object's text is copied to be put in key order.
    scratch: String,
}

/// One member of an object: its key, and where its `"key":value` lies in the output.
struct Member {
    key: Key,
    text: Range<usize>,
}

enum Key {
    Field(&'static str),
    Owned(String),
}

impl Key {
    fn as_str(&self) -> &str {
        match self {
            Key::Field(k) => k,
            Key::Owned(k) => k,
        }
    }
}

/// An object being written: where its members begin in the output and in `members`.
struct Object {
    start: usize,
    base: usize,
}

impl Encoder {
    fn open(&mut self) -> Object {
        self.out.push('{');
        Object {
            start: self.out.len(),
            base: self.members.len(),
        }
    }

    fn member<T: Serialize + ?Sized>(
        &mut self,
        object: &Object,
        key: Key,
        value: &T,
    ) -> Result<(), GiveUp> {
        if self.members.len() > object.base {
            self.out.push(',');
        }
        let begin = self.out.len();
        write_string(&mut self.out, key.as_str());
        self.out.push(':');
        value.serialize(&mut *self)?;
        self.members.push(Member {
            key,
            text: begin..self.out.len(),
        });
        Ok(())
    }

    /// Closes `object`, its members in key order (of a key given twice, the last, as a map
    /// keeps it).
    fn close(&mut self, object: Object) {
        let members = &mut self.members[object.base..];
        let in_order = members
            .windows(2)
            .all(|w| key_order(w[0].key.as_str(), w[1].key.as_str()).is_lt());
        if !in_order {
            self.scratch.clear();
            self.scratch.push_str(&self.out[object.start..]);
            self.out.truncate(object.start);
            // Stable: of equal keys, the last written stays last.
            members.sort_by(|a, b| key_order(a.key.as_str(), b.key.as_str()));
            let mut first = true;
            for (i, m) in members.iter().enumerate() {
                let shadowed = members
                    .get(i + 1)
                    .is_some_and(|next| next.key.as_str() == m.key.as_str());
                if shadowed {
                    continue;
                }
                if !first {
                    self.out.push(',');
                }
                first = false;
                let text = m.text.start - object.start..m.text.end - object.start;
                self.out.push_str(&self.scratch[text]);
            }
        }
        self.members.truncate(object.base);
        self.out.push('}');
    }

    fn integer(&mut self, n: impl Display) {
        let _ = write!(self.out, "{n}");
    }
}

/// Integers of 64 bits or fewer, written exactly.
macro_rules! integers {
    ($($method:ident : $ty:ty),*) => {$(
        fn $method(self, v: $ty) -> Result<(), GiveUp> {
            self.integer(v);
            Ok(())
        }
    )*};
}

impl<'a> ser::Serializer for &'a mut Encoder {
    type Ok = ();
    type Error = GiveUp;
    type SerializeSeq = Array<'a>;
    type SerializeTuple = Array<'a>;
    type SerializeTupleStruct = Array<'a>;
    type SerializeTupleVariant = Array<'a>;
    type SerializeMap = Members<'a>;
    type SerializeStruct = Members<'a>;
    type SerializeStructVariant = Members<'a>;

    fn serialize_bool(self, v: bool) -> Result<(), GiveUp> {
        self.out.push_str(if v { "true" } else { "false" });
        Ok(())
    }

    integers!(
        serialize_i8: i8,
        serialize_i16: i16,
        serialize_i32: i32,
        serialize_i64: i64,
        serialize_u8: u8,
        serialize_u16: u16,
        serialize_u32: u32,
        serialize_u64: u64
    );

    fn serialize_i128(self, v: i128) -> Result<(), GiveUp> {
        self.integer(i64::try_from(v).map_err(|_| GiveUp)?);
        Ok(())
    }

    fn serialize_u128(self, v: u128) -> Result<(), GiveUp> {
        self.integer(u64::try_from(v).map_err(|_| GiveUp)?);
        Ok(())
    }

    fn serialize_f32(self, v: f32) -> Result<(), GiveUp> {
        // As serde_json's `Value` keeps it: widened to a double.
        self.serialize_f64(f64::from(v))
    }

    fn serialize_f64(self, v: f64) -> Result<(), GiveUp> {
        if v.is_finite() {
            write_f64(&mut self.out, v);
        } else {
            // A `Value` has no NaN or infinity; it holds null instead.
            self.out.push_str("null");
        }
        Ok(())
    }

    fn serialize_char(self, v: char) -> Result<(), GiveUp> {
        self.serialize_str(v.encode_utf8(&mut [0; 4]))
    }

    fn serialize_str(self, v: &str) -> Result<(), GiveUp> {
        write_string(&mut self.out, v);
        Ok(())
    }

    fn serialize_bytes(self, v: &[u8]) -> Result<(), GiveUp> {
        use ser::SerializeSeq as _;
        let mut array = self.serialize_seq(Some(v.len()))?;
        for b in v {
            array.serialize_element(b)?;
        }
        array.end()
    }

    fn serialize_none(self) -> Result<(), GiveUp> {
        self.serialize_unit()
    }

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), GiveUp> {
        value.serialize(self)
    }

    fn serialize_unit(self) -> Result<(), GiveUp> {
        self.out.push_str("null");
        Ok(())
    }

    fn serialize_unit_struct(self, _: &'static str) -> Result<(), GiveUp> {
        self.serialize_unit()
    }

    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<(), GiveUp> {
        self.serialize_str(variant)
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<(), GiveUp> {
        value.serialize(self)
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), GiveUp> {
        let object = self.open();
        self.member(&object, Key::Field(variant), value)?;
        self.close(object);
        Ok(())
    }

    fn serialize_seq(self, _: Option<usize>) -> Result<Array<'a>, GiveUp> {
        self.out.push('[');
        Ok(Array {
            encoder: self,
            first: true,
            variant: false,
        })
    }

    fn serialize_tuple(self, len: usize) -> Result<Array<'a>, GiveUp> {
        self.serialize_seq(Some(len))
    }

    fn serialize_tuple_struct(self, _: &'static str, len: usize) -> Result<Array<'a>, GiveUp> {
        self.serialize_seq(Some(len))
    }

    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Array<'a>, GiveUp> {
        // `{"variant":[…]}`: one member, so in order as written.
        self.out.push('{');
        write_string(&mut self.out, variant);
        self.out.push_str(":[");
        Ok(Array {
            encoder: self,
            first: true,
            variant: true,
        })
    }

    fn serialize_map(self, _: Option<usize>) -> Result<Members<'a>, GiveUp> {
        let object = self.open();
        Ok(Members {
            encoder: self,
            object,
            key: None,
            variant: false,
        })
    }

    fn serialize_struct(self, name: &'static str, len: usize) -> Result<Members<'a>, GiveUp> {
        if name == RAW_VALUE {
            return Err(GiveUp);
        }
        self.serialize_map(Some(len))
    }

    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Members<'a>, GiveUp> {
        // `{"variant":{…}}`: the outer object has one member, so needs no ordering.
        self.out.push('{');
        write_string(&mut self.out, variant);
        self.out.push(':');
        let mut members = self.serialize_map(Some(len))?;
        members.variant = true;
        Ok(members)
    }
}

pub(super) struct Array<'a> {
    encoder: &'a mut Encoder,
    first: bool,
    /// Inside a tuple variant's object, closed with it.
    variant: bool,
}

impl Array<'_> {
    fn element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), GiveUp> {
        if !std::mem::take(&mut self.first) {
            self.encoder.out.push(',');
        }
        value.serialize(&mut *self.encoder)
    }

    fn finish(self) -> Result<(), GiveUp> {
        self.encoder
            .out
            .push_str(if self.variant { "]}" } else { "]" });
        Ok(())
    }
}

/// serde's four kinds of array, each written by [`Array`] alike.
macro_rules! array {
    ($($kind:ident :: $add:ident),*) => {$(
        impl ser::$kind for Array<'_> {
            type Ok = ();
            type Error = GiveUp;

            fn $add<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), GiveUp> {
                self.element(value)
            }

            fn end(self) -> Result<(), GiveUp> {
                self.finish()
            }
        }
    )*};
}

array!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field
);

pub(super) struct Members<'a> {
    encoder: &'a mut Encoder,
    object: Object,
    /// A map's key, until its value comes.
    key: Option<Key>,
    /// Inside a struct variant's object, closed with it.
    variant: bool,
}

impl Members<'_> {
    fn field<T: Serialize + ?Sized>(&mut self, key: Key, value: &T) -> Result<(), GiveUp> {
        self.encoder.member(&self.object, key, value)
    }

    fn finish(self) -> Result<(), GiveUp> {
        self.encoder.close(self.object);
        if self.variant {
            self.encoder.out.push('}');
        }
        Ok(())
    }
}

impl ser::SerializeMap for Members<'_> {
    type Ok = ();
    type Error = GiveUp;

    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), GiveUp> {
        self.key = Some(key.serialize(MapKey)?);
        Ok(())
    }

    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), GiveUp> {
        let key = self.key.take().ok_or(GiveUp)?;
        self.field(key, value)
    }

    fn end(self) -> Result<(), GiveUp> {
        self.finish()
    }
}

/// A struct and a struct variant, whose fields are written by [`Members`] alike.
macro_rules! fields {
    ($($kind:ident),*) => {$(
        impl ser::$kind for Members<'_> {
            type Ok = ();
            type Error = GiveUp;

            fn serialize_field<T: Serialize + ?Sized>(
                &mut self,
                key: &'static str,
                value: &T,
            ) -> Result<(), GiveUp> {
                self.field(Key::Field(key), value)
            }

            fn end(self) -> Result<(), GiveUp> {
                self.finish()
            }
        }
    )*};
}

fields!(SerializeStruct, SerializeStructVariant);

/// A map's key as serde_json writes it into a `Value`: a string, or an integer, a bool or a
/// unit variant as its text. Anything else gives up (serde_json refuses most of it, and
/// writes a float key in a format of its own).
struct MapKey;

/// Keys written as their text, as serde_json writes them.
macro_rules! key_as_text {
    ($($method:ident : $ty:ty),*) => {$(
        fn $method(self, v: $ty) -> Result<Key, GiveUp> {
            Ok(Key::Owned(v.to_string()))
        }
    )*};
}

impl ser::Serializer for MapKey {
    type Ok = Key;
    type Error = GiveUp;
    type SerializeSeq = ser::Impossible<Key, GiveUp>;
    type SerializeTuple = ser::Impossible<Key, GiveUp>;
    type SerializeTupleStruct = ser::Impossible<Key, GiveUp>;
    type SerializeTupleVariant = ser::Impossible<Key, GiveUp>;
    type SerializeMap = ser::Impossible<Key, GiveUp>;
    type SerializeStruct = ser::Impossible<Key, GiveUp>;
    type SerializeStructVariant = ser::Impossible<Key, GiveUp>;

    fn serialize_str(self, v: &str) -> Result<Key, GiveUp> {
        Ok(Key::Owned(v.to_owned()))
    }

    key_as_text!(serialize_char: char, serialize_bool: bool);

    key_as_text!(
        serialize_i8: i8,
        serialize_i16: i16,
        serialize_i32: i32,
        serialize_i64: i64,
        serialize_i128: i128,
        serialize_u8: u8,
        serialize_u16: u16,
        serialize_u32: u32,
        serialize_u64: u64,
        serialize_u128: u128
    );

    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<Key, GiveUp> {
        Ok(Key::Field(variant))
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<Key, GiveUp> {
        value.serialize(self)
    }

    // A float key serde_json writes in a format of its own; the rest it refuses.
    fn serialize_f32(self, _: f32) -> Result<Key, GiveUp> {
        Err(GiveUp)
    }

    fn serialize_f64(self, _: f64) -> Result<Key, GiveUp> {
        Err(GiveUp)
    }

    fn serialize_bytes(self, _: &[u8]) -> Result<Key, GiveUp> {
        Err(GiveUp)
    }

    fn serialize_none(self) -> Result<Key, GiveUp> {
        Err(GiveUp)
    }

    fn serialize_some<T: Serialize + ?Sized>(self, _: &T) -> Result<Key, GiveUp> {
        Err(GiveUp)
    }

    fn serialize_unit(self) -> Result<Key, GiveUp> {
        Err(GiveUp)
    }

    fn serialize_unit_struct(self, _: &'static str) -> Result<Key, GiveUp> {
        Err(GiveUp)
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<Key, GiveUp> {
        Err(GiveUp)
    }

    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, GiveUp> {
        Err(GiveUp)
    }

    fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, GiveUp> {
        Err(GiveUp)
    }

    fn serialize_tuple_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleStruct, GiveUp> {
        Err(GiveUp)
    }

    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, GiveUp> {
        Err(GiveUp)
    }

    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, GiveUp> {
        Err(GiveUp)
    }

    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self::SerializeStruct, GiveUp> {
        Err(GiveUp)
    }

    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, GiveUp> {
        Err(GiveUp)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, HashMap};

    use proptest::prelude::*;
    use serde::Serialize;
    use serde_json::{Value, json};

    use super::super::tests::{arb_json, arb_keyed_json};
    use super::to_string;

    /// The `Value` path's text, or `None` where serde_json refuses the value.
    fn through_value<T: Serialize>(value: &T) -> Option<String> {
        serde_json::to_value(value)
            .ok()
            .map(|v| super::super::to_string(&v))
    }

    #[derive(Serialize)]
    enum Shape {
        Unit,
        Newtype(Value),
        Tuple(u64, Value),
        Struct { z: bool, a: Option<String> },
    }

    #[derive(Serialize)]
    #[serde(tag = "kind", rename_all = "snake_case")]
    enum Tagged {
        One { b: i32, a: i32 },
        Two(Inner),
    }

    #[derive(Serialize)]
    struct Inner {
        y: Value,
        x: Vec<Value>,
    }

    /// Fields declared out of key order, serde's every shape, and a flattened map whose keys
    /// may repeat a field's (the `Value` path keeps the last).
    #[derive(Serialize)]
    struct Shapes {
        zeta: Value,
        #[serde(rename = "Alpha")]
        alpha: HashMap<String, Value>,
        shapes: Vec<Shape>,
        tagged: Vec<Tagged>,
        #[serde(skip_serializing_if = "Option::is_none")]
        gone: Option<u8>,
        unit: (),
        tuple: (i8, f32, char, u128, i128),
        #[serde(flatten)]
        extra: BTreeMap<String, Value>,
    }

    fn shapes(v: Value, w: Value, m: HashMap<String, Value>) -> Shapes {
        let mut extra = BTreeMap::new();
        extra.insert("zeta".to_owned(), w.clone());
        extra.insert("b".to_owned(), v.clone());
        Shapes {
            zeta: v.clone(),
            alpha: m,
            shapes: vec![
                Shape::Unit,
                Shape::Newtype(w.clone()),
                Shape::Tuple(u64::MAX, v.clone()),
                Shape::Struct {
                    z: true,
                    a: Some("\u{1f600}\"\n".into()),
                },
                Shape::Struct { z: false, a: None },
            ],
            tagged: vec![
                Tagged::One { b: -1, a: 2 },
                Tagged::Two(Inner {
                    y: w,
                    x: vec![v, json!(1.5)],
                }),
            ],
            gone: None,
            unit: (),
            tuple: (-8, 0.1, 'é', 7, -7),
            extra,
        }
    }

    proptest! {
        /// Written straight from the value, the text is what the `Value` path gives: for JSON
        /// values themselves, and for members that come out of key order (a struct's declared
        /// order, a hash map's) and nest.
        #[test]
        fn written_directly_as_through_a_value(
            v in arb_keyed_json(),
            w in arb_json(),
            m in prop::collection::hash_map("[a-zA-Z\u{ff61}\u{1f600}]{0,3}", arb_json(), 0..6),
        ) {
            prop_assert_eq!(to_string(&v), through_value(&v));
            let s = shapes(v, w, m);
            let direct = to_string(&s);
            prop_assert!(direct.is_some());
            prop_assert_eq!(direct, through_value(&s));
        }
    }

    #[test]
    fn numbers_keys_and_bytes_are_written_as_a_value_holds_them() {
        // Not finite: null. f32: widened to a double first.
        for f in [f64::NAN, f64::INFINITY, -0.0, 1e21, 1e-7] {
            assert_eq!(to_string(&f), through_value(&f));
        }
        assert_eq!(to_string(&0.1f32).as_deref(), Some("0.10000000149011612"));
        assert_eq!(to_string(&0.1f32), through_value(&0.1f32));
        // Integer, bool and unit variant keys become their text.
        let ints: BTreeMap<i64, u8> = [(-3, 1), (10, 2), (2, 3)].into();
        assert_eq!(
            to_string(&ints).as_deref(),
            Some(r#"{"-3":1,"10":2,"2":3}"#)
        );
        assert_eq!(to_string(&ints), through_value(&ints));
        let flags: BTreeMap<bool, u8> = [(true, 1), (false, 0)].into();
        assert_eq!(to_string(&flags), through_value(&flags));
        // Bytes as an array of numbers.
        struct Bytes;
        impl Serialize for Bytes {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_bytes(&[0, 7, 255])
            }
        }
        assert_eq!(to_string(&Bytes).as_deref(), Some("[0,7,255]"));
        assert_eq!(to_string(&Bytes), through_value(&Bytes));
    }

    #[test]
    fn what_only_the_value_path_does_is_left_to_it() {
        // A raw value, a float key and an integer beyond 64 bits: this writer gives up, and
        // `to_string_of` gives what the `Value` path does (text, or serde_json's refusal).
        let raw =
            serde_json::value::RawValue::from_string(r#"{"b": 1, "a": [2 ]}"#.into()).unwrap();
        assert_eq!(to_string(&raw), None);
        assert_eq!(
            super::super::to_string_of(&raw).ok().as_deref(),
            Some(r#"{"a":[2],"b":1}"#)
        );
        struct FloatKey;
        impl Serialize for FloatKey {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                use serde::ser::SerializeMap;
                let mut m = s.serialize_map(Some(1))?;
                m.serialize_entry(&1.5f64, &1u8)?;
                m.end()
            }
        }
        assert_eq!(to_string(&FloatKey), None);
        assert_eq!(
            super::super::to_string_of(&FloatKey).ok(),
            through_value(&FloatKey)
        );
        let huge = u128::from(u64::MAX) + 1;
        assert_eq!(to_string(&huge), None);
        assert_eq!(super::super::to_string_of(&huge).ok(), through_value(&huge));
    }
}
