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

/// Days since 1970-01-01 of a date in the proleptic Gregorian calendar (H. Hinnant's
/// algorithm); negative before it.
pub fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The moment of a valid RFC 3339 timestamp (as `validate::syntax::timestamp` accepts), in
/// milliseconds since the Unix epoch; `None` before 1970 or when it is not valid.
pub fn epoch_millis(timestamp: &str) -> Option<u64> {
    u64::try_from(signed_epoch_millis(timestamp)?).ok()
}

/// The moment of a valid RFC 3339 timestamp as a bound of a selection of what the hub
/// holds (all of it from 1970 on): a moment before 1970 is 1970's start. `None` when it is
/// not valid.
pub fn epoch_millis_bound(timestamp: &str) -> Option<u64> {
    Some(signed_epoch_millis(timestamp)?.max(0) as u64)
}

/// The moment of a valid RFC 3339 timestamp in milliseconds since the Unix epoch, negative
/// before 1970.
fn signed_epoch_millis(timestamp: &str) -> Option<i64> {
    crate::validate::syntax::timestamp(timestamp).ok()?;
    let number =
        |range: std::ops::Range<usize>| -> Option<i64> { timestamp.get(range)?.parse().ok() };
    let (year, month, day) = (number(0..4)?, number(5..7)?, number(8..10)?);
    let (hour, minute, second) = (number(11..13)?, number(14..16)?, number(17..19)?);
    let rest = &timestamp[19..];
    let (fraction, offset) = match rest.strip_prefix('.') {
        Some(after) => {
            let digits = after.bytes().take_while(u8::is_ascii_digit).count();
            (&after[..digits], &after[digits..])
        }
        None => ("", rest),
    };
    let millis: i64 = format!("{fraction:0<3}")[..3].parse().ok()?;
    let offset_minutes = match offset {
        "Z" | "z" => 0,
        _ => {
            let sign = if offset.starts_with('-') { -1 } else { 1 };
            sign * (offset.get(1..3)?.parse::<i64>().ok()? * 60
                + offset.get(4..6)?.parse::<i64>().ok()?)
        }
    };
    let days = days_from_civil(year, month, day);
    let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset_minutes * 60;
    Some(seconds * 1000 + millis)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_bound_before_1970_is_1970s_start() {
        assert_eq!(super::epoch_millis("1969-07-20T20:17:40Z"), None);
        assert_eq!(super::epoch_millis_bound("1969-07-20T20:17:40Z"), Some(0));
        assert_eq!(super::epoch_millis_bound("0001-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            super::epoch_millis_bound("1970-01-01T00:00:01Z"),
            Some(1000)
        );
        assert_eq!(super::epoch_millis_bound("yesterday"), None);
    }

    #[test]
    fn timestamps_are_read_back_to_their_moment() {
        for ms in [0, 951_782_400_123, 1_795_346_130_250] {
            assert_eq!(super::epoch_millis(&super::utc_timestamp(ms)), Some(ms));
        }
        assert_eq!(
            super::epoch_millis("2026-11-22T12:15:30.25+01:00"),
            Some(1_795_346_130_250)
        );
        assert_eq!(
            super::epoch_millis("2026-11-22T11:15:30Z"),
            Some(1_795_346_130_000)
        );
        assert_eq!(super::epoch_millis("1969-12-31T23:59:59Z"), None);
        assert_eq!(super::epoch_millis("yesterday"), None);
    }

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
