//! The prefix index: which claim holds which range, answered without scanning.
//!
//! Ranges held in one index never overlap (the index refuses an overlapping one), so an address
//! has at most one holder. Two CIDR prefixes either are disjoint or one contains the other, so
//! "does P overlap a held range?" is "is P inside a held range, or a held range inside P?":
//! the first is a walk from the root to P, the second the subtree under P, both in a prefix
//! trie (`prefix-trie`'s tree bitmap, one tree per address family). Every query costs
//! O(W) steps (W = 32 or 128 bits) plus the answers, whatever the number of ranges held.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;
use std::sync::Arc;

use genplane_api::networkregistry::Prefix;
use genplane_api::networkregistry::networkclaim::ResourceReference;
use ipnet::IpNet;
use prefix_trie::joint::map::JointPrefixMap;

/// A range held by a claim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Holding {
    /// The claim's name.
    pub claim: Arc<str>,
    /// The range.
    pub prefix: Prefix,
    /// What the range is for.
    pub reference: ResourceReference,
    /// The record's description.
    pub description: Option<String>,
}

/// Ranges, each held by one claim; no two overlap.
#[derive(Debug, Default)]
pub struct PrefixIndex {
    ranges: JointPrefixMap<IpNet, Arc<Holding>>,
    by_reference: BTreeMap<ResourceReference, BTreeSet<Prefix>>,
    by_claim: HashMap<Arc<str>, Vec<Prefix>>,
}

fn net(prefix: &Prefix) -> IpNet {
    IpNet::new_assert(prefix.addr(), prefix.len())
}

impl PrefixIndex {
    /// An empty index.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many ranges are held.
    pub fn len(&self) -> usize {
        self.ranges.len()
    }

    /// Whether no range is held.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Holds `holding`'s range for its claim, unless a held range overlaps it: then nothing
    /// changes and that range's holding is returned (the covering one first, else the first
    /// one inside it).
    pub fn insert(&mut self, holding: Holding) -> Result<(), Arc<Holding>> {
        if let Some(holder) = self.first_overlap(&holding.prefix) {
            return Err(holder.clone());
        }
        let holding = Arc::new(holding);
        self.by_reference
            .entry(holding.reference.clone())
            .or_default()
            .insert(holding.prefix);
        self.by_claim
            .entry(holding.claim.clone())
            .or_default()
            .push(holding.prefix);
        self.ranges.insert(net(&holding.prefix), holding);
        Ok(())
    }

    /// Releases every range `claim` holds.
    pub fn remove_claim(&mut self, claim: &str) {
        let Some(prefixes) = self.by_claim.remove(claim) else {
            return;
        };
        for prefix in prefixes {
            if let Some(holding) = self.ranges.remove(&net(&prefix))
                && let Some(set) = self.by_reference.get_mut(&holding.reference)
            {
                set.remove(&prefix);
                if set.is_empty() {
                    self.by_reference.remove(&holding.reference);
                }
            }
        }
    }

    /// The first held range overlapping `prefix`: one covering it, else one inside it.
    pub fn first_overlap(&self, prefix: &Prefix) -> Option<&Arc<Holding>> {
        let p = net(prefix);
        self.ranges
            .cover(&p)
            .next()
            .or_else(|| self.ranges.children(&p).next())
            .map(|(_, holding)| holding)
    }

    /// Every held range overlapping `prefix`: the one covering it (there is at most one), or
    /// those inside it, in address order.
    pub fn overlaps(&self, prefix: &Prefix) -> Vec<&Arc<Holding>> {
        let p = net(prefix);
        let mut found: Vec<&Arc<Holding>> = self.ranges.cover(&p).map(|(_, h)| h).collect();
        if found.is_empty() {
            found.extend(self.ranges.children(&p).map(|(_, h)| h));
        }
        found
    }

    /// The holding of the range `addr` is in, if any.
    pub fn owner_of(&self, addr: IpAddr) -> Option<&Arc<Holding>> {
        self.ranges
            .get_lpm(&net(&Prefix::host(addr)))
            .map(|(_, holding)| holding)
    }

    /// The held ranges for `group` and `resource`, in address order (IPv4 first).
    pub fn ranges_for(&self, group: &str, resource: &str) -> Vec<&Arc<Holding>> {
        let key = ResourceReference {
            group: group.to_owned(),
            resource: resource.to_owned(),
        };
        self.by_reference
            .get(&key)
            .into_iter()
            .flatten()
            .filter_map(|prefix| self.ranges.get(&net(prefix)))
            .collect()
    }

    /// The ranges `claim` holds.
    pub fn held_by(&self, claim: &str) -> Vec<&Arc<Holding>> {
        self.by_claim
            .get(claim)
            .into_iter()
            .flatten()
            .filter_map(|prefix| self.ranges.get(&net(prefix)))
            .collect()
    }

    /// Every held range, IPv4 first, in address order.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<Holding>> {
        self.ranges.iter().map(|(_, holding)| holding)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holding(claim: &str, prefix: &str) -> Holding {
        Holding {
            claim: claim.into(),
            prefix: Prefix::parse_canonical(prefix).unwrap(),
            reference: ResourceReference {
                group: String::new(),
                resource: "pods".into(),
            },
            description: None,
        }
    }

    fn p(text: &str) -> Prefix {
        Prefix::parse_canonical(text).unwrap()
    }

    #[test]
    fn overlap_is_found_in_both_directions_and_families_apart() {
        let mut index = PrefixIndex::new();
        index.insert(holding("a", "10.0.0.0/16")).unwrap();
        index.insert(holding("b", "fd00::/8")).unwrap();
        // Covered by a held range, and covering one.
        assert_eq!(
            &*index.insert(holding("c", "10.0.1.0/24")).unwrap_err().claim,
            "a"
        );
        assert_eq!(
            &*index.insert(holding("c", "10.0.0.0/8")).unwrap_err().claim,
            "a"
        );
        assert_eq!(&*index.insert(holding("c", "::/0")).unwrap_err().claim, "b");
        index.insert(holding("c", "10.1.0.0/16")).unwrap();
        index.insert(holding("c", "0.0.0.0/32")).unwrap();
        assert_eq!(index.overlaps(&p("10.0.0.0/8")).len(), 2);
        assert_eq!(
            index
                .owner_of("10.0.200.1".parse().unwrap())
                .map(|h| &*h.claim),
            Some("a")
        );
        assert_eq!(
            index
                .owner_of("fd12::1".parse().unwrap())
                .map(|h| &*h.claim),
            Some("b")
        );
        assert!(index.owner_of("10.2.0.1".parse().unwrap()).is_none());
        assert_eq!(index.ranges_for("", "pods").len(), 4);
        index.remove_claim("a");
        assert!(index.owner_of("10.0.200.1".parse().unwrap()).is_none());
        assert_eq!(index.ranges_for("", "pods").len(), 3);
        assert_eq!(index.held_by("c").len(), 2);
    }
}
