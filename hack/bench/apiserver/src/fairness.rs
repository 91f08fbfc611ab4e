//! Fairness under a flood (`--only fairness`, run by `hack/bench/fairness.sh`): what a noisy
//! tenant does to a steady one and to a controller's Lease renewals, with API Priority and
//! Fairness and with the in-flight limits alone (`--enable-priority-and-fairness=false`), one
//! SQLite apiserver each, measured one after the other with the same load.
//!
//! On each server, three bearer-token users:
//! - `tenant-steady` (bound to `edit`): paced GETs and creates of ConfigMaps in its namespace,
//!   `--fair-steady-rate` a second, each latency recorded;
//! - `system:kube-controller-manager` (bound to `cluster-admin`; upstream's suggested
//!   `system-leader-election` FlowSchema sends its Lease requests to `leader-election`):
//!   a Lease renewal every 2 s as leader election makes it (a GET, then an update of
//!   `spec.renewTime`);
//! - `tenant-flood` (bound to `edit`): `--fair-flood-connections` connections, each sending
//!   back to back three LISTs of a namespace of `--fair-objects` ConfigMaps (no limit) for
//!   one create.
//!
//! Each server runs the steady tenant and the renewals for `--fair-seconds` without the
//! flood, then as long with it. The steady tenant and the renewals run on a thread and a
//! runtime of their own, with connections of their own: their latency is the server's, not
//! this program's time spent reading the flood's answers. With `--fair-pin` the server runs
//! on CPU 0 alone and this program on the others, so that the flood's client work does not
//! take the server's CPU either. Reported per server: the steady tenant's p50 and p99 latency
//! in both phases and their ratio, its failures, the renewals that failed, and what the
//! flood got (served, 429, other).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use bytes::Bytes;
use hyper::{Method, StatusCode};

use crate::client::Client;
use crate::process::Server;
use crate::{Args, configmap, configmaps, create_namespace};

const FLOOD_NAMESPACE: &str = "bench-fair-flood";
const STEADY_NAMESPACE: &str = "bench-fair-steady";
const STEADY_TOKEN: &str = "bench-fair-steady-token";
const FLOOD_TOKEN: &str = "bench-fair-flood-token";
const LEASE_TOKEN: &str = "bench-fair-lease-token";
const LEASE: &str = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/bench-fair";

fn binding(name: &str, role: &str, user: &str) -> Bytes {
    Bytes::from(
        serde_json::json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": user}],
        })
        .to_string(),
    )
}

/// Now as a `metav1.MicroTime`.
fn now_micro() -> String {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let seconds = genplane_apimachinery::meta::rfc3339(since.as_secs() as i64);
    format!(
        "{}.{:06}Z",
        seconds.trim_end_matches('Z'),
        since.subsec_micros()
    )
}

/// What one phase measured.
#[derive(Debug, Default)]
struct Phase {
    steady: Vec<Duration>,
    steady_failed: usize,
    renewals: usize,
    renewals_failed: usize,
    renewal_slowest: Duration,
    flood_served: usize,
    flood_refused: usize,
    flood_other: usize,
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let index = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[index]
}

/// One server under test and its token users' clients.
struct Side {
    label: &'static str,
    server: Server,
    /// The server's URL and the TLS configuration of its token users' connections.
    base: (String, Arc<rustls::ClientConfig>),
}

impl Side {
    async fn start(
        args: &Args,
        dir: &Path,
        label: &'static str,
        extra: &[String],
        tokens: &Path,
    ) -> anyhow::Result<Self> {
        let data_dir = dir.join(format!("fairness-{label}"));
        let mut flags = vec![format!("--token-auth-file={}", tokens.display())];
        if let Some(limit) = args.fair_max_inflight {
            flags.push(format!("--max-requests-inflight={limit}"));
            flags.push(format!(
                "--max-mutating-requests-inflight={}",
                (limit / 2).max(1)
            ));
        }
        flags.extend_from_slice(extra);
        let server = Server::apiserver(&args.genplane(), &data_dir, &flags)
            .await
            .with_context(|| format!("starting the {label} apiserver"))?;
        if args.fair_pin {
            // The machine's CPUs, not this process's: it may be pinned already.
            let online = std::fs::read_to_string("/sys/devices/system/cpu/online")?;
            let last: usize = online
                .trim()
                .rsplit(['-', ','])
                .next()
                .unwrap_or_default()
                .parse()?;
            anyhow::ensure!(last >= 1, "--fair-pin needs at least 2 CPUs");
            pin(server.pid()?, "0").await?;
            pin(std::process::id(), &format!("1-{last}")).await?;
        }
        let config = crate::tls::kubeconfig(&data_dir.join("admin.kubeconfig"))?;
        let tls = config.tls_without_certificate.clone();
        let anonymous = Client::connect(&server.base, tls.clone()).await?;
        let admin = &server.client;
        for namespace in [FLOOD_NAMESPACE, STEADY_NAMESPACE] {
            create_namespace(admin, namespace).await?;
        }
        for (name, role, user) in [
            ("bench-fair-steady", "edit", "tenant-steady"),
            ("bench-fair-flood", "edit", "tenant-flood"),
            (
                "bench-fair-lease",
                "cluster-admin",
                "system:kube-controller-manager",
            ),
        ] {
            admin
                .expect(
                    Method::POST,
                    "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
                    Some(binding(name, role, user)),
                    StatusCode::CREATED,
                )
                .await?;
        }
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0..args.fair_objects {
            if tasks.len() >= 16
                && let Some(done) = tasks.join_next().await
            {
                done??;
            }
            let (admin, size) = (admin.clone(), args.value_size);
            tasks.spawn(async move {
                // Retried while the server's in-flight limits (without priority and fairness,
                // the admin is limited too) turn it away.
                loop {
                    let (status, body) = admin
                        .call(
                            Method::POST,
                            &configmaps(FLOOD_NAMESPACE),
                            Some(configmap(&format!("listed-{i}"), size, None)),
                        )
                        .await?;
                    match status {
                        StatusCode::CREATED => return anyhow::Ok(()),
                        StatusCode::TOO_MANY_REQUESTS => {
                            tokio::time::sleep(Duration::from_millis(20)).await;
                        }
                        _ => anyhow::bail!(
                            "creating listed-{i}: {status}: {}",
                            String::from_utf8_lossy(&body[..body.len().min(300)])
                        ),
                    }
                }
            });
        }
        for done in tasks.join_all().await {
            done?;
        }
        let lease = serde_json::json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "bench-fair", "namespace": "kube-system"},
            "spec": {"holderIdentity": "bench", "leaseDurationSeconds": 15, "renewTime": now_micro()},
        });
        admin
            .expect(
                Method::POST,
                "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases",
                Some(Bytes::from(lease.to_string())),
                StatusCode::CREATED,
            )
            .await?;
        let steady = anonymous.with_bearer(STEADY_TOKEN)?;
        // RBAC follows the bindings a moment after they are written.
        let deadline = Instant::now() + Duration::from_secs(30);
        while steady
            .call(Method::GET, &configmaps(STEADY_NAMESPACE), None)
            .await?
            .0
            != StatusCode::OK
        {
            anyhow::ensure!(
                Instant::now() < deadline,
                "the steady tenant is never allowed"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(Self {
            label,
            base: (server.base.clone(), tls),
            server,
        })
    }

    /// Runs the steady tenant and the renewals for `length`, with the flood when `flood`.
    ///
    /// The steady tenant and the renewals run on a thread and a runtime of their own, with
    /// connections of their own, so that what they measure is the server: on the flood's
    /// runtime their requests would also wait for this program's own work on the flood's
    /// answers (megabytes of TLS per LIST), which is not the server's unfairness.
    async fn phase(&self, args: &Args, length: Duration, flood: bool) -> anyhow::Result<Phase> {
        let stop = Arc::new(AtomicBool::new(false));
        let counts = Arc::new([
            AtomicUsize::new(0),
            AtomicUsize::new(0),
            AtomicUsize::new(0),
        ]);
        let mut flooders = tokio::task::JoinSet::new();
        if flood {
            for connection in 0..args.fair_flood_connections {
                let client = Client::connect(&self.base.0, self.base.1.clone())
                    .await?
                    .with_bearer(FLOOD_TOKEN)?;
                let (stop, counts, size) = (stop.clone(), counts.clone(), args.value_size);
                flooders.spawn(async move {
                    let mut n = 0usize;
                    while !stop.load(Ordering::Relaxed) {
                        n += 1;
                        let result = if n.is_multiple_of(4) {
                            let name = format!("flood-{connection}-{n}");
                            client
                                .call(
                                    Method::POST,
                                    &configmaps(FLOOD_NAMESPACE),
                                    Some(configmap(&name, size, None)),
                                )
                                .await
                        } else {
                            client
                                .call(Method::GET, &configmaps(FLOOD_NAMESPACE), None)
                                .await
                        };
                        let slot = match result.map(|(s, _)| s) {
                            Ok(StatusCode::OK | StatusCode::CREATED) => 0,
                            Ok(StatusCode::TOO_MANY_REQUESTS) => 1,
                            _ => 2,
                        };
                        counts[slot].fetch_add(1, Ordering::Relaxed);
                    }
                });
            }
        }
        let measured = {
            let (base, tls) = self.base.clone();
            let (rate, size) = (args.fair_steady_rate, args.value_size);
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("bench-steady".to_owned())
                .spawn(move || -> anyhow::Result<Phase> {
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()?;
                    runtime.block_on(async move {
                        let steady = Client::connect(&base, tls.clone())
                            .await?
                            .with_bearer(STEADY_TOKEN)?;
                        let lease = Client::connect(&base, tls)
                            .await?
                            .with_bearer(LEASE_TOKEN)?;
                        let renewals = tokio::spawn(renew(lease, stop.clone()));
                        let mut phase = steady_tenant(&steady, rate, size, length, flood).await;
                        stop.store(true, Ordering::Relaxed);
                        let (done, failed, slowest) = renewals.await?;
                        phase.renewals = done;
                        phase.renewals_failed = failed;
                        phase.renewal_slowest = slowest;
                        Ok(phase)
                    })
                })?
        };
        let phase = tokio::task::spawn_blocking(move || measured.join()).await?;
        // The flood ends with the steady tenant, also when its thread failed.
        stop.store(true, Ordering::Relaxed);
        flooders.join_all().await;
        let mut phase =
            phase.map_err(|_| anyhow::anyhow!("the steady tenant's thread panicked"))??;
        phase.flood_served = counts[0].load(Ordering::Relaxed);
        phase.flood_refused = counts[1].load(Ordering::Relaxed);
        phase.flood_other = counts[2].load(Ordering::Relaxed);
        phase.steady.sort();
        Ok(phase)
    }
}

/// Pins every thread of process `pid` to `cpus` (a `taskset` list); threads it starts later
/// inherit it.
async fn pin(pid: u32, cpus: &str) -> anyhow::Result<()> {
    let out = tokio::process::Command::new("taskset")
        .args(["--all-tasks", "--cpu-list", "--pid", cpus, &pid.to_string()])
        .output()
        .await
        .context("running taskset (util-linux)")?;
    anyhow::ensure!(
        out.status.success(),
        "taskset {cpus} {pid}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

/// Renews the Lease every 2 s as leader election renews it (a GET, then an update of
/// `renewTime`) until `stop`: how many renewals, how many failed, the slowest.
async fn renew(lease: Client, stop: Arc<AtomicBool>) -> (usize, usize, Duration) {
    let (mut done, mut failed, mut slowest) = (0, 0, Duration::ZERO);
    while !stop.load(Ordering::Relaxed) {
        let started = Instant::now();
        let ok = match lease.call(Method::GET, LEASE, None).await {
            Ok((StatusCode::OK, body)) => {
                match serde_json::from_slice::<serde_json::Value>(&body) {
                    Ok(mut object) => {
                        object["spec"]["renewTime"] = now_micro().into();
                        let body = Bytes::from(object.to_string());
                        matches!(
                            lease.call(Method::PUT, LEASE, Some(body)).await,
                            Ok((StatusCode::OK, _))
                        )
                    }
                    Err(_) => false,
                }
            }
            _ => false,
        };
        let took = started.elapsed();
        slowest = slowest.max(took);
        done += 1;
        // A renewal counts as failed past the 10 s renew deadline of leader election.
        if !ok || took > Duration::from_secs(10) {
            failed += 1;
        }
        tokio::time::sleep(Duration::from_secs(2).saturating_sub(took)).await;
    }
    (done, failed, slowest)
}

/// The steady tenant for `length`: `rate` requests a second, alternately a GET (of a
/// ConfigMap that is not there, so 404 is its answer) and a create of a ConfigMap of `size`
/// bytes; each latency, and the failures.
async fn steady_tenant(
    steady: &Client,
    rate: f64,
    size: usize,
    length: Duration,
    flood: bool,
) -> Phase {
    let mut phase = Phase::default();
    let started = Instant::now();
    let interval = Duration::from_secs_f64(1.0 / rate);
    let mut n = 0u32;
    while started.elapsed() < length {
        let due = started + interval * n;
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            tokio::time::sleep(wait).await;
        }
        n += 1;
        let sent = Instant::now();
        let result = if n.is_multiple_of(2) {
            steady
                .call(
                    Method::POST,
                    &configmaps(STEADY_NAMESPACE),
                    Some(configmap(
                        &format!("steady-{}-{n}", u8::from(flood)),
                        size,
                        None,
                    )),
                )
                .await
        } else {
            steady
                .call(
                    Method::GET,
                    &format!("{}/listed", configmaps(STEADY_NAMESPACE)),
                    None,
                )
                .await
        };
        match result.map(|(s, _)| s) {
            Ok(StatusCode::CREATED | StatusCode::NOT_FOUND) => phase.steady.push(sent.elapsed()),
            _ => phase.steady_failed += 1,
        }
    }
    phase
}

/// Starts both servers one after the other, runs both phases on each, and reports.
pub(crate) async fn fairness(args: &Args, dir: &Path) -> anyhow::Result<()> {
    let tokens = dir.join("fairness-tokens.csv");
    std::fs::write(
        &tokens,
        format!(
            "{STEADY_TOKEN},tenant-steady,uid-steady\n{FLOOD_TOKEN},tenant-flood,uid-flood\n{LEASE_TOKEN},system:kube-controller-manager,uid-kcm\n"
        ),
    )?;
    let length = Duration::from_secs_f64(args.fair_seconds);
    println!(
        "\nFairness: a steady tenant ({:.0} requests/s, GETs and creates) and a Lease renewal every 2 s, \
         {:.0} s without and {:.0} s with a flood from {} connections (3 LISTs of {} ConfigMaps of {} B \
         for 1 create, back to back), one SQLite apiserver per row, {}",
        args.fair_steady_rate,
        args.fair_seconds,
        args.fair_seconds,
        args.fair_flood_connections,
        args.fair_objects,
        args.value_size,
        match args.fair_max_inflight {
            Some(limit) => format!(
                "--max-requests-inflight={limit} --max-mutating-requests-inflight={}",
                (limit / 2).max(1)
            ),
            None => "default limits (400 and 200)".to_owned(),
        }
    );
    println!(
        "  {:<34} {:>17} {:>17} {:>7} {:>7} {:>14} {:>22}",
        "server",
        "steady p50 q/f ms",
        "steady p99 q/f ms",
        "p99 x",
        "failed",
        "renewals bad",
        "flood ok/429/other"
    );
    for (label, extra) in [
        ("priority and fairness", vec![]),
        (
            "in-flight limits (APF off)",
            vec!["--enable-priority-and-fairness=false".to_owned()],
        ),
    ] {
        let mut side = Side::start(
            args,
            dir,
            if extra.is_empty() { "apf" } else { "inflight" },
            &extra,
            &tokens,
        )
        .await?;
        let quiet = side.phase(args, length, false).await?;
        tokio::time::sleep(args.settle(Duration::from_secs(2))).await;
        let flooded = side.phase(args, length, true).await?;
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        let (q99, f99) = (
            percentile(&quiet.steady, 0.99),
            percentile(&flooded.steady, 0.99),
        );
        println!(
            "  {label:<34} {:>8.1}/{:<8.1} {:>8.1}/{:<8.1} {:>6.1}x {:>3}/{:<3} {:>6}/{:<7} {:>8}/{}/{}",
            ms(percentile(&quiet.steady, 0.5)),
            ms(percentile(&flooded.steady, 0.5)),
            ms(q99),
            ms(f99),
            f99.as_secs_f64() / q99.as_secs_f64().max(1e-6),
            quiet.steady_failed,
            flooded.steady_failed,
            quiet.renewals_failed + flooded.renewals_failed,
            quiet.renewals + flooded.renewals,
            flooded.flood_served,
            flooded.flood_refused,
            flooded.flood_other,
        );
        println!(
            "  {:<34} slowest renewal {:.0} ms",
            "",
            ms(quiet.renewal_slowest.max(flooded.renewal_slowest))
        );
        side.server
            .check_alive()
            .with_context(|| format!("the {} apiserver", side.label))?;
        side.server.stop().await?;
    }
    println!(
        "  (target with priority and fairness: steady p99 with the flood within 2x of without, \
         no renewal failed, the flood refused with 429s)"
    );
    Ok(())
}
