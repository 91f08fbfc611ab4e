//! The `serviceaccount` controller: a `default` ServiceAccount in every active namespace,
//! created again when it is deleted.
//!
//! It follows the shared namespace watch, and the `default` service accounts from the shared
//! metadata-only watch of service accounts; a namespace is synced when it changes or when its
//! `default` service account is deleted.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, ApiResource, PartialObjectMeta, PostParams};
use kube::runtime::WatchStreamExt as _;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{self, ObjectRef, Store};

use crate::informers::SharedInformers;

/// The service account made in every namespace.
pub const DEFAULT_SERVICE_ACCOUNT: &str = "default";

/// Errors of the service-account controller.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A request to the API server failed.
    #[error("creating the default service account: {0}")]
    Api(#[from] kube::Error),
}

struct Context {
    client: kube::Client,
    accounts: Store<PartialObjectMeta<ServiceAccount>>,
}

/// Runs the controller, on the shared namespace watch of `informers`, until its watches end
/// (they do not on their own).
pub async fn run(client: kube::Client, informers: SharedInformers) -> Result<(), Error> {
    let (namespaces, namespace_events) = informers.typed::<Namespace>();
    let (accounts, writer) = reflector::store();
    // The service accounts' shared metadata watch (the garbage collector's too), narrowed to
    // the `default` ones.
    let account_events = informers
        .metadata(&ApiResource::erase::<ServiceAccount>(&()))
        .filter_objects(|account| account.metadata.name.as_deref() == Some(DEFAULT_SERVICE_ACCOUNT))
        .map_objects(|account| PartialObjectMeta::<ServiceAccount> {
            types: account.types,
            metadata: account.metadata,
            _phantom: std::marker::PhantomData,
        })
        .results()
        .reflect(writer)
        .touched_objects();
    let context = Arc::new(Context {
        client: client.clone(),
        accounts,
    });
    Controller::for_stream(namespace_events.results().applied_objects(), namespaces)
        .watches_stream(account_events, |account| {
            account
                .metadata
                .namespace
                .map(|ns| ObjectRef::<Namespace>::new(&ns))
        })
        .run(reconcile, error_policy, context)
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::debug!(%error, "serviceaccount sync");
            }
        })
        .await;
    Ok(())
}

async fn reconcile(namespace: Arc<Namespace>, context: Arc<Context>) -> Result<Action, Error> {
    let phase = namespace.status.as_ref().and_then(|s| s.phase.as_deref());
    if phase != Some("Active") || namespace.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let Some(name) = namespace.metadata.name.as_deref() else {
        return Ok(Action::await_change());
    };
    let key = ObjectRef::new(DEFAULT_SERVICE_ACCOUNT).within(name);
    if context.accounts.get(&key).is_some() {
        return Ok(Action::await_change());
    }
    let account = ServiceAccount {
        metadata: ObjectMeta {
            name: Some(DEFAULT_SERVICE_ACCOUNT.to_owned()),
            ..ObjectMeta::default()
        },
        ..ServiceAccount::default()
    };
    let api = Api::<ServiceAccount>::namespaced(context.client.clone(), name);
    match api.create(&PostParams::default(), &account).await {
        Ok(_) => {
            tracing::info!(namespace = name, "created the default service account");
            Ok(Action::await_change())
        }
        // Made meanwhile, or the namespace is gone or terminating: nothing to do.
        Err(error) if ignorable_create_error(&error) => Ok(Action::await_change()),
        Err(error) => Err(error.into()),
    }
}

/// Whether a create failed only because the object exists already, or its namespace is gone
/// or terminating.
pub(crate) fn ignorable_create_error(error: &kube::Error) -> bool {
    match error {
        kube::Error::Api(status) => {
            status.code == 409
                || status.code == 404
                || (status.code == 403 && status.message.contains("being terminated"))
        }
        _ => false,
    }
}

fn error_policy(_: Arc<Namespace>, error: &Error, _: Arc<Context>) -> Action {
    tracing::warn!(%error, "serviceaccount sync failed");
    Action::requeue(Duration::from_secs(5))
}
