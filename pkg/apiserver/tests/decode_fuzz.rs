//! The request-decoding fuzz target (`genplane_apiserver::request_body::exercise`, also run by
//! `fuzz/` under cargo-fuzz) driven on stable Rust: valid bodies of every served resource in
//! JSON, YAML and protobuf, then a bounded number of deterministic mutations of them (bit
//! flips, truncations, insertions, splices, repeated spans). Any panic or server error fails.

#![allow(clippy::unwrap_used)]

use genplane_api::catalog;
use genplane_api::protobuf;
use serde_json::{Value, json};

/// How many mutated inputs one run tries.
const MUTATIONS: usize = 40_000;

/// A small deterministic generator (xorshift64*), so that a failure reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % (n.max(1) as u64)).unwrap()
    }
    fn byte(&mut self) -> u8 {
        self.next().to_le_bytes()[0]
    }
}

fn metadata(name: &str) -> Value {
    json!({
        "name": name,
        "namespace": "default",
        "labels": {"app": "web", "tier": "front"},
        "annotations": {"note": "x"},
        "finalizers": ["example.com/hold"],
        "ownerReferences": [{
            "apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
            "uid": "6f1d4e9a-1f3b-4a43-9a52-6d2f6f0d8e11", "controller": true,
        }],
    })
}

/// A valid object of each served resource.
fn sample(resource: &catalog::ResourceInfo) -> Value {
    let mut object = json!({
        "apiVersion": resource.api_version(),
        "kind": resource.kind,
        "metadata": metadata("sample"),
    });
    let extra = match (resource.group, resource.resource) {
        ("", "configmaps") => json!({"data": {"k": "v"}, "binaryData": {"b": "AAE="}}),
        ("", "secrets") => {
            json!({"type": "kubernetes.io/tls", "data": {"tls.crt": "YQ==", "tls.key": "Yg=="}})
        }
        ("", "serviceaccounts") => {
            json!({"secrets": [{"name": "s"}], "imagePullSecrets": [{"name": "p"}], "automountServiceAccountToken": false})
        }
        ("", "namespaces") => json!({"spec": {"finalizers": ["kubernetes"]}}),
        ("", "resourcequotas") => {
            json!({"spec": {"hard": {"pods": "10", "count/configmaps": "5"}, "scopes": ["NotTerminating"]}})
        }
        ("", "events") => json!({
            "involvedObject": {"kind": "ConfigMap", "name": "owner", "namespace": "default"},
            "reason": "Tested", "message": "m", "type": "Normal", "count": 2,
            "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:00:01Z",
            "source": {"component": "test"},
        }),
        ("events.k8s.io", "events") => json!({
            "regarding": {"kind": "ConfigMap", "name": "owner", "namespace": "default"},
            "reason": "Tested", "note": "n", "type": "Warning", "action": "Checking",
            "eventTime": "2026-01-01T00:00:00.000001Z", "reportingController": "test",
            "reportingInstance": "test-0", "series": {"count": 2, "lastObservedTime": "2026-01-01T00:00:02.000002Z"},
        }),
        ("coordination.k8s.io", "leases") => json!({"spec": {
            "holderIdentity": "a", "leaseDurationSeconds": 15,
            "renewTime": "2026-01-01T00:00:00.000000Z", "leaseTransitions": 1,
        }}),
        _ => json!({}),
    };
    for (k, v) in extra.as_object().unwrap() {
        object[k] = v.clone();
    }
    object
}

/// Every sample in every encoding, each with the header [`exercise`] reads: resource index,
/// then media type (low two bits) and `fieldValidation` mode (next two bits).
fn seeds() -> Vec<Vec<u8>> {
    let mut seeds = Vec::new();
    for (index, resource) in catalog::all().iter().enumerate() {
        let which = u8::try_from(index).unwrap();
        let object = sample(resource);
        let json = serde_json::to_vec(&object).unwrap();
        let yaml = serde_saphyr::to_string(&object).unwrap().into_bytes();
        let proto = protobuf::encode(&object, resource.schema).unwrap();
        for (media, body) in [(0u8, json), (1, yaml), (2, proto)] {
            for mode in 0..4u8 {
                let mut seed = vec![which, media | (mode << 2)];
                seed.extend_from_slice(&body);
                seeds.push(seed);
            }
        }
    }
    seeds
}

fn mutate(rng: &mut Rng, seeds: &[Vec<u8>]) -> Vec<u8> {
    let mut input = seeds[rng.below(seeds.len())].clone();
    for _ in 0..=rng.below(3) {
        let len = input.len();
        match rng.below(7) {
            0 => {
                let at = rng.below(len);
                input[at] ^= 1 << rng.below(8);
            }
            1 => input.truncate(2 + rng.below(len.saturating_sub(2))),
            2 => {
                let at = rng.below(len + 1);
                let bytes: Vec<u8> = (0..=rng.below(8)).map(|_| rng.byte()).collect();
                input.splice(at..at, bytes);
            }
            3 => {
                let at = rng.below(len);
                let end = (at + 1 + rng.below(16)).min(len);
                let bytes: Vec<u8> = (at..end).map(|_| rng.byte()).collect();
                input.splice(at..end, bytes);
            }
            4 => {
                let other = &seeds[rng.below(seeds.len())];
                let from = rng.below(other.len());
                let at = rng.below(len);
                input.truncate(at);
                input.extend_from_slice(&other[from..]);
            }
            5 => {
                let at = rng.below(len);
                let end = (at + 1 + rng.below(32)).min(len);
                let span = input[at..end].to_vec();
                input.splice(end..end, span);
            }
            _ => {
                // A header pointing at another resource or mode than the body was made for.
                input[0] = rng.byte();
                input[1] = rng.byte();
            }
        }
    }
    input
}

#[test]
fn valid_bodies_decode_and_mutated_ones_are_client_errors_at_worst() {
    let seeds = seeds();
    for seed in &seeds {
        genplane_apiserver::request_body::exercise(seed);
    }
    // The samples are valid: a decode failure of a seed would hide every mutation behind it.
    for seed in seeds.iter().filter(|s| s[1] >> 2 == 1) {
        let info = &catalog::all()[usize::from(seed[0])];
        let media = [
            "application/json",
            "application/yaml",
            "application/vnd.kubernetes.protobuf",
        ][usize::from(seed[1] & 3)];
        genplane_apiserver::request_body::decode_object(
            &genplane_apiserver::kind::ServedKind::builtin(info),
            Some(media),
            Some("Strict"),
            &seed[2..],
        )
        .unwrap_or_else(|e| panic!("{media} sample of {}: {e}", info.resource));
    }
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for _ in 0..MUTATIONS {
        let input = mutate(&mut rng, &seeds);
        genplane_apiserver::request_body::exercise(&input);
    }
}
