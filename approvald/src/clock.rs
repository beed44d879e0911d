//! Audit timestamps: RFC 3339 in UTC with milliseconds and `Z`.

use std::time::{SystemTime, UNIX_EPOCH};

use chrono::{DateTime, SecondsFormat, Utc};

/// Milliseconds since the unix epoch now; a clock set before 1970 reads as negative.
pub fn now_unix_ms() -> i64 {
    match SystemTime::now().duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_millis()).unwrap_or(i64::MAX),
        Err(e) => i64::try_from(e.duration().as_millis()).map_or(i64::MIN, |ms| -ms),
    }
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ`. Years outside 0..=9999 are clamped to that range's ends so
/// the text always has the same shape (they only arise from a badly set clock).
pub fn rfc3339_millis(unix_ms: i64) -> String {
    // 0000-01-01T00:00:00.000Z and 9999-12-31T23:59:59.999Z.
    const MIN_MS: i64 = -62_167_219_200_000;
    const MAX_MS: i64 = 253_402_300_799_999;
    let ms = unix_ms.clamp(MIN_MS, MAX_MS);
    // Every instant in the clamped range is one chrono represents.
    DateTime::<Utc>::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(SecondsFormat::Millis, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_instants() {
        let cases = [
            (0, "1970-01-01T00:00:00.000Z"),
            (1, "1970-01-01T00:00:00.001Z"),
            (-1, "1969-12-31T23:59:59.999Z"),
            (86_399_999, "1970-01-01T23:59:59.999Z"),
            (951_782_400_000, "2000-02-29T00:00:00.000Z"),
            (951_868_800_000, "2000-03-01T00:00:00.000Z"),
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
        for (ms, text) in cases {
            assert_eq!(rfc3339_millis(ms), text, "{ms}");
        }
    }

    #[test]
    fn now_is_after_2024() {
        assert!(now_unix_ms() > 1_704_067_200_000);
        assert!(rfc3339_millis(now_unix_ms()).ends_with('Z'));
    }
}
