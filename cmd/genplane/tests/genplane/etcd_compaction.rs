//! Apiservers on etcd compact etcd's history (`--etcd-compaction-interval`), as kube-apiserver
//! does: old revisions become unreadable, the space they held is used again, and every
//! apiserver sharing the etcd answers a watch from before the compaction the same way (410),
//! although their watch caches saw those events.

#![allow(clippy::unwrap_used)]

use futures::StreamExt;
use genplane_storage_etcd::testing::EtcdServer;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;

/// The ConfigMaps written over and over.
const KEYS: usize = 8;
/// Each write's value.
const VALUE_BYTES: usize = 16 * 1024;
/// Writes per round: about 2 MB of history.
const WRITES_PER_ROUND: usize = 120;

async fn admin(server: &crate::support::Apiserver) -> kube::Client {
    server.client().await
}

fn resource_version(cm: &ConfigMap) -> i64 {
    cm.metadata
        .resource_version
        .as_deref()
        .unwrap()
        .parse()
        .unwrap()
}

/// One round of writes; the revision of the last one.
async fn round(maps: &Api<ConfigMap>, round: usize) -> i64 {
    let mut last = 0;
    for i in 0..WRITES_PER_ROUND {
        let fill = char::from(b'a' + u8::try_from((round + i) % 26).unwrap());
        let value: String = std::iter::repeat_n(fill, VALUE_BYTES).collect();
        let patch = json!({"data": {"v": value}});
        let written = maps
            .patch(
                &format!("cm-{}", i % KEYS),
                &PatchParams::default(),
                &Patch::Merge(patch),
            )
            .await
            .unwrap();
        last = resource_version(&written);
    }
    last
}

/// The revision etcd's compaction key says was compacted to.
async fn compacted(raw: &mut etcd_client::Client) -> i64 {
    let answer = raw.get("compact_rev_key", None).await.unwrap();
    answer
        .kvs()
        .first()
        .map_or(0, |kv| kv.value_str().unwrap().parse().unwrap())
}

/// Waits until etcd is compacted to `revision` or later: the compaction key says so, and a
/// read before it fails.
async fn wait_compacted_past(raw: &mut etcd_client::Client, revision: i64) {
    crate::support::eventually_async(&format!("etcd compacted past {revision}"), || {
        let mut raw = raw.clone();
        async move {
            let before = etcd_client::GetOptions::new().with_revision(revision - 1);
            (compacted(&mut raw).await >= revision && raw.get("/", Some(before)).await.is_err())
                .then_some(())
        }
    })
    .await;
}

/// The space etcd's database uses (`dbSizeInUse`).
async fn in_use(raw: &mut etcd_client::Client) -> i64 {
    raw.status().await.unwrap().raft_used_db_size()
}

/// A metric's value in an apiserver's `/metrics`.
async fn metric(client: &kube::Client, name: &str) -> i64 {
    let request = hyper::Request::get("/metrics").body(Vec::new()).unwrap();
    let text = client.request_text(request).await.unwrap();
    crate::support::sample(&text, name).unwrap_or_else(|| panic!("no {name} in the metrics"))
}

#[tokio::test(flavor = "multi_thread")]
async fn apiservers_compact_etcd_and_agree_on_old_revisions() {
    let etcd = EtcdServer::start().await.unwrap();
    let servers = format!("--etcd-servers={}", etcd.endpoint());
    let flags = [
        "--storage-backend=etcd",
        servers.as_str(),
        "--etcd-compaction-interval=1s",
    ];
    let a = crate::support::start_with(&flags);
    let b = crate::support::start_with(&flags);
    let (client_a, client_b) = (admin(&a).await, admin(&b).await);
    let maps = Api::<ConfigMap>::namespaced(client_a.clone(), "default");
    let mut first = 0;
    for i in 0..KEYS {
        let cm: ConfigMap =
            serde_json::from_value(json!({"metadata": {"name": format!("cm-{i}")}})).unwrap();
        let created = maps.create(&PostParams::default(), &cm).await.unwrap();
        if i == 0 {
            first = resource_version(&created);
        }
    }
    let mut raw = etcd_client::Client::connect([etcd.endpoint()], None)
        .await
        .unwrap();

    let end = round(&maps, 0).await;
    wait_compacted_past(&mut raw, end).await;
    let after_one = in_use(&mut raw).await;
    let mut end = 0;
    for r in 1..4 {
        end = round(&maps, r).await;
    }
    wait_compacted_past(&mut raw, end).await;
    let after_four = in_use(&mut raw).await;
    let round_bytes = i64::try_from(WRITES_PER_ROUND * VALUE_BYTES).unwrap();
    println!(
        "dbSizeInUse after 1 round of writes: {after_one} bytes; after 4: {after_four} bytes ({round_bytes} bytes of values per round)"
    );
    // Without compaction, the three rounds' history would add three rounds' worth.
    assert!(
        after_four < after_one + round_bytes * 3 / 2,
        "the history of three more rounds was kept: {after_one} -> {after_four} bytes in use"
    );

    let old = raw
        .get(
            "/registry/configmaps/default/cm-0",
            Some(etcd_client::GetOptions::new().with_revision(first)),
        )
        .await;
    let error = old
        .expect_err("the first revision is compacted")
        .to_string();
    assert!(error.contains("compacted"), "{error}");

    // Both watch caches saw those events; both answer as etcd does.
    for (name, client) in [("a", &client_a), ("b", &client_b)] {
        let api = Api::<ConfigMap>::namespaced(client.clone(), "default");
        let mut events = api
            .watch(&WatchParams::default(), &first.to_string())
            .await
            .unwrap()
            .boxed();
        match events.next().await {
            Some(Ok(WatchEvent::Error(status))) => {
                assert_eq!(
                    (status.code, status.reason.as_str()),
                    (410, "Expired"),
                    "{name}"
                );
            }
            other => panic!("apiserver {name} answered a compacted revision with {other:?}"),
        }
    }

    let compactions = metric(&client_a, "genplane_etcd_compactions_total").await
        + metric(&client_b, "genplane_etcd_compactions_total").await;
    assert!(compactions >= 2, "{compactions} compactions counted");
    for client in [&client_a, &client_b] {
        assert!(metric(client, "genplane_etcd_compacted_revision").await >= end);
    }
}
