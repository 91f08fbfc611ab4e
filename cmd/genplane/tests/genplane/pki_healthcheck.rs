//! The two applets the container images and the Compose cluster are built on: `genplane pki`
//! makes a data directory ahead of time that `genplane apiserver` then serves with, keeping
//! every file, and prints a kubeconfig kubectl works with; `genplane healthcheck` probes the
//! server as the images' HEALTHCHECK does, with the exit codes Docker reads.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use crate::support::{self, BIN, kubectl_command, ok, text};

fn genplane(args: &[&str]) -> std::process::Output {
    Command::new(BIN).args(args).output().unwrap()
}

/// Every file of `dir` with its contents.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read(&p).unwrap(),
            )
        })
        .collect()
}

#[test]
fn an_api_server_serves_with_the_pki_made_ahead_and_the_healthcheck_probes_it() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let data_dir = format!("--data-dir={}", data.display());
    let made = ok(genplane(&[
        "pki",
        &data_dir,
        "--apiserver-cert-extra-sans=apiserver-1,10.1.2.3",
        "--server=https://kubernetes:6443",
    ]));
    assert!(made.contains("made "), "{made}");
    let before = files(&data.join("pki"));
    for file in ["ca.crt", "ca.key", "sa.key", "apiserver.crt", "admin.key"] {
        assert!(before.contains_key(file), "{file}: {:?}", before.keys());
    }

    // The API server finds everything there: nothing is made again, not even its serving
    // certificate (it names 127.0.0.1, which the server is bound to).
    let server = support::start_in(dir, &[]);
    assert_eq!(files(&server.data().join("pki")), before);
    let url = format!("https://127.0.0.1:{}", server.port);

    // The admin's kubeconfig printed for this server (and one that is not there): kubectl
    // trusts the server's certificate with it and is the admin.
    let printed = genplane(&[
        "pki",
        &data_dir,
        &format!("--server={url}"),
        "--server=https://127.0.0.1:1",
        "--print-kubeconfig=admin",
    ]);
    let kubeconfig = ok(printed.clone());
    assert!(
        String::from_utf8_lossy(&printed.stderr).trim().is_empty(),
        "nothing was made, so nothing is reported: {}",
        text(&printed)
    );
    let path = server.dir.path().join("printed.kubeconfig");
    std::fs::write(&path, kubeconfig).unwrap();
    let namespaces = ok(kubectl_command("kubectl", &path)
        .args(["get", "namespace", "kube-system", "-o", "name"])
        .output()
        .unwrap());
    assert_eq!(namespaces.trim(), "namespace/kube-system");
    let can_i = ok(kubectl_command("kubectl", &path)
        .args(["auth", "can-i", "*", "*"])
        .output()
        .unwrap());
    assert_eq!(can_i.trim(), "yes");
    let second = kubectl_command("kubectl", &path)
        .args(["--context=genplane-2", "get", "namespaces"])
        .output()
        .unwrap();
    assert!(!second.status.success(), "{}", text(&second));

    // The health check: 0 and the answer when ready; 1 with the reason otherwise (the API
    // server's /metrics is not public); 2 for a bad command line.
    let ready = ok(genplane(&["healthcheck", &format!("{url}/readyz")]));
    assert_eq!(ready, "200 OK\nok\n");
    let forbidden = genplane(&["healthcheck", &format!("{url}/metrics")]);
    assert_eq!(forbidden.status.code(), Some(1), "{}", text(&forbidden));
    assert!(
        text(&forbidden).contains("403 Forbidden"),
        "{}",
        text(&forbidden)
    );
    let plain = genplane(&[
        "healthcheck",
        "--timeout=2s",
        &format!("http://127.0.0.1:{}/readyz", server.port),
    ]);
    assert_eq!(plain.status.code(), Some(1), "{}", text(&plain));
    assert_eq!(genplane(&["healthcheck"]).status.code(), Some(2));
    let bad = genplane(&["healthcheck", "127.0.0.1/readyz"]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        text(&bad).contains("is not an http:// or https:// URL"),
        "{}",
        text(&bad)
    );
}

#[test]
fn pki_refuses_bad_input_with_usage_errors() {
    for args in [
        &["pki", "--server=http://x:6443"][..],
        &["pki", "--kubeconfigs=kubelet"],
        &["pki", "--print-kubeconfig=admin", "--kubeconfigs=admin"],
    ] {
        let out = genplane(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
    }
}
