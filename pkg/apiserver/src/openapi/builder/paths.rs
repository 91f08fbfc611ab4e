//! The paths and operations of a group version document.
//!
//! Operation ids follow upstream's scheme, `<verb><Group><Version>[Namespaced|Collection…]<Kind>
//! [Status|Finalize|ForAllNamespaces]` (`patchCoreV1NamespacedConfigMap`,
//! `listCoordinationV1LeaseForAllNamespaces`), because generated clients and humans know
//! them. Every write (POST, PUT, PATCH) declares `dryRun`, `fieldManager` and
//! `fieldValidation`; kubectl checks the last one on PATCH before it asks for server-side field
//! validation.

use serde_json::{Map, Value, json};

use super::{Kinds, ServedResource, Shared};

/// The media types answers are served in.
pub(super) const RESPONSE_TYPES: &[&str] = &["application/json", "application/yaml"];

/// The media types list answers are served in (the watch stream included).
const LIST_TYPES: &[&str] = &[
    "application/json",
    "application/yaml",
    "application/json;stream=watch",
];

/// The patch formats the server accepts.
const PATCH_TYPES: &[&str] = &[
    "application/json-patch+json",
    "application/merge-patch+json",
];

/// `content` of a request or response: each media type with a `$ref` to `schema`.
pub(super) fn content(schema: &str, types: &[&str]) -> Value {
    let reference = json!({"schema": {"$ref": format!("#/components/schemas/{schema}")}});
    Value::Object(
        types
            .iter()
            .map(|t| ((*t).to_owned(), reference.clone()))
            .collect(),
    )
}

/// The operation-id form of a group: `Core` for the core group, else each dot-separated part
/// of the name without `.k8s.io`, capitalized (`coordination.k8s.io` -> `Coordination`,
/// `rbac.authorization.k8s.io` -> `RbacAuthorization`).
pub(super) fn operation_group(group: &str) -> String {
    if group.is_empty() {
        return "Core".to_owned();
    }
    group
        .trim_end_matches(".k8s.io")
        .split(['.', '-'])
        .map(upper_first)
        .collect()
}

fn upper_first(s: &str) -> String {
    let mut chars = s.chars();
    chars
        .next()
        .map(|c| c.to_ascii_uppercase().to_string() + chars.as_str())
        .unwrap_or_default()
}

/// `RbacAuthorization` -> `rbacAuthorization` (upstream's tags).
pub(super) fn lower_first(s: &str) -> String {
    let mut chars = s.chars();
    chars
        .next()
        .map(|c| c.to_ascii_lowercase().to_string() + chars.as_str())
        .unwrap_or_default()
}

fn query(name: &str, kind: &str, description: &str) -> Value {
    json!({
        "name": name,
        "in": "query",
        "description": description,
        "schema": {"type": kind, "uniqueItems": true},
    })
}

fn path_parameter(name: &str, description: &str) -> Value {
    json!({
        "name": name,
        "in": "path",
        "required": true,
        "description": description,
        "schema": {"type": "string", "uniqueItems": true},
    })
}

fn pretty() -> Value {
    query("pretty", "string", "Indent the answer when 'true'.")
}

fn dry_run() -> Value {
    query(
        "dryRun",
        "string",
        "'All' runs every stage of the request but stores nothing.",
    )
}

fn write_parameters(patch: bool) -> Vec<Value> {
    let mut parameters = vec![
        dry_run(),
        query(
            "fieldManager",
            "string",
            "The name of the actor making the change, recorded in managedFields.",
        ),
        query(
            "fieldValidation",
            "string",
            "What to do with unknown or duplicate fields in the body: 'Ignore' drops them, \
             'Warn' (the default) drops them and answers with a warning for each, 'Strict' \
             refuses the request.",
        ),
    ];
    if patch {
        parameters.push(query(
            "force",
            "boolean",
            "For apply patches: take over fields other managers own.",
        ));
    }
    parameters
}

fn selector_parameters() -> Vec<Value> {
    vec![
        query(
            "labelSelector",
            "string",
            "Only objects whose labels match this selector.",
        ),
        query(
            "fieldSelector",
            "string",
            "Only objects whose fields match this selector.",
        ),
    ]
}

fn list_parameters() -> Vec<Value> {
    let mut parameters = vec![query(
        "allowWatchBookmarks",
        "boolean",
        "For watches: also send BOOKMARK events carrying the current resourceVersion.",
    )];
    parameters.extend(selector_parameters());
    parameters.extend(paging_parameters());
    parameters.extend([
        query(
            "sendInitialEvents",
            "boolean",
            "For watches: start with an ADDED event for every existing object, then a \
             bookmark marking the end of them.",
        ),
        query(
            "watch",
            "boolean",
            "Stream changes (ADDED, MODIFIED, DELETED events) instead of answering a list.",
        ),
    ]);
    parameters
}

fn paging_parameters() -> Vec<Value> {
    vec![
        query(
            "limit",
            "integer",
            "The most objects to answer with; a continue token in the list's metadata \
             fetches the rest.",
        ),
        query(
            "continue",
            "string",
            "The continue token of the previous page of a limited list.",
        ),
        query(
            "resourceVersion",
            "string",
            "Which state to read: unset for the latest, '0' for any, else at least (or, with \
             resourceVersionMatch=Exact, exactly) this version.",
        ),
        query(
            "resourceVersionMatch",
            "string",
            "How resourceVersion applies to a list: 'NotOlderThan' or 'Exact'.",
        ),
        query(
            "timeoutSeconds",
            "integer",
            "End the list or watch after this many seconds.",
        ),
    ]
}

fn delete_parameters() -> Vec<Value> {
    vec![
        dry_run(),
        query(
            "gracePeriodSeconds",
            "integer",
            "Seconds before the object is deleted; 0 deletes at once.",
        ),
        query(
            "orphanDependents",
            "boolean",
            "Deprecated: use propagationPolicy.",
        ),
        query(
            "propagationPolicy",
            "string",
            "What happens to dependents: 'Orphan', 'Background' or 'Foreground'.",
        ),
    ]
}

fn responses(entries: &[(&str, &str)], schema: &str, types: &[&str]) -> Value {
    let mut map = Map::new();
    for (code, description) in entries {
        map.insert(
            (*code).to_owned(),
            json!({"description": description, "content": content(schema, types)}),
        );
    }
    map.insert("401".into(), json!({"description": "Unauthorized"}));
    Value::Object(map)
}

/// One operation.
struct Operation<'a> {
    id: String,
    description: String,
    action: &'a str,
    gvk: Value,
    parameters: Vec<Value>,
    body: Option<Value>,
    responses: Value,
}

impl Operation<'_> {
    fn to_json(&self, tag: &str) -> Value {
        let mut op = json!({
            "description": self.description,
            "operationId": self.id,
            "tags": [tag],
            "responses": self.responses,
            "x-kubernetes-action": self.action,
            "x-kubernetes-group-version-kind": self.gvk,
        });
        if !self.parameters.is_empty() {
            op["parameters"] = Value::Array(self.parameters.clone());
        }
        if let Some(body) = &self.body {
            op["requestBody"] = body.clone();
        }
        op
    }
}

fn body(schema: &str, types: &[&str]) -> Value {
    json!({"required": true, "content": content(schema, types)})
}

/// The paths of the resources of one group version.
pub(super) fn group_version_paths(
    group: &str,
    version: &str,
    served: &[&ServedResource],
    kinds: &Kinds,
    shared: &Shared,
) -> Map<String, Value> {
    let prefix = if group.is_empty() {
        format!("/api/{version}")
    } else {
        format!("/apis/{group}/{version}")
    };
    let ids = format!("{}{}", operation_group(group), upper_first(version));
    let tag = format!("{}_{version}", lower_first(&operation_group(group)));
    let mut paths = Map::new();
    paths.insert(
        format!("{prefix}/"),
        json!({"get": {
            "description": "get available resources",
            "operationId": format!("get{ids}APIResources"),
            "tags": [tag],
            "responses": responses(&[("200", "OK")], &shared.resource_list, RESPONSE_TYPES),
        }}),
    );
    for r in served {
        let info = *r;
        let Some((schema, list_schema)) = kinds.component(&info.kind) else {
            continue;
        };
        let kind = info.kind.as_str();
        let gvk = json!({"group": group, "version": version, "kind": kind});
        let has = |verb: &str| info.has_verb(verb);
        let (collection, item, scope) = if info.namespaced {
            (
                format!("{prefix}/namespaces/{{namespace}}/{}", info.resource),
                format!(
                    "{prefix}/namespaces/{{namespace}}/{}/{{name}}",
                    info.resource
                ),
                "Namespaced",
            )
        } else {
            (
                format!("{prefix}/{}", info.resource),
                format!("{prefix}/{}/{{name}}", info.resource),
                "",
            )
        };
        let name_parameter = path_parameter("name", &format!("The name of the {kind}."));
        let namespace_parameter = path_parameter("namespace", "The object's namespace.");
        let mut common = vec![];
        if info.namespaced {
            common.push(namespace_parameter.clone());
        }
        common.push(pretty());

        // The collection: list (and watch), create, deletecollection.
        let mut ops = Vec::new();
        if has("list") {
            ops.push((
                "get",
                Operation {
                    id: format!("list{ids}{scope}{kind}"),
                    description: format!("List or watch {kind} objects."),
                    action: "list",
                    gvk: gvk.clone(),
                    parameters: list_parameters(),
                    body: None,
                    responses: responses(&[("200", "OK")], list_schema, LIST_TYPES),
                },
            ));
        }
        if has("create") {
            ops.push((
                "post",
                Operation {
                    id: format!("create{ids}{scope}{kind}"),
                    description: format!("Create a {kind}."),
                    action: "post",
                    gvk: gvk.clone(),
                    parameters: write_parameters(false),
                    body: Some(body(schema, &["*/*"])),
                    responses: responses(
                        &[("200", "OK"), ("201", "Created"), ("202", "Accepted")],
                        schema,
                        RESPONSE_TYPES,
                    ),
                },
            ));
        }
        if has("deletecollection") {
            let mut parameters = delete_parameters();
            parameters.extend(selector_parameters());
            parameters.extend(paging_parameters());
            ops.push((
                "delete",
                Operation {
                    id: format!("delete{ids}Collection{scope}{kind}"),
                    description: format!("Delete a collection of {kind} objects."),
                    action: "deletecollection",
                    gvk: gvk.clone(),
                    parameters,
                    body: Some(body(&shared.delete_options, &["*/*"])),
                    responses: responses(&[("200", "OK")], &shared.status, RESPONSE_TYPES),
                },
            ));
        }
        insert_path(&mut paths, &collection, common.clone(), ops, &tag);

        // One object: read, replace, patch, delete.
        let mut item_common = vec![name_parameter.clone()];
        item_common.extend(common.iter().cloned());
        let mut ops = Vec::new();
        if has("get") {
            ops.push((
                "get",
                Operation {
                    id: format!("read{ids}{scope}{kind}"),
                    description: format!("Read the named {kind}."),
                    action: "get",
                    gvk: gvk.clone(),
                    parameters: Vec::new(),
                    body: None,
                    responses: responses(&[("200", "OK")], schema, RESPONSE_TYPES),
                },
            ));
        }
        ops.extend(write_operations(
            &ids,
            &format!("{scope}{kind}"),
            &format!("named {kind}"),
            &gvk,
            (schema, &shared.patch),
            &has,
        ));
        if has("delete") {
            ops.push((
                "delete",
                Operation {
                    id: format!("delete{ids}{scope}{kind}"),
                    description: format!("Delete the named {kind}."),
                    action: "delete",
                    gvk: gvk.clone(),
                    parameters: delete_parameters(),
                    body: Some(body(&shared.delete_options, &["*/*"])),
                    responses: responses(
                        &[("200", "OK"), ("202", "Accepted")],
                        &shared.status,
                        RESPONSE_TYPES,
                    ),
                },
            ));
        }
        insert_path(&mut paths, &item, item_common.clone(), ops, &tag);

        // Across all namespaces: list (and watch).
        if info.namespaced && has("list") {
            let mut parameters = list_parameters();
            parameters.push(pretty());
            let op = Operation {
                id: format!("list{ids}{kind}ForAllNamespaces"),
                description: format!("List or watch {kind} objects in every namespace."),
                action: "list",
                gvk: gvk.clone(),
                parameters: Vec::new(),
                body: None,
                responses: responses(&[("200", "OK")], list_schema, LIST_TYPES),
            };
            insert_path(
                &mut paths,
                &format!("{prefix}/{}", info.resource),
                parameters,
                vec![("get", op)],
                &tag,
            );
        }

        // Subresources.
        for sub in &r.subresources {
            let Some((sub_schema, _)) = kinds.component(&sub.kind) else {
                continue;
            };
            let sub_kind = r.subresource_gvk(sub);
            let sub_gvk = json!({"group": sub_kind.group, "version": sub_kind.version, "kind": sub_kind.kind});
            let suffix = upper_first(&sub.name);
            let sub_has = |verb: &str| sub.verbs.iter().any(|v| v == verb);
            let mut ops = Vec::new();
            if sub_has("get") {
                ops.push((
                    "get",
                    Operation {
                        id: format!("read{ids}{scope}{kind}{suffix}"),
                        description: format!("Read the {} of the named {kind}.", sub.name),
                        action: "get",
                        gvk: sub_gvk.clone(),
                        parameters: Vec::new(),
                        body: None,
                        responses: responses(&[("200", "OK")], sub_schema, RESPONSE_TYPES),
                    },
                ));
            }
            ops.extend(write_operations(
                &ids,
                &format!("{scope}{kind}{suffix}"),
                &format!("{} of the named {kind}", sub.name),
                &sub_gvk,
                (sub_schema, &shared.patch),
                &sub_has,
            ));
            insert_path(
                &mut paths,
                &format!("{item}/{}", sub.name),
                item_common.clone(),
                ops,
                &tag,
            );
        }
    }
    paths
}

/// PUT and PATCH of an object or subresource (`what`, e.g. "named ConfigMap"), where its verbs
/// allow them; `schemas` are the object's and the patch body's.
fn write_operations<'a>(
    ids: &str,
    subject: &str,
    what: &str,
    gvk: &Value,
    (schema, patch): (&str, &str),
    has: &dyn Fn(&str) -> bool,
) -> Vec<(&'static str, Operation<'a>)> {
    let mut ops = Vec::new();
    if has("update") {
        ops.push((
            "put",
            Operation {
                id: format!("replace{ids}{subject}"),
                description: format!("Replace the {what}."),
                action: "put",
                gvk: gvk.clone(),
                parameters: write_parameters(false),
                body: Some(body(schema, &["*/*"])),
                responses: responses(&[("200", "OK"), ("201", "Created")], schema, RESPONSE_TYPES),
            },
        ));
    }
    if has("patch") {
        ops.push((
            "patch",
            Operation {
                id: format!("patch{ids}{subject}"),
                description: format!("Partially update the {what}."),
                action: "patch",
                gvk: gvk.clone(),
                parameters: write_parameters(true),
                body: Some(body(patch, PATCH_TYPES)),
                responses: responses(&[("200", "OK"), ("201", "Created")], schema, RESPONSE_TYPES),
            },
        ));
    }
    ops
}

fn insert_path(
    paths: &mut Map<String, Value>,
    path: &str,
    parameters: Vec<Value>,
    ops: Vec<(&str, Operation<'_>)>,
    tag: &str,
) {
    if ops.is_empty() {
        return;
    }
    let mut item = Map::new();
    item.insert("parameters".into(), Value::Array(parameters));
    for (method, op) in ops {
        item.insert(method.to_owned(), op.to_json(tag));
    }
    paths.insert(path.to_owned(), Value::Object(item));
}
