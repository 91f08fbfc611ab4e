use std::sync::Arc;

use genplane_apimachinery::schema::GroupVersionResource;
use genplane_authentication::UserInfo;
use genplane_authorization::{Authorizer, Decision, RulesInfo};
use serde_json::json;

use super::*;
use crate::Request;

/// Allows `verb` on `signers` named `name` in `certificates.k8s.io`, and nothing else.
#[derive(Debug)]
struct SignerGrant {
    verb: &'static str,
    name: &'static str,
}

impl Authorizer for SignerGrant {
    fn authorize(&self, a: &genplane_authorization::Attributes) -> (Decision, String) {
        let allowed = a.resource_request
            && a.verb == self.verb
            && a.api_group == GROUP
            && a.resource == SIGNERS
            && a.name == self.name;
        let decision = if allowed {
            Decision::Allow
        } else {
            Decision::NoOpinion
        };
        (decision, String::new())
    }

    fn rules_for(&self, _: &UserInfo, _: &str) -> RulesInfo {
        RulesInfo::default()
    }
}

fn request(granted: &'static str) -> Request {
    Request {
        user: UserInfo::authenticated("alice", vec![]),
        resource: GroupVersionResource::new(GROUP, "v1beta1", clustertrustbundle::RESOURCE),
        authorizer: Some(Arc::new(SignerGrant {
            verb: "attest",
            name: granted,
        })),
        ..Request::default()
    }
}

fn bundle(name: &str, signer: &str) -> Value {
    let mut spec = json!({"trustBundle": "..."});
    if !signer.is_empty() {
        spec["signerName"] = json!(signer);
    }
    json!({"metadata": {"name": name}, "spec": spec})
}

/// What the plugin answers a write of `object` (over `old` for an update) by a user granted
/// `attest` on the signer `granted`: the refusal's code and message.
async fn attest(
    granted: &'static str,
    object: &Value,
    old: Option<&Value>,
) -> Result<(), (u16, String)> {
    let request = request(granted);
    let attributes = Attributes {
        request: &request,
        operation: if old.is_some() {
            Operation::Update
        } else {
            Operation::Create
        },
        namespace: "",
        name: object["metadata"]["name"].as_str().unwrap_or_default(),
        old_object: old,
    };
    ClusterTrustBundleAttest
        .validate(attributes, Some(object))
        .await
        .map_err(|e| (e.code, e.message.clone()))
}

#[tokio::test]
async fn attesting_for_a_signer_needs_attest_on_it_or_its_domain() {
    let signed = bundle("example.com:foo:v1", "example.com/foo");
    assert_eq!(attest("example.com/foo", &signed, None).await, Ok(()));
    assert_eq!(attest("example.com/*", &signed, None).await, Ok(()));
    assert_eq!(
        attest("example.com/foo", &signed, Some(&signed)).await,
        Ok(())
    );
    let refused = Err((
        403,
        "clustertrustbundles.certificates.k8s.io \"example.com:foo:v1\" is forbidden: user not permitted to attest for signerName \"example.com/foo\"".to_owned(),
    ));
    assert_eq!(attest("other.com/foo", &signed, None).await, refused);
    // A change of anything but what the garbage collector changes is checked.
    let mut relabelled = signed.clone();
    relabelled["metadata"]["labels"] = json!({"a": "b"});
    assert_eq!(
        attest("other.com/foo", &relabelled, Some(&signed)).await,
        refused
    );
}

#[tokio::test]
async fn bundles_without_a_signer_and_gc_updates_need_nothing() {
    let unsigned = bundle("roots", "");
    assert_eq!(attest("", &unsigned, None).await, Ok(()));
    assert_eq!(attest("", &unsigned, Some(&unsigned)).await, Ok(()));
    let signed = bundle("example.com:foo:v1", "example.com/foo");
    assert_eq!(attest("", &signed, Some(&signed)).await, Ok(()));
    let mut owned = signed.clone();
    owned["metadata"]["ownerReferences"] =
        json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": "u"}]);
    owned["metadata"]["finalizers"] = json!(["example.com/keep"]);
    assert_eq!(attest("", &owned, Some(&signed)).await, Ok(()));
    // Other resources are not this plugin's.
    let mut other = request("");
    other.resource = GroupVersionResource::new(GROUP, "v1", "certificatesigningrequests");
    let attributes = Attributes {
        request: &other,
        operation: Operation::Create,
        namespace: "",
        name: "x",
        old_object: None,
    };
    assert!(
        ClusterTrustBundleAttest
            .validate(attributes, Some(&signed))
            .await
            .is_ok()
    );
}
