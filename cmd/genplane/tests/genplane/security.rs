//! Authentication and authorization of the real binary: an RBAC matrix of identities (static
//! tokens, the per-role client certificates, `kubectl --as`) against verbs and resources, checked
//! both with `kubectl auth can-i` and with the requests themselves; escalation prevention;
//! `can-i --list`; service-account tokens from TokenRequest used by a kube-rs client; every
//! route refused to anonymous and no-rights users without reaching storage.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support::{Apiserver, https, ok, start_with, text};
use serde_json::Value;

/// The static tokens: alice, bob, carol (group `ops`), dave and erin.
const TOKENS: &str = "tok-alice,alice,u-alice\n\
                      tok-bob,bob,u-bob\n\
                      tok-carol,carol,u-carol,\"ops\"\n\
                      tok-dave,dave,u-dave\n\
                      tok-erin,erin,u-erin\n";

struct Cluster {
    server: Apiserver,
    _tokens: tempfile::TempDir,
}

impl Cluster {
    /// An apiserver with the static tokens, `extra` flags, and the test's bindings: alice
    /// views namespace `a`, bob edits it, dave administers it, group `ops` views everything.
    fn start(extra: &[&str]) -> Self {
        let tokens = tempfile::tempdir().unwrap();
        let file = tokens.path().join("tokens.csv");
        std::fs::write(&file, TOKENS).unwrap();
        let mut flags = vec![format!("--token-auth-file={}", file.display())];
        flags.extend(extra.iter().map(|s| (*s).to_owned()));
        let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
        let cluster = Cluster {
            server: start_with(&flags),
            _tokens: tokens,
        };
        for args in [
            &["create", "namespace", "a"][..],
            &["create", "namespace", "b"],
            &["create", "configmap", "c1", "-n", "a", "--from-literal=k=v"],
            &["create", "configmap", "c1", "-n", "b", "--from-literal=k=v"],
            &[
                "create",
                "secret",
                "generic",
                "s1",
                "-n",
                "a",
                "--from-literal=k=v",
            ],
            &[
                "create",
                "rolebinding",
                "alice-view",
                "--clusterrole=view",
                "--user=alice",
                "-n",
                "a",
            ],
            &[
                "create",
                "rolebinding",
                "bob-edit",
                "--clusterrole=edit",
                "--user=bob",
                "-n",
                "a",
            ],
            &[
                "create",
                "rolebinding",
                "dave-admin",
                "--clusterrole=admin",
                "--user=dave",
                "-n",
                "a",
            ],
            &[
                "create",
                "clusterrolebinding",
                "ops-view",
                "--clusterrole=view",
                "--group=ops",
            ],
        ] {
            ok(cluster.admin(args));
        }
        cluster
    }

    fn ca(&self) -> PathBuf {
        self.server.dir.path().join("data/pki/ca.crt")
    }

    fn admin(&self, args: &[&str]) -> Output {
        self.server.kubectl("kubectl", args)
    }

    /// kubectl as `who`.
    fn kubectl(&self, who: &Who, args: &[&str]) -> Output {
        let mut command = Command::new("kubectl");
        command
            .arg("--cache-dir")
            .arg(crate::support::kubectl_cache(self.server.dir.path()));
        match who {
            Who::Token(token) => {
                command
                    .arg("--kubeconfig=/dev/null")
                    .arg(format!("--server=https://127.0.0.1:{}", self.server.port))
                    .arg(format!("--certificate-authority={}", self.ca().display()))
                    .arg(format!("--token={token}"));
            }
            Who::Role(stem) => {
                command.arg(format!(
                    "--kubeconfig={}",
                    self.server
                        .dir
                        .path()
                        .join(format!("data/{stem}.kubeconfig"))
                        .display()
                ));
            }
            Who::As(user) => {
                command
                    .arg(format!(
                        "--kubeconfig={}",
                        self.server.kubeconfig().display()
                    ))
                    .arg(format!("--as={user}"));
            }
        }
        command.args(args).output().unwrap()
    }
}

#[derive(Debug)]
enum Who {
    /// A static bearer token.
    Token(&'static str),
    /// A role's own kubeconfig (client certificate) in the data directory.
    Role(&'static str),
    /// The admin impersonating a user.
    As(&'static str),
}

/// The operations of the matrix: (verb, resource, namespace).
const OPERATIONS: [(&str, &str, &str); 7] = [
    ("list", "configmaps", "a"),
    ("list", "configmaps", "b"),
    ("get", "secrets", "a"),
    ("create", "configmaps", "a"),
    ("delete", "rolebindings", "a"),
    ("list", "namespaces", ""),
    ("create", "clusterroles", ""),
];

/// Whether `who` may do `operation`, by making the request itself: a refused request answers
/// Forbidden; an allowed one succeeds, or fails for another reason (NotFound for a name that
/// does not exist). Writes are dry runs.
fn allowed(cluster: &Cluster, who: &Who, (verb, resource, namespace): (&str, &str, &str)) -> bool {
    let mut args: Vec<&str> = match (verb, resource) {
        ("list", _) => vec!["get", resource],
        ("get" | "delete", _) => vec![verb, resource, "no-such-object"],
        ("create", "configmaps") => vec!["create", "configmap", "probe", "--dry-run=server"],
        ("create", "clusterroles") => vec![
            "create",
            "clusterrole",
            "probe",
            "--verb=get",
            "--resource=configmaps",
            "--dry-run=server",
        ],
        other => panic!("no probe for {other:?}"),
    };
    if !namespace.is_empty() {
        args.extend(["-n", namespace]);
    }
    let output = cluster.kubectl(who, &args);
    let said = text(&output);
    if said.contains("Forbidden") || said.contains("forbidden") {
        return false;
    }
    assert!(
        output.status.success() || said.contains("NotFound") || said.contains("not found"),
        "{who:?} {args:?}: {said}"
    );
    true
}

/// What `kubectl auth can-i` answers.
fn can_i(cluster: &Cluster, who: &Who, (verb, resource, namespace): (&str, &str, &str)) -> bool {
    let mut args = vec!["auth", "can-i", verb, resource];
    if !namespace.is_empty() {
        args.extend(["-n", namespace]);
    }
    let output = cluster.kubectl(who, &args);
    let answer = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    assert!(
        answer == "yes" || answer == "no",
        "{who:?} {args:?}: {}",
        text(&output)
    );
    answer == "yes"
}

#[test]
fn the_rbac_matrix_holds_for_tokens_certificates_and_impersonation() {
    let cluster = Cluster::start(&[]);
    let y = true;
    let n = false;
    let expected: Vec<(Who, [bool; 7])> = vec![
        (Who::Token("tok-alice"), [y, n, n, n, n, n, n]),
        (Who::Token("tok-bob"), [y, n, y, y, n, n, n]),
        (Who::Token("tok-carol"), [y, y, n, n, n, y, n]),
        (Who::Token("tok-dave"), [y, n, y, y, y, n, n]),
        (Who::Token("tok-erin"), [n, n, n, n, n, n, n]),
        (Who::As("alice"), [y, n, n, n, n, n, n]),
        (Who::As("bob"), [y, n, y, y, n, n, n]),
        (Who::Role("admin"), [y, y, y, y, y, y, y]),
        (Who::Role("controller-manager"), [y, y, y, y, y, y, n]),
        (Who::Role("feature-controller"), [n, n, n, n, n, n, n]),
    ];
    let mut wrong = Vec::new();
    for (who, row) in &expected {
        for (operation, want) in OPERATIONS.iter().zip(row) {
            let did = allowed(&cluster, who, *operation);
            let said = can_i(&cluster, who, *operation);
            if did != *want || said != *want {
                wrong.push(format!(
                    "{who:?} {operation:?}: expected {want}, request {did}, can-i {said}"
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));

    // Impersonation needs the impersonate verb: erin has none.
    let out = cluster.kubectl(
        &Who::Token("tok-erin"),
        &["get", "configmaps", "-n", "a", "--as=alice"],
    );
    assert!(
        text(&out).contains(
            "users \"alice\" is forbidden: User \"erin\" cannot impersonate resource \"users\""
        ),
        "{}",
        text(&out)
    );
    // A token nobody issued is refused outright.
    let out = cluster.kubectl(&Who::Token("tok-nobody"), &["get", "namespaces"]);
    assert!(text(&out).contains("Unauthorized"), "{}", text(&out));
    // whoami reports the token's user and groups.
    let out = ok(cluster.kubectl(&Who::Token("tok-carol"), &["auth", "whoami", "-o", "json"]));
    let review: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(review["status"]["userInfo"]["username"], "carol");
    assert_eq!(
        review["status"]["userInfo"]["groups"],
        serde_json::json!(["ops", "system:authenticated"])
    );
}

#[test]
fn can_i_list_shows_the_rules_held_in_a_namespace() {
    let cluster = Cluster::start(&[]);
    let out = ok(cluster.kubectl(
        &Who::Token("tok-alice"),
        &["auth", "can-i", "--list", "-n", "a"],
    ));
    let configmaps = out
        .lines()
        .find(|l| l.starts_with("configmaps "))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(configmaps.contains("[get list watch]"), "{out}");
    assert!(!out.lines().any(|l| l.starts_with("secrets ")), "{out}");
    assert!(
        out.contains("selfsubjectaccessreviews.authorization.k8s.io"),
        "{out}"
    );
    // In a namespace where she holds nothing, only what every user may do.
    let out = ok(cluster.kubectl(
        &Who::Token("tok-alice"),
        &["auth", "can-i", "--list", "-n", "b"],
    ));
    assert!(!out.lines().any(|l| l.starts_with("configmaps ")), "{out}");
}

#[test]
fn roles_and_bindings_cannot_grant_more_than_their_author_holds() {
    let cluster = Cluster::start(&[]);
    let dave = Who::Token("tok-dave");
    // dave administers `a`: he may grant what he holds there.
    ok(cluster.kubectl(
        &dave,
        &[
            "create",
            "role",
            "reader",
            "--verb=get",
            "--resource=secrets",
            "-n",
            "a",
        ],
    ));
    ok(cluster.kubectl(
        &dave,
        &[
            "create",
            "rolebinding",
            "erin-view",
            "--clusterrole=view",
            "--user=erin",
            "-n",
            "a",
        ],
    ));
    // ...but not what he does not hold.
    let out = cluster.kubectl(
        &dave,
        &[
            "create",
            "role",
            "too-much",
            "--verb=get",
            "--resource=clusterroles",
            "-n",
            "a",
        ],
    );
    let said = text(&out);
    assert!(!out.status.success(), "{said}");
    assert!(
        said.contains("roles.rbac.authorization.k8s.io \"too-much\" is forbidden: user \"dave\"")
            && said.contains("is attempting to grant RBAC permissions not currently held")
            && said.contains("{APIGroups:[\"rbac.authorization.k8s.io\"], Resources:[\"clusterroles\"], Verbs:[\"get\"]}"),
        "{said}"
    );
    let out = cluster.kubectl(
        &dave,
        &[
            "create",
            "rolebinding",
            "dave-root",
            "--clusterrole=cluster-admin",
            "--user=dave",
            "-n",
            "a",
        ],
    );
    assert!(
        text(&out).contains("is attempting to grant RBAC permissions not currently held"),
        "{}",
        text(&out)
    );
    // A binding to a role that does not exist is that role's 404, as upstream answers it.
    let out = cluster.kubectl(
        &dave,
        &[
            "create",
            "rolebinding",
            "to-nothing",
            "--clusterrole=no-such-role",
            "--user=dave",
            "-n",
            "a",
        ],
    );
    assert!(
        text(&out).contains("clusterroles.rbac.authorization.k8s.io \"no-such-role\" not found"),
        "{}",
        text(&out)
    );
    // Nothing was stored for the refused writes.
    let out = text(&cluster.admin(&["get", "role,rolebinding", "-n", "a", "-o", "name"]));
    assert!(
        out.contains("role.rbac.authorization.k8s.io/reader"),
        "{out}"
    );
    assert!(
        !out.contains("too-much") && !out.contains("dave-root"),
        "{out}"
    );
    // erin got view in `a` through dave's binding.
    let erin = Who::Token("tok-erin");
    assert!(can_i(&cluster, &erin, ("list", "configmaps", "a")));
}

/// The server's signing key, issuer and uid of `namespace/name`, to mint a token the way the
/// server does but at another time.
fn mint(cluster: &Cluster, namespace: &str, name: &str, issued_at: i64, lifetime: i64) -> String {
    use genplane_authentication::keys::SigningKey;
    use genplane_authentication::serviceaccount::{ObjectRef, TokenIssuer, TokenSpec};
    let key = SigningKey::from_file(&cluster.server.dir.path().join("data/pki/sa.key")).unwrap();
    let out = ok(cluster.admin(&["get", "serviceaccount", name, "-n", namespace, "-o", "json"]));
    let uid = serde_json::from_str::<Value>(&out).unwrap()["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_owned();
    TokenIssuer::new("https://kubernetes.default.svc.cluster.local", key)
        .issue(
            &TokenSpec {
                namespace: namespace.into(),
                service_account: ObjectRef {
                    name: name.into(),
                    uid,
                },
                secret: None,
                audiences: vec!["https://kubernetes.default.svc.cluster.local".into()],
                expiration_seconds: lifetime,
            },
            issued_at,
        )
        .unwrap()
        .token
}

/// A kube-rs client authenticating with `token`.
async fn client_with_token(cluster: &Cluster, dir: &Path, token: &str) -> kube::Client {
    let kubeconfig = dir.join(format!("token-{}.kubeconfig", &token[token.len() - 8..]));
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:{}\n    certificate-authority: {}\nusers:\n- name: u\n  user:\n    token: {token}\ncontexts:\n- name: c\n  context: {{cluster: c, user: u}}\ncurrent-context: c\n",
            cluster.server.port,
            cluster.ca().display()
        ),
    )
    .unwrap();
    crate::support::kube_client(&kubeconfig).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_account_tokens_carry_exactly_the_accounts_rights_until_they_expire() {
    use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
    use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
    use kube::api::{Api, ListParams, PostParams};

    let cluster = tokio::task::spawn_blocking(|| Cluster::start(&[]))
        .await
        .unwrap();
    let dir = cluster.server.dir.path().to_owned();
    ok(cluster.admin(&["create", "serviceaccount", "bot", "-n", "a"]));
    ok(cluster.admin(&[
        "create",
        "rolebinding",
        "bot-view",
        "--clusterrole=view",
        "--serviceaccount=a:bot",
        "-n",
        "a",
    ]));

    // The admin asks for a token through the TokenRequest API.
    let admin = cluster.server.client().await;
    let accounts: Api<ServiceAccount> = Api::namespaced(admin, "a");
    let request = TokenRequest {
        spec: TokenRequestSpec {
            expiration_seconds: Some(3600),
            ..TokenRequestSpec::default()
        },
        ..TokenRequest::default()
    };
    let issued = accounts
        .create_token_request("bot", &PostParams::default(), &request)
        .await
        .unwrap();
    let status = issued.status.unwrap();
    let token = status.token;

    // `kubectl create token` (a protobuf body and answer) issues one of the same account,
    // and `kubectl auth whoami` with it says whose it is.
    let issued_by_kubectl = ok(cluster.admin(&["create", "token", "bot", "-n", "a"]));
    let kubectl_token: &'static str =
        Box::leak(issued_by_kubectl.trim().to_owned().into_boxed_str());
    let whoami = ok(cluster.kubectl(
        &Who::Token(kubectl_token),
        &["auth", "whoami", "-o", "json"],
    ));
    let whoami: Value = serde_json::from_str(&whoami).unwrap();
    assert_eq!(
        whoami["status"]["userInfo"]["username"], "system:serviceaccount:a:bot",
        "{whoami}"
    );
    // A token for an account that does not exist is the store's 404.
    let missing = cluster.admin(&["create", "token", "nobody", "-n", "a"]);
    assert!(!missing.status.success());
    assert!(text(&missing).contains("not found"), "{}", text(&missing));

    // With it, a kube-rs client has exactly the account's rights.
    let bot = client_with_token(&cluster, &dir, &token).await;
    let in_a: Api<ConfigMap> = Api::namespaced(bot.clone(), "a");
    let names: Vec<String> = in_a
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect();
    assert!(names.contains(&"c1".to_owned()), "{names:?}");
    let in_b: Api<ConfigMap> = Api::namespaced(bot.clone(), "b");
    match in_b.list(&ListParams::default()).await {
        Err(kube::Error::Api(status)) => assert_eq!(status.code, 403, "{status:?}"),
        other => panic!("listing in b: {other:?}"),
    }
    let create = in_a
        .create(
            &PostParams::default(),
            &serde_json::from_value(serde_json::json!({"metadata": {"name": "by-bot"}})).unwrap(),
        )
        .await;
    assert!(
        matches!(create, Err(kube::Error::Api(ref s)) if s.code == 403),
        "{create:?}"
    );

    // TokenReview (as the admin) says whose token it is.
    let review = format!(
        "{{\"apiVersion\":\"authentication.k8s.io/v1\",\"kind\":\"TokenReview\",\"spec\":{{\"token\":\"{token}\"}}}}"
    );
    let file = dir.join("review.json");
    std::fs::write(&file, review).unwrap();
    let reviewed: Value = serde_json::from_str(&ok(cluster.admin(&[
        "create",
        // kubectl's field validation looks the kind up among the CRDs (a kind without PATCH).
        "-f",
        file.to_str().unwrap(),
        "-o",
        "json",
    ])))
    .unwrap();
    assert_eq!(reviewed["status"]["authenticated"], true, "{reviewed}");
    assert_eq!(
        reviewed["status"]["user"]["username"],
        "system:serviceaccount:a:bot"
    );
    assert_eq!(
        reviewed["status"]["audiences"],
        serde_json::json!(["https://kubernetes.default.svc.cluster.local"])
    );
    std::fs::write(
        &file,
        "{\"apiVersion\":\"authentication.k8s.io/v1\",\"kind\":\"TokenReview\",\"spec\":{\"token\":\"not-a-token\"}}",
    )
    .unwrap();
    let refused: Value = serde_json::from_str(&ok(cluster.admin(&[
        "create",
        // kubectl's field validation looks the kind up among the CRDs (a kind without PATCH).
        "-f",
        file.to_str().unwrap(),
        "-o",
        "json",
    ])))
    .unwrap();
    assert!(refused["status"]["authenticated"] != true, "{refused}");
    assert!(refused["status"]["error"].is_string(), "{refused}");

    // Service accounts may read the issuer's discovery documents, whose key set holds the
    // key that signed the token.
    let (code, configuration) = https(
        cluster.server.port,
        &cluster.ca(),
        "GET",
        "/.well-known/openid-configuration",
        &[("Authorization", &format!("Bearer {token}"))],
        None,
    );
    assert_eq!(code, 200, "{configuration}");
    let configuration: Value = serde_json::from_str(&configuration).unwrap();
    assert_eq!(
        configuration["issuer"],
        "https://kubernetes.default.svc.cluster.local"
    );
    let (code, keys) = https(
        cluster.server.port,
        &cluster.ca(),
        "GET",
        "/openid/v1/jwks",
        &[("Authorization", &format!("Bearer {token}"))],
        None,
    );
    assert_eq!(code, 200, "{keys}");
    let keys: Value = serde_json::from_str(&keys).unwrap();
    let header: Value = {
        use base64::Engine as _;
        let part = token.split('.').next().unwrap();
        serde_json::from_slice(
            &base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(part)
                .unwrap(),
        )
        .unwrap()
    };
    assert!(
        keys["keys"]
            .as_array()
            .unwrap()
            .iter()
            .any(|k| k["kid"] == header["kid"]),
        "{keys} {header}"
    );

    // A token of the same account that expired (issued two hours ago for ten minutes) is
    // refused, as is any token once its account is gone.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let expired = mint(&cluster, "a", "bot", now - 7200, 600);
    let late = client_with_token(&cluster, &dir, &expired).await;
    let refused = Api::<ConfigMap>::namespaced(late, "a")
        .list(&ListParams::default())
        .await;
    assert!(
        matches!(refused, Err(kube::Error::Api(ref s)) if s.code == 401),
        "{refused:?}"
    );
    let fresh = mint(&cluster, "a", "bot", now, 600);
    let minted = client_with_token(&cluster, &dir, &fresh).await;
    Api::<ConfigMap>::namespaced(minted.clone(), "a")
        .list(&ListParams::default())
        .await
        .unwrap();
    ok(cluster.admin(&["delete", "serviceaccount", "bot", "-n", "a"]));
    crate::support::eventually_async("the token of a deleted account to stop working", || async {
        let result = Api::<ConfigMap>::namespaced(bot.clone(), "a")
            .list(&ListParams::default())
            .await;
        matches!(result, Err(kube::Error::Api(ref s)) if s.code == 401).then_some(())
    })
    .await;
}

#[test]
fn no_route_reaches_storage_for_anonymous_or_unprivileged_users() {
    let cluster = Cluster::start(&[]);
    let ca = cluster.ca();
    let port = cluster.server.port;
    // Every served resource, from the legacy discovery documents.
    let mut resources: Vec<(String, String, bool, Vec<String>)> = Vec::new();
    let mut group_versions = vec!["api/v1".to_owned()];
    let groups: Value =
        serde_json::from_str(&ok(cluster.admin(&["get", "--raw", "/apis"]))).unwrap();
    for group in groups["groups"].as_array().unwrap() {
        group_versions.push(format!(
            "apis/{}",
            group["preferredVersion"]["groupVersion"].as_str().unwrap()
        ));
    }
    for gv in &group_versions {
        let list: Value =
            serde_json::from_str(&ok(cluster.admin(&["get", "--raw", &format!("/{gv}")]))).unwrap();
        for r in list["resources"].as_array().unwrap() {
            let verbs = r["verbs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_str().unwrap().to_owned())
                .collect();
            resources.push((
                gv.clone(),
                r["name"].as_str().unwrap().to_owned(),
                r["namespaced"].as_bool().unwrap(),
                verbs,
            ));
        }
    }
    assert!(resources.len() > 15, "{resources:?}");
    let before = ok(cluster.admin(&[
        "get",
        "configmaps,secrets,serviceaccounts,leases,roles,rolebindings",
        "-A",
        "-o",
        "name",
    ]));
    let before_cluster = ok(cluster.admin(&[
        "get",
        "namespaces,clusterroles,clusterrolebindings",
        "-o",
        "name",
    ]));

    let every_user_may = [
        "selfsubjectreviews",
        "selfsubjectaccessreviews",
        "selfsubjectrulesreviews",
    ];
    let mut unexpected = Vec::new();
    for (label, headers) in [
        ("anonymous", vec![]),
        ("erin", vec![("Authorization", "Bearer tok-erin")]),
    ] {
        for (gv, name, namespaced, verbs) in &resources {
            let (resource, subresource) = name
                .split_once('/')
                .map_or((name.as_str(), None), |(r, s)| (r, Some(s)));
            let base = if *namespaced {
                format!("/{gv}/namespaces/a/{resource}")
            } else {
                format!("/{gv}/{resource}")
            };
            let one = match subresource {
                Some(sub) => format!("{base}/x/{sub}"),
                None => format!("{base}/x"),
            };
            for verb in verbs {
                let (method, path, body) = match (verb.as_str(), subresource) {
                    ("get", _) => ("GET", one.clone(), None),
                    ("list", None) => ("GET", base.clone(), None),
                    ("watch", None) => ("GET", format!("{base}?watch=true&timeoutSeconds=1"), None),
                    ("create", Some(_)) => ("POST", one.clone(), Some("{}")),
                    ("create", None) => (
                        "POST",
                        base.clone(),
                        Some("{\"metadata\":{\"name\":\"x\"}}"),
                    ),
                    ("update", _) => ("PUT", one.clone(), Some("{\"metadata\":{\"name\":\"x\"}}")),
                    ("patch", _) => ("PATCH", one.clone(), Some("{}")),
                    ("delete", _) => ("DELETE", one.clone(), None),
                    ("deletecollection", None) => ("DELETE", base.clone(), None),
                    _ => continue,
                };
                let mut headers = headers.clone();
                if method == "PATCH" {
                    headers.push(("Content-Type", "application/merge-patch+json"));
                }
                let body = if method == "PATCH" {
                    body.map(|_| "{}")
                } else {
                    body
                };
                let (code, answer) = https(port, &ca, method, &path, &headers, body);
                // What every authenticated user may do is answered (201, or 422 for the
                // empty review); everything else is refused before it is looked at.
                let may = label == "erin" && every_user_may.contains(&resource) && verb == "create";
                let fine = if may {
                    matches!(code, 201 | 422)
                } else {
                    code == 403
                };
                if !fine {
                    unexpected.push(format!("{label} {method} {path}: {code} {answer}"));
                }
            }
        }
        for (path, erin_may) in [
            ("/api", true),
            ("/apis", true),
            ("/openapi/v2", true),
            ("/openapi/v3", true),
            ("/version", true),
            ("/healthz", true),
            ("/metrics", false),
            ("/.well-known/openid-configuration", false),
            ("/openid/v1/jwks", false),
        ] {
            let (code, answer) = https(port, &ca, "GET", path, &headers, None);
            let public = matches!(path, "/version" | "/healthz");
            let expected = if public || (label == "erin" && erin_may) {
                200
            } else {
                403
            };
            if code != expected {
                unexpected.push(format!("{label} GET {path}: {code} {answer}"));
            }
        }
    }
    assert!(unexpected.is_empty(), "{}", unexpected.join("\n"));
    let after = ok(cluster.admin(&[
        "get",
        "configmaps,secrets,serviceaccounts,leases,roles,rolebindings",
        "-A",
        "-o",
        "name",
    ]));
    let after_cluster = ok(cluster.admin(&[
        "get",
        "namespaces,clusterroles,clusterrolebindings",
        "-o",
        "name",
    ]));
    assert_eq!(before, after);
    assert_eq!(before_cluster, after_cluster);
}

/// The served resources from the legacy discovery documents: (group version path, name with
/// any `/subresource`, namespaced, verbs).
fn discovered(cluster: &Cluster) -> Vec<(String, String, bool, Vec<String>)> {
    let mut resources = Vec::new();
    let mut group_versions = vec!["api/v1".to_owned()];
    let groups: Value =
        serde_json::from_str(&ok(cluster.admin(&["get", "--raw", "/apis"]))).unwrap();
    for group in groups["groups"].as_array().unwrap() {
        for version in group["versions"].as_array().unwrap() {
            group_versions.push(format!(
                "apis/{}",
                version["groupVersion"].as_str().unwrap()
            ));
        }
    }
    for gv in &group_versions {
        let list: Value =
            serde_json::from_str(&ok(cluster.admin(&["get", "--raw", &format!("/{gv}")]))).unwrap();
        for r in list["resources"].as_array().unwrap() {
            let verbs = r["verbs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_str().unwrap().to_owned())
                .collect();
            resources.push((
                gv.clone(),
                r["name"].as_str().unwrap().to_owned(),
                r["namespaced"].as_bool().unwrap(),
                verbs,
            ));
        }
    }
    resources
}

/// Every cluster-scoped object, with its resourceVersion and labels, as the admin reads it.
fn cluster_scoped_state(cluster: &Cluster, kinds: &str) -> String {
    ok(cluster.admin(&[
        "get",
        kinds,
        "-o",
        "jsonpath={range .items[*]}{.kind}/{.metadata.name} {.metadata.resourceVersion} {.metadata.labels}{\"\\n\"}{end}",
    ]))
}

/// A user bound to everything in one namespace (`*` verbs on `*` resources of every group, in
/// `a`) reaches nothing cluster-scoped through any path: every discovered resource, built-in
/// and custom, subresources and reviews included, under both path shapes (`/<resource>` and
/// `/namespaces/<ns>/<resource>`) and every verb it serves. A cluster-scoped resource does not
/// exist under `/namespaces/<ns>/` (404, as upstream routes it), a namespaced one across
/// namespaces or in another namespace is refused (403), and nothing cluster-scoped changes.
#[test]
fn a_namespace_bound_user_reaches_nothing_cluster_scoped_through_any_path() {
    let cluster = Cluster::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let manifests = dir.path().join("setup.yaml");
    std::fs::write(
        &manifests,
        r#"apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: everything, namespace: a}
rules:
- apiGroups: ["*"]
  resources: ["*"]
  verbs: ["*"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: erin-everything, namespace: a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: everything}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: erin}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: globes.example.com}
spec:
  group: example.com
  scope: Cluster
  names: {plural: globes, singular: globe, kind: Globe}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: locals.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: locals, singular: local, kind: Local}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
"#,
    )
    .unwrap();
    ok(cluster.admin(&["apply", "-f", manifests.to_str().unwrap()]));
    let globe = dir.path().join("globe.yaml");
    std::fs::write(
        &globe,
        "apiVersion: example.com/v1\nkind: Globe\nmetadata: {name: g1}\n",
    )
    .unwrap();
    // The custom resources are served once they appear in discovery.
    let resources = crate::support::eventually("the custom resources in discovery", || {
        let resources = discovered(&cluster);
        let served = |wanted: &str| resources.iter().any(|(_, name, ..)| name == wanted);
        (served("globes") && served("locals")).then_some(resources)
    });
    ok(cluster.admin(&["create", "-f", globe.to_str().unwrap()]));
    assert!(
        resources
            .iter()
            .any(|(_, name, ..)| name == "globes/status"),
        "{resources:?}"
    );

    let cluster_kinds: Vec<String> = resources
        .iter()
        .filter(|(_, name, namespaced, verbs)| {
            !namespaced && !name.contains('/') && verbs.iter().any(|v| v == "list")
        })
        .map(|(gv, name, ..)| {
            let group = gv
                .strip_prefix("apis/")
                .map_or("", |g| g.split('/').next().unwrap());
            if group.is_empty() {
                name.clone()
            } else {
                format!("{name}.{group}")
            }
        })
        .collect();
    let cluster_kinds = cluster_kinds.join(",");
    // One existing object of each cluster-scoped resource, so that a write that got through
    // would be seen: the most precious one where there is a choice.
    let existing = |resource: &str| -> String {
        match resource {
            "namespaces" => "kube-system".to_owned(),
            "clusterroles" => "cluster-admin".to_owned(),
            "clusterrolebindings" => "cluster-admin".to_owned(),
            "customresourcedefinitions" => "globes.example.com".to_owned(),
            "globes" => "g1".to_owned(),
            _ => "x".to_owned(),
        }
    };
    let before = cluster_scoped_state(&cluster, &cluster_kinds);
    assert!(before.contains("Namespace/kube-system"), "{before}");
    assert!(before.contains("Globe/g1"), "{before}");

    let ca = cluster.ca();
    let port = cluster.server.port;
    let erin = [("Authorization", "Bearer tok-erin")];
    let every_user_may = [
        "selfsubjectreviews",
        "selfsubjectaccessreviews",
        "selfsubjectrulesreviews",
    ];
    let mut unexpected = Vec::new();
    let mut requests = 0;
    for (gv, name, namespaced, verbs) in &resources {
        let (resource, subresource) = name
            .split_once('/')
            .map_or((name.as_str(), None), |(r, s)| (r, Some(s)));
        let object = if *namespaced {
            "x".to_owned()
        } else {
            existing(resource)
        };
        // (path prefix, what a user bound in `a` must get, a label)
        let shapes: Vec<(String, &str)> = if *namespaced {
            vec![
                (format!("/{gv}/{resource}"), "across namespaces"),
                (
                    format!("/{gv}/namespaces/b/{resource}"),
                    "another namespace",
                ),
            ]
        } else {
            vec![
                (format!("/{gv}/{resource}"), "cluster"),
                (
                    format!("/{gv}/namespaces/a/{resource}"),
                    "under a namespace",
                ),
                (
                    format!("/{gv}/namespaces/b/{resource}"),
                    "under a namespace",
                ),
            ]
        };
        for (base, shape) in shapes {
            let one = match subresource {
                Some(sub) => format!("{base}/{object}/{sub}"),
                None => format!("{base}/{object}"),
            };
            let mut calls: Vec<(&str, String, Option<String>)> = Vec::new();
            for verb in verbs {
                let body = format!(
                    "{{\"metadata\":{{\"name\":\"{object}\",\"labels\":{{\"pwned\":\"yes\"}}}}}}"
                );
                match (verb.as_str(), subresource) {
                    ("get", _) => calls.push(("GET", one.clone(), None)),
                    ("list", None) => calls.push(("GET", base.clone(), None)),
                    ("watch", None) => {
                        calls.push(("GET", format!("{base}?watch=true&timeoutSeconds=1"), None));
                    }
                    ("create", None) => calls.push((
                        "POST",
                        base.clone(),
                        Some(body.replace(&format!("\"{object}\""), "\"pwned\"")),
                    )),
                    ("create", Some(_)) => calls.push(("POST", one.clone(), Some(body))),
                    ("update", _) => calls.push(("PUT", one.clone(), Some(body))),
                    ("patch", _) => calls.push((
                        "PATCH",
                        one.clone(),
                        Some("{\"metadata\":{\"labels\":{\"pwned\":\"yes\"}}}".to_owned()),
                    )),
                    ("delete", _) => calls.push(("DELETE", one.clone(), None)),
                    ("deletecollection", None) => calls.push(("DELETE", base.clone(), None)),
                    _ => {}
                }
            }
            for (method, path, body) in calls {
                let mut headers = erin.to_vec();
                if method == "PATCH" {
                    headers.push(("Content-Type", "application/merge-patch+json"));
                }
                let (code, answer) = https(port, &ca, method, &path, &headers, body.as_deref());
                requests += 1;
                // Every user may create the self reviews, wherever the path says.
                let self_review = every_user_may.contains(&resource) && method == "POST";
                let fine = match shape {
                    "cluster" if self_review => matches!(code, 201 | 422),
                    // Allowed (by the Role in `a`, or to everyone), then not found: there is
                    // no such route.
                    "under a namespace" if self_review || path.contains("/namespaces/a/") => {
                        code == 404
                    }
                    _ => code == 403,
                };
                if !fine {
                    unexpected.push(format!("{shape}: {method} {path}: {code} {answer}"));
                }
            }
        }
    }
    assert!(requests > 300, "only {requests} requests");
    assert!(unexpected.is_empty(), "{}", unexpected.join("\n"));
    assert_eq!(cluster_scoped_state(&cluster, &cluster_kinds), before);
}
