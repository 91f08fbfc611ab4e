//! Kinds that are created but never stored: a create is answered, not kept (the review APIs
//! and TokenRequest; upstream's storages that are only a `rest.Creater`).
//!
//! [`Computed::admit`] runs what a create through the generic [`crate::Store`] runs before
//! storage, in the same order: decode → the request's namespace → default → mutating admission
//! → prepare → `apiVersion`/`kind` → validate → validating admission. The object it returns is
//! then answered by the server (genplane-apiserver's `Answer`): such a kind is decoded,
//! admitted and validated as every other one, and only its answer is its own. Nothing of the
//! stored objects' lifecycle applies (no name, uid, timestamps, resourceVersion or field
//! ownership).

use std::sync::Arc;

use genplane_apimachinery::errors::ApiError;
use serde_json::Value;

use crate::object::meta_str;
use crate::store::{WriteOptions, check_type_meta, invalid, settle_namespace};
use crate::strategy::Strategy;

/// The create path of a kind that is never stored: its strategy's hooks and the request's
/// admission, without storage.
#[derive(Clone)]
pub struct Computed {
    strategy: Arc<dyn Strategy>,
}

impl std::fmt::Debug for Computed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Computed")
            .field("resource", &self.strategy.group_resource())
            .finish_non_exhaustive()
    }
}

impl Computed {
    /// The create path of the kind `strategy` describes.
    pub fn new(strategy: Arc<dyn Strategy>) -> Self {
        Self { strategy }
    }

    /// The kind's strategy.
    pub fn strategy(&self) -> &dyn Strategy {
        &*self.strategy
    }

    /// The object of a create of `object` in `namespace` (the request's), decoded, defaulted,
    /// admitted and validated as the generic store does it before storage: a 400 for a body
    /// that does not decode or names another namespace, a 422 listing every field problem,
    /// the admission plugins' refusals as they give them.
    pub async fn admit(
        &self,
        namespace: &str,
        object: Value,
        options: &WriteOptions,
    ) -> Result<Value, ApiError> {
        let strategy = &*self.strategy;
        let mut object = strategy.decode(object)?;
        settle_namespace(strategy, &mut object, namespace)?;
        strategy.default(&mut object);
        let namespace = meta_str(&object, "namespace").to_owned();
        let name = meta_str(&object, "name").to_owned();
        if let Some(admission) = &options.admission {
            let attributes = admission.attributes(
                genplane_admission::Operation::Create,
                &namespace,
                &name,
                None,
            );
            if admission.chain.mutate(attributes, &mut object).await?
                == genplane_admission::Mutated::Changed
            {
                object = strategy.decode(object)?;
            }
            // The request's namespace is what was authorized: admission moves nothing.
            settle_namespace(strategy, &mut object, &namespace)?;
        }
        strategy.prepare_for_create(&mut object);
        check_type_meta(strategy, &mut object, &name)?;
        let errors = strategy.validate(&object)?;
        if !errors.is_empty() {
            return Err(invalid(strategy, &name, &errors));
        }
        if let Some(admission) = &options.admission {
            let attributes = admission.attributes(
                genplane_admission::Operation::Create,
                &namespace,
                &name,
                None,
            );
            admission.chain.validate(attributes, Some(&object)).await?;
        }
        Ok(object)
    }
}
