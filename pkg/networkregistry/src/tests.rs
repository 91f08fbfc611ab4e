//! The index and the allocation against a brute-force scan, on random claims.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use genplane_api::networkregistry::Prefix;
use genplane_api::networkregistry::networkclaim::{AddressRecord, ResourceReference};
use genplane_apimachinery::fuzzing::Rng;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::*;

const RESOURCES: &[&str] = &["pods", "services", "nodes"];

fn random_addr(rng: &mut Rng, v4: bool) -> IpAddr {
    if v4 {
        // 10.0.0.0/8, so that ranges collide often.
        let bits = 0x0A00_0000 | (rng.next_u64() as u32 & 0x00FF_FFFF);
        IpAddr::V4(Ipv4Addr::from(bits))
    } else {
        let high = 0xFD00_u128 << 112 | (u128::from(rng.next_u64()) & 0xFFFF_FFFF) << 80;
        IpAddr::V6(Ipv6Addr::from(high | u128::from(rng.next_u64())))
    }
}

fn random_prefix(rng: &mut Rng) -> Prefix {
    let v4 = rng.below(3) != 0;
    let addr = random_addr(rng, v4);
    let len = if v4 {
        8 + rng.below(25) as u8
    } else {
        16 + rng.below(33) as u8
    };
    Prefix::new(addr, len).expect("a length within the width")
}

fn random_claims(rng: &mut Rng, count: usize) -> Vec<Candidate> {
    (0..count)
        .map(|i| Candidate {
            name: format!("claim-{i:05}").into(),
            // Few distinct seconds, so that names often break ties.
            created: Some(Time(
                k8s_openapi::jiff::Timestamp::from_second(1_700_000_000 + rng.below(500) as i64)
                    .expect("a valid time"),
            )),
            records: (0..1 + rng.below(2))
                .map(|_| AddressRecord {
                    reference: ResourceReference {
                        group: String::new(),
                        resource: RESOURCES[rng.below(RESOURCES.len())].to_owned(),
                    },
                    prefix: random_prefix(rng).to_string(),
                    description: None,
                })
                .collect(),
        })
        .collect()
}

/// What is allocated, by brute force: every record in claim order, kept unless a kept one
/// overlaps it.
fn brute_force(claims: &[Candidate]) -> Vec<(String, Prefix, String)> {
    let mut sorted = claims.to_vec();
    sorted.sort_by(allocate::order);
    let mut kept: Vec<(String, Prefix, String)> = Vec::new();
    for claim in &sorted {
        for record in claim.records.iter() {
            let prefix = Prefix::parse_canonical(&record.prefix).expect("canonical");
            if !kept.iter().any(|(_, other, _)| other.overlaps(&prefix)) {
                kept.push((
                    claim.name.to_string(),
                    prefix,
                    record.reference.resource.clone(),
                ));
            }
        }
    }
    kept
}

#[test]
fn owner_of_ranges_for_and_overlaps_agree_with_a_scan_on_10000_random_claims() {
    let mut rng = Rng(0x5EED_1234_ABCD_0001);
    let claims = random_claims(&mut rng, 10_000);
    let allocation = allocate(claims.clone());
    let kept = brute_force(&claims);
    assert_eq!(allocation.index.len(), kept.len());
    assert!(kept.len() > 1000, "the test exercises many allocations");

    // Each record's verdict: allocated exactly when the scan kept it; otherwise its holder
    // holds an overlapping range.
    let mut unavailable = 0;
    for claim in &claims {
        for (prefix, verdict) in &allocation.verdicts[&claim.name] {
            let prefix = Prefix::parse_canonical(prefix).expect("canonical");
            let in_scan = kept
                .iter()
                .any(|(name, p, _)| **name == *claim.name && *p == prefix);
            match verdict {
                Verdict::Allocated => assert!(in_scan, "{prefix} of {}", claim.name),
                Verdict::Unavailable { holder, held } => {
                    unavailable += 1;
                    assert!(!in_scan);
                    assert!(held.overlaps(&prefix));
                    assert!(kept.iter().any(|(n, p, _)| **n == **holder && p == held));
                }
                Verdict::Invalid => panic!("{prefix} is canonical"),
            }
        }
    }
    assert!(unavailable > 1000, "the test exercises many conflicts");

    // owner_of: addresses inside allocated ranges and anywhere.
    for i in 0..10_000 {
        let addr = if i % 2 == 0 {
            let (_, prefix, _) = &kept[rng.below(kept.len())];
            let host = random_addr(&mut rng, prefix.is_ipv4());
            // The prefix's bits, the random host bits.
            let bits = |a: IpAddr| match a {
                IpAddr::V4(a) => u128::from(u32::from(a)),
                IpAddr::V6(a) => u128::from(a),
            };
            let width = if prefix.is_ipv4() { 32 } else { 128 };
            let host_mask = if prefix.len() == width {
                0
            } else {
                (1u128 << (width - prefix.len())) - 1
            };
            let value = bits(prefix.addr()) | (bits(host) & host_mask);
            if prefix.is_ipv4() {
                IpAddr::V4(Ipv4Addr::from(value as u32))
            } else {
                IpAddr::V6(Ipv6Addr::from(value))
            }
        } else {
            let v4 = rng.below(2) == 0;
            random_addr(&mut rng, v4)
        };
        let want = kept
            .iter()
            .find(|(_, p, _)| p.contains(addr))
            .map(|(name, p, _)| (name.clone(), *p));
        let got = allocation
            .index
            .owner_of(addr)
            .map(|h| (h.claim.to_string(), h.prefix));
        assert_eq!(got, want, "owner of {addr}");
    }

    // ranges_for: every allocated range of the reference, in address order.
    for resource in RESOURCES {
        let mut want: Vec<Prefix> = kept
            .iter()
            .filter(|(_, _, r)| r == resource)
            .map(|(_, p, _)| *p)
            .collect();
        want.sort();
        let mut got: Vec<Prefix> = allocation
            .index
            .ranges_for("", resource)
            .iter()
            .map(|h| h.prefix)
            .collect();
        got.sort();
        assert_eq!(got, want, "{resource}");
    }

    // overlaps: random prefixes, both directions.
    for _ in 0..2_000 {
        let probe = random_prefix(&mut rng);
        let mut want: Vec<Prefix> = kept
            .iter()
            .filter(|(_, p, _)| p.overlaps(&probe))
            .map(|(_, p, _)| *p)
            .collect();
        want.sort();
        let mut got: Vec<Prefix> = allocation
            .index
            .overlaps(&probe)
            .iter()
            .map(|h| h.prefix)
            .collect();
        got.sort();
        assert_eq!(got, want, "overlaps of {probe}");
    }
}
