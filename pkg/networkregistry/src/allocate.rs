//! First come, first served: the registry's verdict on every record of every claim.
//!
//! Claims are taken in a stored total order, their `metadata.creationTimestamp` and then their
//! name, so every controller (a new leader, or the same one after a restart) that reads the
//! same claims reaches the same verdicts. Each record of each claim, in that order, is
//! `Allocated` when no range allocated before it overlaps it, and `Unavailable` otherwise,
//! naming the claim that holds the overlapping range. A record that is not allocated holds
//! nothing, so it blocks no later claim.
//!
//! The whole allocation is one pass with the [`PrefixIndex`]: O(n · W) for n records. Claims
//! that come after every claim decided so far (the usual new claim: created last) are decided
//! on top of an allocation without deciding the others again ([`Allocation::extend`]): no
//! verdict given before can change, since a claim only ever yields to earlier ones.

use std::collections::HashMap;
use std::sync::Arc;

use genplane_api::networkregistry::Prefix;
use genplane_api::networkregistry::networkclaim::AddressRecord;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::index::{Holding, PrefixIndex};

/// A claim as the allocation reads it.
#[derive(Clone, Debug)]
pub struct Candidate {
    /// The claim's name.
    pub name: Arc<str>,
    /// Its `metadata.creationTimestamp`.
    pub created: Option<Time>,
    /// Its address records, in spec order (shared: a pass copies none).
    pub records: Arc<[AddressRecord]>,
}

/// Where a claim comes in the order: creation time, then name.
type OrderKey = (Option<Time>, Arc<str>);

impl Candidate {
    fn key(&self) -> OrderKey {
        (self.created.clone(), self.name.clone())
    }
}

/// The verdict on one record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The range is the claim's.
    Allocated,
    /// An earlier claim holds an overlapping range.
    Unavailable {
        /// The claim holding it.
        holder: Arc<str>,
        /// The range it holds.
        held: Prefix,
    },
    /// The record's prefix is not a canonical prefix (the API refuses such records, so only
    /// an object stored another way has one).
    Invalid,
}

/// Every verdict, and the index of what is allocated.
#[derive(Debug, Default)]
pub struct Allocation {
    /// The allocated ranges.
    pub index: PrefixIndex,
    /// Per claim, the verdict on each record (prefix as written, verdict), in spec order.
    pub verdicts: HashMap<Arc<str>, Vec<(String, Verdict)>>,
    /// The last claim decided, in the order.
    last: Option<OrderKey>,
}

impl Allocation {
    /// Whether every one of `candidates` comes after every claim decided so far (and none was
    /// decided already): then [`Allocation::extend`] gives the verdicts [`allocate`] would.
    pub fn follows(&self, candidates: &[Candidate]) -> bool {
        candidates.iter().all(|c| {
            !self.verdicts.contains_key(&c.name)
                && self.last.as_ref().is_none_or(|last| c.key() > *last)
        })
    }

    /// Decides on `candidates` after the claims decided so far, in their order (see
    /// [`Allocation::follows`]).
    pub fn extend(&mut self, mut candidates: Vec<Candidate>) {
        candidates.sort_by(order);
        for candidate in candidates {
            let mut verdicts = Vec::with_capacity(candidate.records.len());
            for record in candidate.records.iter() {
                let verdict = match Prefix::parse_canonical(&record.prefix) {
                    Err(_) => Verdict::Invalid,
                    Ok(prefix) => match self.index.insert(Holding {
                        claim: candidate.name.clone(),
                        prefix,
                        reference: record.reference.clone(),
                        description: record.description.clone(),
                    }) {
                        Ok(()) => Verdict::Allocated,
                        Err(holder) => Verdict::Unavailable {
                            holder: holder.claim.clone(),
                            held: holder.prefix,
                        },
                    },
                };
                verdicts.push((record.prefix.clone(), verdict));
            }
            let key = candidate.key();
            if self.last.as_ref().is_none_or(|last| key > *last) {
                self.last = Some(key);
            }
            self.verdicts.insert(candidate.name, verdicts);
        }
    }
}

/// The order of claims: creation time, then name.
pub fn order(a: &Candidate, b: &Candidate) -> std::cmp::Ordering {
    (&a.created, &a.name).cmp(&(&b.created, &b.name))
}

/// Allocates `candidates` first come, first served (see the module documentation).
pub fn allocate(candidates: Vec<Candidate>) -> Allocation {
    let mut allocation = Allocation::default();
    allocation.extend(candidates);
    allocation
}

#[cfg(test)]
mod tests {
    use super::*;
    use genplane_api::networkregistry::networkclaim::ResourceReference;

    fn candidate(name: &str, second: i64, prefixes: &[&str]) -> Candidate {
        Candidate {
            name: name.into(),
            created: Some(Time(
                k8s_openapi::jiff::Timestamp::from_second(second).unwrap(),
            )),
            records: prefixes
                .iter()
                .map(|p| AddressRecord {
                    reference: ResourceReference {
                        group: String::new(),
                        resource: "services".into(),
                    },
                    prefix: (*p).to_owned(),
                    description: None,
                })
                .collect(),
        }
    }

    fn statuses(allocation: &Allocation, name: &str) -> Vec<String> {
        allocation.verdicts[name]
            .iter()
            .map(|(prefix, verdict)| match verdict {
                Verdict::Allocated => format!("{prefix} allocated"),
                Verdict::Unavailable { holder, held } => {
                    format!("{prefix} held by {holder} {held}")
                }
                Verdict::Invalid => format!("{prefix} invalid"),
            })
            .collect()
    }

    #[test]
    fn earlier_claims_win_then_names_break_ties() {
        let claims = vec![
            candidate("late", 20, &["10.0.0.0/8", "fd00::/64"]),
            candidate("b", 10, &["10.1.0.0/16"]),
            candidate("a", 10, &["10.1.2.0/24", "fd00::/8"]),
            candidate("later", 30, &["10.0.0.0/8", "192.168.0.0/16"]),
        ];
        let allocation = allocate(claims.clone());
        assert_eq!(
            statuses(&allocation, "a"),
            ["10.1.2.0/24 allocated", "fd00::/8 allocated"]
        );
        assert_eq!(
            statuses(&allocation, "b"),
            ["10.1.0.0/16 held by a 10.1.2.0/24"]
        );
        assert_eq!(
            statuses(&allocation, "late"),
            [
                "10.0.0.0/8 held by a 10.1.2.0/24",
                "fd00::/64 held by a fd00::/8"
            ]
        );
        // An unavailable record holds nothing: `later` is blocked by `a` only.
        assert_eq!(
            statuses(&allocation, "later"),
            [
                "10.0.0.0/8 held by a 10.1.2.0/24",
                "192.168.0.0/16 allocated"
            ]
        );
        // The same claims in any order give the same verdicts.
        let mut reversed = claims;
        reversed.reverse();
        let again = allocate(reversed);
        for name in ["a", "b", "late", "later"] {
            assert_eq!(statuses(&again, name), statuses(&allocation, name));
        }
    }

    #[test]
    fn later_claims_extend_an_allocation_as_a_whole_pass_would() {
        let early = vec![
            candidate("b", 10, &["10.1.0.0/16"]),
            candidate("a", 10, &["10.1.2.0/24", "fd00::/8"]),
        ];
        let late = vec![
            candidate("later", 30, &["10.0.0.0/8", "192.168.0.0/16"]),
            candidate("late", 20, &["10.0.0.0/8", "fd00::/64"]),
        ];
        let mut extended = allocate(early.clone());
        assert!(extended.follows(&late));
        extended.extend(late.clone());
        let whole = allocate(early.iter().chain(&late).cloned().collect());
        for name in ["a", "b", "late", "later"] {
            assert_eq!(statuses(&extended, name), statuses(&whole, name));
        }
        // Not after every claim decided, or decided already: a whole pass is needed.
        assert!(!extended.follows(&[candidate("early", 5, &["11.0.0.0/8"])]));
        assert!(!extended.follows(&[candidate("a", 40, &["11.0.0.0/8"])]));
        assert!(extended.follows(&[candidate("z", 40, &["11.0.0.0/8"])]));
    }
}
