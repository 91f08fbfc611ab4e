//! Writes keys `<prefix><n>` for n from `--start` on, with several writers at once, and prints
//! `ack <key> <revision>` on standard output once each write is acknowledged (durable).
//! Each key is written at most once, with the value `genplane_test_e2e::crash_value(key)`; a
//! write that fails transiently (its outcome unknown) is not acknowledged and not retried.

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use clap::Parser;
use genplane_storage::{Bytes, Storage};
use genplane_storage_etcd::{EtcdConfig, EtcdStore};
use genplane_storage_sqlite::{SqliteConfig, SqliteStore};

#[derive(Parser)]
struct Args {
    /// The SQLite database file to write to.
    #[arg(long, required_unless_present = "etcd", conflicts_with = "etcd")]
    sqlite: Option<std::path::PathBuf>,
    /// The etcd endpoint to write to.
    #[arg(long)]
    etcd: Option<String>,
    /// The key prefix.
    #[arg(long, default_value = "/crash/")]
    prefix: String,
    /// The first key number.
    #[arg(long, default_value_t = 0)]
    start: u64,
    /// How many writers run at once.
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    match (&args.sqlite, &args.etcd) {
        (Some(path), _) => {
            write(
                Arc::new(SqliteStore::open(&SqliteConfig::new(path))?),
                &args,
            )
            .await
        }
        (None, Some(endpoint)) => {
            write(
                Arc::new(EtcdStore::connect(&EtcdConfig::new([endpoint.clone()])).await?),
                &args,
            )
            .await
        }
        (None, None) => anyhow::bail!("--sqlite or --etcd is required"),
    }
}

async fn write<S: Storage>(store: Arc<S>, args: &Args) -> anyhow::Result<()> {
    let next = Arc::new(AtomicU64::new(args.start));
    let mut writers = tokio::task::JoinSet::new();
    for _ in 0..args.concurrency {
        let (store, next, prefix) = (store.clone(), next.clone(), args.prefix.clone());
        writers.spawn(async move {
            loop {
                let key = format!("{prefix}{:010}", next.fetch_add(1, Ordering::Relaxed));
                let value = Bytes::from(genplane_test_e2e::crash_value(&key));
                let kv = match store.create(&key, value).await {
                    Ok(kv) => kv,
                    Err(e) if e.is_retryable() => {
                        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                        continue;
                    }
                    Err(e) => return Err(e.into()),
                };
                let mut out = std::io::stdout().lock();
                writeln!(out, "ack {} {}", kv.key, kv.mod_revision)?;
                out.flush()?;
            }
            #[allow(unreachable_code)]
            anyhow::Ok(())
        });
    }
    // Runs until killed; a failed write ends it with the error.
    if let Some(result) = writers.join_next().await {
        result??;
    }
    Ok(())
}
