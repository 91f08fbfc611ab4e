//! Memory per cached object (`--only memory`): a fresh SQLite apiserver, its VmRSS once
//! settled empty, after `--memory-objects` ConfigMaps of `--value-size` bytes were created, and
//! after one watcher without a resourceVersion received every one of them (the state as ADDED
//! events: what a watch keeps derived from each cached object). Each growth is given per object
//! and against the size of the object's JSON as a client reads it. With `--compare`, the second
//! executable is measured the same way, after the first.

use std::path::Path;
use std::time::Duration;

use anyhow::Context as _;
use http_body_util::BodyExt as _;
use hyper::{Method, StatusCode};

use crate::idle::fill;
use crate::process::{Server, memory, settled};
use crate::{Args, configmaps, create_namespace};

/// The namespace that holds the objects.
const NAMESPACE: &str = "bench-memory";

/// Reads a watch until `count` ADDED events arrived.
async fn receive_all(server: &Server, count: usize) -> anyhow::Result<()> {
    let path = format!("{}?watch=1", configmaps(NAMESPACE));
    let response = server.client.start(Method::GET, &path, None).await?;
    anyhow::ensure!(
        response.status() == StatusCode::OK,
        "GET {path}: {}",
        response.status()
    );
    let mut body = response.into_body();
    let mut seen = 0;
    while seen < count {
        let frame = tokio::time::timeout(Duration::from_secs(120), body.frame())
            .await
            .context("waiting for watch events")?
            .context("the watch ended early")??;
        if let Some(data) = frame.data_ref() {
            seen += data.iter().filter(|b| **b == b'\n').count();
        }
    }
    Ok(())
}

/// One executable's figures.
async fn measure(args: &Args, bin: &Path, dir: &Path) -> anyhow::Result<()> {
    let settle = args.settle(Duration::from_secs(30));
    let count = args.memory_objects;
    let mut server = Server::apiserver(bin, dir, &[])
        .await
        .context("starting the apiserver on SQLite")?;
    let pid = server.pid()?;
    create_namespace(&server.client, NAMESPACE).await?;
    let empty = settled(pid, settle).await?;
    fill(&server, NAMESPACE, count, args.value_size, args.concurrency).await?;
    let filled = settled(pid, settle).await?;
    let one = server
        .client
        .expect(
            Method::GET,
            &format!("{}/cm-000000", configmaps(NAMESPACE)),
            None,
            StatusCode::OK,
        )
        .await?;
    let json = one.len().saturating_sub(1) as f64;
    receive_all(&server, count).await?;
    let watched = settled(pid, settle).await?;
    let (_, peak) = memory(pid)?;
    let per_object = |kib: u64| kib as f64 * 1024.0 / count as f64;
    let cached = per_object(filled.saturating_sub(empty));
    let with_watch = per_object(watched.saturating_sub(empty));
    println!(
        "  {:<44} {:>8.1} {:>9.1} {:>9.0} {:>7.2}x {:>9.0} {:>7.2}x {:>9.1}",
        bin.display(),
        empty as f64 / 1024.0,
        filled as f64 / 1024.0,
        cached,
        cached / json,
        with_watch,
        with_watch / json,
        peak as f64 / 1024.0,
    );
    server.check_alive()?;
    server.stop().await
}

/// Memory per cached object, for the executable under test and the compared one.
pub(crate) async fn memory_per_object(args: &Args, dir: &Path) -> anyhow::Result<()> {
    println!(
        "\nmemory per cached object: {} ConfigMaps with {} bytes of data, one SQLite server; \
         VmRSS once settled (target: per object <= 1.5x its JSON)",
        args.memory_objects, args.value_size
    );
    println!(
        "  {:<44} {:>8} {:>9} {:>9} {:>8} {:>9} {:>8} {:>9}",
        "executable", "empty", "filled", "B/object", "of JSON", "+watch B", "of JSON", "peak MiB"
    );
    measure(args, &args.genplane(), &dir.join("memory")).await?;
    if let Some(compare) = &args.compare {
        measure(args, compare, &dir.join("memory-compare")).await?;
    }
    Ok(())
}
