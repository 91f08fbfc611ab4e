//! The control plane: genplane's API server with this cluster's kinds added.
//!
//! Most kinds are served as a program's own kind is, from their catalog entry alone
//! ([`CompletedConfig::add_resource`]). Two need more than an entry, and show the library's
//! hooks for it:
//!
//! - **pods**: `pods/binding` creates are answered by [`Binder`], which writes the pods'
//!   storage (`Resource::with_answer`);
//! - **services**: the store allocates ClusterIPs and node ports with a
//!   [`ServiceAllocator`] (`Store::with_allocations`), seeded from the stored Services before
//!   the server serves;
//! - **deployments** and **replicasets**: `scale` reads and writes an autoscaling/v1 Scale,
//!   which no catalog hook can say: the served resource's `scale` gets a store with a
//!   [`ScaleStrategy`] over the kind's own strategy.

use std::sync::Arc;

use genplane_apiserver::{Backing, Resource};
use genplane_controlplane::server::{CompletedConfig, Error};
use genplane_registry::{CatalogStrategy, ListOptions, Store};

use crate::api::allocator::ServiceAllocator;
use crate::api::binder::Binder;
use crate::api::scale::ScaleStrategy;
use crate::api::{deployment, endpoints, endpointslice, node, pod, replicaset, service};
use crate::net::Plan;

/// Why the cluster's kinds could not be added.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// A kind's storage could not be set up.
    #[error("serving {resource}")]
    Storage {
        /// The resource.
        resource: &'static str,
        /// Why.
        source: Error,
    },
    /// The stored Services could not be read to seed the allocator.
    #[error("reading the stored services: {0}")]
    Services(genplane_apimachinery::errors::ApiError),
}

/// Adds nodes, pods (with `binding`), services (with allocation), endpoints, endpoint
/// slices, deployments and replica sets (with `scale`) to `completed`, ClusterIPs from
/// `plan`; returns the Services' allocator.
pub async fn add_cluster_kinds(
    completed: &mut CompletedConfig,
    plan: Plan,
) -> Result<ServiceAllocator, SetupError> {
    for info in [&node::INFO, &endpoints::INFO, &endpointslice::INFO] {
        completed
            .add_resource(info)
            .map_err(|source| SetupError::Storage {
                resource: info.resource,
                source,
            })?;
    }
    let gates = completed.strategy_gates();
    let storage = |info: &'static genplane_api::catalog::ResourceInfo| {
        completed
            .storage_for(info)
            .map_err(|source| SetupError::Storage {
                resource: info.resource,
                source,
            })
    };

    let pods = storage(&pod::INFO)?;
    let binder = Arc::new(Binder::new(pods.clone(), gates.clone()));
    let pods = Resource::builtin_with_gates(&pod::INFO, pods, gates.clone()).with_answer(
        "binding",
        binder,
        gates.clone(),
    );

    let mut services =
        Resource::builtin_with_gates(&service::INFO, storage(&service::INFO)?, gates.clone());
    let allocator = ServiceAllocator::new(plan);
    if let Some(store) = services.store().cloned() {
        let stored = store
            .list("", &ListOptions::default())
            .await
            .map_err(SetupError::Services)?;
        allocator.seed(&stored.items);
        services.backing = Backing::Stored(store.with_allocations(Arc::new(allocator.clone())));
    }
    let mut workloads = Vec::new();
    for info in [&deployment::INFO, &replicaset::INFO] {
        let storage = storage(info)?;
        let mut resource = Resource::builtin_with_gates(info, storage.clone(), gates.clone());
        let strategy = ScaleStrategy::new(CatalogStrategy::with_gates(info, gates.clone()));
        resource.subresources.retain(|(name, _)| name != "scale");
        resource.subresources.push((
            "scale".to_owned(),
            Backing::Stored(Store::new(storage, Arc::new(strategy))),
        ));
        workloads.push(resource);
    }
    completed.resources.extend(workloads);
    completed.resources.push(pods);
    completed.resources.push(services);
    Ok(allocator)
}
