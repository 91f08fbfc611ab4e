//! `--list`, `--dry-run`, `--focus`, `--skip` and `--label-filter` as documented, without a
//! cluster (a dry run does not touch it).

#![allow(clippy::unwrap_used)]

use std::sync::{Arc, Mutex};

use clap::{Args as _, Command, FromArgMatches as _};
use genplane_ccm_e2e::specs::SPECS;
use genplane_ccm_e2e::suite::{Outcome, Progress};
use genplane_ccm_e2e::{Options, list, run_suite, selected};

/// The options of the command line `ccm-e2e <args>`.
fn cli(args: &[&str]) -> Options {
    let argv = std::iter::once("ccm-e2e").chain(args.iter().copied());
    let command = Options::augment_args(Command::new("ccm-e2e"));
    Options::from_arg_matches(&command.try_get_matches_from(argv).unwrap()).unwrap()
}

fn names(args: &[&str]) -> Vec<&'static str> {
    selected(&cli(args).selection().unwrap())
        .iter()
        .map(|s| s.name)
        .collect()
}

#[test]
fn focus_skip_and_label_filter_select_by_full_name_and_labels() {
    assert_eq!(names(&[]).len(), SPECS.len());
    let lb = names(&["--focus", r"\[Feature:LoadBalancer\]"]);
    assert_eq!(lb.len(), 12);
    assert!(lb.iter().all(|n| n.contains("LoadBalancers")));
    let no_udp = names(&[
        "--focus",
        r"\[Feature:LoadBalancer\]",
        "--skip",
        "UDP|affinity",
    ]);
    assert_eq!(no_udp.len(), 9, "{no_udp:?}");
    let serial = names(&["--label-filter", "Serial && !Feature:Upgrade"]);
    assert_eq!(serial.len(), 3, "{serial:?}");
    assert!(serial.iter().any(|n| n.contains("cluster downgrade")));
    let upgrades = names(&["--label-filter", "Feature:Upgrade || Feature:Downgrade"]);
    assert_eq!(upgrades.len(), 3, "{upgrades:?}");
    assert!(
        upgrades
            .iter()
            .all(|n| n.contains("grade should maintain a functioning cluster"))
    );
    assert_eq!(names(&["--label-filter", "conformance"]).len(), 5);
    assert!(cli(&["--focus", "("]).selection().is_err());
    assert!(cli(&["--label-filter", "Slow &&"]).selection().is_err());
}

#[test]
fn list_shows_names_labels_and_needs() {
    let text = list(&selected(
        &cli(&["--focus", "cleanup finalizer"]).selection().unwrap(),
    ));
    assert_eq!(
        text,
        format!(
            "[sig-network] LoadBalancers [Feature:LoadBalancer] should handle load balancer cleanup finalizer for service [Slow]\n    labels: Feature:LoadBalancer, Slow\n    needs: LoadBalancer\n1 of {} tests\n",
            SPECS.len()
        )
    );
}

#[tokio::test]
async fn a_dry_run_walks_the_selection_against_the_capabilities_only() {
    let dir = tempfile::tempdir().unwrap();
    // A kubeconfig of a server that does not exist: a dry run never calls it.
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\nusers: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n",
    )
    .unwrap();
    let junit = dir.path().join("junit.xml");
    let lines = Arc::new(Mutex::new(Vec::new()));
    let seen = lines.clone();
    let progress: Progress = Arc::new(move |line: &str| seen.lock().unwrap().push(line.to_owned()));
    let args = cli(&[
        "--dry-run",
        "--provider=skeleton",
        "--skip=UDP",
        &format!("--junit-report={}", junit.display()),
    ]);
    let report = run_suite(&args, &kubeconfig, progress, std::future::pending())
        .await
        .unwrap();
    assert_eq!(report.results.len(), SPECS.len() - 1);
    for result in &report.results {
        let spec = SPECS.iter().find(|s| s.name == result.name).unwrap();
        if spec.needs.is_empty() {
            assert_eq!(result.outcome, Outcome::DryRun, "{}", result.name);
        } else {
            assert!(
                matches!(&result.outcome, Outcome::Skipped(r) if r.starts_with("the provider does not declare the capabilit")),
                "{}: {:?}",
                result.name,
                result.outcome
            );
        }
    }
    assert!(report.success());
    let lines = lines.lock().unwrap();
    let head = format!(
        "ccm-e2e: {} of {} tests selected; the provider declares: nothing",
        SPECS.len() - 1,
        SPECS.len()
    );
    assert!(lines[0].starts_with(&head), "{}", lines[0]);
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("WOULD RUN [sig-network] Services should delete a collection"))
    );
    assert!(
        std::fs::read_to_string(&junit)
            .unwrap()
            .contains("<skipped message=\"dry run\"/>")
    );
}
