//! Two `genplane all-in-one` processes on one etcd (a k3s-style HA pair): both serve the API,
//! exactly one runs the controllers, on the controller-manager's Lease; SIGKILL it and the
//! other takes the Lease over and runs them.

#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use crate::support::{BIN, Process, etcd, eventually, ok, text};

/// The Lease both processes elect on: the controller-manager's.
const LEASE: &str = "genplane-controller-manager";
/// The controller-manager's lease duration (upstream's default), which all-in-one keeps.
const LEASE_DURATION: Duration = Duration::from_secs(15);
/// The most a candidate waits between two tries: the retry period (2 s) with client-go's
/// jitter (up to 1.2 times more).
const RETRY_MAX: Duration = Duration::from_millis(4400);

struct Member {
    name: &'static str,
    process: Process,
    kubeconfig: PathBuf,
    identity: String,
}

impl Member {
    fn start(name: &'static str, dir: &tempfile::TempDir, endpoint: &str) -> Member {
        let mut command = Command::new(BIN);
        command
            .args(["all-in-one", "--bind-address=127.0.0.1", "--secure-port=0"])
            .arg("--storage-backend=etcd")
            .arg(format!("--etcd-servers={endpoint}"))
            .arg(format!("--data-dir={}", dir.path().join(name).display()));
        let log = dir.path().join(format!("{name}.log"));
        let mut process = Process::spawn(name, command, &log);
        let kubeconfig = process.wait_for("the export KUBECONFIG line", |p| {
            p.output()
                .lines()
                .find_map(|line| line.strip_prefix("export KUBECONFIG=").map(PathBuf::from))
        });
        // The candidate's identity, as it writes it in the Lease.
        let identity = process.wait_for("its leader-election identity", |p| {
            p.output()
                .lines()
                .filter(|line| line.contains("starting leader election"))
                .find_map(|line| {
                    let rest = line.split("identity=").nth(1)?;
                    Some(rest.split_whitespace().next()?.trim_matches('"').to_owned())
                })
        });
        Member {
            name,
            process,
            kubeconfig,
            identity,
        }
    }

    fn kubectl(&self, args: &[&str]) -> Output {
        crate::support::kubectl_command("kubectl", &self.kubeconfig)
            .args(args)
            .output()
            .unwrap()
    }

    /// Merge-patches the Lease through this member's API server.
    fn patch_lease(&self, patch: &str) {
        ok(self.kubectl(&[
            "patch",
            "lease",
            "-n",
            "kube-system",
            LEASE,
            "--type=merge",
            "-p",
            patch,
        ]));
    }

    /// The Lease's holder, as this member's API server reads it.
    fn holder(&self) -> Option<String> {
        let out = self.kubectl(&[
            "get",
            "lease",
            "-n",
            "kube-system",
            LEASE,
            "-o",
            "jsonpath={.spec.holderIdentity}",
        ]);
        out.status
            .success()
            .then(|| text(&out).trim().to_owned())
            .filter(|h| !h.is_empty())
    }
}

/// The lines of a member's log that show controller activity.
fn controller_lines(process: &Process) -> Vec<String> {
    process
        .output()
        .lines()
        .filter(|l| {
            l.contains("starting controller")
                || l.contains("created the default service account")
                || l.contains("published kube-root-ca.crt")
        })
        .map(str::to_owned)
        .collect()
}

/// Whether a member's log says it created `namespace`'s default service account and
/// published its CA bundle there.
fn populated(process: &Process, namespace: &str) -> bool {
    let lines = controller_lines(process);
    let names = |l: &str| {
        l.split_whitespace().any(|w| {
            w == format!("namespace={namespace}") || w == format!("namespace=\"{namespace}\"")
        })
    };
    let did = |what: &str| lines.iter().any(|l| l.contains(what) && names(l));
    did("created the default service account") && did("published kube-root-ca.crt")
}

/// Waits until `namespace` has its `default` ServiceAccount and `kube-root-ca.crt`, as
/// `member` reads them.
fn wait_populated(member: &mut Member, namespace: &str) {
    let kubeconfig = member.kubeconfig.clone();
    member.process.wait_for(
        &format!("the service account and CA bundle of {namespace}"),
        |_| {
            let get = |args: &[&str]| {
                crate::support::kubectl_command("kubectl", &kubeconfig)
                    .args(args)
                    .output()
                    .unwrap()
                    .status
                    .success()
            };
            (get(&["get", "serviceaccount", "default", "-n", namespace])
                && get(&["get", "configmap", "kube-root-ca.crt", "-n", namespace]))
            .then_some(())
        },
    );
}

#[test]
fn two_all_in_one_on_one_etcd_run_the_controllers_once_and_fail_over() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let etcd = etcd(&runtime);
    let endpoint = etcd.endpoint();
    let dir = tempfile::tempdir().unwrap();
    let a = Member::start("all-in-one-a", &dir, &endpoint);
    let b = Member::start("all-in-one-b", &dir, &endpoint);
    assert_ne!(a.identity, b.identity);

    // One of them holds the controller-manager's Lease; both API servers say so.
    let holder = eventually("a holder of the Lease", || {
        a.holder().filter(|h| *h == a.identity || *h == b.identity)
    });
    assert_eq!(b.holder().as_deref(), Some(holder.as_str()));
    let (mut leader, mut follower) = if holder == a.identity { (a, b) } else { (b, a) };
    leader.process.wait_for("its controllers starting", |p| {
        p.output().contains("starting controller").then_some(())
    });

    // A namespace made through the follower's API server is populated by the leader alone.
    ok(follower.kubectl(&["create", "namespace", "ha-before"]));
    wait_populated(&mut follower, "ha-before");
    leader
        .process
        .wait_for("its log of populating ha-before", |p| {
            populated(p, "ha-before").then_some(())
        });
    assert_eq!(
        controller_lines(&follower.process),
        Vec::<String>::new(),
        "the follower ({}) shows controller activity",
        follower.name
    );
    let accounts =
        ok(follower.kubectl(&["get", "serviceaccounts", "-n", "ha-before", "-o", "name"]));
    assert_eq!(
        accounts.lines().collect::<Vec<_>>(),
        ["serviceaccount/default"]
    );
    let config_maps = ok(follower.kubectl(&["get", "configmaps", "-n", "ha-before", "-o", "name"]));
    assert_eq!(
        config_maps.lines().collect::<Vec<_>>(),
        ["configmap/kube-root-ca.crt"]
    );

    // SIGKILL the leader: the follower takes the Lease once it has expired (the lease duration
    // after the last renewal it saw, plus a retry), then runs the controllers. The bound has
    // the slack of a loaded machine (each look at the Lease is a kubectl run): it tells a
    // takeover from a follower that waits for ever or for several lease durations.
    let bound = LEASE_DURATION * 2 + RETRY_MAX;
    leader.process.kill();
    let killed = Instant::now();
    let new_holder = eventually("the Lease taken over", || {
        follower.holder().filter(|h| *h == follower.identity)
    });
    let failover = killed.elapsed();
    assert_eq!(new_holder, follower.identity);
    assert!(
        failover <= bound,
        "the follower took the Lease {failover:?} after the leader died"
    );
    eprintln!("all-in-one failover: the Lease changed hands {failover:.1?} after SIGKILL");
    follower.process.wait_for("its controllers starting", |p| {
        p.output().contains("starting controller").then_some(())
    });

    // The controllers keep working: a namespace made after the failover is populated, by the
    // new leader.
    ok(follower.kubectl(&["create", "namespace", "ha-after"]));
    wait_populated(&mut follower, "ha-after");
    follower
        .process
        .wait_for("its log of populating ha-after", |p| {
            populated(p, "ha-after").then_some(())
        });
    drop(etcd);
}

/// A leader whose Lease is taken from it (here: rewritten to another holder, as an outage
/// longer than the renew deadline would leave it) stops its controllers and campaigns again,
/// while its API server serves on; once the Lease is free, the controllers run again.
#[test]
fn an_all_in_one_that_loses_the_lease_serves_on_and_campaigns_again() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let etcd = etcd(&runtime);
    let endpoint = etcd.endpoint();
    let dir = tempfile::tempdir().unwrap();
    let a = Member::start("all-in-one-a", &dir, &endpoint);
    let b = Member::start("all-in-one-b", &dir, &endpoint);
    let holder = eventually("a holder of the Lease", || {
        a.holder().filter(|h| *h == a.identity || *h == b.identity)
    });
    let (mut leader, follower) = if holder == a.identity { (a, b) } else { (b, a) };
    leader.process.wait_for("its controllers starting", |p| {
        p.output().contains("starting controller").then_some(())
    });

    follower.patch_lease(r#"{"spec":{"holderIdentity":"intruder","leaseDurationSeconds":3600}}"#);
    // It gives up after the renew deadline (10 s), says so, and stands again.
    leader.process.wait_for("its log of losing the Lease", |p| {
        p.output()
            .contains("the controllers stopped; campaigning again")
            .then_some(())
    });
    assert!(
        leader.process.exited().is_none(),
        "{}",
        leader.process.tail()
    );
    // Both API servers still serve, and nobody takes a Lease that is not free.
    ok(leader.kubectl(&["get", "namespaces"]));
    ok(follower.kubectl(&["get", "namespaces"]));
    assert_eq!(follower.holder().as_deref(), Some("intruder"));
    ok(leader.kubectl(&["create", "namespace", "ha-orphaned"]));
    std::thread::sleep(Duration::from_secs(3));
    let orphaned = leader.kubectl(&["get", "serviceaccount", "default", "-n", "ha-orphaned"]);
    assert!(
        !orphaned.status.success(),
        "no controller runs while the Lease is someone else's"
    );

    // The Lease freed: one of them takes it and the controllers run again.
    follower.patch_lease(r#"{"spec":{"holderIdentity":null}}"#);
    eventually("a member to hold the Lease again", || {
        follower
            .holder()
            .filter(|h| *h == leader.identity || *h == follower.identity)
    });
    wait_populated(&mut leader, "ha-orphaned");
    drop(etcd);
}
