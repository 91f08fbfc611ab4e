//! Encryption at rest with the real binary (`--encryption-provider-config`), on SQLite and on a
//! real etcd: what is stored is ciphertext in kube-apiserver's format, a key rotation keeps
//! everything readable and rewrites with the new key, a removed key makes its objects fail
//! with a 500 that says why, and an invalid file stops the apiserver with exit code 64.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::{Apiserver, BIN, ok, start_in, stop, text};
use genplane_storage::Storage as _;
use genplane_storage_etcd::EtcdStore;
use genplane_storage_etcd::testing::EtcdServer;

/// Two AES-256 keys, base64.
const KEY1: &str = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";
const KEY2: &str = "ZmVkY2JhOTg3NjU0MzIxMGZlZGNiYTk4NzY1NDMyMTA=";

/// What the secret and the config map hold; it must never appear in the store.
const SECRET_TEXT: &str = "correct-horse-battery-staple";
const CONFIG_TEXT: &str = "visible-only-through-the-api";

/// Where the raw values live.
enum Raw<'a> {
    Sqlite(PathBuf),
    Etcd(&'a EtcdServer, &'static str),
}

impl Raw<'_> {
    /// The stored value of `key`, as the backend holds it.
    fn get(&self, key: &str) -> Vec<u8> {
        match self {
            Raw::Sqlite(path) => {
                let db = rusqlite::Connection::open_with_flags(
                    path,
                    rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
                )
                .unwrap();
                db.query_row(
                    "SELECT value FROM kv WHERE key = ?1 ORDER BY revision DESC LIMIT 1",
                    [key.as_bytes()],
                    |row| row.get(0),
                )
                .unwrap()
            }
            Raw::Etcd(etcd, prefix) => {
                let runtime = tokio::runtime::Runtime::new().unwrap();
                runtime.block_on(async {
                    let mut config = etcd.config();
                    config.prefix = (*prefix).to_owned();
                    let store = EtcdStore::connect(&config).await.unwrap();
                    store.get(key, None).await.unwrap().unwrap().value.to_vec()
                })
            }
        }
    }

    /// Every byte the backend keeps on disk, for a search of plaintext (SQLite only).
    fn files(&self) -> Vec<u8> {
        let Raw::Sqlite(path) = self else {
            return Vec::new();
        };
        let mut all = Vec::new();
        for suffix in ["", "-wal"] {
            let file = PathBuf::from(format!("{}{suffix}", path.display()));
            if let Ok(bytes) = std::fs::read(file) {
                all.extend(bytes);
            }
        }
        all
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

fn b64(text: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(text)
}

/// Asserts that `value` is sealed with aesgcm under `key` and holds no plaintext.
fn assert_sealed(value: &[u8], key: &str) {
    let prefix = format!("k8s:enc:aesgcm:v1:{key}:");
    assert!(
        value.starts_with(prefix.as_bytes()),
        "expected {prefix}, got {:?}",
        String::from_utf8_lossy(&value[..value.len().min(40)])
    );
    for plain in [
        SECRET_TEXT.as_bytes(),
        b64(SECRET_TEXT).as_bytes(),
        CONFIG_TEXT.as_bytes(),
        b"\"kind\"",
    ] {
        assert!(!contains(value, plain), "plaintext at rest");
    }
}

/// An encryption configuration for secrets and configmaps: aesgcm with `keys` (name, secret)
/// in order, then identity.
fn write_config(dir: &Path, file: &str, keys: &[(&str, &str)]) -> PathBuf {
    let keys: String = keys
        .iter()
        .map(|(name, secret)| {
            format!("            - name: {name}\n              secret: {secret}\n")
        })
        .collect();
    let path = dir.join(file);
    std::fs::write(
        &path,
        format!(
            "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n  - resources:\n      - secrets\n      - configmaps\n    providers:\n      - aesgcm:\n          keys:\n{keys}      - identity: {{}}\n"
        ),
    )
    .unwrap();
    path
}

fn kubectl(server: &Apiserver, args: &[&str]) -> String {
    ok(server.kubectl("kubectl", args))
}

/// The whole life of encrypted data on one backend: write, rotate, drop the old key.
fn encryption_lifecycle(dir: tempfile::TempDir, backend: &[String], raw: &Raw<'_>) {
    let with = |config: &Path| -> Vec<String> {
        let mut flags = backend.to_vec();
        flags.push(format!("--encryption-provider-config={}", config.display()));
        flags
    };
    let start_in = |dir, flags: Vec<String>| {
        let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
        start_in(dir, &flags)
    };
    let first = write_config(dir.path(), "key1.yaml", &[("key1", KEY1)]);
    let rotated = write_config(
        dir.path(),
        "key2-key1.yaml",
        &[("key2", KEY2), ("key1", KEY1)],
    );
    let only_new = write_config(dir.path(), "key2.yaml", &[("key2", KEY2)]);

    // 1. Written with key1: the store holds ciphertext only.
    let server = start_in(dir, with(&first));
    kubectl(
        &server,
        &[
            "create",
            "secret",
            "generic",
            "s1",
            &format!("--from-literal=password={SECRET_TEXT}"),
        ],
    );
    kubectl(
        &server,
        &[
            "create",
            "configmap",
            "c1",
            &format!("--from-literal=k={CONFIG_TEXT}"),
        ],
    );
    assert_sealed(&raw.get("/registry/secrets/default/s1"), "key1");
    assert_sealed(&raw.get("/registry/configmaps/default/c1"), "key1");
    let namespace = raw.get("/registry/namespaces/default");
    assert!(
        namespace.starts_with(b"{"),
        "namespaces are not listed: stored plain"
    );
    let files = raw.files();
    assert!(
        !contains(&files, SECRET_TEXT.as_bytes()) && !contains(&files, b64(SECRET_TEXT).as_bytes())
    );
    assert!(!contains(&files, CONFIG_TEXT.as_bytes()));
    assert_eq!(
        kubectl(
            &server,
            &["get", "secret", "s1", "-o", "jsonpath={.data.password}"]
        ),
        b64(SECRET_TEXT)
    );

    // 2. Rotation: key2 first, key1 still listed. Everything reads; a rewrite uses key2.
    let server = start_in(stop(server), with(&rotated));
    assert_eq!(
        kubectl(
            &server,
            &["get", "secret", "s1", "-o", "jsonpath={.data.password}"]
        ),
        b64(SECRET_TEXT)
    );
    assert_eq!(
        kubectl(
            &server,
            &["get", "configmap", "c1", "-o", "jsonpath={.data.k}"]
        ),
        CONFIG_TEXT
    );
    let listed = kubectl(&server, &["get", "secrets", "-o", "name"]);
    assert!(listed.contains("secret/s1"), "{listed}");
    kubectl(&server, &["label", "secret", "s1", "rotated=yes"]);
    assert_sealed(&raw.get("/registry/secrets/default/s1"), "key2");
    assert_sealed(&raw.get("/registry/configmaps/default/c1"), "key1");
    // Over HTTP as well as through kubectl's typed reads.
    let secret: serde_json::Value = serde_json::from_str(&kubectl(
        &server,
        &["get", "--raw", "/api/v1/namespaces/default/secrets/s1"],
    ))
    .unwrap();
    assert_eq!(secret["metadata"]["labels"]["rotated"], "yes");

    // 3. key1 removed: what key2 sealed reads, what only key1 sealed fails with a clear 500.
    let server = start_in(stop(server), with(&only_new));
    assert_eq!(
        kubectl(
            &server,
            &["get", "secret", "s1", "-o", "jsonpath={.data.password}"]
        ),
        b64(SECRET_TEXT)
    );
    let failed = server.kubectl("kubectl", &["get", "configmap", "c1", "-o", "json"]);
    assert!(!failed.status.success());
    let message = text(&failed);
    assert!(
        message.contains("Error from server (InternalError)"),
        "{message}"
    );
    assert!(
        message.contains("Key: /registry/configmaps/default/c1")
            && message.contains("no matching key was found for the provided AES transformer"),
        "{message}"
    );
    let raw_get = server.kubectl(
        "kubectl",
        &[
            "get",
            "--raw",
            "/api/v1/namespaces/default/configmaps/c1",
            "-v=6",
        ],
    );
    assert!(!raw_get.status.success());
    assert!(
        text(&raw_get).contains("500 Internal Server Error"),
        "{}",
        text(&raw_get)
    );
    // Nothing was rewritten by the failed reads.
    assert_sealed(&raw.get("/registry/configmaps/default/c1"), "key1");
    drop(server);
}

#[test]
fn secrets_and_configmaps_are_encrypted_at_rest_and_rotate_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let raw = Raw::Sqlite(dir.path().join("data/genplane.db"));
    encryption_lifecycle(dir, &[], &raw);
}

#[test]
fn secrets_and_configmaps_are_encrypted_at_rest_and_rotate_on_etcd() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let etcd = crate::support::etcd(&runtime);
    let flags = [
        "--storage-backend=etcd".to_owned(),
        format!("--etcd-servers={}", etcd.endpoint()),
        "--etcd-prefix=/encrypted".to_owned(),
    ];
    encryption_lifecycle(
        tempfile::tempdir().unwrap(),
        &flags,
        &Raw::Etcd(&etcd, "/encrypted"),
    );
    drop(etcd);
}

#[test]
fn an_invalid_encryption_config_stops_the_apiserver_with_exit_code_64() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("bad.yaml");
    std::fs::write(
        &config,
        "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n  - resources: [secrets]\n    providers:\n      - aesgcm:\n          keys:\n            - name: key1\n              secret: c2hvcnQ=\n      - kms:\n          apiVersion: v2\n          name: plugin\n          endpoint: unix:///tmp/kms.sock\n",
    )
    .unwrap();
    let output = Command::new(BIN)
        .args(["apiserver", "--bind-address=127.0.0.1", "--secure-port=0"])
        .arg(format!("--data-dir={}", dir.path().join("data").display()))
        .arg(format!("--encryption-provider-config={}", config.display()))
        .output()
        .unwrap();
    let message = text(&output);
    assert_eq!(output.status.code(), Some(64), "{message}");
    for expected in [
        "encryption-provider-config",
        "resources[0].providers[0].aesgcm.keys[0].secret: Invalid value: \"REDACTED\": secret is not of the expected length, got 5, expected one of [16 24 32]",
        "resources[0].providers[1].kms: Forbidden: the kms provider is not supported",
    ] {
        assert!(message.contains(expected), "{expected}\nnot in\n{message}");
    }
    assert!(!dir.path().join("data").exists(), "nothing was started");

    // A missing file is as invalid as a wrong one.
    let output = Command::new(BIN)
        .args(["apiserver", "--config-check"])
        .arg(format!(
            "--encryption-provider-config={}",
            dir.path().join("missing.yaml").display()
        ))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(64), "{}", text(&output));
    assert!(text(&output).contains("error reading encryption provider configuration file"));
}
