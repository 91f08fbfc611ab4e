//! certificates.k8s.io/v1 CertificateSigningRequests through kube-rs: upstream's conformance
//! test "CertificateSigningRequest API should support CSR API operations"
//! (test/e2e/auth/certificates.go) ported, the requestor recorded from the authenticated user
//! whatever the body says, validation answered as 422 with upstream's causes, and the
//! admission plugins refusing approval and signing to users without `approve` and `sign` on
//! the signer.

use crate::support;

use futures::StreamExt as _;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use kube::api::{
    Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams, WatchEvent,
    WatchParams,
};
use serde_json::{Value, json};

/// A PEM CSR for `cn` (with `cn` as DNS name) from a new P-256 key.
fn request_pem(cn: &str) -> String {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(vec![cn.to_owned()]).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, cn);
    params.serialize_request(&key).unwrap().pem().unwrap()
}

fn self_signed_pem(cn: &str) -> String {
    let key = rcgen::KeyPair::generate().unwrap();
    rcgen::CertificateParams::new(vec![cn.to_owned()])
        .unwrap()
        .self_signed(&key)
        .unwrap()
        .pem()
}

fn b64(data: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(data)
}

fn template(signer: &str) -> CertificateSigningRequest {
    serde_json::from_value(json!({
        "metadata": {"generateName": "e2e-example-csr-"},
        "spec": {
            "request": b64(request_pem("e2e.example.com").as_bytes()),
            "signerName": signer,
            "expirationSeconds": 3600,
            "usages": ["digital signature", "key encipherment", "server auth"],
        },
    }))
    .unwrap()
}

/// The ported conformance test, step by step as upstream's.
#[tokio::test]
async fn should_support_csr_api_operations() {
    let server = support::start().await;
    let client = server.kube_client().await;
    let csrs: Api<CertificateSigningRequest> = Api::all(client.clone());
    let signer = "example.com/e2e-csr-api";
    let by_signer = ListParams::default().fields(&format!("spec.signerName={signer}"));

    // Discovery: the group, its version, and the resource with both subresources.
    let groups = client.list_api_groups().await.unwrap();
    let group = groups
        .groups
        .iter()
        .find(|g| g.name == "certificates.k8s.io")
        .expect("certificates.k8s.io in /apis");
    assert!(group.versions.iter().any(|v| v.version == "v1"));
    let resources = client
        .list_api_group_resources("certificates.k8s.io/v1")
        .await
        .unwrap();
    let names: Vec<&str> = resources
        .resources
        .iter()
        .map(|r| r.name.as_str())
        .collect();
    for name in [
        "certificatesigningrequests",
        "certificatesigningrequests/approval",
        "certificatesigningrequests/status",
    ] {
        assert!(names.contains(&name), "{name} in {names:?}");
    }

    // Create three, get one, list them by signer.
    let post = PostParams::default();
    csrs.create(&post, &template(signer)).await.unwrap();
    csrs.create(&post, &template(signer)).await.unwrap();
    let created = csrs.create(&post, &template(signer)).await.unwrap();
    let name = created.metadata.name.clone().unwrap();
    let gotten = csrs.get(&name).await.unwrap();
    assert_eq!(gotten.metadata.uid, created.metadata.uid);
    assert_eq!(gotten.spec.expiration_seconds, Some(3600));
    let listed = csrs.list(&by_signer).await.unwrap();
    assert_eq!(listed.items.len(), 3);

    // Watch from the list's version while the object is patched and updated.
    let mut watch = csrs
        .watch(
            &WatchParams::default().fields(&format!("metadata.name={name}")),
            listed.metadata.resource_version.as_deref().unwrap(),
        )
        .await
        .unwrap()
        .boxed();
    let patched = csrs
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"patched": "true"}}})),
        )
        .await
        .unwrap();
    assert_eq!(
        patched.metadata.annotations.as_ref().unwrap()["patched"],
        "true"
    );
    let mut to_update = patched.clone();
    to_update
        .metadata
        .annotations
        .as_mut()
        .unwrap()
        .insert("updated".into(), "true".into());
    let updated = csrs.replace(&name, &post, &to_update).await.unwrap();
    assert_eq!(
        updated.metadata.annotations.as_ref().unwrap()["updated"],
        "true"
    );
    loop {
        let event = tokio::time::timeout(std::time::Duration::from_secs(30), watch.next())
            .await
            .expect("a watch event within 30 s")
            .expect("the watch goes on")
            .unwrap();
        let WatchEvent::Modified(watched) = event else {
            panic!("expected MODIFIED, got {event:?}");
        };
        if watched
            .metadata
            .annotations
            .is_some_and(|a| a.get("patched").is_some_and(|v| v == "true"))
        {
            break;
        }
    }

    // approval: read it, patch a condition in, add Approved.
    let resource = kube::api::ApiResource::erase::<CertificateSigningRequest>(&());
    let dynamic: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let approval = dynamic.get_subresource("approval", &name).await.unwrap();
    assert_eq!(
        approval.types.as_ref().map(|t| t.kind.as_str()),
        Some("CertificateSigningRequest")
    );
    assert_eq!(approval.metadata.uid, created.metadata.uid);
    let patched_approval: CertificateSigningRequest = serde_json::from_value(
        serde_json::to_value(
            dynamic
                .patch_subresource(
                    "approval",
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({
                        "metadata": {"annotations": {"patchedapproval": "true"}},
                        "status": {"conditions": [{"type": "ApprovalPatch", "status": "True", "reason": "e2e"}]},
                    })),
                )
                .await
                .unwrap(),
        )
        .unwrap(),
    )
    .unwrap();
    let conditions = patched_approval.status.clone().unwrap().conditions.unwrap();
    assert_eq!(conditions.len(), 1);
    assert_eq!(conditions[0].type_, "ApprovalPatch");
    assert!(conditions[0].last_update_time.is_some());
    assert_eq!(
        patched_approval.metadata.annotations.as_ref().unwrap()["patchedapproval"],
        "true"
    );
    let mut approve = serde_json::to_value(&patched_approval).unwrap();
    approve["status"]["conditions"]
        .as_array_mut()
        .unwrap()
        .push(json!({"type": "Approved", "status": "True", "reason": "E2E", "message": "Set from an e2e test"}));
    let approved: Value = serde_json::to_value(
        dynamic
            .replace_subresource("approval", &name, &post, &approve)
            .await
            .unwrap(),
    )
    .unwrap();
    let conditions = approved["status"]["conditions"].as_array().unwrap();
    assert_eq!(conditions.len(), 2);
    assert_eq!(conditions[1]["type"], "Approved");

    // status: read it, patch a certificate in, add a condition.
    let status = dynamic.get_subresource("status", &name).await.unwrap();
    assert_eq!(status.metadata.uid, created.metadata.uid);
    let certificate = self_signed_pem("e2e.example.com");
    let patched_status: Value = serde_json::to_value(
        dynamic
            .patch_subresource(
                "status",
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({
                    "metadata": {"annotations": {"patchedstatus": "true"}},
                    "status": {"certificate": b64(certificate.as_bytes())},
                })),
            )
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        patched_status["status"]["certificate"],
        b64(certificate.as_bytes())
    );
    assert_eq!(
        patched_status["metadata"]["annotations"]["patchedstatus"],
        "true"
    );
    let mut with_condition = patched_status.clone();
    with_condition["status"]["conditions"]
        .as_array_mut()
        .unwrap()
        .push(json!({"type": "StatusUpdate", "status": "True", "reason": "E2E", "message": "Set from an e2e test"}));
    let updated_status: Value = serde_json::to_value(
        dynamic
            .replace_subresource("status", &name, &post, &with_condition)
            .await
            .unwrap(),
    )
    .unwrap();
    let conditions = updated_status["status"]["conditions"].as_array().unwrap();
    assert_eq!(conditions.len(), 3);
    assert_eq!(conditions[2]["type"], "StatusUpdate");

    // Delete one, then the rest as a collection.
    csrs.delete(&name, &DeleteParams::default()).await.unwrap();
    assert!(csrs.get_opt(&name).await.unwrap().is_none());
    assert_eq!(csrs.list(&by_signer).await.unwrap().items.len(), 2);
    csrs.delete_collection(&DeleteParams::default(), &by_signer)
        .await
        .unwrap();
    assert!(csrs.list(&by_signer).await.unwrap().items.is_empty());
}

/// A client of the server impersonating `user` in `groups`.
async fn client_as(server: &support::Server, user: &str, groups: &[&str]) -> kube::Client {
    let mut config =
        genplane_test_support::clients::kube_config(&server.data_dir().join("admin.kubeconfig"))
            .await;
    config.auth_info.impersonate = Some(user.to_owned());
    config.auth_info.impersonate_groups = Some(groups.iter().map(|g| (*g).to_owned()).collect());
    kube::Client::try_from(config).unwrap()
}

#[tokio::test]
async fn the_requestor_is_recorded_and_approval_and_signing_need_the_signer() {
    let server = support::start().await;
    let admin = server.kube_client().await;
    // bob may create CSRs and write both subresources; RBAC lets him, admission must not.
    let roles: Api<DynamicObject> = Api::all_with(
        admin.clone(),
        &kube::api::ApiResource::erase::<k8s_openapi::api::rbac::v1::ClusterRole>(&()),
    );
    roles
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": {"name": "csr-writer"},
                "rules": [{"apiGroups": ["certificates.k8s.io"], "verbs": ["*"],
                    "resources": ["certificatesigningrequests", "certificatesigningrequests/approval", "certificatesigningrequests/status"]}],
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    let bindings: Api<DynamicObject> = Api::all_with(
        admin.clone(),
        &kube::api::ApiResource::erase::<k8s_openapi::api::rbac::v1::ClusterRoleBinding>(&()),
    );
    bindings
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": "csr-writer"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "csr-writer"},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "bob"}],
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    let bob = client_as(&server, "bob", &["team"]).await;
    let as_bob: Api<CertificateSigningRequest> = Api::all(bob);
    let mut body = template("example.com/mine");
    body.metadata.generate_name = None;
    body.metadata.name = Some("bobs".into());
    body.spec.username = Some("mallory".into());
    body.spec.groups = Some(vec!["system:masters".into()]);
    let created = as_bob.create(&PostParams::default(), &body).await.unwrap();
    assert_eq!(created.spec.username.as_deref(), Some("bob"));
    assert_eq!(
        created.spec.groups,
        Some(vec!["team".to_owned(), "system:authenticated".to_owned()])
    );

    let resource = kube::api::ApiResource::erase::<CertificateSigningRequest>(&());
    let bob_dynamic: Api<DynamicObject> = Api::all_with(as_bob.clone().into_client(), &resource);
    let approve =
        Patch::Merge(json!({"status": {"conditions": [{"type": "Approved", "status": "True"}]}}));
    let kube::Error::Api(refused) = bob_dynamic
        .patch_subresource("approval", "bobs", &PatchParams::default(), &approve)
        .await
        .unwrap_err()
    else {
        panic!("approval refused")
    };
    assert_eq!((refused.code, refused.reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        refused.message,
        "certificatesigningrequests.certificates.k8s.io \"bobs\" is forbidden: user not permitted to approve requests with signerName \"example.com/mine\""
    );
    let sign =
        Patch::Merge(json!({"status": {"certificate": b64(self_signed_pem("x").as_bytes())}}));
    let kube::Error::Api(refused) = bob_dynamic
        .patch_subresource("status", "bobs", &PatchParams::default(), &sign)
        .await
        .unwrap_err()
    else {
        panic!("signing refused")
    };
    assert_eq!(
        refused.message,
        "certificatesigningrequests.certificates.k8s.io \"bobs\" is forbidden: user not permitted to sign requests with signerName \"example.com/mine\""
    );

    // With `approve` on the signer's domain wildcard, bob approves.
    roles
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": {"name": "example-approver"},
                "rules": [{"apiGroups": ["certificates.k8s.io"], "verbs": ["approve"],
                    "resources": ["signers"], "resourceNames": ["example.com/*"]}],
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    bindings
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": "example-approver"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "example-approver"},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "bob"}],
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    genplane_test_support::eventually_async("bob approves with the wildcard", || async {
        bob_dynamic
            .patch_subresource("approval", "bobs", &PatchParams::default(), &approve)
            .await
            .ok()
    })
    .await;

    // No one asks the kube-apiserver-client signer for system:masters.
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "root");
    params
        .distinguished_name
        .push(rcgen::DnType::OrganizationName, "system:masters");
    let masters = params.serialize_request(&key).unwrap().pem().unwrap();
    let admin_csrs: Api<CertificateSigningRequest> = Api::all(admin);
    let body: CertificateSigningRequest = serde_json::from_value(json!({
        "metadata": {"name": "masters"},
        "spec": {"request": b64(masters.as_bytes()), "signerName": "kubernetes.io/kube-apiserver-client", "usages": ["client auth"]},
    }))
    .unwrap();
    let kube::Error::Api(refused) = admin_csrs
        .create(&PostParams::default(), &body)
        .await
        .unwrap_err()
    else {
        panic!("system:masters refused")
    };
    assert_eq!(
        refused.message,
        "certificatesigningrequests.certificates.k8s.io \"masters\" is forbidden: use of kubernetes.io/kube-apiserver-client signer with system:masters group is not allowed"
    );
}

#[tokio::test]
async fn invalid_requests_are_422_with_upstreams_causes() {
    let server = support::start().await;
    let answer = support::post_json(
        &server,
        "/apis/certificates.k8s.io/v1/certificatesigningrequests",
        &json!({
            "apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
            "metadata": {"name": "bad"},
            "spec": {"request": b64(b"-\n"), "signerName": "example.com", "usages": [], "expirationSeconds": 60},
        }),
    )
    .await
    .expect(422)
    .json();
    assert_eq!(answer["reason"], "Invalid");
    let causes: Vec<(String, String)> = answer["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["field"].as_str().unwrap().to_owned(),
                c["message"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        causes,
        [
            (
                "spec.request".to_owned(),
                "Invalid value: []byte{0x2d, 0xa}: PEM block type must be CERTIFICATE REQUEST"
                    .to_owned()
            ),
            ("spec.usages".to_owned(), "Required value".to_owned()),
            (
                "spec.signerName".to_owned(),
                "Invalid value: \"example.com\": must be a fully qualified domain and path of the form 'example.com/signer-name'".to_owned()
            ),
            (
                "spec.expirationSeconds".to_owned(),
                "Invalid value: 60: may not specify a duration less than 600 seconds (10 minutes)"
                    .to_owned()
            ),
        ]
    );
}
