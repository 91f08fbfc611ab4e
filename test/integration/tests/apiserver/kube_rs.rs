//! kube-rs 5 against the API server: typed CRUD, `get_opt`, conflicts, patches, and a
//! watcher-fed reflector that must equal a fresh list after 1,000 writes, in both list-watch
//! and streaming-list modes (across a restart over compacted history), and the event recorder.

use crate::support;

use std::collections::BTreeMap;

use futures::StreamExt;
use genplane_storage::Storage;
use genplane_test_support::eventually_async;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use serde_json::json;

fn configmap(name: &str, value: &str) -> ConfigMap {
    serde_json::from_value(
        json!({"metadata": {"name": name, "labels": {"app": "web"}}, "data": {"k": value}}),
    )
    .unwrap()
}

#[tokio::test]
async fn typed_crud() {
    let server = support::start().await;
    let api: Api<ConfigMap> = Api::namespaced(server.kube_client().await, "default");
    let created = api
        .create(&PostParams::default(), &configmap("a", "1"))
        .await
        .unwrap();
    assert!(created.metadata.uid.is_some());
    assert_eq!(api.get("a").await.unwrap().data.unwrap()["k"], "1");
    assert!(
        api.get_opt("missing").await.unwrap().is_none(),
        "a 404 with reason NotFound is None"
    );

    let mut stale = created.clone();
    stale.data = Some(BTreeMap::from([("k".to_owned(), "2".to_owned())]));
    api.replace("a", &PostParams::default(), &stale)
        .await
        .unwrap();
    let kube::Error::Api(conflict) = api
        .replace("a", &PostParams::default(), &stale)
        .await
        .unwrap_err()
    else {
        panic!()
    };
    assert_eq!((conflict.code, conflict.reason.as_str()), (409, "Conflict"));

    let patched = api
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"k": "3"}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.data.unwrap()["k"], "3");
    let listed = api
        .list(&ListParams::default().labels("app=web"))
        .await
        .unwrap();
    assert_eq!(listed.items.len(), 1);
    api.delete("a", &DeleteParams::default()).await.unwrap();
    assert!(api.get_opt("a").await.unwrap().is_none());
    let kube::Error::Api(already) = api
        .create(&PostParams::default(), &configmap("b", "1"))
        .await
        .and(
            api.create(&PostParams::default(), &configmap("b", "1"))
                .await,
        )
        .unwrap_err()
    else {
        panic!()
    };
    assert_eq!(already.reason, "AlreadyExists");
}

/// One write of the reflector workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Op {
    Create,
    Patch,
    Delete,
}

/// What a write came to: done, or refused with an API reason.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    Done,
    Refused(&'static str),
}

/// Sends one write: done, or refused for a reason the workload allows; anything else fails
/// the test.
async fn write(api: &Api<ConfigMap>, op: Op, name: &str, i: u32) -> Outcome {
    let result = match op {
        Op::Create => api
            .create(&PostParams::default(), &configmap(name, &i.to_string()))
            .await
            .map(drop),
        Op::Patch => api
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"data": {"k": i.to_string()}})),
            )
            .await
            .map(drop),
        Op::Delete => api.delete(name, &DeleteParams::default()).await.map(drop),
    };
    match result {
        Ok(()) => Outcome::Done,
        Err(kube::Error::Api(status)) if op == Op::Create && status.reason == "AlreadyExists" => {
            Outcome::Refused("AlreadyExists")
        }
        Err(other) => panic!("write {i} ({op:?} {name}): {other}"),
    }
}

/// Runs a reflector with `config` while 1,000 writes happen, with a forced compaction and a
/// server restart half-way (so the watch resumes from a revision that is gone: 410 and a
/// re-list), then checks it equals a fresh list.
async fn reflector_follows_writes(config: watcher::Config) {
    let mut server = support::start().await;
    let mut api: Api<ConfigMap> = Api::namespaced(server.kube_client().await, "default");
    let (reader, writer) = reflector::store::<ConfigMap>();
    let stream = reflector::reflector(writer, watcher(api.clone(), config).default_backoff())
        .applied_objects();
    let (gone_tx, mut gone_rx) = tokio::sync::watch::channel(false);
    let driver = tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(item) = stream.next().await {
            // Errors while the server restarts are expected; the watcher retries them.
            if let Err(watcher::Error::WatchError(status)) = &item
                && status.code == 410
            {
                gone_tx.send_replace(true);
            }
        }
    });
    reader.wait_until_ready().await.unwrap();
    let mut exists = std::collections::BTreeSet::new();
    let mut done: BTreeMap<Op, usize> = BTreeMap::new();
    for i in 0..1000u32 {
        if i == 500 {
            // While the server is down, other writes move the revision on and the history is
            // compacted: the watch resumes from a revision that is gone.
            let stopped = server.stop().await;
            for n in 0..3 {
                stopped
                    .storage
                    .create(&format!("/registry/elsewhere/{n}"), "{}".into())
                    .await
                    .unwrap();
            }
            let revision = stopped.storage.current_revision().await.unwrap();
            stopped.storage.compact(revision).await.unwrap();
            server = stopped.start().await;
            // A new client: the old one's connections ended with the old server (the
            // reflector's watcher, on the old client, recovers by itself).
            api = Api::namespaced(server.kube_client().await, "default");
        }
        // In groups of four writes to one name: a create (refused when an earlier group
        // left the object), two patches, and a delete in every other group.
        let group = i / 4;
        let name = format!("cm-{:02}", group % 60);
        let op = match i % 4 {
            0 => Op::Create,
            3 if group % 2 == 0 => Op::Delete,
            _ => Op::Patch,
        };
        let expected = match op {
            Op::Create if exists.contains(&name) => Outcome::Refused("AlreadyExists"),
            _ => Outcome::Done,
        };
        let outcome = write(&api, op, &name, i).await;
        assert_eq!(outcome, expected, "write {i} ({op:?} {name})");
        match (op, outcome) {
            (Op::Create, Outcome::Done) => drop(exists.insert(name)),
            (Op::Delete, _) => drop(exists.remove(&name)),
            _ => {}
        }
        *done.entry(op).or_default() += usize::from(outcome == Outcome::Done);
    }
    assert_eq!(
        done,
        BTreeMap::from([(Op::Create, 155), (Op::Patch, 625), (Op::Delete, 125)]),
        "every write the workload meant to succeed did"
    );
    tokio::time::timeout(
        genplane_test_support::DEADLINE,
        gone_rx.wait_for(|gone| *gone),
    )
    .await
    .expect("the watcher never saw a 410 after the compaction")
    .unwrap();
    let truth: BTreeMap<String, Option<String>> = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|cm| (cm.metadata.name.unwrap(), cm.metadata.resource_version))
        .collect();
    eventually_async(
        &format!(
            "the reflector to equal a fresh list of {} objects",
            truth.len()
        ),
        || async {
            let cached: BTreeMap<String, Option<String>> = reader
                .state()
                .iter()
                .map(|cm| {
                    (
                        cm.metadata.name.clone().unwrap(),
                        cm.metadata.resource_version.clone(),
                    )
                })
                .collect();
            (cached == truth).then_some(())
        },
    )
    .await;
    driver.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reflector_stays_equal_to_a_fresh_list() {
    reflector_follows_writes(watcher::Config::default()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streaming_list_reflector_stays_equal_to_a_fresh_list() {
    reflector_follows_writes(watcher::Config::default().streaming_lists()).await;
}

/// kube-runtime's event recorder: the first event is created in events.k8s.io/v1, a repeat
/// is merged into it as a series, and core/v1 shows the same Event with its count.
#[tokio::test]
async fn the_event_recorder_publishes_and_counts_repeats() {
    use k8s_openapi::api::core::v1::{Event as CoreEvent, ObjectReference};
    use k8s_openapi::api::events::v1::Event;
    use kube::runtime::events::{Event as Record, EventType, Recorder, Reporter};

    let server = support::start().await;
    let client = server.kube_client().await;
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let owner = configmaps
        .create(&PostParams::default(), &configmap("owner", "1"))
        .await
        .unwrap();
    let reference = ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("ConfigMap".into()),
        name: owner.metadata.name.clone(),
        namespace: owner.metadata.namespace.clone(),
        uid: owner.metadata.uid.clone(),
        resource_version: owner.metadata.resource_version.clone(),
        ..ObjectReference::default()
    };
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: "genplane-test".into(),
            instance: Some("test-0".into()),
        },
    );
    let record = Record {
        type_: EventType::Warning,
        reason: "Misconfigured".into(),
        note: Some("the key k is odd".into()),
        action: "Checking".into(),
        secondary: None,
    };
    recorder.publish(&record, &reference).await.unwrap();
    recorder.publish(&record, &reference).await.unwrap();
    recorder.publish(&record, &reference).await.unwrap();

    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    let listed = events.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(listed.len(), 1, "{listed:?}");
    let event = &listed[0];
    assert_eq!(event.reason.as_deref(), Some("Misconfigured"));
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert_eq!(event.reporting_controller.as_deref(), Some("genplane-test"));
    assert_eq!(event.regarding.as_ref().unwrap().uid, owner.metadata.uid);
    assert_eq!(event.series.as_ref().map(|s| s.count), Some(3));

    let core: Api<CoreEvent> = Api::namespaced(client, "default");
    let same = core
        .get(event.metadata.name.as_deref().unwrap())
        .await
        .unwrap();
    assert_eq!(same.message.as_deref(), Some("the key k is odd"));
    assert_eq!(same.involved_object.name.as_deref(), Some("owner"));
    assert_eq!(same.series.as_ref().and_then(|s| s.count), Some(3));
}

/// kube-runtime's finalizer helper: it adds its finalizer with a JSON patch guarded by `test`
/// operations, runs the cleanup once the object is being deleted, then removes the finalizer
/// the same way, and the object goes.
#[tokio::test]
async fn the_finalizer_helper_adds_cleans_up_and_removes() {
    use kube::runtime::controller::Action;
    use kube::runtime::finalizer::{Event as Finalized, finalizer};
    use std::sync::Arc;

    const NAME: &str = "genplane.test/cleanup";
    let server = support::start().await;
    let api: Api<ConfigMap> = Api::namespaced(server.kube_client().await, "default");
    api.create(&PostParams::default(), &configmap("guarded", "1"))
        .await
        .unwrap();

    // First pass: no finalizer yet, so the helper adds it (and does not reconcile).
    let current = Arc::new(api.get("guarded").await.unwrap());
    finalizer(&api, NAME, current, |_| async {
        Ok::<_, kube::Error>(Action::await_change())
    })
    .await
    .unwrap();
    let guarded = api.get("guarded").await.unwrap();
    assert_eq!(guarded.metadata.finalizers, Some(vec![NAME.to_owned()]));

    // Second pass: the finalizer is there and nothing is deleting: Apply.
    let applied = std::sync::atomic::AtomicBool::new(false);
    finalizer(&api, NAME, Arc::new(guarded), |event| {
        applied.store(
            matches!(event, Finalized::Apply(_)),
            std::sync::atomic::Ordering::SeqCst,
        );
        async { Ok::<_, kube::Error>(Action::await_change()) }
    })
    .await
    .unwrap();
    assert!(applied.into_inner());

    // A delete waits for the finalizer; the helper's cleanup pass removes it and the object goes.
    api.delete("guarded", &DeleteParams::default())
        .await
        .unwrap();
    let deleting = api.get("guarded").await.unwrap();
    assert!(deleting.metadata.deletion_timestamp.is_some());
    let cleaned = std::sync::atomic::AtomicBool::new(false);
    finalizer(&api, NAME, Arc::new(deleting), |event| {
        cleaned.store(
            matches!(event, Finalized::Cleanup(_)),
            std::sync::atomic::Ordering::SeqCst,
        );
        async { Ok::<_, kube::Error>(Action::await_change()) }
    })
    .await
    .unwrap();
    assert!(cleaned.into_inner());
    assert!(api.get_opt("guarded").await.unwrap().is_none());
}
