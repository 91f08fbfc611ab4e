//! The user story of CertificateSigningRequests, black box, on `genplane all-in-one` with
//! openssl and kubectl 1.33 and 1.27: a key and a request made with openssl, submitted by a
//! user allowed to create requests, refused approval for that user, approved by the admin with
//! `kubectl certificate approve`, issued by `csrsigning` at once, fetched from
//! `status.certificate` and used as a client certificate: the API server knows its subject
//! and groups, RBAC applies to them, and it expires after the requested duration. The signer
//! refuses what upstream refuses with a `Failed` condition.
//!
//! ClusterTrustBundles (`certificates.k8s.io/v1beta1`), as kube-apiserver 1.33 serves them:
//! absent by default, served with the `ClusterTrustBundle` feature gate and the group version
//! enabled, created, listed and read with kubectl's table, refused with upstream's messages
//! when malformed, and created for a signer only by users allowed to `attest` for it.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use crate::support::{BIN, Process, eventually, kubectl_command, kubectl_path, ok, text};

fn openssl(dir: &Path, args: &[&str]) {
    let output = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "openssl {args:?}: {}",
        text(&output)
    );
}

/// A kubeconfig in `dir` for `server` (trusting `ca`) authenticating with `cert` and `key`.
fn kubeconfig(dir: &Path, name: &str, server: &str, ca: &Path, cert: &Path, key: &Path) -> PathBuf {
    let path = dir.join(format!("{name}.kubeconfig"));
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {server}\n    certificate-authority: {}\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: {name}\ncurrent-context: c\nusers:\n- name: {name}\n  user:\n    client-certificate: {}\n    client-key: {}\n",
            ca.display(),
            cert.display(),
            key.display()
        ),
    )
    .unwrap();
    path
}

struct Cluster {
    _process: Process,
    dir: tempfile::TempDir,
    admin: PathBuf,
    server: String,
}

impl Cluster {
    fn start() -> Self {
        Self::start_with(&[])
    }

    /// `genplane all-in-one` with the flags `extra` besides its defaults.
    fn start_with(extra: &[&str]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut command = Command::new(BIN);
        command
            .args(["all-in-one", "--bind-address=127.0.0.1", "--secure-port=0"])
            .arg(format!("--data-dir={}", dir.path().join("data").display()))
            .args(extra);
        let mut process = Process::spawn("all-in-one", command, &dir.path().join("all-in-one.log"));
        let admin = process.wait_for("the export KUBECONFIG line", |p| {
            p.output()
                .lines()
                .find_map(|line| line.strip_prefix("export KUBECONFIG=").map(PathBuf::from))
        });
        let server = ok(kubectl_command("kubectl", &admin)
            .args([
                "config",
                "view",
                "-o",
                "jsonpath={.clusters[0].cluster.server}",
            ])
            .output()
            .unwrap());
        Self {
            _process: process,
            dir,
            admin,
            server,
        }
    }

    fn pki(&self, file: &str) -> PathBuf {
        self.dir.path().join("data/pki").join(file)
    }

    fn kubectl(&self, kubectl: &Path, kubeconfig: &Path, args: &[&str]) -> Output {
        kubectl_command(kubectl, kubeconfig)
            .args(args)
            .output()
            .unwrap()
    }

    fn admin(&self, kubectl: &Path, args: &[&str]) -> String {
        ok(self.kubectl(kubectl, &self.admin, args))
    }

    /// A user `name` in `org` with a certificate signed by the cluster's CA (as an operator
    /// with the CA's key hands them out), and its kubeconfig.
    fn user(&self, name: &str, org: &str) -> PathBuf {
        let dir = self.dir.path();
        openssl(
            dir,
            &[
                "req",
                "-new",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-nodes",
                "-keyout",
                &format!("{name}.key"),
                "-out",
                &format!("{name}.csr"),
                "-subj",
                &format!("/CN={name}/O={org}"),
            ],
        );
        // A version 3 certificate: webpki, which verifies client certificates here, takes no
        // version 1 one, which `openssl x509 -req` makes without extensions.
        std::fs::write(dir.join("client.ext"), "extendedKeyUsage=clientAuth\n").unwrap();
        openssl(
            dir,
            &[
                "x509",
                "-req",
                "-extfile",
                "client.ext",
                "-in",
                &format!("{name}.csr"),
                "-CA",
                &self.pki("ca.crt").display().to_string(),
                "-CAkey",
                &self.pki("ca.key").display().to_string(),
                "-CAcreateserial",
                "-days",
                "1",
                "-out",
                &format!("{name}.crt"),
            ],
        );
        kubeconfig(
            dir,
            name,
            &self.server,
            &self.pki("ca.crt"),
            &dir.join(format!("{name}.crt")),
            &dir.join(format!("{name}.key")),
        )
    }

    fn apply(&self, kubectl: &Path, kubeconfig: &Path, yaml: &str) -> Output {
        let path = self.dir.path().join("object.yaml");
        std::fs::write(&path, yaml).unwrap();
        self.kubectl(
            kubectl,
            kubeconfig,
            &["create", "-f", &path.display().to_string()],
        )
    }
}

fn csr_yaml(name: &str, request: &[u8], usages: &[&str], seconds: u32) -> String {
    use base64::Engine as _;
    format!(
        "apiVersion: certificates.k8s.io/v1\nkind: CertificateSigningRequest\nmetadata:\n  name: {name}\nspec:\n  request: {}\n  signerName: kubernetes.io/kube-apiserver-client\n  expirationSeconds: {seconds}\n  usages: [{}]\n",
        base64::engine::general_purpose::STANDARD.encode(request),
        usages
            .iter()
            .map(|u| format!("\"{u}\""))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

#[test]
fn a_requested_client_certificate_logs_in_with_its_subject_and_groups() {
    let cluster = Cluster::start();
    let dir = cluster.dir.path().to_owned();
    let latest = kubectl_path("kubectl.1.33");
    // The requester may create and read requests, and (by RBAC) write their approval: only
    // the CertificateApproval admission plugin stands in the way.
    let requester = cluster.user("requester", "requesters");
    cluster.admin(
        &latest,
        &[
            "create",
            "clusterrole",
            "csr-requester",
            "--verb=create,get,list,watch",
            "--resource=certificatesigningrequests.certificates.k8s.io",
        ],
    );
    cluster.admin(
        &latest,
        &[
            "create",
            "clusterrole",
            "csr-approval-writer",
            "--verb=update",
            "--resource=certificatesigningrequests.certificates.k8s.io/approval",
        ],
    );
    for role in ["csr-requester", "csr-approval-writer"] {
        cluster.admin(
            &latest,
            &[
                "create",
                "clusterrolebinding",
                role,
                &format!("--clusterrole={role}"),
                "--group=requesters",
            ],
        );
    }
    // What the groups of the issued certificates may do.
    cluster.admin(
        &latest,
        &[
            "create",
            "clusterrole",
            "cm-reader",
            "--verb=list",
            "--resource=configmaps",
        ],
    );
    cluster.admin(
        &latest,
        &[
            "create",
            "clusterrolebinding",
            "cm-reader",
            "--clusterrole=cm-reader",
            "--group=readers",
        ],
    );

    for version in ["1.33", "1.27"] {
        let kubectl = kubectl_path(&format!("kubectl.{version}"));
        let user = format!("alice-{}", version.replace('.', ""));
        openssl(
            &dir,
            &[
                "req",
                "-new",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-keyout",
                &format!("{user}.key"),
                "-out",
                &format!("{user}.csr"),
                "-subj",
                &format!("/CN={user}/O=readers/O=dev"),
            ],
        );
        let request = std::fs::read(dir.join(format!("{user}.csr"))).unwrap();
        ok(cluster.apply(
            &kubectl,
            &requester,
            &csr_yaml(&user, &request, &["client auth", "digital signature"], 3600),
        ));

        // Pending, recorded as the requester's.
        let table = ok(cluster.kubectl(&kubectl, &requester, &["get", "csr", &user]));
        let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
        assert_eq!(
            header,
            [
                "NAME",
                "AGE",
                "SIGNERNAME",
                "REQUESTOR",
                "REQUESTEDDURATION",
                "CONDITION"
            ],
            "{version}: {table}"
        );
        let row: Vec<&str> = table.lines().nth(1).unwrap().split_whitespace().collect();
        assert_eq!(
            (row[0], row[2], row[3], row[4], row[5]),
            (
                user.as_str(),
                "kubernetes.io/kube-apiserver-client",
                "requester",
                "60m",
                "Pending"
            ),
            "{version}: {table}"
        );

        // The requester may not approve it.
        let refused = cluster.kubectl(&kubectl, &requester, &["certificate", "approve", &user]);
        assert!(!refused.status.success(), "{version}: {}", text(&refused));
        assert!(
            text(&refused).contains(
                "user not permitted to approve requests with signerName \"kubernetes.io/kube-apiserver-client\""
            ),
            "{version}: {}",
            text(&refused)
        );

        // The admin approves; the certificate is issued at once.
        cluster.admin(&kubectl, &["certificate", "approve", &user]);
        let approved = Instant::now();
        let encoded = eventually(&format!("{version}: the certificate of {user}"), || {
            let out = ok(cluster.kubectl(
                &kubectl,
                &requester,
                &["get", "csr", &user, "-o", "jsonpath={.status.certificate}"],
            ));
            (!out.is_empty()).then_some(out)
        });
        let waited = approved.elapsed();
        assert!(
            waited < Duration::from_secs(2),
            "{version}: issued {waited:?} after the approval"
        );
        let table = ok(cluster.kubectl(&kubectl, &requester, &["get", "csr", &user]));
        assert!(table.contains("Approved,Issued"), "{version}: {table}");
        use base64::Engine as _;
        let certificate = base64::engine::general_purpose::STANDARD
            .decode(encoded.trim())
            .unwrap();
        let cert_path = dir.join(format!("{user}.crt"));
        std::fs::write(&cert_path, certificate).unwrap();

        // It expires after the requested hour: valid for 3590 s more, not for 3660 s.
        let ends = |seconds: &str| {
            Command::new("openssl")
                .args(["x509", "-noout", "-checkend", seconds, "-in"])
                .arg(&cert_path)
                .status()
                .unwrap()
                .success()
        };
        assert!(
            ends("3590") && !ends("3660"),
            "{version}: NotAfter is not an hour on"
        );

        // It logs in as its subject, with its organizations as groups; RBAC applies.
        let as_user = kubeconfig(
            &dir,
            &user,
            &cluster.server,
            &cluster.pki("ca.crt"),
            &cert_path,
            &dir.join(format!("{user}.key")),
        );
        ok(cluster.kubectl(&kubectl, &as_user, &["get", "configmaps", "-A"]));
        let forbidden = cluster.kubectl(&kubectl, &as_user, &["get", "secrets", "-A"]);
        assert!(
            text(&forbidden).contains(&format!("User \"{user}\" cannot list resource \"secrets\"")),
            "{version}: {}",
            text(&forbidden)
        );
        if version == "1.33" {
            let whoami: serde_json::Value = serde_json::from_str(&ok(cluster.kubectl(
                &kubectl,
                &as_user,
                &["auth", "whoami", "-o", "json"],
            )))
            .unwrap();
            assert_eq!(whoami["status"]["userInfo"]["username"], user.as_str());
            assert_eq!(
                whoami["status"]["userInfo"]["groups"],
                serde_json::json!(["readers", "dev", "system:authenticated"])
            );
        }
    }

    // The signer refuses usages a client certificate may not have: Failed, with upstream's
    // reason and message.
    openssl(
        &dir,
        &[
            "req",
            "-new",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
            "-subj",
            "/CN=server",
        ],
    );
    let request = std::fs::read(dir.join("server.csr")).unwrap();
    ok(cluster.apply(
        &latest,
        &requester,
        &csr_yaml("server", &request, &["client auth", "server auth"], 3600),
    ));
    cluster.admin(&latest, &["certificate", "approve", "server"]);
    let failed = eventually("the refusal of server", || {
        let out = cluster.admin(
            &latest,
            &[
                "get", "csr", "server", "-o",
                "jsonpath={.status.conditions[?(@.type==\"Failed\")].reason}/{.status.conditions[?(@.type==\"Failed\")].message}",
            ],
        );
        (!out.is_empty() && out != "/").then_some(out)
    });
    assert_eq!(
        failed,
        "SignerValidationFailure/invalid usage for client certificate: server auth"
    );
    let table = cluster.admin(&latest, &["get", "csr", "server"]);
    assert!(table.contains("Approved,Failed"), "{table}");
    assert!(
        cluster
            .admin(
                &latest,
                &[
                    "get",
                    "csr",
                    "server",
                    "-o",
                    "jsonpath={.status.certificate}"
                ]
            )
            .is_empty()
    );

    // No request names system:masters for the client signer.
    openssl(
        &dir,
        &[
            "req",
            "-new",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "root.key",
            "-out",
            "root.csr",
            "-subj",
            "/CN=root/O=system:masters",
        ],
    );
    let request = std::fs::read(dir.join("root.csr")).unwrap();
    let refused = cluster.apply(
        &latest,
        &cluster.admin,
        &csr_yaml("root", &request, &["client auth"], 3600),
    );
    assert!(
        text(&refused).contains(
            "use of kubernetes.io/kube-apiserver-client signer with system:masters group is not allowed"
        ),
        "{}",
        text(&refused)
    );
}

/// The flags that serve ClusterTrustBundles, as kube-apiserver 1.33 needs them.
const TRUST_BUNDLE_FLAGS: [&str; 2] = [
    "--feature-gates=ClusterTrustBundle=true",
    "--runtime-config=certificates.k8s.io/v1beta1=true",
];

/// A ClusterTrustBundle `name` of `signer` (none: a bundle of no signer) holding `pem`, in YAML.
pub(crate) fn trust_bundle_yaml(name: &str, signer: Option<&str>, pem: &str) -> String {
    let signer = signer.map_or_else(String::new, |s| format!("  signerName: {s}\n"));
    let indented: String = pem.lines().map(|line| format!("    {line}\n")).collect();
    format!(
        "apiVersion: certificates.k8s.io/v1beta1\nkind: ClusterTrustBundle\nmetadata:\n  name: {name}\nspec:\n{signer}  trustBundle: |\n{indented}"
    )
}

#[test]
fn cluster_trust_bundles_are_off_by_default_and_attested_for_their_signer() {
    let latest = kubectl_path("kubectl.1.33");
    // Absent by default, and with only one of the two switches.
    for flags in [&[][..], &TRUST_BUNDLE_FLAGS[..1], &TRUST_BUNDLE_FLAGS[1..]] {
        let cluster = Cluster::start_with(flags);
        let resources = cluster.admin(
            &latest,
            &[
                "api-resources",
                "--api-group=certificates.k8s.io",
                "-o",
                "name",
            ],
        );
        assert_eq!(
            resources.trim(),
            "certificatesigningrequests.certificates.k8s.io",
            "{flags:?}"
        );
        let out = cluster.kubectl(&latest, &cluster.admin, &["get", "clustertrustbundles"]);
        assert!(
            text(&out).contains("the server doesn't have a resource type \"clustertrustbundles\""),
            "{flags:?}: {}",
            text(&out)
        );
    }

    let cluster = Cluster::start_with(&TRUST_BUNDLE_FLAGS);
    let resources = cluster.admin(
        &latest,
        &[
            "api-resources",
            "--api-group=certificates.k8s.io",
            "-o",
            "wide",
        ],
    );
    let listed = resources
        .lines()
        .find(|line| line.starts_with("clustertrustbundles "))
        .unwrap_or_else(|| panic!("{resources}"));
    let columns: Vec<&str> = listed.split_whitespace().collect();
    assert_eq!(
        columns[..4],
        [
            "clustertrustbundles",
            "certificates.k8s.io/v1beta1",
            "false",
            "ClusterTrustBundle"
        ],
        "{resources}"
    );

    // A publisher may write bundles (RBAC), but attest only for what it is granted.
    let publisher = cluster.user("publisher", "trust-publishers");
    cluster.admin(
        &latest,
        &[
            "create",
            "clusterrole",
            "trust-bundle-writer",
            "--verb=create,get,list,watch,update,patch",
            "--resource=clustertrustbundles.certificates.k8s.io",
        ],
    );
    cluster.admin(
        &latest,
        &[
            "create",
            "clusterrolebinding",
            "trust-bundle-writer",
            "--clusterrole=trust-bundle-writer",
            "--group=trust-publishers",
        ],
    );
    let ca = std::fs::read_to_string(cluster.pki("ca.crt")).unwrap();
    let front_proxy_ca = std::fs::read_to_string(cluster.pki("front-proxy-ca.crt")).unwrap();

    // Without a signer name, nothing to attest.
    ok(cluster.apply(
        &latest,
        &publisher,
        &trust_bundle_yaml("cluster-roots", None, &format!("{ca}{front_proxy_ca}")),
    ));
    // For a signer: refused without attest, with upstream's words.
    let signed = trust_bundle_yaml(
        "example.com:publisher:v1",
        Some("example.com/publisher"),
        &ca,
    );
    let refused = cluster.apply(&latest, &publisher, &signed);
    assert!(!refused.status.success(), "{}", text(&refused));
    assert!(
        text(&refused).contains(
            "clustertrustbundles.certificates.k8s.io \"example.com:publisher:v1\" is forbidden: user not permitted to attest for signerName \"example.com/publisher\""
        ),
        "{}",
        text(&refused)
    );
    // Granted attest on that signer, and on another signer's domain: allowed.
    ok(cluster.apply(
        &latest,
        &cluster.admin,
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: attester\nrules:\n- apiGroups: [certificates.k8s.io]\n  resources: [signers]\n  verbs: [attest]\n  resourceNames: [example.com/publisher, example.org/*]\n",
    ));
    cluster.admin(
        &latest,
        &[
            "create",
            "clusterrolebinding",
            "attester",
            "--clusterrole=attester",
            "--group=trust-publishers",
        ],
    );
    ok(cluster.apply(&latest, &publisher, &signed));
    ok(cluster.apply(
        &latest,
        &publisher,
        &trust_bundle_yaml(
            "example.org:any:v1",
            Some("example.org/any"),
            &front_proxy_ca,
        ),
    ));
    let other = cluster.apply(
        &latest,
        &publisher,
        &trust_bundle_yaml("example.net:x:v1", Some("example.net/x"), &ca),
    );
    assert!(
        text(&other).contains("user not permitted to attest for signerName \"example.net/x\""),
        "{}",
        text(&other)
    );

    // Listed and read with the table kube-apiserver prints, by kubectl 1.33 and 1.27.
    for version in ["1.33", "1.27"] {
        let kubectl = kubectl_path(&format!("kubectl.{version}"));
        let table = ok(cluster.kubectl(&kubectl, &publisher, &["get", "clustertrustbundles"]));
        let rows: Vec<Vec<&str>> = table
            .lines()
            .map(|line| line.split_whitespace().collect())
            .collect();
        assert_eq!(
            rows,
            [
                vec!["NAME", "SIGNERNAME"],
                vec!["cluster-roots", "<none>"],
                vec!["example.com:publisher:v1", "example.com/publisher"],
                vec!["example.org:any:v1", "example.org/any"],
            ],
            "{version}: {table}"
        );
        let one = ok(cluster.kubectl(
            &kubectl,
            &publisher,
            &["get", "clustertrustbundle", "example.com:publisher:v1"],
        ));
        assert!(
            one.lines()
                .nth(1)
                .unwrap()
                .starts_with("example.com:publisher:v1"),
            "{version}: {one}"
        );
    }
    let stored = ok(cluster.kubectl(
        &latest,
        &publisher,
        &[
            "get",
            "clustertrustbundle",
            "example.com:publisher:v1",
            "-o",
            "jsonpath={.spec.trustBundle}",
        ],
    ));
    assert_eq!(stored.trim(), ca.trim());
    let selected = ok(cluster.kubectl(
        &latest,
        &publisher,
        &[
            "get",
            "clustertrustbundles",
            "--field-selector=spec.signerName=example.org/any",
            "-o",
            "name",
        ],
    ));
    assert_eq!(
        selected.trim(),
        "clustertrustbundle.certificates.k8s.io/example.org:any:v1"
    );

    // Server-side apply, as for every built-in kind: created, then the anchors rotated.
    let path = cluster.dir.path().join("applied.yaml");
    for anchors in [ca.clone(), format!("{ca}{front_proxy_ca}")] {
        let yaml = trust_bundle_yaml(
            "example.com:publisher:v2",
            Some("example.com/publisher"),
            &anchors,
        );
        std::fs::write(&path, yaml).unwrap();
        ok(cluster.kubectl(
            &latest,
            &publisher,
            &["apply", "--server-side", "-f", &path.display().to_string()],
        ));
    }
    let applied = ok(cluster.kubectl(
        &latest,
        &publisher,
        &[
            "get",
            "clustertrustbundle",
            "example.com:publisher:v2",
            "-o",
            "jsonpath={.metadata.managedFields[0].operation}/{.spec.trustBundle}",
        ],
    ));
    assert_eq!(
        applied.trim(),
        format!("Apply/{ca}{front_proxy_ca}").trim(),
        "{applied}"
    );

    // Relabelling a signed bundle is a write attest covers; the signer never changes.
    ok(cluster.kubectl(
        &latest,
        &publisher,
        &[
            "label",
            "clustertrustbundle",
            "example.com:publisher:v1",
            "tier=prod",
        ],
    ));
    let moved = cluster.kubectl(
        &latest,
        &cluster.admin,
        &[
            "patch",
            "clustertrustbundle",
            "example.com:publisher:v1",
            "--type=merge",
            "-p",
            r#"{"spec":{"signerName":"example.com/other"}}"#,
        ],
    );
    assert!(
        text(&moved)
            .contains("spec.signerName: Invalid value: \"example.com/other\": field is immutable"),
        "{}",
        text(&moved)
    );

    // Malformed bundles are refused with upstream's causes.
    let admin_certificate = std::fs::read_to_string(cluster.pki("admin.crt")).unwrap();
    let invalid = cluster.apply(
        &latest,
        &cluster.admin,
        &trust_bundle_yaml("example.com:leaf", None, &admin_certificate),
    );
    let message = text(&invalid);
    assert!(
        message.contains("\"example.com:leaf\" is invalid"),
        "{message}"
    );
    assert!(
        message.contains(
            "metadata.name: Invalid value: \"example.com:leaf\": ClusterTrustBundle without signer name must not have \":\" in its name"
        ),
        "{message}"
    );
    assert!(
        message.contains(
            "spec.trustBundle: Invalid value: \"<value omitted>\": entry 0 does not have the CA bit set"
        ),
        "{message}"
    );
    let duplicated = cluster.apply(
        &latest,
        &cluster.admin,
        &trust_bundle_yaml("twice", None, &format!("{ca}{ca}")),
    );
    assert!(
        text(&duplicated).contains("duplicate trust anchor (indices [0 1])"),
        "{}",
        text(&duplicated)
    );
}
