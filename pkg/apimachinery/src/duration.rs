//! Durations written as Go writes them (`time.ParseDuration`, `Duration.String`): `"1m0s"`,
//! `"30s"`, `"1.5h"`, `"300ms"`. Flags such as `--request-timeout` and the `timeout` query
//! parameter of API requests use this form.

use std::time::Duration;

/// Why a duration does not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("time: invalid duration {input:?}: {reason}")]
pub struct ParseError {
    /// The text given.
    pub input: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

/// A Go duration with its sign, as `time.ParseDuration` reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Signed {
    /// Whether it was written with a `-`.
    pub negative: bool,
    /// Its length.
    pub magnitude: Duration,
}

/// Parses a non-negative Go duration: one or more decimal numbers, each with an optional
/// fraction and a unit (`ns`, `us`, `µs`, `ms`, `s`, `m`, `h`), e.g. `"1h2m3.5s"`; `"0"` alone
/// needs no unit.
pub fn parse(input: &str) -> Result<Duration, ParseError> {
    if input.strip_prefix('+').unwrap_or(input).starts_with('-') {
        return Err(ParseError {
            input: input.to_owned(),
            reason: "negative durations are not allowed",
        });
    }
    parse_signed(input).map(|signed| signed.magnitude)
}

/// Parses a duration option that must be greater than zero, and at least `min` (periods, lease
/// durations): why not, as a validation message ("must be greater than zero", "must be at least
/// 1s"), when it is not.
pub fn parse_at_least(input: &str, min: Duration) -> Result<Duration, String> {
    let duration = parse(input).map_err(|e| e.to_string())?;
    if duration.is_zero() || duration < min {
        return Err(if min <= Duration::from_nanos(1) {
            "must be greater than zero".to_owned()
        } else {
            format!("must be at least {}", format(min))
        });
    }
    Ok(duration)
}

/// Parses a Go duration as `time.ParseDuration` does, sign included: the one parser of Go
/// durations (flags, `timeout` parameters, the `duration` format of CRD schemas, CEL). Its
/// length is at most that of an `int64` of nanoseconds (`-9223372036854775808ns` to
/// `9223372036854775807ns`).
pub fn parse_signed(input: &str) -> Result<Signed, ParseError> {
    let fail = |reason| ParseError {
        input: input.to_owned(),
        reason,
    };
    let (negative, text) = match input.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, input.strip_prefix('+').unwrap_or(input)),
    };
    if text == "0" {
        return Ok(Signed {
            negative,
            magnitude: Duration::ZERO,
        });
    }
    if text.is_empty() {
        return Err(fail("empty"));
    }
    let mut total: u128 = 0;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .ok_or_else(|| fail("missing unit"))?;
        let (number, after) = rest.split_at(digits);
        if number.is_empty() || number == "." || number.matches('.').count() > 1 {
            return Err(fail("expected a number"));
        }
        let unit_len = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, next) = after.split_at(unit_len);
        let nanos_per_unit: u128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60 * 1_000_000_000,
            "h" => 3600 * 1_000_000_000,
            _ => return Err(fail("unknown unit")),
        };
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        let whole: u128 = if whole.is_empty() {
            0
        } else {
            whole.parse().map_err(|_| fail("overflow"))?
        };
        let mut part = whole
            .checked_mul(nanos_per_unit)
            .ok_or_else(|| fail("overflow"))?;
        let mut scale = nanos_per_unit;
        for digit in fraction.bytes() {
            scale /= 10;
            part += u128::from(digit - b'0') * scale;
        }
        total = total.checked_add(part).ok_or_else(|| fail("overflow"))?;
        rest = next;
    }
    // Go durations are int64 nanoseconds.
    let limit = i64::MAX as u128 + u128::from(negative);
    if total > limit {
        return Err(fail("overflow"));
    }
    let secs = u64::try_from(total / 1_000_000_000).map_err(|_| fail("overflow"))?;
    let nanos = u32::try_from(total % 1_000_000_000).map_err(|_| fail("overflow"))?;
    Ok(Signed {
        negative,
        magnitude: Duration::new(secs, nanos),
    })
}

/// Writes `duration` as Go's `Duration.String` does: `"1m0s"`, `"1h0m0s"`, `"1.5s"`, `"300ms"`,
/// `"0s"`.
pub fn format(duration: Duration) -> String {
    let nanos = duration.as_nanos();
    if nanos == 0 {
        return "0s".to_owned();
    }
    if nanos < 1_000_000_000 {
        let (unit, per) = match nanos {
            n if n < 1_000 => ("ns", 1),
            n if n < 1_000_000 => ("µs", 1_000),
            _ => ("ms", 1_000_000),
        };
        return format!("{}{unit}", decimal(nanos, per));
    }
    let hours = nanos / (3600 * 1_000_000_000);
    let minutes = nanos / (60 * 1_000_000_000) % 60;
    let seconds = decimal(nanos % (60 * 1_000_000_000), 1_000_000_000);
    match (hours, minutes) {
        (0, 0) => format!("{seconds}s"),
        (0, m) => format!("{m}m{seconds}s"),
        (h, m) => format!("{h}h{m}m{seconds}s"),
    }
}

/// `value / per` with the fraction written without trailing zeros.
fn decimal(value: u128, per: u128) -> String {
    let whole = value / per;
    let fraction = value % per;
    if fraction == 0 {
        return whole.to_string();
    }
    let width = per.ilog10() as usize;
    let digits = format!("{fraction:0width$}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_go_durations() {
        for (text, expected) in [
            ("0", Duration::ZERO),
            ("1m0s", Duration::from_secs(60)),
            ("32s", Duration::from_secs(32)),
            ("1.5h", Duration::from_secs(5400)),
            ("1h2m3.5s", Duration::from_millis(3_723_500)),
            ("300ms", Duration::from_millis(300)),
            ("10us", Duration::from_micros(10)),
            ("7ns", Duration::from_nanos(7)),
            (".5s", Duration::from_millis(500)),
            ("+2s", Duration::from_secs(2)),
        ] {
            assert_eq!(parse(text), Ok(expected), "{text}");
        }
    }

    #[test]
    fn rejects_what_go_rejects_and_negatives() {
        for text in ["", "1", "s", "1x", "-1s", "1.2.3s", "9999999999h", ".s"] {
            assert!(parse(text).is_err(), "{text}");
        }
        assert_eq!(
            parse("5").unwrap_err().to_string(),
            "time: invalid duration \"5\": missing unit"
        );
    }

    #[test]
    fn signed_durations_reach_both_ends_of_an_int64() {
        let signed = |text| parse_signed(text).map(|s| (s.negative, s.magnitude));
        assert_eq!(signed("-1.5s"), Ok((true, Duration::from_millis(1500))));
        assert_eq!(signed("-0"), Ok((true, Duration::ZERO)));
        assert_eq!(
            signed("-9223372036854775808ns"),
            Ok((true, Duration::from_nanos(1 << 63)))
        );
        assert!(signed("9223372036854775808ns").is_err());
        assert!(signed("-9223372036854775809ns").is_err());
        assert!(signed("-").is_err() && signed("--1s").is_err() && signed("1 s").is_err());
    }

    #[test]
    fn options_that_must_be_positive_say_so() {
        let any = Duration::from_nanos(1);
        assert_eq!(parse_at_least("15s", any), Ok(Duration::from_secs(15)));
        assert_eq!(
            parse_at_least("0s", any),
            Err("must be greater than zero".to_owned())
        );
        assert_eq!(
            parse_at_least("500ms", Duration::from_secs(1)),
            Err("must be at least 1s".to_owned())
        );
        assert_eq!(
            parse_at_least("1s", Duration::from_secs(1)),
            Ok(Duration::from_secs(1))
        );
        assert_eq!(
            parse_at_least("soon", any),
            Err(parse("soon").unwrap_err().to_string())
        );
    }

    #[test]
    fn formats_as_go_does() {
        for (duration, text) in [
            (Duration::ZERO, "0s"),
            (Duration::from_secs(60), "1m0s"),
            (Duration::from_secs(3600), "1h0m0s"),
            (Duration::from_millis(1500), "1.5s"),
            (Duration::from_millis(300), "300ms"),
            (Duration::from_secs(5400), "1h30m0s"),
        ] {
            assert_eq!(format(duration), text);
            assert_eq!(parse(text), Ok(duration));
        }
    }
}
