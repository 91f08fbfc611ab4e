//! Controller benchmarks against the real `genplane` executable, the API server (SQLite) and
//! the controller-manager running as separate processes, as in a real deployment:
//!
//! 1. namespace deletion: a namespace holding `--objects` objects (half ConfigMaps, half
//!    Secrets, created with parallel POSTs) is deleted; timed from the DELETE's answer to the
//!    namespace's `DELETED` watch event. The namespace controller waits upstream's
//!    `namespaceDeletionGracePeriod` (5 s) after it observes the deletion before it starts, so
//!    the time is reported raw and minus those 5 s; watches of the namespace's ConfigMaps and
//!    Secrets split it further (first and last content deletion);
//! 2. garbage collection: `--objects` ConfigMaps with an `ownerReference` to one owner
//!    ConfigMap; timed from the owner's background DELETE answer until a watch has counted
//!    every dependent's `DELETED` event;
//! 3. memory (VmRSS of `/proc/PID/status`): the controller-manager after start-up has settled
//!    and after the runs, and `genplane all-in-one` idle on an empty store.
//!
//! Beside each time, the CPU time (user + system) the apiserver and the controller-manager
//! spent on it. Run it with `hack/bench/controllers.sh` (release build); `--help` lists the
//! knobs, `--quick` is a smoke run with 500 objects.

// The connection, TLS and process helpers are the API server benchmark's, shared as source.
#[allow(dead_code)]
#[path = "../../apiserver/src/client.rs"]
mod client;
#[allow(dead_code)]
#[path = "../../apiserver/src/process.rs"]
mod process;
#[allow(dead_code)]
#[path = "../../apiserver/src/tls.rs"]
mod tls;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use base64::Engine as _;
use bytes::Bytes;
use clap::Parser;
use http_body_util::BodyExt as _;
use hyper::{Method, StatusCode};
use tokio::process::{Child, Command};

use crate::client::Client;
use crate::process::{Server, cpu_ticks, memory, tail};

/// The namespace controller's wait after it observes a change (upstream's
/// `namespaceDeletionGracePeriod`), subtracted from the namespace deletion time.
const NAMESPACE_GRACE: Duration = Duration::from_secs(5);

#[derive(Parser, Debug)]
struct Args {
    /// The `genplane` executable under test (`hack/bench/controllers.sh` builds it and passes
    /// the path).
    #[arg(long, default_value = "target/release/genplane")]
    genplane: PathBuf,
    /// Objects in the deleted namespace (half ConfigMaps, half Secrets), and dependents of the
    /// garbage collector's owner.
    #[arg(long, default_value_t = 10_000)]
    objects: usize,
    /// A smoke run: 500 objects and short settling, whatever else is given.
    #[arg(long)]
    quick: bool,
    /// POSTs in flight at once while creating the objects (one HTTP/2 connection).
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// Size of each object's data value in bytes.
    #[arg(long, default_value_t = 128)]
    value_size: usize,
    /// How long one deletion may take before the benchmark gives up, in seconds.
    #[arg(long, default_value_t = 900)]
    timeout: u64,
    /// Where data directories and logs go (default: a temporary directory under /var/tmp).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Keep the data directories and logs (with `--dir` they are always kept).
    #[arg(long)]
    keep: bool,
    /// The parts to run.
    #[arg(long, value_delimiter = ',', default_value = "namespace,gc,all-in-one")]
    only: Vec<Part>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Part {
    /// Namespace deletion.
    Namespace,
    /// Garbage collection of dependents.
    Gc,
    /// `genplane all-in-one` idle memory.
    AllInOne,
}

impl Args {
    fn apply_quick(&mut self) {
        if self.quick {
            self.objects = self.objects.min(500);
        }
    }

    /// How long to let things settle before reading memory.
    fn settle(&self) -> Duration {
        if self.quick {
            Duration::from_secs(1)
        } else {
            Duration::from_secs(3)
        }
    }

    fn timeout(&self) -> Duration {
        Duration::from_secs(self.timeout)
    }
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// CPU seconds of clock ticks.
fn cpu_secs(ticks: u64) -> f64 {
    ticks as f64 / process::TICKS_PER_SECOND as f64
}

fn configmaps(namespace: &str) -> String {
    format!("/api/v1/namespaces/{namespace}/configmaps")
}

fn secrets(namespace: &str) -> String {
    format!("/api/v1/namespaces/{namespace}/secrets")
}

fn json(value: serde_json::Value) -> Bytes {
    Bytes::from(value.to_string())
}

async fn create_namespace(client: &Client, name: &str) -> anyhow::Result<()> {
    client
        .expect(
            Method::POST,
            "/api/v1/namespaces",
            Some(json(serde_json::json!({
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": { "name": name },
            }))),
            StatusCode::CREATED,
        )
        .await?;
    Ok(())
}

/// A ConfigMap `name` with a `payload` value of `size` bytes and the given owner references.
fn configmap(name: &str, size: usize, owners: serde_json::Value) -> Bytes {
    json(serde_json::json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": { "name": name, "ownerReferences": owners },
        "data": { "payload": "x".repeat(size) },
    }))
}

/// An Opaque Secret `name` with a `payload` value of `size` bytes.
fn secret(name: &str, size: usize) -> Bytes {
    json(serde_json::json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": { "name": name },
        "type": "Opaque",
        "data": { "payload": base64::engine::general_purpose::STANDARD.encode("x".repeat(size)) },
    }))
}

/// POSTs every `(path, body)` of `requests`, `concurrency` at a time, each expecting 201;
/// returns how long it took.
async fn create_all(
    client: &Client,
    requests: Vec<(String, Bytes)>,
    concurrency: usize,
) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for (path, body) in requests {
        if tasks.len() >= concurrency.max(1)
            && let Some(result) = tasks.join_next().await
        {
            result??;
        }
        let client = client.clone();
        tasks.spawn(async move {
            client
                .expect(Method::POST, &path, Some(body), StatusCode::CREATED)
                .await
                .map(drop)
        });
    }
    for result in tasks.join_all().await {
        result?;
    }
    Ok(started.elapsed())
}

/// The `metadata.resourceVersion` of a LIST (or GET) answer.
async fn resource_version(client: &Client, path: &str) -> anyhow::Result<String> {
    let body = client
        .expect(Method::GET, path, None, StatusCode::OK)
        .await?;
    let value: serde_json::Value = serde_json::from_slice(&body)?;
    Ok(value["metadata"]["resourceVersion"]
        .as_str()
        .with_context(|| format!("GET {path}: no resourceVersion"))?
        .to_owned())
}

/// What a watch saw: each `DELETED` event's time, and every other event's.
#[derive(Debug, Default)]
struct Seen {
    deleted: Vec<Instant>,
    other: Vec<Instant>,
}

/// Opens a watch of `path` (a collection, with its query) from `rv` and reads it in a task
/// until `deletions` `DELETED` events of objects whose name is not `ignore` arrived (or the
/// stream ended). Returns once the server has answered the watch.
async fn watch(
    client: &Client,
    path: &str,
    rv: &str,
    deletions: usize,
    ignore: Option<String>,
) -> anyhow::Result<tokio::task::JoinHandle<anyhow::Result<Seen>>> {
    let sep = if path.contains('?') { '&' } else { '?' };
    let path = format!("{path}{sep}watch=1&resourceVersion={rv}&allowWatchBookmarks=false");
    let response = client.start(Method::GET, &path, None).await?;
    anyhow::ensure!(
        response.status() == StatusCode::OK,
        "watch {path}: {}",
        response.status()
    );
    let mut body = response.into_body();
    Ok(tokio::spawn(async move {
        let mut seen = Seen::default();
        let mut pending: Vec<u8> = Vec::new();
        while seen.deleted.len() < deletions {
            let Some(frame) = body.frame().await else {
                break;
            };
            let Ok(data) = frame?.into_data() else {
                continue;
            };
            let now = Instant::now();
            pending.extend_from_slice(&data);
            while let Some(end) = pending.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = pending.drain(..=end).collect();
                let event: serde_json::Value = serde_json::from_slice(&line)
                    .with_context(|| format!("watch {path}: a malformed event"))?;
                let name = event["object"]["metadata"]["name"].as_str();
                match event["type"].as_str() {
                    Some("DELETED") if name.is_some() && name != ignore.as_deref() => {
                        seen.deleted.push(now)
                    }
                    Some("ERROR") => anyhow::bail!("watch {path}: {event}"),
                    _ => seen.other.push(now),
                }
            }
        }
        Ok(seen)
    }))
}

/// Waits for a watch task, failing after `timeout`.
async fn finish(
    task: tokio::task::JoinHandle<anyhow::Result<Seen>>,
    timeout: Duration,
    what: &str,
) -> anyhow::Result<Seen> {
    match tokio::time::timeout(timeout, task).await {
        Ok(result) => result?,
        Err(_) => anyhow::bail!("{what}: not done after {} s", timeout.as_secs()),
    }
}

/// Waits until `pids` spend under 2% of one CPU over half a second (at most `limit`):
/// the controllers have digested what was written.
async fn quiesce(pids: &[u32], limit: Duration) -> anyhow::Result<Duration> {
    let started = Instant::now();
    loop {
        let before = cpu_ticks(pids)?;
        tokio::time::sleep(Duration::from_millis(500)).await;
        if cpu_ticks(pids)? - before <= 1 || started.elapsed() > limit {
            return Ok(started.elapsed());
        }
    }
}

/// Polls `path` until it answers 404.
async fn wait_gone(client: &Client, path: &str, timeout: Duration) -> anyhow::Result<Duration> {
    let started = Instant::now();
    loop {
        let (status, _) = client.call(Method::GET, path, None).await?;
        if status == StatusCode::NOT_FOUND {
            return Ok(started.elapsed());
        }
        anyhow::ensure!(
            started.elapsed() < timeout,
            "{path} still there after {} s",
            timeout.as_secs()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Polls `path` until it answers 200.
async fn wait_present(client: &Client, path: &str, timeout: Duration) -> anyhow::Result<Duration> {
    let started = Instant::now();
    loop {
        let (status, _) = client.call(Method::GET, path, None).await?;
        if status == StatusCode::OK {
            return Ok(started.elapsed());
        }
        anyhow::ensure!(
            started.elapsed() < timeout,
            "{path} not there after {} s",
            timeout.as_secs()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The controller-manager child.
struct ControllerManager {
    child: Child,
    log: PathBuf,
}

impl ControllerManager {
    /// Starts `genplane controller-manager` with the kubeconfig the API server wrote in
    /// `data_dir`, without leader election or ops port.
    fn start(bin: &Path, data_dir: &Path) -> anyhow::Result<Self> {
        let kubeconfig = data_dir.join("controller-manager.kubeconfig");
        anyhow::ensure!(kubeconfig.exists(), "{} is missing", kubeconfig.display());
        let log = data_dir.with_file_name("controller-manager.log");
        let out = std::fs::File::create(&log)?;
        let child = Command::new(bin)
            .arg("controller-manager")
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .arg("--secure-port=0")
            .arg("--leader-elect=false")
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {} controller-manager", bin.display()))?;
        Ok(Self { child, log })
    }

    fn pid(&self) -> anyhow::Result<u32> {
        self.child.id().context("the controller-manager has exited")
    }

    fn check_alive(&mut self) -> anyhow::Result<()> {
        if let Some(status) = self.child.try_wait()? {
            anyhow::bail!(
                "the controller-manager exited ({status}):\n{}",
                tail(&self.log)
            );
        }
        Ok(())
    }

    async fn stop(mut self) -> anyhow::Result<()> {
        if let Some(pid) = self.child.id() {
            let _ = Command::new("kill")
                .arg("-TERM")
                .arg(pid.to_string())
                .status()
                .await;
            if tokio::time::timeout(Duration::from_secs(10), self.child.wait())
                .await
                .is_ok()
            {
                return Ok(());
            }
        }
        self.child.kill().await?;
        Ok(())
    }
}

/// One result row.
struct Row {
    label: String,
    total: Duration,
    /// The namespace controller's grace period included in `total`, if any.
    grace: Option<Duration>,
    objects: usize,
    apiserver_cpu: u64,
    controller_manager_cpu: u64,
    detail: Vec<String>,
}

/// Waits until the garbage collector works: an owner is deleted and its dependent goes.
/// Returns how long the dependent took to go.
async fn gc_probe(client: &Client, namespace: &str, timeout: Duration) -> anyhow::Result<Duration> {
    let owner = client
        .expect(
            Method::POST,
            &configmaps(namespace),
            Some(configmap("probe-owner", 1, serde_json::json!([]))),
            StatusCode::CREATED,
        )
        .await?;
    let owner: serde_json::Value = serde_json::from_slice(&owner)?;
    let uid = owner["metadata"]["uid"].as_str().context("no uid")?;
    client
        .expect(
            Method::POST,
            &configmaps(namespace),
            Some(configmap(
                "probe-dependent",
                1,
                serde_json::json!([{ "apiVersion": "v1", "kind": "ConfigMap", "name": "probe-owner", "uid": uid }]),
            )),
            StatusCode::CREATED,
        )
        .await?;
    client
        .expect(
            Method::DELETE,
            &format!("{}/probe-owner", configmaps(namespace)),
            None,
            StatusCode::OK,
        )
        .await?;
    wait_gone(
        client,
        &format!("{}/probe-dependent", configmaps(namespace)),
        timeout,
    )
    .await
}

/// Deletes a namespace of `objects` ConfigMaps and Secrets.
async fn namespace_deletion(
    args: &Args,
    apiserver: &Server,
    pids: [u32; 2],
    name: &str,
    objects: usize,
) -> anyhow::Result<Row> {
    let client = &apiserver.client;
    create_namespace(client, name).await?;
    let cms = objects / 2;
    let mut requests = Vec::with_capacity(objects);
    for i in 0..objects {
        if i < cms {
            requests.push((
                configmaps(name),
                configmap(
                    &format!("cm-{i:06}"),
                    args.value_size,
                    serde_json::json!([]),
                ),
            ));
        } else {
            requests.push((secrets(name), secret(&format!("s-{i:06}"), args.value_size)));
        }
    }
    let created = create_all(client, requests, args.concurrency).await?;
    if objects > 0 {
        println!(
            "  {name}: created {objects} objects in {:.1} s ({:.0}/s)",
            secs(created),
            objects as f64 / secs(created)
        );
    }
    // The root CA publisher adds `kube-root-ca.crt` to the namespace: count it too.
    let quiet = quiesce(&pids, Duration::from_secs(120)).await?;
    let cm_rv = resource_version(client, &format!("{}?limit=1", configmaps(name))).await?;
    let cm_count = count(client, &configmaps(name)).await?;
    let secret_rv = resource_version(client, &format!("{}?limit=1", secrets(name))).await?;
    let secret_count = count(client, &secrets(name)).await?;
    let ns_rv = resource_version(client, &format!("/api/v1/namespaces/{name}")).await?;
    let cm_watch = watch(client, &configmaps(name), &cm_rv, cm_count, None).await?;
    let secret_watch = watch(client, &secrets(name), &secret_rv, secret_count, None).await?;
    let ns_watch = watch(
        client,
        &format!("/api/v1/namespaces?fieldSelector=metadata.name%3D{name}"),
        &ns_rv,
        1,
        None,
    )
    .await?;
    let cpu = [cpu_ticks(&pids[..1])?, cpu_ticks(&pids[1..])?];
    let sent = Instant::now();
    client
        .expect(
            Method::DELETE,
            &format!("/api/v1/namespaces/{name}"),
            None,
            StatusCode::OK,
        )
        .await?;
    let answered = Instant::now();
    let ns = finish(
        ns_watch,
        args.timeout(),
        &format!("deleting namespace {name}"),
    )
    .await?;
    let cpu = [
        cpu_ticks(&pids[..1])? - cpu[0],
        cpu_ticks(&pids[1..])? - cpu[1],
    ];
    let deleted = *ns.deleted.last().context("the namespace watch ended")?;
    let cm = finish(cm_watch, Duration::from_secs(5), "the ConfigMap watch").await?;
    let secret = finish(secret_watch, Duration::from_secs(5), "the Secret watch").await?;
    let content: Vec<Instant> = cm.deleted.iter().chain(&secret.deleted).copied().collect();
    let mut detail = vec![format!(
        "DELETE answered in {:.0} ms; settled {:.1} s before it",
        (answered - sent).as_secs_f64() * 1e3,
        secs(quiet)
    )];
    let span = |times: &[Instant]| match (times.iter().min(), times.iter().max()) {
        (Some(first), Some(last)) => format!(
            "{:.2} s to {:.2} s",
            secs(*first - answered),
            secs(*last - answered)
        ),
        _ => "-".to_owned(),
    };
    if let (Some(first), Some(last)) = (content.iter().min(), content.iter().max()) {
        detail.push(format!(
            "content deleted from {:.2} s to {:.2} s after the answer ({} ConfigMaps {}, {} \
             Secrets {}); then the finalizer and the namespace took {:.2} s",
            secs(*first - answered),
            secs(*last - answered),
            cm.deleted.len(),
            span(&cm.deleted),
            secret.deleted.len(),
            span(&secret.deleted),
            secs(deleted - *last),
        ));
        if content.len() > 1 {
            detail.push(format!(
                "content deletion rate {:.0}/s over {:.2} s",
                content.len() as f64 / secs(*last - *first).max(1e-3),
                secs(*last - *first)
            ));
        }
    }
    detail.push(format!(
        "namespace updates seen before DELETED: {}",
        ns.other.len()
    ));
    Ok(Row {
        label: format!("namespace deletion ({objects} objects)"),
        total: deleted - answered,
        grace: Some(NAMESPACE_GRACE),
        objects,
        apiserver_cpu: cpu[0],
        controller_manager_cpu: cpu[1],
        detail,
    })
}

/// The number of items of a collection.
async fn count(client: &Client, path: &str) -> anyhow::Result<usize> {
    let body = client
        .expect(Method::GET, path, None, StatusCode::OK)
        .await?;
    let value: serde_json::Value = serde_json::from_slice(&body)?;
    Ok(value["items"].as_array().map_or(0, Vec::len))
}

/// Deletes an owner of `objects` ConfigMaps in the background.
async fn garbage_collection(
    args: &Args,
    apiserver: &Server,
    pids: [u32; 2],
    namespace: &str,
    objects: usize,
) -> anyhow::Result<Row> {
    let client = &apiserver.client;
    create_namespace(client, namespace).await?;
    let owner = client
        .expect(
            Method::POST,
            &configmaps(namespace),
            Some(configmap("owner", 1, serde_json::json!([]))),
            StatusCode::CREATED,
        )
        .await?;
    let owner: serde_json::Value = serde_json::from_slice(&owner)?;
    let uid = owner["metadata"]["uid"].as_str().context("no uid")?;
    let reference = serde_json::json!([{
        "apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": uid,
    }]);
    let requests = (0..objects)
        .map(|i| {
            (
                configmaps(namespace),
                configmap(&format!("dep-{i:06}"), args.value_size, reference.clone()),
            )
        })
        .collect();
    let created = create_all(client, requests, args.concurrency).await?;
    println!(
        "  {namespace}: created {objects} dependents in {:.1} s ({:.0}/s)",
        secs(created),
        objects as f64 / secs(created)
    );
    let quiet = quiesce(&pids, Duration::from_secs(120)).await?;
    let rv = resource_version(client, &format!("{}?limit=1", configmaps(namespace))).await?;
    let dependents = watch(
        client,
        &configmaps(namespace),
        &rv,
        objects,
        Some("owner".to_owned()),
    )
    .await?;
    let cpu = [cpu_ticks(&pids[..1])?, cpu_ticks(&pids[1..])?];
    let sent = Instant::now();
    client
        .expect(
            Method::DELETE,
            &format!("{}/owner", configmaps(namespace)),
            Some(json(serde_json::json!({
                "apiVersion": "v1",
                "kind": "DeleteOptions",
                "propagationPolicy": "Background",
            }))),
            StatusCode::OK,
        )
        .await?;
    let answered = Instant::now();
    let seen = finish(dependents, args.timeout(), "collecting the dependents").await?;
    let cpu = [
        cpu_ticks(&pids[..1])? - cpu[0],
        cpu_ticks(&pids[1..])? - cpu[1],
    ];
    anyhow::ensure!(
        seen.deleted.len() == objects,
        "the watch ended after {} of {objects} deletions",
        seen.deleted.len()
    );
    let first = *seen.deleted.first().context("nothing deleted")?;
    let last = *seen.deleted.last().context("nothing deleted")?;
    Ok(Row {
        label: format!("garbage collection ({objects} dependents)"),
        total: last - answered,
        grace: None,
        objects,
        apiserver_cpu: cpu[0],
        controller_manager_cpu: cpu[1],
        detail: vec![
            format!(
                "DELETE answered in {:.0} ms; settled {:.1} s before it",
                (answered - sent).as_secs_f64() * 1e3,
                secs(quiet)
            ),
            format!(
                "first dependent deleted {:.2} s after the answer, last {:.2} s ({:.0}/s between)",
                secs(first - answered),
                secs(last - answered),
                objects as f64 / secs(last - first).max(1e-3)
            ),
        ],
    })
}

fn print_rows(rows: &[Row]) {
    println!(
        "\n  {:<40} {:>9} {:>12} {:>10} {:>16} {:>16}",
        "", "total s", "minus 5 s", "objects/s", "apiserver CPU s", "ctrl-mgr CPU s"
    );
    for row in rows {
        let minus = row.grace.map_or("-".to_owned(), |g| {
            format!("{:.2}", secs(row.total.saturating_sub(g)))
        });
        let effective = row.grace.map_or(row.total, |g| row.total.saturating_sub(g));
        let rate = if row.objects == 0 {
            "-".to_owned()
        } else {
            format!("{:.0}", row.objects as f64 / secs(effective).max(1e-3))
        };
        println!(
            "  {:<40} {:>9.2} {:>12} {:>10} {:>16.2} {:>16.2}",
            row.label,
            secs(row.total),
            minus,
            rate,
            cpu_secs(row.apiserver_cpu),
            cpu_secs(row.controller_manager_cpu),
        );
        for line in &row.detail {
            println!("      {line}");
        }
    }
    println!(
        "  (namespace: from the DELETE's answer to the namespace's DELETED watch event; \"minus \
         5 s\" takes out the namespace controller's fixed grace period (upstream's \
         namespaceDeletionGracePeriod) before its first sync; objects/s over the time without it. \
         GC: from the owner's background DELETE answer to the last dependent's DELETED event.)"
    );
}

async fn controllers(args: &Args, dir: &Path) -> anyhow::Result<()> {
    let bin = &args.genplane;
    let data = dir.join("apiserver");
    let mut apiserver = Server::apiserver(bin, &data, &[])
        .await
        .context("starting the apiserver on SQLite")?;
    tokio::time::sleep(args.settle()).await;
    let apiserver_idle = memory(apiserver.pid()?)?;
    let started = Instant::now();
    let mut cm = ControllerManager::start(bin, &data)?;
    let pids = [apiserver.pid()?, cm.pid()?];
    let client = apiserver.client.clone();

    // Start-up: the garbage collector has listed everything once and collects; the namespace
    // controller deletes an empty namespace.
    create_namespace(&client, "bench-warmup").await?;
    let gc_ready = gc_probe(&client, "bench-warmup", Duration::from_secs(120))
        .await
        .context("waiting for the garbage collector to work")?;
    cm.check_alive()?;
    println!(
        "controller-manager: the garbage collector collected a first dependent {:.2} s after the \
         spawn ({:.2} s after the owner's deletion)",
        secs(started.elapsed()),
        secs(gc_ready)
    );
    quiesce(&pids, Duration::from_secs(60)).await?;
    tokio::time::sleep(args.settle()).await;
    let cm_idle = memory(cm.pid()?)?;

    let mut rows = Vec::new();
    if args.only.contains(&Part::Namespace) {
        println!("\nnamespace deletion");
        rows.push(namespace_deletion(args, &apiserver, pids, "bench-empty", 0).await?);
        rows.push(namespace_deletion(args, &apiserver, pids, "bench-ns", args.objects).await?);
        cm.check_alive()?;
        apiserver.check_alive()?;
    }
    if args.only.contains(&Part::Gc) {
        println!("\ngarbage collection");
        rows.push(garbage_collection(args, &apiserver, pids, "bench-gc", args.objects).await?);
        cm.check_alive()?;
        apiserver.check_alive()?;
    }
    if !rows.is_empty() {
        println!(
            "\nResults: SQLite apiserver and controller-manager as separate processes, {} objects \
             created {} at a time, {} B values",
            args.objects, args.concurrency, args.value_size
        );
        print_rows(&rows);
    }

    quiesce(&pids, Duration::from_secs(120)).await?;
    tokio::time::sleep(args.settle()).await;
    let (cm_after, cm_peak) = memory(cm.pid()?)?;
    let (api_after, api_peak) = memory(apiserver.pid()?)?;
    println!("\nmemory (VmRSS)");
    println!(
        "  controller-manager  idle after start-up {:.1} MiB, after the runs {:.1} MiB, peak {:.1} MiB",
        mib(cm_idle.0),
        mib(cm_after),
        mib(cm_peak)
    );
    println!(
        "  apiserver (SQLite)  idle before the controller-manager {:.1} MiB, after the runs \
         {:.1} MiB, peak {:.1} MiB",
        mib(apiserver_idle.0),
        mib(api_after),
        mib(api_peak)
    );
    // How the memory comes back once nothing happens: the watch cache's event window forgets
    // events older than 75 s beyond the newest 100, and freed pages go back to the system
    // over the allocator's decay time.
    if !args.quick {
        let mut waited = Duration::ZERO;
        for at in [30, 90, 120, 180] {
            let at = Duration::from_secs(at);
            tokio::time::sleep(at - waited).await;
            waited = at;
            println!(
                "  {:>3} s later: controller-manager {:.1} MiB, apiserver {:.1} MiB",
                at.as_secs(),
                mib(memory(cm.pid()?)?.0),
                mib(memory(apiserver.pid()?)?.0)
            );
        }
    }
    cm.stop().await?;
    apiserver.stop().await?;
    Ok(())
}

/// `genplane all-in-one` idle on an empty store, once its controllers run (the root CA
/// publisher has written `kube-root-ca.crt` in `default`).
async fn all_in_one(args: &Args, dir: &Path) -> anyhow::Result<()> {
    let server = Server::role(&args.genplane, "all-in-one", &dir.join("all-in-one"), &[])
        .await
        .context("starting genplane all-in-one")?;
    wait_present(
        &server.client,
        "/api/v1/namespaces/default/configmaps/kube-root-ca.crt",
        Duration::from_secs(60),
    )
    .await
    .context("waiting for the all-in-one's controllers")?;
    let pid = server.pid()?;
    quiesce(&[pid], Duration::from_secs(60)).await?;
    tokio::time::sleep(args.settle()).await;
    let (rss, peak) = memory(pid)?;
    println!(
        "  all-in-one          idle on an empty store {:.1} MiB (peak {:.1} MiB)",
        mib(rss),
        mib(peak)
    );
    server.stop().await
}

async fn run(args: &Args) -> anyhow::Result<()> {
    let temp = tempfile::Builder::new()
        .prefix("genplane-bench-controllers-")
        .tempdir_in("/var/tmp")?;
    let dir = match &args.dir {
        Some(dir) => {
            std::fs::create_dir_all(dir)?;
            dir.clone()
        }
        None => temp.path().to_owned(),
    };
    anyhow::ensure!(
        args.genplane.exists(),
        "{} does not exist: build it with `cargo build --release -p genplane`",
        args.genplane.display()
    );
    println!("genplane: {}", args.genplane.display());
    println!("data and logs: {}\n", dir.display());
    if args.only.iter().any(|p| *p != Part::AllInOne) {
        controllers(args, &dir).await?;
    }
    if args.only.contains(&Part::AllInOne) {
        all_in_one(args, &dir).await?;
    }
    if args.keep {
        let kept = temp.keep();
        println!("\nkept {}", kept.display());
    }
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let mut args = Args::parse();
    args.apply_quick();
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(run(&args))
}
