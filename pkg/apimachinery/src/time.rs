//! Timestamps as the API writes them, and ages as kubectl prints them.
//!
//! `metav1.Time` fields (`creationTimestamp`, `firstTimestamp`, `renewTime`'s cousin
//! `acquireTime` is a MicroTime) are RFC 3339 with optional fractional seconds;
//! `metav1.MicroTime` fields (`eventTime`, `series.lastObservedTime`, lease times) carry exactly
//! six fractional digits, as Go's `time.Parse` with the layout
//! `2006-01-02T15:04:05.000000Z07:00` demands, and [`micro_time`] writes them so (a Time is
//! written by [`crate::meta::rfc3339`]). No clock is read here: ages take `now`.

use crate::meta::rfc3339;

/// A point in time: seconds since the Unix epoch and nanoseconds into that second.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp {
    /// Seconds since 1970-01-01T00:00:00Z.
    pub seconds: i64,
    /// Nanoseconds, below 1e9.
    pub nanos: u32,
}

/// How many fractional digits a timestamp must carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fraction {
    /// Any number (including none), as `time.RFC3339` parses.
    Any,
    /// Exactly six, as `metav1.MicroTime` parses.
    Micro,
}

fn digits(s: &[u8], at: usize, n: usize) -> Option<i64> {
    let part = s.get(at..at + n)?;
    if !part.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(
        part.iter()
            .fold(0i64, |acc, d| acc * 10 + i64::from(d - b'0')),
    )
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn parse(s: &str, fraction: Fraction) -> Option<Timestamp> {
    let b = s.as_bytes();
    let year = digits(b, 0, 4)?;
    let month = digits(b, 5, 2)?;
    let day = digits(b, 8, 2)?;
    let hour = digits(b, 11, 2)?;
    let minute = digits(b, 14, 2)?;
    let second = digits(b, 17, 2)?;
    if b.get(4) != Some(&b'-')
        || b.get(7) != Some(&b'-')
        || b.get(10) != Some(&b'T')
        || b.get(13) != Some(&b':')
        || b.get(16) != Some(&b':')
    {
        return None;
    }
    if !(1..=12).contains(&month)
        || day < 1
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 59
    {
        return None;
    }
    let mut at = 19;
    let mut nanos = 0u32;
    if matches!(b.get(at), Some(b'.' | b',')) {
        let start = at + 1;
        let mut end = start;
        while b.get(end).is_some_and(u8::is_ascii_digit) {
            end += 1;
        }
        let count = end - start;
        if count == 0 || (fraction == Fraction::Micro && count != 6) {
            return None;
        }
        for (i, d) in b[start..end].iter().take(9).enumerate() {
            nanos += u32::from(d - b'0') * 10u32.pow(8 - i as u32);
        }
        at = end;
    } else if fraction == Fraction::Micro {
        return None;
    }
    let offset = match b.get(at..)? {
        [b'Z'] => 0,
        [sign @ (b'+' | b'-'), ..] if b.len() == at + 6 && b[at + 3] == b':' => {
            let h = digits(b, at + 1, 2)?;
            let m = digits(b, at + 4, 2)?;
            if h > 23 || m > 59 {
                return None;
            }
            let offset = h * 3600 + m * 60;
            if *sign == b'-' { -offset } else { offset }
        }
        _ => return None,
    };
    let seconds =
        days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second - offset;
    Some(Timestamp { seconds, nanos })
}

/// Parses a `metav1.Time`: RFC 3339, fractional seconds optional. `None` when malformed.
pub fn parse_time(s: &str) -> Option<Timestamp> {
    parse(s, Fraction::Any)
}

/// Parses a `metav1.MicroTime`: RFC 3339 with exactly six fractional digits.
pub fn parse_micro_time(s: &str) -> Option<Timestamp> {
    parse(s, Fraction::Micro)
}

/// A MicroTime as Go writes it: UTC, six fractional digits.
pub fn micro_time(seconds: i64, nanos: u32) -> String {
    let whole = rfc3339(seconds);
    let stem = whole.trim_end_matches('Z');
    format!("{stem}.{:06}Z", nanos / 1000)
}

/// Formats a duration in seconds as kubectl's `duration.HumanDuration` does: `"45s"`, `"3m20s"`,
/// `"10m"`, `"5h10m"`, `"20h"`, `"3d4h"`, `"30d"`, `"2y45d"`, `"9y"`; `"<invalid>"` for a time
/// more than a second in the future (clock skew of one second still reads `"0s"`).
pub fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".to_owned();
    }
    if seconds < 0 {
        return "0s".to_owned();
    }
    if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = seconds / 3600;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{h}h", hours / 24)
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let days = (hours / 24) % 365;
        return if days == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{days}d", hours / 24 / 365)
        };
    }
    format!("{}y", hours / 24 / 365)
}

/// The age of a timestamp string at `now` (Unix seconds), as the printers' `translateTimestampSince`
/// shows it: `"<unknown>"` when the timestamp is absent or unreadable. Accepts Time and MicroTime.
pub fn age(timestamp: Option<&str>, now: i64) -> String {
    match timestamp.and_then(parse_time) {
        Some(t) => human_duration(now - t.seconds),
        None => "<unknown>".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_rfc3339_like_go() {
        let cases: &[(&str, Option<(i64, u32)>)] = &[
            ("1970-01-01T00:00:00Z", Some((0, 0))),
            ("2026-11-22T03:40:00Z", Some((1_795_318_800, 0))),
            ("2000-02-29T00:00:00Z", Some((951_782_400, 0))),
            ("2026-11-22T04:40:00+01:00", Some((1_795_318_800, 0))),
            ("2026-11-22T03:40:00.5Z", Some((1_795_318_800, 500_000_000))),
            (
                "2026-11-22T03:40:00.123456789Z",
                Some((1_795_318_800, 123_456_789)),
            ),
            ("1969-12-31T23:59:59Z", Some((-1, 0))),
            ("2001-02-29T00:00:00Z", None),
            ("2026-13-01T00:00:00Z", None),
            ("2026-11-22 03:40:00Z", None),
            ("2026-11-22T03:40:00", None),
            ("2026-11-22T24:00:00Z", None),
            ("2026-11-22T03:40:00.Z", None),
            ("2026-11-22T03:40:00+0100", None),
            ("", None),
            ("yesterday", None),
        ];
        for (input, want) in cases {
            let got = parse_time(input).map(|t| (t.seconds, t.nanos));
            assert_eq!(got, *want, "{input}");
        }
    }

    #[test]
    fn micro_time_needs_six_digits() {
        assert_eq!(
            parse_micro_time("2026-11-22T03:40:00.000001Z"),
            Some(Timestamp {
                seconds: 1_795_318_800,
                nanos: 1000
            })
        );
        for bad in [
            "2026-11-22T03:40:00Z",
            "2026-11-22T03:40:00.5Z",
            "2026-11-22T03:40:00.1234567Z",
        ] {
            assert_eq!(parse_micro_time(bad), None, "{bad}");
        }
    }

    #[test]
    fn human_durations_match_kubectl() {
        let cases = [
            (-5, "<invalid>"),
            (-1, "0s"),
            (0, "0s"),
            (5, "5s"),
            (119, "119s"),
            (120, "2m"),
            (200, "3m20s"),
            (599, "9m59s"),
            (600, "10m"),
            (3 * 3600 - 1, "179m"),
            (3 * 3600, "3h"),
            (5 * 3600 + 600, "5h10m"),
            (8 * 3600 + 600, "8h"),
            (47 * 3600, "47h"),
            (48 * 3600, "2d"),
            (3 * 86_400 + 4 * 3600, "3d4h"),
            (8 * 86_400, "8d"),
            (729 * 86_400, "729d"),
            (730 * 86_400, "2y"),
            (775 * 86_400, "2y45d"),
            (8 * 365 * 86_400, "8y"),
            (20 * 365 * 86_400, "20y"),
        ];
        for (seconds, want) in cases {
            assert_eq!(human_duration(seconds), want, "{seconds}");
        }
    }

    #[test]
    fn ages() {
        assert_eq!(age(Some("1970-01-01T00:01:00Z"), 125), "65s");
        assert_eq!(age(None, 125), "<unknown>");
        assert_eq!(age(Some("garbage"), 125), "<unknown>");
    }
}
