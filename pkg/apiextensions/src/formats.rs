//! The string formats custom resources are validated against, as upstream (kube-openapi's
//! `strfmt` registry, restricted to the formats apiextensions supports in 1.33).
//!
//! A schema's `format` is looked up with `-` removed (`date-time` is `datetime`); a format not
//! in the list is ignored, as upstream ignores it. `int32`, `int64`, `float` and `double` are
//! not in the list: they describe numbers and constrain nothing.

use std::net::{Ipv4Addr, Ipv6Addr};

/// A string format upstream validates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Format {
    BsonObjectId,
    Uri,
    Email,
    Hostname,
    Ipv4,
    Ipv6,
    Cidr,
    Mac,
    Uuid,
    Uuid3,
    Uuid4,
    Uuid5,
    Isbn,
    Isbn10,
    Isbn13,
    CreditCard,
    Ssn,
    HexColor,
    RgbColor,
    Byte,
    Password,
    Date,
    Duration,
    DateTime,
}

impl Format {
    /// The format `name` names, if upstream supports it for custom resources.
    pub(crate) fn supported(name: &str) -> Option<Format> {
        let normalized = name.replace('-', "");
        Some(match normalized.as_str() {
            "bsonobjectid" => Format::BsonObjectId,
            "uri" => Format::Uri,
            "email" => Format::Email,
            "hostname" => Format::Hostname,
            "ipv4" => Format::Ipv4,
            "ipv6" => Format::Ipv6,
            "cidr" => Format::Cidr,
            "mac" => Format::Mac,
            "uuid" => Format::Uuid,
            "uuid3" => Format::Uuid3,
            "uuid4" => Format::Uuid4,
            "uuid5" => Format::Uuid5,
            "isbn" => Format::Isbn,
            "isbn10" => Format::Isbn10,
            "isbn13" => Format::Isbn13,
            "creditcard" => Format::CreditCard,
            "ssn" => Format::Ssn,
            "hexcolor" => Format::HexColor,
            "rgbcolor" => Format::RgbColor,
            "byte" => Format::Byte,
            "password" => Format::Password,
            "date" => Format::Date,
            "duration" => Format::Duration,
            "datetime" => Format::DateTime,
            _ => return None,
        })
    }

    /// Whether `s` is in this format.
    pub(crate) fn check(self, s: &str) -> bool {
        match self {
            Format::BsonObjectId => s.len() == 24 && s.bytes().all(|b| b.is_ascii_hexdigit()),
            Format::Uri => is_request_uri(s),
            Format::Email => is_email(s),
            Format::Hostname => is_hostname(s),
            Format::Ipv4 => parse_ip_sloppy(s) && s.contains('.'),
            Format::Ipv6 => s.parse::<Ipv6Addr>().is_ok() && s.contains(':'),
            Format::Cidr => is_cidr(s),
            Format::Mac => is_mac(s),
            Format::Uuid => is_uuid(s, None),
            Format::Uuid3 => is_uuid(s, Some(b'3')),
            Format::Uuid4 => is_uuid(s, Some(b'4')),
            Format::Uuid5 => is_uuid(s, Some(b'5')),
            Format::Isbn => is_isbn10(s) || is_isbn13(s),
            Format::Isbn10 => is_isbn10(s),
            Format::Isbn13 => is_isbn13(s),
            Format::CreditCard => is_credit_card(s),
            Format::Ssn => is_ssn(s),
            Format::HexColor => is_hex_color(s),
            Format::RgbColor => is_rgb_color(s),
            Format::Byte => is_base64(s),
            Format::Password => true,
            Format::Date => is_date(s),
            Format::Duration => is_duration(s),
            Format::DateTime => is_date_time(s),
        }
    }
}

/// Go's `url.ParseRequestURI`: an absolute URI or an absolute path.
fn is_request_uri(s: &str) -> bool {
    if s.is_empty() || s.bytes().any(|b| b < 0x20 || b == 0x7f) {
        return false;
    }
    let (scheme, rest) = match scheme_of(s) {
        Err(()) => return false,
        Ok(Some((scheme, rest))) => (Some(scheme), rest),
        Ok(None) => (None, s),
    };
    let rest = rest.split_once('?').map_or(rest, |(before, _)| before);
    if !rest.starts_with('/') {
        // `mailto:x@y` is an opaque URI; without a scheme it is not a request URI.
        return scheme.is_some();
    }
    let path = if scheme.is_some() && rest.starts_with("//") {
        let authority_and_path = &rest[2..];
        let (authority, path) = match authority_and_path.find('/') {
            Some(i) => authority_and_path.split_at(i),
            None => (authority_and_path, ""),
        };
        if !valid_authority(authority) {
            return false;
        }
        path
    } else {
        rest
    };
    valid_escapes(path)
}

/// The scheme of `s`: `Ok(None)` when there is none, `Err` when `s` starts with `:`.
fn scheme_of(s: &str) -> Result<Option<(&str, &str)>, ()> {
    for (i, c) in s.char_indices() {
        match c {
            'a'..='z' | 'A'..='Z' => {}
            '0'..='9' | '+' | '-' | '.' if i > 0 => {}
            ':' if i == 0 => return Err(()),
            ':' => return Ok(Some((&s[..i], &s[i + 1..]))),
            _ => return Ok(None),
        }
    }
    Ok(None)
}

fn valid_escapes(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            if !(b.get(i + 1).is_some_and(u8::is_ascii_hexdigit)
                && b.get(i + 2).is_some_and(u8::is_ascii_hexdigit))
            {
                return false;
            }
            i += 3;
        } else {
            i += 1;
        }
    }
    true
}

fn valid_authority(authority: &str) -> bool {
    let (userinfo, host) = match authority.rfind('@') {
        Some(i) => (Some(&authority[..i]), &authority[i + 1..]),
        None => (None, authority),
    };
    if let Some(userinfo) = userinfo {
        let ok = userinfo.chars().all(|c| {
            c.is_ascii_alphanumeric() || "-._:~!$&'()*+,;=%@".contains(c) || !c.is_ascii()
        });
        if !ok {
            return false;
        }
    }
    if let Some(bracketed) = host.strip_prefix('[') {
        let Some(end) = bracketed.find(']') else {
            return false;
        };
        let after = &bracketed[end + 1..];
        return valid_port(after) && valid_escapes(&bracketed[..end]);
    }
    let (name, port) = match host.rfind(':') {
        Some(i) => (&host[..i], &host[i..]),
        None => (host, ""),
    };
    valid_port(port)
        && valid_escapes(name)
        && name.chars().all(|c| {
            !matches!(
                c,
                ' ' | '"' | '<' | '>' | '\\' | '^' | '`' | '{' | '|' | '}'
            )
        })
}

fn valid_port(port: &str) -> bool {
    port.is_empty()
        || port
            .strip_prefix(':')
            .is_some_and(|p| p.bytes().all(|b| b.is_ascii_digit()))
}

/// Go's `mail.ParseAddress`, for the common forms: `local@domain` and `Name <local@domain>`.
fn is_email(s: &str) -> bool {
    let s = s.trim();
    let addr = if let Some(open) = s.rfind('<') {
        let Some(inner) = s[open + 1..].strip_suffix('>') else {
            return false;
        };
        let name = s[..open].trim();
        if !name.is_empty() && !valid_display_name(name) {
            return false;
        }
        inner
    } else {
        s
    };
    let Some(at) = addr.rfind('@') else {
        return false;
    };
    let (local, domain) = (&addr[..at], &addr[at + 1..]);
    let local_ok = if let Some(quoted) = local.strip_prefix('"') {
        quoted.ends_with('"') && !quoted.is_empty()
    } else {
        is_dot_atom(local)
    };
    let domain_ok = if domain.starts_with('[') {
        domain.ends_with(']') && domain.len() > 2
    } else {
        is_dot_atom(domain)
    };
    local_ok && domain_ok
}

fn valid_display_name(name: &str) -> bool {
    if let Some(inner) = name.strip_prefix('"') {
        return inner.ends_with('"');
    }
    name.split_whitespace()
        .all(|word| word.chars().all(is_atext))
}

fn is_atext(c: char) -> bool {
    c.is_ascii_alphanumeric() || "!#$%&'*+-/=?^_`{|}~".contains(c) || !c.is_ascii()
}

fn is_dot_atom(s: &str) -> bool {
    !s.is_empty()
        && s.split('.')
            .all(|part| !part.is_empty() && part.chars().all(is_atext))
}

/// A host name as kube-openapi defines it: one label of letters, digits and symbols with at
/// most one `-`, right after its first character; or dot-separated labels ending in a top-level
/// domain of 2 to 63 letters. At most 255 bytes, labels at most 63.
fn is_hostname(s: &str) -> bool {
    if s.len() > 255 || s.split('.').any(|p| p.len() > 63) {
        return false;
    }
    let chars: Vec<char> = s.chars().collect();
    if !s.contains('.') {
        // One label: a character, then at most 62 more, the first of which may be a `-`.
        let Some((first, rest)) = chars.split_first() else {
            return false;
        };
        let rest = rest.strip_prefix(&['-']).unwrap_or(rest);
        return host_char(*first) && rest.len() <= 62 && rest.iter().all(|c| host_char(*c));
    }
    let mut labels: Vec<&[char]> = chars.split(|c| *c == '.').collect();
    let Some(tld) = labels.pop() else {
        return false;
    };
    let tld_ok = (2..=63).contains(&tld.len())
        && tld
            .iter()
            .all(|c| c.is_ascii_alphabetic() || (!c.is_ascii() && c.is_alphabetic()));
    tld_ok
        && labels.iter().all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && host_char(l[0])
                && host_char(l[l.len() - 1])
                && l.iter().all(|c| host_char(*c) || *c == '-')
        })
}

/// A letter, digit or symbol (`\p{L}`, `\p{S}`): ASCII letters, digits and symbols exactly;
/// beyond ASCII, anything that is not a space, control, digit or mark-like character
/// (an approximation of the Unicode categories without their tables).
fn host_char(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_alphanumeric() || "$+<=>^`|~".contains(c);
    }
    c.is_alphabetic() || !(c.is_whitespace() || c.is_control() || c.is_numeric())
}

/// Go's `ParseIPSloppy`: IPv4 parts may have leading zeros.
fn parse_ip_sloppy(s: &str) -> bool {
    if s.contains(':') {
        return s.parse::<Ipv6Addr>().is_ok();
    }
    let parts: Vec<&str> = s.split('.').collect();
    parts.len() == 4
        && parts.iter().all(|p| {
            !p.is_empty() && p.len() <= 3 && p.bytes().all(|b| b.is_ascii_digit()) && {
                let n: u32 = p.parse().unwrap_or(256);
                n <= 255
            }
        })
        || s.parse::<Ipv4Addr>().is_ok()
}

fn is_cidr(s: &str) -> bool {
    let Some((ip, prefix)) = s.split_once('/') else {
        return false;
    };
    if !parse_ip_sloppy(ip) || prefix.is_empty() || !prefix.bytes().all(|b| b.is_ascii_digit()) {
        return false;
    }
    let max = if ip.contains(':') { 128 } else { 32 };
    prefix.parse::<u32>().is_ok_and(|n| n <= max)
}

/// Go's `net.ParseMAC`: 6, 8 or 20 octets as `aa:bb:..`, `aa-bb-..` or `aabb.ccdd...`.
fn is_mac(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() < 14 {
        return false;
    }
    let ok_n = |n: usize| matches!(n, 6 | 8 | 20);
    if b[2] == b':' || b[2] == b'-' {
        if !(b.len() + 1).is_multiple_of(3) || !ok_n((b.len() + 1) / 3) {
            return false;
        }
        let sep = b[2];
        b.chunks(3).all(|c| {
            c[0].is_ascii_hexdigit() && c[1].is_ascii_hexdigit() && (c.len() == 2 || c[2] == sep)
        })
    } else if b[4] == b'.' {
        if !(b.len() + 1).is_multiple_of(5) || !ok_n(2 * (b.len() + 1) / 5) {
            return false;
        }
        b.chunks(5)
            .all(|c| c[..4].iter().all(u8::is_ascii_hexdigit) && (c.len() == 4 || c[4] == b'.'))
    } else {
        false
    }
}

/// A UUID, upper case allowed, each `-` optional; `version` fixes the first digit of the third
/// group (and for 4 and 5 the variant digit of the fourth).
fn is_uuid(s: &str, version: Option<u8>) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    let mut groups = [0usize; 5];
    let lens = [8, 4, 4, 4, 12];
    for (g, len) in lens.iter().enumerate() {
        if g > 0 && b.get(i) == Some(&b'-') {
            i += 1;
        }
        let start = i;
        while i < b.len() && i - start < *len && b[i].is_ascii_hexdigit() {
            i += 1;
        }
        if i - start != *len {
            return false;
        }
        groups[g] = start;
    }
    if i != b.len() {
        return false;
    }
    match version {
        None => true,
        Some(v) => {
            let variant_ok =
                v == b'3' || matches!(b[groups[3]].to_ascii_lowercase(), b'8' | b'9' | b'a' | b'b');
            b[groups[2]] == v && variant_ok
        }
    }
}

fn strip_spaces_and_dashes(s: &str) -> String {
    s.chars()
        .filter(|c| !c.is_whitespace() && *c != '-')
        .collect()
}

fn is_isbn10(s: &str) -> bool {
    let s = strip_spaces_and_dashes(s);
    let b = s.as_bytes();
    if b.len() != 10
        || !b[..9].iter().all(u8::is_ascii_digit)
        || !(b[9].is_ascii_digit() || b[9] == b'X')
    {
        return false;
    }
    let mut sum: u32 = b[..9]
        .iter()
        .enumerate()
        .map(|(i, d)| (i as u32 + 1) * u32::from(d - b'0'))
        .sum();
    sum += 10
        * if b[9] == b'X' {
            10
        } else {
            u32::from(b[9] - b'0')
        };
    sum.is_multiple_of(11)
}

fn is_isbn13(s: &str) -> bool {
    let s = strip_spaces_and_dashes(s);
    let b = s.as_bytes();
    if b.len() != 13 || !b.iter().all(u8::is_ascii_digit) {
        return false;
    }
    let sum: u32 = b[..12]
        .iter()
        .enumerate()
        .map(|(i, d)| if i % 2 == 0 { 1 } else { 3 } * u32::from(d - b'0'))
        .sum();
    u32::from(b[12] - b'0') == (10 - sum % 10) % 10
}

/// A card number of a known issuer's shape (any non-digits ignored) with a valid Luhn sum.
fn is_credit_card(s: &str) -> bool {
    let digits: Vec<u8> = s
        .bytes()
        .filter(u8::is_ascii_digit)
        .map(|d| d - b'0')
        .collect();
    let text: String = digits.iter().map(|d| char::from(b'0' + d)).collect();
    let n = text.len();
    let starts = |p: &str| text.starts_with(p);
    let shape = (starts("4") && (n == 13 || n == 16))
        || (n == 16 && ["51", "52", "53", "54", "55"].iter().any(|p| starts(p)))
        || (n == 16 && (starts("6011") || starts("65")))
        || (n == 15 && (starts("34") || starts("37")))
        || (n == 14
            && (["300", "301", "302", "303", "304", "305", "36", "38"]
                .iter()
                .any(|p| starts(p))))
        || (n == 15 && (starts("2131") || starts("1800")))
        || (n == 16 && starts("35"));
    if !shape {
        return false;
    }
    let mut sum = 0u32;
    for (i, d) in digits.iter().rev().enumerate() {
        let mut d = u32::from(*d);
        if i % 2 == 1 {
            d *= 2;
            if d > 9 {
                d -= 9;
            }
        }
        sum += d;
    }
    sum.is_multiple_of(10)
}

fn is_ssn(s: &str) -> bool {
    let b = s.as_bytes();
    let digits = |r: &[u8]| r.iter().all(u8::is_ascii_digit);
    match b.len() {
        9 => digits(b),
        10 => {
            (digits(&b[..3]) && matches!(b[3], b'-' | b' ') && digits(&b[4..]))
                || (digits(&b[..5]) && matches!(b[5], b'-' | b' ') && digits(&b[6..]))
        }
        11 => {
            digits(&b[..3])
                && matches!(b[3], b'-' | b' ')
                && digits(&b[4..6])
                && matches!(b[6], b'-' | b' ')
                && digits(&b[7..])
        }
        _ => false,
    }
}

fn is_hex_color(s: &str) -> bool {
    let h = s.strip_prefix('#').unwrap_or(s);
    matches!(h.len(), 3 | 6) && h.bytes().all(|b| b.is_ascii_hexdigit())
}

/// `rgb(R, G, B)` with components 0 to 255 without leading zeros, spaces allowed around them.
fn is_rgb_color(s: &str) -> bool {
    let Some(inner) = s.strip_prefix("rgb(").and_then(|r| r.strip_suffix(')')) else {
        return false;
    };
    let parts: Vec<&str> = inner.split(',').collect();
    parts.len() == 3
        && parts.iter().all(|p| {
            let p = p.trim_matches(|c: char| c.is_ascii_whitespace());
            !p.is_empty()
                && p.len() <= 3
                && p.bytes().all(|b| b.is_ascii_digit())
                && (p == "0" || !p.starts_with('0'))
                && p.parse::<u32>().is_ok_and(|n| n <= 255)
        })
}

/// Standard base64 with padding; the empty string is not base64 here, as upstream.
fn is_base64(s: &str) -> bool {
    let b = s.as_bytes();
    if b.is_empty() || !b.len().is_multiple_of(4) {
        return false;
    }
    let alphabet = |c: &u8| c.is_ascii_alphanumeric() || *c == b'+' || *c == b'/';
    let pad = b.iter().rev().take_while(|c| **c == b'=').count();
    pad <= 2 && b[..b.len() - pad].iter().all(alphabet)
}

fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        _ => 28,
    }
}

/// `YYYY-MM-DD`, a real calendar day.
pub(crate) fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return false;
    }
    let num = |r: &[u8]| -> Option<u32> {
        r.iter()
            .all(u8::is_ascii_digit)
            .then(|| r.iter().fold(0u32, |acc, d| acc * 10 + u32::from(d - b'0')))
    };
    let (Some(year), Some(month), Some(day)) = (num(&b[..4]), num(&b[5..7]), num(&b[8..10])) else {
        return false;
    };
    (1..=12).contains(&month) && day >= 1 && day <= days_in_month(i64::from(year), month)
}

/// kube-openapi's date-time: a date, `T`, then `hh:mm:ss`, optional fraction, `Z` or an offset
/// (case-insensitive).
fn is_date_time(s: &str) -> bool {
    if s.len() < 4 {
        return false;
    }
    let lower = s.to_lowercase();
    let mut parts = lower.split('t');
    let (Some(date), Some(time)) = (parts.next(), parts.next()) else {
        return false;
    };
    if !is_date(date) {
        return false;
    }
    let b = time.as_bytes();
    let two = |i: usize| b.get(i..i + 2).filter(|d| d.iter().all(u8::is_ascii_digit));
    let (Some(h), Some(m), Some(sec)) = (two(0), two(3), two(6)) else {
        return false;
    };
    if b.get(2) != Some(&b':') || b.get(5) != Some(&b':') {
        return false;
    }
    let mut rest = &time[8..];
    // An optional fraction: any one character, then digits.
    let mut chars = rest.char_indices();
    if let Some((_, _)) = chars.next() {
        let after_first = rest.char_indices().nth(1).map_or(rest.len(), |(i, _)| i);
        let digits = rest[after_first..]
            .bytes()
            .take_while(u8::is_ascii_digit)
            .count();
        let candidate = &rest[after_first + digits..];
        if digits > 0 && zone_ok(candidate) {
            rest = candidate;
        }
    }
    zone_ok(rest) && h <= b"23".as_slice() && m <= b"59".as_slice() && sec <= b"59".as_slice()
}

fn zone_ok(z: &str) -> bool {
    let b = z.as_bytes();
    z == "z"
        || (b.len() == 6
            && matches!(b[0], b'+' | b'-')
            && b[1].is_ascii_digit()
            && b[2].is_ascii_digit()
            && b[3] == b':'
            && b[4].is_ascii_digit()
            && b[5].is_ascii_digit())
}

/// Go's `time.ParseDuration`, or kube-openapi's lax form (`3 days`, `1h 30min`).
fn is_duration(s: &str) -> bool {
    go_parse_duration(s) || lax_duration(s)
}

fn go_parse_duration(s: &str) -> bool {
    genplane_apimachinery::duration::parse_signed(s).is_ok()
}

/// kube-openapi's lax durations: anywhere in the string, `[-[space]]digits[spaces]unit` where
/// the unit is a known one (`3 days`, `1 hour 30 min`, `2wk`). A count too large for an
/// int64 makes the whole string invalid, as upstream.
fn lax_duration(s: &str) -> bool {
    const UNITS: [&[&str]; 8] = [
        &["ns", "nano"],
        &["us", "\u{b5}s", "micro"],
        &["ms", "milli"],
        &["s", "sec"],
        &["m", "min"],
        &["h", "hr", "hour"],
        &["d", "day"],
        &["w", "wk", "week"],
    ];
    let is_space = |c: char| matches!(c, ' ' | '\t' | '\n' | '\r' | '\x0c');
    let is_unit = |c: char| c.is_ascii_alphabetic() || c == '\u{b5}';
    let chars: Vec<char> = s.chars().collect();
    let mut found = false;
    let mut i = 0;
    while i < chars.len() {
        // Leftmost match at i: an optional `-` and one space, digits, spaces, unit letters.
        let mut j = i;
        if chars[j] == '-' {
            j += 1;
            if j < chars.len()
                && is_space(chars[j])
                && chars.get(j + 1).is_some_and(char::is_ascii_digit)
            {
                j += 1;
            }
        }
        let digits_start = j;
        while j < chars.len() && chars[j].is_ascii_digit() {
            j += 1;
        }
        if j == digits_start {
            i += 1;
            continue;
        }
        let digits: String = chars[digits_start..j].iter().collect();
        while j < chars.len() && is_space(chars[j]) {
            j += 1;
        }
        let unit_start = j;
        while j < chars.len() && is_unit(chars[j]) {
            j += 1;
        }
        if j == unit_start {
            i += 1;
            continue;
        }
        if digits.parse::<i64>().is_err() {
            return false;
        }
        let unit: String = chars[unit_start..j]
            .iter()
            .collect::<String>()
            .to_lowercase();
        found |= UNITS.iter().any(|variants| {
            variants.iter().enumerate().any(|(k, v)| {
                (k == variants.len() - 1 && unit.starts_with(v)) || unit.eq_ignore_ascii_case(v)
            })
        });
        i = j;
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(f: &str, s: &str) -> bool {
        Format::supported(f).expect("supported").check(s)
    }

    #[test]
    fn names_are_normalized_like_upstream() {
        assert_eq!(Format::supported("date-time"), Some(Format::DateTime));
        assert_eq!(Format::supported("int32"), None);
        assert_eq!(Format::supported("Date"), None);
    }

    #[test]
    fn formats() {
        assert!(ok("date", "2024-02-29"));
        assert!(!ok("date", "2023-02-29"));
        assert!(!ok("date", "2024-1-01"));
        assert!(ok("date-time", "2024-01-02T03:04:05Z"));
        assert!(ok("date-time", "2024-01-02t03:04:05.123+02:00"));
        assert!(!ok("date-time", "2024-01-02T24:04:05Z"));
        assert!(!ok("date-time", "2024-01-02 03:04:05Z"));
        assert!(ok("duration", "1h30m"));
        assert!(ok("duration", "3 days"));
        assert!(ok("duration", "0"));
        assert!(!ok("duration", "soon"));
        assert!(ok("duration", "1 hour 30 min"));
        assert!(ok("duration", "-5 s"));
        assert!(ok("duration", "2wk"));
        assert!(!ok("duration", "5 parsecs"));
        assert!(!ok("duration", "99999999999999999999 days"));
        assert!(ok("uuid", "123e4567-e89b-12d3-a456-426614174000"));
        assert!(ok("uuid", "123E4567E89B12D3A456426614174000"));
        assert!(!ok("uuid", "123e4567-e89b-12d3-a456-42661417400"));
        assert!(ok("uuid4", "123e4567-e89b-42d3-a456-426614174000"));
        assert!(!ok("uuid4", "123e4567-e89b-42d3-c456-426614174000"));
        assert!(ok("email", "jane@example.com"));
        assert!(ok("email", "Jane Doe <jane@example.com>"));
        assert!(!ok("email", "jane.example.com"));
        assert!(!ok("email", "jane@@example.com"));
        assert!(ok("hostname", "example.com"));
        assert!(ok("hostname", "localhost"));
        assert!(ok("hostname", "my-host.example.com"));
        assert!(
            !ok("hostname", "my-host"),
            "upstream's single-label pattern allows one leading '-' only"
        );
        assert!(ok("hostname", "m-yhost"));
        assert!(!ok("hostname", "-bad.com"));
        assert!(!ok("hostname", "under_score.com"));
        assert!(ok("ipv4", "192.168.0.1"));
        assert!(ok("ipv4", "010.0.0.1"));
        assert!(!ok("ipv4", "256.0.0.1"));
        assert!(!ok("ipv4", "::1"));
        assert!(ok("ipv6", "::1"));
        assert!(!ok("ipv6", "1.2.3.4"));
        assert!(ok("cidr", "10.0.0.0/8"));
        assert!(ok("cidr", "fd00::/64"));
        assert!(!ok("cidr", "10.0.0.0/33"));
        assert!(!ok("cidr", "10.0.0.0"));
        assert!(ok("mac", "01:23:45:67:89:ab"));
        assert!(ok("mac", "0123.4567.89ab"));
        assert!(!ok("mac", "01:23:45:67:89"));
        assert!(ok("uri", "https://example.com/a?b=c"));
        assert!(ok("uri", "/just/a/path"));
        assert!(ok("uri", "mailto:jane@example.com"));
        assert!(!ok("uri", "example.com"));
        assert!(!ok("uri", "http://exa mple.com"));
        assert!(!ok("uri", "http://example.com:80a/"));
        assert!(ok("byte", "aGVsbG8="));
        assert!(!ok("byte", "aGVsbG8"));
        assert!(!ok("byte", ""));
        assert!(ok("bsonobjectid", "507f1f77bcf86cd799439011"));
        assert!(ok("isbn10", "0-306-40615-2"));
        assert!(!ok("isbn10", "0306406153"));
        assert!(ok("isbn13", "978-0-306-40615-7"));
        assert!(ok("creditcard", "4111 1111 1111 1111"));
        assert!(!ok("creditcard", "4111 1111 1111 1112"));
        assert!(ok("ssn", "123-45-6789"));
        assert!(ok("hexcolor", "#fff"));
        assert!(!ok("hexcolor", "#ffff"));
        assert!(ok("rgbcolor", "rgb(0, 128,255)"));
        assert!(!ok("rgbcolor", "rgb(0,128,256)"));
        assert!(ok("password", "anything"));
    }
}
