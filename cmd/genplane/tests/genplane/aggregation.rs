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
    // Everything else is served as before.
    ok(server.kubectl("kubectl", &["get", "namespaces"]));
}

fn base64_of(text: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(text)
}
