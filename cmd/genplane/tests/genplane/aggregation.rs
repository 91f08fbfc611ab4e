//! The aggregator against the real binary: an APIService hands `wardle.example.com/v1alpha1`
//! to an extension server (the stand-in of `support::extension`, reached through
//! `--service-address-override`), and kubectl and kube-rs use it through genplane as if it were
//! genplane's own: discovery lists its resources, reads, creates and watches go there as the
//! user genplane authenticated (front-proxy headers over the proxy's client certificate, the
//! client's own credentials and forged identity headers never passed on), RBAC is genplane's,
//! and an extension that stops is unavailable (503) while the rest is served as before.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use serde_json::{Value, json};

use crate::admission::kubectl_stdin;
use crate::support::extension::{Extension, GROUP, VERSION};
use crate::support::{Apiserver, eventually, eventually_holds, ok, start_with, text};

fn api_service(server: &Apiserver) -> Value {
    serde_json::from_str(&ok(server.kubectl(
        "kubectl",
        &[
            "get",
            "apiservice",
            "v1alpha1.wardle.example.com",
            "-o",
            "json",
        ],
    )))
    .unwrap()
}

fn available(server: &Apiserver) -> (String, String) {
    let object = api_service(server);
    let condition = object["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Available").cloned())
        .unwrap_or(Value::Null);
    (
        condition["status"].as_str().unwrap_or("").to_owned(),
        condition["reason"].as_str().unwrap_or("").to_owned(),
    )
}

#[test]
fn an_extension_api_server_is_served_through_the_aggregator() {
    let mut extension = Extension::bind();
    let server = start_with(&[&format!(
        "--service-address-override=wardle/api:443=127.0.0.1:{}",
        extension.port
    )]);
    let front_proxy_ca =
        std::fs::read_to_string(server.data().join("pki/front-proxy-ca.crt")).unwrap();
    extension.serve(&front_proxy_ca);

    let registration = json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": format!("{VERSION}.{GROUP}")},
        "spec": {"group": GROUP, "version": VERSION, "groupPriorityMinimum": 2000,
            "versionPriority": 200, "service": {"namespace": "wardle", "name": "api"},
            "caBundle": base64_of(&extension.ca_pem)}});
    ok(kubectl_stdin(
        &server,
        &["create", "-f", "-"],
        &registration,
    ));
    eventually_holds("the APIService to be available", || {
        available(&server) == ("True".to_owned(), "Passed".to_owned())
    });
    let table = ok(server.kubectl("kubectl", &["get", "apiservices"]));
    let row = table
        .lines()
        .find(|l| l.starts_with("v1alpha1.wardle.example.com"))
        .unwrap_or_else(|| panic!("{table}"));
    assert_eq!(
        row.split_whitespace().take(3).collect::<Vec<_>>(),
        ["v1alpha1.wardle.example.com", "wardle/api", "True"],
        "{table}"
    );

    // Discovery lists what the extension serves; kubectl uses it by its short name.
    let resources = eventually("the flunders in discovery", || {
        let out = server.kubectl(
            "kubectl",
            &["api-resources", "--api-group=wardle.example.com"],
        );
        let listed = text(&out);
        (out.status.success() && listed.contains("flunders")).then_some(listed)
    });
    let line = resources
        .lines()
        .find(|l| l.starts_with("flunders"))
        .unwrap();
    assert_eq!(
        line.split_whitespace().collect::<Vec<_>>(),
        [
            "flunders",
            "fl",
            "wardle.example.com/v1alpha1",
            "true",
            "Flunder"
        ],
        "{resources}"
    );
    let listed = ok(server.kubectl("kubectl", &["get", "fl", "-n", "default", "-o", "name"]));
    assert_eq!(
        listed.trim(),
        "flunder.wardle.example.com/first",
        "{listed}"
    );

    // The extension saw the user genplane authenticated, over HTTP/2, and no credentials.
    let seen = extension.seen();
    let list = seen
        .iter()
        .rev()
        .find(|s| {
            s.method == "GET"
                && s.target
                    .starts_with("/apis/wardle.example.com/v1alpha1/namespaces/default/flunders")
        })
        .unwrap_or_else(|| panic!("{seen:?}"));
    assert_eq!(list.header("x-remote-user"), ["genplane-admin"], "{list:?}");
    let groups = list.header("x-remote-group");
    assert!(
        groups.contains(&"system:masters") && groups.contains(&"system:authenticated"),
        "{list:?}"
    );
    assert!(list.header("authorization").is_empty(), "{list:?}");
    assert_eq!(list.version, "HTTP/2.0", "{list:?}");

    // A client's own identity headers never reach it.
    let answer = server.raw().request(
        "GET",
        "/apis/wardle.example.com/v1alpha1/namespaces/default/flunders",
        &[
            ("X-Remote-User", "mallory"),
            ("X-Remote-Group", "system:masters"),
            ("Authorization", "Bearer not-for-the-extension"),
        ],
        None,
    );
    assert_eq!(answer.status, 200, "{}", answer.text());
    let forged = extension.seen().last().cloned().unwrap();
    assert_eq!(
        forged.header("x-remote-user"),
        ["genplane-admin"],
        "{forged:?}"
    );
    assert!(
        !forged.header("x-remote-group").contains(&"mallory"),
        "{forged:?}"
    );
    assert!(forged.header("authorization").is_empty(), "{forged:?}");

    // Writes go there too, as the impersonated user when impersonating.
    let created = kubectl_stdin(
        &server,
        &["create", "-f", "-", "-o", "json"],
        &json!({"apiVersion": format!("{GROUP}/{VERSION}"), "kind": "Flunder",
            "metadata": {"name": "second", "namespace": "default"}}),
    );
    let created: Value = serde_json::from_str(&ok(created)).unwrap();
    assert_eq!(created["metadata"]["uid"], "uid-new", "{created}");

    // RBAC is genplane's: a user without a role is refused before the extension is asked.
    let before = extension.seen().len();
    let out = server.kubectl(
        "kubectl",
        &["get", "flunders", "-n", "default", "--as=alice"],
    );
    assert!(!out.status.success());
    assert!(
        text(&out).contains("flunders.wardle.example.com is forbidden: User \"alice\" cannot list resource \"flunders\""),
        "{}",
        text(&out)
    );
    assert_eq!(extension.seen().len(), before, "the extension was asked");

    // A watch's events come through as the extension writes them.
    let started = std::time::Instant::now();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let first = runtime.block_on(async {
        use futures::StreamExt as _;
        let client = server.client().await;
        let resource = kube::api::ApiResource {
            group: GROUP.into(),
            version: VERSION.into(),
            api_version: format!("{GROUP}/{VERSION}"),
            kind: "Flunder".into(),
            plural: "flunders".into(),
        };
        let api: kube::Api<kube::api::DynamicObject> =
            kube::Api::namespaced_with(client, "default", &resource);
        let stream = api
            .watch(&kube::api::WatchParams::default(), "0")
            .await
            .unwrap();
        let mut stream = std::pin::pin!(stream);
        tokio::time::timeout(Duration::from_secs(10), stream.next())
            .await
            .expect("the first event within 10 s")
            .unwrap()
            .unwrap()
    });
    assert!(
        matches!(&first, kube::api::WatchEvent::Added(o) if o.metadata.name.as_deref() == Some("first")),
        "{first:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(20));

    // Stopped, it is unavailable and its group-version answers 503.
    extension.stop();
    eventually_holds("the APIService to be unavailable", || {
        available(&server) == ("False".to_owned(), "FailedDiscoveryCheck".to_owned())
    });
    let answer = server
        .raw()
        .get("/apis/wardle.example.com/v1alpha1/namespaces/default/flunders");
    assert_eq!(answer.status, 503, "{}", answer.text());
    let table = ok(server.kubectl(
        "kubectl",
        &["get", "apiservice", "v1alpha1.wardle.example.com"],
    ));
    assert!(table.contains("False (FailedDiscoveryCheck)"), "{table}");
    // The metrics say so: unavailable now, and fallen once, for that reason; Local ones are
    // available.
    let metrics = server.metrics();
    for line in [
        "aggregator_unavailable_apiservice{name=\"v1alpha1.wardle.example.com\"} 1\n",
        "aggregator_unavailable_apiservice_total{name=\"v1alpha1.wardle.example.com\",reason=\"FailedDiscoveryCheck\"} 1\n",
        "aggregator_unavailable_apiservice{name=\"v1.\"} 0\n",
    ] {
        assert!(metrics.contains(line), "{line} in {metrics}");
    }
    // Discovery still lists what it served, marked stale.
    let discovery = server.raw().request(
        "GET",
        "/apis",
        &[(
            "Accept",
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
        )],
        None,
    );
    let wardle = discovery.json()["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["metadata"]["name"] == GROUP)
        .cloned()
        .unwrap_or_else(|| panic!("{}", discovery.text()));
    assert_eq!(wardle["versions"][0]["freshness"], "Stale", "{wardle}");
    assert_eq!(
        wardle["versions"][0]["resources"][0]["resource"], "flunders",
        "{wardle}"
    );
    // Everything else is served as before.
    ok(server.kubectl("kubectl", &["get", "namespaces"]));
}

fn base64_of(text: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(text)
}

/// Runs `genplane pki` for the data directory `data` (the serving certificate also for the
/// names in `sans`).
fn make_pki(data: &std::path::Path, sans: &str) {
    let out = std::process::Command::new(crate::support::BIN)
        .args(["pki", &format!("--data-dir={}", data.display())])
        .arg(format!("--apiserver-cert-extra-sans={sans}"))
        .arg("--server=https://127.0.0.1:6443")
        .output()
        .unwrap();
    ok(out);
}

#[test]
fn a_genplane_api_server_serves_behind_another_as_an_extension() {
    // The aggregator's certificates first: the extension trusts its front-proxy CA.
    let aggregator_dir = tempfile::tempdir().unwrap();
    make_pki(&aggregator_dir.path().join("data"), "kubernetes");
    let front_proxy_ca = aggregator_dir.path().join("data/pki/front-proxy-ca.crt");
    // Written when the aggregator starts; the extension reads it at its first delegated
    // decision.
    let aggregator_kubeconfig = aggregator_dir.path().join("data/admin.kubeconfig");
    // The extension: a genplane apiserver whose serving certificate names the Service
    // `wardle/api`, believing the aggregator's proxy for the user in its headers, and asking
    // the aggregator what its own RBAC does not allow.
    let extension_dir = tempfile::tempdir().unwrap();
    make_pki(&extension_dir.path().join("data"), "api.wardle.svc");
    let extension = crate::support::start_in(
        extension_dir,
        &[
            &format!(
                "--requestheader-client-ca-file={}",
                front_proxy_ca.display()
            ),
            "--requestheader-allowed-names=front-proxy-client",
            &format!(
                "--authorization-kubeconfig={}",
                aggregator_kubeconfig.display()
            ),
            &format!(
                "--authentication-kubeconfig={}",
                aggregator_kubeconfig.display()
            ),
        ],
    );
    let aggregator = crate::support::start_in(
        aggregator_dir,
        &[&format!(
            "--service-address-override=wardle/api:443=127.0.0.1:{}",
            extension.port
        )],
    );

    // The extension serves CronTabs (a CRD of its own); the aggregator hands their group to it.
    let crd = crate::support::fixture("crds/crontabs.yaml");
    let path = extension.dir.path().join("crd.yaml");
    std::fs::write(&path, crd).unwrap();
    ok(extension.kubectl("kubectl", &["apply", "-f", &path.display().to_string()]));
    extension.wait_established("crontabs.stable.example.com");
    let ca = std::fs::read_to_string(extension.data().join("pki/ca.crt")).unwrap();
    ok(kubectl_stdin(
        &aggregator,
        &["apply", "-f", "-"],
        &json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
            "metadata": {"name": "v1.stable.example.com"},
            "spec": {"group": "stable.example.com", "version": "v1", "groupPriorityMinimum": 1000,
                "versionPriority": 100, "service": {"namespace": "wardle", "name": "api"},
                "caBundle": base64_of(&ca)}}),
    ));
    eventually_holds("the extension to be available", || {
        let object: Value = serde_json::from_str(&ok(aggregator.kubectl(
            "kubectl",
            &["get", "apiservice", "v1.stable.example.com", "-o", "json"],
        )))
        .unwrap();
        object["status"]["conditions"].as_array().is_some_and(|c| {
            c.iter()
                .any(|c| c["type"] == "Available" && c["status"] == "True")
        })
    });

    // Written through the aggregator, stored by the extension.
    eventually("crontabs in the aggregator's discovery", || {
        let out = aggregator.kubectl(
            "kubectl",
            &["api-resources", "--api-group=stable.example.com"],
        );
        (out.status.success() && text(&out).contains("crontabs")).then_some(())
    });
    ok(kubectl_stdin(
        &aggregator,
        &["create", "-f", "-"],
        &json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab",
            "metadata": {"name": "through-the-aggregator", "namespace": "default"},
            "spec": {"cronSpec": "* * * * */5", "image": "web"}}),
    ));
    let stored = ok(extension.kubectl(
        "kubectl",
        &[
            "get",
            "crontab",
            "through-the-aggregator",
            "-n",
            "default",
            "-o",
            "name",
        ],
    ));
    assert_eq!(
        stored.trim(),
        "crontab.stable.example.com/through-the-aggregator"
    );

    // kubectl explain reads the extension's OpenAPI document through the aggregator.
    let explained = eventually("the extension's OpenAPI document", || {
        let out = aggregator.kubectl("kubectl", &["explain", "crontabs.spec"]);
        (out.status.success() && text(&out).contains("cronSpec")).then(|| text(&out))
    });
    assert!(
        explained.contains("GROUP:      stable.example.com"),
        "{explained}"
    );
    // The v2 document describes the extension's kind and paths too.
    eventually_holds("the extension's kinds in the OpenAPI v2 document", || {
        let v2 = aggregator.raw().get("/openapi/v2").json();
        v2["definitions"]["com.example.stable.v1.CronTab"].is_object()
            && v2["paths"]["/apis/stable.example.com/v1/namespaces/{namespace}/crontabs"]
                .is_object()
    });
    // kubectl 1.27 explains from the v2 document.
    let kubectl = crate::support::kubectl_path("kubectl.1.27");
    let explained =
        ok(aggregator.kubectl(kubectl.to_str().unwrap(), &["explain", "crontabs.spec"]));
    assert!(explained.contains("cronSpec"), "{explained}");

    // The extension sees the user the aggregator authenticated, and what its own RBAC does
    // not allow it asks the aggregator (a SubjectAccessReview): alice is refused by the
    // aggregator until it grants her, then allowed by both, though the extension's RBAC
    // knows nothing of her.
    let out = aggregator.kubectl(
        "kubectl",
        &["get", "crontabs", "-n", "default", "--as=alice"],
    );
    assert!(!out.status.success());
    assert!(
        text(&out).contains("User \"alice\" cannot list resource \"crontabs\""),
        "{}",
        text(&out)
    );
    let grant = |server: &Apiserver| {
        ok(server.kubectl(
            "kubectl",
            &[
                "create",
                "clusterrole",
                "crontab-reader",
                "--verb=get,list",
                "--resource=crontabs.stable.example.com",
            ],
        ));
        ok(server.kubectl(
            "kubectl",
            &[
                "create",
                "clusterrolebinding",
                "alice-reads-crontabs",
                "--clusterrole=crontab-reader",
                "--user=alice",
            ],
        ));
    };
    grant(&aggregator);
    eventually("the aggregator to allow alice", || {
        let out = aggregator.kubectl(
            "kubectl",
            &[
                "auth",
                "can-i",
                "list",
                "crontabs.stable.example.com",
                "-n",
                "default",
                "--as=alice",
            ],
        );
        (text(&out).trim() == "yes").then_some(())
    });
    eventually("alice to read crontabs through the aggregator", || {
        let out = aggregator.kubectl(
            "kubectl",
            &[
                "get",
                "crontabs",
                "-n",
                "default",
                "--as=alice",
                "-o",
                "name",
            ],
        );
        (out.status.success() && text(&out).contains("through-the-aggregator")).then_some(())
    });

    // Headers from anyone but the front proxy mean nothing to the extension.
    let answer = extension.raw().request(
        "POST",
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        &[
            ("X-Remote-User", "mallory"),
            ("X-Remote-Group", "system:masters"),
        ],
        Some(br#"{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}"#),
    );
    assert_eq!(answer.status, 201, "{}", answer.text());
    assert_eq!(
        answer.json()["status"]["userInfo"]["username"],
        "genplane-admin",
        "{}",
        answer.text()
    );
    // A token the aggregator issued, shown to the extension itself: the extension asks the
    // aggregator whom it names (a TokenReview); a token nobody issued is refused.
    ok(aggregator.kubectl(
        "kubectl",
        &["create", "serviceaccount", "bot", "-n", "default"],
    ));
    let token = ok(aggregator.kubectl("kubectl", &["create", "token", "bot", "-n", "default"]));
    let as_bot = crate::networkregistry::token_kubeconfig(
        extension.port,
        &extension.ca(),
        &extension.dir.path().join("bot.kubeconfig"),
        Some(token.trim()),
    );
    let whoami = ok(crate::support::kubectl_command("kubectl", &as_bot)
        .args([
            "auth",
            "whoami",
            "-o",
            "jsonpath={.status.userInfo.username}",
        ])
        .output()
        .unwrap());
    assert_eq!(whoami.trim(), "system:serviceaccount:default:bot");
    let refused = crate::support::kubectl_command("kubectl", &as_bot)
        .args(["auth", "whoami", "--token=not-a-token"])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(
        text(&refused).contains("Unauthorized"),
        "{}",
        text(&refused)
    );

    // What an extension needs to know of the aggregator is published where upstream's is.
    let published: Value = serde_json::from_str(&ok(aggregator.kubectl(
        "kubectl",
        &[
            "get",
            "configmap",
            "-n",
            "kube-system",
            "extension-apiserver-authentication",
            "-o",
            "json",
        ],
    )))
    .unwrap();
    assert_eq!(
        published["data"]["requestheader-allowed-names"], "[\"front-proxy-client\"]",
        "{published}"
    );
    assert_eq!(
        published["data"]["requestheader-client-ca-file"],
        std::fs::read_to_string(aggregator.data().join("pki/front-proxy-ca.crt")).unwrap()
    );
}
