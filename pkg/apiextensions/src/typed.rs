//! The type model server-side apply uses for a custom resource kind.
//!
//! `genplane_merge::Schema::add_openapi_v3` already reads everything a structural schema
//! says about merging (`x-kubernetes-list-type`, `x-kubernetes-list-map-keys`,
//! `x-kubernetes-map-type`, `x-kubernetes-preserve-unknown-fields`,
//! `x-kubernetes-int-or-string`, embedded resources, which [`openapi::kind_schema`] gives
//! their `apiVersion`, `kind` and `metadata`), so the model is built from the published schema.
//! Custom resources are unstructured (upstream compares them as plain JSON), so the model is
//! marked so, and it is a model of its own rather than part of the built-in one.

use genplane_merge::{Schema, SchemaError, TypeRef};
use serde_json::{Value, json};

use crate::openapi;

/// The type model of `kind` in `group`/`version` with the version's `openAPIV3Schema`
/// (`Value::Null` when it has none, making every field plain JSON), and the type of its
/// objects. `meta_documents` are OpenAPI v3 documents whose components hold
/// `io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta` and what it refers to (any built-in
/// group-version document), so that `metadata` merges as it does for built-in kinds.
pub fn type_model(
    schema: &Value,
    group: &str,
    version: &str,
    kind: &str,
    meta_documents: &[&Value],
) -> Result<(Schema, TypeRef), SchemaError> {
    let name = openapi::component_name(group, version, kind);
    let document = json!({
        "components": {"schemas": {name.clone(): openapi::kind_schema(schema, group, version, kind)}},
    });
    let mut model = Schema::from_openapi_v3(&document)?;
    for meta in meta_documents {
        model.add_openapi_v3(meta)?;
    }
    model.set_unstructured(true);
    Ok((model, TypeRef::Named(name)))
}

#[cfg(test)]
mod tests {
    use genplane_merge::fieldpath::Set;
    use genplane_merge::managed::{ApplyError, Writer, apply};
    use genplane_merge::{ListType, MapType, Type};

    use super::*;

    fn crd_schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "properties": {
                        "ports": {
                            "type": "array",
                            "x-kubernetes-list-type": "map",
                            "x-kubernetes-list-map-keys": ["name"],
                            "items": {
                                "type": "object",
                                "required": ["name"],
                                "properties": {
                                    "name": {"type": "string"},
                                    "port": {"type": "integer"},
                                },
                            },
                        },
                        "tags": {
                            "type": "array",
                            "x-kubernetes-list-type": "set",
                            "items": {"type": "string"},
                        },
                        "args": {"type": "array", "items": {"type": "string"}},
                        "selector": {
                            "type": "object",
                            "x-kubernetes-map-type": "atomic",
                            "additionalProperties": {"type": "string"},
                        },
                        "size": {"x-kubernetes-int-or-string": true},
                        "template": {
                            "type": "object",
                            "x-kubernetes-embedded-resource": true,
                            "x-kubernetes-preserve-unknown-fields": true,
                        },
                    },
                },
            },
        })
    }

    fn meta_document() -> Value {
        json!({"components": {"schemas": {
            "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                },
            },
        }}})
    }

    fn model() -> (Schema, TypeRef) {
        let meta = meta_document();
        type_model(
            &crd_schema(),
            "stable.example.com",
            "v1",
            "CronTab",
            &[&meta],
        )
        .expect("the model builds")
    }

    fn spec_field<'a>(schema: &'a Schema, ty: &'a TypeRef, name: &str) -> &'a Type {
        let Type::Struct(root) = schema.resolve(ty) else {
            panic!("the kind is a struct");
        };
        let Type::Struct(spec) = schema.resolve(&root.fields["spec"].ty) else {
            panic!("spec is a struct");
        };
        schema.resolve(&spec.fields[name].ty)
    }

    #[test]
    fn model_reads_the_extensions_of_the_schema() {
        let (schema, ty) = model();
        assert!(schema.is_unstructured());
        assert_eq!(
            schema.kind("stable.example.com", "v1", "CronTab"),
            Some(ty.clone())
        );
        match spec_field(&schema, &ty, "ports") {
            Type::List(list) => assert_eq!(list.list_type, ListType::Map(vec!["name".into()])),
            other => panic!("ports is {other:?}"),
        }
        match spec_field(&schema, &ty, "tags") {
            Type::List(list) => assert_eq!(list.list_type, ListType::Set),
            other => panic!("tags is {other:?}"),
        }
        match spec_field(&schema, &ty, "args") {
            Type::List(list) => assert_eq!(list.list_type, ListType::Atomic),
            other => panic!("args is {other:?}"),
        }
        match spec_field(&schema, &ty, "selector") {
            Type::Map(map) => assert_eq!(map.map_type, MapType::Atomic),
            other => panic!("selector is {other:?}"),
        }
        assert_eq!(spec_field(&schema, &ty, "size"), &Type::Untyped);
        match spec_field(&schema, &ty, "template") {
            Type::Struct(s) => {
                assert!(s.preserve_unknown_fields);
                assert!(
                    s.fields.contains_key("metadata"),
                    "embedded metadata: {s:?}"
                );
            }
            other => panic!("template is {other:?}"),
        }
        // metadata refers to the built-in ObjectMeta.
        let Type::Struct(root) = schema.resolve(&ty) else {
            panic!("the kind is a struct");
        };
        assert!(
            matches!(schema.resolve(&root.fields["metadata"].ty), Type::Struct(m) if m.fields.contains_key("labels"))
        );
    }

    fn writer<'a>(schema: &'a Schema, ty: &TypeRef, manager: &str) -> Writer<'a> {
        Writer {
            schema,
            ty: ty.clone(),
            manager: manager.to_owned(),
            api_version: "stable.example.com/v1".into(),
            subresource: String::new(),
            time: "2026-01-01T00:00:00Z".into(),
            ignored: Set::new(),
        }
    }

    fn object(spec: Value) -> Value {
        json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab",
            "metadata": {"name": "c"}, "spec": spec})
    }

    #[test]
    fn server_side_apply_merges_map_lists_and_sets_by_item() {
        let (schema, ty) = model();
        let first = object(json!({
            "ports": [{"name": "http", "port": 80}],
            "tags": ["a"],
            "args": ["--one"],
        }));
        let (live, _) = apply(&writer(&schema, &ty, "alice"), None, &first, false)
            .expect("the first apply creates the object");
        let second = object(json!({
            "ports": [{"name": "metrics", "port": 9090}],
            "tags": ["b"],
        }));
        let (merged, changed) = apply(&writer(&schema, &ty, "bob"), Some(&live), &second, false)
            .expect("a second manager adds its own items");
        assert!(changed);
        assert_eq!(
            merged["spec"]["ports"],
            json!([{"name": "http", "port": 80}, {"name": "metrics", "port": 9090}])
        );
        assert_eq!(merged["spec"]["tags"], json!(["a", "b"]));
        assert_eq!(merged["spec"]["args"], json!(["--one"]));
        let managers: Vec<&str> = merged["metadata"]["managedFields"]
            .as_array()
            .expect("managed fields")
            .iter()
            .filter_map(|e| e["manager"].as_str())
            .collect();
        assert_eq!(managers, ["alice", "bob"]);

        // Changing another manager's item is a conflict on that item's field.
        let steal = object(json!({"ports": [{"name": "http", "port": 8080}]}));
        match apply(&writer(&schema, &ty, "bob"), Some(&merged), &steal, false) {
            Err(ApplyError::Conflicts(conflicts)) => {
                let text: Vec<String> = conflicts.iter().map(ToString::to_string).collect();
                assert_eq!(
                    text,
                    ["conflict with \"alice\": .spec.ports[name=\"http\"].port"]
                );
            }
            other => panic!("expected a conflict, got {other:?}"),
        }
    }

    #[test]
    fn without_a_schema_lists_are_atomic() {
        let (schema, ty) = type_model(&Value::Null, "stable.example.com", "v1", "CronTab", &[])
            .expect("the model builds");
        let first = object(json!({"tags": ["a"]}));
        let (live, _) = apply(&writer(&schema, &ty, "alice"), None, &first, false)
            .expect("the first apply creates the object");
        let second = object(json!({"tags": ["b"]}));
        let result = apply(&writer(&schema, &ty, "bob"), Some(&live), &second, false);
        assert!(
            matches!(result, Err(ApplyError::Conflicts(_))),
            "an untyped list is owned whole: {result:?}"
        );
    }
}
