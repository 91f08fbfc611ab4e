//! IP prefixes in canonical form, as NetworkClaims write them.
//!
//! A prefix is canonical when it reads exactly as [`Prefix`]'s `Display` writes it: the address
//! as four decimal numbers without leading zeros (IPv4) or in RFC 5952's form (IPv6: lower
//! case, the longest run of two or more zero groups as `::`, no leading zeros in a group), no
//! bits set beyond the prefix length, and the length in decimal without leading zeros. Anything
//! else that still reads as a prefix (`10.0.0.1/8`, `010.0.0.0/8`, `2001:DB8::/32`,
//! `2001:db8:0:0::/64`, `10.0.0.0/08`) is refused with its canonical form, so a client can
//! correct it; what does not read as a prefix at all is refused as malformed.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// An IPv4 or IPv6 prefix: an address with no bits set beyond `len`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Prefix {
    addr: IpAddr,
    len: u8,
}

/// Why a string is not a canonical prefix.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PrefixError {
    /// It does not read as a prefix at all.
    #[error("must be a CIDR prefix, such as 10.96.0.0/12 or fd00:10:96::/112")]
    Malformed,
    /// It reads as a prefix, but is not written in canonical form.
    #[error("must be in canonical form ({canonical:?})")]
    NotCanonical {
        /// The canonical form of the prefix it reads as.
        canonical: String,
    },
}

impl Prefix {
    /// The prefix of `addr`'s first `len` bits (host bits cleared); `None` when `len` exceeds
    /// the address's width.
    pub fn new(addr: IpAddr, len: u8) -> Option<Self> {
        let width = width(addr);
        if len > width {
            return None;
        }
        Some(Self {
            addr: mask(addr, len),
            len,
        })
    }

    /// The prefix of one address (`/32` or `/128`).
    pub fn host(addr: IpAddr) -> Self {
        Self {
            addr,
            len: width(addr),
        }
    }

    /// Reads a prefix that must be in canonical form (see the module documentation).
    pub fn parse_canonical(text: &str) -> Result<Self, PrefixError> {
        let prefix = Self::parse_lenient(text).ok_or(PrefixError::Malformed)?;
        let canonical = prefix.to_string();
        if canonical == text {
            Ok(prefix)
        } else {
            Err(PrefixError::NotCanonical { canonical })
        }
    }

    /// Reads a CIDR as a flag gives it (Go's `net.ParseCIDR`): any textual form of the
    /// address but leading zeros in IPv4, host bits cleared (`10.0.0.1/24` is `10.0.0.0/24`).
    pub fn parse_cidr(text: &str) -> Result<Self, PrefixError> {
        let (addr, len) = text.split_once('/').ok_or(PrefixError::Malformed)?;
        if IpAddr::from_str(addr).is_err() {
            return Err(PrefixError::Malformed);
        }
        Self::parse_lenient(&format!("{addr}/{len}")).ok_or(PrefixError::Malformed)
    }

    /// Reads anything that reads as a prefix: IPv4 numbers with leading zeros (as decimal),
    /// IPv6 in any of its textual forms, host bits (cleared), a length with leading zeros.
    fn parse_lenient(text: &str) -> Option<Self> {
        let (addr, len) = text.split_once('/')?;
        if len.is_empty() || len.len() > 3 || !len.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let len: u8 = len.parse().ok()?;
        let addr = match IpAddr::from_str(addr) {
            Ok(addr) => addr,
            Err(_) => IpAddr::V4(ipv4_with_leading_zeros(addr)?),
        };
        Self::new(addr, len)
    }

    /// The first address.
    pub fn addr(&self) -> IpAddr {
        self.addr
    }

    /// The prefix length in bits.
    pub fn len(&self) -> u8 {
        self.len
    }

    /// Whether the prefix is the whole address space of its family (`0.0.0.0/0`, `::/0`).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether it is an IPv4 prefix.
    pub fn is_ipv4(&self) -> bool {
        self.addr.is_ipv4()
    }

    /// Whether `addr` is in the prefix (an address of the other family never is).
    pub fn contains(&self, addr: IpAddr) -> bool {
        addr.is_ipv4() == self.addr.is_ipv4() && mask(addr, self.len) == self.addr
    }

    /// Whether `other` is inside this prefix (or equal to it).
    pub fn covers(&self, other: &Prefix) -> bool {
        other.len >= self.len && self.contains(other.addr)
    }

    /// Whether the two prefixes share an address: one covers the other (prefixes never
    /// overlap partly).
    pub fn overlaps(&self, other: &Prefix) -> bool {
        self.covers(other) || other.covers(self)
    }
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // std writes IPv4 in dotted decimal and IPv6 as RFC 5952 asks.
        write!(f, "{}/{}", self.addr, self.len)
    }
}

impl FromStr for Prefix {
    type Err = PrefixError;

    /// [`Prefix::parse_canonical`].
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::parse_canonical(text)
    }
}

/// Reads a list of one CIDR, or two of different families, as kube-apiserver reads
/// `--service-cluster-ip-range` and kube-controller-manager `--cluster-cidr`.
pub fn parse_dual_stack(text: &str) -> Result<Vec<Prefix>, String> {
    let mut cidrs = Vec::new();
    for part in text.split(',') {
        let cidr = Prefix::parse_cidr(part.trim()).map_err(|_| {
            format!("{part:?} is not a valid CIDR (e.g. 10.96.0.0/12 or fd00::/108)")
        })?;
        cidrs.push(cidr);
    }
    match cidrs.as_slice() {
        [_] => Ok(cidrs),
        [a, b] if a.is_ipv4() != b.is_ipv4() => Ok(cidrs),
        [_, _] => Err("two CIDRs must be of different IP families (dual stack)".to_owned()),
        _ => Err("at most two CIDRs, one of each IP family".to_owned()),
    }
}

fn width(addr: IpAddr) -> u8 {
    match addr {
        IpAddr::V4(_) => 32,
        IpAddr::V6(_) => 128,
    }
}

/// `addr` with every bit after the first `len` cleared.
fn mask(addr: IpAddr, len: u8) -> IpAddr {
    match addr {
        IpAddr::V4(a) => {
            let bits = u32::from(a);
            let kept = u32::MAX
                .checked_shl(32 - u32::from(len.min(32)))
                .unwrap_or(0);
            IpAddr::V4(Ipv4Addr::from(bits & kept))
        }
        IpAddr::V6(a) => {
            let bits = u128::from(a);
            let kept = u128::MAX
                .checked_shl(128 - u32::from(len.min(128)))
                .unwrap_or(0);
            IpAddr::V6(Ipv6Addr::from(bits & kept))
        }
    }
}

/// Dotted decimal with leading zeros (`010.001.0.0`), read as decimal, as Go's parser read it
/// before 1.17: only to show the canonical form.
fn ipv4_with_leading_zeros(text: &str) -> Option<Ipv4Addr> {
    let mut octets = [0u8; 4];
    let mut parts = text.split('.');
    for octet in &mut octets {
        let part = parts.next()?;
        if part.is_empty() || part.len() > 4 || !part.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        *octet = part.parse().ok()?;
    }
    parts.next().is_none().then(|| Ipv4Addr::from(octets))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canonical(text: &str) -> Result<String, PrefixError> {
        Prefix::parse_canonical(text).map(|p| p.to_string())
    }

    fn not_canonical(canonical: &str) -> Result<String, PrefixError> {
        Err(PrefixError::NotCanonical {
            canonical: canonical.to_owned(),
        })
    }

    #[test]
    fn canonical_prefixes_read_back_as_written() {
        for text in [
            "10.0.0.0/8",
            "0.0.0.0/0",
            "192.168.1.7/32",
            "fd00:10:96::/112",
            "2001:db8::/32",
            "::/0",
            "::1/128",
            "2001:db8:0:1::/64",
            "::ffff:10.0.0.0/104",
        ] {
            assert_eq!(canonical(text), Ok(text.to_owned()), "{text}");
        }
    }

    #[test]
    fn other_forms_are_refused_with_the_canonical_one() {
        for (text, want) in [
            ("10.0.0.1/8", "10.0.0.0/8"),
            ("010.0.0.0/8", "10.0.0.0/8"),
            ("10.0.0.0/08", "10.0.0.0/8"),
            ("2001:DB8::/32", "2001:db8::/32"),
            ("2001:db8:0:0::/64", "2001:db8::/64"),
            ("2001:0db8::/32", "2001:db8::/32"),
            ("2001:db8::1/64", "2001:db8::/64"),
            ("0:0:0:0:0:0:0:0/0", "::/0"),
            ("2001:db8:0:1:0:0:0:0/64", "2001:db8:0:1::/64"),
        ] {
            assert_eq!(canonical(text), not_canonical(want), "{text}");
        }
    }

    #[test]
    fn what_is_no_prefix_is_malformed() {
        for text in [
            "",
            "10.0.0.0",
            "10.0.0.0/33",
            "::/129",
            "10.0.0/8",
            "10.0.0.0.0/8",
            "256.0.0.0/8",
            "10.0.0.0/-1",
            "10.0.0.0/+8",
            "10.0.0.0/8/8",
            "fe80::1%eth0/64",
            "10.0.0.0/ 8",
            " 10.0.0.0/8",
            "x/8",
        ] {
            assert_eq!(canonical(text), Err(PrefixError::Malformed), "{text:?}");
        }
    }

    #[test]
    fn flags_read_one_cidr_or_two_of_different_families() {
        let read = |text| {
            parse_dual_stack(text).map(|v| v.iter().map(ToString::to_string).collect::<Vec<_>>())
        };
        assert_eq!(read("10.0.0.1/24"), Ok(vec!["10.0.0.0/24".to_owned()]));
        assert_eq!(
            read("10.96.0.0/12, FD00::/108"),
            Ok(vec!["10.96.0.0/12".to_owned(), "fd00::/108".to_owned()])
        );
        assert!(
            read("10.0.0.0/8,11.0.0.0/8")
                .unwrap_err()
                .contains("different IP families")
        );
        assert!(
            read("010.0.0.0/8")
                .unwrap_err()
                .contains("not a valid CIDR")
        );
        assert!(read("10.0.0.0/8,::/0,fd00::/8").is_err());
    }

    #[test]
    fn containment_and_overlap() {
        let p = |s: &str| Prefix::parse_canonical(s).unwrap();
        let ten = p("10.0.0.0/8");
        assert!(ten.covers(&p("10.1.0.0/16")));
        assert!(!p("10.1.0.0/16").covers(&ten));
        assert!(ten.overlaps(&p("10.1.0.0/16")) && p("10.1.0.0/16").overlaps(&ten));
        assert!(!ten.overlaps(&p("11.0.0.0/8")));
        assert!(
            !p("::/0").overlaps(&p("0.0.0.0/0")),
            "families never overlap"
        );
        assert!(ten.contains("10.255.0.1".parse().unwrap()));
        assert!(!ten.contains("::a00:1".parse().unwrap()));
        assert_eq!(Prefix::host("10.0.0.1".parse().unwrap()), p("10.0.0.1/32"));
    }
}
