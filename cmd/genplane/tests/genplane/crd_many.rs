//! Two hundred generated CRDs shaped like a cloud provider's (the CRD-scale benchmark's set,
//! smaller) against the real binary: every one is established, and discovery (legacy and
//! aggregated) and OpenAPI (the v3 documents and the v2 document) describe every one of them
//! and nothing more, with sizes in proportion to the CRDs described; then again once half of
//! them are deleted. Counts and sizes, not timings: the benchmark measures those.

#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};

use genplane_test_support::clients::Raw;
use genplane_test_support::crd_set::{
    DOMAIN, GeneratedCrd, OLD_VERSION, SetOptions, VERSION, generate,
};
use genplane_test_support::{DEADLINE, eventually_holds};
use serde_json::Value;

use crate::support::start;

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const AGGREGATED: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// The plurals each generated group serves.
fn expected(crds: &[&GeneratedCrd]) -> BTreeMap<String, BTreeSet<String>> {
    let mut groups: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for crd in crds {
        groups
            .entry(crd.group.clone())
            .or_default()
            .insert(crd.plural.clone());
    }
    groups
}

fn generated(group: &str) -> bool {
    group.ends_with(DOMAIN)
}

/// Every generated CRD's name whose `Established` condition is true.
fn established(raw: &Raw) -> BTreeSet<String> {
    let list = raw.get(CRDS).json();
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|crd| {
            crd.pointer("/status/conditions")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Established" && c["status"] == "True")
        })
        .filter_map(|crd| crd.pointer("/metadata/name")?.as_str().map(str::to_owned))
        .filter(|name| generated(name))
        .collect()
}

/// What discovery and OpenAPI say of the generated groups, or why it is not what `crds`
/// make (discovery follows the CRDs a moment later).
fn described(raw: &Raw, crds: &[&GeneratedCrd]) -> Result<(), String> {
    let groups = expected(crds);
    let posted: usize = crds.iter().map(|c| c.body.len()).sum();

    // Legacy discovery: the groups, each with both versions, the served one preferred, and
    // each version with exactly its group's resources (and their status subresources).
    let apis = raw.get("/apis").json();
    let listed: BTreeMap<String, &Value> = apis["groups"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|g| Some((g["name"].as_str()?.to_owned(), g)))
        .filter(|(name, _)| generated(name))
        .collect();
    let names: BTreeSet<&String> = listed.keys().collect();
    if names != groups.keys().collect() {
        return Err(format!("/apis lists {names:?}"));
    }
    for (group, plurals) in &groups {
        let entry = listed[group];
        let versions: Vec<&str> = entry["versions"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|v| v["version"].as_str())
            .collect();
        assert_eq!(versions, [VERSION, OLD_VERSION], "{group}: {entry}");
        assert_eq!(entry["preferredVersion"]["version"], VERSION, "{group}");
        for version in [VERSION, OLD_VERSION] {
            let list = raw.get(&format!("/apis/{group}/{version}")).json();
            let resources: BTreeSet<String> = list["resources"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|r| r["name"].as_str())
                .filter(|name| !name.contains('/'))
                .map(str::to_owned)
                .collect();
            if &resources != plurals {
                return Err(format!("/apis/{group}/{version} lists {resources:?}"));
            }
            let statuses = list["resources"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|r| r["name"].as_str().is_some_and(|n| n.ends_with("/status")))
                .count();
            assert_eq!(statuses, plurals.len(), "/apis/{group}/{version}");
        }
    }

    // Aggregated discovery: the same resources, in one answer.
    let aggregated = raw.request("GET", "/apis", &[("Accept", AGGREGATED)], None);
    assert_eq!(aggregated.status, 200, "{}", aggregated.text());
    let mut resources = 0;
    for group in aggregated.json()["items"].as_array().unwrap() {
        if !generated(group["metadata"]["name"].as_str().unwrap_or_default()) {
            continue;
        }
        for version in group["versions"].as_array().unwrap() {
            resources += version["resources"].as_array().map_or(0, Vec::len);
        }
    }
    if resources != 2 * crds.len() {
        return Err(format!("aggregated discovery lists {resources} resources"));
    }

    // OpenAPI v3: a document per generated group-version and no other, each with the
    // schema of each of its kinds; together in proportion to the CRDs they describe (each
    // CRD's schema is published once per version, and the CRDs carry little else).
    let index = raw.get("/openapi/v3").json();
    let paths: BTreeSet<String> = index["paths"]
        .as_object()
        .unwrap()
        .keys()
        .filter(|p| generated(p.split('/').nth(1).unwrap_or_default()))
        .cloned()
        .collect();
    let wanted: BTreeSet<String> = groups
        .keys()
        .flat_map(|g| [VERSION, OLD_VERSION].map(|v| format!("apis/{g}/{v}")))
        .collect();
    if paths != wanted {
        return Err(format!("the OpenAPI v3 index lists {paths:?}"));
    }
    let mut v3_bytes = 0;
    for path in &paths {
        let answer = raw.get(&format!("/openapi/v3/{path}"));
        assert_eq!(answer.status, 200, "{path}");
        v3_bytes += answer.body.len();
        let document = answer.json();
        let schemas = document["components"]["schemas"].as_object().unwrap();
        let group = path.split('/').nth(1).unwrap();
        let version = path.split('/').nth(2).unwrap();
        for crd in crds.iter().filter(|c| c.group == group) {
            let kind = format!(".{version}.{}", crd.kind);
            assert!(
                schemas.keys().any(|name| name.ends_with(&kind)),
                "{path} has no schema of {}",
                crd.kind
            );
        }
    }
    assert!(
        v3_bytes >= posted && v3_bytes <= 4 * posted,
        "the OpenAPI v3 documents of {} CRDs ({posted} bytes posted) take {v3_bytes} bytes",
        crds.len()
    );

    // OpenAPI v2: a definition of each kind in each version, in proportion too.
    let v2 = raw.get("/openapi/v2");
    assert_eq!(v2.status, 200);
    let v2_bytes = v2.body.len();
    let document = v2.json();
    // Shared definitions (DeleteOptions, WatchEvent) name every group-version they serve in.
    let defined: BTreeSet<(String, String, String)> = document["definitions"]
        .as_object()
        .unwrap()
        .values()
        .flat_map(|d| {
            d["x-kubernetes-group-version-kind"]
                .as_array()
                .into_iter()
                .flatten()
        })
        .filter_map(|gvk| {
            let text = |k: &str| gvk[k].as_str().map(str::to_owned);
            Some((text("group")?, text("version")?, text("kind")?))
        })
        .filter(|(group, _, kind)| {
            generated(group)
                && !kind.ends_with("List")
                && kind != "DeleteOptions"
                && kind != "WatchEvent"
        })
        .collect();
    let kinds: BTreeSet<(String, String, String)> = crds
        .iter()
        .flat_map(|c| {
            [VERSION, OLD_VERSION].map(|v| (c.group.clone(), v.to_owned(), c.kind.clone()))
        })
        .collect();
    if defined != kinds {
        return Err(format!(
            "/openapi/v2 defines {} generated kinds, not the {} served",
            defined.len(),
            kinds.len()
        ));
    }
    assert!(
        v2_bytes <= 4 * posted + (4 << 20),
        "the OpenAPI v2 document with {} CRDs ({posted} bytes posted) takes {v2_bytes} bytes",
        crds.len()
    );
    Ok(())
}

/// Waits until discovery and OpenAPI describe `crds` (the test fails with why they did not
/// after [`DEADLINE`]).
fn until_described(raw: &Raw, crds: &[&GeneratedCrd]) {
    let deadline = std::time::Instant::now() + DEADLINE;
    loop {
        match described(raw, crds) {
            Ok(()) => return,
            Err(why) if std::time::Instant::now() > deadline => {
                panic!("discovery and OpenAPI of {} CRDs: {why}", crds.len())
            }
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(500)),
        }
    }
}

#[test]
fn generated_crds_are_discovered_and_published_in_proportion() {
    let server = start();
    let raw = server.raw();
    let crds = generate(SetOptions {
        count: 200,
        seed: 11,
        cel_fraction: 0.1,
        namespaced_fraction: 0.8,
    });
    for crd in &crds {
        let answer = raw.request("POST", CRDS, &[], Some(&crd.body));
        assert_eq!(answer.status, 201, "{}: {}", crd.name, answer.text());
    }
    let names: BTreeSet<String> = crds.iter().map(|c| c.name.clone()).collect();
    eventually_holds("every CRD established", || established(&raw) == names);
    until_described(&raw, &crds.iter().collect::<Vec<_>>());

    // Every CRD of the first group and half the others go: what described them goes with
    // them (the group itself, and its documents), and what describes the others stays.
    let first = crds[0].group.clone();
    let (mut gone, mut kept) = (Vec::new(), Vec::new());
    for (i, crd) in crds.iter().enumerate() {
        if crd.group == first || i % 2 == 0 {
            gone.push(crd);
        } else {
            kept.push(crd);
        }
    }
    for crd in &gone {
        let answer = raw.request("DELETE", &format!("{CRDS}/{}", crd.name), &[], None);
        assert_eq!(answer.status, 200, "{}: {}", crd.name, answer.text());
    }
    let kept_names: BTreeSet<String> = kept.iter().map(|c| c.name.clone()).collect();
    eventually_holds("the deleted CRDs gone", || {
        let list = raw.get(CRDS).json();
        let stored: BTreeSet<String> = list["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|c| c["metadata"]["name"].as_str().map(str::to_owned))
            .filter(|name| generated(name))
            .collect();
        stored == kept_names
    });
    until_described(&raw, &kept);
}
