//! `genplane ccm-e2e` against the hermetic cluster: with a well-behaved fake CCM every test
//! whose capabilities the fake cloud declares passes and the rest skip with their reason
//! (and the JUnit report says so), through the exec plugin as through the Rust provider;
//! each fault switch of the fake CCM fails exactly the tests that should catch it, and the
//! fake cloud's load-balancer outage during a control-plane upgrade fails exactly the
//! upgrade test that watches a Service through it (`junit_upgrades.xml` says which).

#![allow(clippy::unwrap_used)]

mod support;

use std::sync::Arc;
use std::time::Instant;

use clap::FromArgMatches as _;
use genplane_ccm_e2e::specs::SPECS;
use genplane_ccm_e2e::suite::{Outcome, Progress, Report};
use genplane_ccm_e2e::{Options, run_suite};
use genplane_cmd_ccm_e2e::command;
use support::{Cluster, cloud_request, eventually};

const PLUGIN: &str = env!("CARGO_BIN_EXE_genplane-testcluster-provider");

/// Fast node heartbeats and monitoring, so that node loss shows within seconds.
const FAST_NODES: &[&str] = &genplane_test_cluster::FAST_NODE_FLAGS;

/// A version above the test cluster's build: its control plane can run any genplane version
/// of its Kubernetes version (`v1.33.0+genplane.X`), and its nodes any version.
const NEWER: &str = "v1.33.0+genplane.9.9.9";
/// A version below it.
const OLDER: &str = "v1.33.0+genplane.0.0.1";

/// The full names of the tests, by a distinctive part.
fn named(part: &str) -> &'static str {
    SPECS
        .iter()
        .find(|s| s.name.contains(part))
        .unwrap_or_else(|| panic!("no test named like {part:?}"))
        .name
}

/// Runs the suite against `cluster` with the exec plugin and `args`.
async fn ccm_e2e(cluster: &Cluster, dir: &std::path::Path, args: &[&str]) -> Report {
    ccm_e2e_with(cluster, dir, PLUGIN, args, std::future::pending()).await
}

/// Runs the suite against `cluster` with the exec plugin `plugin` and `args`, interrupted
/// when `interrupt` resolves: the command line the cluster printed for itself (its provider
/// plugin, config, external IP and timeout scale), with `plugin` for its provider.
async fn ccm_e2e_with(
    cluster: &Cluster,
    _dir: &std::path::Path,
    plugin: &str,
    args: &[&str],
    interrupt: impl std::future::Future<Output = ()>,
) -> Report {
    let mut argv = vec!["ccm-e2e".to_owned()];
    argv.extend(cluster.ccm_e2e.split_whitespace().map(|arg| {
        if arg == "--provider=exec:genplane-testcluster-provider" {
            format!("--provider=exec:{plugin}")
        } else {
            arg.to_owned()
        }
    }));
    assert!(
        argv.iter().any(|a| a.starts_with("--timeout-scale=")),
        "a fast cluster's command scales the timeouts: {argv:?}"
    );
    argv.extend(args.iter().map(|a| (*a).to_owned()));
    let matches = command().try_get_matches_from(argv).unwrap();
    let options = Options::from_arg_matches(&matches).unwrap();
    let progress: Progress = Arc::new(|line: &str| eprintln!("{line}"));
    run_suite(&options, &cluster.kubeconfig(), progress, interrupt)
        .await
        .unwrap()
}

/// The tests `names` run again on their own (one that failed only because a loaded machine
/// made a scaled-down wait too short passes then; a real failure fails again).
async fn run_alone(cluster: &Cluster, names: &[&str]) -> Report {
    let patterns: Vec<String> = names.iter().map(|n| regex_escaped(n)).collect();
    let dir = tempfile::tempdir().unwrap();
    ccm_e2e(
        cluster,
        dir.path(),
        &[&format!("--focus=^({})$", patterns.join("|"))],
    )
    .await
}

/// The cases of a JUnit file, in order: each name with `passed`, `failed` or `skipped`.
fn junit_cases(xml: &str) -> Vec<(String, &'static str)> {
    xml.split("<testcase name=\"")
        .skip(1)
        .map(|case| {
            let (name, rest) = case.split_once('"').unwrap();
            let body = rest.split("</testcase>").next().unwrap();
            let status = if body.contains("<failure") {
                "failed"
            } else if body.contains("<skipped") {
                "skipped"
            } else {
                "passed"
            };
            (name.replace("&apos;", "'"), status)
        })
        .collect()
}

/// The cases `junit_upgrades.xml` has for one upgrade: the upgrade's, then each upgrade
/// test's, with `service` the status of `service-upgrade`.
fn upgrade_cases(upgrade: &str, service: &'static str) -> Vec<(String, &'static str)> {
    vec![
        (format!("[sig-cloud-provider-gcp] {upgrade}"), "passed"),
        ("service-upgrade".to_owned(), service),
        ("[sig-apps] deployment-upgrade".to_owned(), "passed"),
        ("[sig-apps] replicaset-upgrade".to_owned(), "passed"),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_well_behaved_ccm_passes_every_test_the_cloud_can_run() {
    let cluster = Cluster::start_with(3, FAST_NODES);
    let dir = tempfile::tempdir().unwrap();
    let junit = dir.path().join("junit.xml");
    let reports = dir.path().join("reports");
    let started = Instant::now();
    let report = ccm_e2e(
        &cluster,
        dir.path(),
        &[
            "--parallel=3",
            &format!("--junit-report={}", junit.display()),
            &format!("--report-dir={}", reports.display()),
            &format!("--upgrade-target={NEWER}"),
        ],
    )
    .await;
    eprintln!(
        "ccm-e2e --parallel 3: {:.1}s",
        started.elapsed().as_secs_f64()
    );
    eprintln!("{}", report.summary());
    // Every test passes. One that failed only because a loaded machine made a scaled-down
    // wait too short passes when run again on its own; a real failure fails again. The
    // disruptive tests (upgrades, reboots, node deletion) change the cluster and count as they
    // ran.
    let failed: Vec<&str> = report
        .results
        .iter()
        .filter(|r| r.outcome != Outcome::Passed)
        .map(|r| r.name)
        .collect();
    if !failed.is_empty() {
        eprintln!("running again, alone: {failed:?}");
        for name in &failed {
            assert!(!name.contains("[Disruptive]"), "{name} failed");
        }
        let again = run_alone(&cluster, &failed).await;
        for name in &failed {
            assert_eq!(
                again.outcome(name),
                Some(&Outcome::Passed),
                "{name}, run again alone:\n{}",
                again.summary()
            );
        }
    }
    assert_eq!(report.results.len(), SPECS.len());
    assert_eq!(report.success(), failed.is_empty());
    let xml = std::fs::read_to_string(&junit).unwrap();
    let tests = SPECS.len();
    let failures = failed.len();
    assert!(
        xml.contains(&format!(
            "tests=\"{tests}\" failures=\"{failures}\" errors=\"0\" skipped=\"0\""
        )),
        "{xml}"
    );
    assert_eq!(
        std::fs::read_to_string(reports.join("junit_01.xml")).unwrap(),
        xml
    );
    // The upgrade tests of the three upgrades, each upgrade a suite of its own: every one
    // passed, the Service checked during the control-plane upgrades too (the fake cloud
    // declares its data plane survives them).
    let upgrades = std::fs::read_to_string(reports.join("junit_upgrades.xml")).unwrap();
    let mut expected = upgrade_cases("master-upgrade", "passed");
    expected.extend(upgrade_cases("cluster-upgrade", "passed"));
    expected.extend(upgrade_cases("cluster-downgrade", "passed"));
    assert_eq!(junit_cases(&upgrades), expected, "{upgrades}");
    for suite in ["Master upgrade", "Cluster upgrade", "Cluster downgrade"] {
        assert!(
            upgrades.contains(&format!(
                "<testsuite name=\"{suite}\" tests=\"4\" failures=\"0\""
            )),
            "{upgrades}"
        );
    }
    assert!(
        upgrades.contains("continuously hitting the pod through the service&apos;s LoadBalancer"),
        "{upgrades}"
    );
    // The upgrade tests left the cluster at the target version.
    let client = cluster.client().await;
    assert_eq!(client.apiserver_version().await.unwrap().git_version, NEWER);
}

/// The fake cloud's `--cloud-fault=lb-outage-during-control-plane-upgrade` (its load
/// balancers lose their backends while the control plane restarts, which the cloud declares
/// its data plane survives) fails the master upgrade through exactly its `service-upgrade`
/// part, which says when and for how long the Service did not answer; the upgrade itself and
/// the Deployment and ReplicaSet parts pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_load_balancer_outage_during_a_control_plane_upgrade_fails_the_service_upgrade_test() {
    let mut flags = FAST_NODES.to_vec();
    flags.push("--cloud-fault=lb-outage-during-control-plane-upgrade");
    let cluster = Cluster::start_with(3, &flags);
    let dir = tempfile::tempdir().unwrap();
    let reports = dir.path().join("reports");
    let master = named("master upgrade");
    let report = ccm_e2e(
        &cluster,
        dir.path(),
        &[
            "--focus=master upgrade",
            &format!("--report-dir={}", reports.display()),
            &format!("--upgrade-target={NEWER}"),
        ],
    )
    .await;
    eprintln!("{}", report.summary());
    let Some(Outcome::Failed(why)) = report.outcome(master) else {
        panic!("{master}: {}", report.summary());
    };
    for part in [
        "1 of 3 upgrade tests failed",
        "service-upgrade: during the upgrade: Service service-test did not answer through its load balancer",
        "during the control-plane upgrade, which the provider declares leaves Services reachable (DataPlaneSurvivesControlPlaneUpgrade)",
        "after the control-plane upgrade began",
    ] {
        assert!(why.contains(part), "{part:?} not in: {why}");
    }
    assert!(!why.contains("deployment-upgrade"), "{why}");
    let upgrades = std::fs::read_to_string(reports.join("junit_upgrades.xml")).unwrap();
    assert_eq!(
        junit_cases(&upgrades),
        upgrade_cases("master-upgrade", "failed"),
        "{upgrades}"
    );
    // The control plane was upgraded all the same.
    let client = cluster.client().await;
    assert_eq!(client.apiserver_version().await.unwrap().git_version, NEWER);
}

/// The in-process Rust provider gives the exec plugin's results (run serially: the serial
/// wall time is reported by the test's output). The upgrade target is older than the
/// cluster's build here, so that the downgrade test is a downgrade (the upgrade tests go to
/// it too: upstream ran them in separate jobs, with a target each).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rust_provider_gives_the_same_results_serially() {
    let cluster = Cluster::start_with(3, FAST_NODES);
    let provider =
        genplane_test_cluster::provider::FakeCloudProvider::new(cluster.cloud.parse().unwrap());
    let external = genplane_test_cluster::net::Plan::new(cluster.block)
        .external_ip_cidr()
        .0
        .octets();
    let settings = genplane_ccm_e2e::suite::Settings {
        scale: 0.05,
        upgrade_target: Some(OLDER.to_owned()),
        external_ip: format!("127.{}.0.1", external[1]),
        ..Default::default()
    };
    let progress: Progress = Arc::new(|line: &str| eprintln!("{line}"));
    let client = cluster.client().await;
    let started = Instant::now();
    let report = genplane_ccm_e2e::suite::run(
        client,
        Arc::new(provider),
        SPECS.iter().collect(),
        SPECS.len(),
        settings,
        progress,
        std::future::pending(),
    )
    .await
    .unwrap();
    eprintln!("ccm-e2e serially: {:.1}s", started.elapsed().as_secs_f64());
    let kinds: Vec<(&str, bool)> = report
        .results
        .iter()
        .map(|r| (r.name, r.outcome == Outcome::Passed))
        .collect();
    let expected: Vec<(&str, bool)> = SPECS.iter().map(|s| (s.name, true)).collect();
    assert_eq!(kinds, expected, "{}", report.summary());
    let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(cluster.client().await);
    for node in nodes.list(&Default::default()).await.unwrap() {
        assert_eq!(
            node.status.unwrap().node_info.unwrap().kubelet_version,
            OLDER
        );
    }
}

/// `text` with the characters a regular expression gives a meaning to escaped.
fn regex_escaped(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        if "\\.+*?()|[]{}^$#&-~".contains(c) {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}

/// Each fault switch of the fake CCM, and the tests that must catch it (all others pass; a
/// test that fails where it should not is run again on its own, and must fail again to
/// count).
/// The fake cloud's one switch has a test of its own (above): only an upgrade shows it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_ccm_fault_fails_exactly_the_tests_that_catch_it() {
    let table: &[(&str, &[&str])] = &[
        ("no-finalizer", &["cleanup finalizer"]),
        (
            "stale-ports",
            &[
                "ports of a TCP service",
                "ports of a UDP service",
                // Given node ports, the load balancer keeps forwarding to the pods it had.
                "without NodePort and change it",
            ],
        ),
        ("no-node-deletion", &["Nodes should be deleted"]),
        (
            "no-session-affinity",
            &["should have session affinity", "switch session affinity"],
        ),
        ("no-source-ranges", &["loadbalancer source ranges"]),
    ];
    for (fault, catchers) in table {
        let mut flags = FAST_NODES.to_vec();
        let switch = format!("--ccm-fault={fault}");
        flags.push(&switch);
        let cluster = Cluster::start_with(3, &flags);
        let dir = tempfile::tempdir().unwrap();
        // The rolling-update and upgrade tests take most of a run and no switch touches
        // what they check (the well-behaved run covers them).
        let report = ccm_e2e(
            &cluster,
            dir.path(),
            &[
                "--parallel=3",
                "--skip=during rolling update|grade should maintain a functioning cluster",
            ],
        )
        .await;
        let mut failed: Vec<&str> = report
            .results
            .iter()
            .filter(|r| matches!(r.outcome, Outcome::Failed(_)))
            .map(|r| r.name)
            .collect();
        let expected: Vec<&str> = SPECS
            .iter()
            .map(|s| s.name)
            .filter(|n| catchers.iter().any(|c| n.contains(c)))
            .collect();
        // A test the fault breaks fails every time; one that failed only because a loaded
        // machine made a scaled-down wait too short passes when run again on its own.
        let unexpected: Vec<&str> = failed
            .iter()
            .copied()
            .filter(|n| !expected.contains(n))
            .collect();
        if !unexpected.is_empty() {
            eprintln!(
                "--ccm-fault={fault}: running again, alone: {unexpected:?}\n{}",
                report.summary()
            );
            let again = run_alone(&cluster, &unexpected).await;
            failed.retain(|name| {
                expected.contains(name)
                    || matches!(again.outcome(name), Some(Outcome::Failed(_)) | None)
            });
        }
        assert_eq!(
            failed,
            expected,
            "--ccm-fault={fault}: {}",
            report.summary()
        );
        eprintln!("--ccm-fault={fault}:\n{}", report.summary());
    }
}

/// A plugin that crashes on one operation fails the test that needs it, with the plugin's
/// own words, and the run goes on: the other test passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_that_crashes_fails_its_test_and_the_run_goes_on() {
    let cluster = Cluster::start_with(3, FAST_NODES);
    let dir = tempfile::tempdir().unwrap();
    // The real plugin, except that describing a load balancer crashes.
    let plugin = dir.path().join("flaky-plugin.sh");
    std::fs::write(
        &plugin,
        format!(
            "#!/bin/sh\ninput=$(cat)\ncase \"$input\" in\n  *describeLoadBalancer*) echo 'the cloud API is down' >&2; exit 3;;\nesac\nprintf '%s' \"$input\" | exec {PLUGIN}\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&plugin, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let finalizer = named("cleanup finalizer");
    let collection = named("delete a collection of services");
    let report = ccm_e2e_with(
        &cluster,
        dir.path(),
        plugin.to_str().unwrap(),
        &["--focus=cleanup finalizer|delete a collection of services"],
        std::future::pending(),
    )
    .await;
    eprintln!("{}", report.summary());
    let outcome = |name: &str| {
        report
            .results
            .iter()
            .find(|r| r.name == name)
            .unwrap_or_else(|| panic!("{name} did not run: {}", report.summary()))
            .outcome
            .clone()
    };
    match outcome(finalizer) {
        Outcome::Failed(why) => assert!(
            why.contains("the cloud API is down") && why.contains("exit"),
            "{why}"
        ),
        other => panic!("{finalizer}: {other:?}"),
    }
    assert_eq!(outcome(collection), Outcome::Passed);
    assert!(!report.success());
}

/// Interrupted while a test holds a cloud load balancer, the runner cleans up before it
/// returns: the test is reported stopped, its namespace goes and so does the load balancer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_run_cleans_up_namespaces_and_load_balancers() {
    let cluster = Cluster::start_with(3, FAST_NODES);
    let dir = tempfile::tempdir().unwrap();
    let cloud = cluster.cloud.clone();
    // Interrupt once the test's load balancer exists in the cloud.
    let interrupt = async move {
        eventually("a load balancer in the cloud", || {
            let cloud = cloud.clone();
            async move {
                let (_, balancers) = tokio::task::spawn_blocking(move || {
                    cloud_request(&cloud, "GET", "/loadbalancers")
                })
                .await
                .unwrap();
                (!balancers.as_array()?.is_empty()).then_some(())
            }
        })
        .await;
    };
    let finalizer = named("cleanup finalizer");
    let report = ccm_e2e_with(
        &cluster,
        dir.path(),
        PLUGIN,
        &["--focus=cleanup finalizer"],
        interrupt,
    )
    .await;
    assert_eq!(report.stopped.as_deref(), Some("interrupted"));
    let result = report.results.iter().find(|r| r.name == finalizer).unwrap();
    assert_eq!(
        result.outcome,
        Outcome::Stopped("interrupted while it ran".into())
    );
    let (_, balancers) = cloud_request(&cluster.cloud, "GET", "/loadbalancers");
    assert_eq!(balancers, serde_json::json!([]), "load balancers left");
    let client = cluster.client().await;
    let namespaces: kube::Api<k8s_openapi::api::core::v1::Namespace> = kube::Api::all(client);
    eventually("the test's namespace gone", || {
        let namespaces = namespaces.clone();
        async move {
            let listed = namespaces
                .list(&kube::api::ListParams::default().labels("e2e-framework=ccm-e2e"))
                .await
                .ok()?;
            listed.items.is_empty().then_some(())
        }
    })
    .await;
}

/// `--clean-start` deletes what an interrupted run left (a labelled namespace holding a
/// load balancer) before it runs the tests, and nothing else; without it the leftovers stay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clean_start_deletes_the_namespaces_an_earlier_run_left() {
    use k8s_openapi::api::core::v1::{Namespace, Service};
    use kube::api::{Api, PostParams};

    let cluster = Cluster::start_with(2, FAST_NODES);
    let client = cluster.client().await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for (name, labelled) in [("ccm-e2e-7-left1", true), ("someone-elses", false)] {
        let mut namespace = serde_json::json!({"metadata": {"name": name}});
        if labelled {
            namespace["metadata"]["labels"] = serde_json::json!({"e2e-framework": "ccm-e2e"});
        }
        namespaces
            .create(
                &PostParams::default(),
                &serde_json::from_value(namespace).unwrap(),
            )
            .await
            .unwrap();
    }
    let services: Api<Service> = Api::namespaced(client.clone(), "ccm-e2e-7-left1");
    let service: Service = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "leftover"},
        "spec": {"type": "LoadBalancer", "ports": [{"port": 80, "targetPort": 8080}]}}))
    .unwrap();
    services
        .create(&PostParams::default(), &service)
        .await
        .unwrap();
    let balancers = || cloud_request(&cluster.cloud, "GET", "/loadbalancers").1;
    eventually("the leftover's load balancer", || async {
        (balancers().as_array()?.len() == 1).then_some(())
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let focus = "--focus=delete a collection of services";

    // Without --clean-start the leftovers stay.
    let report = ccm_e2e(&cluster, dir.path(), &[focus]).await;
    assert!(report.success(), "{}", report.summary());
    assert!(
        namespaces
            .get_opt("ccm-e2e-7-left1")
            .await
            .unwrap()
            .is_some()
    );

    let report = ccm_e2e(&cluster, dir.path(), &[focus, "--clean-start"]).await;
    assert!(report.success(), "{}", report.summary());
    assert!(
        namespaces
            .get_opt("ccm-e2e-7-left1")
            .await
            .unwrap()
            .is_none(),
        "the leftover namespace is still there after --clean-start"
    );
    assert_eq!(
        balancers(),
        serde_json::json!([]),
        "the leftover's load balancer"
    );
    assert!(namespaces.get_opt("someone-elses").await.unwrap().is_some());
}
