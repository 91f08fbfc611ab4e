//! The resource catalog: every built-in resource with what discovery, routing and storage need
//! to know about it, and the pure hooks the generic registry runs for it.

use std::collections::BTreeMap;

use genplane_apimachinery::errors::ApiError;
use genplane_apimachinery::schema::{GroupResource, GroupVersionKind, GroupVersionResource};
use genplane_apimachinery::validation::field::ErrorList;
use serde_json::Value;

use crate::decode::{Decoded, Struct};
use crate::table::ColumnDefinition;
use crate::{apiextensions, authentication, authorization, coordination, core, events, rbac};

/// The verbs of a resource that can be listed, watched and deleted in bulk.
pub const ALL_VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// A subresource, as discovery lists it (`namespaces/status`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Subresource {
    /// The name after the slash: `status`, `finalize`, `token`.
    pub name: &'static str,
    /// The kind the subresource reads and writes.
    pub kind: &'static str,
    /// Its verbs.
    pub verbs: &'static [&'static str],
}

/// The pure per-resource behaviour the generic registry runs, in this order on a write:
/// `decode` -> `default` -> `prepare_for_create`/`prepare_for_update` -> `validate`/
/// `validate_update` -> `to_storage`; on a read `from_storage`.
#[derive(Clone, Copy, Debug)]
pub struct Hooks {
    /// Type-checks and normalizes a request body (400 BadRequest on a wrong type).
    pub decode: fn(&Value) -> Result<Decoded, ApiError>,
    /// Upstream's defaulting (`SetDefaults_*` and conversion-time normalizing).
    pub default: fn(&mut Value),
    /// The strategy's changes on create (e.g. status reset).
    pub prepare_for_create: fn(&mut Value),
    /// The strategy's changes on update, given the old object.
    pub prepare_for_update: fn(&mut Value, &Value),
    /// Validation on create.
    pub validate: fn(&Value) -> Result<ErrorList, ApiError>,
    /// Validation on update (new, old).
    pub validate_update: fn(&Value, &Value) -> Result<ErrorList, ApiError>,
    /// Converts a served object to the stored form (identity except events.k8s.io).
    pub to_storage: fn(Value) -> Value,
    /// Converts a stored object to the served form.
    pub from_storage: fn(Value) -> Value,
    /// The field-selector labels the resource accepts.
    pub field_selectors: &'static [&'static str],
    /// The field-selector values of a served object.
    pub field_values: fn(&Value) -> BTreeMap<&'static str, String>,
    /// The table columns.
    pub columns: &'static [ColumnDefinition],
    /// The table cells of a served object at `now` (Unix seconds).
    pub row: fn(&Value, i64) -> Vec<Value>,
    /// Whether something besides `metadata.finalizers` holds back the deletion of a deleting
    /// object (a Namespace's `spec.finalizers`).
    pub pending_finalization: fn(&Value) -> bool,
    /// Marks an object whose deletion must wait (a Namespace becomes `Terminating`).
    pub mark_deleting: fn(&mut Value),
}

/// A served subresource, as discovery and OpenAPI describe it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubresourceDescription {
    /// The subresource, e.g. `status`.
    pub name: String,
    /// The kind it answers with (`Scale` for `scale`).
    pub kind: String,
    /// The group of that kind when it is not the resource's (`autoscaling` for a custom
    /// resource's `scale`); `None`: the resource's.
    pub group: Option<String>,
    /// The version of that kind when it is not the resource's (`v1` for `autoscaling/v1`
    /// Scale); `None`: the resource's.
    pub version: Option<String>,
    /// Its verbs.
    pub verbs: Vec<String>,
}

/// A served resource in one group version, built-in or custom: what discovery, routing and the
/// OpenAPI documents need to know about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceDescription {
    /// The group ("" for core).
    pub group: String,
    /// The version.
    pub version: String,
    /// The kind.
    pub kind: String,
    /// The list kind.
    pub list_kind: String,
    /// The plural resource name.
    pub resource: String,
    /// The singular name.
    pub singular: String,
    /// Short names, e.g. `cm`.
    pub short_names: Vec<String>,
    /// Whether it is namespaced.
    pub namespaced: bool,
    /// Its verbs.
    pub verbs: Vec<String>,
    /// Categories, e.g. `all`.
    pub categories: Vec<String>,
    /// Its subresources.
    pub subresources: Vec<SubresourceDescription>,
}

impl ResourceDescription {
    /// The served group, version and kind.
    pub fn gvk(&self) -> GroupVersionKind {
        GroupVersionKind::new(&self.group, &self.version, &self.kind)
    }

    /// The group and resource, as errors name it.
    pub fn group_resource(&self) -> GroupResource {
        GroupResource::new(&self.group, &self.resource)
    }

    /// The served `apiVersion`: `v1` or `group/version`.
    pub fn api_version(&self) -> String {
        self.gvk().group_version().api_version()
    }

    /// Whether the resource has `verb`.
    pub fn has_verb(&self, verb: &str) -> bool {
        self.verbs.iter().any(|v| v == verb)
    }

    /// The group, version and kind subresource `sub` of this resource reads and writes.
    pub fn subresource_gvk(&self, sub: &SubresourceDescription) -> GroupVersionKind {
        GroupVersionKind::new(
            sub.group.as_deref().unwrap_or(&self.group),
            sub.version.as_deref().unwrap_or(&self.version),
            &sub.kind,
        )
    }

    /// The subresource `name`, if the resource has it.
    pub fn subresource(&self, name: &str) -> Option<&SubresourceDescription> {
        self.subresources.iter().find(|s| s.name == name)
    }
}

/// A built-in resource.
#[derive(Clone, Copy, Debug)]
pub struct ResourceInfo {
    /// The API group (`""` for core).
    pub group: &'static str,
    /// The served version.
    pub version: &'static str,
    /// The kind, e.g. `ConfigMap`.
    pub kind: &'static str,
    /// The list kind, e.g. `ConfigMapList`.
    pub list_kind: &'static str,
    /// The plural resource name in URLs, e.g. `configmaps`.
    pub resource: &'static str,
    /// The singular name, e.g. `configmap`.
    pub singular: &'static str,
    /// Short names kubectl accepts, e.g. `cm`.
    pub short_names: &'static [&'static str],
    /// Whether objects live in namespaces.
    pub namespaced: bool,
    /// Whether an update (PUT) of a missing object creates it, as upstream's strategy of the
    /// resource allows (events, leases and the RBAC kinds).
    pub create_on_update: bool,
    /// The verbs on the resource.
    pub verbs: &'static [&'static str],
    /// The subresources.
    pub subresources: &'static [Subresource],
    /// Discovery categories (none of these resources is in `all`).
    pub categories: &'static [&'static str],
    /// The storage key prefix below `/registry/`: keys are
    /// `/registry/<prefix>/<namespace>/<name>` (cluster-scoped: `/registry/<prefix>/<name>`).
    pub storage_prefix: &'static str,
    /// The apiVersion objects are stored in.
    pub storage_api_version: &'static str,
    /// The shape of a served object: its JSON fields and their protobuf numbers.
    pub schema: &'static Struct,
    /// The behaviour.
    pub hooks: Hooks,
}

impl ResourceInfo {
    /// The served group, version and kind.
    pub fn gvk(&self) -> GroupVersionKind {
        GroupVersionKind::new(self.group, self.version, self.kind)
    }

    /// The served group, version and resource.
    pub fn gvr(&self) -> GroupVersionResource {
        GroupVersionResource::new(self.group, self.version, self.resource)
    }

    /// The group and resource, as errors name it.
    pub fn group_resource(&self) -> GroupResource {
        GroupResource::new(self.group, self.resource)
    }

    /// The description discovery, routing and OpenAPI use, with every subresource.
    pub fn describe(&self) -> ResourceDescription {
        let strings = |items: &[&str]| items.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        ResourceDescription {
            group: self.group.to_owned(),
            version: self.version.to_owned(),
            kind: self.kind.to_owned(),
            list_kind: self.list_kind.to_owned(),
            resource: self.resource.to_owned(),
            singular: self.singular.to_owned(),
            short_names: strings(self.short_names),
            namespaced: self.namespaced,
            verbs: strings(self.verbs),
            categories: strings(self.categories),
            subresources: self
                .subresources
                .iter()
                .map(|s| SubresourceDescription {
                    name: s.name.to_owned(),
                    kind: s.kind.to_owned(),
                    group: None,
                    version: None,
                    verbs: strings(s.verbs),
                })
                .collect(),
        }
    }

    /// The served `apiVersion`: `v1` or `group/version`.
    pub fn api_version(&self) -> String {
        self.gvk().group_version().api_version()
    }

    /// The storage key of an object (`namespace` is ignored for cluster-scoped resources).
    pub fn storage_key(&self, namespace: &str, name: &str) -> String {
        if self.namespaced {
            format!("/registry/{}/{namespace}/{name}", self.storage_prefix)
        } else {
            format!("/registry/{}/{name}", self.storage_prefix)
        }
    }
}

fn identity(object: Value) -> Value {
    object
}

fn no_default(_: &mut Value) {}

fn no_prepare_update(_: &mut Value, _: &Value) {}

fn nothing_pending(_: &Value) -> bool {
    false
}

const STATUS_VERBS: &[&str] = &["get", "patch", "update"];

static RESOURCES: &[ResourceInfo] = &[
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "Namespace",
        list_kind: "NamespaceList",
        resource: "namespaces",
        singular: "namespace",
        short_names: &["ns"],
        namespaced: false,
        create_on_update: false,
        verbs: &[
            "create", "delete", "get", "list", "patch", "update", "watch",
        ],
        subresources: &[
            Subresource {
                name: "status",
                kind: "Namespace",
                verbs: STATUS_VERBS,
            },
            Subresource {
                name: "finalize",
                kind: "Namespace",
                verbs: &["update"],
            },
        ],
        categories: &[],
        storage_prefix: "namespaces",
        storage_api_version: "v1",
        schema: &core::namespace::SCHEMA,
        hooks: Hooks {
            decode: core::namespace::decode,
            default: core::namespace::default,
            prepare_for_create: core::namespace::prepare_for_create,
            prepare_for_update: core::namespace::prepare_for_update,
            validate: core::namespace::validate,
            validate_update: core::namespace::validate_update,
            to_storage: identity,
            from_storage: identity,
            field_selectors: core::namespace::FIELD_SELECTORS,
            field_values: core::namespace::field_values,
            columns: core::namespace::COLUMNS,
            row: core::namespace::row,
            pending_finalization: core::namespace::pending_finalization,
            mark_deleting: core::namespace::mark_deleting,
        },
    },
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "ConfigMap",
        list_kind: "ConfigMapList",
        resource: "configmaps",
        singular: "configmap",
        short_names: &["cm"],
        namespaced: true,
        create_on_update: false,
        verbs: ALL_VERBS,
        subresources: &[],
        categories: &[],
        storage_prefix: "configmaps",
        storage_api_version: "v1",
        schema: &core::configmap::SCHEMA,
        hooks: Hooks {
            decode: core::configmap::decode,
            default: no_default,
            prepare_for_create: no_default,
            prepare_for_update: no_prepare_update,
            validate: core::configmap::validate,
            validate_update: core::configmap::validate_update,
            to_storage: identity,
            from_storage: identity,
            field_selectors: core::configmap::FIELD_SELECTORS,
            field_values: core::configmap::field_values,
            columns: core::configmap::COLUMNS,
            row: core::configmap::row,
            pending_finalization: nothing_pending,
            mark_deleting: no_default,
        },
    },
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "Secret",
        list_kind: "SecretList",
        resource: "secrets",
        singular: "secret",
        short_names: &[],
        namespaced: true,
        create_on_update: false,
        verbs: ALL_VERBS,
        subresources: &[],
        categories: &[],
        storage_prefix: "secrets",
        storage_api_version: "v1",
        schema: &core::secret::SCHEMA,
        hooks: Hooks {
            decode: core::secret::decode,
            default: core::secret::default,
            prepare_for_create: no_default,
            prepare_for_update: no_prepare_update,
            validate: core::secret::validate,
            validate_update: core::secret::validate_update,
            to_storage: identity,
            from_storage: identity,
            field_selectors: core::secret::FIELD_SELECTORS,
            field_values: core::secret::field_values,
            columns: core::secret::COLUMNS,
            row: core::secret::row,
            pending_finalization: nothing_pending,
            mark_deleting: no_default,
        },
    },
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "ServiceAccount",
        list_kind: "ServiceAccountList",
        resource: "serviceaccounts",
        singular: "serviceaccount",
        short_names: &["sa"],
        namespaced: true,
        create_on_update: false,
        verbs: ALL_VERBS,
        subresources: &[Subresource {
            name: "token",
            kind: "TokenRequest",
            verbs: &["create"],
        }],
        categories: &[],
        storage_prefix: "serviceaccounts",
        storage_api_version: "v1",
        schema: &core::serviceaccount::SCHEMA,
        hooks: Hooks {
            decode: core::serviceaccount::decode,
            default: no_default,
            prepare_for_create: no_default,
            prepare_for_update: no_prepare_update,
            validate: core::serviceaccount::validate,
            validate_update: core::serviceaccount::validate_update,
            to_storage: identity,
            from_storage: identity,
            field_selectors: core::serviceaccount::FIELD_SELECTORS,
            field_values: core::serviceaccount::field_values,
            columns: core::serviceaccount::COLUMNS,
            row: core::serviceaccount::row,
            pending_finalization: nothing_pending,
            mark_deleting: no_default,
        },
    },
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "Event",
        list_kind: "EventList",
        resource: "events",
        singular: "event",
        short_names: &["ev"],
        namespaced: true,
        create_on_update: true,
        verbs: ALL_VERBS,
        subresources: &[],
        categories: &[],
        storage_prefix: "events",
        storage_api_version: "v1",
        schema: &core::event::SCHEMA,
        hooks: Hooks {
            decode: core::event::decode,
            default: no_default,
            prepare_for_create: no_default,
            prepare_for_update: no_prepare_update,
            validate: core::event::validate,
            validate_update: core::event::validate_update,
            to_storage: identity,
            from_storage: identity,
            field_selectors: core::event::FIELD_SELECTORS,
            field_values: core::event::field_values,
            columns: core::event::COLUMNS,
            row: core::event::row,
            pending_finalization: nothing_pending,
            mark_deleting: no_default,
        },
    },
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "ResourceQuota",
        list_kind: "ResourceQuotaList",
        resource: "resourcequotas",
        singular: "resourcequota",
        short_names: &["quota"],
        namespaced: true,
        create_on_update: false,
        verbs: ALL_VERBS,
        subresources: &[Subresource {
            name: "status",
            kind: "ResourceQuota",
            verbs: STATUS_VERBS,
        }],
        categories: &[],
        storage_prefix: "resourcequotas",
        storage_api_version: "v1",
        schema: &core::resourcequota::SCHEMA,
        hooks: Hooks {
            decode: core::resourcequota::decode,
            default: no_default,
            prepare_for_create: core::resourcequota::prepare_for_create,
            prepare_for_update: core::resourcequota::prepare_for_update,
            validate: core::resourcequota::validate,
            validate_update: core::resourcequota::validate_update,
            to_storage: identity,
            from_storage: identity,
            field_selectors: core::resourcequota::FIELD_SELECTORS,
            field_values: core::resourcequota::field_values,
            columns: core::resourcequota::COLUMNS,
            row: core::resourcequota::row,
            pending_finalization: nothing_pending,
            mark_deleting: no_default,
        },
    },
    ResourceInfo {
        group: "events.k8s.io",
        version: "v1",
        kind: "Event",
        list_kind: "EventList",
        resource: "events",
        singular: "event",
        short_names: &["ev"],
        namespaced: true,
        create_on_update: true,
        verbs: ALL_VERBS,
        subresources: &[],
        categories: &[],
        storage_prefix: "events",
        storage_api_version: "v1",
        schema: &events::SCHEMA,
        hooks: Hooks {
            decode: events::decode,
            default: no_default,
            prepare_for_create: no_default,
            prepare_for_update: no_prepare_update,
            validate: events::validate,
            validate_update: events::validate_update,
            to_storage: events::to_core,
            from_storage: events::from_core,
            field_selectors: events::FIELD_SELECTORS,
            field_values: events::field_values,
            columns: core::event::COLUMNS,
            row: events::row,
            pending_finalization: nothing_pending,
            mark_deleting: no_default,
        },
    },
    ResourceInfo {
        group: "rbac.authorization.k8s.io",
        version: "v1",
        kind: "ClusterRoleBinding",
        list_kind: "ClusterRoleBindingList",
        resource: "clusterrolebindings",
        singular: "clusterrolebinding",
        short_names: &[],
        namespaced: false,
        create_on_update: true,
        verbs: ALL_VERBS,
        subresources: &[],
        categories: &[],
        storage_prefix: "clusterrolebindings",
        storage_api_version: "rbac.authorization.k8s.io/v1",
        schema: &rbac::clusterrolebinding::SCHEMA,
        hooks: Hooks {
            decode: rbac::clusterrolebinding::decode,
            default: rbac::clusterrolebinding::default,
            prepare_for_create: no_default,
            prepare_for_update: no_prepare_update,
            validate: rbac::clusterrolebinding::validate,
            validate_update: rbac::clusterrolebinding::validate_update,
            to_storage: identity,
            from_storage: identity,
            field_selectors: rbac::clusterrolebinding::FIELD_SELECTORS,
            field_values: rbac::clusterrolebinding::field_values,
            columns: rbac::clusterrolebinding::COLUMNS,
            row: rbac::clusterrolebinding::row,
            pending_finalization: nothing_pending,
            mark_deleting: no_default,
        },
    },
    ResourceInfo {
        group: "rbac.authorization.k8s.io",
        version: "v1",
        kind: "ClusterRole",
        list_kind: "ClusterRoleList",
        resource: "clusterroles",
        singular: "clusterrole",
        short_names: &[],
        namespaced: false,
        create_on_update: true,
        verbs: ALL_VERBS,
        subresources: &[],
        categories: &[],
        storage_prefix: "clusterroles",
        storage_api_version: "rbac.authorization.k8s.io/v1",
        schema: &rbac::clusterrole::SCHEMA,
        hooks: Hooks {
            decode: rbac::clusterrole::decode,
            default: no_default,
            prepare_for_create: no_default,
            prepare_for_update: no_prepare_update,
            validate: rbac::clusterrole::validate,
            validate_update: rbac::clusterrole::validate_update,
            to_storage: identity,
            from_storage: identity,
            field_selectors: rbac::clusterrole::FIELD_SELECTORS,
            field_values: rbac::clusterrole::field_values,
            columns: rbac::clusterrole::COLUMNS,
            row: rbac::clusterrole::row,
            pending_finalization: nothing_pending,
            mark_deleting: no_default,
        },
    },
    ResourceInfo {
        group: "rbac.authorization.k8s.io",
        version: "v1",
        kind: "RoleBinding",
        list_kind: "RoleBindingList",
        resource: "rolebindings",
        singular: "rolebinding",
        short_names: &[],
        namespaced: true,
        create_on_update: true,
        verbs: ALL_VERBS,
        subresources: &[],
        categories: &[],
        storage_prefix: "rolebindings",
        storage_api_version: "rbac.authorization.k8s.io/v1",
        schema: &rbac::rolebinding::SCHEMA,
        hooks: Hooks {
            decode: rbac::rolebinding::decode,
            default: rbac::rolebinding::default,
            prepare_for_create: no_default,
            prepare_for_update: no_prepare_update,
            validate: rbac::rolebinding::validate,
            validate_update: rbac::rolebinding::validate_update,
            to_storage: identity,
            from_storage: identity,
            field_selectors: rbac::rolebinding::FIELD_SELECTORS,
            field_values: rbac::rolebinding::field_values,
            columns: rbac::rolebinding::COLUMNS,
            row: rbac::rolebinding::row,
            pending_finalization: nothing_pending,
            mark_deleting: no_default,
        },
    },
    ResourceInfo {
        group: "rbac.authorization.k8s.io",
        version: "v1",
        kind: "Role",
        list_kind: "RoleList",
        resource: "roles",
        singular: "role",
        short_names: &[],
        namespaced: true,
        create_on_update: true,
        verbs: ALL_VERBS,
        subresources: &[],
        categories: &[],
        storage_prefix: "roles",
        storage_api_version: "rbac.authorization.k8s.io/v1",
        schema: &rbac::role::SCHEMA,
        hooks: Hooks {
            decode: rbac::role::decode,
            default: no_default,
            prepare_for_create: no_default,
            prepare_for_update: no_prepare_update,
            validate: rbac::role::validate,
            validate_update: rbac::role::validate_update,
            to_storage: identity,
            from_storage: identity,
            field_selectors: rbac::role::FIELD_SELECTORS,
            field_values: rbac::role::field_values,
            columns: rbac::role::COLUMNS,
            row: rbac::role::row,
            pending_finalization: nothing_pending,
            mark_deleting: no_default,
        },
    },
    ResourceInfo {
        group: "coordination.k8s.io",
        version: "v1",
        kind: "Lease",
        list_kind: "LeaseList",
        resource: "leases",
        singular: "lease",
        short_names: &[],
        namespaced: true,
        create_on_update: true,
        verbs: ALL_VERBS,
        subresources: &[],
        categories: &[],
        storage_prefix: "leases",
        storage_api_version: "coordination.k8s.io/v1",
        schema: &coordination::lease::SCHEMA,
        hooks: Hooks {
            decode: coordination::lease::decode,
            default: no_default,
            prepare_for_create: coordination::lease::prepare_for_create,
            prepare_for_update: coordination::lease::prepare_for_update,
            validate: coordination::lease::validate,
            validate_update: coordination::lease::validate_update,
            to_storage: identity,
            from_storage: identity,
            field_selectors: coordination::lease::FIELD_SELECTORS,
            field_values: coordination::lease::field_values,
            columns: coordination::lease::COLUMNS,
            row: coordination::lease::row,
            pending_finalization: nothing_pending,
            mark_deleting: no_default,
        },
    },
    ResourceInfo {
        group: "apiextensions.k8s.io",
        version: "v1",
        kind: "CustomResourceDefinition",
        list_kind: "CustomResourceDefinitionList",
        resource: "customresourcedefinitions",
        singular: "customresourcedefinition",
        short_names: &["crd", "crds"],
        namespaced: false,
        create_on_update: false,
        verbs: ALL_VERBS,
        subresources: &[Subresource {
            name: "status",
            kind: "CustomResourceDefinition",
            verbs: STATUS_VERBS,
        }],
        categories: &["api-extensions"],
        storage_prefix: "apiextensions.k8s.io/customresourcedefinitions",
        storage_api_version: "apiextensions.k8s.io/v1",
        schema: &apiextensions::SCHEMA,
        hooks: Hooks {
            decode: apiextensions::decode,
            default: apiextensions::default,
            prepare_for_create: apiextensions::prepare_for_create,
            prepare_for_update: apiextensions::prepare_for_update,
            validate: apiextensions::validate,
            validate_update: apiextensions::validate_update,
            to_storage: identity,
            from_storage: identity,
            field_selectors: apiextensions::FIELD_SELECTORS,
            field_values: apiextensions::field_values,
            columns: apiextensions::COLUMNS,
            row: apiextensions::row,
            pending_finalization: apiextensions::pending_finalization,
            mark_deleting: apiextensions::mark_deleting,
        },
    },
];

fn no_update(_: &Value, _: &Value) -> Result<ErrorList, ApiError> {
    Ok(ErrorList::new())
}

fn no_field_values(_: &Value) -> BTreeMap<&'static str, String> {
    BTreeMap::new()
}

fn no_row(_: &Value, _: i64) -> Vec<Value> {
    Vec::new()
}

/// The hooks of a kind that is only created, never stored (a review): decoding and
/// validation on create, nothing else.
const fn create_only(
    decode: fn(&Value) -> Result<Decoded, ApiError>,
    validate: fn(&Value) -> Result<ErrorList, ApiError>,
) -> Hooks {
    Hooks {
        decode,
        default: no_default,
        prepare_for_create: no_default,
        prepare_for_update: no_prepare_update,
        validate,
        validate_update: no_update,
        to_storage: identity,
        from_storage: identity,
        field_selectors: &[],
        field_values: no_field_values,
        columns: &[],
        row: no_row,
        pending_finalization: nothing_pending,
        mark_deleting: no_default,
    }
}

/// A review kind: created, answered, never stored.
const fn review(
    group: &'static str,
    kind: &'static str,
    list_kind: &'static str,
    resource: &'static str,
    singular: &'static str,
    schema: &'static Struct,
    hooks: Hooks,
) -> ResourceInfo {
    ResourceInfo {
        group,
        version: "v1",
        kind,
        list_kind,
        resource,
        singular,
        short_names: &[],
        namespaced: false,
        create_on_update: false,
        verbs: &["create"],
        subresources: &[],
        categories: &[],
        storage_prefix: "",
        storage_api_version: "",
        schema,
        hooks,
    }
}

static REVIEWS: &[ResourceInfo] = &[
    review(
        "authentication.k8s.io",
        "SelfSubjectReview",
        "SelfSubjectReviewList",
        "selfsubjectreviews",
        "selfsubjectreview",
        &authentication::SELF_SUBJECT_REVIEW,
        create_only(
            authentication::decode_self_subject_review,
            authentication::validate_self_subject_review,
        ),
    ),
    review(
        "authentication.k8s.io",
        "TokenReview",
        "TokenReviewList",
        "tokenreviews",
        "tokenreview",
        &authentication::TOKEN_REVIEW,
        create_only(
            authentication::decode_token_review,
            authentication::validate_token_review,
        ),
    ),
    ResourceInfo {
        namespaced: true,
        ..review(
            "authorization.k8s.io",
            "LocalSubjectAccessReview",
            "LocalSubjectAccessReviewList",
            "localsubjectaccessreviews",
            "localsubjectaccessreview",
            &authorization::LOCAL_SUBJECT_ACCESS_REVIEW,
            // The namespace comes from the URL: the server validates with it.
            create_only(
                authorization::decode_local_subject_access_review,
                no_validation,
            ),
        )
    },
    review(
        "authorization.k8s.io",
        "SelfSubjectAccessReview",
        "SelfSubjectAccessReviewList",
        "selfsubjectaccessreviews",
        "selfsubjectaccessreview",
        &authorization::SELF_SUBJECT_ACCESS_REVIEW,
        create_only(
            authorization::decode_self_subject_access_review,
            authorization::validate_self_subject_access_review,
        ),
    ),
    review(
        "authorization.k8s.io",
        "SelfSubjectRulesReview",
        "SelfSubjectRulesReviewList",
        "selfsubjectrulesreviews",
        "selfsubjectrulesreview",
        &authorization::SELF_SUBJECT_RULES_REVIEW,
        create_only(
            authorization::decode_self_subject_rules_review,
            authorization::validate_self_subject_rules_review,
        ),
    ),
    review(
        "authorization.k8s.io",
        "SubjectAccessReview",
        "SubjectAccessReviewList",
        "subjectaccessreviews",
        "subjectaccessreview",
        &authorization::SUBJECT_ACCESS_REVIEW,
        create_only(
            authorization::decode_subject_access_review,
            authorization::validate_subject_access_review,
        ),
    ),
];

/// The body of `serviceaccounts/<name>/token`: an authentication.k8s.io/v1 TokenRequest.
pub static TOKEN_REQUEST: ResourceInfo = ResourceInfo {
    namespaced: true,
    create_on_update: false,
    ..review(
        "authentication.k8s.io",
        "TokenRequest",
        "TokenRequestList",
        "tokenrequests",
        "tokenrequest",
        &authentication::TOKEN_REQUEST,
        create_only(authentication::decode_token_request, no_validation),
    )
};

fn no_validation(_: &Value) -> Result<ErrorList, ApiError> {
    Ok(ErrorList::new())
}

/// The review kinds (authentication.k8s.io and authorization.k8s.io): served for `create`
/// only, answered by the server, never stored.
pub fn reviews() -> &'static [ResourceInfo] {
    REVIEWS
}

/// Every built-in resource of this crate.
pub fn all() -> &'static [ResourceInfo] {
    RESOURCES
}

/// The resource `resource` served at `group`/`version`.
pub fn find(group: &str, version: &str, resource: &str) -> Option<&'static ResourceInfo> {
    RESOURCES
        .iter()
        .find(|r| r.group == group && r.version == version && r.resource == resource)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_scopes_match_discovery() {
        let rows: Vec<(String, &str, &str, bool, Vec<&str>)> = all()
            .iter()
            .map(|r| {
                (
                    r.api_version(),
                    r.resource,
                    r.kind,
                    r.namespaced,
                    r.short_names.to_vec(),
                )
            })
            .collect();
        assert_eq!(
            rows,
            vec![
                ("v1".into(), "namespaces", "Namespace", false, vec!["ns"]),
                ("v1".into(), "configmaps", "ConfigMap", true, vec!["cm"]),
                ("v1".into(), "secrets", "Secret", true, vec![]),
                (
                    "v1".into(),
                    "serviceaccounts",
                    "ServiceAccount",
                    true,
                    vec!["sa"]
                ),
                ("v1".into(), "events", "Event", true, vec!["ev"]),
                (
                    "v1".into(),
                    "resourcequotas",
                    "ResourceQuota",
                    true,
                    vec!["quota"]
                ),
                (
                    "events.k8s.io/v1".into(),
                    "events",
                    "Event",
                    true,
                    vec!["ev"]
                ),
                (
                    "rbac.authorization.k8s.io/v1".into(),
                    "clusterrolebindings",
                    "ClusterRoleBinding",
                    false,
                    vec![]
                ),
                (
                    "rbac.authorization.k8s.io/v1".into(),
                    "clusterroles",
                    "ClusterRole",
                    false,
                    vec![]
                ),
                (
                    "rbac.authorization.k8s.io/v1".into(),
                    "rolebindings",
                    "RoleBinding",
                    true,
                    vec![]
                ),
                (
                    "rbac.authorization.k8s.io/v1".into(),
                    "roles",
                    "Role",
                    true,
                    vec![]
                ),
                (
                    "coordination.k8s.io/v1".into(),
                    "leases",
                    "Lease",
                    true,
                    vec![]
                ),
                (
                    "apiextensions.k8s.io/v1".into(),
                    "customresourcedefinitions",
                    "CustomResourceDefinition",
                    false,
                    vec!["crd", "crds"]
                ),
            ]
        );
        for r in all() {
            assert_eq!(r.list_kind, format!("{}List", r.kind));
            assert_eq!(format!("{}s", r.singular), r.resource);
            let categories: &[&str] = if r.kind == "CustomResourceDefinition" {
                &["api-extensions"]
            } else {
                &[]
            };
            assert_eq!(r.categories, categories);
        }
    }

    #[test]
    fn storage_keys_follow_kube_apiserver() {
        let ev = find("events.k8s.io", "v1", "events").unwrap();
        let core_ev = find("", "v1", "events").unwrap();
        assert_eq!(
            ev.storage_key("default", "e1"),
            "/registry/events/default/e1"
        );
        assert_eq!(
            ev.storage_key("default", "e1"),
            core_ev.storage_key("default", "e1")
        );
        assert_eq!(ev.storage_api_version, "v1");
        let ns = find("", "v1", "namespaces").unwrap();
        assert_eq!(
            ns.storage_key("ignored", "kube-system"),
            "/registry/namespaces/kube-system"
        );
        let lease = find("coordination.k8s.io", "v1", "leases").unwrap();
        assert_eq!(
            lease.storage_key("kube-system", "l"),
            "/registry/leases/kube-system/l"
        );
        assert!(find("", "v1", "leases").is_none());
        let rbac = "rbac.authorization.k8s.io";
        let role = find(rbac, "v1", "roles").unwrap();
        assert_eq!(role.storage_key("ns", "r"), "/registry/roles/ns/r");
        let cluster_role = find(rbac, "v1", "clusterroles").unwrap();
        assert_eq!(
            cluster_role.storage_key("ignored", "view"),
            "/registry/clusterroles/view"
        );
        let binding = find(rbac, "v1", "rolebindings").unwrap();
        assert_eq!(
            binding.storage_key("ns", "b"),
            "/registry/rolebindings/ns/b"
        );
        let cluster_binding = find(rbac, "v1", "clusterrolebindings").unwrap();
        assert_eq!(
            cluster_binding.storage_key("ignored", "admin"),
            "/registry/clusterrolebindings/admin"
        );
        for r in [role, cluster_role, binding, cluster_binding] {
            assert_eq!(r.verbs, ALL_VERBS);
            assert_eq!(r.storage_api_version, "rbac.authorization.k8s.io/v1");
        }
    }

    #[test]
    fn custom_resource_definitions() {
        let crd = find("apiextensions.k8s.io", "v1", "customresourcedefinitions").unwrap();
        assert_eq!(
            crd.storage_key("ignored", "widgets.example.com"),
            "/registry/apiextensions.k8s.io/customresourcedefinitions/widgets.example.com"
        );
        assert_eq!(crd.verbs, ALL_VERBS);
        assert_eq!(crd.singular, "customresourcedefinition");
        assert_eq!(crd.subresources.len(), 1);
        assert_eq!(crd.subresources[0].name, "status");
        assert_eq!(crd.subresources[0].verbs, STATUS_VERBS);
        assert_eq!(crd.storage_api_version, "apiextensions.k8s.io/v1");
        let columns: Vec<&str> = crd.hooks.columns.iter().map(|c| c.name).collect();
        assert_eq!(columns, ["Name", "Created At"]);
    }

    #[test]
    fn subresources_and_verbs() {
        let ns = find("", "v1", "namespaces").unwrap();
        let subs: Vec<&str> = ns.subresources.iter().map(|s| s.name).collect();
        assert_eq!(subs, ["status", "finalize"]);
        assert!(!ns.verbs.contains(&"deletecollection"));
        let quota = find("", "v1", "resourcequotas").unwrap();
        assert_eq!(quota.subresources[0].verbs, ["get", "patch", "update"]);
        let cm = find("", "v1", "configmaps").unwrap();
        assert!(cm.subresources.is_empty());
        assert_eq!(cm.verbs, ALL_VERBS);
    }
}
