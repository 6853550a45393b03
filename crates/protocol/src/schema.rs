//! OpenAPI schemas of the types that serialise as strings.

use utoipa::openapi::schema::{ObjectBuilder, Schema, SchemaFormat, Type};
use utoipa::openapi::{KnownFormat, RefOr};

use crate::{Deadline, Timestamp};

/// Text without control characters (Unicode's: C0, DEL and C1), as Rust's
/// `char::is_control` finds them.
pub const NO_CONTROL: &str = "^[^\\u0000-\\u001f\\u007f-\\u009f]*$";

/// An agent's `llm.headers`: names are HTTP tokens, values have no control characters.
pub(crate) fn llm_headers() -> utoipa::openapi::schema::Object {
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .property_names(Some(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .pattern(Some("^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,100}$")),
        ))
        .additional_properties(Some(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .max_length(Some(8192))
                .pattern(Some(NO_CONTROL)),
        ))
        .build()
}

/// A route's `escalate_to`: a group's name, or a list of them.
pub(crate) fn one_or_many_names() -> RefOr<Schema> {
    use utoipa::openapi::schema::{ArrayBuilder, OneOfBuilder};
    let name = || ObjectBuilder::new().schema_type(Type::String);
    OneOfBuilder::new()
        .description(Some(
            "The groups notified one after another while nobody decides (a name or a list).",
        ))
        .item(name())
        .item(ArrayBuilder::new().items(name()))
        .into()
}

/// An internally tagged enum whose variants are objects: one object per variant, its fields
/// and the tag (required, one value), as `oneOf`.
pub(crate) fn tagged<'a>(
    tag: &str,
    variants: impl IntoIterator<Item = (&'a str, RefOr<Schema>)>,
    description: &str,
) -> RefOr<Schema> {
    let mut one_of = utoipa::openapi::schema::OneOfBuilder::new().description(Some(description));
    for (value, schema) in variants {
        let tag_schema = ObjectBuilder::new()
            .schema_type(Type::String)
            .enum_values(Some([value]));
        let schema = match schema {
            RefOr::T(Schema::Object(mut object)) => {
                object.properties.insert(tag.to_owned(), tag_schema.into());
                object.required.insert(0, tag.to_owned());
                RefOr::T(Schema::Object(object))
            }
            other => other,
        };
        one_of = one_of.item(schema);
    }
    one_of.into()
}

/// A decision for a whole batch: `Decision`'s own schema, only its `approve`, `deny` and
/// `deny_stop` actions.
pub(crate) fn batch_decision() -> RefOr<Schema> {
    use utoipa::PartialSchema;
    let mut schema = crate::Decision::schema();
    if let RefOr::T(Schema::OneOf(one_of)) = &mut schema {
        one_of.items.retain(|item| {
            let Ok(value) = serde_json::to_value(item) else {
                return true;
            };
            value["properties"]["action"]["enum"]
                .as_array()
                .is_none_or(|actions| {
                    actions
                        .iter()
                        .any(|a| ["approve", "deny", "deny_stop"].iter().any(|k| a == k))
                })
        });
        one_of.description = Some("`approve`, `deny` or `deny_stop`".to_owned());
    }
    schema
}

pub(crate) fn uuid() -> RefOr<Schema> {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .format(Some(SchemaFormat::KnownFormat(KnownFormat::Uuid)))
        .into()
}

pub(crate) fn string(format: Option<&str>, description: &str, example: &str) -> RefOr<Schema> {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .format(format.map(|f| SchemaFormat::Custom(f.to_owned())))
        .description(Some(description))
        .examples([serde_json::json!(example)])
        .into()
}

impl utoipa::PartialSchema for Timestamp {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        string(
            Some("date-time"),
            "RFC 3339, UTC, millisecond precision",
            "2026-11-18T11:06:40.123Z",
        )
    }
}

impl utoipa::ToSchema for Timestamp {}

impl utoipa::PartialSchema for Deadline {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        // Not JSON Schema's `duration` format, which is ISO 8601's ("PT15M").
        string(
            None,
            "A duration such as \"90s\", \"15m\", \"2h 30m\", or \"never\"",
            "15m",
        )
    }
}

impl utoipa::ToSchema for Deadline {}
