//! The strategic merge patch corpus: original, patch, and the expected result or error, written
//! from upstream's documented behaviour. Built-in cases use the schema genplane serves;
//! synthetic ones use a small schema made with `Schema::insert` for what the built-in kinds
//! served today do not have (retainKeys, replace strategies, nested merged lists).

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use genplane_apiserver::openapi::builder::{all_served, documents, type_model};
use genplane_merge::strategic::{StrategicError, apply};
use genplane_merge::{Field, ListOf, ListType, MapOf, MapType, Schema, Struct, Type, TypeRef};
use serde_json::{Value, json};

fn builtin() -> Schema {
    type_model(&documents(&all_served())).unwrap()
}

fn named(name: &str) -> TypeRef {
    TypeRef::Named(name.to_owned())
}

fn inline(ty: Type) -> TypeRef {
    TypeRef::Inline(Box::new(ty))
}

fn field(ty: TypeRef, strategy: &[&str], key: Option<&str>) -> Field {
    Field {
        ty,
        patch_strategy: strategy.iter().map(|s| (*s).to_owned()).collect(),
        patch_merge_key: key.map(str::to_owned),
    }
}

fn list(items: TypeRef) -> TypeRef {
    inline(Type::List(ListOf {
        items,
        list_type: ListType::Atomic,
    }))
}

fn strukt(fields: Vec<(&str, Field)>) -> Type {
    Type::Struct(Struct {
        fields: fields
            .into_iter()
            .map(|(n, f)| (n.to_owned(), f))
            .collect::<BTreeMap<_, _>>(),
        ..Struct::default()
    })
}

fn scalar() -> TypeRef {
    inline(Type::Scalar)
}

/// `t.Widget`: one field per behaviour under test.
fn synthetic() -> Schema {
    let mut schema = Schema::default();
    schema.insert(
        "t.Port",
        strukt(vec![
            ("port", field(scalar(), &[], None)),
            ("protocol", field(scalar(), &[], None)),
        ]),
    );
    schema.insert(
        "t.Item",
        strukt(vec![
            ("name", field(scalar(), &[], None)),
            ("v", field(scalar(), &[], None)),
            ("w", field(scalar(), &[], None)),
            (
                "ports",
                field(list(named("t.Port")), &["merge"], Some("port")),
            ),
            ("tags", field(list(scalar()), &["merge"], None)),
        ]),
    );
    schema.insert(
        "t.Strategy",
        strukt(vec![
            ("type", field(scalar(), &[], None)),
            ("rollingUpdate", field(inline(Type::Untyped), &[], None)),
            ("recreate", field(inline(Type::Untyped), &[], None)),
        ]),
    );
    schema.insert(
        "t.Widget",
        strukt(vec![
            ("scalars", field(list(scalar()), &["merge"], None)),
            ("atomic", field(list(scalar()), &[], None)),
            (
                "items",
                field(list(named("t.Item")), &["merge"], Some("name")),
            ),
            ("nomergekey", field(list(named("t.Item")), &["merge"], None)),
            (
                "strategy",
                field(named("t.Strategy"), &["retainKeys"], None),
            ),
            (
                "replaced",
                field(
                    inline(strukt(vec![
                        ("a", field(scalar(), &[], None)),
                        ("b", field(scalar(), &[], None)),
                    ])),
                    &["replace"],
                    None,
                ),
            ),
            (
                "labels",
                field(
                    inline(Type::Map(MapOf {
                        values: scalar(),
                        map_type: MapType::Granular,
                    })),
                    &[],
                    None,
                ),
            ),
            ("extra", field(inline(Type::Untyped), &[], None)),
        ]),
    );
    schema
}

/// What a case expects.
enum Expect {
    /// This result.
    Merged(Value),
    /// An error of this variant (its `Debug` name), whose message contains the text.
    Fails(&'static str, &'static str),
}

use Expect::{Fails, Merged};

struct Case {
    name: &'static str,
    /// The type: a built-in kind's schema name, or `t.Widget`.
    ty: &'static str,
    original: Value,
    patch: Value,
    expect: Expect,
}

fn case(
    name: &'static str,
    ty: &'static str,
    original: Value,
    patch: Value,
    expect: Expect,
) -> Case {
    Case {
        name,
        ty,
        original,
        patch,
        expect,
    }
}

const W: &str = "t.Widget";
const CM: &str = "io.k8s.api.core.v1.ConfigMap";
const SA: &str = "io.k8s.api.core.v1.ServiceAccount";
const NS: &str = "io.k8s.api.core.v1.Namespace";

fn owner(uid: &str, name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "name": name, "uid": uid})
}

fn synthetic_cases() -> Vec<Case> {
    vec![
        // Maps.
        case(
            "add a key",
            W,
            json!({"extra": {"a": 1}}),
            json!({"extra": {"b": 2}}),
            Merged(json!({"extra": {"a": 1, "b": 2}})),
        ),
        case(
            "change a scalar",
            W,
            json!({"extra": {"a": 1}}),
            json!({"extra": {"a": 2}}),
            Merged(json!({"extra": {"a": 2}})),
        ),
        case(
            "null removes a key",
            W,
            json!({"labels": {"a": "1", "b": "2"}}),
            json!({"labels": {"a": null}}),
            Merged(json!({"labels": {"b": "2"}})),
        ),
        case(
            "null for an absent key changes nothing",
            W,
            json!({"labels": {"a": "1"}}),
            json!({"labels": {"z": null}}),
            Merged(json!({"labels": {"a": "1"}})),
        ),
        case(
            "null removes a whole field",
            W,
            json!({"labels": {"a": "1"}, "atomic": ["x"]}),
            json!({"labels": null}),
            Merged(json!({"atomic": ["x"]})),
        ),
        case(
            "nested maps merge",
            W,
            json!({"labels": {"x": "1", "y": "2"}}),
            json!({"labels": {"y": "3", "z": "4"}}),
            Merged(json!({"labels": {"x": "1", "y": "3", "z": "4"}})),
        ),
        case(
            "nulls in a new map are dropped",
            W,
            json!({}),
            json!({"labels": {"a": "1", "b": null}}),
            Merged(json!({"labels": {"a": "1"}})),
        ),
        case(
            "$patch replace in a map",
            W,
            json!({"labels": {"a": "1", "b": "2"}}),
            json!({"labels": {"$patch": "replace", "c": "3"}}),
            Merged(json!({"labels": {"c": "3"}})),
        ),
        case(
            "$patch delete in a map empties it",
            W,
            json!({"labels": {"a": "1"}, "atomic": ["x"]}),
            json!({"labels": {"$patch": "delete"}}),
            Merged(json!({"labels": {}, "atomic": ["x"]})),
        ),
        case(
            "$patch merge in a map is rejected as upstream",
            W,
            json!({"labels": {"a": "1"}}),
            json!({"labels": {"$patch": "merge", "b": "2"}}),
            Fails("BadPatchDirective", "labels.$patch"),
        ),
        case(
            "$patch with an unknown value",
            W,
            json!({"labels": {}}),
            json!({"labels": {"$patch": "bogus"}}),
            Fails("BadPatchDirective", "\"bogus\""),
        ),
        case(
            "$patch that is not a string",
            W,
            json!({}),
            json!({"extra": {"$patch": 1}}),
            Fails("BadPatchDirective", "extra.$patch"),
        ),
        case(
            "a value of another JSON type replaces",
            W,
            json!({"extra": "text"}),
            json!({"extra": {"a": 1}}),
            Merged(json!({"extra": {"a": 1}})),
        ),
        case(
            "a field with the replace strategy is replaced",
            W,
            json!({"replaced": {"a": 1, "b": 2}}),
            json!({"replaced": {"b": 3}}),
            Merged(json!({"replaced": {"b": 3}})),
        ),
        case(
            "unknown fields merge as JSON objects",
            W,
            json!({"unknown": {"a": 1}}),
            json!({"unknown": {"b": 2}}),
            Merged(json!({"unknown": {"a": 1, "b": 2}})),
        ),
        case(
            "unknown lists are replaced",
            W,
            json!({"unknown": [1, 2]}),
            json!({"unknown": [3]}),
            Merged(json!({"unknown": [3]})),
        ),
        case(
            "untyped values merge as JSON",
            W,
            json!({"extra": {"a": {"b": 1, "c": 2}}}),
            json!({"extra": {"a": {"c": null, "d": 3}}}),
            Merged(json!({"extra": {"a": {"b": 1, "d": 3}}})),
        ),
        case(
            "an unknown directive in a struct",
            W,
            json!({}),
            json!({"$bogus": 1}),
            Fails("UnknownDirective", "$bogus"),
        ),
        case(
            "an unknown directive in a map",
            W,
            json!({"labels": {}}),
            json!({"labels": {"$bogus": "x"}}),
            Fails("UnknownDirective", "labels"),
        ),
        case(
            "$-keys in untyped values are data",
            W,
            json!({"extra": {}}),
            json!({"extra": {"$ref": "#/x"}}),
            Merged(json!({"extra": {"$ref": "#/x"}})),
        ),
        case(
            "the patch must be an object",
            W,
            json!({}),
            json!([1]),
            Fails("NotAnObject", "JSON objects"),
        ),
        // Lists without the merge strategy.
        case(
            "an atomic list is replaced",
            W,
            json!({"atomic": ["a", "b"]}),
            json!({"atomic": ["c"]}),
            Merged(json!({"atomic": ["c"]})),
        ),
        case(
            "an atomic list is set",
            W,
            json!({}),
            json!({"atomic": ["c"]}),
            Merged(json!({"atomic": ["c"]})),
        ),
        case(
            "an atomic list is emptied",
            W,
            json!({"atomic": ["a"]}),
            json!({"atomic": []}),
            Merged(json!({"atomic": []})),
        ),
        // Merged lists of scalars.
        case(
            "scalars: a union, new values first",
            W,
            json!({"scalars": ["a", "b"]}),
            json!({"scalars": ["c"]}),
            Merged(json!({"scalars": ["c", "a", "b"]})),
        ),
        case(
            "scalars: no repeats, original order kept",
            W,
            json!({"scalars": ["a", "b"]}),
            json!({"scalars": ["b", "c"]}),
            Merged(json!({"scalars": ["a", "b", "c"]})),
        ),
        case(
            "scalars: numbers",
            W,
            json!({"scalars": [1, 2]}),
            json!({"scalars": [2, 3]}),
            Merged(json!({"scalars": [1, 2, 3]})),
        ),
        case(
            "scalars: an empty patch list changes nothing",
            W,
            json!({"scalars": ["a"]}),
            json!({"scalars": []}),
            Merged(json!({"scalars": ["a"]})),
        ),
        case(
            "$deleteFromPrimitiveList removes values",
            W,
            json!({"scalars": ["a", "b", "c"]}),
            json!({"$deleteFromPrimitiveList/scalars": ["b", "z"]}),
            Merged(json!({"scalars": ["a", "c"]})),
        ),
        case(
            "$deleteFromPrimitiveList with additions",
            W,
            json!({"scalars": ["a", "b"]}),
            json!({"scalars": ["c"], "$deleteFromPrimitiveList/scalars": ["a"]}),
            Merged(json!({"scalars": ["c", "b"]})),
        ),
        case(
            "$deleteFromPrimitiveList of an absent list",
            W,
            json!({}),
            json!({"$deleteFromPrimitiveList/scalars": ["a"]}),
            Merged(json!({})),
        ),
        case(
            "$deleteFromPrimitiveList must be a list",
            W,
            json!({"scalars": ["a"]}),
            json!({"$deleteFromPrimitiveList/scalars": "a"}),
            Fails(
                "BadDeleteFromPrimitiveList",
                "$deleteFromPrimitiveList/scalars",
            ),
        ),
        case(
            "$deleteFromPrimitiveList needs a field",
            W,
            json!({}),
            json!({"$deleteFromPrimitiveList": ["a"]}),
            Fails("BadDeleteFromPrimitiveList", "lacks"),
        ),
        case(
            "$setElementOrder places a new scalar",
            W,
            json!({"scalars": ["a", "b", "c"]}),
            json!({"scalars": ["d"], "$setElementOrder/scalars": ["a", "d", "b", "c"]}),
            Merged(json!({"scalars": ["a", "d", "b", "c"]})),
        ),
        case(
            "$setElementOrder alone reorders",
            W,
            json!({"scalars": ["a", "b", "c"]}),
            json!({"$setElementOrder/scalars": ["c", "b", "a"]}),
            Merged(json!({"scalars": ["c", "b", "a"]})),
        ),
        case(
            "$setElementOrder naming some items",
            W,
            json!({"scalars": ["a", "b", "c"]}),
            json!({"$setElementOrder/scalars": ["c", "a"]}),
            Merged(json!({"scalars": ["b", "c", "a"]})),
        ),
        case(
            "$setElementOrder contradicted by the patch list",
            W,
            json!({"scalars": []}),
            json!({"scalars": ["x", "y"], "$setElementOrder/scalars": ["y", "x"]}),
            Fails("BadSetElementOrder", "does not match"),
        ),
        case(
            "$setElementOrder must be a list",
            W,
            json!({}),
            json!({"$setElementOrder/scalars": {"a": 1}}),
            Fails("BadSetElementOrder", "must be a list"),
        ),
        case(
            "$setElementOrder needs a field",
            W,
            json!({}),
            json!({"$setElementOrder": []}),
            Fails("BadSetElementOrder", "lacks"),
        ),
        case(
            "a merged list of mixed types",
            W,
            json!({"scalars": ["a"]}),
            json!({"scalars": [1]}),
            Fails("MixedList", "scalars"),
        ),
        case(
            "a merged list of lists",
            W,
            json!({"scalars": ["a"]}),
            json!({"scalars": [["b"]]}),
            Fails("ListOfLists", "scalars"),
        ),
        // Merged lists of objects.
        case(
            "items merge by key",
            W,
            json!({"items": [{"name": "a", "v": 1}, {"name": "b", "v": 2}]}),
            json!({"items": [{"name": "b", "v": 3}]}),
            Merged(json!({"items": [{"name": "a", "v": 1}, {"name": "b", "v": 3}]})),
        ),
        case(
            "a new item comes first",
            W,
            json!({"items": [{"name": "a"}, {"name": "b"}]}),
            json!({"items": [{"name": "c", "v": 3}]}),
            Merged(json!({"items": [{"name": "c", "v": 3}, {"name": "a"}, {"name": "b"}]})),
        ),
        case(
            "$patch delete removes an item",
            W,
            json!({"items": [{"name": "a"}, {"name": "b"}]}),
            json!({"items": [{"name": "a", "$patch": "delete"}]}),
            Merged(json!({"items": [{"name": "b"}]})),
        ),
        case(
            "$patch delete removes every item with the key, repeated ones too",
            W,
            json!({"items": [{"name": "a", "v": "1"}, {"name": "b"}, {"name": "a", "v": "2"}]}),
            json!({"items": [{"name": "a", "$patch": "delete"}]}),
            Merged(json!({"items": [{"name": "b"}]})),
        ),
        case(
            "$deleteFromPrimitiveList removes repeated values",
            W,
            json!({"scalars": ["a", "b", "a"]}),
            json!({"$deleteFromPrimitiveList/scalars": ["a"]}),
            Merged(json!({"scalars": ["b"]})),
        ),
        case(
            "$patch delete of an absent item",
            W,
            json!({"items": [{"name": "a"}]}),
            json!({"items": [{"name": "z", "$patch": "delete"}]}),
            Merged(json!({"items": [{"name": "a"}]})),
        ),
        case(
            "$patch delete needs the key",
            W,
            json!({"items": [{"name": "a"}]}),
            json!({"items": [{"$patch": "delete"}]}),
            Fails("MissingMergeKey", "items[0]"),
        ),
        case(
            "$patch replace in a list",
            W,
            json!({"items": [{"name": "a"}, {"name": "b"}]}),
            json!({"items": [{"$patch": "replace"}, {"name": "c", "v": 3}]}),
            Merged(json!({"items": [{"name": "c", "v": 3}]})),
        ),
        case(
            "$patch replace with nothing else empties",
            W,
            json!({"items": [{"name": "a"}]}),
            json!({"items": [{"$patch": "replace"}]}),
            Merged(json!({"items": []})),
        ),
        case(
            "$patch merge in a list is rejected as upstream",
            W,
            json!({"items": [{"name": "a"}]}),
            json!({"items": [{"$patch": "merge"}]}),
            Fails("MergeDirectiveInList", "items"),
        ),
        case(
            "$patch with an unknown value in a list",
            W,
            json!({"items": []}),
            json!({"items": [{"name": "a", "$patch": "drop"}]}),
            Fails("BadPatchDirective", "items[0].$patch"),
        ),
        case(
            "an item without its merge key",
            W,
            json!({"items": [{"name": "a"}]}),
            json!({"items": [{"v": 1}]}),
            Fails("MissingMergeKey", "\"name\""),
        ),
        case(
            "null in a merged item removes the field",
            W,
            json!({"items": [{"name": "a", "v": 1, "w": 2}]}),
            json!({"items": [{"name": "a", "w": null}]}),
            Merged(json!({"items": [{"name": "a", "v": 1}]})),
        ),
        case(
            "nested merged lists",
            W,
            json!({"items": [{"name": "a", "ports": [{"port": 80, "protocol": "TCP"}]}]}),
            json!({"items": [{"name": "a", "ports": [{"port": 443}, {"port": 80, "protocol": "UDP"}]}]}),
            Merged(
                json!({"items": [{"name": "a", "ports": [{"port": 443}, {"port": 80, "protocol": "UDP"}]}]}),
            ),
        ),
        case(
            "nested merged scalars",
            W,
            json!({"items": [{"name": "a", "tags": ["x"]}]}),
            json!({"items": [{"name": "a", "tags": ["y"]}]}),
            Merged(json!({"items": [{"name": "a", "tags": ["y", "x"]}]})),
        ),
        case(
            "nested $deleteFromPrimitiveList",
            W,
            json!({"items": [{"name": "a", "tags": ["x", "y"]}]}),
            json!({"items": [{"name": "a", "$deleteFromPrimitiveList/tags": ["x"]}]}),
            Merged(json!({"items": [{"name": "a", "tags": ["y"]}]})),
        ),
        case(
            "$setElementOrder reorders items",
            W,
            json!({"items": [{"name": "a"}, {"name": "b"}, {"name": "c"}]}),
            json!({"$setElementOrder/items": [{"name": "c"}, {"name": "a"}, {"name": "b"}]}),
            Merged(json!({"items": [{"name": "c"}, {"name": "a"}, {"name": "b"}]})),
        ),
        case(
            "$setElementOrder places a new item",
            W,
            json!({"items": [{"name": "a"}, {"name": "b"}]}),
            json!({"items": [{"name": "x", "v": 9}], "$setElementOrder/items": [{"name": "a"}, {"name": "x"}, {"name": "b"}]}),
            Merged(json!({"items": [{"name": "a"}, {"name": "x", "v": 9}, {"name": "b"}]})),
        ),
        case(
            "$setElementOrder with a deletion",
            W,
            json!({"items": [{"name": "a"}, {"name": "b"}, {"name": "c"}]}),
            json!({"items": [{"name": "b", "$patch": "delete"}], "$setElementOrder/items": [{"name": "a"}, {"name": "c"}]}),
            Merged(json!({"items": [{"name": "a"}, {"name": "c"}]})),
        ),
        case(
            "$setElementOrder of a list the object lacks",
            W,
            json!({}),
            json!({"items": [{"name": "a", "v": 1}, {"name": "b"}], "$setElementOrder/items": [{"name": "a"}, {"name": "c"}, {"name": "b"}]}),
            Merged(json!({"items": [{"name": "a", "v": 1}, {"name": "b"}]})),
        ),
        case(
            "$setElementOrder items need the key",
            W,
            json!({"items": []}),
            json!({"$setElementOrder/items": [{"v": 1}]}),
            Fails("BadSetElementOrder", "merge key"),
        ),
        case(
            "merging objects needs a merge key",
            W,
            json!({"nomergekey": [{"name": "a"}]}),
            json!({"nomergekey": [{"name": "b"}]}),
            Fails("NoMergeKey", "nomergekey"),
        ),
        case(
            "a new merged list drops its directives",
            W,
            json!({}),
            json!({"items": [{"name": "a", "v": 1}, {"name": "z", "$patch": "delete"}]}),
            Merged(json!({"items": [{"name": "a", "v": 1}]})),
        ),
        // $retainKeys.
        case(
            "$retainKeys clears other keys",
            W,
            json!({"strategy": {"type": "Rolling", "rollingUpdate": {"max": 1}}}),
            json!({"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}),
            Merged(json!({"strategy": {"type": "Recreate"}})),
        ),
        case(
            "$retainKeys keeps and merges the named keys",
            W,
            json!({"strategy": {"type": "R", "rollingUpdate": {"max": 1, "surge": 2}, "recreate": {}}}),
            json!({"strategy": {"$retainKeys": ["type", "rollingUpdate"], "rollingUpdate": {"max": 3}}}),
            Merged(json!({"strategy": {"type": "R", "rollingUpdate": {"max": 3, "surge": 2}}})),
        ),
        case(
            "$retainKeys allows nulls of other keys",
            W,
            json!({"strategy": {"type": "R", "recreate": {}}}),
            json!({"strategy": {"$retainKeys": ["type"], "recreate": null, "type": "X"}}),
            Merged(json!({"strategy": {"type": "X"}})),
        ),
        case(
            "$retainKeys must name what the patch sets",
            W,
            json!({"strategy": {}}),
            json!({"strategy": {"$retainKeys": ["type"], "recreate": {}}}),
            Fails("BadRetainKeys", "\"recreate\""),
        ),
        case(
            "$retainKeys must be a list",
            W,
            json!({"strategy": {}}),
            json!({"strategy": {"$retainKeys": "type"}}),
            Fails("BadRetainKeys", "strategy.$retainKeys"),
        ),
        case(
            "$retainKeys on a new value",
            W,
            json!({}),
            json!({"strategy": {"$retainKeys": ["type"], "type": "R"}}),
            Merged(json!({"strategy": {"type": "R"}})),
        ),
    ]
}

fn builtin_cases() -> Vec<Case> {
    let cm = |data: Value, metadata: Value| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": data});
    vec![
        case(
            "configmap: data and labels merge",
            CM,
            cm(
                json!({"a": "1"}),
                json!({"name": "c", "labels": {"x": "1"}}),
            ),
            json!({"data": {"b": "2"}, "metadata": {"labels": {"y": "2"}}}),
            Merged(cm(
                json!({"a": "1", "b": "2"}),
                json!({"name": "c", "labels": {"x": "1", "y": "2"}}),
            )),
        ),
        case(
            "configmap: kubectl apply removes a key",
            CM,
            cm(
                json!({"a": "1", "b": "2"}),
                json!({"name": "c", "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{old}"}}),
            ),
            json!({"data": {"b": null, "c": "3"}, "metadata": {"annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{new}"}}}),
            Merged(cm(
                json!({"a": "1", "c": "3"}),
                json!({"name": "c", "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{new}"}}),
            )),
        ),
        case(
            "configmap: annotation removed",
            CM,
            cm(
                json!({}),
                json!({"name": "c", "annotations": {"a": "1", "b": "2"}}),
            ),
            json!({"metadata": {"annotations": {"a": null}}}),
            Merged(cm(
                json!({}),
                json!({"name": "c", "annotations": {"b": "2"}}),
            )),
        ),
        case(
            "configmap: $patch replace of labels",
            CM,
            cm(json!({}), json!({"name": "c", "labels": {"a": "1"}})),
            json!({"metadata": {"labels": {"$patch": "replace", "b": "2"}}}),
            Merged(cm(json!({}), json!({"name": "c", "labels": {"b": "2"}}))),
        ),
        case(
            "configmap: $-keys in data are no directives",
            CM,
            cm(json!({}), json!({"name": "c"})),
            json!({"data": {"$x": "1"}}),
            Fails("UnknownDirective", "data"),
        ),
        case(
            "configmap: resourceVersion in the patch is kept",
            CM,
            cm(json!({}), json!({"name": "c", "resourceVersion": "5"})),
            json!({"metadata": {"resourceVersion": "4"}}),
            Merged(cm(json!({}), json!({"name": "c", "resourceVersion": "4"}))),
        ),
        case(
            "ownerReferences merge by uid",
            CM,
            cm(
                json!({}),
                json!({"name": "c", "ownerReferences": [owner("u1", "a")]}),
            ),
            json!({"metadata": {"ownerReferences": [owner("u2", "b")]}}),
            Merged(cm(
                json!({}),
                json!({"name": "c", "ownerReferences": [owner("u2", "b"), owner("u1", "a")]}),
            )),
        ),
        case(
            "ownerReferences: same uid merges fields",
            CM,
            cm(
                json!({}),
                json!({"name": "c", "ownerReferences": [owner("u1", "a")]}),
            ),
            json!({"metadata": {"ownerReferences": [{"uid": "u1", "controller": true}]}}),
            Merged(cm(
                json!({}),
                json!({"name": "c", "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "a", "uid": "u1", "controller": true}]}),
            )),
        ),
        case(
            "ownerReferences: $patch delete by uid",
            CM,
            cm(
                json!({}),
                json!({"name": "c", "ownerReferences": [owner("u1", "a"), owner("u2", "b")]}),
            ),
            json!({"metadata": {"ownerReferences": [{"uid": "u1", "$patch": "delete"}]}}),
            Merged(cm(
                json!({}),
                json!({"name": "c", "ownerReferences": [owner("u2", "b")]}),
            )),
        ),
        case(
            "ownerReferences: an item without uid",
            CM,
            cm(
                json!({}),
                json!({"name": "c", "ownerReferences": [owner("u1", "a")]}),
            ),
            json!({"metadata": {"ownerReferences": [{"name": "x"}]}}),
            Fails("MissingMergeKey", "metadata.ownerReferences[0]"),
        ),
        case(
            "finalizers: a union",
            CM,
            cm(json!({}), json!({"name": "c", "finalizers": ["a"]})),
            json!({"metadata": {"finalizers": ["b", "a"]}}),
            Merged(cm(
                json!({}),
                json!({"name": "c", "finalizers": ["b", "a"]}),
            )),
        ),
        case(
            "finalizers: $deleteFromPrimitiveList",
            CM,
            cm(json!({}), json!({"name": "c", "finalizers": ["a", "b"]})),
            json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}}),
            Merged(cm(json!({}), json!({"name": "c", "finalizers": ["b"]}))),
        ),
        case(
            "finalizers: kubectl's ordered addition",
            CM,
            cm(json!({}), json!({"name": "c", "finalizers": ["a"]})),
            json!({"metadata": {"$setElementOrder/finalizers": ["a", "b"], "finalizers": ["b"]}}),
            Merged(cm(
                json!({}),
                json!({"name": "c", "finalizers": ["a", "b"]}),
            )),
        ),
        case(
            "serviceaccount: secrets merge by name",
            SA,
            json!({"metadata": {"name": "s"}, "secrets": [{"name": "s1"}]}),
            json!({"secrets": [{"name": "s2"}]}),
            Merged(json!({"metadata": {"name": "s"}, "secrets": [{"name": "s2"}, {"name": "s1"}]})),
        ),
        case(
            "serviceaccount: a secret deleted",
            SA,
            json!({"metadata": {"name": "s"}, "secrets": [{"name": "s1"}, {"name": "s2"}]}),
            json!({"secrets": [{"name": "s1", "$patch": "delete"}]}),
            Merged(json!({"metadata": {"name": "s"}, "secrets": [{"name": "s2"}]})),
        ),
        case(
            "serviceaccount: imagePullSecrets are replaced",
            SA,
            json!({"metadata": {"name": "s"}, "imagePullSecrets": [{"name": "p1"}]}),
            json!({"imagePullSecrets": [{"name": "p2"}]}),
            Merged(json!({"metadata": {"name": "s"}, "imagePullSecrets": [{"name": "p2"}]})),
        ),
        case(
            "serviceaccount: automount flag",
            SA,
            json!({"metadata": {"name": "s"}, "automountServiceAccountToken": true}),
            json!({"automountServiceAccountToken": false}),
            Merged(json!({"metadata": {"name": "s"}, "automountServiceAccountToken": false})),
        ),
        case(
            "namespace: status conditions merge by type",
            NS,
            json!({"metadata": {"name": "n"}, "status": {"conditions": [{"type": "A", "status": "True"}]}}),
            json!({"status": {"conditions": [{"type": "A", "status": "False"}, {"type": "B", "status": "True"}]}}),
            Merged(
                json!({"metadata": {"name": "n"}, "status": {"conditions": [{"type": "A", "status": "False"}, {"type": "B", "status": "True"}]}}),
            ),
        ),
        case(
            "namespace: spec finalizers are replaced",
            NS,
            json!({"metadata": {"name": "n"}, "spec": {"finalizers": ["kubernetes"]}}),
            json!({"spec": {"finalizers": ["other"]}}),
            Merged(json!({"metadata": {"name": "n"}, "spec": {"finalizers": ["other"]}})),
        ),
    ]
}

fn run(schema: &Schema, cases: Vec<Case>) -> usize {
    let mut failures = Vec::new();
    let count = cases.len();
    for c in cases {
        let got = apply(&c.original, &c.patch, schema, &named(c.ty));
        let ok = match (&c.expect, &got) {
            (Merged(want), Ok(got)) => want == got,
            (Fails(variant, text), Err(e)) => {
                format!("{e:?}").starts_with(variant) && e.to_string().contains(text)
            }
            _ => false,
        };
        if !ok {
            let want = match &c.expect {
                Merged(v) => v.to_string(),
                Fails(variant, text) => format!("{variant} containing {text:?}"),
            };
            let got = match got {
                Ok(v) => v.to_string(),
                Err(e) => format!("{e:?}: {e}"),
            };
            failures.push(format!("{}:\n  want {want}\n  got  {got}", c.name));
        }
    }
    assert!(
        failures.is_empty(),
        "{} failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    count
}

#[test]
fn corpus() {
    let synthetic = run(&synthetic(), synthetic_cases());
    let builtin = run(&builtin(), builtin_cases());
    assert!(synthetic + builtin >= 80, "{synthetic} + {builtin} cases");
}

#[test]
fn the_original_is_untouched_and_errors_are_classified() {
    let schema = synthetic();
    let original = json!({"labels": {"a": "1"}});
    let merged = apply(
        &original,
        &json!({"labels": {"a": null}}),
        &schema,
        &named(W),
    )
    .unwrap();
    assert_eq!(merged, json!({"labels": {}}));
    assert_eq!(original, json!({"labels": {"a": "1"}}));
    let error = apply(
        &json!({"scalars": []}),
        &json!({"scalars": [[1]]}),
        &schema,
        &named(W),
    )
    .unwrap_err();
    assert!(error.is_unprocessable());
    assert!(!StrategicError::NotAnObject.is_unprocessable());
}
