//! The kinds' strategies follow the server's feature gates: a Lease keeps the
//! CoordinatedLeaderElection fields (`spec.strategy`, `spec.preferredHolder`) only on a server
//! with that feature on, as kube-apiserver's Lease strategy does.

#![allow(clippy::unwrap_used)]

use serde_json::{Value, json};

use crate::support::start_with;

fn lease_spec_after_create(flags: &[&str]) -> Value {
    let server = start_with(flags);
    let raw = server.raw();
    let lease = json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "l1", "namespace": "default"},
        "spec": {"holderIdentity": "a", "strategy": "OldestEmulationVersion", "preferredHolder": "b"},
    });
    let created = raw.request(
        "POST",
        "/apis/coordination.k8s.io/v1/namespaces/default/leases",
        &[],
        Some(lease.to_string().as_bytes()),
    );
    assert_eq!(created.status, 201, "{}", created.text());
    let read = raw.get("/apis/coordination.k8s.io/v1/namespaces/default/leases/l1");
    read.json()["spec"].clone()
}

#[test]
fn a_lease_keeps_the_coordinated_leader_election_fields_only_with_the_feature_on() {
    assert_eq!(lease_spec_after_create(&[]), json!({"holderIdentity": "a"}));
    assert_eq!(
        lease_spec_after_create(&["--feature-gates=CoordinatedLeaderElection=true"]),
        json!({"holderIdentity": "a", "strategy": "OldestEmulationVersion", "preferredHolder": "b"})
    );
}
