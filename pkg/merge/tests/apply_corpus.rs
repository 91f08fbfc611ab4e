//! A table of server-side apply and update-tracking cases over a test kind that has every
//! ownership shape (set list, map list with one and two keys, atomic list, granular and
//! atomic maps, nested and atomic structs, untyped values), plus built-in ConfigMaps.
//!
//! Each case runs writes in order against one object and checks the final object, its managed
//! fields, or the conflicts of the last write. The expectations follow the documented upstream
//! behaviour of server-side apply.

#![allow(clippy::unwrap_used, clippy::too_many_lines)]

use genplane_apiserver::openapi::builder::{all_served, documents, type_model};
use genplane_merge::managed::{self, ApplyError, Writer};
use genplane_merge::{Schema, TypeRef};
use serde_json::{Value, json};

fn test_schema() -> Schema {
    let doc = json!({"components": {"schemas": {
        "test.Meta": {"type": "object", "properties": {
            "name": {"type": "string"}, "namespace": {"type": "string"},
            "uid": {"type": "string"}, "resourceVersion": {"type": "string"},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
            "finalizers": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
            "managedFields": {"type": "array", "items": {"type": "object"}}
        }},
        "test.Widget": {
            "type": "object",
            "x-kubernetes-group-version-kind": [{"group": "example.com", "version": "v1", "kind": "Widget"}],
            "properties": {
                "apiVersion": {"type": "string"}, "kind": {"type": "string"},
                "metadata": {"$ref": "#/components/schemas/test.Meta"},
                "spec": {"$ref": "#/components/schemas/test.Spec"}
            }
        },
        "test.Spec": {"type": "object", "properties": {
            "replicas": {"type": "integer"},
            "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
            "args": {"type": "array", "items": {"type": "string"}},
            "ports": {"type": "array", "items": {"$ref": "#/components/schemas/test.Port"},
                "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["port", "protocol"]},
            "containers": {"type": "array", "items": {"$ref": "#/components/schemas/test.Container"},
                "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "selector": {"type": "object", "additionalProperties": {"type": "string"}, "x-kubernetes-map-type": "atomic"},
            "nested": {"type": "object", "properties": {
                "a": {"type": "string"},
                "b": {"type": "object", "properties": {"c": {"type": "string"}, "d": {"type": "integer"}}}
            }},
            "atomicStruct": {"type": "object", "x-kubernetes-map-type": "atomic", "properties": {
                "x": {"type": "string"}, "y": {"type": "string"}
            }},
            "config": {"x-kubernetes-preserve-unknown-fields": true}
        }},
        "test.Port": {"type": "object", "properties": {
            "port": {"type": "integer"}, "protocol": {"type": "string"}, "name": {"type": "string"}
        }},
        "test.Container": {"type": "object", "properties": {
            "name": {"type": "string"}, "image": {"type": "string"},
            "command": {"type": "array", "items": {"type": "string"}},
            "env": {"type": "array", "items": {"$ref": "#/components/schemas/test.Env"},
                "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]}
        }},
        "test.Env": {"type": "object", "properties": {"name": {"type": "string"}, "value": {"type": "string"}}}
    }}});
    Schema::from_openapi_v3(&doc).unwrap()
}

fn builtin_schema() -> Schema {
    type_model(&documents(&all_served())).unwrap()
}

const TIME: &str = "2026-01-01T00:00:00Z";

/// The last-applied-configuration client-side `kubectl apply` of `data: {key: a}` leaves.
const LAST_A: &str = "{\"apiVersion\":\"v1\",\"data\":{\"key\":\"a\"},\"kind\":\"ConfigMap\",\"metadata\":{\"annotations\":{},\"name\":\"c\",\"namespace\":\"default\"}}\n";

#[derive(Clone, Copy)]
enum Op {
    Apply,
    Force,
    Update,
    /// The object as stored, without managed fields.
    Unmanaged,
}

struct Step {
    manager: &'static str,
    op: Op,
    object: Value,
}

enum Expect {
    /// The final object (without managedFields) and its managers as (manager, operation,
    /// FieldsV1).
    Ok(Value, Vec<(&'static str, &'static str, Value)>),
    /// The last step fails with these conflict causes (`conflict with ...: <path>`).
    Conflicts(Vec<&'static str>),
    /// The last step is refused with this message.
    BadRequest(&'static str),
}

struct Case {
    name: &'static str,
    builtin: bool,
    steps: Vec<Step>,
    expect: Expect,
}

fn apply(manager: &'static str, object: Value) -> Step {
    Step {
        manager,
        op: Op::Apply,
        object,
    }
}
fn force(manager: &'static str, object: Value) -> Step {
    Step {
        manager,
        op: Op::Force,
        object,
    }
}
fn update(manager: &'static str, object: Value) -> Step {
    Step {
        manager,
        op: Op::Update,
        object,
    }
}

/// A Widget with this spec.
fn w(spec: Value) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": spec})
}
/// A Widget with these extra metadata fields and this spec.
fn wm(meta: Value, spec: Value) -> Value {
    let mut object = w(spec);
    for (k, v) in meta.as_object().unwrap() {
        object["metadata"][k] = v.clone();
    }
    object
}
/// A ConfigMap.
fn cm(meta: Value, data: Value) -> Value {
    let mut object = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"}});
    for (k, v) in meta.as_object().unwrap() {
        object["metadata"][k] = v.clone();
    }
    if !data.is_null() {
        object["data"] = data;
    }
    object
}
/// The FieldsV1 of `.spec` only.
fn spec(fields: Value) -> Value {
    json!({"f:spec": fields})
}

fn ok(object: Value, managers: Vec<(&'static str, &'static str, Value)>) -> Expect {
    Expect::Ok(object, managers)
}

fn cases() -> Vec<Case> {
    let case = |name, steps, expect| Case {
        name,
        builtin: false,
        steps,
        expect,
    };
    vec![
        // --- creation and re-application
        case(
            "apply creates",
            vec![apply("a", w(json!({"replicas": 1})))],
            ok(
                w(json!({"replicas": 1})),
                vec![("a", "Apply", spec(json!({"f:replicas": {}})))],
            ),
        ),
        case(
            "apply owns labels key by key",
            vec![apply("a", wm(json!({"labels": {"x": "1"}}), json!({})))],
            ok(
                wm(json!({"labels": {"x": "1"}}), json!({})),
                vec![(
                    "a",
                    "Apply",
                    json!({"f:metadata": {"f:labels": {"f:x": {}}}, "f:spec": {}}),
                )],
            ),
        ),
        case(
            "re-applying the same configuration changes nothing",
            vec![
                apply("a", w(json!({"replicas": 1}))),
                apply("a", w(json!({"replicas": 1}))),
            ],
            ok(
                w(json!({"replicas": 1})),
                vec![("a", "Apply", spec(json!({"f:replicas": {}})))],
            ),
        ),
        case(
            "apply changes its own field",
            vec![
                apply("a", w(json!({"replicas": 1}))),
                apply("a", w(json!({"replicas": 5}))),
            ],
            ok(
                w(json!({"replicas": 5})),
                vec![("a", "Apply", spec(json!({"f:replicas": {}})))],
            ),
        ),
        case(
            "applying a smaller configuration removes the field",
            vec![
                apply("a", w(json!({"replicas": 1, "nested": {"a": "x"}}))),
                apply("a", w(json!({"replicas": 1}))),
            ],
            ok(
                w(json!({"replicas": 1})),
                vec![("a", "Apply", spec(json!({"f:replicas": {}})))],
            ),
        ),
        case(
            "a removed field owned by another applier stays",
            vec![
                apply("a", w(json!({"replicas": 1}))),
                apply("b", w(json!({"replicas": 1}))),
                apply("a", w(json!({"tags": ["t"]}))),
            ],
            ok(
                w(json!({"replicas": 1, "tags": ["t"]})),
                vec![
                    ("a", "Apply", spec(json!({"f:tags": {"v:\"t\"": {}}}))),
                    ("b", "Apply", spec(json!({"f:replicas": {}}))),
                ],
            ),
        ),
        case(
            "a field every applier dropped goes",
            vec![
                apply("a", w(json!({"replicas": 1}))),
                apply("b", w(json!({"replicas": 1}))),
                apply("a", w(json!({"tags": ["t"]}))),
                apply("b", w(json!({"tags": ["t"]}))),
            ],
            ok(
                w(json!({"tags": ["t"]})),
                vec![
                    ("a", "Apply", spec(json!({"f:tags": {"v:\"t\"": {}}}))),
                    ("b", "Apply", spec(json!({"f:tags": {"v:\"t\"": {}}}))),
                ],
            ),
        ),
        case(
            "removing a whole nested struct",
            vec![
                apply("a", w(json!({"replicas": 1, "nested": {"b": {"c": "y"}}}))),
                apply("a", w(json!({"replicas": 1}))),
            ],
            ok(
                w(json!({"replicas": 1})),
                vec![("a", "Apply", spec(json!({"f:replicas": {}})))],
            ),
        ),
        case(
            "removing a deep leaf keeps its siblings",
            vec![
                apply("a", w(json!({"nested": {"b": {"c": "y", "d": 1}}}))),
                apply("a", w(json!({"nested": {"b": {"c": "y"}}}))),
            ],
            ok(
                w(json!({"nested": {"b": {"c": "y"}}})),
                vec![(
                    "a",
                    "Apply",
                    spec(json!({"f:nested": {"f:b": {"f:c": {}}}})),
                )],
            ),
        ),
        case(
            "a field set by an updater is not removed by an applier that never applied it",
            vec![
                update("u", w(json!({"replicas": 3}))),
                apply("a", w(json!({"tags": ["t"]}))),
                apply("a", w(json!({"tags": ["t2"]}))),
            ],
            ok(
                w(json!({"replicas": 3, "tags": ["t2"]})),
                vec![
                    ("a", "Apply", spec(json!({"f:tags": {"v:\"t2\"": {}}}))),
                    ("u", "Update", spec(json!({"f:replicas": {}}))),
                ],
            ),
        ),
        // --- conflicts and force
        case(
            "another applier's value is a conflict",
            vec![
                apply("a", w(json!({"replicas": 1}))),
                apply("b", w(json!({"replicas": 2}))),
            ],
            Expect::Conflicts(vec!["conflict with \"a\": .spec.replicas"]),
        ),
        case(
            "force takes the field over",
            vec![
                apply("a", w(json!({"replicas": 1}))),
                force("b", w(json!({"replicas": 2}))),
            ],
            ok(
                w(json!({"replicas": 2})),
                vec![("b", "Apply", spec(json!({"f:replicas": {}})))],
            ),
        ),
        case(
            "force takes only the conflicting field",
            vec![
                apply("a", w(json!({"replicas": 1, "tags": ["t"]}))),
                force("b", w(json!({"replicas": 2}))),
            ],
            ok(
                w(json!({"replicas": 2, "tags": ["t"]})),
                vec![
                    ("a", "Apply", spec(json!({"f:tags": {"v:\"t\"": {}}}))),
                    ("b", "Apply", spec(json!({"f:replicas": {}}))),
                ],
            ),
        ),
        case(
            "an updater's value is a conflict naming its API version",
            vec![
                update("u", w(json!({"replicas": 3}))),
                apply("a", w(json!({"replicas": 1}))),
            ],
            Expect::Conflicts(vec![
                "conflict with \"u\" using example.com/v1: .spec.replicas",
            ]),
        ),
        case(
            "the same value as an updater is shared",
            vec![
                update("u", w(json!({"replicas": 3}))),
                apply("a", w(json!({"replicas": 3}))),
            ],
            ok(
                w(json!({"replicas": 3})),
                vec![
                    ("a", "Apply", spec(json!({"f:replicas": {}}))),
                    ("u", "Update", spec(json!({"f:replicas": {}}))),
                ],
            ),
        ),
        case(
            "the same value as another applier is shared",
            vec![
                apply("a", w(json!({"replicas": 1}))),
                apply("b", w(json!({"replicas": 1}))),
            ],
            ok(
                w(json!({"replicas": 1})),
                vec![
                    ("a", "Apply", spec(json!({"f:replicas": {}}))),
                    ("b", "Apply", spec(json!({"f:replicas": {}}))),
                ],
            ),
        ),
        case(
            "changing a shared value conflicts with the other owner",
            vec![
                apply("a", w(json!({"replicas": 1}))),
                apply("b", w(json!({"replicas": 1}))),
                apply("a", w(json!({"replicas": 2}))),
            ],
            Expect::Conflicts(vec!["conflict with \"b\": .spec.replicas"]),
        ),
        case(
            "forcing a shared value leaves the other owner without it",
            vec![
                apply("a", w(json!({"replicas": 1, "tags": ["t"]}))),
                apply("b", w(json!({"replicas": 1}))),
                force("a", w(json!({"replicas": 2, "tags": ["t"]}))),
            ],
            ok(
                w(json!({"replicas": 2, "tags": ["t"]})),
                vec![(
                    "a",
                    "Apply",
                    spec(json!({"f:replicas": {}, "f:tags": {"v:\"t\"": {}}})),
                )],
            ),
        ),
        case(
            "conflicts are listed per field and manager",
            vec![
                apply(
                    "a",
                    wm(json!({"labels": {"k": "1"}}), json!({"replicas": 1})),
                ),
                update(
                    "u",
                    wm(
                        json!({"labels": {"k": "1"}}),
                        json!({"replicas": 1, "nested": {"a": "u"}}),
                    ),
                ),
                apply(
                    "b",
                    wm(
                        json!({"labels": {"k": "2"}}),
                        json!({"replicas": 2, "nested": {"a": "b"}}),
                    ),
                ),
            ],
            Expect::Conflicts(vec![
                "conflict with \"a\": .metadata.labels.k",
                "conflict with \"a\": .spec.replicas",
                "conflict with \"u\" using example.com/v1: .spec.nested.a",
            ]),
        ),
        case(
            "an updater takes a field from an applier",
            vec![
                apply("a", w(json!({"replicas": 1, "tags": ["t"]}))),
                update("u", w(json!({"replicas": 2, "tags": ["t"]}))),
            ],
            ok(
                w(json!({"replicas": 2, "tags": ["t"]})),
                vec![
                    ("a", "Apply", spec(json!({"f:tags": {"v:\"t\"": {}}}))),
                    ("u", "Update", spec(json!({"f:replicas": {}}))),
                ],
            ),
        ),
        case(
            "after an updater took a field, the applier conflicts",
            vec![
                apply("a", w(json!({"replicas": 1}))),
                update("u", w(json!({"replicas": 2}))),
                apply("a", w(json!({"replicas": 1}))),
            ],
            Expect::Conflicts(vec![
                "conflict with \"u\" using example.com/v1: .spec.replicas",
            ]),
        ),
        case(
            "an update removing a field removes it from every owner",
            vec![
                apply("a", wm(json!({"labels": {"x": "1", "y": "2"}}), json!({}))),
                update("u", wm(json!({"labels": {"x": "1"}}), json!({}))),
            ],
            ok(
                wm(json!({"labels": {"x": "1"}}), json!({})),
                vec![(
                    "a",
                    "Apply",
                    json!({"f:metadata": {"f:labels": {"f:x": {}}}, "f:spec": {}}),
                )],
            ),
        ),
        // --- set lists
        case(
            "set lists merge by value",
            vec![
                apply("a", w(json!({"tags": ["x", "y"]}))),
                apply("b", w(json!({"tags": ["z"]}))),
            ],
            ok(
                w(json!({"tags": ["x", "y", "z"]})),
                vec![
                    (
                        "a",
                        "Apply",
                        spec(json!({"f:tags": {"v:\"x\"": {}, "v:\"y\"": {}}})),
                    ),
                    ("b", "Apply", spec(json!({"f:tags": {"v:\"z\"": {}}}))),
                ],
            ),
        ),
        case(
            "a set item no longer applied goes",
            vec![
                apply("a", w(json!({"tags": ["x", "y"]}))),
                apply("a", w(json!({"tags": ["x"]}))),
            ],
            ok(
                w(json!({"tags": ["x"]})),
                vec![("a", "Apply", spec(json!({"f:tags": {"v:\"x\"": {}}})))],
            ),
        ),
        case(
            "a set item another applier holds stays",
            vec![
                apply("a", w(json!({"tags": ["x", "y"]}))),
                apply("b", w(json!({"tags": ["y"]}))),
                apply("a", w(json!({"tags": ["x"]}))),
            ],
            ok(
                w(json!({"tags": ["x", "y"]})),
                vec![
                    ("a", "Apply", spec(json!({"f:tags": {"v:\"x\"": {}}}))),
                    ("b", "Apply", spec(json!({"f:tags": {"v:\"y\"": {}}}))),
                ],
            ),
        ),
        case(
            "new set items come where the configuration puts them",
            vec![
                apply("a", w(json!({"tags": ["x", "y"]}))),
                apply("b", w(json!({"tags": ["z", "x"]}))),
            ],
            ok(
                w(json!({"tags": ["z", "x", "y"]})),
                vec![
                    (
                        "a",
                        "Apply",
                        spec(json!({"f:tags": {"v:\"x\"": {}, "v:\"y\"": {}}})),
                    ),
                    (
                        "b",
                        "Apply",
                        spec(json!({"f:tags": {"v:\"x\"": {}, "v:\"z\"": {}}})),
                    ),
                ],
            ),
        ),
        case(
            "an applier reorders its set",
            vec![
                apply("a", w(json!({"tags": ["x", "y"]}))),
                apply("a", w(json!({"tags": ["y", "x"]}))),
            ],
            ok(
                w(json!({"tags": ["y", "x"]})),
                vec![(
                    "a",
                    "Apply",
                    spec(json!({"f:tags": {"v:\"x\"": {}, "v:\"y\"": {}}})),
                )],
            ),
        ),
        case(
            "set items are never conflicts",
            vec![
                apply("a", w(json!({"tags": ["x"]}))),
                apply("b", w(json!({"tags": ["x"]}))),
                apply("b", w(json!({"tags": ["w"]}))),
            ],
            ok(
                w(json!({"tags": ["x", "w"]})),
                vec![
                    ("a", "Apply", spec(json!({"f:tags": {"v:\"x\"": {}}}))),
                    ("b", "Apply", spec(json!({"f:tags": {"v:\"w\"": {}}}))),
                ],
            ),
        ),
        case(
            "finalizers are a set",
            vec![
                apply("a", wm(json!({"finalizers": ["f1"]}), json!({}))),
                apply("b", wm(json!({"finalizers": ["f2"]}), json!({}))),
            ],
            ok(
                wm(json!({"finalizers": ["f1", "f2"]}), json!({})),
                vec![
                    (
                        "a",
                        "Apply",
                        json!({"f:metadata": {"f:finalizers": {"v:\"f1\"": {}}}, "f:spec": {}}),
                    ),
                    (
                        "b",
                        "Apply",
                        json!({"f:metadata": {"f:finalizers": {"v:\"f2\"": {}}}, "f:spec": {}}),
                    ),
                ],
            ),
        ),
        // --- atomic lists
        case(
            "an atomic list is one value",
            vec![
                apply("a", w(json!({"args": ["1", "2"]}))),
                apply("b", w(json!({"args": ["3"]}))),
            ],
            Expect::Conflicts(vec!["conflict with \"a\": .spec.args"]),
        ),
        case(
            "a forced atomic list is replaced",
            vec![
                apply("a", w(json!({"args": ["1", "2"]}))),
                force("b", w(json!({"args": ["3"]}))),
            ],
            ok(
                w(json!({"args": ["3"]})),
                vec![("b", "Apply", spec(json!({"f:args": {}})))],
            ),
        ),
        case(
            "an equal atomic list is shared",
            vec![
                apply("a", w(json!({"args": ["x"]}))),
                apply("b", w(json!({"args": ["x"]}))),
            ],
            ok(
                w(json!({"args": ["x"]})),
                vec![
                    ("a", "Apply", spec(json!({"f:args": {}}))),
                    ("b", "Apply", spec(json!({"f:args": {}}))),
                ],
            ),
        ),
        case(
            "an applier replaces its own atomic list",
            vec![
                apply("a", w(json!({"args": ["1", "2"]}))),
                apply("a", w(json!({"args": ["2"]}))),
            ],
            ok(
                w(json!({"args": ["2"]})),
                vec![("a", "Apply", spec(json!({"f:args": {}})))],
            ),
        ),
        case(
            "an atomic list no longer applied goes",
            vec![
                apply("a", w(json!({"args": ["1"], "replicas": 1}))),
                apply("a", w(json!({"replicas": 1}))),
            ],
            ok(
                w(json!({"replicas": 1})),
                vec![("a", "Apply", spec(json!({"f:replicas": {}})))],
            ),
        ),
        // --- map lists
        case(
            "map lists merge by key",
            vec![
                apply(
                    "a",
                    w(json!({"containers": [{"name": "c1", "image": "i1"}]})),
                ),
                apply(
                    "b",
                    w(json!({"containers": [{"name": "c2", "image": "i2"}]})),
                ),
            ],
            ok(
                w(
                    json!({"containers": [{"name": "c1", "image": "i1"}, {"name": "c2", "image": "i2"}]}),
                ),
                vec![
                    (
                        "a",
                        "Apply",
                        spec(
                            json!({"f:containers": {"k:{\"name\":\"c1\"}": {".": {}, "f:image": {}, "f:name": {}}}}),
                        ),
                    ),
                    (
                        "b",
                        "Apply",
                        spec(
                            json!({"f:containers": {"k:{\"name\":\"c2\"}": {".": {}, "f:image": {}, "f:name": {}}}}),
                        ),
                    ),
                ],
            ),
        ),
        case(
            "a field of a shared item conflicts",
            vec![
                apply(
                    "a",
                    w(json!({"containers": [{"name": "c1", "image": "i1"}]})),
                ),
                apply(
                    "b",
                    w(json!({"containers": [{"name": "c1", "image": "i2"}]})),
                ),
            ],
            Expect::Conflicts(vec![
                "conflict with \"a\": .spec.containers[name=\"c1\"].image",
            ]),
        ),
        case(
            "different fields of one item merge",
            vec![
                apply(
                    "a",
                    w(json!({"containers": [{"name": "c1", "image": "i1"}]})),
                ),
                apply(
                    "b",
                    w(
                        json!({"containers": [{"name": "c1", "env": [{"name": "E", "value": "v"}]}]}),
                    ),
                ),
            ],
            ok(
                w(
                    json!({"containers": [{"name": "c1", "image": "i1", "env": [{"name": "E", "value": "v"}]}]}),
                ),
                vec![
                    (
                        "a",
                        "Apply",
                        spec(
                            json!({"f:containers": {"k:{\"name\":\"c1\"}": {".": {}, "f:image": {}, "f:name": {}}}}),
                        ),
                    ),
                    (
                        "b",
                        "Apply",
                        spec(
                            json!({"f:containers": {"k:{\"name\":\"c1\"}": {".": {}, "f:name": {},
                    "f:env": {"k:{\"name\":\"E\"}": {".": {}, "f:name": {}, "f:value": {}}}}}}),
                        ),
                    ),
                ],
            ),
        ),
        case(
            "a map list item no longer applied goes",
            vec![
                apply(
                    "a",
                    w(json!({"containers": [{"name": "c1"}, {"name": "c2"}]})),
                ),
                apply("a", w(json!({"containers": [{"name": "c1"}]}))),
            ],
            ok(
                w(json!({"containers": [{"name": "c1"}]})),
                vec![(
                    "a",
                    "Apply",
                    spec(json!({"f:containers": {"k:{\"name\":\"c1\"}": {".": {}, "f:name": {}}}})),
                )],
            ),
        ),
        case(
            "a map list item another applier holds stays",
            vec![
                apply(
                    "a",
                    w(json!({"containers": [{"name": "c1"}, {"name": "c2"}]})),
                ),
                apply("b", w(json!({"containers": [{"name": "c2"}]}))),
                apply("a", w(json!({"containers": [{"name": "c1"}]}))),
            ],
            ok(
                w(json!({"containers": [{"name": "c1"}, {"name": "c2"}]})),
                vec![
                    (
                        "a",
                        "Apply",
                        spec(
                            json!({"f:containers": {"k:{\"name\":\"c1\"}": {".": {}, "f:name": {}}}}),
                        ),
                    ),
                    (
                        "b",
                        "Apply",
                        spec(
                            json!({"f:containers": {"k:{\"name\":\"c2\"}": {".": {}, "f:name": {}}}}),
                        ),
                    ),
                ],
            ),
        ),
        case(
            "an item's field no longer applied goes, the item stays",
            vec![
                apply(
                    "a",
                    w(json!({"containers": [{"name": "c1", "image": "i"}]})),
                ),
                apply("a", w(json!({"containers": [{"name": "c1"}]}))),
            ],
            ok(
                w(json!({"containers": [{"name": "c1"}]})),
                vec![(
                    "a",
                    "Apply",
                    spec(json!({"f:containers": {"k:{\"name\":\"c1\"}": {".": {}, "f:name": {}}}})),
                )],
            ),
        ),
        case(
            "map lists with two keys",
            vec![
                apply("a", w(json!({"ports": [{"port": 80, "protocol": "TCP"}]}))),
                apply(
                    "b",
                    w(json!({"ports": [{"port": 80, "protocol": "UDP", "name": "dns"}]})),
                ),
            ],
            ok(
                w(
                    json!({"ports": [{"port": 80, "protocol": "TCP"}, {"port": 80, "protocol": "UDP", "name": "dns"}]}),
                ),
                vec![
                    (
                        "a",
                        "Apply",
                        spec(
                            json!({"f:ports": {"k:{\"port\":80,\"protocol\":\"TCP\"}": {".": {}, "f:port": {}, "f:protocol": {}}}}),
                        ),
                    ),
                    (
                        "b",
                        "Apply",
                        spec(
                            json!({"f:ports": {"k:{\"port\":80,\"protocol\":\"UDP\"}": {".": {}, "f:name": {}, "f:port": {}, "f:protocol": {}}}}),
                        ),
                    ),
                ],
            ),
        ),
        case(
            "a two-key item's field conflicts by its full key",
            vec![
                apply(
                    "a",
                    w(json!({"ports": [{"port": 80, "protocol": "TCP", "name": "a"}]})),
                ),
                apply(
                    "b",
                    w(json!({"ports": [{"port": 80, "protocol": "TCP", "name": "b"}]})),
                ),
            ],
            Expect::Conflicts(vec![
                "conflict with \"a\": .spec.ports[port=80,protocol=\"TCP\"].name",
            ]),
        ),
        case(
            "nested map lists merge",
            vec![
                apply(
                    "a",
                    w(
                        json!({"containers": [{"name": "c", "env": [{"name": "E1", "value": "1"}]}]}),
                    ),
                ),
                apply(
                    "b",
                    w(
                        json!({"containers": [{"name": "c", "env": [{"name": "E2", "value": "2"}]}]}),
                    ),
                ),
            ],
            ok(
                w(
                    json!({"containers": [{"name": "c", "env": [{"name": "E1", "value": "1"}, {"name": "E2", "value": "2"}]}]}),
                ),
                vec![
                    (
                        "a",
                        "Apply",
                        spec(
                            json!({"f:containers": {"k:{\"name\":\"c\"}": {".": {}, "f:name": {}, "f:env": {"k:{\"name\":\"E1\"}": {".": {}, "f:name": {}, "f:value": {}}}}}}),
                        ),
                    ),
                    (
                        "b",
                        "Apply",
                        spec(
                            json!({"f:containers": {"k:{\"name\":\"c\"}": {".": {}, "f:name": {}, "f:env": {"k:{\"name\":\"E2\"}": {".": {}, "f:name": {}, "f:value": {}}}}}}),
                        ),
                    ),
                ],
            ),
        ),
        case(
            "an updater's item survives the applier emptying the list",
            vec![
                apply("a", w(json!({"containers": [{"name": "c1"}]}))),
                update(
                    "u",
                    w(json!({"containers": [{"name": "c1"}, {"name": "c2"}]})),
                ),
                apply("a", w(json!({"containers": []}))),
            ],
            ok(
                w(json!({"containers": [{"name": "c2"}]})),
                vec![(
                    "u",
                    "Update",
                    spec(json!({"f:containers": {"k:{\"name\":\"c2\"}": {".": {}, "f:name": {}}}})),
                )],
            ),
        ),
        case(
            "an item an updater created is shared by an equal apply",
            vec![
                update(
                    "u",
                    w(json!({"containers": [{"name": "c1", "image": "i1"}]})),
                ),
                apply(
                    "a",
                    w(json!({"containers": [{"name": "c1", "image": "i1"}]})),
                ),
            ],
            ok(
                w(json!({"containers": [{"name": "c1", "image": "i1"}]})),
                vec![
                    (
                        "a",
                        "Apply",
                        spec(
                            json!({"f:containers": {"k:{\"name\":\"c1\"}": {".": {}, "f:image": {}, "f:name": {}}}}),
                        ),
                    ),
                    (
                        "u",
                        "Update",
                        spec(
                            json!({"f:containers": {".": {}, "k:{\"name\":\"c1\"}": {".": {}, "f:image": {}, "f:name": {}}}}),
                        ),
                    ),
                ],
            ),
        ),
        case(
            "changing an updater's item field conflicts",
            vec![
                update(
                    "u",
                    w(json!({"containers": [{"name": "c1", "image": "i1"}]})),
                ),
                apply(
                    "a",
                    w(json!({"containers": [{"name": "c1", "image": "i2"}]})),
                ),
            ],
            Expect::Conflicts(vec![
                "conflict with \"u\" using example.com/v1: .spec.containers[name=\"c1\"].image",
            ]),
        ),
        case(
            "an item's field only the remover owned goes, another owner's fields stay",
            vec![
                apply("a", w(json!({"containers": [{"name": "c", "image": "i"}]}))),
                apply(
                    "b",
                    w(json!({"containers": [{"name": "c", "command": ["run"]}]})),
                ),
                apply("a", w(json!({"tags": ["t"]}))),
            ],
            ok(
                w(json!({"containers": [{"name": "c", "command": ["run"]}], "tags": ["t"]})),
                vec![
                    ("a", "Apply", spec(json!({"f:tags": {"v:\"t\"": {}}}))),
                    (
                        "b",
                        "Apply",
                        spec(
                            json!({"f:containers": {"k:{\"name\":\"c\"}": {".": {}, "f:command": {}, "f:name": {}}}}),
                        ),
                    ),
                ],
            ),
        ),
        case(
            "an atomic list inside an item conflicts as one value",
            vec![
                apply(
                    "a",
                    w(json!({"containers": [{"name": "c", "command": ["a"]}]})),
                ),
                apply(
                    "b",
                    w(json!({"containers": [{"name": "c", "command": ["b"]}]})),
                ),
            ],
            Expect::Conflicts(vec![
                "conflict with \"a\": .spec.containers[name=\"c\"].command",
            ]),
        ),
        case(
            "forcing one field of an item leaves the other fields to their owner",
            vec![
                apply(
                    "a",
                    w(json!({"containers": [{"name": "c", "image": "i", "command": ["a"]}]})),
                ),
                force("b", w(json!({"containers": [{"name": "c", "image": "j"}]}))),
            ],
            ok(
                w(json!({"containers": [{"name": "c", "image": "j", "command": ["a"]}]})),
                vec![
                    (
                        "a",
                        "Apply",
                        spec(
                            json!({"f:containers": {"k:{\"name\":\"c\"}": {".": {}, "f:command": {}, "f:name": {}}}}),
                        ),
                    ),
                    (
                        "b",
                        "Apply",
                        spec(
                            json!({"f:containers": {"k:{\"name\":\"c\"}": {".": {}, "f:image": {}, "f:name": {}}}}),
                        ),
                    ),
                ],
            ),
        ),
        case(
            "an updater changing one field of an item takes only that field",
            vec![
                apply(
                    "a",
                    w(json!({"containers": [{"name": "c", "image": "i", "command": ["a"]}]})),
                ),
                update(
                    "u",
                    w(json!({"containers": [{"name": "c", "image": "j", "command": ["a"]}]})),
                ),
            ],
            ok(
                w(json!({"containers": [{"name": "c", "image": "j", "command": ["a"]}]})),
                vec![
                    (
                        "a",
                        "Apply",
                        spec(
                            json!({"f:containers": {"k:{\"name\":\"c\"}": {".": {}, "f:command": {}, "f:name": {}}}}),
                        ),
                    ),
                    (
                        "u",
                        "Update",
                        spec(json!({"f:containers": {"k:{\"name\":\"c\"}": {"f:image": {}}}})),
                    ),
                ],
            ),
        ),
        case(
            "an updater removing an applier's item removes it from the applier's set",
            vec![
                apply(
                    "a",
                    w(json!({"containers": [{"name": "c1"}, {"name": "c2"}]})),
                ),
                update("u", w(json!({"containers": [{"name": "c1"}]}))),
            ],
            ok(
                w(json!({"containers": [{"name": "c1"}]})),
                vec![(
                    "a",
                    "Apply",
                    spec(json!({"f:containers": {"k:{\"name\":\"c1\"}": {".": {}, "f:name": {}}}})),
                )],
            ),
        ),
        case(
            "an equal item applied by two managers is shared and survives one of them",
            vec![
                apply("a", w(json!({"containers": [{"name": "c", "image": "i"}]}))),
                apply("b", w(json!({"containers": [{"name": "c", "image": "i"}]}))),
                apply("a", w(json!({"replicas": 1}))),
            ],
            ok(
                w(json!({"containers": [{"name": "c", "image": "i"}], "replicas": 1})),
                vec![
                    ("a", "Apply", spec(json!({"f:replicas": {}}))),
                    (
                        "b",
                        "Apply",
                        spec(
                            json!({"f:containers": {"k:{\"name\":\"c\"}": {".": {}, "f:image": {}, "f:name": {}}}}),
                        ),
                    ),
                ],
            ),
        ),
        case(
            "a new item comes where the configuration puts it among shared ones",
            vec![
                apply(
                    "a",
                    w(json!({"containers": [{"name": "c1"}, {"name": "c3"}]})),
                ),
                apply(
                    "b",
                    w(json!({"containers": [{"name": "c1"}, {"name": "c2"}, {"name": "c3"}]})),
                ),
            ],
            ok(
                w(json!({"containers": [{"name": "c1"}, {"name": "c2"}, {"name": "c3"}]})),
                vec![
                    (
                        "a",
                        "Apply",
                        spec(
                            json!({"f:containers": {"k:{\"name\":\"c1\"}": {".": {}, "f:name": {}}, "k:{\"name\":\"c3\"}": {".": {}, "f:name": {}}}}),
                        ),
                    ),
                    (
                        "b",
                        "Apply",
                        spec(
                            json!({"f:containers": {"k:{\"name\":\"c1\"}": {".": {}, "f:name": {}}, "k:{\"name\":\"c2\"}": {".": {}, "f:name": {}}, "k:{\"name\":\"c3\"}": {".": {}, "f:name": {}}}}),
                        ),
                    ),
                ],
            ),
        ),
        case(
            "conflicts over several managers and shapes are all listed",
            vec![
                apply(
                    "a",
                    w(json!({"labels": {"k": "1"}, "selector": {"s": "1"}})),
                ),
                apply("b", w(json!({"containers": [{"name": "c", "image": "i"}]}))),
                apply(
                    "z",
                    w(
                        json!({"labels": {"k": "2"}, "selector": {"s": "2"}, "containers": [{"name": "c", "image": "j"}]}),
                    ),
                ),
            ],
            Expect::Conflicts(vec![
                "conflict with \"a\": .spec.labels.k",
                "conflict with \"a\": .spec.selector",
                "conflict with \"b\": .spec.containers[name=\"c\"].image",
            ]),
        ),
        case(
            "a nested map key no longer applied goes, the other applier's stays",
            vec![
                apply("a", w(json!({"labels": {"a": "1", "shared": "s"}}))),
                apply("b", w(json!({"labels": {"shared": "s"}}))),
                apply("a", w(json!({"labels": {"a": "1"}}))),
            ],
            ok(
                w(json!({"labels": {"a": "1", "shared": "s"}})),
                vec![
                    ("a", "Apply", spec(json!({"f:labels": {"f:a": {}}}))),
                    ("b", "Apply", spec(json!({"f:labels": {"f:shared": {}}}))),
                ],
            ),
        ),
        case(
            "an updater adding a map key owns only the key",
            vec![
                apply("a", w(json!({"labels": {"a": "1"}}))),
                update("u", w(json!({"labels": {"a": "1", "u": "2"}}))),
            ],
            ok(
                w(json!({"labels": {"a": "1", "u": "2"}})),
                vec![
                    ("a", "Apply", spec(json!({"f:labels": {"f:a": {}}}))),
                    ("u", "Update", spec(json!({"f:labels": {"f:u": {}}}))),
                ],
            ),
        ),
        case(
            "a forced atomic struct is replaced whole",
            vec![
                apply("a", w(json!({"atomicStruct": {"x": "1"}}))),
                force("b", w(json!({"atomicStruct": {"y": "2"}}))),
            ],
            ok(
                w(json!({"atomicStruct": {"y": "2"}})),
                vec![("b", "Apply", spec(json!({"f:atomicStruct": {}})))],
            ),
        ),
        // --- maps and structs
        case(
            "granular maps merge by key",
            vec![
                apply("a", w(json!({"labels": {"a": "1"}}))),
                apply("b", w(json!({"labels": {"b": "2"}}))),
            ],
            ok(
                w(json!({"labels": {"a": "1", "b": "2"}})),
                vec![
                    ("a", "Apply", spec(json!({"f:labels": {"f:a": {}}}))),
                    ("b", "Apply", spec(json!({"f:labels": {"f:b": {}}}))),
                ],
            ),
        ),
        case(
            "a map key conflicts",
            vec![
                apply("a", w(json!({"labels": {"k": "1"}}))),
                apply("b", w(json!({"labels": {"k": "2"}}))),
            ],
            Expect::Conflicts(vec!["conflict with \"a\": .spec.labels.k"]),
        ),
        case(
            "a map key no longer applied goes",
            vec![
                apply("a", w(json!({"labels": {"a": "1", "b": "2"}}))),
                apply("a", w(json!({"labels": {"a": "1"}}))),
            ],
            ok(
                w(json!({"labels": {"a": "1"}})),
                vec![("a", "Apply", spec(json!({"f:labels": {"f:a": {}}})))],
            ),
        ),
        case(
            "an atomic map is one value",
            vec![
                apply("a", w(json!({"selector": {"a": "1"}}))),
                apply("b", w(json!({"selector": {"b": "2"}}))),
            ],
            Expect::Conflicts(vec!["conflict with \"a\": .spec.selector"]),
        ),
        case(
            "a forced atomic map is replaced",
            vec![
                apply("a", w(json!({"selector": {"a": "1"}}))),
                force("b", w(json!({"selector": {"b": "2"}}))),
            ],
            ok(
                w(json!({"selector": {"b": "2"}})),
                vec![("b", "Apply", spec(json!({"f:selector": {}})))],
            ),
        ),
        case(
            "an equal atomic map is shared",
            vec![
                apply("a", w(json!({"selector": {"a": "1"}}))),
                apply("b", w(json!({"selector": {"a": "1"}}))),
            ],
            ok(
                w(json!({"selector": {"a": "1"}})),
                vec![
                    ("a", "Apply", spec(json!({"f:selector": {}}))),
                    ("b", "Apply", spec(json!({"f:selector": {}}))),
                ],
            ),
        ),
        case(
            "nested structs merge field by field",
            vec![
                apply("a", w(json!({"nested": {"a": "x"}}))),
                apply("b", w(json!({"nested": {"b": {"c": "y"}}}))),
            ],
            ok(
                w(json!({"nested": {"a": "x", "b": {"c": "y"}}})),
                vec![
                    ("a", "Apply", spec(json!({"f:nested": {"f:a": {}}}))),
                    (
                        "b",
                        "Apply",
                        spec(json!({"f:nested": {"f:b": {"f:c": {}}}})),
                    ),
                ],
            ),
        ),
        case(
            "an atomic struct is one value",
            vec![
                apply("a", w(json!({"atomicStruct": {"x": "1"}}))),
                apply("b", w(json!({"atomicStruct": {"y": "2"}}))),
            ],
            Expect::Conflicts(vec!["conflict with \"a\": .spec.atomicStruct"]),
        ),
        case(
            "an empty object is owned itself",
            vec![apply("a", w(json!({"labels": {}})))],
            ok(
                w(json!({"labels": {}})),
                vec![("a", "Apply", spec(json!({"f:labels": {}})))],
            ),
        ),
        case(
            "untyped objects merge by key, their keys owned as map entries",
            vec![
                apply("a", w(json!({"config": {"p": {"q": 1}}}))),
                apply("b", w(json!({"config": {"p": {"r": 2}}}))),
            ],
            ok(
                w(json!({"config": {"p": {"q": 1, "r": 2}}})),
                vec![
                    (
                        "a",
                        "Apply",
                        spec(json!({"f:config": {"f:p": {".": {}, "f:q": {}}}})),
                    ),
                    (
                        "b",
                        "Apply",
                        spec(json!({"f:config": {"f:p": {".": {}, "f:r": {}}}})),
                    ),
                ],
            ),
        ),
        case(
            "untyped scalars conflict",
            vec![
                apply("a", w(json!({"config": {"p": 1}}))),
                apply("b", w(json!({"config": {"p": 2}}))),
            ],
            Expect::Conflicts(vec!["conflict with \"a\": .spec.config.p"]),
        ),
        // --- update tracking
        case(
            "a create records the writer's fields",
            vec![update(
                "u",
                wm(json!({"labels": {"x": "1"}}), json!({"replicas": 1})),
            )],
            ok(
                wm(json!({"labels": {"x": "1"}}), json!({"replicas": 1})),
                vec![(
                    "u",
                    "Update",
                    json!({"f:metadata": {"f:labels": {".": {}, "f:x": {}}}, "f:spec": {"f:replicas": {}}}),
                )],
            ),
        ),
        case(
            "an update keeps what others set",
            vec![
                update("u", w(json!({"replicas": 1}))),
                update("v", w(json!({"replicas": 1, "tags": ["t"]}))),
            ],
            ok(
                w(json!({"replicas": 1, "tags": ["t"]})),
                vec![
                    ("u", "Update", spec(json!({"f:replicas": {}}))),
                    (
                        "v",
                        "Update",
                        spec(json!({"f:tags": {".": {}, "v:\"t\"": {}}})),
                    ),
                ],
            ),
        ),
        case(
            "an updater that changes nothing gets no entry",
            vec![
                update("u", w(json!({"replicas": 1}))),
                update("v", w(json!({"replicas": 1}))),
            ],
            ok(
                w(json!({"replicas": 1})),
                vec![("u", "Update", spec(json!({"f:replicas": {}})))],
            ),
        ),
        case(
            "an updater that empties its fields loses its entry",
            vec![
                update("u", w(json!({"replicas": 1}))),
                update("v", w(json!({}))),
            ],
            ok(w(json!({})), vec![]),
        ),
        case(
            "updates and applies of one manager are separate entries",
            vec![
                update("m", w(json!({"replicas": 1}))),
                apply("m", w(json!({"tags": ["t"]}))),
            ],
            ok(
                w(json!({"replicas": 1, "tags": ["t"]})),
                vec![
                    ("m", "Apply", spec(json!({"f:tags": {"v:\"t\"": {}}}))),
                    ("m", "Update", spec(json!({"f:replicas": {}}))),
                ],
            ),
        ),
        // --- objects without managed fields
        Case {
            name: "a first apply to an unmanaged object conflicts with its values",
            builtin: false,
            steps: vec![
                Step {
                    manager: "",
                    op: Op::Unmanaged,
                    object: w(json!({"replicas": 1, "tags": ["t"]})),
                },
                apply("a", w(json!({"replicas": 2}))),
            ],
            expect: Expect::Conflicts(vec![
                "conflict with \"before-first-apply\" using example.com/v1: .spec.replicas",
            ]),
        },
        Case {
            name: "a forced first apply leaves the rest to before-first-apply",
            builtin: false,
            steps: vec![
                Step {
                    manager: "",
                    op: Op::Unmanaged,
                    object: w(json!({"replicas": 1, "tags": ["t"]})),
                },
                force("a", w(json!({"replicas": 2}))),
            ],
            expect: ok(
                w(json!({"replicas": 2, "tags": ["t"]})),
                vec![
                    ("a", "Apply", spec(json!({"f:replicas": {}}))),
                    (
                        "before-first-apply",
                        "Update",
                        spec(json!({"f:tags": {"v:\"t\"": {}}})),
                    ),
                ],
            ),
        },
        // --- scenarios of upstream's structured-merge-diff merge tables (leaf, set,
        // multiple appliers, nested, deduced), in our own data
        case(
            "applying an empty configuration removes what only the applier owned, and its entry",
            vec![
                apply("one", w(json!({"replicas": 1}))),
                apply(
                    "one",
                    json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}),
                ),
            ],
            ok(
                json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}),
                vec![],
            ),
        ),
        case(
            "after an updater took the applier's only field, an empty apply keeps the updater's value",
            vec![
                apply("one", w(json!({"replicas": 2}))),
                update("controller", w(json!({"replicas": 1}))),
                apply(
                    "one",
                    json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}),
                ),
            ],
            ok(
                w(json!({"replicas": 1})),
                vec![("controller", "Update", spec(json!({"f:replicas": {}})))],
            ),
        ),
        case(
            "set items an updater added stay beside the applier's new ones",
            vec![
                apply("one", w(json!({"tags": ["a", "c"]}))),
                update("controller", w(json!({"tags": ["a", "b", "c", "d"]}))),
                apply("one", w(json!({"tags": ["a", "a2", "c", "c2"]}))),
            ],
            ok(
                w(json!({"tags": ["a", "b", "a2", "c", "d", "c2"]})),
                vec![
                    (
                        "one",
                        "Apply",
                        spec(
                            json!({"f:tags": {"v:\"a\"": {}, "v:\"a2\"": {}, "v:\"c\"": {}, "v:\"c2\"": {}}}),
                        ),
                    ),
                    (
                        "controller",
                        "Update",
                        spec(json!({"f:tags": {"v:\"b\"": {}, "v:\"d\"": {}}})),
                    ),
                ],
            ),
        ),
        case(
            "an applier applying an updater's set item shares it",
            vec![
                apply("one", w(json!({"tags": ["a", "c"]}))),
                update("controller", w(json!({"tags": ["a", "b", "c", "d"]}))),
                apply("one", w(json!({"tags": ["a", "b", "c"]}))),
            ],
            ok(
                w(json!({"tags": ["a", "b", "c", "d"]})),
                vec![
                    (
                        "one",
                        "Apply",
                        spec(json!({"f:tags": {"v:\"a\"": {}, "v:\"b\"": {}, "v:\"c\"": {}}})),
                    ),
                    (
                        "controller",
                        "Update",
                        spec(json!({"f:tags": {"v:\"b\"": {}, "v:\"d\"": {}}})),
                    ),
                ],
            ),
        ),
        case(
            "an updater reordering a set takes nothing, and the applier's order comes back",
            vec![
                apply("one", w(json!({"tags": ["a", "b", "c", "d"]}))),
                update("controller", w(json!({"tags": ["a", "d", "c", "b"]}))),
                apply("one", w(json!({"tags": ["a", "b", "c", "d"]}))),
            ],
            ok(
                w(json!({"tags": ["a", "b", "c", "d"]})),
                vec![(
                    "one",
                    "Apply",
                    spec(
                        json!({"f:tags": {"v:\"a\"": {}, "v:\"b\"": {}, "v:\"c\"": {}, "v:\"d\"": {}}}),
                    ),
                )],
            ),
        ),
        case(
            "a dropped item stays for its other applier, without the sub-items only the dropper owned",
            vec![
                apply(
                    "one",
                    w(
                        json!({"containers": [{"name": "a"}, {"name": "b", "env": [{"name": "c"}]}]}),
                    ),
                ),
                apply(
                    "two",
                    w(json!({"containers": [{"name": "b", "env": [{"name": "d"}]}]})),
                ),
                update(
                    "controller",
                    w(
                        json!({"containers": [{"name": "a"}, {"name": "b", "env": [{"name": "c"}, {"name": "d"}, {"name": "e"}]}]}),
                    ),
                ),
                apply("one", w(json!({"containers": [{"name": "a"}]}))),
            ],
            ok(
                w(
                    json!({"containers": [{"name": "a"}, {"name": "b", "env": [{"name": "d"}, {"name": "e"}]}]}),
                ),
                vec![
                    (
                        "one",
                        "Apply",
                        spec(
                            json!({"f:containers": {"k:{\"name\":\"a\"}": {".": {}, "f:name": {}}}}),
                        ),
                    ),
                    (
                        "two",
                        "Apply",
                        spec(
                            json!({"f:containers": {"k:{\"name\":\"b\"}": {".": {}, "f:name": {}, "f:env": {"k:{\"name\":\"d\"}": {".": {}, "f:name": {}}}}}}),
                        ),
                    ),
                    (
                        "controller",
                        "Update",
                        spec(
                            json!({"f:containers": {"k:{\"name\":\"b\"}": {"f:env": {"k:{\"name\":\"e\"}": {".": {}, "f:name": {}}}}}}),
                        ),
                    ),
                ],
            ),
        ),
        case(
            "a dropped item only its applier held goes, with an updater's sub-item in it",
            vec![
                apply(
                    "one",
                    w(
                        json!({"containers": [{"name": "a"}, {"name": "b", "env": [{"name": "c"}]}]}),
                    ),
                ),
                apply(
                    "two",
                    w(json!({"containers": [{"name": "a", "env": [{"name": "b"}]}]})),
                ),
                update(
                    "controller",
                    w(
                        json!({"containers": [{"name": "a", "env": [{"name": "b"}]}, {"name": "b", "env": [{"name": "c"}, {"name": "d"}]}]}),
                    ),
                ),
                apply("one", w(json!({"containers": [{"name": "a"}]}))),
            ],
            ok(
                w(json!({"containers": [{"name": "a", "env": [{"name": "b"}]}]})),
                vec![
                    (
                        "one",
                        "Apply",
                        spec(
                            json!({"f:containers": {"k:{\"name\":\"a\"}": {".": {}, "f:name": {}}}}),
                        ),
                    ),
                    (
                        "two",
                        "Apply",
                        spec(
                            json!({"f:containers": {"k:{\"name\":\"a\"}": {".": {}, "f:name": {}, "f:env": {"k:{\"name\":\"b\"}": {".": {}, "f:name": {}}}}}}),
                        ),
                    ),
                ],
            ),
        ),
        case(
            "a nested field another applier holds stays when the first drops its parent",
            vec![
                apply("one", w(json!({"nested": {"a": "x", "b": {"c": "y"}}}))),
                apply("two", w(json!({"nested": {"b": {"c": "y"}}}))),
                apply("one", w(json!({"nested": {"a": "x"}}))),
            ],
            ok(
                w(json!({"nested": {"a": "x", "b": {"c": "y"}}})),
                vec![
                    ("one", "Apply", spec(json!({"f:nested": {"f:a": {}}}))),
                    (
                        "two",
                        "Apply",
                        spec(json!({"f:nested": {"f:b": {"f:c": {}}}})),
                    ),
                ],
            ),
        ),
        case(
            "a null applied over a granular map merges nothing into it, without conflict",
            vec![
                apply("one", wm(json!({"labels": {"x": "1"}}), json!({}))),
                apply("two", wm(json!({"labels": null}), json!({}))),
            ],
            ok(
                wm(json!({"labels": {"x": "1"}}), json!({})),
                vec![
                    (
                        "one",
                        "Apply",
                        json!({"f:metadata": {"f:labels": {"f:x": {}}}, "f:spec": {}}),
                    ),
                    (
                        "two",
                        "Apply",
                        json!({"f:metadata": {"f:labels": {}}, "f:spec": {}}),
                    ),
                ],
            ),
        ),
        case(
            "an applier emptying a struct keeps what an updater added to it",
            vec![
                apply("one", w(json!({"nested": {"a": "x"}}))),
                update(
                    "controller",
                    w(json!({"nested": {"a": "x", "b": {"c": "z"}}})),
                ),
                apply("one", w(json!({"nested": {}}))),
            ],
            ok(
                w(json!({"nested": {"b": {"c": "z"}}})),
                vec![
                    ("one", "Apply", spec(json!({"f:nested": {}}))),
                    (
                        "controller",
                        "Update",
                        spec(json!({"f:nested": {"f:b": {"f:c": {}}}})),
                    ),
                ],
            ),
        ),
        case(
            "an applier nulling a struct an updater took over changes nothing",
            vec![
                apply("one", w(json!({"nested": {"a": "x"}}))),
                update(
                    "controller",
                    w(json!({"nested": {"a": "y", "b": {"c": "z"}}})),
                ),
                apply("one", w(json!({"nested": null}))),
            ],
            ok(
                w(json!({"nested": {"a": "y", "b": {"c": "z"}}})),
                vec![
                    ("one", "Apply", spec(json!({"f:nested": {}}))),
                    (
                        "controller",
                        "Update",
                        spec(json!({"f:nested": {"f:a": {}, "f:b": {"f:c": {}}}})),
                    ),
                ],
            ),
        ),
        // --- refusals
        case(
            "an applied configuration may not carry managedFields",
            vec![apply(
                "a",
                wm(json!({"managedFields": [{"manager": "x"}]}), json!({})),
            )],
            Expect::BadRequest("metadata.managedFields must be nil"),
        ),
        // --- built-in ConfigMaps (the documented examples)
        Case {
            name: "configmap apply, as in the documentation",
            builtin: true,
            steps: vec![apply(
                "kubectl",
                cm(
                    json!({"labels": {"test-label": "test"}}),
                    json!({"key": "some value"}),
                ),
            )],
            expect: ok(
                cm(
                    json!({"labels": {"test-label": "test"}}),
                    json!({"key": "some value"}),
                ),
                vec![(
                    "kubectl",
                    "Apply",
                    json!({"f:metadata": {"f:labels": {"f:test-label": {}}}, "f:data": {"f:key": {}}}),
                )],
            ),
        },
        Case {
            name: "configmap create by update",
            builtin: true,
            steps: vec![update(
                "kubectl-create",
                cm(json!({}), json!({"a": "1", "b": "2"})),
            )],
            expect: ok(
                cm(json!({}), json!({"a": "1", "b": "2"})),
                vec![(
                    "kubectl-create",
                    "Update",
                    json!({"f:data": {".": {}, "f:a": {}, "f:b": {}}}),
                )],
            ),
        },
        Case {
            name: "configmap key taken over from client-side apply by force",
            builtin: true,
            steps: vec![
                update(
                    "kubectl-client-side-apply",
                    cm(json!({}), json!({"key": "a", "other": "o"})),
                ),
                force("kubectl", cm(json!({}), json!({"key": "b"}))),
            ],
            expect: ok(
                cm(json!({}), json!({"key": "b", "other": "o"})),
                vec![
                    ("kubectl", "Apply", json!({"f:data": {"f:key": {}}})),
                    (
                        "kubectl-client-side-apply",
                        "Update",
                        json!({"f:data": {".": {}, "f:other": {}}}),
                    ),
                ],
            ),
        },
        Case {
            name: "configmap conflict with client-side apply",
            builtin: true,
            steps: vec![
                update(
                    "kubectl-client-side-apply",
                    cm(json!({}), json!({"key": "a"})),
                ),
                apply("kubectl", cm(json!({}), json!({"key": "b"}))),
            ],
            expect: Expect::Conflicts(vec![
                "conflict with \"kubectl-client-side-apply\" using v1: .data.key",
            ]),
        },
        Case {
            name: "kubectl takes over client-side apply's unchanged fields without conflict",
            builtin: true,
            steps: vec![
                update(
                    "kubectl-client-side-apply",
                    cm(
                        json!({"annotations": {"kubectl.kubernetes.io/last-applied-configuration": LAST_A}}),
                        json!({"key": "a"}),
                    ),
                ),
                apply("kubectl", cm(json!({}), json!({"key": "b"}))),
            ],
            expect: ok(
                cm(
                    json!({"annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{\"apiVersion\":\"v1\",\"data\":{\"key\":\"b\"},\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"c\",\"namespace\":\"default\"}}\n"}}),
                    json!({"key": "b"}),
                ),
                vec![
                    ("kubectl", "Apply", json!({"f:data": {"f:key": {}}})),
                    (
                        "kubectl-client-side-apply",
                        "Update",
                        json!({"f:data": {}, "f:metadata": {"f:annotations": {".": {}, "f:kubectl.kubernetes.io/last-applied-configuration": {}}}}),
                    ),
                ],
            ),
        },
        Case {
            name: "a field changed since client-side apply still conflicts for kubectl",
            builtin: true,
            steps: vec![
                update(
                    "kubectl-client-side-apply",
                    cm(
                        json!({"annotations": {"kubectl.kubernetes.io/last-applied-configuration": LAST_A}}),
                        json!({"key": "a"}),
                    ),
                ),
                update(
                    "editor",
                    cm(
                        json!({"annotations": {"kubectl.kubernetes.io/last-applied-configuration": LAST_A}}),
                        json!({"key": "c"}),
                    ),
                ),
                apply("kubectl", cm(json!({}), json!({"key": "b"}))),
            ],
            expect: Expect::Conflicts(vec!["conflict with \"editor\" using v1: .data.key"]),
        },
        Case {
            name: "only kubectl takes over client-side apply's fields",
            builtin: true,
            steps: vec![
                update(
                    "kubectl-client-side-apply",
                    cm(
                        json!({"annotations": {"kubectl.kubernetes.io/last-applied-configuration": LAST_A}}),
                        json!({"key": "a"}),
                    ),
                ),
                apply("other", cm(json!({}), json!({"key": "b"}))),
            ],
            expect: Expect::Conflicts(vec![
                "conflict with \"kubectl-client-side-apply\" using v1: .data.key",
            ]),
        },
        Case {
            name: "owner references (atomic items) merge by uid",
            builtin: true,
            steps: vec![
                apply(
                    "a",
                    cm(
                        json!({"ownerReferences": [{"apiVersion": "v1", "kind": "Namespace", "name": "n", "uid": "u1"}]}),
                        Value::Null,
                    ),
                ),
                apply(
                    "b",
                    cm(
                        json!({"ownerReferences": [{"apiVersion": "v1", "kind": "Namespace", "name": "m", "uid": "u2"}]}),
                        Value::Null,
                    ),
                ),
            ],
            expect: ok(
                cm(
                    json!({"ownerReferences": [
                    {"apiVersion": "v1", "kind": "Namespace", "name": "n", "uid": "u1"},
                    {"apiVersion": "v1", "kind": "Namespace", "name": "m", "uid": "u2"}]}),
                    Value::Null,
                ),
                vec![
                    (
                        "a",
                        "Apply",
                        json!({"f:metadata": {"f:ownerReferences": {"k:{\"uid\":\"u1\"}": {}}}}),
                    ),
                    (
                        "b",
                        "Apply",
                        json!({"f:metadata": {"f:ownerReferences": {"k:{\"uid\":\"u2\"}": {}}}}),
                    ),
                ],
            ),
        },
    ]
}

fn run(case: &Case, test: &Schema, builtin: &Schema) -> Result<Value, ApplyError> {
    let schema = if case.builtin { builtin } else { test };
    let mut live: Option<Value> = None;
    for step in &case.steps {
        let api_version = step.object["apiVersion"].as_str().unwrap().to_owned();
        let (group, version) = api_version.split_once('/').unwrap_or(("", &api_version));
        let kind = step.object["kind"].as_str().unwrap();
        let ty: TypeRef = schema.kind(group, version, kind).unwrap();
        let writer = Writer {
            schema,
            ty,
            manager: step.manager.to_owned(),
            api_version: api_version.clone(),
            subresource: String::new(),
            time: TIME.to_owned(),
            ignored: genplane_merge::fieldpath::Set::new(),
        };
        live = Some(match step.op {
            Op::Apply | Op::Force => {
                managed::apply(
                    &writer,
                    live.as_ref(),
                    &step.object,
                    matches!(step.op, Op::Force),
                )?
                .0
            }
            Op::Unmanaged => step.object.clone(),
            Op::Update => {
                let mut new = step.object.clone();
                managed::update(&writer, live.as_ref(), &mut new).unwrap();
                new
            }
        });
    }
    Ok(live.unwrap())
}

#[test]
fn corpus() {
    let (test, builtin) = (test_schema(), builtin_schema());
    let cases = cases();
    assert_eq!(
        cases.len(),
        95,
        "the corpus size changed: update this count"
    );
    let mut failures = Vec::new();
    for case in &cases {
        let result = run(case, &test, &builtin);
        let verdict = match (&case.expect, result) {
            (Expect::Ok(object, managers), Ok(mut got)) => {
                let entries: Vec<(String, String, Value)> = managed::decode(&got)
                    .unwrap()
                    .unwrap_or_default()
                    .iter()
                    .map(|e| {
                        (
                            e.manager.clone(),
                            e.operation.as_str().to_owned(),
                            e.fields.to_fields_v1(),
                        )
                    })
                    .collect();
                let expected: Vec<(String, String, Value)> = managers
                    .iter()
                    .map(|(m, o, f)| ((*m).to_owned(), (*o).to_owned(), f.clone()))
                    .collect();
                managed::remove(&mut got);
                if got != *object {
                    Err(format!("object {got} != {object}"))
                } else if entries != expected {
                    Err(format!("managers {entries:?} != {expected:?}"))
                } else {
                    Ok(())
                }
            }
            (Expect::Conflicts(expected), Err(ApplyError::Conflicts(got))) => {
                let got: Vec<String> = got.iter().map(ToString::to_string).collect();
                if got == *expected {
                    Ok(())
                } else {
                    Err(format!("conflicts {got:?} != {expected:?}"))
                }
            }
            (Expect::BadRequest(expected), Err(ApplyError::BadRequest(got))) => {
                if got == *expected {
                    Ok(())
                } else {
                    Err(format!("{got:?} != {expected:?}"))
                }
            }
            (_, Ok(got)) => Err(format!("succeeded: {got}")),
            (_, Err(e)) => Err(format!("failed: {e:?}")),
        };
        if let Err(why) = verdict {
            failures.push(format!("{}: {why}", case.name));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[test]
fn conflict_messages_as_upstream() {
    use genplane_merge::fieldpath::Path;
    use genplane_merge::managed::{Conflict, conflicts_message};
    let one = vec![Conflict {
        manager: "\"a\"".into(),
        path: Path::fields(&["data", "k"]),
    }];
    assert_eq!(
        conflicts_message(&one),
        "Apply failed with 1 conflict: conflict with \"a\": .data.k"
    );
    let two = vec![
        Conflict {
            manager: "\"a\"".into(),
            path: Path::fields(&["data", "k"]),
        },
        Conflict {
            manager: "\"b\" using v1".into(),
            path: Path::fields(&["data", "l"]),
        },
    ];
    assert_eq!(
        conflicts_message(&two),
        "Apply failed with 2 conflicts: conflicts with \"a\":\n- .data.k\nconflicts with \"b\" using v1:\n- .data.l"
    );
}

#[test]
fn reset_and_fallback() {
    let schema = test_schema();
    let writer = Writer {
        schema: &schema,
        ty: schema.kind("example.com", "v1", "Widget").unwrap(),
        manager: "u".into(),
        api_version: "example.com/v1".into(),
        subresource: String::new(),
        time: TIME.into(),
        ignored: genplane_merge::fieldpath::Set::new(),
    };
    let mut first = w(json!({"replicas": 1}));
    managed::update(&writer, None, &mut first).unwrap();
    // A list with one empty entry, or an empty list, clears the managed fields (upstream's
    // `isResetManagedFields`).
    for given in [json!([{}]), json!([])] {
        let mut reset = wm(json!({"managedFields": given}), json!({"replicas": 2}));
        managed::update(&writer, Some(&first), &mut reset).unwrap();
        assert_eq!(reset.pointer("/metadata/managedFields"), None);
        // Later updates of the object no one is known to manage do not start tracking it.
        let mut later = w(json!({"replicas": 3}));
        managed::update(&writer, Some(&reset), &mut later).unwrap();
        assert_eq!(later.pointer("/metadata/managedFields"), None);
    }
    // Unreadable entries fall back to the live object's.
    let mut next = wm(
        json!({"managedFields": [{"operation": "Bogus"}]}),
        json!({"replicas": 1, "tags": ["t"]}),
    );
    let other = Writer {
        manager: "v".into(),
        ..writer.clone()
    };
    managed::update(&other, Some(&first), &mut next).unwrap();
    let managers: Vec<String> = managed::decode(&next)
        .unwrap()
        .unwrap()
        .into_iter()
        .map(|e| e.manager)
        .collect();
    assert_eq!(managers, ["u", "v"]);
    // A write through a subresource cannot edit the managed fields: the live ones are kept.
    let status = Writer {
        manager: "s".into(),
        subresource: "status".into(),
        ..writer.clone()
    };
    let mut through_status = wm(json!({"managedFields": [{}]}), json!({"replicas": 1}));
    managed::update(&status, Some(&first), &mut through_status).unwrap();
    assert_eq!(
        through_status.pointer("/metadata/managedFields"),
        first.pointer("/metadata/managedFields")
    );
}

/// What a MutatingAdmissionPolicy's apply configuration may set: granular values and the
/// items of merged lists, not atomic lists, maps or structs (which would replace the whole).
#[test]
fn atomic_composites_are_found_where_an_apply_configuration_sets_them() {
    let schema = test_schema();
    let ty = schema.kind("example.com", "v1", "Widget").unwrap();
    let found = |config: Value| genplane_merge::apply::atomic_composite(&schema, &ty, &config);
    assert_eq!(
        found(
            json!({"metadata": {"labels": {"a": "b"}}, "spec": {"replicas": 1,
            "tags": ["x"], "nested": {"b": {"c": "d"}},
            "containers": [{"name": "c", "env": [{"name": "e", "value": "v"}]}],
            "config": {"free": {"form": [1]}}}})
        ),
        None
    );
    assert_eq!(
        found(json!({"spec": {"args": ["a"]}})),
        Some(".spec.args".into())
    );
    assert_eq!(
        found(json!({"spec": {"selector": {"a": "b"}}})),
        Some(".spec.selector".into())
    );
    assert_eq!(
        found(json!({"spec": {"containers": [{"name": "c", "command": ["run"]}]}})),
        Some(".spec.containers[name=\"c\"].command".into())
    );
    // an empty atomic value replaces nothing of substance
    assert_eq!(
        found(json!({"spec": {"args": [], "atomicStruct": {}}})),
        None
    );
}
