//! Writes keys `<prefix><n>` for n from `--start` on, with several writers at once, and prints
//! `ack <key> <revision>` on standard output once each write is acknowledged (durable).
//! Each key is written exactly once, with the value `genplane_test_e2e::crash_value(key)`.

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use clap::Parser;
use genplane_storage::{Bytes, Storage};
use genplane_storage_sqlite::{SqliteConfig, SqliteStore};

#[derive(Parser)]
struct Args {
    /// The SQLite database file.
    #[arg(long)]
    sqlite: std::path::PathBuf,
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
    let store = Arc::new(SqliteStore::open(&SqliteConfig::new(&args.sqlite))?);
    let next = Arc::new(AtomicU64::new(args.start));
    let mut writers = tokio::task::JoinSet::new();
    for _ in 0..args.concurrency {
        let (store, next, prefix) = (store.clone(), next.clone(), args.prefix.clone());
        writers.spawn(async move {
            loop {
                let key = format!("{prefix}{:010}", next.fetch_add(1, Ordering::Relaxed));
                let value = Bytes::from(genplane_test_e2e::crash_value(&key));
                let kv = store.create(&key, value).await?;
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
