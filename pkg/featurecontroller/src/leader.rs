//! Choosing the acting feature-controller by rendezvous (highest random weight) hashing.
//!
//! Every feature-controller instance keeps an identity Lease and reads everyone's. The leader
//! is the live feature-controller instance whose Lease name has the highest weight, the first 8
//! bytes (big-endian) of SHA-256 over [`SALT`] and the name. Every instance computes the same
//! answer from the same set with no election traffic; a new instance takes over only if it
//! outweighs the leader, and when the leader's Lease expires the next heaviest takes over.
//! While instances see different sets (a Lease just expired for one and not yet for another)
//! two may act at once: every write of the server flow carries the resourceVersion it was
//! computed from and is idempotent, so one of them fails with a conflict and recomputes.

/// Hashed before each name, so that weights are genplane's own.
pub const SALT: &[u8] = b"genplane.io/feature-controller-leader\0";

/// The weight of the instance named `name`.
pub fn weight(name: &str) -> u64 {
    let mut data = Vec::with_capacity(SALT.len() + name.len());
    data.extend_from_slice(SALT);
    data.extend_from_slice(name.as_bytes());
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, &data);
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&digest.as_ref()[..8]);
    u64::from_be_bytes(bytes)
}

/// The leader among `candidates` (names of live instances): the heaviest, ties broken by name.
pub fn leader<'a>(candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    candidates
        .into_iter()
        .max_by(|a, b| weight(a).cmp(&weight(b)).then_with(|| a.cmp(b)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_order_of_the_same_set_elects_the_same_leader() {
        let names = ["fc-a", "fc-b", "fc-c", "fc-d"];
        let first = leader(names).unwrap();
        let mut reversed = names;
        reversed.reverse();
        assert_eq!(leader(reversed), Some(first));
        // Without the leader, another one; adding a lighter one changes nothing.
        let rest: Vec<&str> = names.into_iter().filter(|n| *n != first).collect();
        let second = leader(rest.iter().copied()).unwrap();
        assert_ne!(second, first);
        let lighter = (0..100)
            .map(|i| format!("fc-x{i}"))
            .find(|n| weight(n) < weight(first))
            .unwrap();
        let mut more: Vec<&str> = names.to_vec();
        more.push(&lighter);
        assert_eq!(leader(more), Some(first));
        assert_eq!(leader(std::iter::empty()), None);
    }
}
