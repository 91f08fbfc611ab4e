//! Storage at scale (`--only storage-scale`, run by `hack/bench/storagescale.sh`; issue #43,
//! item 3): `--scale-objects` small objects (a million by default) in one `all-in-one` server,
//! on SQLite and on etcd (`--scale-backends`), and what a user of that many objects meets.
//!
//! The objects fill namespaces of `--scale-per-namespace` each (100,000 by default): every other
//! object is a ConfigMap, in the even namespaces, and the others custom resources of a
//! namespaced CRD with a structural schema, in the odd ones, so both kinds grow together; each
//! object has `--scale-value-size` bytes of data. LIST and GET are measured per kind. At two points, once
//! `--scale-baseline` objects exist (10,000 by default) and once all do, and the server's
//! controllers have worked through the creates (it spends under a tenth of a CPU), the part
//! measures:
//!
//! - the server's VmRSS once settled, against the JSON of every object as a LIST gives it;
//! - GET of random objects, cached (`resourceVersion=0`) and consistent, in requests per second
//!   from `--concurrency` requests in flight for `--scale-slice` seconds each;
//! - a paginated LIST of everything (500 a page, as kubectl asks), in microseconds per object;
//! - a watch of every ConfigMap from an old resourceVersion: the one before
//!   `--scale-watch-events` further creates, until their ADDED events all arrived (or 410).
//!
//! Then the server is stopped and started again on the same data: the time from the spawn to
//! `/readyz`, and to reads at `resourceVersion=0` of both resources answering (which wait for
//! their watch caches' first lists), and the memory then and once settled. Last, the first namespace (`--scale-per-namespace` ConfigMaps) is deleted, and the
//! time until the namespace controller has removed it and its objects is reported.
//!
//! The end is each backend's figures beside the targets: ready within 30 s of a
//! restart on SQLite; RSS within 1.5x the objects' JSON; cached GET and paginated LIST at the
//! same cost per object as at the baseline (within 20%).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use bytes::Bytes;
use genplane_storage_etcd::testing::{EtcdServer, EtcdServerOptions};
use http_body_util::BodyExt as _;
use hyper::{Method, StatusCode};

use crate::client::Client;
use crate::crd::{Crd, establish};
use crate::process::{Server, TICKS_PER_SECOND, cpu_ticks, memory, settled};
use crate::{Args, configmap, configmaps, create_namespace, mib};

/// The CRD whose custom resources fill the odd namespaces.
const WIDGETS: Crd = Crd {
    plural: "scalewidgets",
    kind: "ScaleWidget",
    cel: false,
};
/// Objects per page of the paginated LIST, as kubectl pages.
const PAGE: usize = 500;
/// How long the server may take to become ready after a restart before the part gives up.
const RESTART_TIMEOUT: Duration = Duration::from_secs(900);
/// How long a namespace of `--scale-per-namespace` objects may take to go.
const DELETE_TIMEOUT: Duration = Duration::from_secs(1800);
/// Connections the fill spreads its requests over (each an HTTP/2 connection).
const FILL_CONNECTIONS: usize = 4;

/// The storage backends the part runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Backend {
    Sqlite,
    Etcd,
}

/// Where the objects go: namespace `n` of the layout.
fn namespace(n: usize) -> String {
    format!("scale-{n:03}")
}

/// The kind namespace `n` holds: ConfigMaps in the even ones, custom resources in the odd.
fn holds_configmaps(n: usize) -> bool {
    n.is_multiple_of(2)
}

/// Where object `k` of the layout goes, `(namespace, index)`: the even objects are ConfigMaps
/// and the odd ones custom resources, so that both kinds grow together, each filling its
/// namespaces `per_namespace` at a time.
fn place(k: usize, per_namespace: usize) -> (usize, usize) {
    let (half, kind) = (k / 2, k % 2);
    (2 * (half / per_namespace) + kind, half % per_namespace)
}

/// The namespaces the first `objects` objects of the layout use.
fn namespaces(objects: usize, per_namespace: usize) -> usize {
    (objects.saturating_sub(2)..objects)
        .map(|k| place(k, per_namespace).0 + 1)
        .max()
        .unwrap_or(0)
}

/// The collection of namespace `n`'s objects.
fn collection(n: usize) -> String {
    if holds_configmaps(n) {
        configmaps(&namespace(n))
    } else {
        WIDGETS.path(&namespace(n))
    }
}

/// Object `i` of namespace `n`.
fn object(n: usize, i: usize, size: usize) -> Bytes {
    let name = format!("o-{i:07}");
    if holds_configmaps(n) {
        configmap(&name, size, None)
    } else {
        WIDGETS.object(&name, size, 1, "steady", None)
    }
}

/// The figures at one point of the fill.
struct Point {
    objects: usize,
    rss_kib: u64,
    /// The bytes of every object's JSON, as the paginated LIST gave them.
    json_bytes: u64,
    /// Per kind ([`KINDS`]): microseconds per object of the paginated LIST, and GETs per
    /// second at `resourceVersion=0` and consistent.
    list_us: [f64; 2],
    cached_get: [f64; 2],
    consistent_get: [f64; 2],
    /// The time until every event of the watch from an old resourceVersion arrived, or why
    /// not.
    watch: Result<Duration, String>,
}

/// One backend's figures.
struct Report {
    backend: Backend,
    fill_per_s: f64,
    empty_kib: u64,
    points: Vec<Point>,
    restart_ready: Duration,
    /// From the spawn until reads at resourceVersion 0 answered from the filled caches.
    restart_cached: Duration,
    restart_rss_kib: u64,
    restart_settled_kib: u64,
    namespace_deleted: Result<Duration, String>,
}

/// The running server of one backend, and what it needs to be started again.
struct Running {
    server: Server,
    clients: Vec<Client>,
    _etcd: Option<EtcdServer>,
    flags: Vec<String>,
    data_dir: std::path::PathBuf,
}

impl Running {
    async fn start(args: &Args, backend: Backend, dir: &Path) -> anyhow::Result<Running> {
        let (etcd, flags) = match backend {
            Backend::Sqlite => (None, Vec::new()),
            Backend::Etcd => {
                let etcd = EtcdServer::start_with(EtcdServerOptions {
                    binary: args.etcd.clone(),
                    ..EtcdServerOptions::default()
                })
                .await
                .context("starting etcd")?;
                let flags = vec![
                    "--storage-backend=etcd".to_owned(),
                    format!("--etcd-servers={}", etcd.endpoint()),
                ];
                (Some(etcd), flags)
            }
        };
        let data_dir = dir.join(format!("scale-{backend:?}").to_lowercase());
        let server = Server::role(&args.genplane(), "all-in-one", &data_dir, &flags)
            .await
            .with_context(|| format!("starting all-in-one on {backend:?}"))?;
        let clients = connections(&server).await?;
        Ok(Running {
            server,
            clients,
            _etcd: etcd,
            flags,
            data_dir,
        })
    }

    fn client(&self) -> &Client {
        &self.server.client
    }
}

/// [`FILL_CONNECTIONS`] connections to `server`.
async fn connections(server: &Server) -> anyhow::Result<Vec<Client>> {
    let mut clients = Vec::new();
    for _ in 0..FILL_CONNECTIONS {
        clients.push(Client::connect(&server.base, server.tls.clone()).await?);
    }
    Ok(clients)
}

/// Creates objects `from..to` of the layout (namespace after namespace), with `in_flight`
/// requests at once over `clients`; prints its progress every tenth.
async fn fill(
    clients: &[Client],
    per_namespace: usize,
    from: usize,
    to: usize,
    size: usize,
    in_flight: usize,
) -> anyhow::Result<()> {
    let next = Arc::new(AtomicUsize::new(from));
    let done = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let total = to - from;
    let mut writers = tokio::task::JoinSet::new();
    for w in 0..in_flight.max(1) {
        let client = clients[w % clients.len()].clone();
        let (next, done) = (next.clone(), done.clone());
        writers.spawn(async move {
            loop {
                let k = next.fetch_add(1, Ordering::Relaxed);
                if k >= to {
                    return anyhow::Ok(());
                }
                let (n, i) = place(k, per_namespace);
                client
                    .expect(
                        Method::POST,
                        &collection(n),
                        Some(object(n, i, size)),
                        StatusCode::CREATED,
                    )
                    .await?;
                let finished = done.fetch_add(1, Ordering::Relaxed) + 1;
                if total >= 10 && finished % (total / 10) == 0 {
                    println!(
                        "    {finished} of {total} created, {:.0}/s",
                        finished as f64 / started.elapsed().as_secs_f64()
                    );
                }
            }
        });
    }
    for result in writers.join_all().await {
        result?;
    }
    Ok(())
}

/// Walks `path` (a collection of every namespace) 500 at a time; returns the objects listed,
/// their JSON's bytes and the time the requests took (the parsing of each page not counted).
async fn paginated_list(client: &Client, path: &str) -> anyhow::Result<(usize, u64, Duration)> {
    let mut token: Option<String> = None;
    let (mut items, mut bytes, mut took) = (0, 0u64, Duration::ZERO);
    loop {
        let query = match &token {
            Some(t) => format!("{path}?limit={PAGE}&continue={t}"),
            None => format!("{path}?limit={PAGE}"),
        };
        let started = Instant::now();
        let body = client
            .expect(Method::GET, &query, None, StatusCode::OK)
            .await?;
        took += started.elapsed();
        let page: serde_json::Value = serde_json::from_slice(&body)?;
        for item in page["items"].as_array().into_iter().flatten() {
            items += 1;
            bytes += serde_json::to_vec(item)?.len() as u64;
        }
        match page["metadata"]["continue"].as_str() {
            Some(t) if !t.is_empty() => token = Some(t.to_owned()),
            _ => return Ok((items, bytes, took)),
        }
    }
}

/// GETs of existing objects of one kind (ConfigMaps with `kind` 0, custom resources with 1; of
/// the first `objects`) from `in_flight` requests at once for `slice`; `rv0` reads at
/// `resourceVersion=0`. Requests per second.
#[allow(clippy::too_many_arguments)]
async fn gets(
    clients: &[Client],
    per_namespace: usize,
    objects: usize,
    kind: usize,
    rv0: bool,
    in_flight: usize,
    slice: Duration,
) -> anyhow::Result<f64> {
    let count = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let deadline = started + slice;
    let mut readers = tokio::task::JoinSet::new();
    for r in 0..in_flight.max(1) {
        let client = clients[r % clients.len()].clone();
        let count = count.clone();
        readers.spawn(async move {
            // A fixed stride over the objects from a per-reader start: spread, and the same
            // sequence in every run.
            let of_kind = (objects / 2).max(1);
            let mut j = (r * 7919) % of_kind;
            while Instant::now() < deadline {
                j = (j + 104_729) % of_kind;
                let (n, i) = place(2 * j + kind, per_namespace);
                let mut path = format!("{}/o-{i:07}", collection(n));
                if rv0 {
                    path.push_str("?resourceVersion=0");
                }
                client
                    .expect(Method::GET, &path, None, StatusCode::OK)
                    .await?;
                count.fetch_add(1, Ordering::Relaxed);
            }
            anyhow::Ok(())
        });
    }
    for result in readers.join_all().await {
        result?;
    }
    Ok(count.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64())
}

/// The resourceVersion a consistent LIST of `path` answers at.
async fn current_resource_version(client: &Client, path: &str) -> anyhow::Result<String> {
    let body = client
        .expect(
            Method::GET,
            &format!("{path}?limit=1"),
            None,
            StatusCode::OK,
        )
        .await?;
    let list: serde_json::Value = serde_json::from_slice(&body)?;
    list["metadata"]["resourceVersion"]
        .as_str()
        .map(str::to_owned)
        .context("a list without a resourceVersion")
}

/// Creates `events` ConfigMaps in a namespace of their own (`label` names it), then watches
/// every ConfigMap from the resourceVersion before them until their ADDED events arrived;
/// the time from the watch's request to the last of them, or what ended the watch.
async fn watch_from_old(
    client: &Client,
    label: &str,
    events: usize,
    size: usize,
) -> anyhow::Result<Result<Duration, String>> {
    let ns = format!("scale-watch-{label}");
    create_namespace(client, &ns).await?;
    let old = current_resource_version(client, "/api/v1/configmaps").await?;
    for i in 0..events {
        client
            .expect(
                Method::POST,
                &configmaps(&ns),
                Some(configmap(&format!("w-{i:06}"), size, None)),
                StatusCode::CREATED,
            )
            .await?;
    }
    let path =
        format!("/api/v1/configmaps?watch=1&resourceVersion={old}&allowWatchBookmarks=false");
    let started = Instant::now();
    let response = client.start(Method::GET, &path, None).await?;
    if response.status() != StatusCode::OK {
        let status = response.status();
        let body = response.into_body().collect().await?.to_bytes();
        return Ok(Err(format!(
            "{status}: {}",
            String::from_utf8_lossy(&body[..body.len().min(200)])
        )));
    }
    let mut body = response.into_body();
    let (mut seen, mut partial) = (0, Vec::new());
    let marker = format!("\"namespace\":\"{ns}\"");
    while seen < events {
        let Some(frame) = tokio::time::timeout(Duration::from_secs(300), body.frame())
            .await
            .context("waiting for the watch's events")?
        else {
            return Ok(Err(format!("the watch ended after {seen} events")));
        };
        if let Some(data) = frame?.data_ref() {
            partial.extend_from_slice(data);
            while let Some(end) = partial.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = partial.drain(..=end).collect();
                let line = String::from_utf8_lossy(&line);
                if line.contains("\"type\":\"ERROR\"") {
                    return Ok(Err(format!("an ERROR event: {}", line.trim())));
                }
                if line.contains("\"type\":\"ADDED\"") && line.contains(&marker) {
                    seen += 1;
                }
            }
        }
    }
    Ok(Ok(started.elapsed()))
}

/// Waits until the server spends less than a tenth of a CPU (over a second) or `limit`
/// passed: after a fill, its controllers work through the creates' events for a while, and
/// reads timed beside that work would time it too. The time waited.
async fn quiet(pid: u32, limit: Duration) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let mut before = cpu_ticks(&[pid])?;
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = cpu_ticks(&[pid])?;
        if now - before < TICKS_PER_SECOND / 10 || started.elapsed() >= limit {
            return Ok(started.elapsed());
        }
        before = now;
    }
}

/// The names of the two kinds, by their index in [`Point`]'s figures.
const KINDS: [&str; 2] = ["ConfigMaps", "custom resources"];

/// The figures at `objects` objects.
async fn measure(
    args: &Args,
    running: &Running,
    objects: usize,
    label: &str,
) -> anyhow::Result<Point> {
    let pid = running.server.pid()?;
    let busy = quiet(pid, args.settle(Duration::from_secs(300))).await?;
    let rss_kib = settled(pid, args.settle(Duration::from_secs(30))).await?;
    // New connections: the server ends those idle for 90 s, as the fill's may have been while
    // the server went quiet, and the first one all through a long fill.
    let clients = connections(&running.server).await?;
    let client = &clients[0];
    let collections = [
        "/api/v1/configmaps".to_owned(),
        format!("/apis/{}/v1/{}", crate::crd::GROUP, WIDGETS.plural),
    ];
    let (mut json_bytes, mut list_us) = (0, [0.0; 2]);
    for (kind, path) in collections.iter().enumerate() {
        let (items, bytes, took) = paginated_list(client, path).await?;
        json_bytes += bytes;
        list_us[kind] = took.as_secs_f64() * 1e6 / items.max(1) as f64;
    }
    let slice = Duration::from_secs_f64(args.scale_slice);
    let per_namespace = args.scale_per_namespace;
    let (mut cached_get, mut consistent_get) = ([0.0; 2], [0.0; 2]);
    for kind in 0..2 {
        for (rv0, rate) in [
            (true, &mut cached_get[kind]),
            (false, &mut consistent_get[kind]),
        ] {
            *rate = gets(
                &clients,
                per_namespace,
                objects,
                kind,
                rv0,
                args.concurrency,
                slice,
            )
            .await?;
        }
    }
    let watch = watch_from_old(
        client,
        label,
        args.scale_watch_events,
        args.scale_value_size,
    )
    .await?;
    let point = Point {
        objects,
        rss_kib,
        json_bytes,
        list_us,
        cached_get,
        consistent_get,
        watch,
    };
    println!(
        "  at {objects} objects (quiet after {:.0} s): VmRSS {:.1} MiB for {:.1} MiB of JSON; \
         watch from an old resourceVersion: {}",
        busy.as_secs_f64(),
        mib(point.rss_kib),
        point.json_bytes as f64 / 1048576.0,
        show_time(&point.watch),
    );
    for (kind, name) in KINDS.iter().enumerate() {
        println!(
            "    {name}: LIST {:.2} us/object, GET {:.0}/s cached, {:.0}/s consistent",
            list_us[kind], cached_get[kind], consistent_get[kind]
        );
    }
    Ok(point)
}

fn show_time(result: &Result<Duration, String>) -> String {
    match result {
        Ok(took) => format!("{:.0} ms", took.as_secs_f64() * 1e3),
        Err(why) => why.clone(),
    }
}

/// Deletes namespace `name` and waits until it is gone; the time that took, or why not.
async fn delete_namespace(client: &Client, name: &str) -> anyhow::Result<Result<Duration, String>> {
    let path = format!("/api/v1/namespaces/{name}");
    let started = Instant::now();
    client
        .expect(Method::DELETE, &path, None, StatusCode::OK)
        .await?;
    loop {
        let (status, _) = client.call(Method::GET, &path, None).await?;
        if status == StatusCode::NOT_FOUND {
            return Ok(Ok(started.elapsed()));
        }
        if started.elapsed() > DELETE_TIMEOUT {
            return Ok(Err(format!("still there after {DELETE_TIMEOUT:?}")));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// One backend, from an empty store to the deleted namespace.
async fn run_backend(args: &Args, backend: Backend, dir: &Path) -> anyhow::Result<Report> {
    let objects = args.scale_objects.max(1);
    let per_namespace = args.scale_per_namespace.max(1);
    let baseline = args.scale_baseline.min(objects);
    let size = args.scale_value_size;
    println!("\n{backend:?}:");
    let mut running = Running::start(args, backend, dir).await?;
    let empty_kib = settled(running.server.pid()?, args.settle(Duration::from_secs(30))).await?;
    establish(running.client(), &WIDGETS, size, &namespace(1))
        .await
        .context("creating the CRD")?;
    for n in 0..namespaces(objects, per_namespace) {
        create_namespace(running.client(), &namespace(n)).await?;
    }
    let in_flight = args.scale_in_flight;
    let started = Instant::now();
    fill(
        &running.clients,
        per_namespace,
        0,
        baseline,
        size,
        in_flight,
    )
    .await?;
    let mut filling = started.elapsed();
    let mut points = vec![measure(args, &running, baseline, "baseline").await?];
    if objects > baseline {
        // New connections, the first ones having idled while the baseline was measured.
        let clients = connections(&running.server).await?;
        let started = Instant::now();
        fill(&clients, per_namespace, baseline, objects, size, in_flight).await?;
        filling += started.elapsed();
        points.push(measure(args, &running, objects, "full").await?);
    }
    let fill_per_s = objects as f64 / filling.as_secs_f64();

    // The same data, a new process.
    running.server.check_alive()?;
    let Running {
        server,
        _etcd,
        flags,
        data_dir,
        ..
    } = running;
    server.stop().await?;
    let started = Instant::now();
    let server = Server::role_within(
        &args.genplane(),
        "all-in-one",
        &data_dir,
        &flags,
        RESTART_TIMEOUT,
    )
    .await
    .context("starting all-in-one again")?;
    let restart_ready = started.elapsed();
    let pid = server.pid()?;
    let restart_rss_kib = memory(pid)?.0;
    // Ready is not yet served from memory: a read at resourceVersion 0 waits for its watch
    // cache's first list, so one of each resource times the caches filled.
    for path in [
        "/api/v1/configmaps".to_owned(),
        format!("/apis/{}/v1/{}", crate::crd::GROUP, WIDGETS.plural),
    ] {
        server
            .client
            .expect(
                Method::GET,
                &format!("{path}?limit=1&resourceVersion=0"),
                None,
                StatusCode::OK,
            )
            .await?;
    }
    let restart_cached = started.elapsed();
    let restart_settled_kib = settled(pid, args.settle(Duration::from_secs(30))).await?;
    println!(
        "  restarted: ready after {:.1} s, served from the filled caches after {:.1} s, VmRSS \
         {:.1} MiB at ready, {:.1} MiB settled",
        restart_ready.as_secs_f64(),
        restart_cached.as_secs_f64(),
        mib(restart_rss_kib),
        mib(restart_settled_kib)
    );
    let namespace_deleted = delete_namespace(&server.client, &namespace(0)).await?;
    println!(
        "  namespace {} of {} ConfigMaps deleted: {}",
        namespace(0),
        per_namespace.min(objects.div_ceil(2)),
        show_time(&namespace_deleted)
    );
    let mut server = server;
    server.check_alive()?;
    server.stop().await?;
    drop(_etcd);
    Ok(Report {
        backend,
        fill_per_s,
        empty_kib,
        points,
        restart_ready,
        restart_cached,
        restart_rss_kib,
        restart_settled_kib,
        namespace_deleted,
    })
}

/// Prints `report` beside the targets.
fn summarize(report: &Report, per_namespace: usize) {
    let met = |ok: bool| if ok { "met" } else { "NOT met" };
    println!(
        "\n{:?}: filled at {:.0} objects/s",
        report.backend, report.fill_per_s
    );
    println!(
        "  {:<10} {:>9} {:>10} {:>9} {:>9} {:>10}",
        "objects", "RSS MiB", "growth/obj", "JSON MiB", "RSS/JSON", "old watch"
    );
    for p in &report.points {
        let growth = p.rss_kib.saturating_sub(report.empty_kib) as f64 * 1024.0 / p.objects as f64;
        println!(
            "  {:<10} {:>9.1} {:>9.0}B {:>9.1} {:>8.2}x {:>10}",
            p.objects,
            mib(p.rss_kib),
            growth,
            p.json_bytes as f64 / 1048576.0,
            p.rss_kib as f64 * 1024.0 / p.json_bytes.max(1) as f64,
            show_time(&p.watch),
        );
    }
    let (Some(first), Some(last)) = (report.points.first(), report.points.last()) else {
        return;
    };
    let cached = report.restart_cached.as_secs_f64();
    println!(
        "  after a restart: /readyz in {:.1} s, the caches filled in {cached:.1} s (target on \
         SQLite: <= 30 s: {}); VmRSS {:.1} MiB at ready, {:.1} MiB settled",
        report.restart_ready.as_secs_f64(),
        if report.backend == Backend::Sqlite {
            met(cached <= 30.0)
        } else {
            "-"
        },
        mib(report.restart_rss_kib),
        mib(report.restart_settled_kib)
    );
    let rss_ratio = last.rss_kib as f64 * 1024.0 / last.json_bytes.max(1) as f64;
    println!(
        "  RSS at {} objects: {rss_ratio:.2}x their JSON (target <= 1.5x: {})",
        last.objects,
        met(rss_ratio <= 1.5)
    );
    for (kind, name) in KINDS.iter().enumerate() {
        let list = last.list_us[kind] / first.list_us[kind];
        let cached_get = first.cached_get[kind] / last.cached_get[kind];
        let consistent_get = first.consistent_get[kind] / last.consistent_get[kind];
        println!(
            "  {name}, cost per object at {} against {} (target <= 1.2x): paginated LIST \
             {list:.2}x ({:.2} us) {}, cached GET {cached_get:.2}x ({:.0}/s) {}, consistent GET \
             {consistent_get:.2}x ({:.0}/s)",
            last.objects,
            first.objects,
            last.list_us[kind],
            met(list <= 1.2),
            last.cached_get[kind],
            met(cached_get <= 1.2),
            last.consistent_get[kind],
        );
    }
    println!(
        "  namespace of {per_namespace} objects deleted in {}",
        show_time(&report.namespace_deleted)
    );
}

/// Storage at scale, on each backend asked for.
pub(crate) async fn storage_scale(args: &Args, dir: &Path) -> anyhow::Result<()> {
    println!(
        "\nstorage at scale: {} objects of {} bytes of data ({} a namespace, ConfigMaps and \
         custom resources in turn), one all-in-one server per backend; figures at {} objects \
         and at all",
        args.scale_objects, args.scale_value_size, args.scale_per_namespace, args.scale_baseline
    );
    let mut reports = Vec::new();
    for backend in &args.scale_backends {
        reports.push(run_backend(args, *backend, dir).await?);
    }
    println!("\nstorage at scale, against issue #43's targets:");
    for report in &reports {
        // The first namespace holds the even objects, up to a namespace's worth.
        let first = args.scale_per_namespace.min(args.scale_objects.div_ceil(2));
        summarize(report, first);
    }
    Ok(())
}
