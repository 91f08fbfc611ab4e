//! The cluster's loopback addresses: everything it serves or simulates lives in 127.0.0.0/8,
//! which Linux routes to the loopback interface whole, so that no address needs setting up.
//!
//! A cluster's addresses come from its [`Plan`], one of 16 blocks (`--address-block B`, 0 by
//! default), so that clusters running at once on one machine (tests in parallel) never share
//! an address:
//!
//! | range | what |
//! |---|---|
//! | `127.0.0.1` | the API server (`--bind-address`) |
//! | `127.{2B}.1.N` | node N's address (`InternalIP`), N from 1 |
//! | `127.{2B+1}.N.0/24` | node N's pod CIDR: its pods' addresses |
//! | `127.{96+B}.0.0/16` | the service ClusterIP range |
//! | `127.{112+B}.0.0/16` | the fake cloud's load-balancer addresses |
//! | `127.{128+B}.0.0/16` | addresses for Services' `externalIPs` (on no node) |
//!
//! Node ports are 30000–32767, as upstream's default range; they are served on each node's
//! own address, so blocks do not share them either.

use std::net::Ipv4Addr;

/// The node-port range (inclusive).
pub const NODE_PORTS: (u16, u16) = (30000, 32767);

/// How many address blocks there are.
pub const BLOCKS: u8 = 16;

/// The addresses of one cluster (see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    block: u8,
}

impl Plan {
    /// The plan of block `block` (below [`BLOCKS`]; larger ones wrap).
    pub fn new(block: u8) -> Self {
        Self {
            block: block % BLOCKS,
        }
    }

    /// The address of node `n` (from 1).
    pub fn node_ip(self, n: u8) -> Ipv4Addr {
        Ipv4Addr::new(127, 2 * self.block, 1, n)
    }

    /// The pod CIDR of node `n` (from 1).
    pub fn pod_cidr(self, n: u8) -> (Ipv4Addr, u8) {
        (Ipv4Addr::new(127, 2 * self.block + 1, n, 0), 24)
    }

    /// The node (its number) whose address or pod range holds `ip`, if any.
    pub fn node_of(self, ip: Ipv4Addr) -> Option<u8> {
        let [a, b, c, d] = ip.octets();
        match (a, b) {
            (127, b) if b == 2 * self.block && c == 1 && d != 0 => Some(d),
            (127, b) if b == 2 * self.block + 1 && c != 0 => Some(c),
            _ => None,
        }
    }

    /// The ClusterIP range of services.
    pub fn service_cidr(self) -> (Ipv4Addr, u8) {
        (Ipv4Addr::new(127, 96 + self.block, 0, 0), 16)
    }

    /// A range of addresses on no node, for Services' `externalIPs` (upstream's tests use a
    /// documentation range; this cluster may only use loopback addresses).
    pub fn external_ip_cidr(self) -> (Ipv4Addr, u8) {
        (Ipv4Addr::new(127, 128 + self.block, 0, 0), 16)
    }

    /// The range load-balancer addresses come from.
    pub fn load_balancer_cidr(self) -> (Ipv4Addr, u8) {
        (Ipv4Addr::new(127, 112 + self.block, 0, 0), 16)
    }
}

/// Reads an IPv4 CIDR such as `127.1.2.0/24`.
pub fn parse_cidr(cidr: &str) -> Option<(Ipv4Addr, u8)> {
    let (address, bits) = cidr.split_once('/')?;
    let address: Ipv4Addr = address.parse().ok()?;
    let bits: u8 = bits.parse().ok().filter(|b| *b <= 32)?;
    Some((address, bits))
}

/// `address/bits`.
pub fn format_cidr((address, bits): (Ipv4Addr, u8)) -> String {
    format!("{address}/{bits}")
}

/// Whether `ip` is in `cidr`.
pub fn contains((network, bits): (Ipv4Addr, u8), ip: Ipv4Addr) -> bool {
    let mask = if bits == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(bits))
    };
    u32::from(network) & mask == u32::from(ip) & mask
}

/// The usable addresses of `cidr`: all but its first (the network) and last (broadcast).
pub fn hosts((network, bits): (Ipv4Addr, u8)) -> impl Iterator<Item = Ipv4Addr> {
    let size = 1u64 << (32 - u32::from(bits));
    let first = u64::from(u32::from(network));
    (first + 1..first + size.saturating_sub(1))
        .filter_map(|ip| u32::try_from(ip).ok().map(Ipv4Addr::from))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn ranges() {
        let cidr = parse_cidr("127.1.2.0/24").unwrap();
        assert!(contains(cidr, Ipv4Addr::new(127, 1, 2, 9)));
        assert!(!contains(cidr, Ipv4Addr::new(127, 1, 3, 9)));
        assert_eq!(hosts(cidr).count(), 254);
        assert_eq!(hosts(cidr).next(), Some(Ipv4Addr::new(127, 1, 2, 1)));
        assert_eq!(parse_cidr("127.1.2.0/33"), None);
        assert_eq!(format_cidr(Plan::default().pod_cidr(3)), "127.1.3.0/24");
        let plan = Plan::new(2);
        assert_eq!(plan.node_ip(3), Ipv4Addr::new(127, 4, 1, 3));
        assert_eq!(format_cidr(plan.pod_cidr(3)), "127.5.3.0/24");
        assert_eq!(format_cidr(plan.service_cidr()), "127.98.0.0/16");
        assert_eq!(format_cidr(plan.external_ip_cidr()), "127.130.0.0/16");
        assert_eq!(plan.node_of(Ipv4Addr::new(127, 5, 3, 9)), Some(3));
        assert_eq!(plan.node_of(Ipv4Addr::new(127, 4, 1, 2)), Some(2));
        assert_eq!(plan.node_of(Ipv4Addr::new(127, 98, 0, 1)), None);
    }
}
