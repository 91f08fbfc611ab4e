//! admissionregistration.k8s.io/v1 resources: [`validatingwebhookconfiguration`] and
//! [`mutatingwebhookconfiguration`] (cluster-scoped), and [`validatingadmissionpolicy`] and
//! [`validatingadmissionpolicybinding`] (cluster-scoped; the rules of the last two are in
//! their modules); and in `v1alpha1` (alpha, behind the `MutatingAdmissionPolicy` feature gate
//! and `--runtime-config`) [`mutatingadmissionpolicy`] and [`mutatingadmissionpolicybinding`]. Storage only: calling the webhooks is the admission plugins' job
//! (`genplane-admission`'s `webhook` module).
//!
//! What the two kinds share lives here: the schemas of a webhook, `WebhookClientConfig`,
//! `ServiceReference`, `RuleWithOperations` (with its embedded `Rule`) and `MatchCondition`
//! (protobuf numbers from upstream's `generated.proto`), upstream's defaulting
//! (`SetDefaults_ValidatingWebhook`, `SetDefaults_MutatingWebhook`, `SetDefaults_Rule`,
//! `SetDefaults_ServiceReference`) and the rules of upstream's
//! `pkg/apis/admissionregistration/validation` (Kubernetes 1.33) for v1:
//!
//! - the configuration's name is a DNS-1123 subdomain; webhook names are fully qualified (a
//!   DNS-1123 subdomain of at least three segments) and unique in the configuration;
//! - rules: operations (`CREATE`, `UPDATE`, `DELETE`, `CONNECT`, `*` alone), API groups and
//!   versions (`*` alone, no empty version), resources (`resource`, `resource/subresource`,
//!   `*`, `*/*`, `resource/*`, `*/subresource`, without overlaps), scope (`Cluster`,
//!   `Namespaced`, `*`);
//! - `failurePolicy` `Fail`/`Ignore`, `matchPolicy` `Exact`/`Equivalent`,
//!   `reinvocationPolicy` `Never`/`IfNeeded`, `timeoutSeconds` 1 to 30, `sideEffects` required
//!   and `None` or `NoneOnDryRun` (an update may keep `Some`/`Unknown` if the stored object
//!   already had them), `admissionReviewVersions` required, DNS-1035 labels without
//!   duplicates, including `v1` or `v1beta1`;
//! - `namespaceSelector` and `objectSelector` are valid label selectors;
//! - `clientConfig` has exactly one of `url` and `service`; the URL is `https://` with a host
//!   and no user, query or fragment; a service has a name, a namespace, a port in 1..=65535
//!   and a path of DNS-1123 segments (it is reached through the server's service resolver);
//! - `matchConditions`: at most 64, each with a unique qualified name and an expression.
//!   Upstream also compiles the expression; genplane checks that it is not empty and reports
//!   a CEL error when the webhook is called.
//!
//! On create the generation is 1; an update that changes `webhooks` increments it.

pub mod mutatingadmissionpolicy;
pub mod mutatingadmissionpolicybinding;
pub mod mutatingwebhookconfiguration;
pub mod types;
pub mod validatingadmissionpolicy;
pub mod validatingadmissionpolicybinding;
pub mod validatingwebhookconfiguration;

use std::collections::BTreeSet;

use genplane_apimachinery::codec::schema::{Field, Struct, Type};
use genplane_apimachinery::meta::schemas::LABEL_SELECTOR;
use genplane_apimachinery::meta::{ObjectMeta, validate_object_meta, validate_object_meta_update};
use genplane_apimachinery::validation::field::{Error, ErrorList, Path};
use genplane_apimachinery::validation::{
    is_dns1035_label, is_dns1123_subdomain, is_qualified_name, name_is_dns_subdomain,
};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::rbac::{LabelSelector, validate_label_selector};
use crate::schema::{Extensions, atomic_list, keyed_list};
use crate::table::{self, ColumnDefinition};
use crate::util;

/// The group.
pub const GROUP_NAME: &str = "admissionregistration.k8s.io";
/// The API version.
pub const API_VERSION: &str = "admissionregistration.k8s.io/v1";
/// The operations a rule may name.
pub const OPERATIONS: &[&str] = &["*", "CONNECT", "CREATE", "DELETE", "UPDATE"];
/// The scopes a rule may name.
pub const SCOPES: &[&str] = &["*", "Cluster", "Namespaced"];
/// The failure policies.
pub const FAILURE_POLICIES: &[&str] = &["Fail", "Ignore"];
/// The match policies.
pub const MATCH_POLICIES: &[&str] = &["Equivalent", "Exact"];
/// The reinvocation policies of mutating webhooks.
pub const REINVOCATION_POLICIES: &[&str] = &["IfNeeded", "Never"];
/// The side-effect classes a v1 webhook may declare.
pub const NO_SIDE_EFFECT_CLASSES: &[&str] = &["None", "NoneOnDryRun"];
/// Every side-effect class (`Some` and `Unknown` only kept from objects that had them).
pub const SIDE_EFFECT_CLASSES: &[&str] = &["None", "NoneOnDryRun", "Some", "Unknown"];
/// The `AdmissionReview` versions the server speaks.
pub const ADMISSION_REVIEW_VERSIONS: &[&str] = &["v1", "v1beta1"];
/// The most match conditions a webhook may have.
pub const MAX_MATCH_CONDITIONS: usize = 64;

static SERVICE_REFERENCE: Struct = Struct {
    name: "ServiceReference",
    fields: &[
        Field::new("namespace", 1, Type::String),
        Field::new("name", 2, Type::String),
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

static RULE: Struct = Struct {
    name: "Rule",
    fields: &[
        Field::new("apiGroups", 1, Type::List(&Type::String)),
        Field::new("apiVersions", 2, Type::List(&Type::String)),
        Field::new("resources", 3, Type::List(&Type::String)),
        Field::pointer("scope", 4, Type::String),
    ],
};

static RULE_WITH_OPERATIONS: Struct = Struct {
    name: "RuleWithOperations",
    fields: &[
        Field::new("operations", 1, Type::List(&Type::String)),
        Field::inline(2, &RULE),
    ],
};

static MATCH_CONDITION: Struct = Struct {
    name: "MatchCondition",
    fields: &[
        Field::new("name", 1, Type::String),
        Field::new("expression", 2, Type::String),
    ],
};

/// `admissionregistration/v1.ValidatingWebhook`.
pub static VALIDATING_WEBHOOK: Struct = Struct {
    name: "ValidatingWebhook",
    fields: &[
        Field::new("name", 1, Type::String),
        Field::new("clientConfig", 2, Type::Struct(&WEBHOOK_CLIENT_CONFIG)),
        Field::new("rules", 3, Type::List(&Type::Struct(&RULE_WITH_OPERATIONS))),
        Field::pointer("failurePolicy", 4, Type::String),
        Field::pointer("matchPolicy", 9, Type::String),
        Field::pointer("namespaceSelector", 5, Type::Struct(&LABEL_SELECTOR)),
        Field::pointer("objectSelector", 10, Type::Struct(&LABEL_SELECTOR)),
        Field::pointer("sideEffects", 6, Type::String),
        Field::pointer("timeoutSeconds", 7, Type::Int32),
        Field::new("admissionReviewVersions", 8, Type::List(&Type::String)).keep_empty(),
        Field::new(
            "matchConditions",
            11,
            Type::List(&Type::Struct(&MATCH_CONDITION)),
        ),
    ],
};

/// `admissionregistration/v1.MutatingWebhook`.
pub static MUTATING_WEBHOOK: Struct = Struct {
    name: "MutatingWebhook",
    fields: &[
        Field::new("name", 1, Type::String),
        Field::new("clientConfig", 2, Type::Struct(&WEBHOOK_CLIENT_CONFIG)),
        Field::new("rules", 3, Type::List(&Type::Struct(&RULE_WITH_OPERATIONS))),
        Field::pointer("failurePolicy", 4, Type::String),
        Field::pointer("matchPolicy", 9, Type::String),
        Field::pointer("namespaceSelector", 5, Type::Struct(&LABEL_SELECTOR)),
        Field::pointer("objectSelector", 11, Type::Struct(&LABEL_SELECTOR)),
        Field::pointer("sideEffects", 6, Type::String),
        Field::pointer("timeoutSeconds", 7, Type::Int32),
        Field::new("admissionReviewVersions", 8, Type::List(&Type::String)).keep_empty(),
        Field::pointer("reinvocationPolicy", 10, Type::String),
        Field::new(
            "matchConditions",
            12,
            Type::List(&Type::Struct(&MATCH_CONDITION)),
        ),
    ],
};

/// A webhook as validation reads it (both kinds; `reinvocationPolicy` only in mutating ones).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct Webhook {
    name: String,
    client_config: ClientConfig,
    rules: Vec<Rule>,
    failure_policy: Option<String>,
    match_policy: Option<String>,
    namespace_selector: Option<LabelSelector>,
    object_selector: Option<LabelSelector>,
    side_effects: Option<String>,
    timeout_seconds: Option<i32>,
    admission_review_versions: Vec<String>,
    reinvocation_policy: Option<String>,
    match_conditions: Vec<MatchCondition>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ClientConfig {
    url: Option<String>,
    service: Option<crate::webhook::ServiceReference>,
}

use types::{MatchCondition, Rule};

/// A webhook configuration of either kind.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Configuration {
    webhooks: Vec<Webhook>,
}

/// Which of the two kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Flavor {
    Validating,
    Mutating,
}

/// What validation requires, as upstream loosens it on update for objects stored before a
/// rule existed (`validationOptions`).
#[derive(Clone, Copy, Debug)]
struct Options {
    require_recognized_review_version: bool,
    require_unique_names: bool,
    require_no_side_effects: bool,
}

const STRICT: Options = Options {
    require_recognized_review_version: true,
    require_unique_names: true,
    require_no_side_effects: true,
};

/// The options of an update: a rule the stored object already broke is not enforced.
fn update_options(old: &Configuration) -> Options {
    let mut names = BTreeSet::new();
    Options {
        require_recognized_review_version: old.webhooks.iter().all(|h| {
            h.admission_review_versions
                .iter()
                .any(|v| ADMISSION_REVIEW_VERSIONS.contains(&v.as_str()))
        }),
        require_unique_names: old
            .webhooks
            .iter()
            .all(|h| h.name.is_empty() || names.insert(h.name.as_str())),
        require_no_side_effects: old.webhooks.iter().all(|h| {
            h.side_effects
                .as_deref()
                .is_none_or(|s| NO_SIDE_EFFECT_CLASSES.contains(&s))
        }),
    }
}

/// Upstream's defaulting of every webhook of a configuration.
fn default_webhooks(object: &mut Value, mutating: bool) {
    let Some(webhooks) = object.get_mut("webhooks").and_then(Value::as_array_mut) else {
        return;
    };
    for hook in webhooks.iter_mut().filter_map(Value::as_object_mut) {
        let mut set = |key: &str, value: Value| {
            if hook.get(key).is_none_or(Value::is_null) {
                hook.insert(key.to_owned(), value);
            }
        };
        set("failurePolicy", json!("Fail"));
        set("matchPolicy", json!("Equivalent"));
        set("namespaceSelector", json!({}));
        set("objectSelector", json!({}));
        set("timeoutSeconds", json!(10));
        if mutating {
            set("reinvocationPolicy", json!("Never"));
        }
        if let Some(rules) = hook.get_mut("rules").and_then(Value::as_array_mut) {
            for rule in rules.iter_mut().filter_map(Value::as_object_mut) {
                if rule.get("scope").is_none_or(Value::is_null) {
                    rule.insert("scope".into(), json!("*"));
                }
            }
        }
        if let Some(service) = hook
            .get_mut("clientConfig")
            .and_then(|c| c.get_mut("service"))
            .and_then(Value::as_object_mut)
            && service.get("port").is_none_or(Value::is_null)
        {
            service.insert("port".into(), json!(443));
        }
    }
}

/// Upstream's `IsFullyQualifiedName`.
fn validate_fully_qualified_name(name: &str, path: &Path) -> ErrorList {
    let mut errors = ErrorList::new();
    if name.is_empty() {
        errors.push(Error::required(path, ""));
        return errors;
    }
    let problems = is_dns1123_subdomain(name);
    if !problems.is_empty() {
        errors.push(Error::invalid(path, name, problems.join(",")));
    } else if name.split('.').count() < 3 {
        errors.push(Error::invalid(
            path,
            name,
            "should be a domain with at least three segments separated by dots",
        ));
    }
    errors
}

fn strings(values: &[String]) -> Value {
    Value::from(values.to_vec())
}

fn validate_resources(resources: &[String], path: &Path) -> ErrorList {
    let mut errors = ErrorList::new();
    if resources.is_empty() {
        errors.push(Error::required(path, ""));
    }
    let mut with_wildcard_subresource = BTreeSet::new();
    let mut subresource_of_wildcard = BTreeSet::new();
    let mut double_wildcard = false;
    let mut single_wildcard = false;
    let mut without_subresource = false;
    for (i, item) in resources.iter().enumerate() {
        if item.is_empty() {
            errors.push(Error::required(&path.index(i), ""));
            continue;
        }
        double_wildcard |= item == "*/*";
        single_wildcard |= item == "*";
        let Some((resource, sub)) = item.split_once('/') else {
            without_subresource = item != "*";
            continue;
        };
        if with_wildcard_subresource.contains(resource) {
            errors.push(Error::invalid(
                &path.index(i),
                item.as_str(),
                format!("if '{resource}/*' is present, must not specify {item}"),
            ));
        }
        if subresource_of_wildcard.contains(sub) {
            errors.push(Error::invalid(
                &path.index(i),
                item.as_str(),
                format!("if '*/{sub}' is present, must not specify {item}"),
            ));
        }
        if sub == "*" {
            with_wildcard_subresource.insert(resource);
        }
        if resource == "*" {
            subresource_of_wildcard.insert(sub);
        }
    }
    if resources.len() > 1 && double_wildcard {
        errors.push(Error::invalid(
            path,
            strings(resources),
            "if '*/*' is present, must not specify other resources",
        ));
    }
    if single_wildcard && without_subresource {
        errors.push(Error::invalid(
            path,
            strings(resources),
            "if '*' is present, must not specify other resources without subresources",
        ));
    }
    errors
}

fn validate_rule(rule: &Rule, path: &Path) -> ErrorList {
    let mut errors = ErrorList::new();
    let wildcard = |items: &[String]| items.len() > 1 && items.iter().any(|i| i == "*");
    if rule.operations.is_empty() {
        errors.push(Error::required(&path.child("operations"), ""));
    }
    if wildcard(&rule.operations) {
        errors.push(Error::invalid(
            &path.child("operations"),
            strings(&rule.operations),
            "if '*' is present, must not specify other operations",
        ));
    }
    for (i, operation) in rule.operations.iter().enumerate() {
        if !OPERATIONS.contains(&operation.as_str()) {
            errors.push(Error::not_supported(
                &path.child("operations").index(i),
                operation.as_str(),
                OPERATIONS,
            ));
        }
    }
    if rule.api_groups.is_empty() {
        errors.push(Error::required(&path.child("apiGroups"), ""));
    }
    if wildcard(&rule.api_groups) {
        errors.push(Error::invalid(
            &path.child("apiGroups"),
            strings(&rule.api_groups),
            "if '*' is present, must not specify other API groups",
        ));
    }
    if rule.api_versions.is_empty() {
        errors.push(Error::required(&path.child("apiVersions"), ""));
    }
    if wildcard(&rule.api_versions) {
        errors.push(Error::invalid(
            &path.child("apiVersions"),
            strings(&rule.api_versions),
            "if '*' is present, must not specify other API versions",
        ));
    }
    for (i, version) in rule.api_versions.iter().enumerate() {
        if version.is_empty() {
            errors.push(Error::required(&path.child("apiVersions").index(i), ""));
        }
    }
    errors.extend(validate_resources(
        &rule.resources,
        &path.child("resources"),
    ));
    if let Some(scope) = rule.scope.as_deref().filter(|s| !SCOPES.contains(s)) {
        errors.push(Error::not_supported(&path.child("scope"), scope, SCOPES));
    }
    errors
}

fn validate_review_versions(versions: &[String], options: Options, path: &Path) -> ErrorList {
    let mut errors = ErrorList::new();
    let accepted = ADMISSION_REVIEW_VERSIONS.join(", ");
    if versions.is_empty() {
        errors.push(Error::required(
            path,
            format!("must specify one of {accepted}"),
        ));
        return errors;
    }
    let mut seen = BTreeSet::new();
    for (i, version) in versions.iter().enumerate() {
        if !seen.insert(version.as_str()) {
            errors.push(Error::invalid(
                &path.index(i),
                version.as_str(),
                "duplicate version",
            ));
            continue;
        }
        for message in is_dns1035_label(version) {
            errors.push(Error::invalid(&path.index(i), version.as_str(), message));
        }
    }
    if options.require_recognized_review_version
        && !versions
            .iter()
            .any(|v| ADMISSION_REVIEW_VERSIONS.contains(&v.as_str()))
    {
        errors.push(Error::invalid(
            path,
            strings(versions),
            format!("must include at least one of {accepted}"),
        ));
    }
    errors
}

fn validate_match_conditions(conditions: &[MatchCondition], path: &Path) -> ErrorList {
    let mut errors = ErrorList::new();
    if conditions.len() > MAX_MATCH_CONDITIONS {
        errors.push(Error::too_many(
            path,
            conditions.len(),
            MAX_MATCH_CONDITIONS,
        ));
    }
    let mut names = BTreeSet::new();
    for (i, condition) in conditions.iter().enumerate() {
        let at = path.index(i);
        if condition.name.is_empty() {
            errors.push(Error::required(&at.child("name"), ""));
        } else {
            for message in is_qualified_name(&condition.name) {
                errors.push(Error::invalid(
                    &at.child("name"),
                    condition.name.as_str(),
                    message,
                ));
            }
            if !names.insert(condition.name.as_str()) {
                errors.push(Error::duplicate(&at.child("name"), condition.name.as_str()));
            }
        }
        if condition.expression.is_empty() {
            errors.push(Error::required(&at.child("expression"), ""));
        }
    }
    errors
}

fn validate_webhook(hook: &Webhook, flavor: Flavor, options: Options, path: &Path) -> ErrorList {
    let mut errors = validate_fully_qualified_name(&hook.name, &path.child("name"));
    for (i, rule) in hook.rules.iter().enumerate() {
        errors.extend(validate_rule(rule, &path.child("rules").index(i)));
    }
    let mut one_of = |field: &str, value: &Option<String>, allowed: &[&str]| {
        if let Some(value) = value.as_deref().filter(|v| !allowed.contains(v)) {
            errors.push(Error::not_supported(&path.child(field), value, allowed));
        }
    };
    one_of("failurePolicy", &hook.failure_policy, FAILURE_POLICIES);
    one_of("matchPolicy", &hook.match_policy, MATCH_POLICIES);
    if flavor == Flavor::Mutating {
        one_of(
            "reinvocationPolicy",
            &hook.reinvocation_policy,
            REINVOCATION_POLICIES,
        );
    }
    let side_effects = if options.require_no_side_effects {
        NO_SIDE_EFFECT_CLASSES
    } else {
        SIDE_EFFECT_CLASSES
    };
    match hook.side_effects.as_deref() {
        None => errors.push(Error::required(
            &path.child("sideEffects"),
            format!("must specify one of {}", side_effects.join(", ")),
        )),
        Some(value) if !side_effects.contains(&value) => errors.push(Error::not_supported(
            &path.child("sideEffects"),
            value,
            side_effects,
        )),
        Some(_) => {}
    }
    if let Some(timeout) = hook.timeout_seconds.filter(|t| !(1..=30).contains(t)) {
        errors.push(Error::invalid(
            &path.child("timeoutSeconds"),
            timeout,
            "the timeout value must be between 1 and 30 seconds",
        ));
    }
    if let Some(selector) = &hook.namespace_selector {
        errors.extend(validate_label_selector(
            selector,
            false,
            &path.child("namespaceSelector"),
        ));
    }
    if let Some(selector) = &hook.object_selector {
        errors.extend(validate_label_selector(
            selector,
            false,
            &path.child("objectSelector"),
        ));
    }
    let client = &hook.client_config;
    let at = path.child("clientConfig");
    match (&client.url, &client.service) {
        (Some(_), Some(_)) | (None, None) => errors.push(Error::required(
            &at,
            "exactly one of url or service is required",
        )),
        (Some(url), None) => errors.extend(crate::webhook::validate_url(&at.child("url"), url)),
        (None, Some(service)) => errors.extend(crate::webhook::validate_service(
            &at.child("service"),
            service,
        )),
    }
    errors.extend(validate_review_versions(
        &hook.admission_review_versions,
        options,
        &path.child("admissionReviewVersions"),
    ));
    errors.extend(validate_match_conditions(
        &hook.match_conditions,
        &path.child("matchConditions"),
    ));
    errors
}

fn validate_configuration(
    meta: &ObjectMeta,
    configuration: &Configuration,
    flavor: Flavor,
    options: Options,
) -> ErrorList {
    let mut errors =
        validate_object_meta(meta, false, name_is_dns_subdomain, &Path::new("metadata"));
    errors.extend(validate_webhooks(configuration, flavor, options));
    errors
}

fn validate_webhooks(configuration: &Configuration, flavor: Flavor, options: Options) -> ErrorList {
    let mut errors = ErrorList::new();
    let mut names = BTreeSet::new();
    for (i, hook) in configuration.webhooks.iter().enumerate() {
        let path = Path::new("webhooks").index(i);
        errors.extend(validate_webhook(hook, flavor, options, &path));
        if options.require_unique_names
            && !hook.name.is_empty()
            && !names.insert(hook.name.as_str())
        {
            errors.push(Error::duplicate(&path.child("name"), hook.name.as_str()));
        }
    }
    errors
}

fn validate_kind(
    object: &Value,
    schema: &'static Struct,
    kind: &str,
    flavor: Flavor,
) -> Result<ErrorList, genplane_apimachinery::errors::ApiError> {
    let (meta, configuration) =
        util::decode_typed::<Configuration>(object, schema, kind, API_VERSION)?;
    Ok(validate_configuration(
        &meta,
        &configuration,
        flavor,
        STRICT,
    ))
}

fn validate_kind_update(
    new: &Value,
    old: &Value,
    schema: &'static Struct,
    kind: &str,
    flavor: Flavor,
) -> Result<ErrorList, genplane_apimachinery::errors::ApiError> {
    let (new_meta, configuration) =
        util::decode_typed::<Configuration>(new, schema, kind, API_VERSION)?;
    let (old_meta, old_configuration) =
        util::decode_typed::<Configuration>(old, schema, kind, API_VERSION)?;
    let mut errors = validate_object_meta_update(&new_meta, &old_meta, &Path::new("metadata"));
    errors.extend(validate_webhooks(
        &configuration,
        flavor,
        update_options(&old_configuration),
    ));
    Ok(errors)
}

fn set_generation(object: &mut Value, generation: i64) {
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("generation".into(), Value::from(generation));
    }
}

/// The strategy on create: the generation is 1.
pub fn prepare_for_create(object: &mut Value, _context: &crate::resource::Context<'_>) {
    set_generation(object, 1);
}

/// The strategy on update: the generation goes up by one when `webhooks` changed.
pub fn prepare_for_update(new: &mut Value, old: &Value, _context: &crate::resource::Context<'_>) {
    let generation = old
        .pointer("/metadata/generation")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let changed = new.get("webhooks") != old.get("webhooks");
    set_generation(new, if changed { generation + 1 } else { generation });
}

/// `NAME WEBHOOKS AGE`.
pub const COLUMNS: &[ColumnDefinition] = &[
    table::NAME,
    ColumnDefinition {
        name: "Webhooks",
        type_: "integer",
        format: "",
        description: "Webhooks indicates the number of webhooks in the configuration.",
        priority: 0,
    },
    table::AGE,
];

/// The cells: name, the number of webhooks, age.
pub fn row(object: &Value, now: i64) -> Vec<Value> {
    vec![
        util::name(object),
        Value::from(util::len_at(object, "webhooks")),
        util::age(object, now),
    ]
}

/// The list and patch semantics shared by both kinds' webhooks, for `schema` (the webhook's
/// component name).
const fn webhook_extensions(schema: &'static str) -> [Extensions; 3] {
    [
        atomic_list(schema, "rules"),
        atomic_list(schema, "admissionReviewVersions"),
        keyed_list(schema, "matchConditions", &["name"]),
    ]
}

const RULE_EXTENSIONS: [Extensions; 4] = [
    atomic_list(
        "io.k8s.api.admissionregistration.v1.RuleWithOperations",
        "operations",
    ),
    atomic_list(
        "io.k8s.api.admissionregistration.v1.RuleWithOperations",
        "apiGroups",
    ),
    atomic_list(
        "io.k8s.api.admissionregistration.v1.RuleWithOperations",
        "apiVersions",
    ),
    atomic_list(
        "io.k8s.api.admissionregistration.v1.RuleWithOperations",
        "resources",
    ),
];

#[cfg(test)]
mod tests;
