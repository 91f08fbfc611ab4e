//! The `root-ca-cert-publisher` controller: the `kube-root-ca.crt` ConfigMap in every namespace,
//! holding the root CA bundle under `ca.crt`, with upstream's description annotation; created
//! when missing, restored when its data or annotation changes.
//!
//! Namespaces come from the shared namespace watch; the ConfigMaps are watched by a field
//! selector on their name.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt as _, watcher};

use crate::informers::SharedInformers;

/// The ConfigMap's name.
pub const ROOT_CA_CONFIG_MAP: &str = "kube-root-ca.crt";
/// The key holding the bundle.
pub const CA_KEY: &str = "ca.crt";
/// The annotation upstream sets on the ConfigMap.
pub const DESCRIPTION_ANNOTATION: &str = "kubernetes.io/description";
/// Its value.
pub const DESCRIPTION: &str = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters.";

/// Errors of the root-CA publisher.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A request to the API server failed.
    #[error("publishing {ROOT_CA_CONFIG_MAP}: {0}")]
    Api(#[from] kube::Error),
}

struct Context {
    client: kube::Client,
    root_ca: String,
    config_maps: Store<ConfigMap>,
}

/// Runs the controller, publishing `root_ca` (PEM), on the shared namespace watch of
/// `informers`, until its watches end (they do not on their own).
pub async fn run(
    client: kube::Client,
    informers: SharedInformers,
    root_ca: String,
) -> Result<(), Error> {
    let (namespaces, namespace_events) = informers.typed::<Namespace>();
    let namespace_events = namespace_events.results().applied_objects();
    let (config_maps, writer) = reflector::store();
    let config_map_events = watcher(
        Api::<ConfigMap>::all(client.clone()),
        watcher::Config::default().fields(&format!("metadata.name={ROOT_CA_CONFIG_MAP}")),
    )
    .default_backoff()
    .reflect(writer)
    .touched_objects();
    let context = Arc::new(Context {
        client,
        root_ca,
        config_maps,
    });
    Controller::for_stream(namespace_events, namespaces)
        .watches_stream(config_map_events, |cm: ConfigMap| {
            cm.metadata
                .namespace
                .map(|ns| ObjectRef::<Namespace>::new(&ns))
        })
        .run(reconcile, error_policy, context)
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::debug!(%error, "root-ca-cert-publisher sync");
            }
        })
        .await;
    Ok(())
}

/// The ConfigMap's data for `root_ca`.
fn data(root_ca: &str) -> BTreeMap<String, String> {
    BTreeMap::from([(CA_KEY.to_owned(), root_ca.to_owned())])
}

async fn reconcile(namespace: Arc<Namespace>, context: Arc<Context>) -> Result<Action, Error> {
    let Some(name) = namespace.metadata.name.as_deref() else {
        return Ok(Action::await_change());
    };
    let api = Api::<ConfigMap>::namespaced(context.client.clone(), name);
    let want = data(&context.root_ca);
    let key = ObjectRef::new(ROOT_CA_CONFIG_MAP).within(name);
    let Some(current) = context.config_maps.get(&key) else {
        let cm = ConfigMap {
            metadata: ObjectMeta {
                name: Some(ROOT_CA_CONFIG_MAP.to_owned()),
                annotations: Some(BTreeMap::from([(
                    DESCRIPTION_ANNOTATION.to_owned(),
                    DESCRIPTION.to_owned(),
                )])),
                ..ObjectMeta::default()
            },
            data: Some(want),
            ..ConfigMap::default()
        };
        return match api.create(&PostParams::default(), &cm).await {
            Ok(_) => {
                tracing::info!(namespace = name, "published {ROOT_CA_CONFIG_MAP}");
                Ok(Action::await_change())
            }
            Err(error) if crate::serviceaccount::ignorable_create_error(&error) => {
                Ok(Action::await_change())
            }
            Err(error) => Err(error.into()),
        };
    };
    let annotated = current
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(DESCRIPTION_ANNOTATION))
        .is_some_and(|v| !v.is_empty());
    if current.data.as_ref() == Some(&want) && annotated {
        return Ok(Action::await_change());
    }
    let mut cm = (*current).clone();
    cm.data = Some(want);
    cm.metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(DESCRIPTION_ANNOTATION.to_owned(), DESCRIPTION.to_owned());
    match api
        .replace(ROOT_CA_CONFIG_MAP, &PostParams::default(), &cm)
        .await
    {
        Ok(_) => {
            tracing::info!(namespace = name, "restored {ROOT_CA_CONFIG_MAP}");
            Ok(Action::await_change())
        }
        // Deleted meanwhile: the delete event brings it back.
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(Action::await_change()),
        Err(error) => Err(error.into()),
    }
}

fn error_policy(_: Arc<Namespace>, error: &Error, _: Arc<Context>) -> Action {
    tracing::warn!(%error, "root-ca-cert-publisher sync failed");
    Action::requeue(Duration::from_secs(5))
}
