//! The cluster's components read the API as controllers do: a reflector keeps a local copy of
//! what they watch, and every change wakes them to reconcile everything again (level-triggered;
//! the cluster is small).

use std::sync::Arc;

use futures::StreamExt as _;
use kube::Resource;
use kube::api::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt as _, watcher};
use serde::de::DeserializeOwned;
use tokio::sync::Notify;

/// A task aborted when this handle is dropped: a component's watches and servers stop with
/// it (a stopped machine stops its kubelet's).
#[derive(Debug)]
pub struct AbortOnDrop(pub tokio::task::JoinHandle<()>);

impl AbortOnDrop {
    /// Whether the task has ended.
    pub fn is_finished(&self) -> bool {
        self.0.is_finished()
    }
}

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Watches `api` (narrowed by `config`) into a local store; `changed` is notified on every
/// event. The watch runs until the returned handle is dropped.
pub(crate) fn reflect<K>(
    api: Api<K>,
    config: watcher::Config,
    changed: Arc<Notify>,
) -> (Store<K>, AbortOnDrop)
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone,
{
    let (store, writer) = reflector::store();
    let task = tokio::spawn(async move {
        let mut events = reflector::reflector(writer, watcher(api, config))
            .default_backoff()
            .boxed();
        while let Some(event) = events.next().await {
            if let Err(error) = event {
                tracing::debug!(%error, "watch interrupted");
            }
            changed.notify_one();
        }
    });
    (store, AbortOnDrop(task))
}
