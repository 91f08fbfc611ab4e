//! FlowSchemas (`flowcontrol.apiserver.k8s.io/v1`, cluster-scoped): which requests go to which
//! priority level, and how they split into flows there.
//!
//! Upstream rules (`ValidateFlowSchema`, `ValidateFlowSchemaStatusUpdate`, Kubernetes 1.33):
//! - the name is a DNS-1123 subdomain; the spec of a mandatory FlowSchema (`exempt`,
//!   `catch-all`) equals its fixed value;
//! - `matchingPrecedence` is in 1..=10000 (1000 when unset), and only `exempt` has 1;
//! - the distinguisher, when set, is `ByUser` or `ByNamespace`; the priority level is named,
//!   with a DNS-1123 subdomain;
//! - each rule has subjects and at least one resource or non-resource rule; a subject is a
//!   `User`, `Group` (each with a name) or `ServiceAccount` (a name, `*` or a DNS-1123 subdomain,
//!   and a namespace) and carries only its own kind's field;
//! - verbs are `*` alone or among upstream's nine; API groups and resources are given, `*`
//!   alone when present; namespaces are `*` alone or DNS-1123 labels, and may be empty only
//!   with `clusterScope`; non-resource URLs are `*` alone or paths (`/`-led, no space, no `//`,
//!   a `*` only as a last `/*`);
//! - status conditions have a type, each once.
//!
//! The strategy: a new FlowSchema starts without status at generation 1; the spec's writes
//! keep the status (the generation grows with the spec), `status` writes keep the rest.
//! The table is upstream's: `NAME PRIORITYLEVEL MATCHINGPRECEDENCE DISTINGUISHERMETHOD AGE
//! MISSINGPL`, the last the `Dangling` condition's status (`?` without it).

use std::collections::BTreeMap;

use genplane_apimachinery::codec::decode::{self, Decoded};
use genplane_apimachinery::codec::schema::{Field, Struct, Type};
use genplane_apimachinery::errors::ApiError;
use genplane_apimachinery::meta::schemas::OBJECT_META;
use genplane_apimachinery::meta::{validate_object_meta, validate_object_meta_update};
use genplane_apimachinery::validation::field::{Error, ErrorList, Path};
use genplane_apimachinery::validation::{name_is_dns_label, name_is_dns_subdomain};
use serde::Deserialize;
use serde_json::Value;

use super::{
    ALL, BY_NAMESPACE, BY_USER, ConditionType, DANGLING, FlowSchemaSpec, NonResourcePolicyRule,
    PolicyRulesWithSubjects, ResourcePolicyRule, Subject, has_wildcard, invalid_strings,
    unsupported_strings,
};
use crate::resource::{self, Hooks, ResourceInfo, Subresource, SubresourceRules};
use crate::table::{self, ColumnDefinition};
use crate::util;

/// The kind.
pub const KIND: &str = "FlowSchema";
/// The precedence of a FlowSchema that sets none.
pub const DEFAULT_MATCHING_PRECEDENCE: i32 = 1000;
/// The highest precedence value (the last tried).
pub const MAX_MATCHING_PRECEDENCE: i32 = 10000;
/// The verbs a rule may name.
pub const SUPPORTED_VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "proxy",
    "update",
    "watch",
];
const SUBJECT_KINDS: &[&str] = &["Group", "ServiceAccount", "User"];
const DISTINGUISHERS: &[&str] = &[BY_NAMESPACE, BY_USER];
const NAMESPACE_INTRO: &str = "each member of this list must be '*' or a DNS-1123 label; ";

/// The shape of a flowcontrol.apiserver.k8s.io/v1 FlowSchema.
pub static SCHEMA: Struct = Struct {
    name: "FlowSchema",
    fields: &[
        Field::type_meta("kind"),
        Field::type_meta("apiVersion"),
        Field::new("metadata", 1, Type::Struct(&OBJECT_META)),
        Field::new("spec", 2, Type::Struct(&super::FLOW_SCHEMA_SPEC)),
        Field::new("status", 3, Type::Struct(&super::FLOW_SCHEMA_STATUS)),
    ],
};

const SPEC_SCHEMA: &str = "io.k8s.api.flowcontrol.v1.FlowSchemaSpec";
const STATUS_SCHEMA: &str = "io.k8s.api.flowcontrol.v1.FlowSchemaStatus";
const RULES_SCHEMA: &str = "io.k8s.api.flowcontrol.v1.PolicyRulesWithSubjects";

/// The list and patch semantics of the FlowSchema's own types.
pub static EXTENSIONS: &[crate::schema::Extensions] = &[
    crate::schema::atomic_list(SPEC_SCHEMA, "rules"),
    crate::schema::atomic_list(RULES_SCHEMA, "subjects"),
    crate::schema::atomic_list(RULES_SCHEMA, "resourceRules"),
    crate::schema::atomic_list(RULES_SCHEMA, "nonResourceRules"),
    crate::schema::keyed_list(STATUS_SCHEMA, "conditions", &["type"]),
];

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Status {
    conditions: Vec<ConditionType>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct FlowSchema {
    spec: FlowSchemaSpec,
    status: Status,
}

/// Type-checks and normalizes a FlowSchema.
pub fn decode(object: &Value) -> Result<Decoded, ApiError> {
    decode::decode(object, &SCHEMA).map_err(|e| e.to_api_error(KIND, super::API_VERSION))
}

/// Upstream's default: `matchingPrecedence` 1000 when unset or 0.
pub fn default(object: &mut Value) {
    let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    let unset = spec
        .get("matchingPrecedence")
        .is_none_or(|p| p.is_null() || p.as_i64() == Some(0));
    if unset {
        spec.insert(
            "matchingPrecedence".into(),
            Value::from(DEFAULT_MATCHING_PRECEDENCE),
        );
    }
}

fn validate_verbs(verbs: &[String], path: &Path, errors: &mut ErrorList) {
    if verbs.is_empty() {
        errors.push(Error::required(
            path,
            "verbs must contain at least one value",
        ));
    } else if has_wildcard(verbs) {
        if verbs.len() > 1 {
            errors.push(invalid_strings(
                path,
                verbs,
                "if '*' is present, must not specify other verbs",
            ));
        }
    } else if verbs.iter().any(|v| !SUPPORTED_VERBS.contains(&v.as_str())) {
        errors.push(unsupported_strings(path, verbs, SUPPORTED_VERBS));
    }
}

fn validate_subject(subject: &Subject, path: &Path, errors: &mut ErrorList) {
    let forbid_user = |errors: &mut ErrorList| {
        if subject.user.is_some() {
            errors.push(Error::forbidden(
                &path.child("user"),
                "user is forbidden when subject kind is not 'User'",
            ));
        }
    };
    let forbid_group = |errors: &mut ErrorList| {
        if subject.group.is_some() {
            errors.push(Error::forbidden(
                &path.child("group"),
                "group is forbidden when subject kind is not 'Group'",
            ));
        }
    };
    let forbid_service_account = |errors: &mut ErrorList| {
        if subject.service_account.is_some() {
            errors.push(Error::forbidden(
                &path.child("serviceAccount"),
                "serviceAccount is forbidden when subject kind is not 'ServiceAccount'",
            ));
        }
    };
    match subject.kind.as_str() {
        "ServiceAccount" => {
            let at = path.child("serviceAccount");
            match &subject.service_account {
                None => errors.push(Error::required(
                    &at,
                    "serviceAccount is required when subject kind is 'ServiceAccount'",
                )),
                Some(account) => {
                    if account.name.is_empty() {
                        errors.push(Error::required(&at.child("name"), ""));
                    } else if account.name != ALL {
                        for message in name_is_dns_subdomain(&account.name, false) {
                            errors.push(Error::invalid(
                                &at.child("name"),
                                account.name.as_str(),
                                message,
                            ));
                        }
                    }
                    if account.namespace.is_empty() {
                        errors.push(Error::required(
                            &at.child("namespace"),
                            "must specify namespace for service account",
                        ));
                    } else {
                        for message in name_is_dns_label(&account.namespace, false) {
                            errors.push(Error::invalid(
                                &at.child("namespace"),
                                account.namespace.as_str(),
                                message,
                            ));
                        }
                    }
                }
            }
            forbid_user(errors);
            forbid_group(errors);
        }
        "User" => {
            match &subject.user {
                None => errors.push(Error::required(
                    &path.child("user"),
                    "user is required when subject kind is 'User'",
                )),
                Some(user) if user.name.is_empty() => {
                    errors.push(Error::required(&path.child("user").child("name"), ""));
                }
                Some(_) => {}
            }
            forbid_service_account(errors);
            forbid_group(errors);
        }
        "Group" => {
            match &subject.group {
                None => errors.push(Error::required(
                    &path.child("group"),
                    "group is required when subject kind is 'Group'",
                )),
                Some(group) if group.name.is_empty() => {
                    errors.push(Error::required(&path.child("group").child("name"), ""));
                }
                Some(_) => {}
            }
            forbid_service_account(errors);
            forbid_user(errors);
        }
        other => errors.push(Error::not_supported(
            &path.child("kind"),
            other,
            SUBJECT_KINDS,
        )),
    }
}

fn validate_resource_rule(rule: &ResourcePolicyRule, path: &Path, errors: &mut ErrorList) {
    validate_verbs(&rule.verbs, &path.child("verbs"), errors);
    let groups = path.child("apiGroups");
    if rule.api_groups.is_empty() {
        errors.push(Error::required(
            &groups,
            "resource rules must supply at least one api group",
        ));
    } else if rule.api_groups.len() > 1 && has_wildcard(&rule.api_groups) {
        errors.push(invalid_strings(
            &groups,
            &rule.api_groups,
            "if '*' is present, must not specify other api groups",
        ));
    }
    let resources = path.child("resources");
    if rule.resources.is_empty() {
        errors.push(Error::required(
            &resources,
            "resource rules must supply at least one resource",
        ));
    } else if rule.resources.len() > 1 && has_wildcard(&rule.resources) {
        errors.push(invalid_strings(
            &resources,
            &rule.resources,
            "if '*' is present, must not specify other resources",
        ));
    }
    let namespaces = path.child("namespaces");
    if rule.namespaces.is_empty() && !rule.cluster_scope {
        errors.push(Error::required(
            &namespaces,
            "resource rules that are not cluster scoped must supply at least one namespace",
        ));
    } else if has_wildcard(&rule.namespaces) {
        if rule.namespaces.len() > 1 {
            errors.push(invalid_strings(
                &namespaces,
                &rule.namespaces,
                "if '*' is present, must not specify other namespaces",
            ));
        }
    } else {
        for (i, namespace) in rule.namespaces.iter().enumerate() {
            for message in name_is_dns_label(namespace, false) {
                errors.push(Error::invalid(
                    &namespaces.index(i),
                    namespace.as_str(),
                    format!("{NAMESPACE_INTRO}{message}"),
                ));
            }
        }
    }
}

/// Upstream's check of a non-resource URL: `None` when it is fine.
fn non_resource_url_problem(url: &str) -> Option<&'static str> {
    if url.is_empty() {
        return Some("must not be empty");
    }
    if url == "/" {
        return None;
    }
    if !url.starts_with('/') {
        return Some("must start with slash");
    }
    if url.contains(' ') {
        return Some("must not contain white-space");
    }
    if url.contains("//") {
        return Some("must not contain double slash");
    }
    let stars = url.matches('*').count();
    if stars > 1 || (stars == 1 && !url.ends_with("/*")) {
        return Some("wildcard can only do suffix matching");
    }
    None
}

fn validate_non_resource_rule(rule: &NonResourcePolicyRule, path: &Path, errors: &mut ErrorList) {
    validate_verbs(&rule.verbs, &path.child("verbs"), errors);
    let urls = path.child("nonResourceURLs");
    if rule.non_resource_urls.is_empty() {
        errors.push(Error::required(
            &urls,
            "nonResourceURLs must contain at least one value",
        ));
    } else if has_wildcard(&rule.non_resource_urls) {
        if rule.non_resource_urls.len() > 1 {
            errors.push(invalid_strings(
                &urls,
                &rule.non_resource_urls,
                "if '*' is present, must not specify other non-resource URLs",
            ));
        }
    } else {
        for (i, url) in rule.non_resource_urls.iter().enumerate() {
            if let Some(problem) = non_resource_url_problem(url) {
                errors.push(Error::invalid(&urls.index(i), url.as_str(), problem));
            }
        }
    }
}

fn validate_rule(rule: &PolicyRulesWithSubjects, path: &Path, errors: &mut ErrorList) {
    if rule.subjects.is_empty() {
        errors.push(Error::required(
            &path.child("subjects"),
            "subjects must contain at least one value",
        ));
    }
    for (i, subject) in rule.subjects.iter().enumerate() {
        validate_subject(subject, &path.child("subjects").index(i), errors);
    }
    if rule.resource_rules.is_empty() && rule.non_resource_rules.is_empty() {
        errors.push(Error::required(
            path,
            "at least one of resourceRules and nonResourceRules has to be non-empty",
        ));
    }
    for (i, resource_rule) in rule.resource_rules.iter().enumerate() {
        validate_resource_rule(resource_rule, &path.child("resourceRules").index(i), errors);
    }
    for (i, non_resource_rule) in rule.non_resource_rules.iter().enumerate() {
        validate_non_resource_rule(
            non_resource_rule,
            &path.child("nonResourceRules").index(i),
            errors,
        );
    }
}

/// Validates the spec of the FlowSchema named `name`.
pub fn validate_spec(name: &str, spec: &FlowSchemaSpec) -> ErrorList {
    let path = Path::new("spec");
    let mut errors = ErrorList::new();
    let precedence = path.child("matchingPrecedence");
    if spec.matching_precedence <= 0 {
        errors.push(Error::invalid(
            &precedence,
            spec.matching_precedence,
            "must be a positive value",
        ));
    }
    if spec.matching_precedence > MAX_MATCHING_PRECEDENCE {
        errors.push(Error::invalid(
            &precedence,
            spec.matching_precedence,
            format!("must not be greater than {MAX_MATCHING_PRECEDENCE}"),
        ));
    }
    if spec.matching_precedence == 1 && name != super::EXEMPT {
        errors.push(Error::invalid(
            &precedence,
            spec.matching_precedence,
            "only the schema named 'exempt' may have matchingPrecedence 1",
        ));
    }
    if let Some(method) = &spec.distinguisher_method
        && !DISTINGUISHERS.contains(&method.type_.as_str())
    {
        errors.push(Error::not_supported(
            &path.child("distinguisherMethod").child("type"),
            serde_json::json!({"type": method.type_}),
            DISTINGUISHERS,
        ));
    }
    let level = &spec.priority_level_configuration.name;
    let level_path = path.child("priorityLevelConfiguration").child("name");
    if level.is_empty() {
        errors.push(Error::required(
            &level_path,
            "must reference a priority level",
        ));
    } else {
        for message in name_is_dns_subdomain(level, false) {
            errors.push(Error::invalid(&level_path, level.as_str(), message));
        }
    }
    for (i, rule) in spec.rules.iter().enumerate() {
        validate_rule(rule, &path.child("rules").index(i), &mut errors);
    }
    if let Some(fixed) = super::bootstrap::mandatory_flow_schema_spec(name)
        && *spec != fixed
    {
        errors.push(Error::invalid(
            &path,
            serde_json::to_value(spec).unwrap_or(Value::Null),
            format!("spec of '{name}' must equal the fixed value"),
        ));
    }
    errors
}

fn validate_status(status: &Status) -> ErrorList {
    super::validate_condition_types(
        status.conditions.iter().map(|c| c.type_.as_str()),
        &Path::new("status").child("conditions"),
    )
}

/// Validates a new FlowSchema.
pub fn validate(object: &Value) -> Result<ErrorList, ApiError> {
    let (meta, schema) =
        util::decode_typed::<FlowSchema>(object, &SCHEMA, KIND, super::API_VERSION)?;
    let mut errors =
        validate_object_meta(&meta, false, name_is_dns_subdomain, &Path::new("metadata"));
    errors.extend(validate_spec(&meta.name, &schema.spec));
    errors.extend(validate_status(&schema.status));
    Ok(errors)
}

/// Validates an update of a FlowSchema: the metadata's update rules, then everything a new one
/// must satisfy.
pub fn validate_update(new: &Value, old: &Value) -> Result<ErrorList, ApiError> {
    let (new_meta, _) = util::decode_typed::<FlowSchema>(new, &SCHEMA, KIND, super::API_VERSION)?;
    let (old_meta, _) = util::decode_typed::<FlowSchema>(old, &SCHEMA, KIND, super::API_VERSION)?;
    let mut errors = validate_object_meta_update(&new_meta, &old_meta, &Path::new("metadata"));
    errors.extend(validate(new)?);
    Ok(errors)
}

/// Validates a write through `status`: the metadata's update rules and the conditions.
pub fn validate_status_update(new: &Value, old: &Value) -> Result<ErrorList, ApiError> {
    let (new_meta, schema) =
        util::decode_typed::<FlowSchema>(new, &SCHEMA, KIND, super::API_VERSION)?;
    let (old_meta, _) = util::decode_typed::<FlowSchema>(old, &SCHEMA, KIND, super::API_VERSION)?;
    let mut errors = validate_object_meta_update(&new_meta, &old_meta, &Path::new("metadata"));
    errors.extend(validate_status(&schema.status));
    Ok(errors)
}

/// Field-selector labels: only the metadata ones.
pub const FIELD_SELECTORS: &[&str] = &["metadata.name"];

/// Field-selector values.
pub fn field_values(object: &Value) -> BTreeMap<&'static str, String> {
    util::meta_fields(object, false)
}

/// `NAME PRIORITYLEVEL MATCHINGPRECEDENCE DISTINGUISHERMETHOD AGE MISSINGPL`.
pub const COLUMNS: &[ColumnDefinition] = &[
    table::NAME,
    table::column(
        "PriorityLevel",
        "The name of the PriorityLevelConfiguration the matching requests are handled at.",
        0,
    ),
    table::column(
        "MatchingPrecedence",
        "The order in which FlowSchemas are tried: the lowest value first.",
        0,
    ),
    table::column(
        "DistinguisherMethod",
        "How the matching requests split into flows: by user, by namespace, or not at all.",
        0,
    ),
    table::AGE,
    table::column(
        "MissingPL",
        "indicates if the referenced priority level exists",
        0,
    ),
];

/// The cells: name, priority level, precedence, distinguisher (`<none>`), age, the `Dangling`
/// condition's status (`?`).
pub fn row(object: &Value, now: i64) -> Vec<Value> {
    let distinguisher = object
        .pointer("/spec/distinguisherMethod/type")
        .and_then(Value::as_str)
        .unwrap_or("<none>");
    let dangling = object
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|conditions| conditions.iter().find(|c| c["type"] == DANGLING))
        .and_then(|c| c["status"].as_str())
        .unwrap_or("?");
    vec![
        util::name(object),
        Value::from(util::str_at(
            object,
            &["spec", "priorityLevelConfiguration", "name"],
        )),
        object
            .pointer("/spec/matchingPrecedence")
            .cloned()
            .unwrap_or(Value::from(0)),
        Value::from(distinguisher),
        util::age(object, now),
        Value::from(dangling),
    ]
}

/// This resource in the catalog: everything the server needs to serve it.
pub static INFO: ResourceInfo = ResourceInfo {
    group: super::GROUP,
    version: "v1",
    kind: KIND,
    list_kind: "FlowSchemaList",
    resource: "flowschemas",
    singular: "flowschema",
    short_names: &[],
    namespaced: false,
    create_on_update: false,
    verbs: resource::ALL_VERBS,
    subresources: &[Subresource {
        name: "status",
        kind: KIND,
        verbs: resource::STATUS_VERBS,
        rules: Some(SubresourceRules {
            prepare_for_update: util::prepare_status_update,
            validate_update: validate_status_update,
        }),
        body: None,
    }],
    categories: &[],
    storage_prefix: "flowschemas",
    storage_api_version: super::API_VERSION,
    schema: &SCHEMA,
    protobuf: true,
    feature_gate: None,
    extensions: EXTENSIONS,
    openapi_schema: crate::schema::schema_of::<k8s_openapi::api::flowcontrol::v1::FlowSchema>,
    hooks: Hooks {
        decode,
        default,
        prepare_for_create: util::prepare_spec_create,
        prepare_for_update: util::prepare_spec_update,
        validate,
        validate_update,
        to_storage: None,
        from_storage: None,
        field_selectors: FIELD_SELECTORS,
        field_values,
        columns: COLUMNS,
        row,
        pending_finalization: resource::nothing_pending,
        mark_deleting: resource::no_default,
        grace_period: resource::not_graceful,
    },
};
