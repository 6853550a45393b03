//! Request extractors whose errors name the field at fault.

use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use bytes::Bytes;
use serde::de::DeserializeOwned;
use utoipa::IntoParams;
use utoipa::openapi::path::ParameterIn;

use crate::error::ApiError;

/// How long a request body may take to arrive once its headers have.
const BODY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// A JSON body. Errors: 413 (too large), 415 (not JSON), 400 (malformed), 422 (a field is wrong,
/// named by its path).
pub struct Body<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for Body<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let content_type = req
            .headers()
            .get(axum::http::header::CONTENT_TYPE)
            .map(|v| v.to_str().unwrap_or_default().to_owned());
        // A body needs `Content-Type: application/json`; a request with no body at all needs
        // none (`POST …/withdraw` needs no fields).
        let json = content_type.as_deref().map(|v| {
            v.trim_start()
                .to_ascii_lowercase()
                .starts_with("application/json")
        });
        if json == Some(false) {
            return Err(unsupported_media_type());
        }
        let patch = req.method() == axum::http::Method::PATCH;
        let bytes = read(req, state).await?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            // A PATCH says what to change: without a body it would answer as if it had
            // changed something. (`{}` is a PATCH that changes nothing, on purpose.)
            if patch {
                return Err(ApiError::new(
                    StatusCode::BAD_REQUEST,
                    "missing_body",
                    "a PATCH needs a JSON object body with the fields to change",
                ));
            }
            // No body at all is an empty object.
            return parse(b"{}").map(Body);
        }
        if json.is_none() {
            return Err(unsupported_media_type());
        }
        object(&bytes)?;
        parse(&bytes).map(Body)
    }
}

/// Every body of the API is a JSON object. serde would also read a struct from an array of
/// its fields' values (`["lab"]` as `{"name": "lab"}`), which no client means.
fn object(bytes: &[u8]) -> Result<(), ApiError> {
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
    if first == Some(&b'{') {
        return Ok(());
    }
    serde_json::from_slice::<serde::de::IgnoredAny>(bytes).map_err(malformed)?;
    Err(ApiError::field(
        "",
        "the body must be a JSON object ({\"field\": value, …})",
    ))
}

fn unsupported_media_type() -> ApiError {
    unsupported("application/json")
}

fn unsupported(media_type: &str) -> ApiError {
    ApiError::new(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
        format!("send the body as {media_type} (with Content-Type: {media_type})"),
    )
}

/// The whole body, within the size limit (413) and in time (408).
pub(crate) async fn read<S: Send + Sync>(req: Request, state: &S) -> Result<Bytes, ApiError> {
    // A body that stops arriving must not hold the request (and its connection) forever.
    let read = tokio::time::timeout(BODY_TIMEOUT, Bytes::from_request(req, state))
        .await
        .map_err(|_| {
            ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                "body_timeout",
                format!(
                    "the body did not arrive within {} seconds",
                    BODY_TIMEOUT.as_secs()
                ),
            )
        })?;
    read.map_err(|e| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "body_too_large",
                "the body is larger than the server accepts (server.max_body)",
            )
        } else {
            ApiError::new(StatusCode::BAD_REQUEST, "bad_request", e.body_text())
        }
    })
}

/// A form body (`application/x-www-form-urlencoded`), as a browser's HTML form sends it.
/// Errors: 413, 408, 415 (another type), 422 (a field is missing or wrong, named).
pub struct Form<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for Form<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        const FORM: &str = "application/x-www-form-urlencoded";
        let form = req
            .headers()
            .get(axum::http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim_start().to_ascii_lowercase().starts_with(FORM));
        if !form {
            return Err(unsupported(FORM));
        }
        let bytes = read(req, state).await?;
        let de = serde_urlencoded::Deserializer::new(form_urlencoded::parse(&bytes));
        serde_path_to_error::deserialize(de)
            .map(Form)
            .map_err(|e| field_error("", &e.path().to_string(), &e.inner().to_string()))
    }
}

/// Reads JSON, naming the path of a field that does not fit.
pub fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    match serde_path_to_error::deserialize(&mut de) {
        Ok(value) => {
            de.end().map_err(malformed)?;
            no_repeated_keys(bytes)?;
            Ok(value)
        }
        Err(e) => {
            let path = e.path().to_string();
            let inner = e.into_inner();
            if inner.is_syntax() || inner.is_eof() {
                return Err(malformed(inner));
            }
            no_repeated_keys(bytes)?;
            let whole = serde_json::from_slice(bytes).ok();
            Err(located::<T>(whole.as_ref(), "", &path, &inner))
        }
    }
}

fn malformed(e: serde_json::Error) -> ApiError {
    ApiError::new(
        StatusCode::BAD_REQUEST,
        "malformed_json",
        format!("the body is not valid JSON: {e}"),
    )
}

/// Reads a part of a request already parsed as JSON; errors name the field under `at`.
pub fn parse_value<T: DeserializeOwned>(value: serde_json::Value, at: &str) -> Result<T, ApiError> {
    let whole = value.clone();
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        located::<T>(Some(&whole), at, &path, e.inner())
    })
}

/// The tags of the API's internally tagged objects (a decision's `action`, a hold request's
/// `kind`). Inside such an object serde reports errors at the object, not at the field.
const TAGS: [&str; 2] = ["action", "kind"];

/// The error of reading `whole` as `T` at `path`, with the field at fault named. When the
/// error is reported at a tagged object (serde loses the path inside one), the field is found
/// by reading `whole` again without each of the object's fields in turn: the one whose
/// absence changes the error is at fault.
fn located<T: DeserializeOwned>(
    whole: Option<&serde_json::Value>,
    at: &str,
    path: &str,
    error: &impl std::fmt::Display,
) -> ApiError {
    let message = error.to_string();
    let message = without_position(&message);
    let path = if path == "." { "" } else { path };
    let named = ["missing field `", "unknown field `", "unknown variant `"]
        .iter()
        .any(|p| message.contains(p));
    let tagged = whole
        .and_then(|w| node(w, path))
        .and_then(serde_json::Value::as_object)
        .filter(|o| TAGS.iter().any(|t| o.contains_key(*t)));
    let Some(object) = tagged else {
        return field_error(at, path, message);
    };
    if message.contains("unknown variant `")
        && let Some(tag) = TAGS.iter().find(|t| object.contains_key(**t))
    {
        return field_error(at, &join(path, tag), message);
    }
    if named {
        return field_error(at, path, message);
    }
    let culprit = object
        .keys()
        .filter(|k| !TAGS.contains(&k.as_str()))
        .find(|key| {
            let Some(mut without) = whole.cloned() else {
                return false;
            };
            if let Some(serde_json::Value::Object(o)) = node_mut(&mut without, path) {
                o.remove(*key);
            }
            match serde_path_to_error::deserialize::<_, T>(without) {
                Ok(_) => true,
                Err(e) => {
                    let again = e.path().to_string();
                    let again = if again == "." { "" } else { again.as_str() };
                    again != path || without_position(&e.inner().to_string()) != message
                }
            }
        });
    match culprit {
        Some(key) => field_error(at, &join(path, key), message),
        None => field_error(at, path, message),
    }
}

/// serde_json's message without " at line 1 column 9": the path says where.
fn without_position(message: &str) -> &str {
    message.split(" at line ").next().unwrap_or(message)
}

/// The steps of a path as serde_path_to_error writes it: `items[1].options`.
fn steps(path: &str) -> Vec<Result<&str, usize>> {
    let mut out = Vec::new();
    for part in path.split('.').filter(|p| !p.is_empty()) {
        let mut pieces = part.split('[');
        if let Some(name) = pieces.next().filter(|n| !n.is_empty()) {
            out.push(Ok(name));
        }
        for index in pieces {
            if let Ok(i) = index.trim_end_matches(']').parse() {
                out.push(Err(i));
            }
        }
    }
    out
}

fn node<'a>(value: &'a serde_json::Value, path: &str) -> Option<&'a serde_json::Value> {
    steps(path)
        .into_iter()
        .try_fold(value, |v, step| match step {
            Ok(name) => v.get(name),
            Err(i) => v.get(i),
        })
}

fn node_mut<'a>(value: &'a mut serde_json::Value, path: &str) -> Option<&'a mut serde_json::Value> {
    steps(path)
        .into_iter()
        .try_fold(value, |v, step| match step {
            Ok(name) => v.get_mut(name),
            Err(i) => v.get_mut(i),
        })
}

/// Refuses an object with a key twice: readers disagree on which one counts (serde_json keeps
/// the last, others the first), so a body that says two things is not read at all.
fn no_repeated_keys(bytes: &[u8]) -> Result<(), ApiError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    serde::de::DeserializeSeed::deserialize(
        Walk {
            path: String::new(),
        },
        &mut de,
    )
    .map_err(|e| {
        let message = e.to_string();
        let message = without_position(&message);
        match message.split_once('\u{0}') {
            Some((field, what)) => ApiError::field(field, what),
            None => ApiError::field("", message),
        }
    })
}

/// Walks a JSON document, keeping the path, to find a key that appears twice.
struct Walk {
    path: String,
}

impl<'de> serde::de::DeserializeSeed<'de> for Walk {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Walk {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("JSON")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut i = 0;
        while seq
            .next_element_seed(Walk {
                path: format!("{}[{i}]", self.path),
            })?
            .is_some()
        {
            i += 1;
        }
        Ok(())
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = std::collections::HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            let path = join(&self.path, &key);
            if !seen.insert(key) {
                // The field and the message, split by a NUL that JSON text cannot hold raw.
                return Err(serde::de::Error::custom(format!(
                    "{path}\u{0}appears more than once"
                )));
            }
            map.next_value_seed(Walk { path })?;
        }
        Ok(())
    }
}

fn field_error(at: &str, path: &str, error: &str) -> ApiError {
    let path = if path == "." { "" } else { path };
    let mut field = join(at, path);
    let mut message = without_position(error).to_owned();
    // serde reports a missing field at the object that lacks it: name the field itself.
    if let Some(name) = quoted_after(&message, "missing field `") {
        field = join(&field, &name);
        message = "is required".into();
    } else if let Some(name) = quoted_after(&message, "unknown field `") {
        let allowed = message
            .split_once(", expected ")
            .map(|(_, rest)| format!(" (expected {rest})"))
            .unwrap_or_default();
        // The path ends at the unknown field, except inside an internally tagged enum
        // (a decision), where serde loses it.
        if !(field == name || field.ends_with(&format!(".{name}"))) {
            field = join(&field, &name);
        }
        message = format!("is not a known field{allowed}");
    }
    ApiError::field(&field, plain_types(&message))
}

fn join(outer: &str, inner: &str) -> String {
    match (outer.is_empty(), inner.is_empty()) {
        (_, true) => outer.to_owned(),
        (true, false) => inner.to_owned(),
        (false, false) => format!("{outer}.{inner}"),
    }
}

/// `x` in "…prefix`x`…".
fn quoted_after(message: &str, prefix: &str) -> Option<String> {
    let rest = message.split_once(prefix)?.1;
    Some(rest.split_once('`')?.0.to_owned())
}

/// serde's words for types, in the API's words.
fn plain_types(message: &str) -> String {
    let words: [(&str, &str); 9] = [
        ("expected usize", "expected a whole number, 0 or more"),
        ("expected u64", "expected a whole number, 0 or more"),
        (
            "expected u32",
            "expected a whole number from 0 to 4294967295",
        ),
        ("expected u16", "expected a whole number from 0 to 65535"),
        ("expected u8", "expected a whole number from 0 to 255"),
        ("expected i64", "expected a whole number"),
        ("expected f64", "expected a number"),
        ("expected a sequence", "expected a list"),
        ("expected a map", "expected an object"),
    ];
    let mut out = message.to_owned();
    for (from, to) in words {
        out = out.replace(from, to);
    }
    match out.split_once("expected struct ") {
        Some((before, _)) => format!("{before}expected an object"),
        None => out,
    }
}

/// Query parameters, named in errors. A value that does not read says what the parameter
/// allows, in the words of its schema in the OpenAPI document (`limit: must be a whole number
/// from 1 to 1000`), not the parser's (`invalid digit found in string`).
pub struct Params<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + IntoParams> FromRequestParts<S> for Params<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let query = parts.uri.query().unwrap_or_default();
        let de = serde_urlencoded::Deserializer::new(form_urlencoded::parse(query.as_bytes()));
        serde_path_to_error::deserialize(de)
            .map(Params)
            .map_err(|e| {
                let path = e.path().to_string();
                // A query string is not a body: 400, as for a bad header.
                let mut err = match allowed::<T>(&path) {
                    Some(allowed) => ApiError::field(&path, allowed),
                    None => field_error("", &path, &e.inner().to_string()),
                };
                err.status = StatusCode::BAD_REQUEST;
                err
            })
    }
}

/// What the query parameter `name` of `T` allows, in words, when its schema says more than
/// the parser's message: a number's range.
fn allowed<T: IntoParams>(name: &str) -> Option<String> {
    let params = T::into_params(|| Some(ParameterIn::Query));
    let schema = params.iter().find(|p| p.name == name)?.schema.as_ref()?;
    let schema = serde_json::to_value(schema).ok()?;
    let integer = match &schema["type"] {
        serde_json::Value::String(t) => t == "integer",
        serde_json::Value::Array(types) => types.iter().any(|t| t == "integer"),
        _ => false,
    };
    if !integer {
        return None;
    }
    let minimum = schema["minimum"].as_u64().unwrap_or(0);
    Some(match schema["maximum"].as_u64() {
        Some(maximum) => format!("must be a whole number from {minimum} to {maximum}"),
        None => format!("must be a whole number, {minimum} or more"),
    })
}
