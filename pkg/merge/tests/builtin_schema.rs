//! The type model of the built-in types, read from the OpenAPI v3 documents genplane serves.

#![allow(clippy::unwrap_used)]

use genplane_apiserver::openapi::builder::{all_served, documents, type_model};
use genplane_merge::{ListType, MapType, Schema, Type, TypeRef};

fn builtin() -> Schema {
    type_model(&documents(&all_served())).unwrap()
}

fn field<'a>(schema: &'a Schema, ty: &str, name: &str) -> &'a genplane_merge::Field {
    let Some(Type::Struct(s)) = schema.get(ty) else {
        panic!("{ty} is not a struct");
    };
    s.fields.get(name).unwrap_or_else(|| panic!("{ty}.{name}"))
}

const META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

#[test]
fn kinds_resolve_and_metadata_lists_carry_their_semantics() {
    let schema = builtin();
    let TypeRef::Named(name) = schema.kind("", "v1", "ConfigMap").unwrap() else {
        panic!()
    };
    assert_eq!(name, "io.k8s.api.core.v1.ConfigMap");
    assert!(schema.kind("coordination.k8s.io", "v1", "Lease").is_some());
    assert!(schema.kind("", "v1", "Pod").is_none());

    let owners = field(&schema, META, "ownerReferences");
    assert!(owners.merges());
    assert_eq!(owners.patch_merge_key.as_deref(), Some("uid"));
    let Type::List(list) = schema.resolve(&owners.ty) else {
        panic!()
    };
    assert_eq!(list.list_type, ListType::Map(vec!["uid".into()]));

    let finalizers = field(&schema, META, "finalizers");
    let Type::List(list) = schema.resolve(&finalizers.ty) else {
        panic!()
    };
    assert_eq!(list.list_type, ListType::Set);

    let labels = field(&schema, META, "labels");
    let Type::Map(map) = schema.resolve(&labels.ty) else {
        panic!()
    };
    assert_eq!(map.map_type, MapType::Granular);
    assert_eq!(schema.resolve(&map.values), &Type::Scalar);

    // metadata is a reference wrapped in allOf.
    let metadata = field(&schema, "io.k8s.api.core.v1.ConfigMap", "metadata");
    assert_eq!(metadata.ty, TypeRef::Named(META.into()));

    // A struct upstream owns as a whole.
    let Some(Type::Struct(reference)) = schema.get("io.k8s.api.core.v1.ObjectReference") else {
        panic!()
    };
    assert_eq!(reference.map_type, MapType::Atomic);
}
