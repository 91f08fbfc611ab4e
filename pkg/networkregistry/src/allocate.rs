//! First come, first served: the registry's verdict on every record of every claim.
//!
//! Claims are taken in a stored total order, their `metadata.creationTimestamp` and then their
//! name, so every controller (a new leader, or the same one after a restart) that reads the
//! same claims reaches the same verdicts. Each record of each claim, in that order, is
//! `Allocated` when no range allocated before it overlaps it, and `Unavailable` otherwise,
//! naming the claim that holds the overlapping range. A record that is not allocated holds
//! nothing, so it blocks no later claim.
//!
//! The whole allocation is one pass with the [`PrefixIndex`]: O(n · W) for n records.

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
    /// Its address records, in spec order.
    pub records: Vec<AddressRecord>,
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
}

/// The order of claims: creation time, then name.
pub fn order(a: &Candidate, b: &Candidate) -> std::cmp::Ordering {
    (&a.created, &a.name).cmp(&(&b.created, &b.name))
}

/// Allocates `candidates` first come, first served (see the module documentation).
pub fn allocate(mut candidates: Vec<Candidate>) -> Allocation {
    candidates.sort_by(order);
    let mut allocation = Allocation::default();
    for candidate in candidates {
        let mut verdicts = Vec::with_capacity(candidate.records.len());
        for record in candidate.records {
            let verdict = match Prefix::parse_canonical(&record.prefix) {
                Err(_) => Verdict::Invalid,
                Ok(prefix) => match allocation.index.insert(Holding {
                    claim: candidate.name.clone(),
                    prefix,
                    reference: record.reference,
                    description: record.description,
                }) {
                    Ok(()) => Verdict::Allocated,
                    Err(holder) => Verdict::Unavailable {
                        holder: holder.claim.clone(),
                        held: holder.prefix,
                    },
                },
            };
            verdicts.push((record.prefix, verdict));
        }
        allocation.verdicts.insert(candidate.name, verdicts);
    }
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
}
