//! ComponentRestriction: what genplane's components may write of the objects that steer the
//! cluster, as upstream's NodeRestriction limits each kubelet to its own Node, Lease and pods.
//!
//! RBAC decides by verb, resource and name; it cannot say "its own entry of a list", "a Lease
//! it created" or "a name chosen at start". This plugin, which runs after every mutating plugin
//! on the object that would be stored, adds what RBAC cannot:
//!
//! - **Taking part as a component** is a permission: verb `report` on the resource `components`
//!   of `featuregates.genplane.io`, named after the component (`apiserver`,
//!   `controller-manager`, `feature-controller`, or a third party's). The bootstrap policy grants
//!   each role's user its own component; `cluster-admin` holds them all. It is asked for:
//!   - every write of an identity Lease in `kube-system` (labelled
//!     `featuregates.genplane.io/identity=<component>`, or upstream's
//!     `apiserver.kubernetes.io/identity` for the API servers): creating, renewing or
//!     relabelling one needs the component's; deleting one, the component's or the
//!     feature-controller's (it removes expired ones). A feature-controller identity Lease must
//!     also be named `feature-controller-...`, last at most
//!     [`genplane_api::featuregates::MAX_CONTROLLER_LEASE_SECONDS`] and not be renewed in the
//!     future: the acting feature-controller is chosen among these Leases, so a Lease made by
//!     anyone else, or one that never expires, would silence the real one;
//!   - every write of a Feature's status: an entry of `status.uses` (added, changed or removed)
//!     needs its component's, and a new entry's instance must be named `<component>-...` (an
//!     identity Lease's name); anything else in the status (the state, `dynamic`, the tasks,
//!     the conditions, what is announced) and the labels and annotations written through it
//!     need the feature-controller's. So a role writes only its own uses, and only the
//!     feature-controller moves a feature between states.
//! - **The role identities** (`system:genplane:apiserver`, `...:controller-manager`,
//!   `...:feature-controller`) are kept to what their role does, whatever wider rules they
//!   hold (the controller-manager holds the garbage collector's `*`):
//!   - the API server's writes only its identity Leases, creates only its well-known claim
//!     `kube-apiserver`, and writes only that claim's `FromFlags` condition;
//!   - the controller-manager's writes its leader-election Lease and its identity Leases; other
//!     Leases and Features only as the garbage collector and the namespace controller do
//!     (changing owner references and finalizers; deleting what has owners or is in a
//!     terminating namespace);
//!   - the feature-controller's writes its identity Leases, deletes expired identity Leases
//!     and the API servers' (its `DeleteObjects` task), and otherwise only removes fields from
//!     Leases (its `ClearField` task).
//!
//! Refusals are 403 `Forbidden`, saying what the identity may do.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use genplane_api::featuregates::{
    self as features, COMPONENTS, FEATURE_CONTROLLER, IDENTITY_LABEL, MAX_CONTROLLER_LEASE_SECONDS,
    REPORT,
};
use genplane_api::networkregistry::KUBE_APISERVER_CLAIM;
use genplane_apimachinery::errors::{ApiError, Status};
use genplane_apimachinery::schema::GroupResource;
use genplane_authorization::bootstrap::{
    APISERVER_USER, CONTROLLER_MANAGER_LEASE, CONTROLLER_MANAGER_USER, FEATURE_CONTROLLER_USER,
    KUBE_SYSTEM,
};
use serde_json::{Map, Value};

use crate::namespace::{Namespaces, cached_or_stored};
use crate::{Attributes, BoxFuture, Operation, ValidatingPlugin};

/// The plugin's name, as `--enable-admission-plugins` spells it.
pub const NAME: &str = "ComponentRestriction";

/// The label of upstream's API server identity Leases (KEP-1965); the API servers keep them.
pub const APISERVER_IDENTITY_LABEL: &str = "apiserver.kubernetes.io/identity";
/// How far in the future a feature-controller identity Lease's `renewTime` may be (clock skew).
pub const MAX_RENEW_AHEAD: Duration = Duration::from_secs(60);

const COORDINATION: &str = "coordination.k8s.io";
const NETWORK_REGISTRY: &str = genplane_api::networkregistry::GROUP;

/// A role identity of genplane's own components.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    ApiServer,
    ControllerManager,
    FeatureController,
}

fn role_of(user: &str) -> Option<Role> {
    match user {
        APISERVER_USER => Some(Role::ApiServer),
        CONTROLLER_MANAGER_USER => Some(Role::ControllerManager),
        FEATURE_CONTROLLER_USER => Some(Role::FeatureController),
        _ => None,
    }
}

/// See the module documentation.
#[derive(Debug)]
pub struct ComponentRestriction {
    namespaces: Arc<dyn Namespaces>,
}

impl ComponentRestriction {
    /// The plugin, reading namespaces (is one terminating?) from `namespaces`.
    pub fn new(namespaces: Arc<dyn Namespaces>) -> Self {
        Self { namespaces }
    }
}

/// One write as the plugin judges it.
struct Write<'a> {
    attributes: Attributes<'a>,
    old: Option<&'a Value>,
    new: Option<&'a Value>,
}

fn label<'a>(object: Option<&'a Value>, key: &str) -> Option<&'a str> {
    object?.pointer("/metadata/labels")?.get(key)?.as_str()
}

/// The identity labels of a Lease: (label, component).
fn identities(object: Option<&Value>) -> impl Iterator<Item = (&'static str, &str)> {
    [IDENTITY_LABEL, APISERVER_IDENTITY_LABEL]
        .into_iter()
        .filter_map(move |key| {
            let value = label(object, key)?;
            // Upstream's API server identity Leases name the component `kube-apiserver`:
            // genplane's API servers report as `apiserver`.
            let component = if key == APISERVER_IDENTITY_LABEL {
                features::API_SERVER
            } else {
                value
            };
            Some((key, component))
        })
}

/// `object` without what the server changes on every write, to compare what a client changed.
fn written(object: &Value, also: &[&str]) -> Value {
    let mut object = object.clone();
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        for key in [
            "resourceVersion",
            "managedFields",
            "generation",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
        ]
        .iter()
        .chain(also)
        {
            meta.remove(*key);
        }
    }
    object
}

/// Whether `new` is `old` with some fields removed (nothing added or changed).
fn subset(new: &Value, old: &Value) -> bool {
    match (new, old) {
        (Value::Object(new), Value::Object(old)) => new
            .iter()
            .all(|(key, value)| old.get(key).is_some_and(|was| subset(value, was))),
        _ => new == old,
    }
}

fn status_of(object: Option<&Value>) -> Map<String, Value> {
    object
        .and_then(|o| o.get("status"))
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default()
}

fn meta_of<'a>(object: Option<&'a Value>, key: &str) -> Option<&'a Value> {
    object?.get("metadata")?.get(key)
}

impl Write<'_> {
    fn user(&self) -> &str {
        &self.attributes.request.user.username
    }

    fn name(&self) -> &str {
        if !self.attributes.name.is_empty() {
            return self.attributes.name;
        }
        meta_of(self.new, "name")
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    fn refuse(&self, why: &str) -> ApiError {
        let resource = &self.attributes.request.resource;
        Status::forbidden(
            &GroupResource::new(&resource.group, &resource.resource),
            self.name(),
            why,
        )
        .into()
    }

    /// Whether the caller may take part as `component` (verb `report` on `components/<it>`).
    fn may_report(&self, component: &str) -> bool {
        let Some(authorizer) = &self.attributes.request.authorizer else {
            // No authorization configured: every request is allowed.
            return true;
        };
        let attributes = genplane_authorization::Attributes::resource(
            self.attributes.request.user.clone(),
            REPORT,
            features::GROUP,
            COMPONENTS,
            "",
            component,
        );
        authorizer.authorize(&attributes).0 == genplane_authorization::Decision::Allow
    }

    fn cannot_report(&self, component: &str, what: &str) -> ApiError {
        self.refuse(&format!(
            "User {:?} cannot report as component {component:?} (verb {REPORT:?} on resource \
             {COMPONENTS:?} in API group {:?}): {what}",
            self.user(),
            features::GROUP
        ))
    }

    /// Whether the write is what the garbage collector and the namespace controller do:
    /// changing only owner references and finalizers, deleting what has owners or is in a
    /// terminating namespace.
    async fn cleanup(&self, namespaces: &dyn Namespaces) -> Result<bool, ApiError> {
        match (self.attributes.operation, self.old, self.new) {
            (Operation::Update, Some(old), Some(new)) => {
                let also = ["ownerReferences", "finalizers"];
                Ok(written(old, &also) == written(new, &also))
            }
            (Operation::Delete, Some(old), _) => {
                if meta_of(Some(old), "ownerReferences")
                    .and_then(Value::as_array)
                    .is_some_and(|owners| !owners.is_empty())
                {
                    return Ok(true);
                }
                let namespace = self.attributes.namespace;
                if namespace.is_empty() {
                    return Ok(false);
                }
                Ok(cached_or_stored(namespaces, namespace)
                    .await?
                    .is_some_and(|ns| {
                        ns.pointer("/metadata/deletionTimestamp").is_some()
                            || ns.pointer("/status/phase").and_then(Value::as_str)
                                == Some("Terminating")
                    }))
            }
            _ => Ok(false),
        }
    }

    /// Whether the write is of an identity Lease of genplane's feature gates (in
    /// `kube-system`) before and after: created as one, renewed as one, deleted as one.
    fn own_identity(&self) -> bool {
        if self.attributes.namespace != KUBE_SYSTEM {
            return false;
        }
        let is = |object: Option<&Value>| label(object, IDENTITY_LABEL).is_some();
        match self.attributes.operation {
            Operation::Create => is(self.new),
            Operation::Update => is(self.old) && is(self.new),
            Operation::Delete => is(self.old),
        }
    }
}

impl ComponentRestriction {
    async fn leases(&self, write: &Write<'_>) -> Result<(), ApiError> {
        let operation = write.attributes.operation;
        if write.attributes.namespace == KUBE_SYSTEM {
            let mut seen: Vec<(&str, &str)> = identities(write.old).collect();
            seen.extend(identities(write.new));
            seen.sort_unstable();
            seen.dedup();
            for (key, component) in seen {
                let allowed = write.may_report(component)
                    || (operation == Operation::Delete && write.may_report(FEATURE_CONTROLLER));
                if !allowed {
                    return Err(write.cannot_report(
                        component,
                        &format!(
                            "the identity Leases of a component ({key}) are written only by \
                             identities that may report as it"
                        ),
                    ));
                }
            }
            if let Some(component) = label(write.new, IDENTITY_LABEL) {
                check_identity_lease(write, component)?;
            }
        }
        let Some(role) = role_of(write.user()) else {
            return Ok(());
        };
        let allowed = match role {
            Role::ApiServer => write.own_identity(),
            Role::ControllerManager => {
                (write.attributes.namespace == KUBE_SYSTEM
                    && write.name() == CONTROLLER_MANAGER_LEASE
                    && label(write.old, IDENTITY_LABEL).is_none()
                    && label(write.new, IDENTITY_LABEL).is_none())
                    || write.own_identity()
                    || write.cleanup(self.namespaces.as_ref()).await?
            }
            Role::FeatureController => {
                write.own_identity()
                    || (operation == Operation::Delete
                        && label(write.old, APISERVER_IDENTITY_LABEL).is_some())
                    || match (operation, write.old, write.new) {
                        (Operation::Update, Some(old), Some(new)) => {
                            subset(&written(new, &[]), &written(old, &[]))
                        }
                        _ => false,
                    }
            }
        };
        if allowed {
            return Ok(());
        }
        Err(write.refuse(match role {
            Role::ApiServer => "the API server's identity writes only its identity Leases",
            Role::ControllerManager => {
                "the controller-manager's identity writes its leader-election Lease and its \
                 identity Leases; other Leases only as the garbage collector and the namespace \
                 controller do (owner references and finalizers; deleting what has owners or is \
                 in a terminating namespace)"
            }
            Role::FeatureController => {
                "the feature-controller's identity writes its identity Leases, deletes expired \
                 identity Leases and the API servers', and otherwise only removes fields from \
                 Leases"
            }
        }))
    }

    async fn features(&self, write: &Write<'_>) -> Result<(), ApiError> {
        if write.attributes.request.subresource == "status" {
            return feature_status(write);
        }
        if role_of(write.user()) == Some(Role::ControllerManager)
            && !write.cleanup(self.namespaces.as_ref()).await?
        {
            return Err(write.refuse(
                "the controller-manager's identity changes Features only as the garbage \
                 collector and the namespace controller do (owner references and finalizers; \
                 deleting what has owners or is in a terminating namespace)",
            ));
        }
        Ok(())
    }
}

/// The checks of a feature-controller identity Lease (see the module documentation).
fn check_identity_lease(write: &Write<'_>, component: &str) -> Result<(), ApiError> {
    let name = write.name();
    if !name.starts_with(&format!("{component}-")) {
        return Err(write.refuse(&format!(
            "an identity Lease of component {component:?} is named {component}-<instance>"
        )));
    }
    if component != FEATURE_CONTROLLER {
        return Ok(());
    }
    let spec = write.new.and_then(|n| n.get("spec"));
    let seconds = spec
        .and_then(|s| s.get("leaseDurationSeconds"))
        .and_then(Value::as_i64)
        .unwrap_or(0);
    if seconds > i64::from(MAX_CONTROLLER_LEASE_SECONDS) {
        return Err(write.refuse(&format!(
            "spec.leaseDurationSeconds: a feature-controller identity Lease lasts at most \
             {MAX_CONTROLLER_LEASE_SECONDS} seconds, not {seconds}"
        )));
    }
    let renewed = spec
        .and_then(|s| s.get("renewTime"))
        .and_then(Value::as_str)
        .and_then(genplane_apimachinery::time::parse_micro_time);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
    let ahead = i64::try_from(MAX_RENEW_AHEAD.as_secs()).unwrap_or(i64::MAX);
    if renewed.is_some_and(|t| t.seconds > now.saturating_add(ahead)) {
        return Err(write.refuse(
            "spec.renewTime: a feature-controller identity Lease cannot be renewed in the future",
        ));
    }
    Ok(())
}

/// The uses of a status, by (component, instance).
fn uses_of(status: &Map<String, Value>) -> Vec<((String, String), &Value)> {
    status
        .get("uses")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|entry| {
            let key = |k: &str| {
                entry
                    .get(k)
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned()
            };
            ((key("component"), key("instance")), entry)
        })
        .collect()
}

/// A write of a Feature's status (see the module documentation).
fn feature_status(write: &Write<'_>) -> Result<(), ApiError> {
    let (old, new) = (status_of(write.old), status_of(write.new));
    let rest = |status: &Map<String, Value>| {
        let mut status = status.clone();
        status.remove("uses");
        status
    };
    let meta_changed = ["labels", "annotations"]
        .iter()
        .any(|key| meta_of(write.old, key) != meta_of(write.new, key));
    if meta_changed || rest(&old) != rest(&new) {
        if write.may_report(FEATURE_CONTROLLER) {
            return Ok(());
        }
        return Err(write.cannot_report(
            FEATURE_CONTROLLER,
            "only the feature-controller writes a Feature's status besides the uses (the \
             state, dynamic, the tasks, the conditions, what it announces) and the labels and \
             annotations through it; a component writes only its own entries of status.uses",
        ));
    }
    let (old_uses, new_uses) = (uses_of(&old), uses_of(&new));
    let mut changed: Vec<(&str, &str, bool)> = Vec::new();
    for (key, entry) in &new_uses {
        if old_uses.iter().find(|(k, _)| k == key).map(|(_, e)| *e) != Some(*entry) {
            changed.push((key.0.as_str(), key.1.as_str(), true));
        }
    }
    for (key, _) in &old_uses {
        if !new_uses.iter().any(|(k, _)| k == key) {
            changed.push((key.0.as_str(), key.1.as_str(), false));
        }
    }
    let mut controller: Option<bool> = None;
    for (component, instance, written) in changed {
        let own = write.may_report(component)
            && (!written || instance.starts_with(&format!("{component}-")));
        if own || *controller.get_or_insert_with(|| write.may_report(FEATURE_CONTROLLER)) {
            continue;
        }
        return Err(write.cannot_report(
            component,
            &format!(
                "a component writes only its own entries of status.uses, each named after its \
                 identity Lease ({component}-<instance>); this write changes \
                 {component}/{instance}"
            ),
        ));
    }
    Ok(())
}

/// The API server's identity and NetworkClaims: its well-known claim and that claim's
/// `FromFlags` condition only.
fn claims(write: &Write<'_>) -> Result<(), ApiError> {
    if role_of(write.user()) != Some(Role::ApiServer) {
        return Ok(());
    }
    let status = write.attributes.request.subresource == "status";
    let allowed = match write.attributes.operation {
        Operation::Create => !status && write.name() == KUBE_APISERVER_CLAIM,
        Operation::Update if status && write.name() == KUBE_APISERVER_CLAIM => {
            let without_from_flags = |object: Option<&Value>| {
                let mut status = status_of(object);
                if let Some(conditions) = status.get_mut("conditions").and_then(Value::as_array_mut)
                {
                    conditions
                        .retain(|c| c.get("type").and_then(Value::as_str) != Some("FromFlags"));
                    if conditions.is_empty() {
                        status.remove("conditions");
                    }
                }
                status
            };
            without_from_flags(write.old) == without_from_flags(write.new)
                && ["labels", "annotations"]
                    .iter()
                    .all(|key| meta_of(write.old, key) == meta_of(write.new, key))
        }
        _ => false,
    };
    if allowed {
        return Ok(());
    }
    Err(write.refuse(&format!(
        "the API server's identity creates only its well-known claim {KUBE_APISERVER_CLAIM} \
         and writes only that claim's FromFlags condition"
    )))
}

impl ValidatingPlugin for ComponentRestriction {
    fn name(&self) -> &'static str {
        NAME
    }

    fn validate<'a>(
        &'a self,
        attributes: Attributes<'a>,
        object: Option<&'a Value>,
    ) -> BoxFuture<'a, Result<(), ApiError>> {
        Box::pin(async move {
            let write = Write {
                attributes,
                old: attributes.old_object,
                new: object,
            };
            let resource = &attributes.request.resource;
            match (resource.group.as_str(), resource.resource.as_str()) {
                (COORDINATION, "leases") => self.leases(&write).await,
                (features::GROUP, "features") => self.features(&write).await,
                (NETWORK_REGISTRY, "networkclaims") => claims(&write),
                _ => Ok(()),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn only_removing_fields_is_a_subset() {
        let old = json!({"metadata": {"name": "a", "labels": {"x": "1"}},
                         "spec": {"holderIdentity": "h", "strategy": "S", "preferredHolder": "p"}});
        let cleared = json!({"metadata": {"name": "a", "labels": {"x": "1"}},
                             "spec": {"holderIdentity": "h"}});
        assert!(subset(&cleared, &old));
        let taken = json!({"metadata": {"name": "a", "labels": {"x": "1"}},
                           "spec": {"holderIdentity": "me"}});
        assert!(!subset(&taken, &old));
        let labelled = json!({"metadata": {"name": "a", "labels": {"x": "1", "y": "2"}},
                              "spec": {"holderIdentity": "h"}});
        assert!(!subset(&labelled, &old));
    }

    #[test]
    fn identity_labels_name_their_component() {
        let lease = json!({"metadata": {"labels": {
            IDENTITY_LABEL: "controller-manager",
            APISERVER_IDENTITY_LABEL: "kube-apiserver",
        }}});
        assert_eq!(
            identities(Some(&lease)).collect::<Vec<_>>(),
            [
                (IDENTITY_LABEL, "controller-manager"),
                (APISERVER_IDENTITY_LABEL, "apiserver")
            ]
        );
        assert_eq!(identities(None).count(), 0);
    }
}
