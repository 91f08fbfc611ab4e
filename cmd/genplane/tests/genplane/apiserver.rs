//! `genplane apiserver` as a user runs it: the real binary on loopback, driven by the real
//! kubectl through the kubeconfig the server writes.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Command;

use crate::support::recorder::Recorder;
use crate::support::{
    self, Apiserver, eventually, kubectl_binaries, kubectl_path, ok, start, text,
};

#[test]
fn kubectl_reads_and_writes_through_the_generated_kubeconfig() {
    let server = start();
    let kubectls = kubectl_binaries();
    assert!(!kubectls.is_empty(), "no kubectl on this machine");
    let manifest = server.dir.path().join("cm.yaml");
    std::fs::write(&manifest, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  labels:\n    app: web\ndata:\n  color: blue\n").unwrap();
    for kubectl in &kubectls {
        let namespaces = ok(server.kubectl(kubectl, &["get", "namespaces", "-o", "name"]));
        for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            assert!(
                namespaces.contains(&format!("namespace/{ns}")),
                "{kubectl}: {namespaces}"
            );
        }
        let table = ok(server.kubectl(kubectl, &["get", "ns"]));
        assert!(
            table.starts_with("NAME") && table.contains("STATUS") && table.contains("Active"),
            "{kubectl}: {table}"
        );
        let resources = ok(server.kubectl(kubectl, &["api-resources"]));
        assert!(
            resources
                .lines()
                .any(|l| l.starts_with("configmaps") && l.contains(" cm ")),
            "{kubectl}: {resources}"
        );
        assert!(
            resources.contains("leases") && resources.contains("coordination.k8s.io"),
            "{kubectl}: {resources}"
        );

        ok(server.kubectl(
            kubectl,
            &[
                "create",
                "-f",
                manifest.to_str().unwrap(),
                "--validate=false",
            ],
        ));
        assert_eq!(
            ok(server.kubectl(
                kubectl,
                &["get", "cm", "settings", "-o", "jsonpath={.data.color}"]
            )),
            "blue"
        );
        let labelled = ok(server.kubectl(
            kubectl,
            &["get", "cm", "-A", "-l", "app=web", "--show-labels"],
        ));
        assert!(
            labelled.contains("default")
                && labelled.contains("settings")
                && labelled.contains("app=web"),
            "{kubectl}: {labelled}"
        );
        ok(server.kubectl(
            kubectl,
            &[
                "patch",
                "cm",
                "settings",
                "--type=merge",
                "-p",
                r#"{"data":{"color":"green"}}"#,
            ],
        ));
        ok(server.kubectl(
            kubectl,
            &[
                "patch",
                "cm",
                "settings",
                "--type=json",
                "-p",
                r#"[{"op":"replace","path":"/data/color","value":"red"}]"#,
            ],
        ));
        assert_eq!(
            ok(server.kubectl(
                kubectl,
                &["get", "cm", "settings", "-o", "jsonpath={.data.color}"]
            )),
            "red"
        );
        let by_field = ok(server.kubectl(
            kubectl,
            &[
                "get",
                "cm",
                "--field-selector",
                "metadata.name=settings",
                "-o",
                "name",
            ],
        ));
        assert_eq!(by_field.trim(), "configmap/settings");
        ok(server.kubectl(kubectl, &["delete", "cm", "settings"]));
        let gone = server.kubectl(kubectl, &["get", "cm", "settings"]);
        assert!(!gone.status.success());
        assert!(
            text(&gone).contains("NotFound"),
            "{kubectl}: {}",
            text(&gone)
        );
        let ready = ok(server.kubectl(kubectl, &["get", "--raw", "/readyz?verbose"]));
        assert!(
            ready.contains("[+]storage ok") && ready.contains("readyz check passed"),
            "{ready}"
        );
    }
}

/// A GET over TLS without a client certificate, trusting `ca`: the status code and body.
fn anonymous_get(port: u16, ca: &Path, path: &str) -> (u16, String) {
    support::https(port, ca, "GET", path, &[], None)
}

#[test]
fn anonymous_requests_reach_only_the_public_endpoints() {
    let server = start();
    let ca = server.dir.path().join("data/pki/ca.crt");
    // Anonymous requests are authenticated as system:anonymous, then refused (403) by
    // authorization, as kube-apiserver answers them with --anonymous-auth on.
    let (code, body) = anonymous_get(server.port, &ca, "/api/v1/namespaces");
    assert_eq!(code, 403, "{body}");
    assert!(body.contains("\"reason\":\"Forbidden\""), "{body}");
    assert!(
        body.contains("User \\\"system:anonymous\\\" cannot list resource \\\"namespaces\\\""),
        "{body}"
    );
    for public in ["/version", "/readyz", "/livez?verbose", "/healthz"] {
        let (code, body) = anonymous_get(server.port, &ca, public);
        assert_eq!(code, 200, "{public}: {body}");
    }
}

#[test]
fn the_python_client_works() {
    let server = start();
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/genplane/python_client.py"
    );
    let output = Command::new("python3")
        .arg(script)
        .arg(server.kubeconfig())
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", text(&output));
    assert!(String::from_utf8_lossy(&output.stdout).contains("python client ok"));
}

/// Scrapes `/metrics` until every line in `wanted` is in it.
fn metrics_until(server: &Apiserver, wanted: &[&str]) -> String {
    let raw = server.raw();
    eventually(&format!("{wanted:?} in /metrics"), || {
        let metrics = raw.get("/metrics").text();
        genplane_test_support::metrics::has_all(&metrics, wanted).then_some(metrics)
    })
}

#[test]
fn the_identity_lease_and_request_metrics_are_published() {
    let server = start();
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_owned();
    let lease = eventually("the identity lease", || {
        let listed: serde_json::Value = serde_json::from_str(&ok(server.kubectl(
            "kubectl",
            &[
                "get",
                "leases",
                "-n",
                "kube-system",
                "-l",
                "apiserver.kubernetes.io/identity=kube-apiserver",
                "-o",
                "json",
            ],
        )))
        .unwrap();
        let lease = listed["items"].get(0)?;
        assert_eq!(listed["items"].as_array().unwrap().len(), 1, "{listed}");
        Some(lease.clone())
    });
    let name = lease["metadata"]["name"].as_str().unwrap();
    assert!(
        name.starts_with("apiserver-") && name.len() == 36,
        "{lease}"
    );
    assert_eq!(
        lease["metadata"]["labels"]["kubernetes.io/hostname"],
        hostname
    );
    assert!(
        lease["spec"]["holderIdentity"]
            .as_str()
            .unwrap()
            .starts_with(&format!("{name}_")),
        "{lease}"
    );
    assert_eq!(lease["spec"]["leaseDurationSeconds"], 3600);

    let manifest = server.dir.path().join("configmaps.yaml");
    std::fs::write(
        &manifest,
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: m1}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: m2}\n",
    )
    .unwrap();
    ok(server.kubectl(
        "kubectl",
        &[
            "create",
            "--validate=false",
            "-f",
            manifest.to_str().unwrap(),
        ],
    ));
    ok(server.kubectl("kubectl", &["get", "configmaps", "-A"]));
    metrics_until(
        &server,
        &[
            // The two, and kube-system/extension-apiserver-authentication.
            "apiserver_storage_objects{resource=\"configmaps\"} 3",
            "apiserver_storage_objects{resource=\"namespaces\"} 4",
            // The identity Lease, and the Lease of its feature-use reporter.
            "apiserver_storage_objects{resource=\"leases.coordination.k8s.io\"} 2",
            "apiserver_request_total{code=\"200\",component=\"apiserver\",dry_run=\"\",group=\"\",resource=\"configmaps\",scope=\"cluster\",subresource=\"\",verb=\"LIST\",version=\"v1\"} 1",
            "# TYPE apiserver_request_total counter",
            "# TYPE apiserver_request_duration_seconds histogram",
        ],
    );
}

fn b64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn unb64(text: &serde_json::Value) -> Vec<u8> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD
        .decode(text.as_str().unwrap())
        .unwrap()
}

/// kubectl ≥ 1.31 sends `kubectl create <generator>` bodies in protobuf and takes protobuf
/// answers; 1.27 sends JSON. Either way the stored object is exactly what was sent.
#[test]
fn kubectl_create_generators_store_what_they_send() {
    use serde_json::{Value, json};

    let server = start();
    let files = tempfile::tempdir().unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["tls.example".to_owned()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    let (cert_pem, key_pem) = (cert.pem(), key.serialize_pem());
    let cert_file = files.path().join("tls.crt");
    let key_file = files.path().join("tls.key");
    let binary_file = files.path().join("bin");
    std::fs::write(&cert_file, &cert_pem).unwrap();
    std::fs::write(&key_file, &key_pem).unwrap();
    std::fs::write(&binary_file, [0u8, 0xff, 1, b'\n']).unwrap();

    let kubectls = [
        ("133", kubectl_path("kubectl.1.33")),
        ("127", kubectl_path("kubectl.1.27")),
    ];
    for (suffix, kubectl) in &kubectls {
        let kubectl = kubectl.to_str().unwrap();
        let run = |args: &[&str]| ok(server.kubectl(kubectl, args));
        let get = |kind: &str, name: &str| -> Value {
            serde_json::from_str(&run(&["get", kind, name, "-o", "json"])).unwrap()
        };

        let cm = format!("cm-{suffix}");
        let out = run(&[
            "create",
            "configmap",
            &cm,
            "--from-literal=a=b",
            "--from-literal=multi=x\ny",
            "--save-config",
        ]);
        assert_eq!(out, format!("configmap/{cm} created\n"), "{kubectl}");
        let stored = get("configmap", &cm);
        assert_eq!(
            stored["data"],
            json!({"a": "b", "multi": "x\ny"}),
            "{kubectl}"
        );
        assert_eq!(stored["metadata"]["namespace"], "default");
        let applied: Value = serde_json::from_str(
            stored["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
                .as_str()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(applied["data"], stored["data"], "{kubectl}");
        assert!(stored.get("binaryData").is_none() && stored.get("immutable").is_none());

        let generic = format!("generic-{suffix}");
        let out = run(&[
            "create",
            "secret",
            "generic",
            &generic,
            "--from-literal=user=me",
            &format!("--from-file=bin={}", binary_file.display()),
            "--type=example.com/custom",
        ]);
        assert_eq!(out, format!("secret/{generic} created\n"), "{kubectl}");
        let stored = get("secret", &generic);
        assert_eq!(
            stored["data"],
            json!({"user": b64(b"me"), "bin": b64(&[0, 0xff, 1, b'\n'])}),
            "{kubectl}"
        );
        assert_eq!(stored["type"], "example.com/custom");

        let tls = format!("tls-{suffix}");
        run(&[
            "create",
            "secret",
            "tls",
            &tls,
            &format!("--cert={}", cert_file.display()),
            &format!("--key={}", key_file.display()),
        ]);
        let stored = get("secret", &tls);
        assert_eq!(stored["type"], "kubernetes.io/tls", "{kubectl}");
        assert_eq!(
            stored["data"],
            json!({"tls.crt": b64(cert_pem.as_bytes()), "tls.key": b64(key_pem.as_bytes())}),
            "{kubectl}"
        );

        let registry = format!("registry-{suffix}");
        run(&[
            "create",
            "secret",
            "docker-registry",
            &registry,
            "--docker-server=registry.example",
            "--docker-username=u",
            "--docker-password=p",
            "--docker-email=u@example.com",
        ]);
        let stored = get("secret", &registry);
        assert_eq!(
            stored["type"], "kubernetes.io/dockerconfigjson",
            "{kubectl}"
        );
        let config: Value =
            serde_json::from_slice(&unb64(&stored["data"][".dockerconfigjson"])).unwrap();
        assert_eq!(
            config["auths"]["registry.example"],
            json!({"username": "u", "password": "p", "email": "u@example.com", "auth": b64(b"u:p")}),
            "{kubectl}"
        );

        let namespace = format!("ns-{suffix}");
        let out = run(&["create", "namespace", &namespace]);
        assert_eq!(out, format!("namespace/{namespace} created\n"), "{kubectl}");
        let stored = get("namespace", &namespace);
        assert_eq!(
            stored["metadata"]["labels"],
            json!({"kubernetes.io/metadata.name": namespace})
        );
        assert_eq!(stored["spec"], json!({"finalizers": ["kubernetes"]}));
        assert_eq!(stored["status"], json!({"phase": "Active"}));

        let account = format!("sa-{suffix}");
        run(&["create", "serviceaccount", &account, "-n", &namespace]);
        let stored: Value = serde_json::from_str(&run(&[
            "get",
            "serviceaccount",
            &account,
            "-n",
            &namespace,
            "-o",
            "json",
        ]))
        .unwrap();
        assert_eq!(
            stored["metadata"]["namespace"],
            json!(namespace),
            "{kubectl}"
        );
        assert_eq!(stored["kind"], "ServiceAccount");

        // A duplicate gets the 409 Status (in protobuf for a protobuf client), printed as such.
        let duplicate =
            server.kubectl(kubectl, &["create", "configmap", &cm, "--from-literal=a=b"]);
        assert!(!duplicate.status.success());
        assert!(
            text(&duplicate).contains(&format!("configmaps \"{cm}\" already exists")),
            "{kubectl}: {}",
            text(&duplicate)
        );
    }

    // What went over the wire, read with protobuf types generated apart from genplane's codec
    // (k8s-pb): kubectl 1.33 sends protobuf and reads a protobuf answer; 1.27 sends JSON.
    let recorder = Recorder::start(&server, files.path());
    for (suffix, kubectl) in &kubectls {
        let name = format!("wire-{suffix}");
        ok(
            crate::support::kubectl_command(kubectl, &recorder.kubeconfig)
                .args(["create", "configmap", &name, "--from-literal=a=b"])
                .output()
                .unwrap(),
        );
        let post = recorder
            .exchanges()
            .into_iter()
            .rfind(|e| {
                e.method == "POST" && e.path.starts_with("/api/v1/namespaces/default/configmaps")
            })
            .expect("kubectl's create went through the proxy");
        assert_eq!(post.status, 201);
        if *suffix == "127" {
            assert_eq!(post.content_type, "application/json", "kubectl {suffix}");
            continue;
        }
        assert_eq!(post.content_type, PROTOBUF, "kubectl {suffix}");
        let sent: k8s_pb::api::core::v1::ConfigMap = unenvelope(&post.body, "ConfigMap");
        assert_eq!(
            sent.metadata.and_then(|m| m.name).as_deref(),
            Some(name.as_str())
        );
        assert_eq!(sent.data, [("a".to_owned(), "b".to_owned())].into());
        assert_eq!(post.answer_type, PROTOBUF, "kubectl {suffix}");
        let stored: k8s_pb::api::core::v1::ConfigMap = unenvelope(&post.answer, "ConfigMap");
        let meta = stored.metadata.unwrap();
        assert_eq!(
            (meta.name.as_deref(), meta.namespace.as_deref()),
            (Some(name.as_str()), Some("default"))
        );
        assert!(meta.uid.is_some() && meta.resource_version.is_some());
        assert_eq!(stored.data, [("a".to_owned(), "b".to_owned())].into());
    }
}

const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// The message in a `k8s\0` protobuf envelope (a `runtime.Unknown`) of `kind`, decoded with
/// k8s-pb's types.
fn unenvelope<M: prost::Message + Default>(bytes: &[u8], kind: &str) -> M {
    use prost::Message as _;
    let unknown = bytes
        .strip_prefix(b"k8s\0")
        .unwrap_or_else(|| panic!("no protobuf envelope: {bytes:?}"));
    let unknown = k8s_pb::apimachinery::pkg::runtime::Unknown::decode(unknown).unwrap();
    assert_eq!(
        unknown.type_meta.and_then(|t| t.kind).as_deref(),
        Some(kind)
    );
    M::decode(unknown.raw.unwrap_or_default().as_slice()).unwrap()
}

const CONFIGMAP_WITH_A_TYPO: &str = "apiVersion: v1
kind: ConfigMap
metadata:
  name: typo
datta:
  a: \"1\"
data:
  k: v
";

const CONFIGMAP: &str = "apiVersion: v1
kind: ConfigMap
metadata:
  name: applied
data:
  k: v
";

/// Whether the stored ConfigMap `name` has a `datta` field.
fn stored_has_typo(server: &Apiserver, kubectl: &str, name: &str) -> bool {
    let json = ok(server.kubectl(kubectl, &["get", "cm", name, "-o", "json"]));
    let object: serde_json::Value = serde_json::from_str(&json).unwrap();
    object.get("datta").is_some()
}

#[test]
fn kubectl_validates_applies_replaces_and_explains_through_openapi_v2_and_v3() {
    let server = start();
    let files = tempfile::tempdir().unwrap();
    let typo = files.path().join("typo.yaml");
    std::fs::write(&typo, CONFIGMAP_WITH_A_TYPO).unwrap();
    let typo = typo.to_str().unwrap();
    let applied = files.path().join("applied.yaml");
    std::fs::write(&applied, CONFIGMAP).unwrap();
    let applied = applied.to_str().unwrap();
    let replaced = files.path().join("replaced.yaml");
    std::fs::write(&replaced, CONFIGMAP.replace("k: v", "k: w")).unwrap();
    let replaced = replaced.to_str().unwrap();

    // kubectl 1.29 and later read OpenAPI v3; 1.27 and 1.28 read /openapi/v2 (protobuf only)
    // before validating or explaining, and find the fieldValidation parameter there.
    let kubectls = [
        kubectl_path("kubectl.1.33"),
        kubectl_path("kubectl.1.28"),
        kubectl_path("kubectl.1.27"),
    ];
    for kubectl in &kubectls {
        let kubectl = kubectl.to_str().unwrap();
        let version = ok(server.kubectl(kubectl, &["version", "--client", "-o", "json"]));
        let minor: u32 =
            serde_json::from_str::<serde_json::Value>(&version).unwrap()["clientVersion"]["minor"]
                .as_str()
                .unwrap()
                .trim_end_matches('+')
                .parse()
                .unwrap();
        if minor < 29 {
            // Before it validates, this kubectl downloads (and parses) the v2 document.
            let logged = server.kubectl(
                kubectl,
                &["create", "-f", applied, "--dry-run=server", "-v=6"],
            );
            assert!(logged.status.success(), "{kubectl}: {}", text(&logged));
            assert!(
                text(&logged).contains("/openapi/v2?timeout=32s 200 OK"),
                "{kubectl}: {}",
                text(&logged)
            );
        }

        // Without validation, the unknown field is dropped by the server.
        ok(server.kubectl(kubectl, &["create", "-f", typo, "--validate=false"]));
        assert!(!stored_has_typo(&server, kubectl, "typo"), "{kubectl}");
        ok(server.kubectl(kubectl, &["delete", "cm", "typo"]));

        // Default validation is strict and done by the server, which names the field.
        let refused = server.kubectl(kubectl, &["create", "-f", typo]);
        assert!(!refused.status.success(), "{kubectl}: {}", text(&refused));
        assert!(
            text(&refused).contains("strict decoding error: unknown field \"datta\""),
            "{kubectl}: {}",
            text(&refused)
        );
        let warned = server.kubectl(kubectl, &["create", "-f", typo, "--validate=warn"]);
        assert!(warned.status.success(), "{kubectl}: {}", text(&warned));
        assert!(
            text(&warned).contains("unknown field \"datta\""),
            "{kubectl}: {}",
            text(&warned)
        );
        assert!(!stored_has_typo(&server, kubectl, "typo"), "{kubectl}");
        ok(server.kubectl(kubectl, &["delete", "cm", "typo"]));

        // apply creates (recording the last-applied configuration); replace updates.
        let created = ok(server.kubectl(kubectl, &["apply", "-f", applied]));
        assert!(created.contains("configmap/applied created"), "{created}");
        let annotation = ok(server.kubectl(
            kubectl,
            &[
                "get",
                "cm",
                "applied",
                "-o",
                "jsonpath={.metadata.annotations.kubectl\\.kubernetes\\.io/last-applied-configuration}",
            ],
        ));
        assert!(
            annotation.contains("\"name\":\"applied\""),
            "{kubectl}: {annotation}"
        );
        let out = ok(server.kubectl(kubectl, &["replace", "-f", replaced]));
        assert!(out.contains("configmap/applied replaced"), "{out}");
        let data = ok(server.kubectl(
            kubectl,
            &["get", "cm", "applied", "-o", "jsonpath={.data.k}"],
        ));
        assert_eq!(data, "w", "{kubectl}");
        ok(server.kubectl(kubectl, &["delete", "cm", "applied"]));

        // explain renders the component schemas.
        let data = ok(server.kubectl(kubectl, &["explain", "configmap.data"]));
        assert!(data.contains("KIND:       ConfigMap"), "{kubectl}: {data}");
        assert!(
            data.contains("data <map[string]string>"),
            "{kubectl}: {data}"
        );
        assert!(
            data.contains("Data contains the configuration data"),
            "{kubectl}: {data}"
        );
        let spec = ok(server.kubectl(kubectl, &["explain", "lease.spec"]));
        assert!(
            spec.contains("GROUP:      coordination.k8s.io"),
            "{kubectl}: {spec}"
        );
        for field in ["holderIdentity", "leaseDurationSeconds", "renewTime"] {
            assert!(spec.contains(field), "{kubectl}: {spec}");
        }

        // The v2 document, read as protobuf and rendered by kubectl's v2 explain.
        let data = ok(server.kubectl(
            kubectl,
            &["explain", "configmap.data", "--output=plaintext-openapiv2"],
        ));
        assert!(
            data.contains("FIELD:    data <map[string]string>"),
            "{kubectl}: {data}"
        );
        assert!(
            data.contains("Data contains the configuration data"),
            "{kubectl}: {data}"
        );
        let spec = ok(server.kubectl(
            kubectl,
            &["explain", "lease.spec", "--output=plaintext-openapiv2"],
        ));
        assert!(
            spec.contains("VERSION:  coordination.k8s.io/v1"),
            "{kubectl}: {spec}"
        );
        assert!(
            spec.contains("LeaseSpec is a specification of a Lease."),
            "{kubectl}: {spec}"
        );
        for field in [
            "holderIdentity\t<string>",
            "leaseDurationSeconds\t<integer>",
            "renewTime\t<string>",
        ] {
            assert!(spec.contains(field), "{kubectl}: {spec}");
        }
    }
}

/// The server's start-up steps are post-start hooks, each a health check of upstream's form
/// once the server is ready: the library's own, in order, then `genplane apiserver`'s.
#[test]
fn readyz_lists_every_post_start_hook() {
    let server = crate::support::start_with(&["--feature-gates=NetworkRegistry=true"]);
    let raw = server.raw();
    for endpoint in ["/readyz?verbose", "/livez?verbose", "/healthz?verbose"] {
        let answer = raw.get(endpoint);
        assert_eq!(answer.status, 200, "{endpoint}: {}", answer.text());
        let hooks: Vec<String> = answer
            .text()
            .lines()
            .filter_map(|l| l.strip_prefix("[+]poststarthook/"))
            .map(|l| l.trim_end_matches(" ok").to_owned())
            .collect();
        assert_eq!(
            hooks,
            [
                "start-system-namespaces-controller",
                "start-cluster-authentication-info-controller",
                "rbac/bootstrap-roles",
                "start-apiextensions-controllers",
                "kube-apiserver-autoregistration",
                "apiservice-status-remote-available-controller",
                "priority-and-fairness-config-producer",
                "start-validating-admission-policy-status-controller",
                "start-kube-apiserver-identity-lease-controller",
                "start-feature-reporting",
                "start-network-registry-claim",
            ],
            "{endpoint}"
        );
    }
    // Upstream's default checks around the hooks, in upstream's order: ping, log, the storage's
    // check, informer-sync (readiness only), the hooks, and shutdown last (readiness only).
    let names = |endpoint: &str| -> Vec<String> {
        raw.get(endpoint)
            .text()
            .lines()
            .filter_map(|l| l.strip_prefix("[+]"))
            .map(|l| l.trim_end_matches(" ok").to_owned())
            .filter(|l| !l.starts_with("poststarthook/"))
            .collect()
    };
    assert_eq!(
        names("/readyz?verbose"),
        ["ping", "log", "storage", "informer-sync", "shutdown"]
    );
    assert_eq!(names("/livez?verbose"), ["ping", "log", "storage"]);
    assert_eq!(names("/healthz?verbose"), ["ping", "log", "storage"]);
    let ready = raw.get("/readyz?verbose").text();
    assert!(
        ready.ends_with("[+]shutdown ok\nreadyz check passed\n")
            && ready.starts_with("[+]ping ok\n[+]log ok\n"),
        "{ready}"
    );
    for check in ["log", "informer-sync", "storage"] {
        let one = raw.get(&format!("/readyz/{check}"));
        assert_eq!((one.status, one.text()), (200, "ok".to_owned()), "{check}");
    }
    let one = raw.get("/readyz/poststarthook/rbac/bootstrap-roles");
    assert_eq!((one.status, one.text()), (200, "ok".to_owned()));
}
