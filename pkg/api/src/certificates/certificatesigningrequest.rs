//! CertificateSigningRequests (`certificates.k8s.io/v1`, cluster-scoped), with the `status`
//! and `approval` subresources.
//!
//! Upstream rules (Kubernetes 1.33, `pkg/registry/certificates/certificates/strategy.go` and
//! `pkg/apis/certificates/validation`):
//!
//! - **Create**: `spec.username`, `uid`, `groups` and `extra` are the authenticated user's,
//!   whatever the body says ([`crate::resource::Context::requestor`]); no status is accepted.
//!   Any name is allowed. `spec.request` must be a PEM `CERTIFICATE REQUEST` whose signature
//!   verifies; `spec.usages` is required, each one of [`super::USAGES`], none twice;
//!   `spec.signerName` is required and well formed ([`super::validate_signer_name`]), never
//!   `kubernetes.io/legacy-unknown` (the removed v1beta1's); `spec.expirationSeconds`, when set,
//!   at least 600.
//! - **Conditions**: each has a type and a status (`True`, `False`, `Unknown`; only `True` for
//!   `Approved`, `Denied` and `Failed`); no type twice; `Approved` and `Denied` exclude each
//!   other. No update removes an `Approved`, `Denied` or `Failed` condition; only the
//!   `approval` subresource adds or changes `Approved` and `Denied` ones. A condition without
//!   `lastUpdateTime` gets the write's time, and without `lastTransitionTime` the stored one of
//!   the same type and status, else the write's time.
//! - **status.certificate**: PEM `CERTIFICATE` blocks only (no headers, at least one), set only
//!   through `status`, and never changed once set.
//! - **Updates**: the spec never changes. A write of the object keeps the stored status; one
//!   through `status` keeps the spec and the stored `Approved`/`Denied` conditions; one through
//!   `approval` keeps everything but the conditions. Problems already stored (unknown or
//!   repeated usages, repeated condition types, both Approved and Denied, the legacy signer, a
//!   malformed certificate) are tolerated on update, as upstream tolerates old data.

use std::collections::BTreeMap;

use genplane_apimachinery::codec::decode::{self, Decoded};
use genplane_apimachinery::codec::schema::{Field, Struct, Type};
use genplane_apimachinery::errors::ApiError;
use genplane_apimachinery::meta::schemas::OBJECT_META;
use genplane_apimachinery::meta::{validate_object_meta, validate_object_meta_update};
use genplane_apimachinery::validation::field::{Error, ErrorList, Path};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::conditions::{APPROVED, DENIED, FAILED};
use crate::resource::Context;
use crate::schema::{Extensions, ListType, NONE, atomic_list};
use crate::table::{self, ColumnDefinition};
use crate::util;

/// The kind.
pub const KIND: &str = "CertificateSigningRequest";
/// The API version.
pub const API_VERSION: &str = "certificates.k8s.io/v1";
/// The shortest certificate lifetime a request may ask for, in seconds.
pub const MIN_EXPIRATION_SECONDS: i64 = 600;

static EXTRA_VALUE: Type = Type::Items(&Type::String);

static SPEC: Struct = Struct {
    name: "CertificateSigningRequestSpec",
    fields: &[
        Field::new("request", 1, Type::Bytes),
        Field::new("signerName", 7, Type::String),
        Field::pointer("expirationSeconds", 8, Type::Int32),
        Field::new("usages", 5, Type::List(&Type::String)),
        Field::new("username", 2, Type::String),
        Field::new("uid", 3, Type::String),
        Field::new("groups", 4, Type::List(&Type::String)),
        Field::new("extra", 6, Type::Map(&EXTRA_VALUE)),
    ],
};

static CONDITION: Struct = Struct {
    name: "CertificateSigningRequestCondition",
    fields: &[
        Field::new("type", 1, Type::String),
        Field::new("status", 6, Type::String),
        Field::new("reason", 2, Type::String),
        Field::new("message", 3, Type::String),
        Field::new("lastUpdateTime", 4, Type::Time),
        Field::new("lastTransitionTime", 5, Type::Time),
    ],
};

static STATUS: Struct = Struct {
    name: "CertificateSigningRequestStatus",
    fields: &[
        Field::new("conditions", 1, Type::List(&Type::Struct(&CONDITION))),
        Field::new("certificate", 2, Type::Bytes),
    ],
};

/// The shape of a certificates.k8s.io/v1 CertificateSigningRequest.
pub static SCHEMA: Struct = Struct {
    name: "CertificateSigningRequest",
    fields: &[
        Field::type_meta("kind"),
        Field::type_meta("apiVersion"),
        Field::new("metadata", 1, Type::Struct(&OBJECT_META)),
        Field::new("spec", 2, Type::Struct(&SPEC)),
        Field::new("status", 3, Type::Struct(&STATUS)),
    ],
};

const SPEC_SCHEMA: &str = "io.k8s.api.certificates.v1.CertificateSigningRequestSpec";

/// The list semantics of upstream's types (`+listType`).
pub static EXTENSIONS: &[Extensions] = &[
    atomic_list(SPEC_SCHEMA, "usages"),
    atomic_list(SPEC_SCHEMA, "groups"),
    Extensions {
        schema: "io.k8s.api.certificates.v1.CertificateSigningRequestStatus",
        property: "conditions",
        list_type: Some(ListType::Map),
        list_map_keys: &["type"],
        ..NONE
    },
];

/// A condition as validation reads it.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
struct Condition {
    #[serde(rename = "type")]
    type_: String,
    status: String,
    reason: String,
    message: String,
    last_update_time: Option<String>,
    last_transition_time: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct Spec {
    request: Option<String>,
    signer_name: String,
    expiration_seconds: Option<i64>,
    usages: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Status {
    conditions: Vec<Condition>,
    certificate: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Csr {
    spec: Spec,
    status: Status,
}

fn base64_bytes(encoded: &str) -> Vec<u8> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .unwrap_or_default()
}

impl Csr {
    fn request(&self) -> Option<Vec<u8>> {
        self.spec.request.as_deref().map(base64_bytes)
    }

    fn certificate(&self) -> Vec<u8> {
        base64_bytes(&self.status.certificate)
    }

    fn of_type<'a>(&'a self, type_: &'a str) -> impl Iterator<Item = &'a Condition> + 'a {
        self.status
            .conditions
            .iter()
            .filter(move |c| c.type_ == type_)
    }

    fn has(&self, type_: &str) -> bool {
        self.of_type(type_).next().is_some()
    }
}

/// Type-checks and normalizes a CertificateSigningRequest.
pub fn decode(object: &Value) -> Result<Decoded, ApiError> {
    decode::decode(object, &SCHEMA).map_err(|e| e.to_api_error(KIND, API_VERSION))
}

/// The strategy on create: the requestor is the authenticated user, and the status is empty
/// (no request is created approved).
pub fn prepare_for_create(object: &mut Value, context: &Context<'_>) {
    let Some(fields) = object.as_object_mut() else {
        return;
    };
    let spec = fields
        .entry("spec")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Some(spec) = spec.as_object_mut() {
        for key in ["username", "uid", "groups", "extra"] {
            spec.remove(key);
        }
        if let Some(user) = context.requestor {
            if !user.username.is_empty() {
                spec.insert("username".into(), json!(user.username));
            }
            if !user.uid.is_empty() {
                spec.insert("uid".into(), json!(user.uid));
            }
            if !user.groups.is_empty() {
                spec.insert("groups".into(), json!(user.groups));
            }
            if !user.extra.is_empty() {
                spec.insert("extra".into(), json!(user.extra));
            }
        }
    }
    fields.insert("status".into(), json!({}));
}

/// The strategy on update of the object: its spec and status stay as stored.
pub fn prepare_for_update(new: &mut Value, old: &Value, _: &Context<'_>) {
    util::keep_field(new, old, "spec");
    util::keep_field(new, old, "status");
}

fn conditions_of(object: &Value) -> Vec<Value> {
    object
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

fn set_conditions(object: &mut Value, conditions: Vec<Value>) {
    let status = &mut object["status"];
    if !status.is_object() {
        *status = json!({});
    }
    if conditions.is_empty() {
        if let Some(status) = status.as_object_mut() {
            status.remove("conditions");
        }
    } else {
        status["conditions"] = Value::Array(conditions);
    }
}

/// Sets each condition's missing `lastUpdateTime` to now and its missing `lastTransitionTime`
/// to the stored one of a condition of the same type and status, else to now.
fn populate_condition_timestamps(new: &mut Value, old: &Value, now: i64) {
    let now = genplane_apimachinery::meta::rfc3339(now);
    let stored = conditions_of(old);
    let mut conditions = conditions_of(new);
    for condition in &mut conditions {
        let missing = |c: &Value, key: &str| c.get(key).is_none_or(Value::is_null);
        if missing(condition, "lastUpdateTime") {
            condition["lastUpdateTime"] = json!(now);
        }
        if missing(condition, "lastTransitionTime") {
            let kept = stored
                .iter()
                .find(|o| {
                    o.get("type") == condition.get("type")
                        && o.get("status") == condition.get("status")
                        && !missing(o, "lastTransitionTime")
                })
                .map_or_else(|| json!(now), |o| o["lastTransitionTime"].clone());
            condition["lastTransitionTime"] = kept;
        }
    }
    if !conditions.is_empty() {
        set_conditions(new, conditions);
    }
}

/// The update hook of `status`: the spec stays as stored, and so do the stored `Approved` and
/// `Denied` conditions when the write has as many of each (a write that adds or removes one is
/// refused by validation).
pub fn prepare_for_status_update(new: &mut Value, old: &Value, context: &Context<'_>) {
    util::prepare_status_update(new, old, context);
    let stored = conditions_of(old);
    let mut conditions = conditions_of(new);
    for type_ in [APPROVED, DENIED] {
        let of = |list: &[Value]| -> Vec<usize> {
            list.iter()
                .enumerate()
                .filter(|(_, c)| c["type"] == type_)
                .map(|(i, _)| i)
                .collect()
        };
        let (old_at, new_at) = (of(&stored), of(&conditions));
        if old_at.len() == new_at.len() {
            for (o, n) in old_at.into_iter().zip(new_at) {
                conditions[n] = stored[o].clone();
            }
        }
    }
    if new.get("status").is_some() {
        set_conditions(new, conditions);
    }
    populate_condition_timestamps(new, old, context.now);
}

/// The update hook of `approval`: only the conditions change.
pub fn prepare_for_approval_update(new: &mut Value, old: &Value, context: &Context<'_>) {
    populate_condition_timestamps(new, old, context.now);
    let conditions = conditions_of(new);
    util::prepare_status_update(new, old, context);
    let mut status = old.get("status").cloned().unwrap_or_else(|| json!({}));
    if !status.is_object() {
        status = json!({});
    }
    new["status"] = status;
    set_conditions(new, conditions);
}

/// What an update may do besides what every update may.
#[derive(Clone, Copy, Debug, Default)]
struct Allowed {
    approval_conditions: bool,
    certificate: bool,
}

/// What stored data upstream tolerates on update (`getValidationOptions`).
#[derive(Clone, Copy, Debug, Default)]
struct Tolerated {
    both_approved_and_denied: bool,
    legacy_signer: bool,
    duplicate_condition_types: bool,
    empty_condition_type: bool,
    arbitrary_certificate: bool,
    unknown_usages: bool,
    duplicate_usages: bool,
}

fn has_duplicates<'a>(items: impl Iterator<Item = &'a str>) -> bool {
    let mut seen = std::collections::BTreeSet::new();
    items.into_iter().any(|item| !seen.insert(item))
}

impl Tolerated {
    fn of(new: &Csr, old: Option<&Csr>) -> Self {
        let Some(old) = old else {
            return Self::default();
        };
        Self {
            both_approved_and_denied: old.has(APPROVED) && old.has(DENIED),
            legacy_signer: old.spec.signer_name == super::LEGACY_UNKNOWN_SIGNER,
            duplicate_condition_types: has_duplicates(
                old.status.conditions.iter().map(|c| c.type_.as_str()),
            ),
            empty_condition_type: old.status.conditions.iter().any(|c| c.type_.is_empty()),
            arbitrary_certificate: new.status.certificate == old.status.certificate
                || super::certificate_problem(&old.certificate()).is_some(),
            unknown_usages: old
                .spec
                .usages
                .iter()
                .any(|u| !super::USAGES.contains(&u.as_str())),
            duplicate_usages: has_duplicates(old.spec.usages.iter().map(String::as_str)),
        }
    }
}

const STATUS_VALUES: &[&str] = &["False", "True", "Unknown"];
const TRUE_ONLY: &[&str] = &["True"];

fn validate_conditions(csr: &Csr, tolerated: Tolerated, errors: &mut ErrorList) {
    let path = Path::new("status").child("conditions");
    let mut seen = std::collections::BTreeSet::new();
    let (mut approved, mut denied) = (false, false);
    for (i, c) in csr.status.conditions.iter().enumerate() {
        let at = path.index(i);
        if !tolerated.empty_condition_type && c.type_.is_empty() {
            errors.push(Error::required(&at.child("type"), ""));
        }
        let allowed = if [APPROVED, DENIED, FAILED].contains(&c.type_.as_str()) {
            TRUE_ONLY
        } else {
            STATUS_VALUES
        };
        if c.status.is_empty() {
            errors.push(Error::required(&at.child("status"), ""));
        } else if !allowed.contains(&c.status.as_str()) {
            errors.push(Error::not_supported(
                &at.child("status"),
                c.status.as_str(),
                allowed,
            ));
        }
        if !tolerated.both_approved_and_denied {
            let exclusive = match c.type_.as_str() {
                APPROVED => {
                    approved = true;
                    denied
                }
                DENIED => {
                    denied = true;
                    approved
                }
                _ => false,
            };
            if exclusive {
                errors.push(Error::invalid(
                    &at.child("type"),
                    c.type_.as_str(),
                    "Approved and Denied conditions are mutually exclusive",
                ));
            }
        }
        if !tolerated.duplicate_condition_types && !seen.insert(c.type_.as_str()) {
            errors.push(Error::duplicate(&at.child("type"), c.type_.as_str()));
        }
    }
}

fn validate_csr(csr: &Csr, tolerated: Tolerated) -> ErrorList {
    let mut errors = ErrorList::new();
    let spec = Path::new("spec");
    let request = csr.request();
    if let Err(problem) = super::parse_request(request.as_deref().unwrap_or_default()) {
        errors.push(Error::invalid_bytes(
            &spec.child("request"),
            request.as_deref(),
            problem,
        ));
    }
    let usages = spec.child("usages");
    if csr.spec.usages.is_empty() {
        errors.push(Error::required(&usages, ""));
    }
    if !tolerated.unknown_usages {
        for (i, usage) in csr.spec.usages.iter().enumerate() {
            if !super::USAGES.contains(&usage.as_str()) {
                errors.push(Error::not_supported(
                    &usages.index(i),
                    usage.as_str(),
                    super::USAGES,
                ));
            }
        }
    }
    if !tolerated.duplicate_usages {
        let mut seen = std::collections::BTreeSet::new();
        for (i, usage) in csr.spec.usages.iter().enumerate() {
            if !seen.insert(usage.as_str()) {
                errors.push(Error::duplicate(&usages.index(i), usage.as_str()));
            }
        }
    }
    let signer = spec.child("signerName");
    if !tolerated.legacy_signer && csr.spec.signer_name == super::LEGACY_UNKNOWN_SIGNER {
        errors.push(Error::invalid(
            &signer,
            csr.spec.signer_name.as_str(),
            "the legacy signerName is not allowed via this API version",
        ));
    } else {
        errors.extend(super::validate_signer_name(&signer, &csr.spec.signer_name));
    }
    if let Some(seconds) = csr
        .spec
        .expiration_seconds
        .filter(|s| *s < MIN_EXPIRATION_SECONDS)
    {
        errors.push(Error::invalid(
            &spec.child("expirationSeconds"),
            seconds,
            "may not specify a duration less than 600 seconds (10 minutes)",
        ));
    }
    validate_conditions(csr, tolerated, &mut errors);
    if !tolerated.arbitrary_certificate
        && let Some(problem) = super::certificate_problem(&csr.certificate())
    {
        errors.push(Error::invalid(
            &Path::new("status").child("certificate"),
            "<certificate data>",
            problem,
        ));
    }
    errors
}

fn any_name(_: &str, _: bool) -> Vec<String> {
    // Upstream: "We don't care what you call your certificate requests."
    Vec::new()
}

/// Validates a new CertificateSigningRequest.
pub fn validate(object: &Value) -> Result<ErrorList, ApiError> {
    let (meta, csr) = util::decode_typed::<Csr>(object, &SCHEMA, KIND, API_VERSION)?;
    let mut errors = validate_object_meta(&meta, false, any_name, &Path::new("metadata"));
    errors.extend(validate_csr(&csr, Tolerated::of(&csr, None)));
    Ok(errors)
}

fn validate_update_with(new: &Value, old: &Value, allowed: Allowed) -> Result<ErrorList, ApiError> {
    let (new_meta, new_csr) = util::decode_typed::<Csr>(new, &SCHEMA, KIND, API_VERSION)?;
    let (old_meta, old_csr) = util::decode_typed::<Csr>(old, &SCHEMA, KIND, API_VERSION)?;
    let mut errors = validate_csr(&new_csr, Tolerated::of(&new_csr, Some(&old_csr)));
    let conditions = Path::new("status").child("conditions");
    for type_ in [APPROVED, DENIED, FAILED] {
        if new_csr.of_type(type_).count() < old_csr.of_type(type_).count() {
            errors.push(Error::forbidden(
                &conditions,
                format!(
                    "updates may not remove a condition of type {}",
                    genplane_apimachinery::gofmt::quote(type_)
                ),
            ));
        }
    }
    if !allowed.approval_conditions {
        for type_ in [APPROVED, DENIED] {
            let old_of: Vec<&Condition> = old_csr.of_type(type_).collect();
            let new_of: Vec<&Condition> = new_csr.of_type(type_).collect();
            let quoted = genplane_apimachinery::gofmt::quote(type_);
            if new_of.len() > old_of.len() {
                errors.push(Error::forbidden(
                    &conditions,
                    format!("updates may not add a condition of type {quoted}"),
                ));
            } else if new_of.len() == old_of.len() && new_of != old_of {
                errors.push(Error::forbidden(
                    &conditions,
                    format!(
                        "updates may not modify a condition of type {quoted}\n- {old_of:?}\n+ {new_of:?}"
                    ),
                ));
            }
        }
    }
    if new_csr.status.certificate != old_csr.status.certificate {
        let certificate = Path::new("status").child("certificate");
        if !allowed.certificate {
            errors.push(Error::forbidden(
                &certificate,
                "updates may not set certificate content",
            ));
        } else if !old_csr.status.certificate.is_empty() {
            errors.push(Error::forbidden(
                &certificate,
                "updates may not modify existing certificate content",
            ));
        }
    }
    errors.extend(validate_object_meta_update(
        &new_meta,
        &old_meta,
        &Path::new("metadata"),
    ));
    Ok(errors)
}

/// Validates an update of the object.
pub fn validate_update(new: &Value, old: &Value) -> Result<ErrorList, ApiError> {
    validate_update_with(new, old, Allowed::default())
}

/// Validates an update through `status`: the certificate may be set (once).
pub fn validate_status_update(new: &Value, old: &Value) -> Result<ErrorList, ApiError> {
    validate_update_with(
        new,
        old,
        Allowed {
            certificate: true,
            ..Allowed::default()
        },
    )
}

/// Validates an update through `approval`: `Approved` and `Denied` conditions may be added.
pub fn validate_approval_update(new: &Value, old: &Value) -> Result<ErrorList, ApiError> {
    validate_update_with(
        new,
        old,
        Allowed {
            approval_conditions: true,
            ..Allowed::default()
        },
    )
}

/// Field-selector labels: the metadata ones and `spec.signerName`.
pub const FIELD_SELECTORS: &[&str] = &["metadata.name", "spec.signerName"];

/// Field-selector values.
pub fn field_values(object: &Value) -> BTreeMap<&'static str, String> {
    let mut values = util::meta_fields(object, false);
    values.insert(
        "spec.signerName",
        util::str_at(object, &["spec", "signerName"]).to_owned(),
    );
    values
}

/// `NAME AGE SIGNERNAME REQUESTOR REQUESTEDDURATION CONDITION`, as kube-apiserver prints them.
pub const COLUMNS: &[ColumnDefinition] = &[
    table::NAME,
    table::AGE,
    table::column(
        "SignerName",
        "signerName indicates the requested signer, and is a qualified name.",
        0,
    ),
    table::column(
        "Requestor",
        "request contains an x509 certificate signing request encoded in a \"CERTIFICATE REQUEST\" PEM block.",
        0,
    ),
    table::column(
        "RequestedDuration",
        "expirationSeconds is the requested duration of validity of the issued certificate.",
        0,
    ),
    table::column(
        "Condition",
        "conditions applied to the request. Known conditions are \"Approved\", \"Denied\", and \"Failed\".",
        0,
    ),
];

/// What the `Condition` column says: `Denied`, `Approved` or `Pending`, then `,Failed` and
/// `,Issued` when they apply.
pub fn condition_summary(object: &Value) -> String {
    let has = |type_: &str| conditions_of(object).iter().any(|c| c["type"] == type_);
    let mut summary = if has(DENIED) {
        "Denied"
    } else if has(APPROVED) {
        "Approved"
    } else {
        "Pending"
    }
    .to_owned();
    if has(FAILED) {
        summary.push_str(",Failed");
    }
    if !util::str_at(object, &["status", "certificate"]).is_empty() {
        summary.push_str(",Issued");
    }
    summary
}

/// The cells.
pub fn row(object: &Value, now: i64) -> Vec<Value> {
    let signer = match util::str_at(object, &["spec", "signerName"]) {
        "" => "<none>",
        signer => signer,
    };
    let duration = object
        .pointer("/spec/expirationSeconds")
        .and_then(Value::as_i64)
        .map_or_else(
            || "<none>".to_owned(),
            genplane_apimachinery::time::human_duration,
        );
    vec![
        util::name(object),
        util::age(object, now),
        Value::from(signer),
        Value::from(util::str_at(object, &["spec", "username"])),
        Value::from(duration),
        Value::from(condition_summary(object)),
    ]
}

const SUBRESOURCE_VERBS: &[&str] = crate::resource::STATUS_VERBS;

/// This resource in the catalog: everything the server needs to serve it.
pub const INFO: crate::resource::ResourceInfo = crate::resource::ResourceInfo {
    group: super::GROUP,
    version: "v1",
    kind: KIND,
    list_kind: "CertificateSigningRequestList",
    resource: "certificatesigningrequests",
    singular: "certificatesigningrequest",
    short_names: &["csr"],
    namespaced: false,
    create_on_update: false,
    verbs: crate::resource::ALL_VERBS,
    subresources: &[
        crate::resource::Subresource {
            name: "approval",
            kind: KIND,
            verbs: SUBRESOURCE_VERBS,
            rules: Some(crate::resource::SubresourceRules {
                prepare_for_update: prepare_for_approval_update,
                validate_update: validate_approval_update,
            }),
            body: None,
        },
        crate::resource::Subresource {
            name: "status",
            kind: KIND,
            verbs: SUBRESOURCE_VERBS,
            rules: Some(crate::resource::SubresourceRules {
                prepare_for_update: prepare_for_status_update,
                validate_update: validate_status_update,
            }),
            body: None,
        },
    ],
    categories: &[],
    storage_prefix: "certificatesigningrequests",
    storage_api_version: API_VERSION,
    schema: &SCHEMA,
    protobuf: true,
    feature_gate: None,
    extensions: EXTENSIONS,
    openapi_schema: crate::schema::schema_of::<
        k8s_openapi::api::certificates::v1::CertificateSigningRequest,
    >,
    hooks: crate::resource::Hooks {
        decode,
        default: crate::resource::no_default,
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
        pending_finalization: crate::resource::nothing_pending,
        mark_deleting: crate::resource::no_default,
        grace_period: crate::resource::not_graceful,
    },
};
