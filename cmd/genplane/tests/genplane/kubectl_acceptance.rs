//! The kubectl acceptance script (`kubectl-acceptance.sh`) against the real binary, once per
//! kubectl version the tracker requires (1.33 and 1.27), and once on etcd.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Command;

use crate::support::{kubectl_path, start_with};

/// A self-signed certificate and its key, PEM, for `kubectl create secret tls`.
fn tls_pair(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["acceptance.example".to_owned()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    let (cert_path, key_path) = (dir.join("tls.crt"), dir.join("tls.key"));
    std::fs::write(&cert_path, cert.pem()).unwrap();
    std::fs::write(&key_path, key.serialize_pem()).unwrap();
    (cert_path, key_path)
}

fn accept(name: &str, flags: &[&str]) {
    let kubectl = kubectl_path(name);
    let kubectl = kubectl.display();
    let server = start_with(flags);
    let work = server.dir.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let (cert, key) = tls_pair(&work);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/genplane/kubectl-acceptance.sh");
    let output = Command::new("bash")
        .arg(script)
        .env("KUBECTL", kubectl.to_string())
        .env("KUBECONFIG", server.kubeconfig())
        .env("WORK", &work)
        .env("TLS_CERT", cert)
        .env("TLS_KEY", key)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the acceptance script failed with {kubectl}:\n{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains(&format!("kubectl acceptance passed with {kubectl}")),
        "{stdout}"
    );
}

#[test]
fn kubectl_1_33_acceptance() {
    accept("kubectl.1.33", &[]);
}

#[test]
fn kubectl_1_27_acceptance() {
    accept("kubectl.1.27", &[]);
}

#[test]
fn kubectl_1_33_acceptance_on_etcd() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let etcd = crate::support::etcd(&runtime);
    let servers = format!("--etcd-servers={}", etcd.endpoint());
    accept(
        "kubectl.1.33",
        &[
            "--storage-backend=etcd",
            &servers,
            "--etcd-prefix=/acceptance",
        ],
    );
    drop(etcd);
}
