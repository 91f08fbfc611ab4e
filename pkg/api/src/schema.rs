//! What a kind's catalog entry says of its OpenAPI schema, below the kinds and the catalog:
//! its component ([`schema_of`], from k8s-openapi's types or the kind's own Rust type) and the
//! semantics of its lists, maps and structs ([`Extensions`]: `x-kubernetes-list-type`,
//! `x-kubernetes-map-type`, merge keys), with the semantics of the types every kind shares
//! ([`SHARED`]) and the constructors the kinds' own entries are written with. The OpenAPI
//! document builder (`genplane_apiserver::openapi::builder`, above this crate) walks them.

use schemars::JsonSchema;
use schemars::generate::SchemaGenerator;
use serde_json::{Map, Value, json};

/// Adds the schema of `T` (and what it refers to) and returns its component name: a kind's
/// [`crate::resource::ResourceInfo::openapi_schema`].
pub fn schema_of<T: JsonSchema>(generator: &mut SchemaGenerator) -> String {
    generator.subschema_for::<T>();
    T::schema_name().into_owned()
}

/// `x-kubernetes-list-type`: how a list is owned and merged by server-side apply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListType {
    /// The list is one value: replaced whole.
    Atomic,
    /// Scalars, each at most once; merged by value.
    Set,
    /// Objects keyed by [`Extensions::list_map_keys`]; merged by key.
    Map,
}

impl ListType {
    /// The extension's value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Atomic => "atomic",
            Self::Set => "set",
            Self::Map => "map",
        }
    }
}

/// `x-kubernetes-map-type`: how a map or struct is owned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapType {
    /// One value: replaced whole.
    Atomic,
    /// Each key separately (the default; listed only where upstream says so explicitly).
    Granular,
}

impl MapType {
    /// The extension's value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Atomic => "atomic",
            Self::Granular => "granular",
        }
    }
}

/// The extensions of one property of one schema (or of the schema itself).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extensions {
    /// The component schema, e.g. `io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta`.
    pub schema: &'static str,
    /// The JSON property, e.g. `ownerReferences`; empty for the schema itself.
    pub property: &'static str,
    /// `x-kubernetes-list-type`.
    pub list_type: Option<ListType>,
    /// `x-kubernetes-list-map-keys` (with [`ListType::Map`]).
    pub list_map_keys: &'static [&'static str],
    /// `x-kubernetes-map-type`.
    pub map_type: Option<MapType>,
    /// `x-kubernetes-patch-strategy` for strategic merge patch: `merge` (or
    /// `merge,retainKeys`, `retainKeys`, `replace`).
    pub patch_strategy: Option<&'static str>,
    /// `x-kubernetes-patch-merge-key`: the field identifying list items in a strategic merge.
    pub patch_merge_key: Option<&'static str>,
}

/// No extension at all: the base of an entry (`Extensions { schema, property, ..NONE }`).
pub const NONE: Extensions = Extensions {
    schema: "",
    property: "",
    list_type: None,
    list_map_keys: &[],
    map_type: None,
    patch_strategy: None,
    patch_merge_key: None,
};

const META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.";

/// A list that is one value.
pub const fn atomic_list(schema: &'static str, property: &'static str) -> Extensions {
    Extensions {
        schema,
        property,
        list_type: Some(ListType::Atomic),
        ..NONE
    }
}

/// A struct that is one value.
pub(crate) const fn atomic_struct(schema: &'static str) -> Extensions {
    Extensions {
        schema,
        map_type: Some(MapType::Atomic),
        ..NONE
    }
}

/// A list of objects keyed by `key` (one field), merged by that key in strategic merge
/// patches too.
pub const fn keyed_list(
    schema: &'static str,
    property: &'static str,
    key: &'static [&'static str; 1],
) -> Extensions {
    Extensions {
        schema,
        property,
        list_type: Some(ListType::Map),
        list_map_keys: key,
        patch_strategy: Some("merge"),
        patch_merge_key: Some(key[0]),
        ..NONE
    }
}

/// The extensions of the types every kind shares (metav1, and core/v1 references). Each kind's
/// own are in its catalog entry ([`crate::resource::ResourceInfo::extensions`]), next to the rest
/// of what describes it; the OpenAPI builder's `extensions::all` (genplane-apiserver) is the
/// whole table.
pub static SHARED: &[Extensions] = &[
    // metav1
    Extensions {
        schema: "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
        property: "finalizers",
        list_type: Some(ListType::Set),
        patch_strategy: Some("merge"),
        ..NONE
    },
    atomic_list(
        "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
        "managedFields",
    ),
    keyed_list(
        "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
        "ownerReferences",
        &["uid"],
    ),
    atomic_struct("io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference"),
    atomic_list(
        "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions",
        "dryRun",
    ),
    atomic_list(
        "io.k8s.apimachinery.pkg.apis.meta.v1.StatusDetails",
        "causes",
    ),
    atomic_struct("io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector"),
    atomic_list(
        "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector",
        "matchExpressions",
    ),
    atomic_list(
        "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelectorRequirement",
        "values",
    ),
    // core/v1 references, used by several kinds
    atomic_struct("io.k8s.api.core.v1.ObjectReference"),
    atomic_struct("io.k8s.api.core.v1.LocalObjectReference"),
];

impl Extensions {
    /// The extensions as OpenAPI vendor extensions (`x-kubernetes-*` keys).
    pub fn to_json(&self) -> Map<String, Value> {
        let mut map = Map::new();
        if let Some(t) = self.list_type {
            map.insert("x-kubernetes-list-type".into(), json!(t.as_str()));
        }
        if !self.list_map_keys.is_empty() {
            map.insert(
                "x-kubernetes-list-map-keys".into(),
                json!(self.list_map_keys),
            );
        }
        if let Some(t) = self.map_type {
            map.insert("x-kubernetes-map-type".into(), json!(t.as_str()));
        }
        if let Some(s) = self.patch_strategy {
            map.insert("x-kubernetes-patch-strategy".into(), json!(s));
        }
        if let Some(k) = self.patch_merge_key {
            map.insert("x-kubernetes-patch-merge-key".into(), json!(k));
        }
        map
    }
}

/// The component name of the metav1 schema `name`
/// (`io.k8s.apimachinery.pkg.apis.meta.v1.<name>`).
pub fn meta(name: &str) -> String {
    format!("{META}{name}")
}
