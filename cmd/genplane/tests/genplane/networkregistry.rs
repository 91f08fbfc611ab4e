//! The network registry (KANA, #16): the NetworkClaim API served under the NetworkRegistry
//! feature gate, the controller-manager's `networkclaim` controller (first come, first served,
//! a grace period before a deleted claim's ranges go to the next claim, the same verdicts after
//! a restart), the well-known claims from the roles' flags, the client library and
//! `genplane networkregistry`.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use genplane_api::networkregistry::networkclaim::{AddressRecord, ResourceReference};
use genplane_networkregistry::{Registry, network_claim_resource};
use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use serde_json::{Value, json};

use crate::support::{self, Apiserver, BIN, ControllerManager, eventually_async, ok, text};

const GATE: &str = "--feature-gates=NetworkRegistry=true";
/// The release grace period the tests give the controller-manager.
const GRACE: Duration = Duration::from_secs(4);

fn claims(client: &kube::Client) -> Api<DynamicObject> {
    Api::all_with(client.clone(), &network_claim_resource())
}

fn claim_body(name: &str, records: &[(&str, &str)]) -> DynamicObject {
    let records: Vec<Value> = records
        .iter()
        .map(|(resource, prefix)| json!({"reference": {"group": "", "resource": resource}, "prefix": prefix}))
        .collect();
    serde_json::from_value(json!({
        "apiVersion": "networkregistry.genplane.io/v1alpha1", "kind": "NetworkClaim",
        "metadata": {"name": name}, "spec": {"addressSpace": records},
    }))
    .unwrap()
}

/// The claim once the controller decided on its current generation.
async fn decided(api: &Api<DynamicObject>, name: &str) -> Value {
    eventually_async(&format!("a verdict on {name}"), || async {
        let object = api.get_opt(name).await.unwrap()?;
        let value = serde_json::to_value(&object).unwrap();
        let generation = value["metadata"]["generation"].as_i64()?;
        let ready = value["status"]["conditions"]
            .as_array()?
            .iter()
            .find(|c| c["type"] == "Ready")?;
        (ready["observedGeneration"].as_i64()? >= generation).then_some(value)
    })
    .await
}

/// The events.k8s.io Event with `reason` about NetworkClaim `name`, once there is one.
async fn event(server: &Apiserver, reason: &str, name: &str) -> Value {
    eventually_async(&format!("the {reason} event of {name}"), || async {
        let out = server.kubectl(
            "kubectl",
            &["get", "events.events.k8s.io", "-A", "-o", "json"],
        );
        let list: Value = serde_json::from_slice(&out.stdout).ok()?;
        list["items"]
            .as_array()?
            .iter()
            .find(|e| e["reason"] == reason && e["regarding"]["name"] == name)
            .cloned()
    })
    .await
}

/// `prefix status holder` of each record.
fn verdicts(claim: &Value) -> Vec<String> {
    claim["status"]["addressSpace"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            format!(
                "{} {} {}",
                r["prefix"].as_str().unwrap(),
                r["status"].as_str().unwrap(),
                r["holder"].as_str().unwrap_or("-")
            )
        })
        .collect()
}

fn start_cm(server: &Apiserver, log: &str) -> ControllerManager {
    ControllerManager::start(
        server,
        log,
        &[
            GATE,
            "--controllers=networkclaim",
            "--network-claim-release-grace-period=4s",
            "--cluster-cidr=10.244.0.0/16,fd00:10:244::/56",
        ],
    )
}

/// Two clients race for overlapping ranges: exactly one gets them, the other is unavailable
/// naming it (with an event); a restarted controller-manager changes no verdict (it writes
/// nothing); deleting the winner gives its range to the other only after the grace period; the
/// client library follows within a second.
#[tokio::test(flavor = "multi_thread")]
async fn racing_claims_get_one_verdict_that_survives_restarts_and_deletion_frees_the_range() {
    let server = support::start_with(&[GATE]);
    let mut cm = start_cm(&server, "cm-1.log");
    let first_client = server.client().await;
    let second_client = server.client().await;
    let (a, b) = (claims(&first_client), claims(&second_client));

    // At once, from two clients: IPv4 nested, IPv6 disjoint.
    let params = PostParams::default();
    let left_body = claim_body(
        "left",
        &[("services", "10.100.0.0/16"), ("services", "fd00:100::/48")],
    );
    let right_body = claim_body(
        "right",
        &[("services", "10.100.5.0/24"), ("services", "fd00:200::/48")],
    );
    let (left, right) = tokio::join!(
        a.create(&params, &left_body),
        b.create(&params, &right_body)
    );
    let (left, right) = (left.unwrap(), right.unwrap());
    // First come, first served: creation time, then name.
    let key = |o: &DynamicObject| {
        (
            o.metadata.creation_timestamp.clone(),
            o.metadata.name.clone(),
        )
    };
    let (winner, loser, won, lost) = if key(&left) < key(&right) {
        ("left", "right", "10.100.0.0/16", "10.100.5.0/24")
    } else {
        ("right", "left", "10.100.5.0/24", "10.100.0.0/16")
    };
    let winner_v6 = if winner == "left" {
        "fd00:100::/48"
    } else {
        "fd00:200::/48"
    };
    let loser_v6 = if winner == "left" {
        "fd00:200::/48"
    } else {
        "fd00:100::/48"
    };
    let won_claim = decided(&a, winner).await;
    let lost_claim = decided(&a, loser).await;
    assert_eq!(
        verdicts(&won_claim),
        [
            format!("{won} Allocated -"),
            format!("{winner_v6} Allocated -")
        ]
    );
    assert_eq!(
        verdicts(&lost_claim),
        [
            format!("{lost} Unavailable {winner}"),
            format!("{loser_v6} Allocated -")
        ]
    );
    let record = &lost_claim["status"]["addressSpace"][0];
    assert_eq!(
        record["message"],
        format!("{lost} overlaps {won}, held by NetworkClaim {winner}")
    );
    let conditions = &lost_claim["status"]["conditions"];
    assert!(
        conditions
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["type"] == "Conflict" && c["status"] == "True")
    );
    assert!(
        won_claim["metadata"]["finalizers"]
            .as_array()
            .unwrap()
            .contains(&json!("networkregistry.genplane.io/registry"))
    );
    // The event names the holder.
    let events = event(&server, "Overlaps", loser).await;
    assert!(
        events["note"]
            .as_str()
            .unwrap()
            .contains(&format!("held by NetworkClaim {winner}")),
        "{events}"
    );

    // The library answers from its index; the well-known Pod ranges of --cluster-cidr are there.
    let registry = Registry::start(server.client().await).await.unwrap();
    let owner = registry.owner_of("10.100.5.7".parse().unwrap()).unwrap();
    assert_eq!(&*owner.claim, winner);
    assert!(registry.owner_of("10.101.0.1".parse().unwrap()).is_none());
    let pods = eventually_async(
        "the kube-controller-manager claim in the library",
        || async {
            let pods = registry.ranges_for("", "pods");
            (pods.len() == 2).then_some(pods)
        },
    )
    .await;
    assert!(pods.iter().all(|h| &*h.claim == "kube-controller-manager"));
    assert_eq!(pods[0].prefix.to_string(), "10.244.0.0/16");

    // A restarted controller-manager reaches the same verdicts: it writes nothing to them.
    let versions = |left: &Value, right: &Value| {
        (
            left["metadata"]["resourceVersion"].clone(),
            right["metadata"]["resourceVersion"].clone(),
        )
    };
    let before = versions(&won_claim, &lost_claim);
    cm.process.terminate();
    cm.process.wait_exit(crate::support::DEADLINE);
    let _cm = start_cm(&server, "cm-2.log");
    // A claim made after the restart is decided in a pass that decides every claim.
    a.create(
        &PostParams::default(),
        &claim_body("later", &[("nodes", "192.168.0.0/16")]),
    )
    .await
    .unwrap();
    decided(&a, "later").await;
    let after = versions(&decided(&a, winner).await, &decided(&a, loser).await);
    assert_eq!(after, before, "a restart rewrote a verdict");

    // Deleted, the winner keeps its range for the grace period; then the loser gets it.
    let deleted = Instant::now();
    a.delete(winner, &DeleteParams::default()).await.unwrap();
    let holding = a.get(winner).await.unwrap();
    assert!(holding.metadata.deletion_timestamp.is_some());
    assert_eq!(
        verdicts(&decided(&a, loser).await)[0],
        format!("{lost} Unavailable {winner}")
    );
    let freed = eventually_async("the loser's range allocated", || async {
        let claim = decided(&a, loser).await;
        (verdicts(&claim)[0] == format!("{lost} Allocated -")).then_some(claim)
    })
    .await;
    let waited = deleted.elapsed();
    // The deletion timestamp has whole seconds: the release comes at most 1 s early.
    assert!(
        waited + Duration::from_secs(1) >= GRACE,
        "released after {waited:?}"
    );
    assert!(a.get_opt(winner).await.unwrap().is_none());
    assert!(
        freed["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    );
    // The library follows within a second of the change.
    let seen = tokio::time::timeout(Duration::from_secs(1), async {
        loop {
            if registry
                .owner_of("10.100.5.7".parse().unwrap())
                .is_some_and(|h| &*h.claim == loser)
            {
                return;
            }
            registry.changed().await;
        }
    })
    .await;
    assert!(seen.is_ok(), "the library did not follow within a second");

    // Claiming through the library: waits for the verdict, names the holder when refused.
    let record = |prefix: &str| AddressRecord {
        reference: ResourceReference {
            group: String::new(),
            resource: "pods".to_owned(),
        },
        prefix: prefix.to_owned(),
        description: Some("claimed by the library".to_owned()),
    };
    let refused = registry
        .claim(
            "cni",
            "cni",
            &[record("10.100.5.128/25")],
            crate::support::DEADLINE,
        )
        .await
        .unwrap_err();
    match refused {
        genplane_networkregistry::Error::Unavailable { holder, prefix, .. } => {
            assert_eq!(holder, loser);
            assert_eq!(prefix, "10.100.5.128/25");
        }
        other => panic!("{other}"),
    }
    let granted = registry
        .claim(
            "cni",
            "cni",
            &[record("10.200.0.0/16")],
            crate::support::DEADLINE,
        )
        .await
        .unwrap();
    assert_eq!(granted.spec.address_space.len(), 1);
    assert_eq!(
        registry
            .owner_of("10.200.3.4".parse().unwrap())
            .map(|h| h.claim.to_string()),
        Some("cni".to_owned())
    );
}

/// Writes by kubectl: non-canonical prefixes and too many records are refused with field
/// paths; the table and `kubectl explain`; the well-known claim of the API server from its
/// flag, not overwritten once changed (a condition and an event); a viewer reads but cannot
/// write it (403); `genplane networkregistry lookup` and `claims`.
#[tokio::test(flavor = "multi_thread")]
async fn well_known_claims_come_from_flags_and_only_their_roles_write_them() {
    let tokens = tempfile::tempdir().unwrap();
    let file = tokens.path().join("tokens.csv");
    std::fs::write(&file, "tok-vera,vera,u-vera\n").unwrap();
    let token_flag = format!("--token-auth-file={}", file.display());
    let server = support::start_with(&[
        GATE,
        &token_flag,
        "--service-cluster-ip-range=10.96.0.0/12,fd00:10:96::/112",
    ]);
    let _cm = start_cm(&server, "cm.log");
    let client = server.client().await;
    let api = claims(&client);

    let claim = decided(&api, "kube-apiserver").await;
    assert_eq!(
        verdicts(&claim),
        ["10.96.0.0/12 Allocated -", "fd00:10:96::/112 Allocated -"]
    );
    assert_eq!(
        claim["spec"]["addressSpace"][0]["reference"],
        json!({"group": "", "resource": "services"})
    );
    let from_flags = eventually_async("FromFlags", || async {
        let claim = api.get("kube-apiserver").await.unwrap();
        let claim = serde_json::to_value(claim).unwrap();
        claim["status"]["conditions"]
            .as_array()?
            .iter()
            .find(|c| c["type"] == "FromFlags")
            .cloned()
    })
    .await;
    assert_eq!(from_flags["status"], "True");

    // kubectl: validation with field paths and the canonical form, the record limit.
    let apply = |manifest: &str| {
        let path = tokens.path().join("claim.yaml");
        std::fs::write(&path, manifest).unwrap();
        server.kubectl("kubectl", &["apply", "-f", path.to_str().unwrap()])
    };
    let out = apply(
        "apiVersion: networkregistry.genplane.io/v1alpha1\nkind: NetworkClaim\nmetadata: {name: bad}\nspec:\n  addressSpace:\n  - {reference: {resource: pods}, prefix: 10.1.2.3/16}\n  - {reference: {resource: pods}, prefix: '2001:DB8:0:0::/64'}\n",
    );
    let message = text(&out);
    assert!(!out.status.success());
    assert!(
        message.contains("spec.addressSpace[0].prefix: Invalid value: \"10.1.2.3/16\": must not have bits set beyond the prefix length"),
        "{message}"
    );
    assert!(
        message.contains("must be in canonical form (\"2001:db8::/64\")"),
        "{message}"
    );
    let many: String = (0..65)
        .map(|i| format!("  - {{reference: {{resource: pods}}, prefix: 10.{i}.0.0/16}}\n"))
        .collect();
    let out = apply(&format!(
        "apiVersion: networkregistry.genplane.io/v1alpha1\nkind: NetworkClaim\nmetadata: {{name: many}}\nspec:\n  addressSpace:\n{many}"
    ));
    assert!(
        text(&out).contains("spec.addressSpace: Too many: 65: must have at most 64 items"),
        "{}",
        text(&out)
    );
    let table = ok(server.kubectl("kubectl", &["get", "networkclaims"]));
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "PREFIXES", "ALLOCATED", "AGE"]);
    assert!(
        table.lines().any(|l| l.starts_with("kube-apiserver")
            && l.contains("10.96.0.0/12,fd00:10:96::/112")
            && l.contains("2/2")),
        "{table}"
    );
    let explained = ok(server.kubectl("kubectl", &["explain", "networkclaims.spec.addressSpace"]));
    assert!(explained.contains("prefix"), "{explained}");

    // A viewer reads claims but cannot write the well-known ones.
    ok(server.kubectl(
        "kubectl",
        &[
            "create",
            "clusterrolebinding",
            "vera-views",
            "--clusterrole=view",
            "--user=vera",
        ],
    ));
    let as_vera = |args: &[&str]| {
        let mut all = vec!["--token=tok-vera"];
        all.extend_from_slice(args);
        crate::support::kubectl_command("kubectl", viewer_kubeconfig(&server, tokens.path()))
            .args(&all)
            .output()
            .unwrap()
    };
    let read = eventually_async("the view aggregation of networkclaim-reader", || async {
        let out = as_vera(&["get", "networkclaim", "kube-apiserver", "-o", "name"]);
        out.status.success().then(|| text(&out))
    })
    .await;
    assert_eq!(
        read.trim(),
        "networkclaim.networkregistry.genplane.io/kube-apiserver"
    );
    let out = as_vera(&[
        "patch",
        "networkclaim",
        "kube-apiserver",
        "--type=merge",
        "-p",
        r#"{"spec":{"addressSpace":[{"reference":{"resource":"services"},"prefix":"10.0.0.0/8"}]}}"#,
    ]);
    assert!(!out.status.success());
    assert!(text(&out).contains("Forbidden"), "{}", text(&out));
    let out = as_vera(&["delete", "networkclaim", "kube-controller-manager"]);
    assert!(text(&out).contains("Forbidden"), "{}", text(&out));

    // The admin changes it: the API server keeps it as stored and says so.
    ok(server.kubectl(
        "kubectl",
        &[
            "patch", "networkclaim", "kube-apiserver", "--type=merge", "-p",
            r#"{"spec":{"addressSpace":[{"reference":{"group":"","resource":"services"},"prefix":"10.97.0.0/16"}]}}"#,
        ],
    ));
    let differs = eventually_async("FromFlags False", || async {
        let claim = serde_json::to_value(api.get("kube-apiserver").await.unwrap()).unwrap();
        claim["status"]["conditions"]
            .as_array()?
            .iter()
            .find(|c| c["type"] == "FromFlags" && c["status"] == "False")
            .cloned()
    })
    .await;
    assert_eq!(differs["reason"], "DiffersFromFlags");
    assert!(
        differs["message"]
            .as_str()
            .unwrap()
            .contains("--service-cluster-ip-range=10.96.0.0/12,fd00:10:96::/112")
    );
    let claim = decided(&api, "kube-apiserver").await;
    assert_eq!(
        verdicts(&claim),
        ["10.97.0.0/16 Allocated -"],
        "not overwritten"
    );
    event(&server, "DiffersFromFlags", "kube-apiserver").await;

    // genplane networkregistry, for people.
    let lookup = |args: &[&str]| {
        Command::new(BIN)
            .arg("networkregistry")
            .args(args)
            .arg(format!("--kubeconfig={}", server.kubeconfig().display()))
            .output()
            .unwrap()
    };
    let out = lookup(&["lookup", "10.97.1.2"]);
    assert!(out.status.success(), "{}", text(&out));
    let answer = String::from_utf8(out.stdout).unwrap();
    assert!(answer.starts_with("PREFIX"), "{answer}");
    assert!(
        answer.contains("10.97.0.0/16   kube-apiserver   services"),
        "{answer}"
    );
    let out = lookup(&["lookup", "10.0.0.0/8"]);
    let answer = String::from_utf8(out.stdout).unwrap();
    assert!(
        answer.contains("kube-apiserver") && answer.contains("kube-controller-manager"),
        "{answer}"
    );
    let out = lookup(&["lookup", "192.0.2.1"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out).contains("no allocated range holds 192.0.2.1"),
        "{}",
        text(&out)
    );
    let out = lookup(&["claims"]);
    let answer = String::from_utf8(out.stdout).unwrap();
    assert!(
        answer.contains("kube-controller-manager   fd00:10:244::/56   pods       Allocated"),
        "{answer}"
    );
}

/// A kubeconfig for the server with no user of its own (the token comes on the command line).
pub(crate) fn viewer_kubeconfig(server: &Apiserver, dir: &Path) -> std::path::PathBuf {
    token_kubeconfig(
        server.port,
        &server.ca(),
        &dir.join("viewer.kubeconfig"),
        None,
    )
}

/// Writes at `path` a kubeconfig for the server on `port` (trusting `ca`) whose user is
/// `token`'s, or has no credentials of its own.
pub(crate) fn token_kubeconfig(
    port: u16,
    ca: &Path,
    path: &Path,
    token: Option<&str>,
) -> std::path::PathBuf {
    let user = token.map_or_else(|| "{}".to_owned(), |t| format!("{{token: {t}}}"));
    let config = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: s\n  cluster: {{server: 'https://127.0.0.1:{port}', certificate-authority: '{}'}}\ncontexts:\n- name: s\n  context: {{cluster: s, user: v}}\ncurrent-context: s\nusers:\n- name: v\n  user: {user}\n",
        ca.display()
    );
    std::fs::write(path, config).unwrap();
    path.to_owned()
}

/// With the feature off the API is not served (no discovery, 404), and a server restarted with
/// it off over the same data serves nothing of it either.
#[test]
fn the_api_is_served_only_while_the_feature_is_on() {
    let server = support::start_with(&[GATE]);
    let raw = server.raw();
    let created = raw.request(
        "POST",
        "/apis/networkregistry.genplane.io/v1alpha1/networkclaims",
        &[],
        Some(
            json!({"apiVersion": "networkregistry.genplane.io/v1alpha1", "kind": "NetworkClaim",
                   "metadata": {"name": "x"},
                   "spec": {"addressSpace": [{"reference": {"resource": "pods"}, "prefix": "10.0.0.0/8"}]}})
            .to_string()
            .as_bytes(),
        ),
    );
    assert_eq!(created.status, 201, "{}", created.text());
    assert!(
        raw.get("/apis")
            .text()
            .contains("networkregistry.genplane.io")
    );
    let port = format!("--secure-port={}", server.port);
    let dir = support::stop(server);
    let server = support::start_in(dir, &[&port]);
    let raw = server.raw();
    assert!(
        !raw.get("/apis")
            .text()
            .contains("networkregistry.genplane.io")
    );
    assert_eq!(
        raw.get("/apis/networkregistry.genplane.io/v1alpha1/networkclaims")
            .status,
        404
    );
    assert!(!raw.get("/openapi/v3").text().contains("networkregistry"));
}

/// Prefixes are checked as upstream's strict CIDR validation checks a ServiceCIDR's (1.33), and
/// must be canonical besides: an IPv4-mapped IPv6 prefix (`::ffff:10.0.0.0/104`, the addresses
/// of `10.0.0.0/8` written as IPv6) is refused, so no IPv4 range can be claimed twice or held in
/// both forms by one claim.
#[test]
fn prefixes_are_refused_as_upstream_refuses_service_cidrs() {
    let server = support::start_with(&[GATE]);
    let raw = server.raw();
    let cases: &[(&str, &[&str])] = &[
        (
            "::ffff:10.0.0.0/104",
            &["must not have an IPv4-mapped IPv6 address"],
        ),
        (
            "::ffff:0.0.0.0/96",
            &["must not have an IPv4-mapped IPv6 address"],
        ),
        (
            "::ffff:192.168.0.1/128",
            &["must not have an IPv4-mapped IPv6 address"],
        ),
        (
            "10.1.2.3/16",
            &["must not have bits set beyond the prefix length"],
        ),
        (
            "010.0.0.0/8",
            &["must not have leading 0s in IP or prefix length"],
        ),
        (
            "11.0.0.0/08",
            &["must not have leading 0s in IP or prefix length"],
        ),
        (
            "2001:DB8::/32",
            &["must be in canonical form (\"2001:db8::/32\")"],
        ),
        (
            "2002:DB8::1/32",
            &[
                "must be in canonical form (\"2002:db8::1/32\")",
                "must not have bits set beyond the prefix length",
            ],
        ),
        (
            "fe80::%eth0/64",
            &["must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"],
        ),
        (
            "12.0.0.0",
            &["must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"],
        ),
    ];
    let records: Vec<Value> = cases
        .iter()
        .map(|(prefix, _)| json!({"reference": {"resource": "pods"}, "prefix": prefix}))
        .collect();
    let body = json!({"apiVersion": "networkregistry.genplane.io/v1alpha1", "kind": "NetworkClaim",
                      "metadata": {"name": "forms"}, "spec": {"addressSpace": records}});
    let answer = raw.request(
        "POST",
        "/apis/networkregistry.genplane.io/v1alpha1/networkclaims",
        &[],
        Some(body.to_string().as_bytes()),
    );
    assert_eq!(answer.status, 422, "{}", answer.text());
    let status = answer.json();
    assert_eq!(status["reason"], "Invalid");
    let causes = status["details"]["causes"].as_array().unwrap();
    for (i, (prefix, messages)) in cases.iter().enumerate() {
        let field = format!("spec.addressSpace[{i}].prefix");
        let found: Vec<&str> = causes
            .iter()
            .filter(|c| c["field"] == field.as_str())
            .map(|c| c["message"].as_str().unwrap())
            .collect();
        let expected: Vec<String> = messages
            .iter()
            .map(|m| format!("Invalid value: \"{prefix}\": {m}"))
            .collect();
        assert_eq!(found, expected, "{prefix}");
    }

    // The IPv4 range and its mapped form cannot both be claimed, in one claim or in two.
    let created = raw.request(
        "POST",
        "/apis/networkregistry.genplane.io/v1alpha1/networkclaims",
        &[],
        Some(
            json!({"apiVersion": "networkregistry.genplane.io/v1alpha1", "kind": "NetworkClaim",
                   "metadata": {"name": "v4"},
                   "spec": {"addressSpace": [{"reference": {"resource": "pods"}, "prefix": "10.0.0.0/8"}]}})
            .to_string()
            .as_bytes(),
        ),
    );
    assert_eq!(created.status, 201, "{}", created.text());
    let mapped = raw.request(
        "POST",
        "/apis/networkregistry.genplane.io/v1alpha1/networkclaims",
        &[],
        Some(
            json!({"apiVersion": "networkregistry.genplane.io/v1alpha1", "kind": "NetworkClaim",
                   "metadata": {"name": "v4-again"},
                   "spec": {"addressSpace": [{"reference": {"resource": "pods"}, "prefix": "::ffff:10.0.0.0/104"}]}})
            .to_string()
            .as_bytes(),
        ),
    );
    assert_eq!(mapped.status, 422, "{}", mapped.text());
}

/// `genplane networkregistry` says at once why it has no answer: a user without access gets
/// the API server's 403, and a server that is not there the refused connection, not a timeout
/// after 30 s.
#[test]
fn the_registry_command_shows_a_refusal_at_once() {
    let tokens = tempfile::tempdir().unwrap();
    let file = tokens.path().join("tokens.csv");
    std::fs::write(&file, "tok-nina,nina,u-nina\n").unwrap();
    let token_flag = format!("--token-auth-file={}", file.display());
    let server = support::start_with(&[GATE, &token_flag]);
    let run = |kubeconfig: &Path, args: &[&str]| {
        let started = Instant::now();
        let out = Command::new(BIN)
            .arg("networkregistry")
            .args(args)
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .output()
            .unwrap();
        (out, started.elapsed())
    };
    let nina = token_kubeconfig(
        server.port,
        &server.ca(),
        &tokens.path().join("nina.kubeconfig"),
        Some("tok-nina"),
    );
    for args in [&["lookup", "10.0.0.1"][..], &["claims"]] {
        let (out, took) = run(&nina, args);
        assert_eq!(out.status.code(), Some(1), "{}", text(&out));
        let said = text(&out);
        assert!(
            said.contains("forbidden")
                && said.contains("User \"nina\" cannot list resource \"networkclaims\""),
            "{said}"
        );
        assert!(
            took < Duration::from_secs(10),
            "{args:?} took {took:?}: {said}"
        );
    }
    // Nothing listens on the port of a stopped server.
    let port = server.port;
    let ca = tempfile::NamedTempFile::new().unwrap();
    std::fs::copy(server.ca(), ca.path()).unwrap();
    drop(support::stop(server));
    let gone = token_kubeconfig(
        port,
        ca.path(),
        &tokens.path().join("gone.kubeconfig"),
        Some("tok-nina"),
    );
    let (out, took) = run(&gone, &["claims"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let said = text(&out);
    assert!(said.to_lowercase().contains("connection refused"), "{said}");
    assert!(took < Duration::from_secs(10), "took {took:?}: {said}");
}

/// `VmHWM` / `VmRSS` of process `pid`, in KiB.
fn memory_kib(pid: u32, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// Deciding on many claims takes memory in proportion to them, once: with 400 claims of 64
/// records (25,600 records, every claim's status naming each of them), the controller-manager's
/// resident memory grows, at its peak, by less than four times the claims' JSON as listed. It
/// used to keep every claim as JSON besides its type and copy every claim's records at each
/// pass: about nine times (104 MiB for 11.5 MiB listed, in a debug build); it keeps each claim
/// once, typed, and decides again only what a change can change: about two and a half.
#[tokio::test(flavor = "multi_thread")]
async fn deciding_many_claims_takes_memory_in_proportion_to_them() {
    const CLAIMS: usize = 400;
    const RECORDS: usize = 64;
    let server = support::start_with(&[GATE]);
    let cm = ControllerManager::start(&server, "cm.log", &[GATE, "--controllers=networkclaim"]);
    let client = server.client().await;
    let api = claims(&client);
    eventually_async("the controller running", || async {
        cm.process
            .output()
            .contains("starting controller")
            .then_some(())
    })
    .await;
    let pid = cm.process.child.id();
    let before = memory_kib(pid, "VmRSS");
    let bodies: Vec<DynamicObject> = (0..CLAIMS)
        .map(|i| {
            let prefixes: Vec<String> = (0..RECORDS)
                .map(|j| format!("fd00:{:x}:{:x}::/48", i + 1, j + 1))
                .collect();
            let records: Vec<(&str, &str)> =
                prefixes.iter().map(|p| ("pods", p.as_str())).collect();
            claim_body(&format!("many-{i:04}"), &records)
        })
        .collect();
    use futures::StreamExt as _;
    let created: Vec<_> = futures::stream::iter(bodies)
        .map(|body| {
            let api = api.clone();
            async move { api.create(&PostParams::default(), &body).await }
        })
        .buffer_unordered(8)
        .collect()
        .await;
    assert!(created.iter().all(Result::is_ok));
    eventually_async("every claim decided", || async {
        let list = api.list(&Default::default()).await.ok()?;
        let decided = list
            .items
            .iter()
            .filter(|o| {
                o.data["status"]["addressSpace"]
                    .as_array()
                    .is_some_and(|r| r.len() == RECORDS)
            })
            .count();
        (decided == CLAIMS).then_some(())
    })
    .await;
    let listed = server
        .raw()
        .get("/apis/networkregistry.genplane.io/v1alpha1/networkclaims")
        .body
        .len() as u64
        / 1024;
    let grown = memory_kib(pid, "VmHWM").saturating_sub(before);
    assert!(
        grown < 4 * listed,
        "the controller-manager grew by {grown} KiB at its peak deciding on claims listed in {listed} KiB"
    );
    drop(cm);
}
