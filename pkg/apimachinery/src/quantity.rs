//! Kubernetes resource quantities (`resource.Quantity`): `"100m"`, `"1Gi"`, `"1e3"`, `"5"`.
//!
//! Parsing follows `resource.ParseQuantity`: an optional sign, digits with an optional
//! fraction, and a suffix that is a decimal SI prefix (`n u m "" k M G T P E`), a binary one
//! (`Ki Mi Gi Ti Pi Ei`) or a decimal exponent (`e3`, `E-2`). Values are exact: a mantissa and a
//! power of ten. As upstream, values finer than a nano-unit round up (away from zero), binary
//! values are capped at 2^63-1, and binary values below one become decimal.
//!
//! [`Quantity`]'s `Display` is upstream's canonical `String()`: what the API writes back
//! (`"1.5Gi"` reads back as `"1536Mi"`, `"1000"` as `"1k"`, `"0.5"` as `"500m"`), except that an
//! input upstream already considers canonical is kept as written (`"+1"`, `"1E3"`).
//!
//! Deviations, for values no one uses: more than 38 significant digits are refused
//! ([`QuantityError::Numeric`]) where upstream keeps arbitrary precision, and a decimal-SI value
//! above 999E is written with the `E` suffix (`"1000E"`) where upstream loses its suffix.

use std::fmt;

/// How a quantity is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// Decimal SI suffixes: `m`, `k`, `M`, ... (and no suffix).
    DecimalSi,
    /// Binary suffixes: `Ki`, `Mi`, ...
    BinarySi,
    /// A decimal exponent: `e3`.
    DecimalExponent,
}

/// Why a string is not a quantity (upstream's three messages).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    /// The string does not have the shape of a quantity.
    #[error(
        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    )]
    FormatWrong,
    /// The number cannot be represented.
    #[error("unable to parse numeric part of quantity")]
    Numeric,
    /// The suffix is not a known one.
    #[error("unable to parse quantity's suffix")]
    Suffix,
}

/// A parsed quantity: `mantissa * 10^exponent`, in a [`Format`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Quantity {
    mantissa: i128,
    exponent: i32,
    format: Format,
    /// The input, when upstream keeps it as the canonical form.
    original: Option<String>,
}

const NANO: i32 = -9;
const MAX_ALLOWED: i128 = i64::MAX as i128;
const DECIMAL_SUFFIXES: &[(&str, i32)] = &[
    ("n", -9),
    ("u", -6),
    ("m", -3),
    ("", 0),
    ("k", 3),
    ("M", 6),
    ("G", 9),
    ("T", 12),
    ("P", 15),
    ("E", 18),
];
const BINARY_SUFFIXES: &[(&str, u32)] = &[
    ("Ki", 10),
    ("Mi", 20),
    ("Gi", 30),
    ("Ti", 40),
    ("Pi", 50),
    ("Ei", 60),
];

/// The pieces of a quantity string, as upstream's `parseQuantityString` splits it.
struct Parts<'a> {
    positive: bool,
    /// Integer digits without leading zeros (`"0"` when there are none).
    num: &'a str,
    /// Fraction digits.
    denom: &'a str,
    suffix: &'a str,
}

fn split(s: &str) -> Result<Parts<'_>, QuantityError> {
    let b = s.as_bytes();
    let end = b.len();
    let mut pos = 0;
    let mut positive = true;
    match b.first() {
        Some(b'-') => {
            positive = false;
            pos = 1;
        }
        Some(b'+') => pos = 1,
        _ => {}
    }
    while pos < end && b[pos] == b'0' {
        pos += 1;
    }
    let zero = Parts {
        positive,
        num: "0",
        denom: "",
        suffix: "",
    };
    if pos >= end {
        return Ok(zero);
    }
    let num_start = pos;
    while pos < end && b[pos].is_ascii_digit() {
        pos += 1;
    }
    let num = if pos == num_start {
        "0"
    } else {
        &s[num_start..pos]
    };
    let mut denom = "";
    if pos < end && b[pos] == b'.' {
        pos += 1;
        let start = pos;
        while pos < end && b[pos].is_ascii_digit() {
            pos += 1;
        }
        denom = &s[start..pos];
    }
    let suffix_start = pos;
    while pos < end && b"eEinumkKMGTP".contains(&b[pos]) {
        pos += 1;
    }
    if pos < end && matches!(b[pos], b'-' | b'+') {
        pos += 1;
    }
    while pos < end && b[pos].is_ascii_digit() {
        pos += 1;
    }
    if pos < end {
        return Err(QuantityError::FormatWrong);
    }
    Ok(Parts {
        positive,
        num,
        denom,
        suffix: &s[suffix_start..],
    })
}

/// A suffix's base, exponent and format, or `None` when it is not one.
fn interpret(suffix: &str) -> Option<(u32, i32, Format)> {
    if let Some((_, e)) = DECIMAL_SUFFIXES.iter().find(|(s, _)| *s == suffix) {
        return Some((10, *e, Format::DecimalSi));
    }
    if let Some((_, e)) = BINARY_SUFFIXES.iter().find(|(s, _)| *s == suffix) {
        return Some((2, *e as i32, Format::BinarySi));
    }
    let rest = suffix
        .strip_prefix('e')
        .or_else(|| suffix.strip_prefix('E'))?;
    if rest.is_empty() {
        return None;
    }
    let parsed: i64 = rest.parse().ok()?;
    Some((
        10,
        parsed.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32,
        Format::DecimalExponent,
    ))
}

fn pow10(n: u32) -> Option<i128> {
    10i128.checked_pow(n)
}

/// Whether upstream's fast path keeps the input string as the canonical form.
fn keeps_original(parts: &Parts<'_>, exponent: i32, format: Format) -> bool {
    let digits = parts.num.len() + parts.denom.len();
    match format {
        Format::DecimalSi | Format::DecimalExponent => {
            let scale = exponent - parts.denom.len() as i32;
            let shifted = format!("{}{}", parts.num, parts.denom);
            digits <= 18
                && scale >= NANO
                && shifted.parse::<i64>().is_ok()
                && scale % 3 == 0
                && !shifted.ends_with("000")
                && !shifted.starts_with('0')
        }
        Format::BinarySi => {
            // Go computes int32(float32(exponent)*3/10); exponents are multiples of ten.
            let precision = 15 - parts.num.len() as i32 - exponent * 3 / 10 - 1;
            if !parts.denom.is_empty() || precision < 0 {
                return false;
            }
            match parts.num.parse::<i64>() {
                Ok(value) => {
                    value.checked_mul(1i64 << exponent).is_some()
                        && exponent % 10 == 0
                        && value & 0x07 != 0
                }
                Err(_) => false,
            }
        }
    }
}

impl Quantity {
    /// Parses a quantity as `resource.ParseQuantity` does.
    pub fn parse(s: &str) -> Result<Quantity, QuantityError> {
        if s.is_empty() {
            return Err(QuantityError::FormatWrong);
        }
        let parts = split(s)?;
        let (base, exponent, mut format) = interpret(parts.suffix).ok_or(QuantityError::Suffix)?;
        let keep = keeps_original(&parts, exponent, format);

        // Significant digits, with trailing zeros moved into the exponent.
        let digits = format!("{}{}", parts.num, parts.denom);
        let digits = digits.trim_start_matches('0');
        let trimmed = digits.trim_end_matches('0');
        let mut exp10 = -(parts.denom.len() as i64) + (digits.len() - trimmed.len()) as i64;
        if trimmed.len() > 38 {
            return Err(QuantityError::Numeric);
        }
        let mut mantissa: i128 = if trimmed.is_empty() {
            0
        } else {
            trimmed.parse().map_err(|_| QuantityError::Numeric)?
        };
        let mut capped = false;
        if base == 10 {
            exp10 += i64::from(exponent);
        } else {
            match mantissa.checked_mul(1i128 << exponent) {
                Some(m) => mantissa = m,
                None => capped = true,
            }
        }
        let exp10 = i32::try_from(exp10).map_err(|_| QuantityError::Numeric)?;
        let mut q = Quantity {
            mantissa,
            exponent: exp10,
            format,
            original: None,
        };
        if q.mantissa != 0 {
            q.round_up_to_nano();
        }
        if format == Format::BinarySi
            && (capped || q.cmp_abs(MAX_ALLOWED) == std::cmp::Ordering::Greater)
        {
            q.mantissa = MAX_ALLOWED;
            q.exponent = 0;
        }
        if format == Format::BinarySi && q.mantissa != 0 && q.cmp_abs(1) == std::cmp::Ordering::Less
        {
            format = Format::DecimalSi;
            q.format = format;
        }
        if !parts.positive {
            q.mantissa = -q.mantissa;
        }
        if keep {
            q.original = Some(s.to_owned());
        }
        Ok(q)
    }

    /// Rounds a value finer than a nano-unit away from zero to nano-units.
    fn round_up_to_nano(&mut self) {
        if self.exponent >= NANO {
            return;
        }
        let shift = (NANO - self.exponent) as u32;
        self.mantissa = match pow10(shift) {
            Some(d) => self.mantissa / d + i128::from(self.mantissa % d != 0),
            None => 1,
        };
        self.exponent = NANO;
    }

    /// Compares the absolute value with a non-negative integer.
    fn cmp_abs(&self, n: i128) -> std::cmp::Ordering {
        use std::cmp::Ordering;
        let m = self.mantissa.abs();
        if self.exponent >= 0 {
            match pow10(self.exponent as u32).and_then(|p| m.checked_mul(p)) {
                Some(v) => v.cmp(&n),
                None => Ordering::Greater,
            }
        } else {
            match pow10((-self.exponent) as u32) {
                Some(d) => match (m / d).cmp(&n) {
                    Ordering::Equal if m % d != 0 => Ordering::Greater,
                    other => other,
                },
                None if m == 0 => 0.cmp(&n),
                None => {
                    if n == 0 {
                        Ordering::Greater
                    } else {
                        Ordering::Less
                    }
                }
            }
        }
    }

    /// The format the quantity was written in (after upstream's adjustments).
    pub fn format(&self) -> Format {
        self.format
    }

    /// Whether the value is zero.
    pub fn is_zero(&self) -> bool {
        self.mantissa == 0
    }

    /// Whether the value is below zero.
    pub fn is_negative(&self) -> bool {
        self.mantissa < 0
    }

    /// The value in thousandths, rounded up, as upstream's `MilliValue()`; `None` if it does not
    /// fit in 128 bits.
    pub fn milli_value(&self) -> Option<i128> {
        let e = self.exponent + 3;
        if e >= 0 {
            self.mantissa.checked_mul(pow10(e as u32)?)
        } else {
            let Some(d) = pow10((-e) as u32) else {
                return Some(i128::from(self.mantissa > 0));
            };
            let q = self.mantissa.div_euclid(d);
            Some(if self.mantissa.rem_euclid(d) != 0 {
                q + 1
            } else {
                q
            })
        }
    }

    /// Whether upstream counts the value as an integer (`MilliValue() % 1000 == 0`).
    pub fn is_integer(&self) -> bool {
        self.exponent >= 0 || self.milli_value().is_none_or(|m| m % 1000 == 0)
    }

    /// The canonical form, as upstream's `Quantity.String()` computes it (ignoring a kept input).
    pub fn canonical(&self) -> String {
        if self.mantissa == 0 {
            return "0".to_owned();
        }
        let mut format = self.format;
        let mut integer = None;
        if format == Format::BinarySi {
            if self.cmp_abs(1024) == std::cmp::Ordering::Less {
                format = Format::DecimalSi;
            } else {
                integer = self.integer_value();
                if integer.is_none() {
                    format = Format::DecimalSi;
                }
            }
        }
        if let (Format::BinarySi, Some(mut n)) = (format, integer) {
            let mut times = 0;
            while n.abs() >= 1024 && n % 1024 == 0 {
                n /= 1024;
                times += 1;
            }
            let suffix = match times {
                0 => "",
                t => BINARY_SUFFIXES[t - 1].0,
            };
            return format!("{n}{suffix}");
        }
        let mut m = self.mantissa;
        let mut e = self.exponent;
        while m.abs() >= 10 && m % 10 == 0 {
            m /= 10;
            e += 1;
        }
        let mut number = m.to_string();
        while e.rem_euclid(3) != 0 {
            number.push('0');
            e -= 1;
        }
        match format {
            Format::DecimalExponent if e == 0 => number,
            Format::DecimalExponent => format!("{number}e{e}"),
            _ => {
                while e > 18 {
                    number.push_str("000");
                    e -= 3;
                }
                let suffix = DECIMAL_SUFFIXES
                    .iter()
                    .find(|(_, x)| *x == e)
                    .map_or("", |(s, _)| *s);
                format!("{number}{suffix}")
            }
        }
    }

    /// The sum, exact, as upstream's `Add`: in this quantity's format (the other's when this
    /// one is zero), written in canonical form; `None` if it does not fit.
    pub fn checked_add(&self, other: &Quantity) -> Option<Quantity> {
        let exponent = self.exponent.min(other.exponent);
        let scaled = |q: &Quantity| {
            q.mantissa
                .checked_mul(pow10(u32::try_from(q.exponent - exponent).ok()?)?)
        };
        Some(Quantity {
            mantissa: scaled(self)?.checked_add(scaled(other)?)?,
            exponent,
            format: if self.mantissa == 0 {
                other.format
            } else {
                self.format
            },
            original: None,
        })
    }

    /// Compares the values (not the ways they are written), as upstream's `Cmp`.
    pub fn cmp_value(&self, other: &Quantity) -> std::cmp::Ordering {
        let negated = Quantity {
            mantissa: -other.mantissa,
            ..other.clone()
        };
        match self.checked_add(&negated) {
            Some(difference) => difference.mantissa.cmp(&0),
            // Too far apart to subtract exactly: the larger exponent wins among same signs.
            None => match (self.mantissa.signum(), other.mantissa.signum()) {
                (a, b) if a != b => a.cmp(&b),
                (sign, _) => {
                    let magnitude = |q: &Quantity| {
                        q.exponent + i32::try_from(q.mantissa.abs().to_string().len()).unwrap_or(0)
                    };
                    let by_magnitude = magnitude(self).cmp(&magnitude(other));
                    if sign < 0 {
                        by_magnitude.reverse()
                    } else {
                        by_magnitude
                    }
                }
            },
        }
    }

    /// The exact integer value, if the value is an integer that fits.
    fn integer_value(&self) -> Option<i128> {
        if self.exponent >= 0 {
            self.mantissa.checked_mul(pow10(self.exponent as u32)?)
        } else {
            let d = pow10((-self.exponent) as u32)?;
            (self.mantissa % d == 0).then(|| self.mantissa / d)
        }
    }
}

impl fmt::Display for Quantity {
    /// Upstream's `String()`: the input when upstream kept it, else the canonical form.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.original {
            Some(s) => f.write_str(s),
            None => f.write_str(&self.canonical()),
        }
    }
}

impl std::str::FromStr for Quantity {
    type Err = QuantityError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Quantity::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_writes_back_like_upstream() {
        // (input, String() after parsing)
        let cases = [
            ("0", "0"),
            ("5", "5"),
            ("100m", "100m"),
            ("1000m", "1"),
            ("1500m", "1500m"),
            ("1.5", "1500m"),
            ("0.5", "500m"),
            (".5", "500m"),
            ("1000", "1k"),
            ("1k", "1k"),
            ("1M", "1M"),
            ("12345", "12345"),
            ("1Ki", "1Ki"),
            ("1024", "1024"),
            ("1024Ki", "1Mi"),
            ("8Ki", "8Ki"),
            ("1536Ki", "1536Ki"),
            ("1.5Gi", "1536Mi"),
            ("0.5Gi", "512Mi"),
            ("0.1Ki", "102400m"),
            ("1Gi", "1Gi"),
            ("1e3", "1e3"),
            ("1E3", "1E3"),
            ("1e+3", "1e+3"),
            ("10e3", "10e3"),
            ("1000e3", "1e6"),
            ("1e-3", "1e-3"),
            ("1.5e3", "1500"),
            ("1n", "1n"),
            ("0.1n", "1n"),
            ("1u", "1u"),
            ("-1", "-1"),
            ("+1", "+1"),
            ("-100m", "-100m"),
            ("-1.5Gi", "-1536Mi"),
            ("007", "007"),
            ("1.", "1."),
            ("1.G", "1.G"),
            ("1.5G", "1500M"),
            ("-", "0"),
            ("0Ki", "0"),
            ("1E", "1E"),
            ("9999999999Ei", "9223372036854775807"),
            ("2000E", "2000E"),
        ];
        for (input, want) in cases {
            match Quantity::parse(input) {
                Ok(q) => assert_eq!(q.to_string(), want, "{input}"),
                Err(e) => panic!("{input}: {e}"),
            }
        }
    }

    #[test]
    fn refuses_what_upstream_refuses() {
        let cases = [
            ("", QuantityError::FormatWrong),
            ("abc", QuantityError::FormatWrong),
            (" 1", QuantityError::FormatWrong),
            ("1 ", QuantityError::FormatWrong),
            ("1.5.5", QuantityError::FormatWrong),
            ("1x", QuantityError::FormatWrong),
            ("1Gi5", QuantityError::Suffix),
            ("1KiB", QuantityError::FormatWrong),
            ("1K", QuantityError::Suffix),
            ("1e", QuantityError::Suffix),
            ("1mi", QuantityError::Suffix),
            ("1e1.5", QuantityError::FormatWrong),
            ("--1", QuantityError::Suffix),
            ("1ee3", QuantityError::Suffix),
        ];
        for (input, want) in cases {
            assert_eq!(Quantity::parse(input), Err(want), "{input}");
        }
        assert_eq!(
            QuantityError::Suffix.to_string(),
            "unable to parse quantity's suffix"
        );
    }

    #[test]
    fn sums_and_comparisons_are_exact() {
        let q = |s: &str| Quantity::parse(s).unwrap();
        let sum = |a: &str, b: &str| q(a).checked_add(&q(b)).unwrap().to_string();
        assert_eq!(sum("3", "1"), "4");
        assert_eq!(sum("999", "1"), "1k");
        assert_eq!(sum("1k", "1"), "1001");
        assert_eq!(sum("1500m", "500m"), "2");
        assert_eq!(sum("0", "1Ki"), "1Ki");
        assert_eq!(sum("1Ki", "1Ki"), "2Ki");
        assert_eq!(sum("1", "-1"), "0");
        use std::cmp::Ordering::{Equal, Greater, Less};
        assert_eq!(q("4").cmp_value(&q("3")), Greater);
        assert_eq!(q("1k").cmp_value(&q("1000")), Equal);
        assert_eq!(q("999m").cmp_value(&q("1")), Less);
        assert_eq!(q("1E").cmp_value(&q("1n")), Greater);
        assert_eq!(q("-1").cmp_value(&q("1n")), Less);
    }

    #[test]
    fn sign_integer_and_milli_values() {
        let q = |s: &str| Quantity::parse(s).unwrap();
        assert!(q("-1").is_negative());
        assert!(!q("0").is_negative());
        assert!(q("-0").is_zero());
        assert!(q("5").is_integer());
        assert!(q("1k").is_integer());
        assert!(!q("1500m").is_integer());
        assert!(!q("1.0001").is_integer());
        // Upstream rounds up to thousandths before asking.
        assert!(q("0.9995").is_integer());
        assert_eq!(q("1.5").milli_value(), Some(1500));
        assert_eq!(q("1n").milli_value(), Some(1));
        assert_eq!(q("2Ki").milli_value(), Some(2_048_000));
        assert_eq!(q("1.5Gi").format(), Format::BinarySi);
        assert_eq!(q("0.5Ki").format(), Format::BinarySi);
        assert_eq!(q("0.0001Ki").format(), Format::DecimalSi);
        assert_eq!(q("1e3").format(), Format::DecimalExponent);
    }
}
