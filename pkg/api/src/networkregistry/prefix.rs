//! IP prefixes in canonical form, as NetworkClaims write them.
//!
//! A claim's prefix is checked as upstream's strict CIDR validation checks a ServiceCIDR's
//! (Kubernetes 1.33, `IsValidCIDR`), and must be canonical besides (as an IPAddress's name
//! must be), so that two texts never name the same range:
//!
//! - it must read as a CIDR at all (`must be a valid CIDR value, ...`): an address, `/`, a
//!   length within the address's width; no zone (`fe80::%eth0/64`), no spaces;
//! - no leading zeros in an IPv4 number or in the length (`010.0.0.0/8`, `10.0.0.0/08`):
//!   other software reads `010` as octal;
//! - not an IPv4-mapped IPv6 prefix (`::ffff:10.0.0.0/104` is `10.0.0.0/8` written as IPv6):
//!   the same IPv4 addresses would otherwise be claimable twice;
//! - the address as [`Prefix`]'s `Display` writes it: IPv6 as RFC 5952 asks (lower case, the
//!   longest run of two or more zero groups as `::`, no leading zeros in a group);
//! - no bits set beyond the prefix length (`10.1.2.3/16`).
//!
//! Each problem found is reported ([`Prefix::problems`]), with upstream's wording; a prefix
//! not in canonical form is told its canonical form, so a client can correct it.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// An IPv4 or IPv6 prefix: an address with no bits set beyond `len`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Prefix {
    addr: IpAddr,
    len: u8,
}

/// Why a string is not a canonical prefix (upstream's messages, where upstream has one).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PrefixError {
    /// It does not read as a prefix at all.
    #[error("must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)")]
    Malformed,
    /// An IPv4 number or the length has leading zeros.
    #[error("must not have leading 0s in IP or prefix length")]
    LeadingZeros,
    /// An IPv6 prefix of IPv4-mapped addresses (`::ffff:a.b.c.d`).
    #[error("must not have an IPv4-mapped IPv6 address")]
    Ipv4Mapped,
    /// It reads as a prefix, but the address is not written in canonical form.
    #[error("must be in canonical form ({canonical:?})")]
    NotCanonical {
        /// The canonical form of what was written (host bits kept, as written).
        canonical: String,
    },
    /// Bits are set beyond the prefix length.
    #[error("must not have bits set beyond the prefix length")]
    HostBits,
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

    /// Reads a prefix that must be in canonical form (see the module documentation); the first
    /// problem when it is not ([`Prefix::problems`] gives them all).
    pub fn parse_canonical(text: &str) -> Result<Self, PrefixError> {
        let (addr, len) = Self::parse_lenient(text).ok_or(PrefixError::Malformed)?;
        match Self::problems_of(text, addr, len).into_iter().next() {
            Some(problem) => Err(problem),
            None => Ok(Self { addr, len }),
        }
    }

    /// Every problem of `text` as a claim's prefix, in upstream's order; none when it is a
    /// canonical prefix.
    pub fn problems(text: &str) -> Vec<PrefixError> {
        match Self::parse_lenient(text) {
            None => vec![PrefixError::Malformed],
            Some((addr, len)) => Self::problems_of(text, addr, len),
        }
    }

    /// The problems of `text`, which reads as `addr`/`len`.
    fn problems_of(text: &str, addr: IpAddr, len: u8) -> Vec<PrefixError> {
        let mut problems = Vec::new();
        let (addr_text, len_text) = text.split_once('/').unwrap_or((text, ""));
        if IpAddr::from_str(addr_text).is_err() || len_text != len.to_string() {
            problems.push(PrefixError::LeadingZeros);
        }
        if let IpAddr::V6(v6) = addr
            && v6.to_ipv4_mapped().is_some()
        {
            problems.push(PrefixError::Ipv4Mapped);
        }
        // As upstream, the form is judged only when the address read strictly.
        if problems.is_empty() && format!("{addr}/{len}") != text {
            problems.push(PrefixError::NotCanonical {
                canonical: format!("{addr}/{len}"),
            });
        }
        if mask(addr, len) != addr {
            problems.push(PrefixError::HostBits);
        }
        problems
    }

    /// Reads a CIDR as a flag gives it (Go's `net.ParseCIDR`): any textual form of the
    /// address but leading zeros in IPv4, host bits cleared (`10.0.0.1/24` is `10.0.0.0/24`);
    /// an IPv4-mapped IPv6 prefix is refused, as in a claim.
    pub fn parse_cidr(text: &str) -> Result<Self, PrefixError> {
        let (addr, len) = text.split_once('/').ok_or(PrefixError::Malformed)?;
        if IpAddr::from_str(addr).is_err() {
            return Err(PrefixError::Malformed);
        }
        let (addr, len) =
            Self::parse_lenient(&format!("{addr}/{len}")).ok_or(PrefixError::Malformed)?;
        if let IpAddr::V6(v6) = addr
            && v6.to_ipv4_mapped().is_some()
        {
            return Err(PrefixError::Ipv4Mapped);
        }
        Self::new(addr, len).ok_or(PrefixError::Malformed)
    }

    /// Reads anything that reads as a prefix, as Go's sloppy CIDR parser does: IPv4 numbers
    /// with leading zeros (as decimal), IPv6 in any of its textual forms, a length with leading
    /// zeros; the address as written (host bits kept) and the length.
    fn parse_lenient(text: &str) -> Option<(IpAddr, u8)> {
        let (addr, len) = text.split_once('/')?;
        if len.is_empty() || len.len() > 3 || !len.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let len: u8 = len.parse().ok()?;
        let addr = match IpAddr::from_str(addr) {
            Ok(addr) => addr,
            Err(_) => IpAddr::V4(ipv4_with_leading_zeros(addr)?),
        };
        (len <= width(addr)).then_some((addr, len))
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
            "::a00:0/104",
        ] {
            assert_eq!(canonical(text), Ok(text.to_owned()), "{text}");
        }
    }

    #[test]
    fn other_forms_are_refused_with_upstreams_reasons() {
        use PrefixError::{HostBits, Ipv4Mapped, LeadingZeros};
        let not_canonical = |c: &str| PrefixError::NotCanonical {
            canonical: c.to_owned(),
        };
        for (text, want) in [
            ("10.0.0.1/8", vec![HostBits]),
            ("010.0.0.0/8", vec![LeadingZeros]),
            ("10.0.0.0/08", vec![LeadingZeros]),
            ("010.0.0.1/8", vec![LeadingZeros, HostBits]),
            ("2001:DB8::/32", vec![not_canonical("2001:db8::/32")]),
            ("2001:db8:0:0::/64", vec![not_canonical("2001:db8::/64")]),
            ("2001:0db8::/32", vec![not_canonical("2001:db8::/32")]),
            ("2001:db8::1/64", vec![HostBits]),
            (
                "2001:DB8::1/32",
                vec![not_canonical("2001:db8::1/32"), HostBits],
            ),
            ("0:0:0:0:0:0:0:0/0", vec![not_canonical("::/0")]),
            ("::ffff:10.0.0.0/104", vec![Ipv4Mapped]),
            ("::ffff:0.0.0.0/96", vec![Ipv4Mapped]),
            ("::FFFF:10.0.0.0/104", vec![Ipv4Mapped]),
            ("::ffff:10.0.0.1/104", vec![Ipv4Mapped, HostBits]),
        ] {
            assert_eq!(Prefix::problems(text), want, "{text}");
            assert_eq!(canonical(text), Err(want[0].clone()), "{text}");
        }
        assert_eq!(
            not_canonical("2001:db8::/32").to_string(),
            "must be in canonical form (\"2001:db8::/32\")"
        );
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
        assert!(read("::ffff:10.0.0.0/104").is_err());
        assert_eq!(
            Prefix::parse_cidr("::ffff:10.0.0.0/104"),
            Err(PrefixError::Ipv4Mapped)
        );
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
