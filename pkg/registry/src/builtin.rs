//! The built-in resources: one strategy for every entry of `genplane-api`'s catalog, running
//! the entry's pure hooks in the store's fixed order.

use std::collections::BTreeMap;
use std::sync::Arc;

use genplane_api::catalog::{self, Context, FeatureGates, GatesOff, ResourceInfo};
use genplane_api::resource::Requestor;
use genplane_apimachinery::errors::ApiError;
use genplane_apimachinery::schema::{GroupResource, GroupVersionKind};
use genplane_apimachinery::validation::field::ErrorList;
use genplane_authentication::UserInfo;
use serde_json::Value;

use crate::strategy::Strategy;

/// The strategy of a built-in resource.
#[derive(Clone, Debug)]
pub struct CatalogStrategy {
    info: &'static ResourceInfo,
    /// The server's feature gates, which the hooks are told.
    gates: Arc<dyn FeatureGates>,
}

impl CatalogStrategy {
    /// The strategy of `info`, with every gated feature off.
    pub fn new(info: &'static ResourceInfo) -> Self {
        Self::with_gates(info, Arc::new(GatesOff))
    }

    /// The strategy of `info` under the server's feature `gates`.
    pub fn with_gates(info: &'static ResourceInfo, gates: Arc<dyn FeatureGates>) -> Self {
        Self { info, gates }
    }

    fn context(&self) -> Context<'_> {
        self.context_of(None)
    }

    /// The hooks' context for a write by `requestor`, at the current time.
    fn context_of<'a>(&'a self, requestor: Option<&'a UserInfo>) -> Context<'a> {
        Context {
            gates: self.gates.as_ref(),
            requestor: requestor.map(|user| Requestor {
                username: &user.username,
                uid: &user.uid,
                groups: &user.groups,
                extra: &user.extra,
            }),
            now: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX)),
        }
    }

    /// The strategy of the built-in resource `group`/`version`/`resource`, if there is one.
    pub fn find(group: &str, version: &str, resource: &str) -> Option<Self> {
        catalog::find(group, version, resource).map(Self::new)
    }

    /// Strategies for every built-in resource.
    pub fn all() -> Vec<Arc<dyn Strategy>> {
        catalog::all()
            .iter()
            .map(|info| Arc::new(Self::new(info)) as Arc<dyn Strategy>)
            .collect()
    }

    /// The catalog entry.
    pub fn info(&self) -> &'static ResourceInfo {
        self.info
    }

    /// The strategy of the subresource `name` (`status`, `finalize`), when writes through it
    /// have rules of their own.
    pub fn subresource(&self, name: &str) -> Option<SubresourceStrategy> {
        let rules = self
            .info
            .subresources
            .iter()
            .find(|s| s.name == name)?
            .rules?;
        Some(SubresourceStrategy {
            base: self.clone(),
            prepare_for_update: rules.prepare_for_update,
            validate_update: rules.validate_update,
        })
    }
}

/// The strategy of a subresource: the resource's, with the subresource's own update rules
/// (a `status` write keeps the stored `spec`; a `finalize` write changes only the finalizers).
#[derive(Clone, Debug)]
pub struct SubresourceStrategy {
    base: CatalogStrategy,
    prepare_for_update: fn(&mut Value, &Value, &Context<'_>),
    validate_update: fn(&Value, &Value) -> Result<ErrorList, ApiError>,
}

impl SubresourceStrategy {
    /// The strategy of writes with `rules` of their own over the resource `base` describes:
    /// what a program's answered subresource writes with (a `pods/binding` create sets the
    /// pod's `spec.nodeName`, which no other write may change).
    pub fn new(base: CatalogStrategy, rules: catalog::SubresourceRules) -> Self {
        Self {
            base,
            prepare_for_update: rules.prepare_for_update,
            validate_update: rules.validate_update,
        }
    }
}

impl Strategy for SubresourceStrategy {
    fn group_resource(&self) -> GroupResource {
        self.base.group_resource()
    }

    fn kind(&self) -> GroupVersionKind {
        self.base.kind()
    }

    fn namespaced(&self) -> bool {
        self.base.namespaced()
    }

    fn key_prefix(&self) -> String {
        self.base.key_prefix()
    }

    fn decode(&self, object: Value) -> Result<Value, ApiError> {
        self.base.decode(object)
    }

    fn stored_form(&self, object: Value) -> Result<Value, ApiError> {
        self.base.stored_form(object)
    }

    fn served_form(&self, object: Value) -> Result<Value, ApiError> {
        self.base.served_form(object)
    }

    fn conversion(&self) -> Option<&crate::conversion::Conversion> {
        self.base.conversion()
    }

    fn serves_stored_form(&self) -> bool {
        self.base.serves_stored_form()
    }

    fn stores_served_form(&self) -> bool {
        self.base.stores_served_form()
    }

    /// The resource's defaulting runs on every write path, subresources included (a
    /// Namespace keeps its `kubernetes.io/metadata.name` label through `finalize`).
    fn default(&self, object: &mut Value) {
        self.base.default(object);
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        (self.prepare_for_update)(new, old, &self.base.context());
    }

    fn canonicalize(&self, object: &mut Value) {
        self.base.canonicalize(object);
    }

    fn validate(&self, object: &Value) -> Result<ErrorList, ApiError> {
        self.base.validate(object)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Result<ErrorList, ApiError> {
        (self.validate_update)(new, old)
    }

    fn selectable_fields(&self) -> Vec<&str> {
        self.base.selectable_fields()
    }

    fn field_values(&self, object: &Value) -> BTreeMap<String, String> {
        self.base.field_values(object)
    }

    fn pending_finalization(&self, object: &Value) -> bool {
        self.base.pending_finalization(object)
    }

    fn mark_deleting(&self, object: &mut Value) {
        self.base.mark_deleting(object);
    }
}

impl Strategy for CatalogStrategy {
    fn group_resource(&self) -> GroupResource {
        self.info.group_resource()
    }

    fn kind(&self) -> GroupVersionKind {
        self.info.gvk()
    }

    fn namespaced(&self) -> bool {
        self.info.namespaced
    }

    fn key_prefix(&self) -> String {
        format!("/registry/{}", self.info.storage_prefix)
    }

    fn decode(&self, object: Value) -> Result<Value, ApiError> {
        (self.info.hooks.decode)(&object).map(|decoded| decoded.object)
    }

    fn stored_form(&self, object: Value) -> Result<Value, ApiError> {
        Ok(match self.info.hooks.to_storage {
            Some(convert) => convert(object),
            None => object,
        })
    }

    fn stores_served_form(&self) -> bool {
        self.info.hooks.to_storage.is_none()
    }

    fn served_form(&self, object: Value) -> Result<Value, ApiError> {
        Ok(match self.info.hooks.from_storage {
            Some(convert) => convert(object),
            None => object,
        })
    }

    fn serves_stored_form(&self) -> bool {
        self.info.hooks.from_storage.is_none()
    }

    fn default(&self, object: &mut Value) {
        (self.info.hooks.default)(object);
    }

    fn prepare_for_create(&self, object: &mut Value) {
        (self.info.hooks.prepare_for_create)(object, &self.context());
    }

    fn prepare_for_create_by(&self, object: &mut Value, requestor: Option<&UserInfo>) {
        (self.info.hooks.prepare_for_create)(object, &self.context_of(requestor));
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        (self.info.hooks.prepare_for_update)(new, old, &self.context());
    }

    fn validate(&self, object: &Value) -> Result<ErrorList, ApiError> {
        // A kind served under a feature gate that is off is served only while the cluster turns
        // the feature off, so that what is stored can be removed: nothing new is created.
        if let Some(gate) = self.info.feature_gate
            && !self.gates.enabled(gate)
        {
            let name = object
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            return Err(genplane_apimachinery::errors::Status::forbidden(
                &self.info.group_resource(),
                name,
                &format!(
                    "the {gate} feature is off in this server: no {} can be created; those stored can \
                     still be read, changed and deleted while the cluster turns the feature off",
                    self.info.kind
                ),
            )
            .into());
        }
        (self.info.hooks.validate)(object)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Result<ErrorList, ApiError> {
        (self.info.hooks.validate_update)(new, old)
    }

    fn selectable_fields(&self) -> Vec<&str> {
        self.info.hooks.field_selectors.to_vec()
    }

    fn allow_create_on_update(&self) -> bool {
        self.info.create_on_update
    }

    fn field_values(&self, object: &Value) -> BTreeMap<String, String> {
        (self.info.hooks.field_values)(object)
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect()
    }

    fn pending_finalization(&self, object: &Value) -> bool {
        (self.info.hooks.pending_finalization)(object)
    }

    fn mark_deleting(&self, object: &mut Value) {
        (self.info.hooks.mark_deleting)(object);
    }

    fn grace_period(&self, object: &Value, requested: Option<i64>) -> Option<i64> {
        (self.info.hooks.grace_period)(object, requested)
    }
}
