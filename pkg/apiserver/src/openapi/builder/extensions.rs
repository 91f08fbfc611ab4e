//! The one table of list, map and patch semantics of the built-in types, walked: its entries
//! are genplane-api's ([`genplane_api::schema::SHARED`] and each catalog entry's
//! `extensions`, beside the rest of what describes a kind); this module gathers them and
//! writes them into the documents.
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

use serde_json::{Map, Value};

use genplane_api::schema::{Extensions, SHARED};

/// Every entry: the shared ones, then each catalog entry's (an entry several kinds list, such
/// as those of rbac's `PolicyRule`, once).
pub fn all() -> impl Iterator<Item = &'static Extensions> {
    entries_of(genplane_api::catalog::all().iter())
}

/// The shared entries, then those of `kinds`, each (schema, property) once.
fn entries_of(
    kinds: impl Iterator<Item = &'static genplane_api::resource::ResourceInfo>,
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

/// Writes the table's extensions into the component schemas present in `schemas` (schema
/// name -> schema). Entries for absent schemas or properties are skipped.
pub fn apply(schemas: &mut Map<String, Value>) {
    apply_entries(schemas, all());
}

/// As [`apply`], with the shared entries and those of `kinds` (the catalog's, or a program's
/// own kinds).
pub fn apply_of(
    schemas: &mut Map<String, Value>,
    kinds: &[&'static genplane_api::resource::ResourceInfo],
) {
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use genplane_api::schema::{ListType, meta};

    #[test]
    fn one_entry_per_schema_and_property() {
        let table: Vec<&Extensions> = SHARED
            .iter()
            .chain(
                genplane_api::catalog::all()
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
