//! Where the requests of a served resource (or subresource) go: the generic store, or, for a
//! kind that is never stored, its create path and answer ([`crate::answer`]).

use std::sync::Arc;

use genplane_api::catalog::{FeatureGates, ResourceInfo};
use genplane_registry::{CatalogStrategy, Computed, Store};
use genplane_storage::Storage;

use crate::answer::Answer;

/// Where the requests of a served resource or subresource go.
pub enum Backing<S: Storage> {
    /// The generic store: objects kept in storage.
    Stored(Store<S>),
    /// Nothing kept: a create is defaulted, admitted and validated as the store would
    /// (`create`), then answered (`answer`): the review APIs, TokenRequest.
    Computed {
        /// The create path up to storage.
        create: Computed,
        /// What computes the answer.
        answer: Arc<dyn Answer>,
    },
}

impl<S: Storage> Backing<S> {
    /// The store, when objects are stored.
    pub fn store(&self) -> Option<&Store<S>> {
        match self {
            Backing::Stored(store) => Some(store),
            Backing::Computed { .. } => None,
        }
    }

    /// The creates of the kind `info`, answered by `answer`, its hooks told `gates`.
    pub(crate) fn computed(
        info: &'static ResourceInfo,
        answer: Arc<dyn Answer>,
        gates: Arc<dyn FeatureGates>,
    ) -> Self {
        Backing::Computed {
            create: Computed::new(Arc::new(CatalogStrategy::with_gates(info, gates))),
            answer,
        }
    }
}

impl<S: Storage> Clone for Backing<S> {
    fn clone(&self) -> Self {
        match self {
            Backing::Stored(store) => Backing::Stored(store.clone()),
            Backing::Computed { create, answer } => Backing::Computed {
                create: create.clone(),
                answer: answer.clone(),
            },
        }
    }
}

impl<S: Storage> std::fmt::Debug for Backing<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Backing::Stored(store) => store.fmt(f),
            Backing::Computed { create, .. } => create.fmt(f),
        }
    }
}
