//! One clock for every process: milliseconds since the Unix epoch, and that instant as
//! UTC text in the three forms nl2sh shows.
//!
//! * [`rfc3339_millis`]: `2026-01-02T03:04:05.678Z`, the audit trail's and the A2A task
//!   documents' timestamps (RFC 3339 in UTC with milliseconds and `Z`).
//! * [`rfc3339_seconds`]: `2026-01-02T03:04:05Z`, a list line (the Web console's task
//!   list: the document has the exact time).
//! * [`readable_utc`]: `2026-01-02 03:04:05 UTC`, what the owner's terminal shows.
//!
//! Every form clamps the instant to the years 0000 to 9999, so the text always has the
//! same shape (other years only arise from a badly set clock or a forged value).

use std::time::{SystemTime, UNIX_EPOCH};

use chrono::{DateTime, SecondsFormat, Utc};

/// Milliseconds since the unix epoch now; a clock set before 1970 reads as negative.
pub fn now_unix_ms() -> i64 {
    match SystemTime::now().duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_millis()).unwrap_or(i64::MAX),
        Err(e) => i64::try_from(e.duration().as_millis()).map_or(i64::MIN, |ms| -ms),
    }
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub fn rfc3339_millis(unix_ms: i64) -> String {
    instant(unix_ms).to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// `YYYY-MM-DDTHH:MM:SSZ` (the milliseconds dropped, not rounded).
pub fn rfc3339_seconds(unix_ms: i64) -> String {
    instant(unix_ms).format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// `YYYY-MM-DD HH:MM:SS UTC` (the milliseconds dropped, not rounded).
pub fn readable_utc(unix_ms: i64) -> String {
    instant(unix_ms).format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

/// An RFC 3339 timestamp (any offset, any fraction) as the smallest whole millisecond
/// at or after it: a filter "at or after `text`" keeps exactly the records whose stored
/// millisecond is at least this. `None` for anything that is not RFC 3339.
/// Seconds left as the consoles say them: `expired`, `45 s left`, `2 min 05 s left`.
pub fn time_left(secs: u64) -> String {
    if secs == 0 {
        "expired".to_string()
    } else if secs < 60 {
        format!("{secs} s left")
    } else {
        format!("{} min {:02} s left", secs / 60, secs % 60)
    }
}

pub fn parse_rfc3339_ceil_ms(text: &str) -> Option<i64> {
    let t = DateTime::parse_from_rfc3339(text).ok()?;
    let ms = t.timestamp_millis();
    let sub_ms = t.timestamp_subsec_nanos() % 1_000_000;
    Some(if sub_ms > 0 { ms.saturating_add(1) } else { ms })
}

/// `unix_ms` clamped to 0000-01-01T00:00:00.000Z ..= 9999-12-31T23:59:59.999Z.
fn instant(unix_ms: i64) -> DateTime<Utc> {
    const MIN_MS: i64 = -62_167_219_200_000;
    const MAX_MS: i64 = 253_402_300_799_999;
    // Every instant in the clamped range is one chrono represents.
    DateTime::<Utc>::from_timestamp_millis(unix_ms.clamp(MIN_MS, MAX_MS)).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Instants around the edges of days, months, leap years and centuries, before and
    /// after the epoch, and the ends of the clamped range.
    const CASES: [(i64, &str); 17] = [
        (0, "1970-01-01T00:00:00.000Z"),
        (1, "1970-01-01T00:00:00.001Z"),
        (-1, "1969-12-31T23:59:59.999Z"),
        (-1000, "1969-12-31T23:59:59.000Z"),
        (86_399_999, "1970-01-01T23:59:59.999Z"),
        (951_782_400_000, "2000-02-29T00:00:00.000Z"),
        (951_868_800_000, "2000-03-01T00:00:00.000Z"),
        (1_700_000_000_123, "2023-11-14T22:13:20.123Z"),
        (1_709_251_199_999, "2024-02-29T23:59:59.999Z"),
        (1_735_689_599_123, "2024-12-31T23:59:59.123Z"),
        (1_735_689_600_000, "2025-01-01T00:00:00.000Z"),
        (4_102_444_800_000, "2100-01-01T00:00:00.000Z"),
        (4_107_456_000_000, "2100-02-28T00:00:00.000Z"),
        (4_107_542_400_000, "2100-03-01T00:00:00.000Z"),
        (-2_208_988_800_000, "1900-01-01T00:00:00.000Z"),
        (i64::MIN, "0000-01-01T00:00:00.000Z"),
        (i64::MAX, "9999-12-31T23:59:59.999Z"),
    ];

    #[test]
    fn millis_form() {
        for (ms, text) in CASES {
            assert_eq!(rfc3339_millis(ms), text, "{ms}");
        }
        // Just outside the range: clamped, never a five-digit or signed year.
        assert_eq!(
            rfc3339_millis(253_402_300_800_000),
            "9999-12-31T23:59:59.999Z"
        );
        assert_eq!(
            rfc3339_millis(-62_167_219_200_001),
            "0000-01-01T00:00:00.000Z"
        );
    }

    /// The other forms are the same instant, the milliseconds dropped (never rounded up
    /// into the next second).
    #[test]
    fn seconds_and_readable_forms() {
        for (ms, text) in CASES {
            let (date, time) = (&text[..10], &text[11..19]);
            assert_eq!(rfc3339_seconds(ms), format!("{date}T{time}Z"), "{ms}");
            assert_eq!(readable_utc(ms), format!("{date} {time} UTC"), "{ms}");
        }
        assert_eq!(rfc3339_seconds(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339_seconds(951_782_400_000), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339_seconds(-1000), "1969-12-31T23:59:59Z");
        assert_eq!(rfc3339_seconds(999), "1970-01-01T00:00:00Z");
        assert_eq!(readable_utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(readable_utc(1_700_000_000_123), "2023-11-14 22:13:20 UTC");
        assert_eq!(readable_utc(951_782_400_000), "2000-02-29 00:00:00 UTC");
        assert_eq!(readable_utc(-1000), "1969-12-31 23:59:59 UTC");
        assert_eq!(readable_utc(-1), "1969-12-31 23:59:59 UTC");
    }

    #[test]
    fn parsing_rounds_up_to_the_millisecond() {
        assert_eq!(
            parse_rfc3339_ceil_ms("2023-11-14T22:13:20.123Z"),
            Some(1_700_000_000_123)
        );
        assert_eq!(
            parse_rfc3339_ceil_ms("2023-11-14T23:13:20.1231+01:00"),
            Some(1_700_000_000_124)
        );
        for (ms, text) in CASES.into_iter().take(15) {
            assert_eq!(parse_rfc3339_ceil_ms(text), Some(ms), "{text}");
        }
        for bad in ["", "yesterday", "2023-11-14", "2023-11-14T22:13:20"] {
            assert_eq!(parse_rfc3339_ceil_ms(bad), None, "{bad}");
        }
    }

    #[test]
    fn now_is_after_2024() {
        assert!(now_unix_ms() > 1_704_067_200_000);
        assert!(rfc3339_millis(now_unix_ms()).ends_with('Z'));
    }
}
