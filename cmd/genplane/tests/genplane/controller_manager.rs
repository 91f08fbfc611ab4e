//! `genplane controller-manager` against a real `genplane apiserver`, both as processes: the
//! controllers' effects as a user sees them through the API, and leader election between two
//! controller-managers.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::support::{self, Apiserver, ControllerManager, eventually_async};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, ResourceQuota, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;

const LEASE: &str = "genplane-controller-manager";
/// The gauge that says whether a controller-manager leads.
const LEADING: &str = "leader_election_master_status{name=\"genplane-controller-manager\"}";

fn start_cm(server: &Apiserver, log: &str, extra: &[&str]) -> ControllerManager {
    ControllerManager::start(server, log, extra)
}

/// Leader election timing for the tests: short, so that they stay short. Every margin a test
/// allows is a multiple of these.
const LEASE_DURATION: Duration = Duration::from_secs(4);
const RENEW_DEADLINE: Duration = Duration::from_secs(3);
const RETRY_PERIOD: Duration = Duration::from_millis(500);

fn leader_flags(lease: Duration, renew: Duration, retry: Duration) -> Vec<String> {
    let go = |d: Duration| format!("{}ms", d.as_millis());
    vec![
        format!("--leader-elect-lease-duration={}", go(lease)),
        format!("--leader-elect-renew-deadline={}", go(renew)),
        format!("--leader-elect-retry-period={}", go(retry)),
    ]
}

fn flags(owned: &[String]) -> Vec<&str> {
    owned.iter().map(String::as_str).collect()
}

fn fast() -> Vec<String> {
    leader_flags(LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD)
}

async fn admin(server: &Apiserver) -> kube::Client {
    server.client().await
}

async fn create_namespace(client: &kube::Client, name: &str) {
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn new_namespaces_get_the_default_service_account_and_the_root_ca() {
    let server = support::start();
    let client = admin(&server).await;
    let cm = start_cm(&server, "cm.log", &[]);
    let ca = std::fs::read_to_string(server.dir.path().join("data/pki/ca.crt")).unwrap();

    create_namespace(&client, "team-a").await;
    let accounts = Api::<ServiceAccount>::namespaced(client.clone(), "team-a");
    let config_maps = Api::<ConfigMap>::namespaced(client.clone(), "team-a");
    let first = eventually_async("the default service account", || async {
        accounts.get_opt("default").await.unwrap()
    })
    .await;
    let published = eventually_async("kube-root-ca.crt", || async {
        config_maps.get_opt("kube-root-ca.crt").await.unwrap()
    })
    .await;
    assert_eq!(published.data.as_ref().unwrap()["ca.crt"], ca);
    assert!(
        published.metadata.annotations.as_ref().unwrap()["kubernetes.io/description"]
            .starts_with("Contains a CA bundle")
    );
    // The namespaces that existed before get them too.
    for ns in ["default", "kube-system"] {
        let cms = Api::<ConfigMap>::namespaced(client.clone(), ns);
        eventually_async("kube-root-ca.crt in an existing namespace", || async {
            cms.get_opt("kube-root-ca.crt").await.unwrap()
        })
        .await;
        let sas = Api::<ServiceAccount>::namespaced(client.clone(), ns);
        eventually_async("default in an existing namespace", || async {
            sas.get_opt("default").await.unwrap()
        })
        .await;
    }

    // Deleted: made again.
    accounts
        .delete("default", &DeleteParams::default())
        .await
        .unwrap();
    let again = eventually_async("the service account made again", || async {
        accounts
            .get_opt("default")
            .await
            .unwrap()
            .filter(|sa| sa.metadata.uid != first.metadata.uid)
    })
    .await;
    assert!(again.metadata.uid.is_some());

    // Changed: restored; deleted: made again.
    let mut changed = published.clone();
    changed.data = Some(BTreeMap::from([(
        "ca.crt".to_owned(),
        "tampered".to_owned(),
    )]));
    config_maps
        .replace("kube-root-ca.crt", &PostParams::default(), &changed)
        .await
        .unwrap();
    eventually_async("the CA restored", || async {
        let cm = config_maps.get_opt("kube-root-ca.crt").await.unwrap()?;
        (cm.data?.get("ca.crt")? == &ca).then_some(())
    })
    .await;
    config_maps
        .delete("kube-root-ca.crt", &DeleteParams::default())
        .await
        .unwrap();
    eventually_async("the CA ConfigMap made again", || async {
        let cm = config_maps.get_opt("kube-root-ca.crt").await.unwrap()?;
        (cm.metadata.uid != published.metadata.uid && cm.data?.get("ca.crt")? == &ca).then_some(())
    })
    .await;

    // The ops endpoints.
    assert_eq!(cm.get("/healthz"), (200, "ok".to_owned()));
    assert_eq!(cm.get("/livez"), (200, "ok".to_owned()));
    let (status, body) = cm.get("/readyz?verbose");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("[+]leaderElection ok"), "{body}");
    // The gauge follows the election within a second.
    eventually_async("leader_election_master_status 1", || async {
        let (status, body) = cm.get("/metrics");
        (status == 200
            && body
                .contains("leader_election_master_status{name=\"genplane-controller-manager\"} 1"))
        .then_some(())
    })
    .await;
    // Its help reads as upstream's, and no help text ends twice.
    let (_, body) = cm.get("/metrics");
    assert!(
        body.contains(
            "# HELP leader_election_master_status Gauge of if the reporting system is master of \
             the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string \
             used to identify the lease.\n"
        ),
        "{body}"
    );
    assert!(
        !body
            .lines()
            .any(|l| l.starts_with("# HELP") && l.ends_with("..")),
        "{body}"
    );
}

fn quota_used(quota: &ResourceQuota) -> BTreeMap<String, String> {
    quota
        .status
        .as_ref()
        .and_then(|s| s.used.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, v.0))
        .collect()
}

fn pairs(items: &[(&str, &str)]) -> BTreeMap<String, String> {
    items
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn resource_quota_status_follows_creates_and_deletes() {
    let server = support::start();
    let client = admin(&server).await;
    // Only the quota controller, so that no other controller adds objects to count.
    let _cm = start_cm(
        &server,
        "cm.log",
        &["--controllers=resourcequota", "--leader-elect=false"],
    );
    create_namespace(&client, "quota").await;
    let quotas = Api::<ResourceQuota>::namespaced(client.clone(), "quota");
    let quota: ResourceQuota = serde_json::from_value(json!({
        "metadata": {"name": "objects"},
        "spec": {"hard": {
            "configmaps": "5",
            "count/secrets": "3",
            "count/leases.coordination.k8s.io": "2",
            "cpu": "1",
        }},
    }))
    .unwrap();
    quotas.create(&PostParams::default(), &quota).await.unwrap();
    let wait_used = |want: BTreeMap<String, String>| {
        let quotas = quotas.clone();
        async move {
            support::eventually_ok_async("the quota's status.used", || async {
                let q = quotas.get("objects").await.unwrap();
                let used = quota_used(&q);
                if used == want {
                    Ok(q)
                } else {
                    Err(format!("status.used is {used:?}, want {want:?}"))
                }
            })
            .await
        }
    };
    let q = wait_used(pairs(&[
        ("configmaps", "0"),
        ("count/secrets", "0"),
        ("count/leases.coordination.k8s.io", "0"),
    ]))
    .await;
    let status = q.status.unwrap();
    assert_eq!(
        status.hard,
        q.spec.unwrap().hard,
        "status.hard is spec.hard"
    );

    let config_maps = Api::<ConfigMap>::namespaced(client.clone(), "quota");
    for i in 0..3 {
        let cm: ConfigMap =
            serde_json::from_value(json!({"metadata": {"name": format!("cm-{i}")}})).unwrap();
        config_maps
            .create(&PostParams::default(), &cm)
            .await
            .unwrap();
    }
    let secret: Secret =
        serde_json::from_value(json!({"metadata": {"name": "s"}, "stringData": {"a": "b"}}))
            .unwrap();
    Api::<Secret>::namespaced(client.clone(), "quota")
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    wait_used(pairs(&[
        ("configmaps", "3"),
        ("count/secrets", "1"),
        ("count/leases.coordination.k8s.io", "0"),
    ]))
    .await;
    config_maps
        .delete("cm-1", &DeleteParams::default())
        .await
        .unwrap();
    let lease: Lease = serde_json::from_value(json!({"metadata": {"name": "l"}})).unwrap();
    Api::<Lease>::namespaced(client.clone(), "quota")
        .create(&PostParams::default(), &lease)
        .await
        .unwrap();
    wait_used(pairs(&[
        ("configmaps", "2"),
        ("count/secrets", "1"),
        ("count/leases.coordination.k8s.io", "1"),
    ]))
    .await;
    // Objects of other namespaces do not count: once a later change in the quota's namespace
    // shows, the ConfigMap made in another namespace before it has not been counted.
    let other: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "x"}})).unwrap();
    Api::<ConfigMap>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &other)
        .await
        .unwrap();
    let later: Secret = serde_json::from_value(json!({"metadata": {"name": "later"}})).unwrap();
    Api::<Secret>::namespaced(client.clone(), "quota")
        .create(&PostParams::default(), &later)
        .await
        .unwrap();
    wait_used(pairs(&[
        ("configmaps", "2"),
        ("count/secrets", "2"),
        ("count/leases.coordination.k8s.io", "1"),
    ]))
    .await;
}

fn rule_resources(role: &ClusterRole) -> Vec<String> {
    let mut out: Vec<String> = role
        .rules
        .iter()
        .flatten()
        .flat_map(|r| r.resources.clone().unwrap_or_default())
        .collect();
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn an_aggregated_cluster_role_picks_up_labelled_roles() {
    let server = support::start();
    let client = admin(&server).await;
    let _cm = start_cm(
        &server,
        "cm.log",
        &[
            "--controllers=clusterrole-aggregation",
            "--leader-elect=false",
        ],
    );
    let roles = Api::<ClusterRole>::all(client.clone());
    let create = |value: serde_json::Value| {
        let roles = roles.clone();
        async move {
            let role: ClusterRole = serde_json::from_value(value).unwrap();
            roles.create(&PostParams::default(), &role).await.unwrap();
        }
    };
    create(json!({
        "metadata": {"name": "monitoring"},
        "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"example.com/aggregate-to-monitoring": "true"}}]},
    }))
    .await;
    create(json!({
        "metadata": {"name": "monitoring-configmaps", "labels": {"example.com/aggregate-to-monitoring": "true"}},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}],
    }))
    .await;
    let wait_resources = |want: &'static [&'static str]| {
        let roles = roles.clone();
        async move {
            eventually_async("the aggregated rules", || async {
                let role = roles.get("monitoring").await.unwrap();
                (rule_resources(&role) == want).then_some(role)
            })
            .await
        }
    };
    wait_resources(&["configmaps"]).await;
    // A new labelled role is picked up; an unlabelled one is not.
    create(json!({
        "metadata": {"name": "monitoring-secrets", "labels": {"example.com/aggregate-to-monitoring": "true"}},
        "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["list"]}],
    }))
    .await;
    create(json!({
        "metadata": {"name": "unrelated"},
        "rules": [{"apiGroups": [""], "resources": ["leases"], "verbs": ["list"]}],
    }))
    .await;
    wait_resources(&["configmaps", "secrets"]).await;
    // A deleted one is dropped.
    roles
        .delete("monitoring-configmaps", &DeleteParams::default())
        .await
        .unwrap();
    let role = wait_resources(&["secrets"]).await;
    assert_eq!(role.rules.unwrap()[0].verbs, ["list"]);
    // Rules written by hand are put back.
    let mut edited = roles.get("monitoring").await.unwrap();
    edited.rules = Some(Vec::new());
    roles
        .replace("monitoring", &PostParams::default(), &edited)
        .await
        .unwrap();
    wait_resources(&["secrets"]).await;
}

/// The Lease's (holder, transitions, renewTime, acquireTime).
fn record(lease: &Lease) -> (String, i32, Option<String>, Option<String>, i32) {
    let spec = lease.spec.clone().unwrap_or_default();
    (
        spec.holder_identity.unwrap_or_default(),
        spec.lease_transitions.unwrap_or_default(),
        spec.renew_time.map(|t| t.0.to_string()),
        spec.acquire_time.map(|t| t.0.to_string()),
        spec.lease_duration_seconds.unwrap_or_default(),
    )
}

fn parse_time(text: &str) -> k8s_openapi::jiff::Timestamp {
    text.parse().unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_killed_leader_is_replaced_within_the_lease_duration() {
    let server = support::start();
    let client = admin(&server).await;
    let leases = Api::<Lease>::namespaced(client.clone(), "kube-system");
    let fast = fast();
    let mut first = start_cm(&server, "cm-a.log", &flags(&fast));
    let (holder_a, transitions_a, ..) = eventually_async("the first leader", || async {
        let lease = leases.get_opt(LEASE).await.unwrap()?;
        let r = record(&lease);
        (!r.0.is_empty()).then_some(r)
    })
    .await;
    assert!(
        holder_a.contains('_'),
        "identity is <hostname>_<uuid>: {holder_a}"
    );
    assert_eq!(transitions_a, 0, "a new Lease starts with no transitions");
    let mut second = start_cm(&server, "cm-b.log", &flags(&fast));
    // The second one is ready as a follower, and waits: the first keeps renewing the Lease
    // for a retry period of the second's and more.
    let follower = eventually_async("the second one ready as a follower", || async {
        let (status, body) = second.get("/readyz?verbose");
        let (_, metrics) = second.get("/metrics");
        (status == 200
            && metrics
                .contains("leader_election_master_status{name=\"genplane-controller-manager\"} 0"))
        .then_some(body)
    })
    .await;
    assert!(follower.contains("[+]leaderElection ok"), "{follower}");
    let ready_at = k8s_openapi::jiff::Timestamp::now();
    let lease = eventually_async("a renewal by the first after the second waited", || async {
        let lease = leases.get(LEASE).await.unwrap();
        let (holder, transitions, renewed, ..) = record(&lease);
        assert_eq!((holder.as_str(), transitions), (holder_a.as_str(), 0));
        (parse_time(renewed.as_deref()?) > ready_at + RETRY_PERIOD * 2).then_some(lease)
    })
    .await;
    let renewed = record(&lease).2;
    assert_eq!(
        lease.spec.as_ref().unwrap().lease_duration_seconds,
        Some(i32::try_from(LEASE_DURATION.as_secs()).unwrap())
    );

    // SIGKILL the leader: it cannot release the Lease.
    let mut last_renew_a = parse_time(&renewed.unwrap());
    first.process.kill();
    let killed = Instant::now();
    let killed_at = k8s_openapi::jiff::Timestamp::now();
    let mut takeover = None;
    while killed.elapsed() < support::DEADLINE {
        let lease = leases.get(LEASE).await.unwrap();
        let r = record(&lease);
        if r.0 == holder_a {
            last_renew_a = parse_time(r.2.as_deref().unwrap());
        } else {
            takeover = Some((killed.elapsed(), r));
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (elapsed, (holder_b, transitions_b, _, acquired_b, _)) =
        takeover.expect("the second controller-manager did not take the Lease");
    assert_ne!(holder_b, holder_a);
    assert!(!holder_b.is_empty());
    assert_eq!(
        transitions_b, 1,
        "leaseTransitions counts the change of holder"
    );
    // About a lease duration after the last renewal (plus retry periods with jitter, on a
    // machine that may be busy): well within two.
    assert!(elapsed < LEASE_DURATION * 2, "took {elapsed:?}");
    // No overlap: the new leader acquired after the old one's Lease expired, and after it died.
    let acquired_b = parse_time(&acquired_b.unwrap());
    assert!(
        acquired_b >= last_renew_a + LEASE_DURATION,
        "acquired at {acquired_b}, the old leader renewed at {last_renew_a}"
    );
    assert!(acquired_b >= killed_at);

    // The new leader runs the controllers.
    create_namespace(&client, "after-failover").await;
    let sas = Api::<ServiceAccount>::namespaced(client.clone(), "after-failover");
    eventually_async("the new leader's service account", || async {
        sas.get_opt("default").await.unwrap()
    })
    .await;

    // SIGTERM: the leader stops and releases the Lease (no holder, a one-second duration).
    second.process.terminate();
    let status = second.process.wait_exit(support::DEADLINE);
    assert!(status.success(), "{status}");
    let (holder, transitions, _, _, duration) = record(&leases.get(LEASE).await.unwrap());
    assert_eq!(holder, "");
    assert_eq!(duration, 1);
    assert_eq!(transitions, 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_leader_that_cannot_renew_stops() {
    let server = support::start();
    let client = admin(&server).await;
    let leases = Api::<Lease>::namespaced(client.clone(), "kube-system");
    // A lease much longer than the renew deadline: the margin the test allows is their
    // difference, not a guess at how busy the machine is.
    let lease = Duration::from_secs(10);
    let timing = leader_flags(lease, Duration::from_secs(2), RETRY_PERIOD);
    let mut cm = start_cm(&server, "cm.log", &flags(&timing));
    eventually_async("the leader", || async {
        let lease = leases.get_opt(LEASE).await.unwrap()?;
        (!record(&lease).0.is_empty()).then_some(())
    })
    .await;
    // The API server goes away: the leader cannot renew and exits (after its renew deadline)
    // before its Lease expires for the others.
    let stopped = Instant::now();
    support::stop(server);
    let status = cm.process.wait_exit(support::DEADLINE);
    assert_eq!(status.code(), Some(1), "{status}");
    let after = stopped.elapsed();
    assert!(after < lease, "stopped after {after:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_leader_frozen_until_another_took_over_wakes_no_longer_leading() {
    let server = support::start();
    let fast = fast();
    let mut first = start_cm(&server, "cm-a.log", &flags(&fast));
    let leads = |cm: &ControllerManager| {
        let (_, metrics) = cm.get("/metrics");
        support::sample::<u8>(&metrics, LEADING) == Some(1)
    };
    support::eventually_holds("the first to lead", || leads(&first));
    let second = start_cm(&server, "cm-b.log", &flags(&fast));
    // Frozen (as `docker pause` or SIGSTOP freeze a process) until the second leads.
    first.process.signal("STOP");
    support::eventually_holds("the second to lead", || leads(&second));
    first.process.signal("CONT");
    // From its first answer on, the first says it does not lead; it stops, as one that could
    // not renew does, rather than lead beside the second until its renew deadline.
    let woke = Instant::now();
    let status = loop {
        let (code, metrics) = first.get("/metrics");
        if code == 200 {
            assert_eq!(
                support::sample::<u8>(&metrics, LEADING),
                Some(0),
                "the woken leader says it leads, beside the second"
            );
        }
        if let Some(status) = first.process.exited() {
            break status;
        }
        assert!(
            woke.elapsed() < support::DEADLINE,
            "the woken leader runs on"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(1), "{status}");
    assert!(
        first.process.output().contains("leaderelection lost"),
        "{}",
        first.process.tail()
    );
    assert!(leads(&second), "the second stopped leading");
}
