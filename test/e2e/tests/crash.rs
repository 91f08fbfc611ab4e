//! Crash safety: a writer process is killed with SIGKILL at random moments while it writes;
//! after each kill the store opens cleanly and every write it acknowledged is there, intact.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use genplane_storage::{ListRequest, Revision, Storage};
use genplane_storage_etcd::EtcdStore;
use genplane_storage_etcd::testing::EtcdServer;
use genplane_storage_sqlite::{SqliteConfig, SqliteStore};

const KILLS: usize = 24;

/// A small deterministic generator, so that a failing run can be repeated with its seed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// Reads `ack <key> <revision>` lines until the pipe closes; a line cut by the kill is ignored.
fn collect_acks(
    stdout: std::process::ChildStdout,
    acks: Arc<Mutex<BTreeMap<String, Revision>>>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stdout);
        let mut line = String::new();
        while reader.read_line(&mut line).unwrap_or(0) > 0 {
            if let Some(rest) = line.strip_suffix('\n').and_then(|l| l.strip_prefix("ack "))
                && let Some((key, revision)) = rest.split_once(' ')
            {
                acks.lock()
                    .unwrap()
                    .insert(key.to_owned(), revision.parse().unwrap());
            }
            line.clear();
        }
    })
}

async fn verify<S: Storage>(store: &S, acks: &BTreeMap<String, Revision>) -> usize {
    let listed = store
        .list(ListRequest {
            prefix: "/crash/".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let present: BTreeMap<&str, _> = listed
        .items
        .iter()
        .map(|kv| (kv.key.as_str(), kv))
        .collect();
    for kv in &listed.items {
        assert_eq!(
            kv.value,
            genplane_test_e2e::crash_value(&kv.key),
            "{} holds a corrupt value",
            kv.key
        );
        assert_eq!(
            kv.create_revision, kv.mod_revision,
            "{} was written once",
            kv.key
        );
    }
    for (key, revision) in acks {
        let kv = present
            .get(key.as_str())
            .unwrap_or_else(|| panic!("acknowledged write {key} at {revision} was lost"));
        assert_eq!(
            kv.mod_revision, *revision,
            "{key} has another revision than acknowledged"
        );
    }
    assert!(listed.revision >= acks.values().copied().max().unwrap_or(0));
    listed.items.len()
}

fn seeded_rng() -> Rng {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    println!("seed {seed}");
    Rng(seed)
}

#[tokio::test]
async fn sqlite_keeps_every_acknowledged_write_across_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("crash.db");
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    println!("seed {seed}");
    let mut rng = Rng(seed);
    let acks = Arc::new(Mutex::new(BTreeMap::new()));
    let mut next = 0u64;
    for round in 0..KILLS {
        let mut writer = Command::new(env!("CARGO_BIN_EXE_genplane-storage-writer"))
            .args([
                "--sqlite",
                db.to_str().unwrap(),
                "--start",
                &next.to_string(),
            ])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let reader = collect_acks(writer.stdout.take().unwrap(), acks.clone());
        // Let it write for a random while (including while it is still starting), then kill it.
        std::thread::sleep(Duration::from_millis(20 + rng.below(300)));
        writer.kill().unwrap();
        writer.wait().unwrap();
        reader.join().unwrap();
        next += 1_000_000;

        let store = SqliteStore::open(&SqliteConfig::new(&db))
            .unwrap_or_else(|e| panic!("round {round}: the store did not open cleanly: {e}"));
        let acks = acks.lock().unwrap().clone();
        let present = verify(&store, &acks).await;
        println!(
            "round {round}: {} acknowledged, {present} present",
            acks.len()
        );
    }
    let total = acks.lock().unwrap().len();
    assert!(
        total > 1000,
        "the writer made too little progress to prove anything: {total} writes"
    );
}

/// On etcd the store is the etcd process: each round kills etcd with SIGKILL in the middle of
/// the writes, then the writer, restarts etcd on the same data and checks every acknowledged
/// write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_keeps_every_acknowledged_write_across_kill_9() {
    let mut etcd = EtcdServer::start().await.unwrap();
    let mut rng = seeded_rng();
    let acks = Arc::new(Mutex::new(BTreeMap::new()));
    let mut next = 0u64;
    for round in 0..KILLS {
        let mut writer = Command::new(env!("CARGO_BIN_EXE_genplane-storage-writer"))
            .args(["--etcd", &etcd.endpoint(), "--start", &next.to_string()])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let reader = collect_acks(writer.stdout.take().unwrap(), acks.clone());
        tokio::time::sleep(Duration::from_millis(100 + rng.below(400))).await;
        etcd.kill();
        // Writes in flight when etcd died are never acknowledged; give the writer a moment to
        // see them fail, then kill it too.
        tokio::time::sleep(Duration::from_millis(rng.below(50))).await;
        writer.kill().unwrap();
        writer.wait().unwrap();
        reader.join().unwrap();
        next += 1_000_000;

        etcd.restart()
            .await
            .unwrap_or_else(|e| panic!("round {round}: etcd did not restart cleanly: {e}"));
        let store = EtcdStore::connect(&etcd.config()).await.unwrap();
        let acks = acks.lock().unwrap().clone();
        let present = verify(&store, &acks).await;
        println!(
            "round {round}: {} acknowledged, {present} present",
            acks.len()
        );
    }
    let total = acks.lock().unwrap().len();
    assert!(
        total > 1000,
        "the writer made too little progress to prove anything: {total} writes"
    );
}
