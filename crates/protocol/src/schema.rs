//! OpenAPI schemas of the types that serialise as strings.

use utoipa::openapi::schema::{ObjectBuilder, Schema, SchemaFormat, Type};
use utoipa::openapi::{KnownFormat, RefOr};

use crate::{Deadline, Timestamp};

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
