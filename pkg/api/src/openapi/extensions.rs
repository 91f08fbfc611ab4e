//! The one table of list, map and patch semantics of the built-in types.
//!
//! k8s-openapi's schemas carry types and descriptions but none of the `x-kubernetes-*`
//! extensions upstream declares with markers on its Go types (`+listType`, `+listMapKey`,
//! `+structType`/`+mapType`, `patchStrategy`, `patchMergeKey`). This table restates those
//! facts for the types genplane serves, keyed by schema name and property. It is the single
//! source for:
//!
//! - the OpenAPI documents ([`apply`] writes the extensions into the component schemas), which
//!   kubectl reads for client-side apply and explain;
//! - strategic merge patch (later): [`Extensions::patch_strategy`] and
//!   [`Extensions::patch_merge_key`] say how a list merges;
//! - server-side apply (later): [`Extensions::list_type`], [`Extensions::list_map_keys`] and
//!   [`Extensions::map_type`] say how a field is owned.
//!
//! A list without an entry is atomic for server-side apply and replaced whole by a strategic
//! merge patch, as upstream treats unmarked lists; a map or struct without an entry is
//! granular. An entry whose `property` is empty describes the schema itself (a struct that is
//! atomic as a whole, like `ObjectReference`).

use serde_json::{Map, Value, json};

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

pub(crate) const NONE: Extensions = Extensions {
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
pub(crate) const fn atomic_list(schema: &'static str, property: &'static str) -> Extensions {
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
pub(crate) const fn keyed_list(
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
/// own are in its catalog entry ([`crate::catalog::ResourceInfo::extensions`]), next to the rest
/// of what describes it; [`all`] is the whole table.
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

/// Every entry: the shared ones, then each catalog entry's (an entry several kinds list, such
/// as those of rbac's `PolicyRule`, once).
pub fn all() -> impl Iterator<Item = &'static Extensions> {
    entries_of(crate::catalog::all().iter())
}

/// The shared entries, then those of `kinds`, each (schema, property) once.
fn entries_of(
    kinds: impl Iterator<Item = &'static crate::catalog::ResourceInfo>,
) -> impl Iterator<Item = &'static Extensions> {
    let mut seen: Vec<(&'static str, &'static str)> = Vec::new();
    SHARED
        .iter()
        .chain(kinds.flat_map(|r| r.extensions.iter()))
        .filter(move |e| {
            let key = (e.schema, e.property);
            let first = !seen.contains(&key);
            seen.push(key);
            first
        })
}

/// The extensions of `property` of `schema` (`""` for the schema itself), if any.
pub fn lookup(schema: &str, property: &str) -> Option<&'static Extensions> {
    all().find(|e| e.schema == schema && e.property == property)
}

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

/// Writes the table's extensions into the component schemas present in `schemas` (schema
/// name -> schema). Entries for absent schemas or properties are skipped.
pub fn apply(schemas: &mut Map<String, Value>) {
    apply_entries(schemas, all());
}

/// As [`apply`], with the shared entries and those of `kinds` (the catalog's, or a program's
/// own kinds).
pub fn apply_of(schemas: &mut Map<String, Value>, kinds: &[&'static crate::catalog::ResourceInfo]) {
    apply_entries(schemas, entries_of(kinds.iter().copied()));
}

fn apply_entries<'a>(
    schemas: &mut Map<String, Value>,
    entries: impl Iterator<Item = &'a Extensions>,
) {
    for entry in entries {
        let Some(schema) = schemas.get_mut(entry.schema).and_then(Value::as_object_mut) else {
            continue;
        };
        let target = if entry.property.is_empty() {
            Some(schema)
        } else {
            schema
                .get_mut("properties")
                .and_then(|p| p.get_mut(entry.property))
                .and_then(Value::as_object_mut)
        };
        if let Some(target) = target {
            target.extend(entry.to_json());
        }
    }
}

/// The prefix of the metav1 schema names.
pub(crate) fn meta(name: &str) -> String {
    format!("{META}{name}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_entry_per_schema_and_property() {
        let table: Vec<&Extensions> = SHARED
            .iter()
            .chain(
                crate::catalog::all()
                    .iter()
                    .flat_map(|r| r.extensions.iter()),
            )
            .collect();
        for (i, a) in table.iter().enumerate() {
            assert!(
                !table[i + 1..]
                    .iter()
                    .any(|b| a.schema == b.schema && a.property == b.property && a != b),
                "{} {}",
                a.schema,
                a.property
            );
            assert_eq!(
                a.list_type == Some(ListType::Map),
                !a.list_map_keys.is_empty(),
                "{a:?}"
            );
        }
    }

    #[test]
    fn owner_references_merge_by_uid() {
        let e = lookup(&meta("ObjectMeta"), "ownerReferences").unwrap();
        assert_eq!(e.list_map_keys, ["uid"]);
        assert_eq!(e.patch_merge_key, Some("uid"));
        let json = Value::Object(e.to_json());
        assert_eq!(
            json,
            json!({
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["uid"],
                "x-kubernetes-patch-strategy": "merge",
                "x-kubernetes-patch-merge-key": "uid",
            })
        );
        let conditions = lookup("io.k8s.api.core.v1.NamespaceStatus", "conditions").unwrap();
        assert_eq!(conditions.list_map_keys, ["type"]);
        assert!(lookup(&meta("ObjectMeta"), "labels").is_none());
    }

    #[test]
    fn apply_writes_into_properties_and_schemas() {
        let mut schemas = Map::new();
        schemas.insert(
            meta("ObjectMeta"),
            json!({"type": "object", "properties": {"finalizers": {"type": "array"}}}),
        );
        schemas.insert(
            "io.k8s.api.core.v1.ObjectReference".into(),
            json!({"type": "object"}),
        );
        apply(&mut schemas);
        assert_eq!(
            schemas[&meta("ObjectMeta")]["properties"]["finalizers"]["x-kubernetes-list-type"],
            "set"
        );
        assert_eq!(
            schemas["io.k8s.api.core.v1.ObjectReference"]["x-kubernetes-map-type"],
            "atomic"
        );
    }
}
