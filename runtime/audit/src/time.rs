//! Times as people read them in the log, `gantry audit`, `gantry auth list` and the control
//! page: RFC 3339 in UTC.

use std::time::{Duration, UNIX_EPOCH};

/// The last millisecond RFC 3339's four-digit year can name.
const LAST_MS: u128 = 253_402_300_799_999;

fn at(ms: u128) -> std::time::SystemTime {
    // Clamped: a clock (or a stored value) past year 9999 must not fail a log line.
    UNIX_EPOCH + Duration::from_millis(u64::try_from(ms.min(LAST_MS)).unwrap_or(0))
}

/// `ms` since the epoch, to the millisecond: `2026-12-06T03:05:22.961Z`.
pub fn rfc3339_millis(ms: u128) -> String {
    humantime::format_rfc3339_millis(at(ms)).to_string()
}

/// `ms` since the epoch, to the second: `2026-12-06T03:05:22Z`; before the epoch, the epoch.
pub fn rfc3339_seconds(ms: i64) -> String {
    humantime::format_rfc3339_seconds(at(u128::try_from(ms).unwrap_or(0))).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_utc_and_bounded() {
        assert_eq!(
            rfc3339_millis(1_796_526_322_961),
            "2026-12-06T03:05:22.961Z"
        );
        assert_eq!(rfc3339_seconds(1_796_526_322_961), "2026-12-06T03:05:22Z");
        assert_eq!(rfc3339_seconds(-5), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339_millis(u128::MAX), "9999-12-31T23:59:59.999Z");
    }
}
