//! Moments as RFC 3339 timestamps, the format of the `time` attribute (spec.md §Type
//! System): for the hub's own timestamps and for events made on the command line.

/// A time in milliseconds since the Unix epoch as an RFC 3339 UTC timestamp with
/// milliseconds (`2026-11-22T10:15:30.250Z`).
pub fn utc_timestamp(ms: u64) -> String {
    let (secs, millis) = (ms / 1000, ms % 1000);
    let (days, rest) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn timestamps_are_rfc3339_and_valid_time_attributes() {
        assert_eq!(super::utc_timestamp(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            super::utc_timestamp(951_782_400_123),
            "2000-02-29T00:00:00.123Z"
        );
        let now = super::utc_timestamp(1_795_346_130_250);
        assert_eq!(now, "2026-11-22T11:15:30.250Z");
        assert!(crate::validate::syntax::timestamp(&now).is_ok());
    }
}
