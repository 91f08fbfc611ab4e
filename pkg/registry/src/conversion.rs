//! Conversion between the versions of a resource that calls out (a CustomResourceDefinition's
//! conversion webhook): the [`Converter`] a strategy hands the store ([`Conversion`],
//! [`crate::Strategy::conversion`]), which the store awaits before it asks the strategy for an
//! object's served or stored form, so that a call on its way holds no thread and no lock.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use genplane_apimachinery::errors::{ApiError, Status};
use serde_json::Value;

/// What a [`Converter`] answers: the objects converted, in order, or the request's error.
pub type ConvertFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Vec<Value>, ApiError>> + Send + 'a>>;

/// Converts custom resources between versions by calling out (a CRD's conversion webhook).
/// The store awaits it, so a call on its way holds no thread and no lock.
pub trait Converter: Send + Sync + std::fmt::Debug {
    /// `objects` converted to `api_version` (`group/version`), in the same order; errors are
    /// the answer's.
    fn convert<'a>(&'a self, objects: Vec<Value>, api_version: &'a str) -> ConvertFuture<'a>;
}

/// A conversion that calls out ([`Converter`]), with the versions it converts between: the
/// store converts what it reads to the served version before [`crate::Strategy::served_form`] and
/// what it writes to the storage version before [`crate::Strategy::stored_form`]
/// ([`crate::Strategy::conversion`]).
#[derive(Clone, Debug)]
pub struct Conversion {
    converter: Arc<dyn Converter>,
    /// The served `apiVersion` (`group/version`).
    served: String,
    /// The stored `apiVersion`.
    stored: String,
}

impl Conversion {
    /// A conversion by `converter` between the served `apiVersion` `served` and the stored
    /// one `stored` (`group/version` each).
    pub fn new(converter: Arc<dyn Converter>, served: String, stored: String) -> Self {
        Self {
            converter,
            served,
            stored,
        }
    }

    /// `objects` (as stored) in the served version, in the same order.
    pub async fn to_served(&self, objects: Vec<Value>) -> Result<Vec<Value>, ApiError> {
        self.to(objects, &self.served).await
    }

    /// One object (as stored) in the served version.
    pub async fn one_to_served(&self, object: Value) -> Result<Value, ApiError> {
        self.one(object, &self.served).await
    }

    /// One object (as served) in the storage version.
    pub async fn one_to_stored(&self, object: Value) -> Result<Value, ApiError> {
        self.one(object, &self.stored).await
    }

    async fn one(&self, object: Value, api_version: &str) -> Result<Value, ApiError> {
        let mut converted = self.to(vec![object], api_version).await?;
        Ok(converted
            .pop()
            .expect("invariant: a conversion answers as many objects as it was given"))
    }

    /// `objects` in `api_version`: the converter is called once for them all, and not at all
    /// when every object is in that version already.
    async fn to(&self, objects: Vec<Value>, api_version: &str) -> Result<Vec<Value>, ApiError> {
        if objects
            .iter()
            .all(|o| o.get("apiVersion").and_then(Value::as_str) == Some(api_version))
        {
            return Ok(objects);
        }
        let count = objects.len();
        let converted = self.converter.convert(objects, api_version).await?;
        if converted.len() != count {
            return Err(Status::internal_error(format!(
                "conversion to {api_version} returned {} objects for {count}",
                converted.len()
            ))
            .into());
        }
        Ok(converted)
    }
}
