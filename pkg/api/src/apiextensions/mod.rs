//! CustomResourceDefinitions (`apiextensions.k8s.io/v1`, cluster-scoped), as kube-apiserver's
//! apiextensions-apiserver serves them (Kubernetes 1.33).
//!
//! - [`decode()`] type-checks a CRD, its `openAPIV3Schema`s included (the `items`,
//!   `additionalProperties`, `additionalItems` and `dependencies` unions and the numeric
//!   `maximum`/`minimum`/`multipleOf` too, which the [`Struct`] schema holds as [`Type::Any`]);
//! - [`default`]: upstream's `SetDefaults_CustomResourceDefinition` (singular and listKind from
//!   the kind, conversion strategy `None`, webhook service port 443, the storage version in
//!   `status.storedVersions`) plus the fields Go always writes (`served`, `storage`,
//!   `status.acceptedNames`, ...);
//! - [`prepare_for_create`] / [`prepare_for_update`] / [`prepare_for_status_update`]: the
//!   strategies of the resource and of its `status` subresource;
//! - [`validation`]: upstream's `ValidateCustomResourceDefinition(Update)`, with the checks of
//!   each version's `openAPIV3Schema` *internals* (structural schema, defaults, CEL rules) left
//!   to a function the caller passes ([`validation::SchemaCheck`]);
//! - [`approval`]: which groups need the API approval annotation and what its value says;
//! - [`status`]: pure helpers for the conditions and accepted names the CRD controllers write;
//! - deletion: a CRD is never deleted at once: the first DELETE adds the
//!   `customresourcecleanup.apiextensions.k8s.io` finalizer and the `Terminating` condition
//!   ([`mark_deleting`]); the finalizer controller removes the custom resources, then the
//!   finalizer.
//!
//! ## Protobuf
//!
//! The fields Go always writes in JSON (`plural`, `kind`, `group`, `served`, ...) are marked
//! [`Field::pointer`] so that protobuf input gives the JSON Go would write, empty strings
//! included (gogo writes them on the wire).
//!
//! Upstream's protobuf messages of the JSONSchemaProps unions (`JSONSchemaPropsOrArray`,
//! `...OrBool`, `...OrStringArray`) and its `double` fields have no counterpart in
//! [`Type`]: [`SCHEMA`] holds them as [`Type::Any`] (a message of raw JSON). A
//! CRD survives a protobuf round trip through genplane, but a Go client reading it as protobuf
//! would not understand those fields. Clients send and read CRDs as JSON (kubectl, client-go's
//! apiextensions clientset, kube-rs), so this is a documented gap, not a practical one.

pub mod approval;
pub mod status;
pub mod validation;

const SPEC_SCHEMA: &str =
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinitionSpec";
const NAMES_SCHEMA: &str =
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinitionNames";
const VERSION_SCHEMA: &str =
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinitionVersion";
const STATUS_SCHEMA: &str =
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinitionStatus";

/// The list and patch semantics of the CustomResourceDefinition's own types.
pub static EXTENSIONS: &[crate::schema::Extensions] = &[
    crate::schema::atomic_list(SPEC_SCHEMA, "versions"),
    crate::schema::atomic_list(NAMES_SCHEMA, "shortNames"),
    crate::schema::atomic_list(NAMES_SCHEMA, "categories"),
    crate::schema::atomic_list(VERSION_SCHEMA, "additionalPrinterColumns"),
    crate::schema::atomic_list(VERSION_SCHEMA, "selectableFields"),
    crate::schema::atomic_list(
        "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.WebhookConversion",
        "conversionReviewVersions",
    ),
    crate::schema::atomic_list(STATUS_SCHEMA, "storedVersions"),
    crate::schema::Extensions {
        schema: STATUS_SCHEMA,
        property: "conditions",
        list_type: Some(crate::schema::ListType::Map),
        list_map_keys: &["type"],
        ..crate::schema::NONE
    },
    crate::schema::keyed_list(
        "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaProps",
        "x-kubernetes-validations",
        &["rule"],
    ),
];

/// This resource in the catalog: everything the server needs to serve it.
pub const INFO: crate::resource::ResourceInfo = crate::resource::ResourceInfo {
    group: "apiextensions.k8s.io",
    version: "v1",
    kind: "CustomResourceDefinition",
    list_kind: "CustomResourceDefinitionList",
    resource: "customresourcedefinitions",
    singular: "customresourcedefinition",
    short_names: &["crd", "crds"],
    namespaced: false,
    create_on_update: false,
    verbs: crate::resource::ALL_VERBS,
    subresources: &[crate::resource::Subresource {
        name: "status",
        kind: "CustomResourceDefinition",
        verbs: crate::resource::STATUS_VERBS,
        rules: Some(crate::resource::SubresourceRules {
            prepare_for_update: prepare_for_status_update,
            validate_update: validate_status_update,
        }),
        body: None,
    }],
    categories: &["api-extensions"],
    storage_prefix: "apiextensions.k8s.io/customresourcedefinitions",
    storage_api_version: "apiextensions.k8s.io/v1",
    schema: &SCHEMA,
    protobuf: true,
    feature_gate: None,
    extensions: EXTENSIONS,
    openapi_schema: crate::schema::schema_of::<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition>,
    hooks: crate::resource::Hooks {
        decode,
        default,
        prepare_for_create,
        prepare_for_update,
        validate,
        validate_update,
        to_storage: None,
        from_storage: None,
        field_selectors: FIELD_SELECTORS,
        field_values,
        columns: COLUMNS,
        row,
        pending_finalization,
        mark_deleting,
        grace_period: crate::resource::not_graceful,
    },
};

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use genplane_apimachinery::codec::decode::{self, DecodeError, Decoded};
use genplane_apimachinery::codec::schema::{Field, Struct, Type};
use genplane_apimachinery::errors::ApiError;
use genplane_apimachinery::meta::schemas::OBJECT_META;
use genplane_apimachinery::validation::field::{ErrorList, Path};
use serde_json::{Map, Value, json};

use crate::table::{self, ColumnDefinition};
use crate::util;

/// The kind.
pub const KIND: &str = "CustomResourceDefinition";
/// The API group.
pub const GROUP: &str = "apiextensions.k8s.io";
/// The API version.
pub const API_VERSION: &str = "apiextensions.k8s.io/v1";
/// The finalizer the first DELETE adds; the finalizer controller removes it once every custom
/// resource of the CRD is gone.
pub const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";
/// The annotation a CRD of a protected group (`*.k8s.io`, `*.kubernetes.io`) needs.
pub const API_APPROVED_ANNOTATION: &str = "api-approved.kubernetes.io";

static EXTERNAL_DOCUMENTATION: Struct = Struct {
    name: "ExternalDocumentation",
    fields: &[
        Field::new("description", 1, Type::String),
        Field::new("url", 2, Type::String),
    ],
};

static VALIDATION_RULE: Struct = Struct {
    name: "ValidationRule",
    fields: &[
        Field::new("rule", 1, Type::String),
        Field::new("message", 2, Type::String),
        Field::new("messageExpression", 3, Type::String),
        Field::pointer("reason", 4, Type::String),
        Field::new("fieldPath", 5, Type::String),
        Field::pointer("optionalOldSelf", 6, Type::Bool),
    ],
};

/// The schema node: `JSONSchemaProps` (recursive). The unions and doubles are [`Type::Any`]
/// here and checked by [`decode()`].
pub static JSON_SCHEMA_PROPS: Struct = Struct {
    name: "JSONSchemaProps",
    fields: &[
        Field::new("id", 1, Type::String),
        Field::new("$schema", 2, Type::String),
        Field::pointer("$ref", 3, Type::String),
        Field::new("description", 4, Type::String),
        Field::new("type", 5, Type::String),
        Field::new("format", 6, Type::String),
        Field::new("title", 7, Type::String),
        Field::pointer("default", 8, Type::Any),
        Field::pointer("maximum", 9, Type::Any),
        Field::new("exclusiveMaximum", 10, Type::Bool),
        Field::pointer("minimum", 11, Type::Any),
        Field::new("exclusiveMinimum", 12, Type::Bool),
        Field::pointer("maxLength", 13, Type::Int64),
        Field::pointer("minLength", 14, Type::Int64),
        Field::new("pattern", 15, Type::String),
        Field::pointer("maxItems", 16, Type::Int64),
        Field::pointer("minItems", 17, Type::Int64),
        Field::new("uniqueItems", 18, Type::Bool),
        Field::pointer("multipleOf", 19, Type::Any),
        Field::new("enum", 20, Type::List(&Type::Any)),
        Field::pointer("maxProperties", 21, Type::Int64),
        Field::pointer("minProperties", 22, Type::Int64),
        Field::new("required", 23, Type::List(&Type::String)),
        Field::pointer("items", 24, Type::Any),
        Field::new("allOf", 25, Type::List(&Type::Struct(&JSON_SCHEMA_PROPS))),
        Field::new("oneOf", 26, Type::List(&Type::Struct(&JSON_SCHEMA_PROPS))),
        Field::new("anyOf", 27, Type::List(&Type::Struct(&JSON_SCHEMA_PROPS))),
        Field::pointer("not", 28, Type::Struct(&JSON_SCHEMA_PROPS)),
        Field::new(
            "properties",
            29,
            Type::Map(&Type::Struct(&JSON_SCHEMA_PROPS)),
        ),
        Field::pointer("additionalProperties", 30, Type::Any),
        Field::new(
            "patternProperties",
            31,
            Type::Map(&Type::Struct(&JSON_SCHEMA_PROPS)),
        ),
        Field::new("dependencies", 32, Type::Map(&Type::Any)),
        Field::pointer("additionalItems", 33, Type::Any),
        Field::new(
            "definitions",
            34,
            Type::Map(&Type::Struct(&JSON_SCHEMA_PROPS)),
        ),
        Field::pointer("externalDocs", 35, Type::Struct(&EXTERNAL_DOCUMENTATION)),
        Field::pointer("example", 36, Type::Any),
        Field::new("nullable", 37, Type::Bool),
        Field::pointer("x-kubernetes-preserve-unknown-fields", 38, Type::Bool),
        Field::new("x-kubernetes-embedded-resource", 39, Type::Bool),
        Field::new("x-kubernetes-int-or-string", 40, Type::Bool),
        Field::new("x-kubernetes-list-map-keys", 41, Type::List(&Type::String)),
        Field::pointer("x-kubernetes-list-type", 42, Type::String),
        Field::pointer("x-kubernetes-map-type", 43, Type::String),
        Field::new(
            "x-kubernetes-validations",
            44,
            Type::List(&Type::Struct(&VALIDATION_RULE)),
        ),
    ],
};

static CUSTOM_RESOURCE_VALIDATION: Struct = Struct {
    name: "CustomResourceValidation",
    fields: &[Field::pointer(
        "openAPIV3Schema",
        1,
        Type::Struct(&JSON_SCHEMA_PROPS),
    )],
};

static SUBRESOURCE_STATUS: Struct = Struct {
    name: "CustomResourceSubresourceStatus",
    fields: &[],
};

static SUBRESOURCE_SCALE: Struct = Struct {
    name: "CustomResourceSubresourceScale",
    fields: &[
        Field::pointer("specReplicasPath", 1, Type::String),
        Field::pointer("statusReplicasPath", 2, Type::String),
        Field::pointer("labelSelectorPath", 3, Type::String),
    ],
};

static SUBRESOURCES: Struct = Struct {
    name: "CustomResourceSubresources",
    fields: &[
        Field::pointer("status", 1, Type::Struct(&SUBRESOURCE_STATUS)),
        Field::pointer("scale", 2, Type::Struct(&SUBRESOURCE_SCALE)),
    ],
};

static COLUMN_DEFINITION: Struct = Struct {
    name: "CustomResourceColumnDefinition",
    fields: &[
        Field::pointer("name", 1, Type::String),
        Field::pointer("type", 2, Type::String),
        Field::new("format", 3, Type::String),
        Field::new("description", 4, Type::String),
        Field::new("priority", 5, Type::Int32),
        Field::pointer("jsonPath", 6, Type::String),
    ],
};

static SELECTABLE_FIELD: Struct = Struct {
    name: "SelectableField",
    fields: &[Field::pointer("jsonPath", 1, Type::String)],
};

static VERSION: Struct = Struct {
    name: "CustomResourceDefinitionVersion",
    fields: &[
        Field::pointer("name", 1, Type::String),
        Field::pointer("served", 2, Type::Bool),
        Field::pointer("storage", 3, Type::Bool),
        Field::new("deprecated", 7, Type::Bool),
        Field::pointer("deprecationWarning", 8, Type::String),
        Field::pointer("schema", 4, Type::Struct(&CUSTOM_RESOURCE_VALIDATION)),
        Field::pointer("subresources", 5, Type::Struct(&SUBRESOURCES)),
        Field::new(
            "additionalPrinterColumns",
            6,
            Type::List(&Type::Struct(&COLUMN_DEFINITION)),
        ),
        Field::new(
            "selectableFields",
            9,
            Type::List(&Type::Struct(&SELECTABLE_FIELD)),
        ),
    ],
};

static NAMES: Struct = Struct {
    name: "CustomResourceDefinitionNames",
    fields: &[
        Field::pointer("plural", 1, Type::String),
        Field::new("singular", 2, Type::String),
        Field::new("shortNames", 3, Type::List(&Type::String)),
        Field::pointer("kind", 4, Type::String),
        Field::new("listKind", 5, Type::String),
        Field::new("categories", 6, Type::List(&Type::String)),
    ],
};

static SERVICE_REFERENCE: Struct = Struct {
    name: "ServiceReference",
    fields: &[
        Field::pointer("namespace", 1, Type::String),
        Field::pointer("name", 2, Type::String),
        Field::pointer("path", 3, Type::String),
        Field::pointer("port", 4, Type::Int32),
    ],
};

static WEBHOOK_CLIENT_CONFIG: Struct = Struct {
    name: "WebhookClientConfig",
    fields: &[
        Field::pointer("url", 3, Type::String),
        Field::pointer("service", 1, Type::Struct(&SERVICE_REFERENCE)),
        Field::new("caBundle", 2, Type::Bytes),
    ],
};

static WEBHOOK_CONVERSION: Struct = Struct {
    name: "WebhookConversion",
    fields: &[
        Field::pointer("clientConfig", 2, Type::Struct(&WEBHOOK_CLIENT_CONFIG)),
        Field::new("conversionReviewVersions", 3, Type::List(&Type::String)),
    ],
};

static CONVERSION: Struct = Struct {
    name: "CustomResourceConversion",
    fields: &[
        Field::pointer("strategy", 1, Type::String),
        Field::pointer("webhook", 2, Type::Struct(&WEBHOOK_CONVERSION)),
    ],
};

static SPEC: Struct = Struct {
    name: "CustomResourceDefinitionSpec",
    fields: &[
        Field::pointer("group", 1, Type::String),
        Field::new("names", 3, Type::Struct(&NAMES)),
        Field::pointer("scope", 4, Type::String),
        Field::new("versions", 7, Type::List(&Type::Struct(&VERSION))).keep_empty(),
        Field::pointer("conversion", 9, Type::Struct(&CONVERSION)),
        Field::new("preserveUnknownFields", 10, Type::Bool),
    ],
};

static CONDITION: Struct = Struct {
    name: "CustomResourceDefinitionCondition",
    fields: &[
        Field::pointer("type", 1, Type::String),
        Field::pointer("status", 2, Type::String),
        Field::new("lastTransitionTime", 3, Type::Time),
        Field::new("reason", 4, Type::String),
        Field::new("message", 5, Type::String),
    ],
};

static STATUS: Struct = Struct {
    name: "CustomResourceDefinitionStatus",
    fields: &[
        Field::new("conditions", 1, Type::List(&Type::Struct(&CONDITION))),
        Field::new("acceptedNames", 2, Type::Struct(&NAMES)),
        Field::new("storedVersions", 3, Type::List(&Type::String)).keep_empty(),
    ],
};

/// The shape of an apiextensions.k8s.io/v1 CustomResourceDefinition.
pub static SCHEMA: Struct = Struct {
    name: "CustomResourceDefinition",
    fields: &[
        Field::type_meta("kind"),
        Field::type_meta("apiVersion"),
        Field::new("metadata", 1, Type::Struct(&OBJECT_META)),
        Field::new("spec", 2, Type::Struct(&SPEC)),
        Field::new("status", 3, Type::Struct(&STATUS)),
    ],
};

/// Type-checks and normalizes a CustomResourceDefinition, its schemas included.
pub fn decode(object: &Value) -> Result<Decoded, ApiError> {
    decode_crd(object).map_err(|e| e.to_api_error(KIND, API_VERSION))
}

fn decode_crd(object: &Value) -> Result<Decoded, DecodeError> {
    let mut decoded = decode::decode(object, &SCHEMA)?;
    let mut walker = SchemaWalker {
        unknown: Vec::new(),
    };
    if let Some(versions) = decoded
        .object
        .pointer_mut("/spec/versions")
        .and_then(Value::as_array_mut)
    {
        for (i, version) in versions.iter_mut().enumerate() {
            if let Some(schema) = version.pointer_mut("/schema/openAPIV3Schema") {
                let path = Path::new("spec")
                    .child("versions")
                    .index(i)
                    .child("schema")
                    .child("openAPIV3Schema");
                walker.schema(schema, &path)?;
            }
        }
    }
    decoded.unknown_fields.extend(walker.unknown);
    Ok(decoded)
}

/// Checks the parts of a decoded schema tree that [`JSON_SCHEMA_PROPS`] holds as
/// [`Type::Any`], decoding the schemas inside the unions.
struct SchemaWalker {
    unknown: Vec<String>,
}

fn schema_error(path: &Path, found: &Value, expected: &str) -> DecodeError {
    DecodeError::WrongType {
        field: format!("{}.{path}", SCHEMA.name),
        found: json_kind(found),
        expected: expected.to_owned(),
    }
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

impl SchemaWalker {
    /// Decodes a schema given inside a union (it was kept as raw JSON), then walks it.
    fn raw_schema(&mut self, value: &mut Value, path: &Path) -> Result<(), DecodeError> {
        let decoded = decode::decode(value, &JSON_SCHEMA_PROPS).map_err(|e| rebase(e, path))?;
        self.unknown.extend(
            decoded
                .unknown_fields
                .into_iter()
                .map(|f| format!("{path}.{f}")),
        );
        *value = decoded.object;
        self.schema(value, path)
    }

    /// Walks a decoded schema node and every node below it.
    fn schema(&mut self, node: &mut Value, path: &Path) -> Result<(), DecodeError> {
        let Some(map) = node.as_object_mut() else {
            return Ok(());
        };
        for key in ["maximum", "minimum", "multipleOf"] {
            if let Some(v) = map.get(key).filter(|v| !v.is_number()) {
                return Err(schema_error(&path.child(key), v, "float64"));
            }
        }
        for key in ["properties", "patternProperties", "definitions"] {
            if let Some(Value::Object(children)) = map.get_mut(key) {
                for (name, child) in children.iter_mut() {
                    self.schema(child, &path.child(key).key(name))?;
                }
            }
        }
        for key in ["allOf", "oneOf", "anyOf"] {
            if let Some(Value::Array(children)) = map.get_mut(key) {
                for (i, child) in children.iter_mut().enumerate() {
                    self.schema(child, &path.child(key).index(i))?;
                }
            }
        }
        if let Some(not) = map.get_mut("not") {
            self.schema(not, &path.child("not"))?;
        }
        // items: a schema or a list of schemas; anything else reads as nothing (as upstream).
        match map.get_mut("items") {
            Some(items @ Value::Object(_)) => self.raw_schema(items, &path.child("items"))?,
            Some(Value::Array(list)) => {
                for (i, item) in list.iter_mut().enumerate() {
                    let at = path.child("items").index(i);
                    match item {
                        Value::Object(_) => self.raw_schema(item, &at)?,
                        other => return Err(schema_error(&at, other, "JSONSchemaProps")),
                    }
                }
            }
            Some(_) => {
                map.remove("items");
            }
            None => {}
        }
        for key in ["additionalProperties", "additionalItems"] {
            match map.get_mut(key) {
                Some(v @ Value::Object(_)) => self.raw_schema(v, &path.child(key))?,
                Some(Value::Bool(_)) | None => {}
                Some(_) => {
                    return Err(DecodeError::BadValue {
                        field: format!("{}.{}", SCHEMA.name, path.child(key)),
                        message: "boolean or JSON schema expected".to_owned(),
                    });
                }
            }
        }
        if let Some(Value::Object(dependencies)) = map.get_mut("dependencies") {
            for (name, dependency) in dependencies.iter_mut() {
                let at = path.child("dependencies").key(name);
                match dependency {
                    Value::Object(_) => self.raw_schema(dependency, &at)?,
                    Value::Array(items) => {
                        for (i, item) in items.iter().enumerate() {
                            if !item.is_string() {
                                return Err(schema_error(&at.index(i), item, "string"));
                            }
                        }
                    }
                    other => *other = Value::Null,
                }
            }
        }
        Ok(())
    }
}

/// Moves an error of a schema decoded on its own below the CRD's field path.
fn rebase(error: DecodeError, path: &Path) -> DecodeError {
    let rename = |field: String| {
        let rest = field
            .strip_prefix(JSON_SCHEMA_PROPS.name)
            .unwrap_or(&field)
            .to_owned();
        format!("{}.{path}{rest}", SCHEMA.name)
    };
    match error {
        DecodeError::WrongType {
            field,
            found,
            expected,
        } => DecodeError::WrongType {
            field: rename(field),
            found,
            expected,
        },
        DecodeError::BadValue { field, message } => DecodeError::BadValue {
            field: rename(field),
            message,
        },
    }
}

fn object_at<'a>(value: &'a mut Value, key: &str) -> Option<&'a mut Map<String, Value>> {
    let map = value.as_object_mut()?;
    let entry = map
        .entry(key.to_owned())
        .or_insert_with(|| Value::Object(Map::new()));
    if !entry.is_object() {
        *entry = Value::Object(Map::new());
    }
    entry.as_object_mut()
}

fn ensure(map: &mut Map<String, Value>, key: &str, value: Value) {
    if !map.contains_key(key) {
        map.insert(key.to_owned(), value);
    }
}

/// The status a CRD has before any controller wrote to it: Go writes `conditions`,
/// `acceptedNames` (with its `plural` and `kind`) and `storedVersions` even when empty.
fn normalize_status(object: &mut Value) {
    let Some(status) = object_at(object, "status") else {
        return;
    };
    ensure(status, "conditions", Value::Null);
    ensure(status, "storedVersions", Value::Null);
    ensure(status, "acceptedNames", json!({}));
    if let Some(names) = status
        .get_mut("acceptedNames")
        .and_then(Value::as_object_mut)
    {
        ensure(names, "plural", json!(""));
        ensure(names, "kind", json!(""));
    }
}

/// Upstream's defaulting (`SetDefaults_CustomResourceDefinition` and friends), plus the fields
/// Go always writes (`served`, `storage`, `names.plural`/`kind`, `status.acceptedNames`, ...).
pub fn default(object: &mut Value) {
    if !object.is_object() {
        return;
    }
    if let Some(spec) = object_at(object, "spec") {
        ensure(spec, "group", json!(""));
        ensure(spec, "scope", json!(""));
        ensure(spec, "versions", Value::Null);
        ensure(spec, "names", json!({}));
        if let Some(names) = spec.get_mut("names").and_then(Value::as_object_mut) {
            ensure(names, "plural", json!(""));
            ensure(names, "kind", json!(""));
            let kind = names
                .get("kind")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned();
            let empty = |names: &Map<String, Value>, key: &str| {
                names
                    .get(key)
                    .and_then(Value::as_str)
                    .is_none_or(str::is_empty)
            };
            if empty(names, "singular") {
                names.insert("singular".into(), Value::from(kind.to_lowercase()));
            }
            if empty(names, "listKind") && !kind.is_empty() {
                names.insert("listKind".into(), Value::from(format!("{kind}List")));
            }
            if empty(names, "singular") {
                names.remove("singular");
            }
        }
        if let Some(versions) = spec.get_mut("versions").and_then(Value::as_array_mut) {
            for version in versions.iter_mut().filter_map(Value::as_object_mut) {
                ensure(version, "name", json!(""));
                ensure(version, "served", json!(false));
                ensure(version, "storage", json!(false));
                if let Some(scale) = version
                    .get_mut("subresources")
                    .and_then(|s| s.get_mut("scale"))
                    .and_then(Value::as_object_mut)
                {
                    ensure(scale, "specReplicasPath", json!(""));
                    ensure(scale, "statusReplicasPath", json!(""));
                }
                for key in ["additionalPrinterColumns", "selectableFields"] {
                    if let Some(items) = version.get_mut(key).and_then(Value::as_array_mut) {
                        for item in items.iter_mut().filter_map(Value::as_object_mut) {
                            ensure(item, "jsonPath", json!(""));
                            if key == "additionalPrinterColumns" {
                                ensure(item, "name", json!(""));
                                ensure(item, "type", json!(""));
                            }
                        }
                    }
                }
            }
        }
        if spec.get("conversion").is_none_or(Value::is_null) {
            spec.insert("conversion".into(), json!({"strategy": "None"}));
        }
        if let Some(conversion) = spec.get_mut("conversion").and_then(Value::as_object_mut) {
            ensure(conversion, "strategy", json!(""));
            if let Some(webhook) = conversion.get_mut("webhook").and_then(Value::as_object_mut) {
                ensure(webhook, "conversionReviewVersions", Value::Null);
                if let Some(service) = webhook
                    .get_mut("clientConfig")
                    .and_then(|c| c.get_mut("service"))
                    .and_then(Value::as_object_mut)
                {
                    ensure(service, "namespace", json!(""));
                    ensure(service, "name", json!(""));
                    if service.get("port").is_none_or(Value::is_null) {
                        service.insert("port".into(), json!(443));
                    }
                }
            }
        }
    }
    normalize_status(object);
    let stored_empty = object
        .pointer("/status/storedVersions")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty);
    if stored_empty && let Some(storage) = storage_version(object) {
        object["status"]["storedVersions"] = json!([storage]);
    }
}

/// The name of the first version with `storage: true`.
pub fn storage_version(crd: &Value) -> Option<String> {
    crd.pointer("/spec/versions")?
        .as_array()?
        .iter()
        .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .and_then(|v| v.get("name"))
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// Appends the storage version to `status.storedVersions` when it is not there yet.
fn record_storage_version(object: &mut Value) {
    let Some(storage) = storage_version(object) else {
        return;
    };
    normalize_status(object);
    let stored = &mut object["status"]["storedVersions"];
    if !stored.is_array() {
        *stored = json!([]);
    }
    if let Some(list) = stored.as_array_mut()
        && !list.iter().any(|v| v.as_str() == Some(storage.as_str()))
    {
        list.push(Value::from(storage));
    }
}

fn set_generation(object: &mut Value, generation: i64) {
    if let Some(meta) = object_at(object, "metadata") {
        meta.insert("generation".into(), Value::from(generation));
    }
}

/// The strategy on create: the status is cleared (only the storage version is recorded in
/// `storedVersions`) and the generation is 1.
pub fn prepare_for_create(object: &mut Value, _context: &crate::resource::Context<'_>) {
    if let Some(map) = object.as_object_mut() {
        map.insert("status".into(), json!({}));
    }
    normalize_status(object);
    set_generation(object, 1);
    record_storage_version(object);
}

/// The strategy on update: the status keeps its stored value (only the status subresource
/// writes it), the generation goes up by one when the spec changed, and a new storage version
/// is appended to `status.storedVersions`.
pub fn prepare_for_update(new: &mut Value, old: &Value, _context: &crate::resource::Context<'_>) {
    let Some(map) = new.as_object_mut() else {
        return;
    };
    match old.get("status") {
        Some(status) => map.insert("status".into(), status.clone()),
        None => map.remove("status"),
    };
    let old_generation = old
        .pointer("/metadata/generation")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let generation = if new.get("spec") == old.get("spec") {
        old_generation
    } else {
        old_generation + 1
    };
    set_generation(new, generation);
    record_storage_version(new);
}

/// The strategy of the `status` subresource: the spec keeps its stored value.
pub fn prepare_for_status_update(
    new: &mut Value,
    old: &Value,
    _context: &crate::resource::Context<'_>,
) {
    if let Some(map) = new.as_object_mut() {
        match old.get("spec") {
            Some(spec) => map.insert("spec".into(), spec.clone()),
            None => map.remove("spec"),
        };
    }
}

/// Validates a new CRD, with no check of the schemas' internals (see
/// [`validation::validate_crd`]: the server calls that with the schema engine instead).
pub fn validate(object: &Value) -> Result<ErrorList, ApiError> {
    validation::validate_crd(object, None, &validation::no_schema_check)
}

/// Validates an update of a CRD, with no check of the schemas' internals.
pub fn validate_update(new: &Value, old: &Value) -> Result<ErrorList, ApiError> {
    validation::validate_crd(new, Some(old), &validation::no_schema_check)
}

/// Validates an update through the `status` subresource: metadata and `status.acceptedNames`.
pub fn validate_status_update(new: &Value, old: &Value) -> Result<ErrorList, ApiError> {
    validation::validate_status_update(new, old)
}

/// Field-selector labels: only the metadata ones (upstream includes `metadata.namespace`,
/// always empty, for CRDs).
pub const FIELD_SELECTORS: &[&str] = &["metadata.name", "metadata.namespace"];

/// Field-selector values.
pub fn field_values(object: &Value) -> BTreeMap<&'static str, String> {
    util::meta_fields(object, true)
}

/// `NAME CREATED AT`: upstream serves CRDs with the default table convertor.
pub const COLUMNS: &[ColumnDefinition] = &[
    table::NAME,
    ColumnDefinition {
        name: "Created At",
        type_: "date",
        format: "",
        description: "The time the server created the object (its creationTimestamp), in RFC 3339 form.",
        priority: 0,
    },
];

/// The cells: name and `metadata.creationTimestamp` (RFC 3339, UTC).
pub fn row(object: &Value, _now: i64) -> Vec<Value> {
    vec![
        util::name(object),
        Value::from(util::str_at(object, &["metadata", "creationTimestamp"])),
    ]
}

/// Whether the deletion of a CRD must wait: always on the first DELETE (the finalizer is not
/// there yet); afterwards [`CLEANUP_FINALIZER`] holds it.
pub fn pending_finalization(object: &Value) -> bool {
    util::str_at(object, &["metadata", "deletionTimestamp"]).is_empty()
}

/// The first DELETE of a CRD: adds [`CLEANUP_FINALIZER`] and the `Terminating` condition
/// (`InstanceDeletionPending`), whose transition time is the deletion timestamp. A later
/// DELETE leaves a `Terminating` condition alone (the finalizer controller owns it by then).
pub fn mark_deleting(object: &mut Value) {
    let Some(meta) = object_at(object, "metadata") else {
        return;
    };
    let now = meta
        .get("deletionTimestamp")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let finalizers = meta
        .entry("finalizers")
        .or_insert_with(|| Value::Array(Vec::new()));
    if !finalizers.is_array() {
        *finalizers = Value::Array(Vec::new());
    }
    if let Some(list) = finalizers.as_array_mut()
        && !list.iter().any(|f| f.as_str() == Some(CLEANUP_FINALIZER))
    {
        list.push(Value::from(CLEANUP_FINALIZER));
    }
    if status::find_condition(object, status::TERMINATING).is_none() {
        status::set_condition(object, status::terminating_pending(), &now);
    }
}
