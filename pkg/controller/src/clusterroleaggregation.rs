//! The `clusterrole-aggregation` controller: every ClusterRole with an `aggregationRule` holds
//! the union of the rules of the ClusterRoles its selectors match, kept up to date as those
//! come, change and go.
//!
//! The rules are computed by [`genplane_authorization::aggregation::aggregated_rules`], the
//! same function the API server uses when it aggregates the bootstrap roles at start-up. One
//! watch of ClusterRoles feeds both the store and the queue: any change enqueues every
//! aggregated ClusterRole.

use std::sync::Arc;
use std::time::Duration;

use futures::{StreamExt as _, TryStreamExt as _};
use genplane_authorization::aggregation::aggregated_rules;
use genplane_authorization::policy::PolicyRule;
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::ResourceExt as _;
use kube::api::{Api, PostParams};
use kube::runtime::WatchStreamExt as _;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::Store;
use serde_json::Value;

use crate::informers::SharedInformers;

/// Errors of the aggregation controller.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A request to the API server failed.
    #[error("updating an aggregated ClusterRole: {0}")]
    Api(#[from] kube::Error),
    /// A ClusterRole could not be converted (never for objects the API server sent).
    #[error("converting a ClusterRole: {0}")]
    Convert(#[from] serde_json::Error),
}

struct Context {
    client: kube::Client,
    roles: Store<ClusterRole>,
}

/// Runs the controller, on the shared ClusterRole watch of `informers`, until that watch
/// ends (it does not on its own).
pub async fn run(client: kube::Client, informers: SharedInformers) -> Result<(), Error> {
    let (roles, events) = informers.typed::<ClusterRole>();
    let reader = roles.clone();
    let triggers = events
        .results()
        .touched_objects()
        .map_ok(move |changed: ClusterRole| {
            let mut enqueue = Vec::new();
            if changed.aggregation_rule.is_some() {
                enqueue.push(Ok(changed.clone()));
            }
            for role in reader.state() {
                if role.aggregation_rule.is_some() && role.name_any() != changed.name_any() {
                    enqueue.push(Ok((*role).clone()));
                }
            }
            futures::stream::iter(enqueue)
        })
        .try_flatten();
    let context = Arc::new(Context {
        client,
        roles: roles.clone(),
    });
    Controller::for_stream(triggers, roles)
        .run(reconcile, error_policy, context)
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::debug!(%error, "clusterrole-aggregation sync");
            }
        })
        .await;
    Ok(())
}

async fn reconcile(role: Arc<ClusterRole>, context: Arc<Context>) -> Result<Action, Error> {
    if role.aggregation_rule.is_none() {
        return Ok(Action::await_change());
    }
    let all = context
        .roles
        .state()
        .iter()
        .map(|r| serde_json::to_value(&**r))
        .collect::<Result<Vec<Value>, _>>()?;
    let this = serde_json::to_value(&*role)?;
    let Some(want) = aggregated_rules(&this, &all) else {
        return Ok(Action::await_change());
    };
    let have: Vec<PolicyRule> = match this.get("rules") {
        Some(rules) if !rules.is_null() => serde_json::from_value(rules.clone())?,
        _ => Vec::new(),
    };
    if have == want {
        return Ok(Action::await_change());
    }
    let mut updated = (*role).clone();
    updated.rules = Some(serde_json::from_value(serde_json::to_value(&want)?)?);
    let name = role.name_any();
    match Api::<ClusterRole>::all(context.client.clone())
        .replace(&name, &PostParams::default(), &updated)
        .await
    {
        Ok(_) => {
            tracing::info!(clusterrole = %name, rules = want.len(), "updated aggregated ClusterRole");
            Ok(Action::await_change())
        }
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(Action::await_change()),
        Err(error) => Err(error.into()),
    }
}

fn error_policy(_: Arc<ClusterRole>, error: &Error, _: Arc<Context>) -> Action {
    tracing::warn!(%error, "clusterrole-aggregation sync failed");
    Action::requeue(Duration::from_secs(1))
}
