//! Bounds on everything an agent, an LLM or an MCP server supplies. Untrusted input is bounded
//! before it is stored or shown.

use crate::error::EngineError;

/// Size limits, in bytes of UTF-8 (strings) or of canonical JSON (values), and counts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// World, chat, agent, tool-call and principal names.
    pub name: usize,
    /// Tool names (`server__tool`).
    pub tool: usize,
    /// A call's arguments, as canonical JSON.
    pub arguments: usize,
    /// A tool's JSON Schema, as canonical JSON.
    pub schema: usize,
    /// A question's text.
    pub question: usize,
    pub options: usize,
    pub option_id: usize,
    pub option_label: usize,
    pub option_description: usize,
    /// A question's `context` object, as canonical JSON.
    pub context: usize,
    /// Reasons given with decisions and descriptions given with approvals.
    pub reason: usize,
    /// Holds raised by one request (one LLM response).
    pub batch: usize,
    pub idempotency_key: usize,
    /// Largest page of a listing.
    pub page: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            name: 200,
            tool: 200,
            arguments: 256 * 1024,
            schema: 64 * 1024,
            question: 8 * 1024,
            options: 50,
            option_id: 64,
            option_label: 500,
            option_description: 2000,
            context: 64 * 1024,
            reason: 4096,
            batch: 64,
            idempotency_key: 200,
            page: 500,
        }
    }
}

/// The default page size of listings.
pub const DEFAULT_PAGE: usize = 50;

/// The one rule for the size of a page a listing is asked for: `limit` from 1 to `max`, or
/// `default` when none is given. `0` is not "the default": it is refused like any other size
/// outside the range, naming `limit`.
pub fn page_size(limit: Option<usize>, default: usize, max: usize) -> Result<usize, EngineError> {
    match limit.unwrap_or(default) {
        n if (1..=max).contains(&n) => Ok(n),
        n => Err(EngineError::invalid(
            "invalid_input",
            "limit",
            format!("{n} is not from 1 to {max}"),
        )),
    }
}

/// The longest `via` (the client a person decides through), in characters.
pub const VIA: usize = holdpoint_protocol::VIA_MAX;

/// The one rule for a `via`: 1 to [`VIA`] characters, none of them a control character (it is
/// shown on one line in histories). `field` names where it came from.
pub fn via(field: &str, via: &str) -> Result<(), EngineError> {
    let bad = |why: String| Err(EngineError::invalid("invalid_input", field, why));
    let length = via.chars().count();
    if via.trim().is_empty() {
        return bad("must not be empty".into());
    }
    if length > VIA {
        return bad(format!("is {length} characters; at most {VIA} are allowed"));
    }
    if via.chars().any(char::is_control) {
        return bad("must not contain control characters (line breaks, tabs, …)".into());
    }
    Ok(())
}

/// A duration written as text (`"120s"`, `"5m"`) within `min..=max`; the error says what was
/// wrong and what is allowed, with `example` as the example.
pub fn duration_within(
    text: &str,
    (min, max): (std::time::Duration, std::time::Duration),
    example: &str,
) -> Result<std::time::Duration, String> {
    let allowed = || {
        format!(
            "give a duration from {} to {}, such as {example}",
            humantime::format_duration(min),
            humantime::format_duration(max)
        )
    };
    let d = humantime::parse_duration(text.trim())
        .map_err(|e| format!("{text:?} is not a duration ({e}): {}", allowed()))?;
    if d < min || d > max {
        return Err(format!("{text:?} is out of range: {}", allowed()));
    }
    Ok(d)
}
