//! Audit timestamps: RFC 3339 in UTC with milliseconds and `Z`, computed from unix time
//! without a calendar crate (days → civil date after Howard Hinnant's `civil_from_days`).

use std::time::{SystemTime, UNIX_EPOCH};

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
    let days = ms.div_euclid(86_400_000);
    let in_day = ms.rem_euclid(86_400_000);
    let (year, month, day) = civil_from_days(days);
    let (h, m, s, milli) = (
        in_day / 3_600_000,
        in_day / 60_000 % 60,
        in_day / 1000 % 60,
        in_day % 1000,
    );
    format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}.{milli:03}Z")
}

/// Days since 1970-01-01 → (year, month 1..=12, day 1..=31), proleptic Gregorian.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // [0, 146096]
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // [0, 365]
    let mp = (5 * doy + 2) / 153; // [0, 11], March-based
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
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
    fn every_day_for_four_centuries_follows_the_previous_one() {
        // Walk day by day from 1800 to 2200 and check the date advances by exactly one
        // calendar day each time, with correct month lengths and leap years.
        let leap = |y: i64| (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
        let month_len = |y: i64, m: i64| match m {
            2 if leap(y) => 29,
            2 => 28,
            4 | 6 | 9 | 11 => 30,
            _ => 31,
        };
        let start = -62_091; // 1800-01-01
        let mut prev = civil_from_days(start);
        assert_eq!(prev, (1800, 1, 1));
        for days in start + 1..start + 146_097 {
            let (y, m, d) = civil_from_days(days);
            let (py, pm, pd) = prev;
            let expected = if pd < month_len(py, pm) {
                (py, pm, pd + 1)
            } else if pm < 12 {
                (py, pm + 1, 1)
            } else {
                (py + 1, 1, 1)
            };
            assert_eq!((y, m, d), expected, "day {days}");
            prev = (y, m, d);
        }
        assert_eq!(prev, (2199, 12, 31));
    }

    #[test]
    fn now_is_after_2024() {
        assert!(now_unix_ms() > 1_704_067_200_000);
        assert!(rfc3339_millis(now_unix_ms()).ends_with('Z'));
    }
}
