//! Times as people read them: "2 min ago", "in 89 days" (docs/cli.md, "Output").
//! `--json` keeps the exact RFC 3339 time; a human table shows this instead, since
//! `2027-03-03T06:35:35.450Z` makes its reader do the arithmetic.

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// Closer to now than this reads as "just now".
const JUST_NOW_SECS: u64 = 5;

/// `iso` relative to `now`. A value that is not an RFC 3339 time is shown as it came
/// (the table cleans it like any other cell).
pub fn relative(iso: &str, now: OffsetDateTime) -> String {
    let Ok(at) = OffsetDateTime::parse(iso, &Rfc3339) else {
        return iso.to_string();
    };
    let secs = (at - now).whole_seconds();
    let span = secs.unsigned_abs();
    if span < JUST_NOW_SECS {
        "just now".to_string()
    } else if secs < 0 {
        format!("{} ago", amount(span))
    } else {
        format!("in {}", amount(span))
    }
}

/// The Unix-millisecond instant of RFC 3339 text.
pub fn parse_ms(iso: &str) -> Option<i64> {
    let at = OffsetDateTime::parse(iso, &Rfc3339).ok()?;
    i64::try_from(at.unix_timestamp_nanos() / 1_000_000).ok()
}

/// An optional time: relative, or a dash.
pub fn relative_opt(iso: Option<&str>, now: OffsetDateTime) -> String {
    iso.map_or_else(|| "-".to_string(), |t| relative(t, now))
}

/// The current time, once per command so every row of a table agrees.
pub fn now() -> OffsetDateTime {
    OffsetDateTime::now_utc()
}

/// A span in its largest whole unit: seconds under a minute, minutes under two
/// hours, hours under two days, days under a year, then years.
fn amount(secs: u64) -> String {
    const MINUTE: u64 = 60;
    const HOUR: u64 = 60 * MINUTE;
    const DAY: u64 = 24 * HOUR;
    const YEAR: u64 = 365 * DAY;
    match secs {
        s if s < MINUTE => format!("{s} s"),
        s if s < 2 * HOUR => format!("{} min", s / MINUTE),
        s if s < 2 * DAY => format!("{} h", s / HOUR),
        s if s < YEAR => plural(s / DAY, "day"),
        s => plural(s / YEAR, "year"),
    }
}

fn plural(n: u64, unit: &str) -> String {
    if n == 1 {
        format!("1 {unit}")
    } else {
        format!("{n} {unit}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    #[test]
    fn times_read_as_spans_from_now() {
        let now = datetime!(2026-12-04 10:00:00 UTC);
        let cases = [
            ("2026-12-04T10:00:02Z", "just now"),
            ("2026-12-04T09:59:30Z", "30 s ago"),
            ("2026-12-04T09:58:00.450Z", "1 min ago"),
            ("2026-12-04T08:30:00Z", "90 min ago"),
            ("2026-12-04T20:00:00Z", "in 10 h"),
            ("2026-12-05T10:00:00Z", "in 24 h"),
            ("2026-12-03T08:00:00Z", "26 h ago"),
            ("2027-03-03T10:00:00Z", "in 89 days"),
            ("2026-12-02T10:00:00+00:00", "2 days ago"),
            ("2025-12-04T10:00:00Z", "1 year ago"),
            ("2030-12-04T10:00:00Z", "in 4 years"),
            ("not a time", "not a time"),
        ];
        for (iso, want) in cases {
            assert_eq!(relative(iso, now), want, "{iso}");
        }
        assert_eq!(relative_opt(None, now), "-");
    }
}
