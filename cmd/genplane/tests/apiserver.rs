//! `genplane apiserver` as a user runs it: the real binary on loopback, driven by the real
//! kubectl through the kubeconfig the server writes.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_genplane");

struct Apiserver {
    child: Child,
    dir: tempfile::TempDir,
    port: u16,
}

impl Drop for Apiserver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Apiserver {
    fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join("data/admin.kubeconfig")
    }

    fn kubectl(&self, kubectl: &str, args: &[&str]) -> Output {
        Command::new(kubectl)
            .arg("--kubeconfig")
            .arg(self.kubeconfig())
            .args(args)
            .output()
            .unwrap()
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn start() -> Apiserver {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let child = Command::new(BIN)
        .args([
            "apiserver",
            "--bind-address=127.0.0.1",
            &format!("--secure-port={port}"),
        ])
        .arg(format!("--data-dir={}", dir.path().join("data").display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let server = Apiserver { child, dir, port };
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if server.kubeconfig().exists()
            && server
                .kubectl("kubectl", &["get", "--raw", "/readyz"])
                .status
                .success()
        {
            return server;
        }
        assert!(
            Instant::now() < deadline,
            "the apiserver did not become ready"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn ok(output: Output) -> String {
    assert!(output.status.success(), "{}", text(&output));
    String::from_utf8(output.stdout).unwrap()
}

fn kubectl_binaries() -> Vec<&'static str> {
    ["kubectl", "kubectl.1.33", "kubectl.1.27"]
        .into_iter()
        .filter(|k| {
            Command::new(k)
                .arg("version")
                .arg("--client")
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .collect()
}

#[test]
fn kubectl_reads_and_writes_through_the_generated_kubeconfig() {
    let server = start();
    let kubectls = kubectl_binaries();
    assert!(!kubectls.is_empty(), "no kubectl on this machine");
    let manifest = server.dir.path().join("cm.yaml");
    std::fs::write(&manifest, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  labels:\n    app: web\ndata:\n  color: blue\n").unwrap();
    for kubectl in kubectls {
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
    use rustls::pki_types::pem::PemObject;
    use std::io::{Read, Write};
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(cert.unwrap()).unwrap();
    }
    let provider = std::sync::Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let mut connection = rustls::ClientConnection::new(std::sync::Arc::new(config), name).unwrap();
    let mut socket = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut tls = rustls::Stream::new(&mut connection, &mut socket);
    write!(
        tls,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = Vec::new();
    let _ = tls.read_to_end(&mut raw);
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    (
        head.split(' ').nth(1).unwrap().parse().unwrap(),
        body.to_owned(),
    )
}

#[test]
fn requests_without_a_client_certificate_are_unauthorized() {
    let server = start();
    let ca = server.dir.path().join("data/pki/ca.crt");
    for private in ["/api/v1/namespaces", "/openapi/v3", "/openapi/v3/api/v1"] {
        let (code, body) = anonymous_get(server.port, &ca, private);
        assert_eq!(code, 401, "{private}: {body}");
        assert!(body.contains("\"reason\":\"Unauthorized\""), "{body}");
    }
    for public in ["/version", "/readyz", "/livez?verbose", "/healthz"] {
        let (code, body) = anonymous_get(server.port, &ca, public);
        assert_eq!(code, 200, "{public}: {body}");
    }
}

#[test]
fn the_python_client_works() {
    let server = start();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python_client.py");
    let output = Command::new("python3")
        .arg(script)
        .arg(server.kubeconfig())
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", text(&output));
    assert!(String::from_utf8_lossy(&output.stdout).contains("python client ok"));
}

/// A versioned kubectl (`kubectl.1.33`): on the PATH, or beside the dispatcher `kubectl` the PATH
/// leads to (Google Cloud SDK installs them side by side).
#[allow(
    clippy::disallowed_methods,
    reason = "the test looks for kubectl binaries on the PATH"
)]
fn versioned_kubectl(name: &str) -> Option<PathBuf> {
    let runs = |path: &Path| {
        Command::new(path)
            .args(["version", "--client"])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if runs(Path::new(name)) {
        return Some(PathBuf::from(name));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .filter_map(|dir| std::fs::canonicalize(dir.join("kubectl")).ok())
        .filter_map(|kubectl| kubectl.parent().map(|dir| dir.join(name)))
        .find(|candidate| runs(candidate))
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
fn kubectl_validates_applies_replaces_and_explains_through_openapi_v3() {
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

    let kubectls: Vec<PathBuf> = ["kubectl.1.33", "kubectl.1.27"]
        .into_iter()
        .filter_map(versioned_kubectl)
        .collect();
    assert!(!kubectls.is_empty(), "no versioned kubectl on this machine");
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

        // Without validation, the unknown field is dropped by the server.
        ok(server.kubectl(kubectl, &["create", "-f", typo, "--validate=false"]));
        assert!(!stored_has_typo(&server, kubectl, "typo"), "{kubectl}");
        ok(server.kubectl(kubectl, &["delete", "cm", "typo"]));

        // kubectl before 1.29 reads /openapi/v2 (protobuf only) before validating or
        // explaining, which genplane does not serve; it works with validation off. From 1.29
        // on, OpenAPI v3 is enough.
        if minor < 29 {
            ok(server.kubectl(kubectl, &["create", "-f", applied, "--validate=false"]));
            ok(server.kubectl(kubectl, &["replace", "-f", replaced, "--validate=false"]));
            ok(server.kubectl(kubectl, &["delete", "cm", "applied"]));
            continue;
        }

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
    }
}
