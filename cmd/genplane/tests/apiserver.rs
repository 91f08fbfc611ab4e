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
    let (code, body) = anonymous_get(server.port, &ca, "/api/v1/namespaces");
    assert_eq!(code, 401, "{body}");
    assert!(body.contains("\"reason\":\"Unauthorized\""), "{body}");
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

/// A kubectl of `version`, on the PATH as `kubectl.<version>` or next to the `kubectl` on the
/// PATH (where the Google Cloud SDK keeps its versioned kubectls).
#[allow(clippy::disallowed_methods)] // a test looks for a tool on the PATH, as a shell would
fn versioned_kubectl(version: &str) -> Option<PathBuf> {
    let name = format!("kubectl.{version}");
    let path = std::env::var_os("PATH")?;
    let dirs: Vec<PathBuf> = std::env::split_paths(&path).collect();
    let beside = dirs
        .iter()
        .filter_map(|d| std::fs::canonicalize(d.join("kubectl")).ok())
        .filter_map(|k| k.parent().map(Path::to_path_buf));
    dirs.iter()
        .cloned()
        .chain(beside)
        .map(|d| d.join(&name))
        .find(|k| k.is_file())
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

    let mut kubectls: Vec<(String, PathBuf)> = ["1.33", "1.27"]
        .into_iter()
        .filter_map(|v| versioned_kubectl(v).map(|k| (v.replace('.', ""), k)))
        .collect();
    if kubectls.is_empty() {
        kubectls.push(("plain".to_owned(), PathBuf::from("kubectl")));
    }
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
}
