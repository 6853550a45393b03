//! Points in time and deadline specifications.
//!
//! A [`Timestamp`] is wall-clock time in milliseconds since the Unix epoch: deadlines must mean
//! the same instant after a restart, so they cannot be monotonic-clock instants. On the wire it
//! is an RFC 3339 string in UTC with millisecond precision.

use std::fmt;
use std::str::FromStr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Milliseconds since the Unix epoch, UTC.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(i64);

impl Timestamp {
    pub const EPOCH: Timestamp = Timestamp(0);

    pub const fn from_millis(ms: i64) -> Self {
        Timestamp(ms)
    }

    pub const fn as_millis(self) -> i64 {
        self.0
    }

    /// `self + d`, saturating at the end of representable time.
    pub fn saturating_add(self, d: Duration) -> Self {
        let ms = i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        Timestamp(self.0.saturating_add(ms))
    }

    /// `self - d`, saturating at the start of representable time.
    pub fn saturating_sub(self, d: Duration) -> Self {
        let ms = i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        Timestamp(self.0.saturating_sub(ms))
    }

    /// The time from `earlier` to `self`, or zero when `earlier` is later.
    pub fn duration_since(self, earlier: Timestamp) -> Duration {
        Duration::from_millis(u64::try_from(self.0.saturating_sub(earlier.0)).unwrap_or(0))
    }

    fn to_system_time(self) -> SystemTime {
        let ms = u64::try_from(self.0).unwrap_or(0);
        UNIX_EPOCH + Duration::from_millis(ms)
    }
}

impl From<SystemTime> for Timestamp {
    fn from(t: SystemTime) -> Self {
        match t.duration_since(UNIX_EPOCH) {
            Ok(d) => Timestamp(i64::try_from(d.as_millis()).unwrap_or(i64::MAX)),
            Err(_) => Timestamp(0),
        }
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&humantime::format_rfc3339_millis(self.to_system_time()), f)
    }
}

impl fmt::Debug for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Timestamp({self})")
    }
}

impl FromStr for Timestamp {
    type Err = humantime::TimestampError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        humantime::parse_rfc3339_weak(s).map(Timestamp::from)
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(|e| {
            serde::de::Error::custom(format!("{s:?} is not an RFC 3339 timestamp: {e}"))
        })
    }
}

/// How long a hold may wait: a duration, or `never` (only where configured explicitly).
/// Written as `"90s"`, `"15m"`, `"2h 30m"`, `"1day"` or `"never"`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Deadline {
    After(Duration),
    Never,
}

/// Text that is neither a duration nor `never`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseDeadlineError(pub String);

impl fmt::Display for ParseDeadlineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?} is not a deadline: write a positive duration such as \"90s\", \"15m\", \"2h\", or \"never\"",
            self.0
        )
    }
}

impl std::error::Error for ParseDeadlineError {}

impl FromStr for Deadline {
    type Err = ParseDeadlineError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let trimmed = s.trim();
        if trimmed.eq_ignore_ascii_case("never") {
            return Ok(Deadline::Never);
        }
        match humantime::parse_duration(trimmed) {
            Ok(d) if !d.is_zero() => Ok(Deadline::After(d)),
            _ => Err(ParseDeadlineError(s.chars().take(64).collect())),
        }
    }
}

impl fmt::Display for Deadline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Deadline::Never => f.write_str("never"),
            Deadline::After(d) => fmt::Display::fmt(&humantime::format_duration(*d), f),
        }
    }
}

impl Serialize for Deadline {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Deadline {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_print_and_parse_as_rfc3339_millis() {
        let t = Timestamp::from_millis(1_795_000_000_123);
        assert_eq!(t.to_string(), "2026-11-18T11:06:40.123Z");
        assert_eq!(t.to_string().parse::<Timestamp>().unwrap(), t);
        assert_eq!(
            serde_json::to_string(&t).unwrap(),
            "\"2026-11-18T11:06:40.123Z\""
        );
    }

    #[test]
    fn deadlines_parse_durations_and_never() {
        assert_eq!("15m".parse(), Ok(Deadline::After(Duration::from_secs(900))));
        assert_eq!(
            "2h 30m".parse(),
            Ok(Deadline::After(Duration::from_secs(9000)))
        );
        assert_eq!("never".parse(), Ok(Deadline::Never));
        assert!("0s".parse::<Deadline>().is_err());
        let err = "soon".parse::<Deadline>().unwrap_err();
        assert!(
            err.to_string().contains("\"soon\" is not a deadline"),
            "{err}"
        );
    }

    #[test]
    fn timestamp_arithmetic_saturates() {
        let t = Timestamp::from_millis(1000);
        assert_eq!(t.saturating_add(Duration::from_secs(1)).as_millis(), 2000);
        assert_eq!(
            t.duration_since(Timestamp::from_millis(4000)),
            Duration::ZERO
        );
        assert_eq!(
            Timestamp::from_millis(i64::MAX)
                .saturating_add(Duration::MAX)
                .as_millis(),
            i64::MAX
        );
    }
}
