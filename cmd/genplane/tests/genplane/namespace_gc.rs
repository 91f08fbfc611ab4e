//! The namespace controller and the garbage collector against a real `genplane apiserver`,
//! driven by kubectl: the controllers run in the test process with the controller-manager's
//! kubeconfig (so its RBAC is what is exercised), as `genplane controller-manager` runs them.
//! The deletion of a namespace of thousands runs the real `genplane controller-manager` and
//! reads what it cost from the API server's `/metrics`.

#![allow(clippy::unwrap_used)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

static FILES: AtomicUsize = AtomicUsize::new(0);

use crate::support::{self, Apiserver, ControllerManager, ok, text};
use k8s_openapi::api::core::v1::ConfigMap;
use serde_json::{Value, json};

/// The controllers under test, on a runtime of their own; dropping it stops them. A
/// controller that stops (its error, or a panic) fails the test at the next wait, with what
/// stopped it, instead of showing as a timeout.
struct Controllers {
    runtime: tokio::runtime::Runtime,
    tasks: Vec<(&'static str, tokio::task::JoinHandle<()>)>,
}

impl Controllers {
    /// Fails the test when a controller has stopped.
    fn check(&mut self) {
        let Some(at) = self.tasks.iter().position(|(_, task)| task.is_finished()) else {
            return;
        };
        let (name, task) = self.tasks.remove(at);
        match self.runtime.block_on(task) {
            Ok(()) => panic!("the {name} stopped"),
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(e) => panic!("the {name} stopped: {e}"),
        }
    }

    /// Polls `check` until it holds, failing the test when a controller stopped first or
    /// after the harness's deadline.
    fn eventually(&mut self, what: &str, mut check: impl FnMut() -> bool) {
        support::eventually_holds(what, || {
            self.check();
            check()
        });
        self.check();
    }

    /// Waits until the garbage collector has handled a change made now: a ConfigMap in
    /// `namespace` whose only owner does not exist is collected. What the collector would
    /// have done about earlier changes it has had every chance to do by then.
    fn barrier(&mut self, server: &Apiserver, namespace: &str) {
        let name = format!("barrier-{}", FILES.fetch_add(1, Ordering::Relaxed));
        apply(
            server,
            configmap(
                namespace,
                &name,
                owned_by(
                    "never-existed",
                    "0b5e0000-0000-0000-0000-000000000000",
                    false,
                ),
            ),
        );
        self.eventually("the collector to handle a later change", || {
            get(server, "configmap", namespace, &name).is_none()
        });
    }
}

/// Starts both controllers with the controller-manager's kubeconfig.
fn controllers(server: &Apiserver) -> Controllers {
    // Only the first call in the process installs it; later ones find it there.
    rustls::crypto::aws_lc_rs::default_provider()
        .install_default()
        .ok();
    // RUST_LOG=genplane_controller=debug shows what the controllers do.
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init()
        .ok();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let path = server.data().join("controller-manager.kubeconfig");
    let client = runtime.block_on(support::kube_client(&path));
    let namespace = client.clone();
    // Both follow namespaces through one shared watch, as in the controller-manager.
    let informers = genplane_controller::informers::SharedInformers::new(client.clone());
    let gc_informers = informers.clone();
    let tasks = vec![
        (
            "namespace controller",
            runtime.spawn(async move {
                let pods_first = std::sync::Arc::new(|| true);
                if let Err(e) =
                    genplane_controller::namespace::run(namespace, informers, pods_first).await
                {
                    panic!("the namespace controller stopped: {e}");
                }
            }),
        ),
        (
            "garbage collector",
            runtime.spawn(async move {
                if let Err(e) =
                    genplane_controller::garbagecollector::run(client, gc_informers).await
                {
                    panic!("the garbage collector stopped: {e}");
                }
            }),
        ),
    ];
    Controllers { runtime, tasks }
}

fn kubectl(server: &Apiserver, args: &[&str]) -> std::process::Output {
    server.kubectl("kubectl", args)
}

/// `kubectl apply` of one object.
fn apply(server: &Apiserver, object: Value) {
    let path = server.dir.path().join(format!(
        "object-{}.json",
        FILES.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::write(&path, object.to_string()).unwrap();
    ok(kubectl(server, &["apply", "-f", path.to_str().unwrap()]));
    std::fs::remove_file(path).unwrap();
}

/// The object as JSON, or `None` when it is not found.
fn get(server: &Apiserver, kind: &str, namespace: &str, name: &str) -> Option<Value> {
    let out = kubectl(server, &["get", kind, name, "-n", namespace, "-o", "json"]);
    if out.status.success() {
        return Some(serde_json::from_slice(&out.stdout).unwrap());
    }
    assert!(text(&out).contains("NotFound"), "{}", text(&out));
    None
}

fn uid(server: &Apiserver, kind: &str, namespace: &str, name: &str) -> String {
    get(server, kind, namespace, name).unwrap()["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn configmap(namespace: &str, name: &str, extra: Value) -> Value {
    let mut object = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace}, "data": {"k": "v"}});
    if let (Some(meta), Some(extra)) = (object["metadata"].as_object_mut(), extra.as_object()) {
        meta.extend(extra.clone());
    }
    object
}

fn owned_by(owner_name: &str, owner_uid: &str, block: bool) -> Value {
    json!({"ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": owner_name,
        "uid": owner_uid, "blockOwnerDeletion": block}]})
}

fn secret(namespace: &str, name: &str, extra: Value) -> Value {
    let mut object = configmap(namespace, name, extra);
    object["kind"] = json!("Secret");
    object["stringData"] = object["data"].take();
    object.as_object_mut().unwrap().remove("data");
    object
}

fn condition(ns: &Value, type_: &str) -> Option<(String, String, String)> {
    ns["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
        .map(|c| {
            (
                c["status"].as_str().unwrap_or_default().to_owned(),
                c["reason"].as_str().unwrap_or_default().to_owned(),
                c["message"].as_str().unwrap_or_default().to_owned(),
            )
        })
}

#[test]
fn deleting_a_namespace_removes_everything_in_it() {
    let server = support::start();
    let mut controllers = controllers(&server);
    ok(kubectl(&server, &["create", "namespace", "doomed"]));
    ok(kubectl(
        &server,
        &[
            "create",
            "configmap",
            "a",
            "-n",
            "doomed",
            "--from-literal=k=v",
        ],
    ));
    ok(kubectl(
        &server,
        &[
            "create",
            "secret",
            "generic",
            "b",
            "-n",
            "doomed",
            "--from-literal=k=v",
        ],
    ));
    apply(
        &server,
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "c", "namespace": "doomed"}, "spec": {"holderIdentity": "x"}}),
    );
    ok(kubectl(&server, &["create", "namespace", "kept"]));
    ok(kubectl(
        &server,
        &[
            "create",
            "configmap",
            "a",
            "-n",
            "kept",
            "--from-literal=k=v",
        ],
    ));

    // kubectl waits until the namespace is gone.
    ok(kubectl(
        &server,
        &["delete", "namespace", "doomed", "--timeout=60s"],
    ));
    assert!(get(&server, "namespace", "", "doomed").is_none());
    for kind in ["configmaps", "secrets", "leases"] {
        let left = ok(kubectl(
            &server,
            &["get", kind, "-n", "doomed", "-o", "name"],
        ));
        assert_eq!(left.trim(), "", "{kind} left behind");
    }
    // Another namespace is untouched.
    assert!(get(&server, "configmap", "kept", "a").is_some());
    controllers.check();
}

#[test]
fn a_finalizer_keeps_the_namespace_terminating_until_removed() {
    let server = support::start();
    let mut controllers = controllers(&server);
    ok(kubectl(&server, &["create", "namespace", "held"]));
    apply(
        &server,
        configmap(
            "held",
            "pinned",
            json!({"finalizers": ["example.com/hold"]}),
        ),
    );
    ok(kubectl(
        &server,
        &[
            "create",
            "configmap",
            "loose",
            "-n",
            "held",
            "--from-literal=k=v",
        ],
    ));
    ok(kubectl(
        &server,
        &["delete", "namespace", "held", "--wait=false"],
    ));

    controllers.eventually("the namespace reports what remains", || {
        let Some(ns) = get(&server, "namespace", "", "held") else {
            return false;
        };
        condition(&ns, "NamespaceFinalizersRemaining").is_some_and(|c| c.0 == "True")
    });
    let ns = get(&server, "namespace", "", "held").unwrap();
    assert_eq!(ns["status"]["phase"], "Terminating");
    assert_eq!(
        condition(&ns, "NamespaceContentRemaining").unwrap(),
        (
            "True".to_owned(),
            "SomeResourcesRemain".to_owned(),
            "Some resources are remaining: configmaps. has 1 resource instances".to_owned()
        )
    );
    assert_eq!(
        condition(&ns, "NamespaceFinalizersRemaining").unwrap(),
        (
            "True".to_owned(),
            "SomeFinalizersRemain".to_owned(),
            "Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances"
                .to_owned()
        )
    );
    for (type_, reason) in [
        ("NamespaceDeletionDiscoveryFailure", "ResourcesDiscovered"),
        (
            "NamespaceDeletionGroupVersionParsingFailure",
            "ParsedGroupVersions",
        ),
        ("NamespaceDeletionContentFailure", "ContentDeleted"),
    ] {
        let c = condition(&ns, type_).unwrap();
        assert_eq!(
            (c.0.as_str(), c.1.as_str()),
            ("False", reason),
            "{type_}: {}",
            c.2
        );
    }
    assert_eq!(ns["spec"]["finalizers"], json!(["kubernetes"]));
    assert!(get(&server, "configmap", "held", "loose").is_none());
    let pinned = get(&server, "configmap", "held", "pinned").unwrap();
    assert!(pinned["metadata"]["deletionTimestamp"].is_string());

    ok(kubectl(
        &server,
        &[
            "patch",
            "configmap",
            "pinned",
            "-n",
            "held",
            "--type=merge",
            "-p",
            r#"{"metadata":{"finalizers":null}}"#,
        ],
    ));
    controllers.eventually("the namespace is gone", || {
        get(&server, "namespace", "", "held").is_none()
    });
}

#[test]
fn cascading_deletion_background_foreground_and_orphan() {
    let server = support::start();
    let mut controllers = controllers(&server);
    ok(kubectl(&server, &["create", "namespace", "gc"]));

    // Background: the owner goes at once, then its dependents.
    apply(&server, configmap("gc", "bg", json!({})));
    let owner = uid(&server, "configmap", "gc", "bg");
    apply(
        &server,
        configmap("gc", "bg-1", owned_by("bg", &owner, false)),
    );
    apply(&server, secret("gc", "bg-2", owned_by("bg", &owner, true)));
    ok(kubectl(
        &server,
        &[
            "delete",
            "configmap",
            "bg",
            "-n",
            "gc",
            "--cascade=background",
        ],
    ));
    controllers.eventually("background dependents are deleted", || {
        get(&server, "configmap", "gc", "bg-1").is_none()
            && get(&server, "secret", "gc", "bg-2").is_none()
    });

    // Foreground: the owner waits (foregroundDeletion) for its blocking dependents.
    apply(&server, configmap("gc", "fg", json!({})));
    let owner = uid(&server, "configmap", "gc", "fg");
    let mut blocking = owned_by("fg", &owner, true);
    blocking["finalizers"] = json!(["example.com/hold"]);
    apply(&server, secret("gc", "fg-blocking", blocking));
    apply(
        &server,
        configmap("gc", "fg-loose", owned_by("fg", &owner, false)),
    );
    ok(kubectl(
        &server,
        &[
            "delete",
            "configmap",
            "fg",
            "-n",
            "gc",
            "--cascade=foreground",
            "--wait=false",
        ],
    ));
    controllers.eventually("foreground dependents are being deleted", || {
        get(&server, "configmap", "gc", "fg-loose").is_none()
            && get(&server, "secret", "gc", "fg-blocking")
                .is_some_and(|s| s["metadata"]["deletionTimestamp"].is_string())
    });
    // The blocking dependent is held by its finalizer, so the owner stays.
    controllers.barrier(&server, "gc");
    let fg = get(&server, "configmap", "gc", "fg").unwrap();
    assert!(fg["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(fg["metadata"]["finalizers"], json!(["foregroundDeletion"]));
    ok(kubectl(
        &server,
        &[
            "patch",
            "secret",
            "fg-blocking",
            "-n",
            "gc",
            "--type=merge",
            "-p",
            r#"{"metadata":{"finalizers":null}}"#,
        ],
    ));
    controllers.eventually("the foreground owner goes last", || {
        get(&server, "configmap", "gc", "fg").is_none()
    });
    assert!(get(&server, "secret", "gc", "fg-blocking").is_none());

    // Foreground down a chain: a dependent with dependents of its own is deleted in the
    // foreground too, and each owner waits for its blocking dependent.
    apply(&server, configmap("gc", "top", json!({})));
    let top = uid(&server, "configmap", "gc", "top");
    apply(
        &server,
        configmap("gc", "middle", owned_by("top", &top, true)),
    );
    let middle = uid(&server, "configmap", "gc", "middle");
    let mut bottom = owned_by("middle", &middle, true);
    bottom["finalizers"] = json!(["example.com/hold"]);
    apply(&server, secret("gc", "bottom", bottom));
    ok(kubectl(
        &server,
        &[
            "delete",
            "configmap",
            "top",
            "-n",
            "gc",
            "--cascade=foreground",
            "--wait=false",
        ],
    ));
    controllers.eventually("the chain waits on its bottom", || {
        get(&server, "secret", "gc", "bottom")
            .is_some_and(|s| s["metadata"]["deletionTimestamp"].is_string())
    });
    for name in ["top", "middle"] {
        let waiting = get(&server, "configmap", "gc", name).unwrap();
        assert_eq!(
            waiting["metadata"]["finalizers"],
            json!(["foregroundDeletion"]),
            "{name}"
        );
    }
    ok(kubectl(
        &server,
        &[
            "patch",
            "secret",
            "bottom",
            "-n",
            "gc",
            "--type=merge",
            "-p",
            r#"{"metadata":{"finalizers":null}}"#,
        ],
    ));
    controllers.eventually("the whole chain is gone", || {
        get(&server, "configmap", "gc", "top").is_none()
            && get(&server, "configmap", "gc", "middle").is_none()
    });

    // Orphan: the dependents stay, without their reference to the owner.
    apply(&server, configmap("gc", "or", json!({})));
    let owner = uid(&server, "configmap", "gc", "or");
    apply(
        &server,
        configmap("gc", "or-1", owned_by("or", &owner, false)),
    );
    apply(&server, secret("gc", "or-2", owned_by("or", &owner, true)));
    ok(kubectl(
        &server,
        &[
            "delete",
            "configmap",
            "or",
            "-n",
            "gc",
            "--cascade=orphan",
            "--timeout=30s",
        ],
    ));
    assert!(get(&server, "configmap", "gc", "or").is_none());
    controllers.barrier(&server, "gc");
    for (kind, name) in [("configmap", "or-1"), ("secret", "or-2")] {
        let dependent =
            get(&server, kind, "gc", name).unwrap_or_else(|| panic!("{name} was deleted"));
        assert!(
            dependent["metadata"].get("ownerReferences").is_none(),
            "{dependent}"
        );
    }
}

#[test]
fn an_owner_in_another_namespace_counts_as_absent_and_is_reported() {
    let server = support::start();
    let mut controllers = controllers(&server);
    ok(kubectl(&server, &["create", "namespace", "home"]));
    ok(kubectl(&server, &["create", "namespace", "away"]));
    apply(&server, configmap("home", "owner", json!({})));
    let owner = uid(&server, "configmap", "home", "owner");
    // A cluster-scoped owner is fine for a namespaced dependent.
    let ns_uid = uid(&server, "namespace", "", "home");
    apply(
        &server,
        configmap(
            "away",
            "of-namespace",
            json!({"ownerReferences": [{"apiVersion": "v1", "kind": "Namespace", "name": "home", "uid": ns_uid}]}),
        ),
    );
    apply(
        &server,
        configmap("away", "stray", owned_by("owner", &owner, false)),
    );
    controllers.eventually(
        "the dependent of an owner in another namespace is deleted",
        || get(&server, "configmap", "away", "stray").is_none(),
    );
    controllers.eventually("an OwnerRefInvalidNamespace event", || {
        let events: Value = serde_json::from_str(&ok(kubectl(
            &server,
            &["get", "events", "-n", "away", "-o", "json"],
        )))
        .unwrap();
        events["items"].as_array().unwrap().iter().any(|e| {
            e["reason"] == "OwnerRefInvalidNamespace"
                && e["type"] == "Warning"
                && e["involvedObject"]["name"] == "stray"
                && e["message"].as_str().is_some_and(|m| {
                    m.contains(&owner) && m.ends_with("does not exist in namespace \"away\"")
                })
        })
    });
    // A dependent with one live owner stays, and loses its reference to an absent one.
    apply(
        &server,
        configmap(
            "home",
            "two-owners",
            json!({"ownerReferences": [
                {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner},
                {"apiVersion": "v1", "kind": "ConfigMap", "name": "never", "uid": "4b1d0000-0000-0000-0000-000000000000"}]}),
        ),
    );
    controllers.eventually("the absent owner's reference is dropped", || {
        get(&server, "configmap", "home", "two-owners").unwrap()["metadata"]["ownerReferences"]
            .as_array()
            .is_some_and(|refs| refs.len() == 1 && refs[0]["uid"] == owner.as_str())
    });

    // A cluster-scoped dependent naming a namespaced kind is never collected, and reported.
    apply(
        &server,
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "claims-a-configmap", "ownerReferences": [{"apiVersion": "v1",
                "kind": "ConfigMap", "name": "owner", "uid": owner}]}, "rules": []}),
    );
    controllers.eventually("an event on the cluster-scoped dependent", || {
        let events: Value = serde_json::from_str(&ok(kubectl(
            &server,
            &["get", "events", "-n", "default", "-o", "json"],
        )))
        .unwrap();
        events["items"].as_array().unwrap().iter().any(|e| {
            e["reason"] == "OwnerRefInvalidNamespace"
                && e["involvedObject"]["kind"] == "ClusterRole"
                && e["involvedObject"]["name"] == "claims-a-configmap"
        })
    });
    assert!(get(&server, "clusterrole", "", "claims-a-configmap").is_some());
    assert!(get(&server, "configmap", "away", "of-namespace").is_some());
    assert!(get(&server, "configmap", "home", "owner").is_some());
}

/// A namespaced CRD, `widgets.example.com`, Established before the controllers start (the
/// garbage collector discovers resources at start and every 30 s).
fn install_widgets(server: &Apiserver) {
    apply(
        server,
        json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {
                "group": "example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                    "type": "object", "x-kubernetes-preserve-unknown-fields": true}}}],
            },
        }),
    );
    server.wait_established("widgets.example.com");
}

fn widget(namespace: &str, name: &str, extra: Value) -> Value {
    let mut object = configmap(namespace, name, extra);
    object["apiVersion"] = json!("example.com/v1");
    object["kind"] = json!("Widget");
    object["spec"] = object["data"].take();
    object.as_object_mut().unwrap().remove("data");
    object
}

#[test]
fn custom_resources_go_with_their_namespace_and_their_owners() {
    let server = support::start();
    install_widgets(&server);
    let mut controllers = controllers(&server);

    // A custom resource owning a ConfigMap and another custom resource: foreground deletion
    // deletes both dependents, then the owner.
    ok(kubectl(&server, &["create", "namespace", "crs"]));
    apply(&server, widget("crs", "owner", json!({})));
    let owner = uid(&server, "widget", "crs", "owner");
    let by_widget = json!({"ownerReferences": [{"apiVersion": "example.com/v1", "kind": "Widget",
        "name": "owner", "uid": owner, "blockOwnerDeletion": true}]});
    apply(&server, configmap("crs", "owned-cm", by_widget.clone()));
    apply(&server, widget("crs", "owned-widget", by_widget));
    ok(kubectl(
        &server,
        &[
            "delete",
            "widget",
            "owner",
            "-n",
            "crs",
            "--cascade=foreground",
            "--timeout=30s",
        ],
    ));
    assert!(get(&server, "widget", "crs", "owner").is_none());
    assert!(get(&server, "configmap", "crs", "owned-cm").is_none());
    assert!(get(&server, "widget", "crs", "owned-widget").is_none());

    // A custom resource owned by a ConfigMap goes in the background after its owner.
    apply(&server, configmap("crs", "cm-owner", json!({})));
    let cm_owner = uid(&server, "configmap", "crs", "cm-owner");
    apply(
        &server,
        widget("crs", "dependent", owned_by("cm-owner", &cm_owner, false)),
    );
    ok(kubectl(
        &server,
        &["delete", "configmap", "cm-owner", "-n", "crs"],
    ));
    controllers.eventually("the widget follows its owner", || {
        get(&server, "widget", "crs", "dependent").is_none()
    });

    // Deleting the namespace deletes its custom resources with everything else.
    apply(&server, widget("crs", "left", json!({})));
    apply(&server, configmap("crs", "left", json!({})));
    ok(kubectl(
        &server,
        &["delete", "namespace", "crs", "--timeout=60s"],
    ));
    assert!(get(&server, "widget", "crs", "left").is_none());
    let gone = kubectl(&server, &["get", "namespace", "crs"]);
    assert!(text(&gone).contains("NotFound"), "{}", text(&gone));
}

/// The ConfigMaps of [`deleting_a_namespace_of_thousands_commits_its_deletes_in_batches`].
const OBJECTS: usize = 5_000;

/// How many of their creates are in flight at once. The kube-rs client keeps its connections
/// open: with a connection (and a TLS handshake) per create, as `Raw` makes them, creating the
/// ConfigMaps took 17 s instead of 12 s in a debug build.
const CREATORS: usize = 8;

/// The SQLite store's counters in one scrape of the API server's `/metrics`: (commits,
/// writes).
fn sqlite_counters(server: &Apiserver) -> (u64, u64) {
    let text = server.metrics();
    let counter = |name: &str| {
        support::sample(&text, name).unwrap_or_else(|| panic!("no {name} in /metrics:\n{text}"))
    };
    (
        counter("genplane_sqlite_commits_total"),
        counter("genplane_sqlite_writes_total"),
    )
}

/// Batched deletes, checked as an operator would check them: a namespace of 5,000
/// ConfigMaps, deleted by the real controller-manager, costs the API server's SQLite store one
/// commit (one fsync) per batch of deletes (`DELETE_BATCH`), not one per object, as its
/// `/metrics` counters show.
#[test]
fn deleting_a_namespace_of_thousands_commits_its_deletes_in_batches() {
    let server = support::start();
    let mut manager = ControllerManager::start(&server, "controller-manager.log", &[]);
    let raw = server.raw();
    let namespace = "thousands";
    let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}});
    let created = raw.request(
        "POST",
        "/api/v1/namespaces",
        &[],
        Some(body.to_string().as_bytes()),
    );
    assert_eq!(created.status, 201, "{}", created.text());

    let creating = Instant::now();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        use futures::{StreamExt, TryStreamExt};
        let api: kube::Api<ConfigMap> = kube::Api::namespaced(server.client().await, namespace);
        futures::stream::iter(0..OBJECTS)
            .map(|i| {
                let api = api.clone();
                async move {
                    let object = serde_json::from_value(configmap(
                        namespace,
                        &format!("cm-{i:04}"),
                        json!({}),
                    ))
                    .unwrap();
                    api.create(&kube::api::PostParams::default(), &object).await
                }
            })
            .buffer_unordered(CREATORS)
            .try_for_each(|_| async { Ok(()) })
            .await
            .unwrap();
    });
    let creating = creating.elapsed();
    eprintln!("created {OBJECTS} ConfigMaps in {creating:?}");
    assert!(
        creating < support::DEADLINE,
        "creating {OBJECTS} ConfigMaps took {creating:?}"
    );

    let before = sqlite_counters(&server);
    let deleting = Instant::now();
    let namespace_path = format!("/api/v1/namespaces/{namespace}");
    let deleted = raw.request("DELETE", &namespace_path, &[], None);
    assert_eq!(deleted.status, 200, "{}", deleted.text());
    // Fails at once, with its log, if the controller-manager exits meanwhile.
    manager.process.wait_for("the namespace to be gone", |_| {
        (raw.get(&namespace_path).status == 404).then_some(())
    });
    let after = sqlite_counters(&server);
    let deleting = deleting.elapsed();
    let left = raw.get(&format!("{namespace_path}/configmaps"));
    assert_eq!(left.status, 200, "{}", left.text());
    assert_eq!(left.json()["items"], json!([]), "ConfigMaps left behind");

    let (commits, writes) = (after.0 - before.0, after.1 - before.1);
    eprintln!("deleting the namespace took {deleting:?}: {commits} commits, {writes} writes");
    let objects = OBJECTS as u64;
    assert!(writes >= objects, "{writes} writes for {OBJECTS} deletes");
    // What the commits may be: the ConfigMaps' deletes, a commit per batch of DELETE_BATCH;
    // each other write of those seconds (the namespace's own updates and its removal, its
    // ServiceAccount and kube-root-ca.crt, Lease renewals, events), which the writes counter
    // counts, at most one commit of its own; and commits that carry no write: a compaction's
    // mark (the store compacts every minute) and writes refused by their precondition (a Lease
    // renewal or a status update that lost a race: nothing contends here, two are allowed).
    let batches = OBJECTS.div_ceil(genplane_storage::DELETE_BATCH) as u64;
    let others = writes - objects;
    let empty = deleting.as_secs() / 60 + 1 + 2;
    let bound = batches + others + empty;
    assert!(
        bound < objects / 10,
        "{others} other writes while the namespace went: the bound ({bound}) proves nothing"
    );
    assert!(
        commits <= bound,
        "{commits} commits for {OBJECTS} deletes in batches of {} and {others} other writes",
        genplane_storage::DELETE_BATCH
    );
}
