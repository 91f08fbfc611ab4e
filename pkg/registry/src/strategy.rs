//! How one resource behaves: the hooks the generic store calls, in a fixed order.
//!
//! Create: decode → default → prepare_for_create → validate → canonicalize → stored_form → store.
//! Update: decode → default → prepare_for_update → validate_update → canonicalize → stored_form
//! → store (compare-and-swap). Reads: served_form, then view (the form clients read, the
//! object itself but for a custom resource's `scale`); updates answer with the view too.
//! Delete: finalizers and `pending_finalization` decide whether the object goes at once or is
//! marked for deletion (`mark_deleting`) and kept until they are done.

use std::collections::BTreeMap;

use genplane_apimachinery::errors::ApiError;
use genplane_apimachinery::schema::{GroupResource, GroupVersionKind};
use genplane_apimachinery::validation::field::ErrorList;
use genplane_authentication::UserInfo;
use serde_json::Value;

use crate::conversion::Conversion;

/// The behaviour of one resource. Objects are raw JSON; see [`crate::object`] for helpers.
pub trait Strategy: Send + Sync + 'static {
    /// The resource, as errors name it (`configmaps`, `leases.coordination.k8s.io`).
    fn group_resource(&self) -> GroupResource;

    /// The kind objects are stored and served as.
    fn kind(&self) -> GroupVersionKind;

    /// Whether objects live in namespaces.
    fn namespaced(&self) -> bool;

    /// The storage key prefix, e.g. `/registry/configmaps`; keys are
    /// `<prefix>/<namespace>/<name>` or `<prefix>/<name>`.
    fn key_prefix(&self) -> String;

    /// Type-checks a written object and returns it normalized (400 BadRequest on a field of the
    /// wrong type).
    fn decode(&self, object: Value) -> Result<Value, ApiError> {
        Ok(object)
    }

    /// The stored form of a served object (e.g. events.k8s.io Events are stored as core Events,
    /// custom resources in their storage version); fails when a conversion does.
    fn stored_form(&self, object: Value) -> Result<Value, ApiError> {
        Ok(object)
    }

    /// The served form of a stored object; fails when a conversion does.
    fn served_form(&self, object: Value) -> Result<Value, ApiError> {
        Ok(object)
    }

    /// The conversion that calls out (a CRD's conversion webhook), if the resource has one:
    /// the store awaits it to bring what it reads into the served version before
    /// [`Strategy::served_form`], and what it writes into the storage version before
    /// [`Strategy::stored_form`], so that those two never call out themselves. A strategy
    /// that wraps another hands out the other's. Default: none.
    fn conversion(&self) -> Option<&Conversion> {
        None
    }

    /// Whether objects are served exactly as they are stored, with their resourceVersion put
    /// in: [`Strategy::served_form`] and [`Strategy::view`] change nothing. Reads then answer
    /// JSON with the stored bytes instead of decoding and serializing each object. Default:
    /// false (a strategy that overrides nothing may say true).
    fn serves_stored_form(&self) -> bool {
        false
    }

    /// Whether objects are stored exactly as they are served: [`Strategy::stored_form`]
    /// changes nothing, so writes encode the object without copying it first. Default: false.
    fn stores_served_form(&self) -> bool {
        false
    }

    /// The form clients read and write of a served object, when it is another kind (a custom
    /// resource's `scale` subresource reads and writes an `autoscaling/v1` Scale): gets answer
    /// with it, and so do updates. An update's body is then in this form: `decode` reads it,
    /// and `prepare_for_update` turns it into the object to store, given the served object as
    /// `old`. Default: the object itself.
    fn view(&self, object: Value) -> Result<Value, ApiError> {
        Ok(object)
    }

    /// The form a patch is applied to: the view, except where a read refuses to answer but a
    /// patch may still proceed (a Scale whose object has no replicas yet). Default:
    /// [`Strategy::view`].
    fn patch_view(&self, object: Value) -> Result<Value, ApiError> {
        self.view(object)
    }

    /// Fills in defaults of a new or replaced object (e.g. a Secret's `type`).
    fn default(&self, _object: &mut Value) {}

    /// Adjusts a new object before validation (e.g. clears a status set on create, sets the
    /// first generation).
    fn prepare_for_create(&self, _object: &mut Value) {}

    /// [`Strategy::prepare_for_create`] for a write by `requestor` (the authenticated user of
    /// an API request; `None` for a write on no one's behalf): what the store calls. A kind
    /// that records who asked (a CertificateSigningRequest's `spec.username`) overrides it;
    /// the default ignores the requestor.
    fn prepare_for_create_by(&self, object: &mut Value, _requestor: Option<&UserInfo>) {
        self.prepare_for_create(object);
    }

    /// Adjusts an updated object before validation, given the stored one (e.g. keeps the status
    /// on a spec update, bumps the generation when the spec changed).
    fn prepare_for_update(&self, _new: &mut Value, _old: &Value) {}

    /// Every problem of a new object, metadata included (or a 400 for a malformed one).
    fn validate(&self, object: &Value) -> Result<ErrorList, ApiError>;

    /// Every problem of an update, metadata included (or a 400 for a malformed one).
    fn validate_update(&self, new: &Value, old: &Value) -> Result<ErrorList, ApiError>;

    /// Warnings to return with a successful create or update (the `Warning` header).
    fn warnings(&self, _object: &Value, _old: Option<&Value>) -> Vec<String> {
        Vec::new()
    }

    /// Normalizes an object just before it is stored.
    fn canonicalize(&self, _object: &mut Value) {}

    /// Whether an update of a missing object creates it.
    fn allow_create_on_update(&self) -> bool {
        false
    }

    /// The field names field selectors may use, besides `metadata.name` and
    /// `metadata.namespace`.
    fn selectable_fields(&self) -> Vec<&str> {
        Vec::new()
    }

    /// The values of the selectable fields of `object`, besides `metadata.name` and
    /// `metadata.namespace`.
    fn field_values(&self, _object: &Value) -> BTreeMap<String, String> {
        BTreeMap::new()
    }

    /// Whether something other than `metadata.finalizers` still holds back the deletion of a
    /// deleting object (a Namespace's `spec.finalizers`).
    fn pending_finalization(&self, _object: &Value) -> bool {
        false
    }

    /// Marks an object whose deletion must wait (a Namespace becomes `Terminating`).
    fn mark_deleting(&self, _object: &mut Value) {}

    /// The grace period of a delete of `object` that asked for `requested` seconds: `Some`
    /// for a kind whose objects terminate gracefully (a Pod), which a delete then marks rather
    /// than removes while the period is above 0 (upstream's `CheckGracefulDelete`); `None`
    /// (the default): removed at once.
    fn grace_period(&self, _object: &Value, _requested: Option<i64>) -> Option<i64> {
        None
    }
}
