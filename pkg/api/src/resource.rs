//! What describes a resource: its catalog entry ([`ResourceInfo`]) with the pure hooks the
//! generic registry runs ([`Hooks`], told about the server through a [`Context`]), its
//! subresources, and the description discovery, routing and OpenAPI use
//! ([`ResourceDescription`]). The kinds' modules and the OpenAPI builder use these types; the
//! [`crate::catalog`] lists the entries (and re-exports all of this under its own path).

use std::collections::BTreeMap;

use genplane_apimachinery::codec::decode::Decoded;
use genplane_apimachinery::codec::schema::Struct;
use genplane_apimachinery::errors::ApiError;
use genplane_apimachinery::schema::{GroupResource, GroupVersionKind, GroupVersionResource};
use genplane_apimachinery::validation::field::ErrorList;
use serde_json::Value;

use crate::table::ColumnDefinition;

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
#[derive(Clone, Copy, Debug)]
pub struct Subresource {
    /// The name after the slash: `status`, `finalize`, `token`.
    pub name: &'static str,
    /// The kind the subresource reads and writes.
    pub kind: &'static str,
    /// Its verbs.
    pub verbs: &'static [&'static str],
    /// The rules of writes through it, when it is written through the resource's store
    /// (`status`, `finalize`); `None` for a subresource whose creates are answered (`token`).
    pub rules: Option<SubresourceRules>,
    /// The entry of the kind its requests and answers are, when that is another group's kind
    /// that no resource of its own serves (`serviceaccounts/token`: authentication.k8s.io/v1
    /// TokenRequest, whose creates are answered, never stored); `None`: `kind` is of the
    /// resource's group and version.
    pub body: Option<&'static ResourceInfo>,
}

/// The feature gates a strategy may consult, resolved for the server it runs in.
pub trait FeatureGates: Send + Sync + std::fmt::Debug {
    /// Whether `feature` (upstream's name, e.g. `CoordinatedLeaderElection`) is on.
    fn enabled(&self, feature: &'static str) -> bool;
}

/// Every gated feature off: what a strategy sees without a server's gates (tools, unit tests).
/// Gated fields are then dropped on write, as a server with the feature off drops them.
#[derive(Clone, Copy, Debug, Default)]
pub struct GatesOff;

impl FeatureGates for GatesOff {
    fn enabled(&self, _: &'static str) -> bool {
        false
    }
}

/// Who makes a write, as the hooks of a kind that records its requestor see them (a
/// CertificateSigningRequest's `spec.username`, `uid`, `groups` and `extra`): the
/// authenticated user, whatever the body says.
#[derive(Clone, Copy, Debug)]
pub struct Requestor<'a> {
    /// The user name.
    pub username: &'a str,
    /// The user's uid, when the authenticator knows one.
    pub uid: &'a str,
    /// The user's groups.
    pub groups: &'a [String],
    /// The authenticator's extra attributes, by key.
    pub extra: &'a BTreeMap<String, Vec<String>>,
}

/// What a strategy's hooks are told about the server they run in and the write they prepare.
#[derive(Clone, Copy, Debug)]
pub struct Context<'a> {
    /// The server's feature gates.
    pub gates: &'a dyn FeatureGates,
    /// Who writes, when the server knows (an API request); `None` for a write the server makes
    /// on no one's behalf, and in tools and tests.
    pub requestor: Option<Requestor<'a>>,
    /// The time of the write (Unix seconds), for the timestamps a strategy sets (a condition's
    /// `lastUpdateTime`); 0 where no clock was read (tools, unit tests).
    pub now: i64,
}

impl Context<'static> {
    /// A context with every gated feature off ([`GatesOff`]), no requestor and no time.
    pub fn gates_off() -> Self {
        Context {
            gates: &GatesOff,
            requestor: None,
            now: 0,
        }
    }
}

/// How a write through a subresource changes the object: what it keeps of the stored one and
/// how it is validated (a `status` write keeps the `spec`, a `finalize` write changes only the
/// finalizers).
#[derive(Clone, Copy, Debug)]
pub struct SubresourceRules {
    /// The changes on update, given the stored object.
    pub prepare_for_update: fn(&mut Value, &Value, &Context<'_>),
    /// Validation on update (new, old).
    pub validate_update: fn(&Value, &Value) -> Result<ErrorList, ApiError>,
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
    pub prepare_for_create: fn(&mut Value, &Context<'_>),
    /// The strategy's changes on update, given the old object.
    pub prepare_for_update: fn(&mut Value, &Value, &Context<'_>),
    /// Validation on create.
    pub validate: fn(&Value) -> Result<ErrorList, ApiError>,
    /// Validation on update (new, old).
    pub validate_update: fn(&Value, &Value) -> Result<ErrorList, ApiError>,
    /// Converts a served object to the stored form; `None` when objects are stored as they are
    /// served (all but events.k8s.io Events: writes then encode the object without a copy).
    pub to_storage: Option<fn(Value) -> Value>,
    /// Converts a stored object to the served form; `None` when objects are served as they
    /// are stored (reads then answer with the stored bytes, not decoding them).
    pub from_storage: Option<fn(Value) -> Value>,
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
    /// The grace period of a delete of `object` that asked for `requested` seconds (or
    /// nothing): `Some(seconds)` for a kind whose objects terminate gracefully (a Pod: the
    /// request's, else its `spec.terminationGracePeriodSeconds`), which a delete then marks
    /// (`deletionTimestamp` that far ahead, `deletionGracePeriodSeconds`) rather than removes
    /// while it is above 0; `None` for every other kind ([`not_graceful`]).
    pub grace_period: fn(&Value, Option<i64>) -> Option<i64>,
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
    /// The `apiVersion` its objects are stored in (`None` for a kind that is never stored):
    /// discovery publishes its `storageVersionHash`.
    pub storage_api_version: Option<String>,
}

impl ResourceDescription {
    /// The served group, version and kind.
    pub fn gvk(&self) -> GroupVersionKind {
        GroupVersionKind::new(&self.group, &self.version, &self.kind)
    }

    /// Whether this is the resource `other` declares (the same group and plural name, whatever
    /// the version): how code finds a kind it needs among those served, by the kind's own
    /// declaration rather than by spelling its group.
    pub fn is(&self, other: &ResourceInfo) -> bool {
        self.group == other.group && self.resource == other.resource
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
    /// Empty for a kind that is never stored: its only verb is `create`, whose answer the
    /// server computes (the review APIs; upstream's storages that are only a `rest.Creater`).
    pub storage_prefix: &'static str,
    /// The apiVersion objects are stored in.
    pub storage_api_version: &'static str,
    /// The shape of a served object: its JSON fields and their protobuf numbers.
    pub schema: &'static Struct,
    /// Whether the kind speaks Kubernetes protobuf (its `schema` then carries the field
    /// numbers of upstream's `generated.proto`); a program's own kind without field numbers
    /// says `false` and is served as JSON and YAML only.
    pub protobuf: bool,
    /// The feature gate (its name in `--feature-gates`) the kind is served under: with it off
    /// the server serves no such resource (no discovery, OpenAPI, routes or watch cache), as
    /// with `--runtime-config` turning it off; `None` for a kind served regardless.
    pub feature_gate: Option<&'static str>,
    /// The list, map and patch semantics of the kind's own types (`x-kubernetes-*`), for
    /// OpenAPI, strategic merge patch and server-side apply (the shared types' are in
    /// [`crate::schema::SHARED`]).
    pub extensions: &'static [crate::schema::Extensions],
    /// Adds the kind's OpenAPI schema (from k8s-openapi's types, with its dependencies) to a
    /// generator and returns its component name.
    pub openapi_schema: fn(&mut schemars::generate::SchemaGenerator) -> String,
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

    /// Whether this is the resource `other` declares (the same group and plural name, whatever
    /// the version): how code finds a kind it needs among those served, by the kind's own
    /// declaration rather than by spelling its group.
    pub fn is(&self, other: &ResourceInfo) -> bool {
        self.group == other.group && self.resource == other.resource
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
                    group: s.body.map(|b| b.group.to_owned()),
                    version: s.body.map(|b| b.version.to_owned()),
                    verbs: strings(s.verbs),
                })
                .collect(),
            storage_api_version: self.stored().then(|| self.storage_api_version.to_owned()),
        }
    }

    /// The served `apiVersion`: `v1` or `group/version`.
    pub fn api_version(&self) -> String {
        self.gvk().group_version().api_version()
    }

    /// Whether objects of the kind are stored; `false` for a kind whose creates are answered
    /// (an empty [`ResourceInfo::storage_prefix`]).
    pub fn stored(&self) -> bool {
        !self.storage_prefix.is_empty()
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

/// A hook that changes nothing (`default`, `mark_deleting`).
pub fn no_default(_: &mut Value) {}

/// A create hook that changes nothing.
pub fn no_prepare(_: &mut Value, _: &Context<'_>) {}

/// An update hook that changes nothing.
pub fn no_prepare_update(_: &mut Value, _: &Value, _: &Context<'_>) {}

/// Nothing but `metadata.finalizers` holds back a deletion.
pub fn nothing_pending(_: &Value) -> bool {
    false
}

/// Objects of the kind are removed at once when deleted (no graceful termination).
pub fn not_graceful(_: &Value, _: Option<i64>) -> Option<i64> {
    None
}

/// The verbs of a `status` subresource.
pub const STATUS_VERBS: &[&str] = &["get", "patch", "update"];

/// No validation on update.
pub fn no_update(_: &Value, _: &Value) -> Result<ErrorList, ApiError> {
    Ok(ErrorList::new())
}

/// No field-selector values besides `metadata.name` and `metadata.namespace`.
pub fn no_field_values(_: &Value) -> BTreeMap<&'static str, String> {
    BTreeMap::new()
}

/// No table cells besides the name and age.
pub fn no_row(_: &Value, _: i64) -> Vec<Value> {
    Vec::new()
}

impl Hooks {
    /// The hooks of a kind that is never stored (a review): decoding and validation on
    /// create, nothing else.
    pub const fn create_only(
        decode: fn(&Value) -> Result<Decoded, ApiError>,
        validate: fn(&Value) -> Result<ErrorList, ApiError>,
    ) -> Hooks {
        Hooks {
            decode,
            default: no_default,
            prepare_for_create: no_prepare,
            prepare_for_update: no_prepare_update,
            validate,
            validate_update: no_update,
            to_storage: None,
            from_storage: None,
            field_selectors: &[],
            field_values: no_field_values,
            columns: &[],
            row: no_row,
            pending_finalization: nothing_pending,
            mark_deleting: no_default,
            grace_period: not_graceful,
        }
    }
}

/// No validation on create.
pub fn no_validation(_: &Value) -> Result<ErrorList, ApiError> {
    Ok(ErrorList::new())
}

/// A cluster-scoped kind of `group`/v1 that is never stored: `create` is its only verb, and
/// the server computes the answer (a review). The list kind is `<kind>List`; upstream has
/// one, though nothing lists these kinds.
// One argument per name of the kind, as the entries read best.
#[allow(clippy::too_many_arguments)]
pub(crate) const fn answered(
    group: &'static str,
    kind: &'static str,
    list_kind: &'static str,
    resource: &'static str,
    singular: &'static str,
    schema: &'static Struct,
    openapi_schema: fn(&mut schemars::generate::SchemaGenerator) -> String,
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
        protobuf: true,
        feature_gate: None,
        extensions: &[],
        openapi_schema,
        hooks,
    }
}
