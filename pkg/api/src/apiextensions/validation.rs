//! Validation of CustomResourceDefinitions: upstream's `ValidateCustomResourceDefinition`,
//! `ValidateCustomResourceDefinitionUpdate` and `ValidateUpdateCustomResourceDefinitionStatus`
//! (Kubernetes 1.33), with upstream's field paths and messages.
//!
//! ## Field paths: the internal form
//!
//! Upstream validates the *internal* form of a CRD, which it gets from v1 by a conversion that
//! moves each of `schema`, `subresources`, `additionalPrinterColumns` and `selectableFields` to
//! the spec's top level when every version has the same value (a single version always
//! does). Errors then name `spec.validation.openAPIV3Schema...`, `spec.subresources...`,
//! `spec.additionalPrinterColumns[i]...`, `spec.selectableFields[i]...`, and
//! `spec.versions[i]...` only for values that differ between versions. The conversion section
//! is named as internally too: `spec.conversion.webhookClientConfig`,
//! `spec.conversion.conversionReviewVersions`. This module reproduces that.
//!
//! ## The schema internals are not checked here
//!
//! **Every `openAPIV3Schema` is handed to the [`SchemaCheck`] the caller passes**, with the path
//! of the schema (`spec.validation.openAPIV3Schema` or
//! `spec.versions[i].schema.openAPIV3Schema`). That function owns everything
//! `ValidateCustomResourceDefinitionOpenAPISchema`, the structural-schema rules, the defaults
//! and the CEL rules (`x-kubernetes-validations`) check. The catalog hooks pass
//! [`no_schema_check`] (nothing) — **the API server must call [`validate_crd`] with
//! `genplane_apiextensions::structural::validate_schema` (and genplane-cel's rule
//! compilation) instead**, or invalid schemas are accepted.
//!
//! What validation.go checks outside the schema internals is here: the root of a schema when
//! the status subresource is on (only some fields, `type: object`), `nullable` at the root,
//! `preserveUnknownFields` with defaults, and the paths of `selectableFields`, which must exist
//! in the schema with a string, integer or boolean type.

use std::collections::BTreeSet;

use base64::Engine as _;
use genplane_apimachinery::errors::ApiError;
use genplane_apimachinery::meta::{ObjectMeta, validate_object_meta, validate_object_meta_update};
use genplane_apimachinery::validation::field::{Error, ErrorList, Path};
use genplane_apimachinery::validation::{is_dns1123_subdomain, name_is_dns_subdomain};
use serde::Deserialize;
use serde_json::Value;

use super::approval::{Approval, approval_of, is_protected_community_group};
use super::{API_APPROVED_ANNOTATION, API_VERSION, KIND, SCHEMA, status};
use crate::util;

/// Checks the internals of one `openAPIV3Schema` at `path` (see the module docs). The server
/// passes the schema engine's check; [`no_schema_check`] checks nothing.
pub type SchemaCheck<'a> = dyn Fn(&Value, &Path) -> ErrorList + 'a;

/// A [`SchemaCheck`] that finds nothing (what the catalog hooks use until the server passes
/// the schema engine).
pub fn no_schema_check(_schema: &Value, _path: &Path) -> ErrorList {
    ErrorList::new()
}

/// The most selectable fields a version may have.
pub const MAX_SELECTABLE_FIELDS: usize = 8;
/// The types a printer column may have.
pub const PRINTER_COLUMN_TYPES: &[&str] = &["boolean", "date", "integer", "number", "string"];
/// The formats a printer column may have.
pub const PRINTER_COLUMN_FORMATS: &[&str] = &[
    "byte",
    "date",
    "date-time",
    "double",
    "float",
    "int32",
    "int64",
    "password",
];
/// The ConversionReview versions this server understands; a webhook must accept one.
pub const CONVERSION_REVIEW_VERSIONS: &[&str] = &["v1", "v1beta1"];
/// The fields a schema root may have when the status subresource is on, in Go's names.
const ALLOWED_AT_ROOT: &[&str] = &[
    "Description",
    "Type",
    "Format",
    "Title",
    "Maximum",
    "ExclusiveMaximum",
    "Minimum",
    "ExclusiveMinimum",
    "MaxLength",
    "MinLength",
    "Pattern",
    "MaxItems",
    "MinItems",
    "UniqueItems",
    "MultipleOf",
    "Required",
    "Items",
    "Properties",
    "ExternalDocs",
    "Example",
    "XPreserveUnknownFields",
    "XValidations",
];
/// JSONSchemaProps' fields in Go's order: (JSON name, Go name).
const SCHEMA_FIELDS: &[(&str, &str)] = &[
    ("id", "ID"),
    ("$schema", "Schema"),
    ("$ref", "Ref"),
    ("description", "Description"),
    ("type", "Type"),
    ("format", "Format"),
    ("title", "Title"),
    ("default", "Default"),
    ("maximum", "Maximum"),
    ("exclusiveMaximum", "ExclusiveMaximum"),
    ("minimum", "Minimum"),
    ("exclusiveMinimum", "ExclusiveMinimum"),
    ("maxLength", "MaxLength"),
    ("minLength", "MinLength"),
    ("pattern", "Pattern"),
    ("maxItems", "MaxItems"),
    ("minItems", "MinItems"),
    ("uniqueItems", "UniqueItems"),
    ("multipleOf", "MultipleOf"),
    ("enum", "Enum"),
    ("maxProperties", "MaxProperties"),
    ("minProperties", "MinProperties"),
    ("required", "Required"),
    ("items", "Items"),
    ("allOf", "AllOf"),
    ("oneOf", "OneOf"),
    ("anyOf", "AnyOf"),
    ("not", "Not"),
    ("properties", "Properties"),
    ("additionalProperties", "AdditionalProperties"),
    ("patternProperties", "PatternProperties"),
    ("dependencies", "Dependencies"),
    ("additionalItems", "AdditionalItems"),
    ("definitions", "Definitions"),
    ("externalDocs", "ExternalDocs"),
    ("example", "Example"),
    ("nullable", "Nullable"),
    (
        "x-kubernetes-preserve-unknown-fields",
        "XPreserveUnknownFields",
    ),
    ("x-kubernetes-embedded-resource", "XEmbeddedResource"),
    ("x-kubernetes-int-or-string", "XIntOrString"),
    ("x-kubernetes-list-map-keys", "XListMapKeys"),
    ("x-kubernetes-list-type", "XListType"),
    ("x-kubernetes-map-type", "XMapType"),
    ("x-kubernetes-validations", "XValidations"),
];

const DNS1035_LABEL_MAX_LEN: usize = 63;
const DNS1035_LABEL_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";

/// Problems with `value` as a DNS-1035 label (upstream's `IsDNS1035Label`).
pub fn is_dns1035_label(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > DNS1035_LABEL_MAX_LEN {
        errors.push(format!(
            "must be no more than {DNS1035_LABEL_MAX_LEN} characters"
        ));
    }
    let b = value.as_bytes();
    let valid = !b.is_empty()
        && b[0].is_ascii_lowercase()
        && (b[b.len() - 1].is_ascii_lowercase() || b[b.len() - 1].is_ascii_digit())
        && b.iter()
            .all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-');
    if !valid {
        errors.push(DNS1035_LABEL_MSG.to_owned());
    }
    errors
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Crd {
    spec: Spec,
    status: Status,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct Spec {
    group: String,
    names: Names,
    scope: String,
    versions: Vec<Value>,
    conversion: Option<Conversion>,
    preserve_unknown_fields: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct Names {
    plural: String,
    singular: String,
    short_names: Vec<String>,
    kind: String,
    list_kind: String,
    categories: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct Version {
    name: String,
    storage: bool,
    deprecated: bool,
    deprecation_warning: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct Conversion {
    strategy: String,
    webhook: Option<Webhook>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct Webhook {
    client_config: Option<ClientConfig>,
    conversion_review_versions: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct ClientConfig {
    url: Option<String>,
    service: Option<crate::webhook::ServiceReference>,
    ca_bundle: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct Status {
    accepted_names: Names,
    stored_versions: Vec<String>,
}

fn read(object: &Value) -> Result<(ObjectMeta, Crd), ApiError> {
    util::decode_typed::<Crd>(object, &SCHEMA, KIND, API_VERSION)
}

/// One of the per-version fields the internal form may hold at the top level.
#[derive(Clone, Copy, Debug)]
enum PerVersion {
    Schema,
    Subresources,
    Columns,
    SelectableFields,
}

impl PerVersion {
    fn v1_key(self) -> &'static str {
        match self {
            PerVersion::Schema => "schema",
            PerVersion::Subresources => "subresources",
            PerVersion::Columns => "additionalPrinterColumns",
            PerVersion::SelectableFields => "selectableFields",
        }
    }
}

/// The internal form of the per-version fields: each is at the top level (`Some(value)`, the
/// value possibly absent) when every version has the same, else per version (`None`).
struct Internal<'a> {
    versions: &'a [Value],
    top: [Option<Option<&'a Value>>; 4],
}

impl<'a> Internal<'a> {
    fn new(versions: &'a [Value]) -> Self {
        let promote = |field: PerVersion| {
            let first = versions.first()?.get(field.v1_key());
            versions
                .iter()
                .all(|v| v.get(field.v1_key()) == first)
                .then_some(first)
        };
        Internal {
            versions,
            top: [
                promote(PerVersion::Schema),
                promote(PerVersion::Subresources),
                promote(PerVersion::Columns),
                promote(PerVersion::SelectableFields),
            ],
        }
    }

    fn top(&self, field: PerVersion) -> Option<&'a Value> {
        self.top[field as usize].flatten()
    }

    fn promoted(&self, field: PerVersion) -> bool {
        self.top[field as usize].is_some()
    }

    /// The version's own value (none when the field is at the top level).
    fn version(&self, i: usize, field: PerVersion) -> Option<&'a Value> {
        if self.promoted(field) {
            return None;
        }
        self.versions.get(i)?.get(field.v1_key())
    }

    /// The value that applies to version `i`, wherever it is.
    fn effective(&self, i: usize, field: PerVersion) -> Option<&'a Value> {
        if self.promoted(field) {
            self.top(field)
        } else {
            self.versions.get(i)?.get(field.v1_key())
        }
    }

    fn any_status_enabled(&self) -> bool {
        (0..self.versions.len())
            .any(|i| status_enabled(self.effective(i, PerVersion::Subresources)))
    }
}

fn status_enabled(subresources: Option<&Value>) -> bool {
    subresources
        .and_then(|s| s.get("status"))
        .is_some_and(|s| !s.is_null())
}

fn open_api_schema(validation: Option<&Value>) -> Option<&Value> {
    validation
        .and_then(|v| v.get("openAPIV3Schema"))
        .filter(|s| !s.is_null())
}

/// What the update rules take from the old object.
struct Options {
    require_recognized_conversion_review_version: bool,
    require_immutable_names: bool,
    require_open_api_schema: bool,
    allow_invalid_ca_bundle: bool,
    /// Versions (`""` for the top level) allowed more than [`MAX_SELECTABLE_FIELDS`] because
    /// they had as many before and did not change them.
    allow_too_many_selectable_fields: BTreeSet<String>,
}

/// Validates a CRD: on create (`old` is `None`) or on update, with `schema_check` run on every
/// `openAPIV3Schema` (see the module docs: the server passes the schema engine). `Err` is a
/// 400 for an object that does not decode.
pub fn validate_crd(
    crd: &Value,
    old: Option<&Value>,
    schema_check: &SchemaCheck<'_>,
) -> Result<ErrorList, ApiError> {
    let (meta, new) = read(crd)?;
    let old_read = old.map(read).transpose()?;
    let metadata = Path::new("metadata");
    let mut errors = match &old_read {
        None => {
            let mut errors = validate_object_meta(&meta, false, name_is_dns_subdomain, &metadata);
            required_name_errors(&mut errors, &meta, &new.spec, &metadata);
            errors
        }
        Some((old_meta, _)) => validate_object_meta_update(&meta, old_meta, &metadata),
    };
    let options = match (old, &old_read) {
        (Some(old), Some((_, old_crd))) => update_options(crd, old, old_crd),
        _ => Options {
            require_recognized_conversion_review_version: true,
            require_immutable_names: false,
            require_open_api_schema: true,
            allow_invalid_ca_bundle: true,
            allow_too_many_selectable_fields: BTreeSet::new(),
        },
    };
    let spec_path = Path::new("spec");
    errors.extend(validate_spec(&new.spec, &options, schema_check, &spec_path));
    if let Some((_, old_crd)) = &old_read {
        errors.extend(validate_spec_update(
            &new.spec,
            &old_crd.spec,
            &options,
            &spec_path,
        ));
    }
    errors.extend(validate_names(
        &new.status.accepted_names,
        &Path::new("status").child("acceptedNames"),
    ));
    errors.extend(validate_stored_versions(
        &new.status.stored_versions,
        &new.spec.versions,
        &Path::new("status").child("storedVersions"),
    ));
    errors.extend(validate_api_approval(
        &new.spec.group,
        &meta,
        old_read.as_ref().map(|(m, _)| m),
    ));
    let old_preserves = old_read
        .as_ref()
        .is_some_and(|(_, o)| o.spec.preserve_unknown_fields);
    if !old_preserves && new.spec.preserve_unknown_fields {
        errors.push(Error::invalid(
            &spec_path.child("preserveUnknownFields"),
            true,
            "cannot set to true, set x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema instead",
        ));
    }
    Ok(errors)
}

/// Validates an update through the `status` subresource: metadata and
/// `status.acceptedNames`.
pub fn validate_status_update(new: &Value, old: &Value) -> Result<ErrorList, ApiError> {
    let (meta, crd) = read(new)?;
    let (old_meta, _) = read(old)?;
    let mut errors = validate_object_meta_update(&meta, &old_meta, &Path::new("metadata"));
    errors.extend(validate_names(
        &crd.status.accepted_names,
        &Path::new("status").child("acceptedNames"),
    ));
    Ok(errors)
}

/// The name must be `<plural>.<group>`: upstream's name validator adds this message to those
/// of a DNS subdomain, for `name` and `generateName` alike.
fn required_name_errors(errors: &mut ErrorList, meta: &ObjectMeta, spec: &Spec, path: &Path) {
    let required = format!("{}.{}", spec.names.plural, spec.group);
    let message = r#"must be spec.names.plural+"."+spec.group"#;
    for (field, value) in [
        ("generateName", meta.generate_name.as_str()),
        ("name", meta.name.as_str()),
    ] {
        if value.is_empty() || value == required {
            continue;
        }
        let at = path.child(field);
        let position = errors
            .0
            .iter()
            .rposition(|e| e.field == at)
            .map(|p| p + 1)
            .unwrap_or_else(|| {
                errors
                    .0
                    .iter()
                    .rposition(|e| e.field == path.child("generateName"))
                    .map_or(0, |p| p + 1)
            });
        errors
            .0
            .insert(position, Error::invalid(&at, value, message));
    }
}

fn update_options(new: &Value, old: &Value, old_crd: &Crd) -> Options {
    let old_versions = &old_crd.spec.versions;
    let old_internal = Internal::new(old_versions);
    let all_have_schemas = open_api_schema(old_internal.top(PerVersion::Schema)).is_some()
        || old_versions
            .iter()
            .all(|v| open_api_schema(v.get("schema")).is_some());
    let established = status::is_condition_true(old, status::ESTABLISHED);
    let old_review_versions_ok = old_crd
        .spec
        .conversion
        .as_ref()
        .and_then(|c| c.webhook.as_ref())
        .map(|w| &w.conversion_review_versions)
        .is_none_or(|v| {
            v.is_empty()
                || v.iter()
                    .any(|x| CONVERSION_REVIEW_VERSIONS.contains(&x.as_str()))
        });
    let old_ca_bundle = old
        .pointer("/spec/conversion/webhook/clientConfig/caBundle")
        .and_then(Value::as_str)
        .unwrap_or("");
    let allow_invalid_ca_bundle =
        !established || (!old_ca_bundle.is_empty() && ca_bundle_error(old_ca_bundle).is_some());
    let mut allow_too_many = BTreeSet::new();
    let new_versions = new
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let count = |v: Option<&Value>| v.and_then(Value::as_array).map_or(0, Vec::len);
    let new_internal = Internal::new(new_versions);
    let old_top = old_internal.top(PerVersion::SelectableFields);
    if count(old_top) > MAX_SELECTABLE_FIELDS
        && new_internal.top(PerVersion::SelectableFields) == old_top
    {
        allow_too_many.insert(String::new());
    }
    for version in new_versions {
        let name = version.get("name").and_then(Value::as_str).unwrap_or("");
        let Some(old_version) = old_versions
            .iter()
            .find(|v| v.get("name").and_then(Value::as_str) == Some(name))
        else {
            continue;
        };
        let old_fields = old_version.get("selectableFields");
        if count(old_fields) > MAX_SELECTABLE_FIELDS
            && version.get("selectableFields") == old_fields
        {
            allow_too_many.insert(name.to_owned());
        }
    }
    Options {
        require_recognized_conversion_review_version: old_review_versions_ok,
        require_immutable_names: established,
        require_open_api_schema: all_have_schemas,
        allow_invalid_ca_bundle,
        allow_too_many_selectable_fields: allow_too_many,
    }
}

fn join(messages: Vec<String>) -> String {
    messages.join(",")
}

fn validate_spec(
    spec: &Spec,
    options: &Options,
    schema_check: &SchemaCheck<'_>,
    path: &Path,
) -> ErrorList {
    let mut errors = ErrorList::new();
    let group_path = path.child("group");
    if spec.group.is_empty() {
        errors.push(Error::required(&group_path, ""));
    } else {
        let problems = is_dns1123_subdomain(&spec.group);
        if !problems.is_empty() {
            errors.push(Error::invalid(
                &group_path,
                spec.group.as_str(),
                join(problems),
            ));
        } else if !spec.group.contains('.') {
            errors.push(Error::invalid(
                &group_path,
                spec.group.as_str(),
                "should be a domain with at least one dot",
            ));
        }
    }
    errors.extend(validate_enum(
        &path.child("scope"),
        &spec.scope,
        &["Cluster", "Namespaced"],
    ));

    let internal = Internal::new(&spec.versions);
    let versions_path = path.child("versions");
    let top_schema = open_api_schema(internal.top(PerVersion::Schema));
    if top_schema.is_none() {
        for (i, version) in spec.versions.iter().enumerate() {
            let schema_path = versions_path
                .index(i)
                .child("schema")
                .child("openAPIV3Schema");
            let missing = open_api_schema(version.get("schema")).is_none();
            if options.require_open_api_schema {
                if missing {
                    errors.push(Error::required(&schema_path, ""));
                }
            } else if !spec.preserve_unknown_fields
                && missing
                && version.get("served").and_then(Value::as_bool) == Some(true)
            {
                errors.push(Error::required(
                    &schema_path,
                    "because otherwise all fields are pruned",
                ));
            }
        }
    }
    let has_defaults = (0..spec.versions.len()).any(|i| {
        open_api_schema(internal.effective(i, PerVersion::Schema))
            .is_some_and(|s| schema_has(s, &|node| node.get("default").is_some()))
    });
    if has_defaults && spec.preserve_unknown_fields {
        errors.push(Error::invalid(
            &path.child("preserveUnknownFields"),
            true,
            "must be false in order to use defaults in the schema",
        ));
    }

    let mut storage_count = 0;
    let mut names = BTreeSet::new();
    let mut unique = true;
    for (i, raw) in spec.versions.iter().enumerate() {
        let version: Version = serde_json::from_value(raw.clone()).unwrap_or_default();
        let at = versions_path.index(i);
        if version.storage {
            storage_count += 1;
        }
        if !names.insert(version.name.clone()) {
            unique = false;
        }
        let problems = is_dns1035_label(&version.name);
        if !problems.is_empty() {
            errors.push(Error::invalid(
                &at.child("name"),
                version.name.as_str(),
                join(problems),
            ));
        }
        for message in deprecation_warning_errors(version.deprecated, &version.deprecation_warning)
        {
            errors.push(Error::invalid(
                &at.child("deprecationWarning"),
                version
                    .deprecation_warning
                    .clone()
                    .map_or(Value::Null, Value::from),
                message,
            ));
        }
        let status_on = status_enabled(internal.effective(i, PerVersion::Subresources));
        errors.extend(validate_validation(
            internal.version(i, PerVersion::Schema),
            status_on,
            schema_check,
            &at.child("schema"),
        ));
        errors.extend(validate_subresources(
            internal.version(i, PerVersion::Subresources),
            &at.child("subresources"),
        ));
        errors.extend(validate_columns(
            internal.version(i, PerVersion::Columns),
            &at.child("additionalPrinterColumns"),
        ));
        if let Some(fields) = internal
            .version(i, PerVersion::SelectableFields)
            .and_then(Value::as_array)
            .filter(|f| !f.is_empty())
        {
            let fields_path = at.child("selectableFields");
            match open_api_schema(internal.version(i, PerVersion::Schema)) {
                None => errors.push(Error::invalid(
                    &fields_path,
                    "",
                    "may only be set when `version.schema.openAPIV3Schema` is not included",
                )),
                Some(schema) => errors.extend(validate_selectable_fields(
                    fields,
                    schema,
                    &fields_path,
                    options
                        .allow_too_many_selectable_fields
                        .contains(&version.name),
                )),
            }
        }
    }
    let versions_value = Value::Array(spec.versions.clone());
    if !unique {
        errors.push(Error::invalid(
            &versions_path,
            versions_value.clone(),
            "must contain unique version names",
        ));
    }
    if storage_count != 1 {
        errors.push(Error::invalid(
            &versions_path,
            versions_value,
            "must have exactly one version marked as storage version",
        ));
    }
    // The internal `spec.version` is the first version's name, checked once more.
    if let Some(first) = spec
        .versions
        .first()
        .and_then(|v| v.get("name"))
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
    {
        let problems = is_dns1035_label(first);
        if !problems.is_empty() {
            errors.push(Error::invalid(
                &path.child("version"),
                first,
                join(problems),
            ));
        }
    }

    let names_path = path.child("names");
    for (field, value) in [
        ("plural", &spec.names.plural),
        ("singular", &spec.names.singular),
        ("kind", &spec.names.kind),
        ("listKind", &spec.names.list_kind),
    ] {
        if value.is_empty() {
            errors.push(Error::required(&names_path.child(field), ""));
        }
    }
    errors.extend(validate_names(&spec.names, &names_path));
    errors.extend(validate_validation(
        internal.top(PerVersion::Schema),
        internal.any_status_enabled(),
        schema_check,
        &path.child("validation"),
    ));
    errors.extend(validate_subresources(
        internal.top(PerVersion::Subresources),
        &path.child("subresources"),
    ));
    errors.extend(validate_columns(
        internal.top(PerVersion::Columns),
        &path.child("additionalPrinterColumns"),
    ));
    if let Some(fields) = internal
        .top(PerVersion::SelectableFields)
        .and_then(Value::as_array)
        .filter(|f| !f.is_empty())
    {
        let fields_path = path.child("selectableFields");
        match open_api_schema(internal.top(PerVersion::Schema)) {
            None => errors.push(Error::invalid(
                &fields_path,
                "",
                "may only be set when validations.schema is included",
            )),
            Some(schema) => errors.extend(validate_selectable_fields(
                fields,
                schema,
                &fields_path,
                options.allow_too_many_selectable_fields.contains(""),
            )),
        }
    }

    if let Some(conversion) = &spec.conversion {
        if conversion.strategy != "None" && spec.preserve_unknown_fields {
            errors.push(Error::invalid(
                &path.child("conversion").child("strategy"),
                conversion.strategy.as_str(),
                "must be None if spec.preserveUnknownFields is true",
            ));
        }
        errors.extend(validate_conversion(
            conversion,
            options,
            &path.child("conversion"),
        ));
    }
    errors
}

fn validate_spec_update(spec: &Spec, old: &Spec, options: &Options, path: &Path) -> ErrorList {
    let mut errors = ErrorList::new();
    let immutable = |errors: &mut ErrorList, at: Path, new: &str, old: &str| {
        if new != old {
            errors.push(Error::invalid(&at, new, "field is immutable"));
        }
    };
    if options.require_immutable_names {
        immutable(&mut errors, path.child("scope"), &spec.scope, &old.scope);
        immutable(
            &mut errors,
            path.child("names").child("kind"),
            &spec.names.kind,
            &old.names.kind,
        );
    }
    immutable(&mut errors, path.child("group"), &spec.group, &old.group);
    immutable(
        &mut errors,
        path.child("names").child("plural"),
        &spec.names.plural,
        &old.names.plural,
    );
    errors
}

fn validate_enum(path: &Path, value: &str, accepted: &[&str]) -> ErrorList {
    let mut errors = ErrorList::new();
    if value.is_empty() {
        errors.push(Error::required(path, ""));
    } else if !accepted.contains(&value) {
        errors.push(Error::not_supported(path, value, accepted));
    }
    errors
}

fn deprecation_warning_errors(deprecated: bool, warning: &Option<String>) -> Vec<String> {
    let Some(warning) = warning else {
        return Vec::new();
    };
    if !deprecated {
        return vec!["can only be set for deprecated versions".to_owned()];
    }
    let mut errors = Vec::new();
    if warning.len() > 256 {
        errors.push("must be <= 256 characters long".to_owned());
    }
    if warning.is_empty() {
        errors.push("must not be an empty string".to_owned());
    }
    for (i, c) in warning.char_indices() {
        if c.is_control() {
            errors.push(format!(
                "must only contain printable UTF-8 characters; control character found at index {i}"
            ));
            break;
        }
    }
    errors
}

fn validate_names(names: &Names, path: &Path) -> ErrorList {
    let mut errors = ErrorList::new();
    for (field, value) in [("plural", &names.plural), ("singular", &names.singular)] {
        let problems = is_dns1035_label(value);
        if !value.is_empty() && !problems.is_empty() {
            errors.push(Error::invalid(
                &path.child(field),
                value.as_str(),
                join(problems),
            ));
        }
    }
    for (field, value) in [("kind", &names.kind), ("listKind", &names.list_kind)] {
        let problems = is_dns1035_label(&value.to_lowercase());
        if !value.is_empty() && !problems.is_empty() {
            errors.push(Error::invalid(
                &path.child(field),
                value.as_str(),
                format!(
                    "may have mixed case, but should otherwise match: {}",
                    join(problems)
                ),
            ));
        }
    }
    for (i, short) in names.short_names.iter().enumerate() {
        let problems = is_dns1035_label(short);
        if !problems.is_empty() {
            errors.push(Error::invalid(
                &path.child("shortNames").index(i),
                short.as_str(),
                join(problems),
            ));
        }
    }
    if !names.kind.is_empty() && names.kind == names.list_kind {
        errors.push(Error::invalid(
            &path.child("listKind"),
            names.list_kind.as_str(),
            "kind and listKind may not be the same",
        ));
    }
    for (i, category) in names.categories.iter().enumerate() {
        let problems = is_dns1035_label(category);
        if !problems.is_empty() {
            errors.push(Error::invalid(
                &path.child("categories").index(i),
                category.as_str(),
                join(problems),
            ));
        }
    }
    errors
}

/// A `CustomResourceValidation` at `path` (`spec.validation` or `spec.versions[i].schema`):
/// the root rules, then the caller's check of the schema internals.
fn validate_validation(
    validation: Option<&Value>,
    status_on: bool,
    schema_check: &SchemaCheck<'_>,
    path: &Path,
) -> ErrorList {
    let mut errors = ErrorList::new();
    let Some(schema) = open_api_schema(validation) else {
        return errors;
    };
    let schema_path = path.child("openAPIV3Schema");
    if status_on {
        for (json_name, go_name) in SCHEMA_FIELDS {
            let Some(value) = schema.get(*json_name).filter(|v| !is_zero(v)) else {
                continue;
            };
            if *go_name == "Type" {
                if value.as_str() != Some("object") {
                    errors.push(Error::invalid(
                        &path.child("openAPIV3Schema.type"),
                        value.clone(),
                        r#"only "object" is allowed as the type at the root of the schema if the status subresource is enabled"#,
                    ));
                    break;
                }
                continue;
            }
            if !ALLOWED_AT_ROOT.contains(go_name) {
                errors.push(Error::invalid(
                    &schema_path,
                    schema.clone(),
                    format!(
                        "only [{}] fields are allowed at the root of the schema if the status subresource is enabled",
                        ALLOWED_AT_ROOT.join(" ")
                    ),
                ));
                break;
            }
        }
    }
    if schema.get("nullable").and_then(Value::as_bool) == Some(true) {
        errors.push(Error::forbidden(
            &path.child("openAPIV3Schema.nullable"),
            "nullable cannot be true at the root",
        ));
    }
    errors.extend(schema_check(schema, &schema_path));
    errors
}

/// Go's zero values, which its reflection over the root schema skips.
fn is_zero(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(m) => m.is_empty(),
        Value::Number(_) => false,
    }
}

/// Whether `pred` holds for `schema` or any schema below it.
pub fn schema_has(schema: &Value, pred: &dyn Fn(&Value) -> bool) -> bool {
    if !schema.is_object() {
        return false;
    }
    if pred(schema) {
        return true;
    }
    let mut children: Vec<&Value> = Vec::new();
    for key in ["items", "not", "additionalProperties", "additionalItems"] {
        match schema.get(key) {
            Some(child @ Value::Object(_)) => children.push(child),
            Some(Value::Array(list)) => children.extend(list),
            _ => {}
        }
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        if let Some(Value::Array(list)) = schema.get(key) {
            children.extend(list);
        }
    }
    for key in [
        "properties",
        "patternProperties",
        "definitions",
        "dependencies",
    ] {
        if let Some(Value::Object(map)) = schema.get(key) {
            children.extend(map.values());
        }
    }
    children.into_iter().any(|child| schema_has(child, pred))
}

fn validate_subresources(subresources: Option<&Value>, path: &Path) -> ErrorList {
    let mut errors = ErrorList::new();
    let Some(scale) = subresources
        .and_then(|s| s.get("scale"))
        .filter(|s| !s.is_null())
    else {
        return errors;
    };
    let text = |key: &str| scale.get(key).and_then(Value::as_str).unwrap_or("");
    for (key, prefix, under) in [
        ("specReplicasPath", ".spec.", ".spec"),
        ("statusReplicasPath", ".status.", ".status"),
    ] {
        let at = path.child(&format!("scale.{key}"));
        let value = text(key);
        if value.is_empty() {
            errors.push(Error::required(&at, ""));
            continue;
        }
        let problems = validate_simple_json_path(value, &at);
        if !problems.is_empty() {
            errors.extend(problems);
        } else if !value.starts_with(prefix) {
            errors.push(Error::invalid(
                &at,
                value,
                format!("should be a json path under {under}"),
            ));
        }
    }
    let selector = text("labelSelectorPath");
    if !selector.is_empty() {
        let at = path.child("scale.labelSelectorPath");
        let problems = validate_simple_json_path(selector, &at);
        if !problems.is_empty() {
            errors.extend(problems);
        } else if !selector.starts_with(".spec.") && !selector.starts_with(".status.") {
            errors.push(Error::invalid(
                &at,
                selector,
                "should be a json path under either .spec or .status",
            ));
        }
    }
    errors
}

fn validate_simple_json_path(value: &str, path: &Path) -> ErrorList {
    let mut errors = ErrorList::new();
    if value.is_empty() {
        errors.push(Error::invalid(path, value, "must not be empty"));
    } else if !value.starts_with('.') {
        errors.push(Error::invalid(
            path,
            value,
            "must be a simple json path starting with .",
        ));
    }
    errors
}

fn validate_columns(columns: Option<&Value>, path: &Path) -> ErrorList {
    let mut errors = ErrorList::new();
    let Some(columns) = columns.and_then(Value::as_array) else {
        return errors;
    };
    let types = PRINTER_COLUMN_TYPES.join(",");
    let formats = PRINTER_COLUMN_FORMATS.join(",");
    for (i, column) in columns.iter().enumerate() {
        let at = path.index(i);
        let text = |key: &str| column.get(key).and_then(Value::as_str).unwrap_or("");
        if text("name").is_empty() {
            errors.push(Error::required(&at.child("name"), ""));
        }
        let ty = text("type");
        if ty.is_empty() {
            errors.push(Error::required(
                &at.child("type"),
                format!("must be one of {types}"),
            ));
        } else if !PRINTER_COLUMN_TYPES.contains(&ty) {
            errors.push(Error::invalid(
                &at.child("type"),
                ty,
                format!("must be one of {types}"),
            ));
        }
        let format = text("format");
        if !format.is_empty() && !PRINTER_COLUMN_FORMATS.contains(&format) {
            errors.push(Error::invalid(
                &at.child("format"),
                format,
                format!("must be one of {formats}"),
            ));
        }
        let json_path = text("jsonPath");
        let json_path_at = at.child("JSONPath");
        if json_path.is_empty() {
            errors.push(Error::required(&json_path_at, ""));
        } else {
            errors.extend(validate_simple_json_path(json_path, &json_path_at));
        }
    }
    errors
}

/// Resolves a selectable field's path (`.spec.a.b`, `.spec['a-b']`, no array notation) in a
/// schema as upstream's `ValidFieldPath` does: the field names and the schema of the field, or
/// upstream's reason why it does not resolve.
fn resolve_field_path<'a>(
    path: &str,
    schema: &'a Value,
) -> Result<(Vec<String>, &'a Value), String> {
    const INVALID: &str = "does not refer to a valid field";
    let mut segments = Vec::new();
    let mut current = schema;
    let mut step = |name: &str, current: &mut &'a Value| -> Result<(), String> {
        if let Some(properties) = current.get("properties").filter(|p| p.is_object()) {
            *current = properties.get(name).ok_or(INVALID)?;
        } else if let Some(values) = current
            .get("additionalProperties")
            .filter(|a| a.is_object())
        {
            *current = values;
        } else {
            return Err(INVALID.to_owned());
        }
        segments.push(name.to_owned());
        Ok(())
    };
    let mut rest = path;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('.') {
            let end = after.find(['.', '[', ']']).unwrap_or(after.len());
            if end == 0 {
                return Err("unexpected end of JSON path".to_owned());
            }
            step(&after[..end], &mut current)?;
            rest = &after[end..];
        } else if let Some(after) = rest.strip_prefix('[') {
            if after.is_empty() {
                return Err("unexpected end of JSON path".to_owned());
            }
            let Some(quoted) = after.strip_prefix('\'') else {
                let token = &after[..after.find(['.', '[', ']']).unwrap_or(after.len())];
                if !token.is_empty() && token.bytes().all(|b| b.is_ascii_digit()) {
                    return Err("array notation is not allowed".to_owned());
                }
                return Err(format!("expected single quoted string but got {token}"));
            };
            let Some(end) = quoted.find("']") else {
                return Err("unexpected end of JSON path".to_owned());
            };
            step(&quoted[..end], &mut current)?;
            rest = &quoted[end + 2..];
        } else {
            let token = &rest[..rest.find(['.', '[', ']']).unwrap_or(rest.len()).max(1)];
            return Err(format!("expected [ or . but got: {token}"));
        }
    }
    if segments.is_empty() {
        return Err("unexpected end of JSON path".to_owned());
    }
    Ok((segments, current))
}

fn validate_selectable_fields(
    fields: &[Value],
    schema: &Value,
    path: &Path,
    allow_too_many: bool,
) -> ErrorList {
    let mut errors = ErrorList::new();
    let mut unique = BTreeSet::new();
    for (i, field) in fields.iter().enumerate() {
        let at = path.index(i).child("jsonPath");
        let json_path = field.get("jsonPath").and_then(Value::as_str).unwrap_or("");
        if json_path.is_empty() {
            errors.push(Error::required(&at, ""));
            continue;
        }
        let (segments, found) = match resolve_field_path(json_path, schema) {
            Ok(found) => found,
            Err(message) => {
                errors.push(Error::invalid(
                    &at,
                    json_path,
                    format!("is an invalid path: {message}"),
                ));
                continue;
            }
        };
        if segments.first().map(String::as_str) == Some("metadata") {
            errors.push(Error::invalid(
                &at,
                json_path,
                "must not point to fields in metadata",
            ));
        }
        let ty = found.get("type").and_then(Value::as_str).unwrap_or("");
        if !matches!(ty, "string" | "boolean" | "integer") {
            errors.push(Error::invalid(
                &at,
                json_path,
                "must point to a field of type string, boolean or integer. Enum string fields and strings with formats are allowed.",
            ));
        }
        if !unique.insert(segments.join(".")) {
            errors.push(Error::duplicate(&at, json_path));
        }
    }
    if unique.len() > MAX_SELECTABLE_FIELDS && !allow_too_many {
        errors.push(Error::too_many(path, unique.len(), MAX_SELECTABLE_FIELDS));
    }
    errors
}

fn validate_conversion(conversion: &Conversion, options: &Options, path: &Path) -> ErrorList {
    let mut errors = validate_enum(
        &path.child("strategy"),
        &conversion.strategy,
        &["None", "Webhook"],
    );
    let client_config = conversion
        .webhook
        .as_ref()
        .and_then(|w| w.client_config.as_ref());
    let review_versions: &[String] = conversion
        .webhook
        .as_ref()
        .map_or(&[], |w| &w.conversion_review_versions);
    let config_path = path.child("webhookClientConfig");
    let versions_path = path.child("conversionReviewVersions");
    if conversion.strategy == "Webhook" {
        match client_config {
            None => errors.push(Error::required(
                &config_path,
                "required when strategy is set to Webhook",
            )),
            Some(config) => {
                match (&config.url, &config.service) {
                    (Some(url), None) => {
                        errors.extend(crate::webhook::validate_url(&config_path.child("url"), url));
                    }
                    (None, Some(service)) => {
                        errors.extend(crate::webhook::validate_service(
                            &config_path.child("service"),
                            service,
                        ));
                    }
                    _ => errors.push(Error::required(
                        &config_path,
                        "exactly one of url or service is required",
                    )),
                }
                if !config.ca_bundle.is_empty()
                    && !options.allow_invalid_ca_bundle
                    && let Some(message) = ca_bundle_error(&config.ca_bundle)
                {
                    errors.push(Error::invalid(
                        &config_path.child("caBundle"),
                        config.ca_bundle.as_str(),
                        message,
                    ));
                }
            }
        }
        errors.extend(validate_conversion_review_versions(
            review_versions,
            options.require_recognized_conversion_review_version,
            &versions_path,
        ));
    } else {
        if client_config.is_some() {
            errors.push(Error::forbidden(
                &config_path,
                "should not be set when strategy is not set to Webhook",
            ));
        }
        if !review_versions.is_empty() {
            errors.push(Error::forbidden(
                &versions_path,
                "should not be set when strategy is not set to Webhook",
            ));
        }
    }
    errors
}

fn validate_conversion_review_versions(
    versions: &[String],
    require_recognized: bool,
    path: &Path,
) -> ErrorList {
    let mut errors = ErrorList::new();
    if versions.is_empty() {
        errors.push(Error::required(path, ""));
        return errors;
    }
    let mut seen = BTreeSet::new();
    let mut recognized = false;
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
        if CONVERSION_REVIEW_VERSIONS.contains(&version.as_str()) {
            recognized = true;
        }
    }
    if require_recognized && !recognized {
        errors.push(Error::invalid(
            path,
            Value::from(versions.to_vec()),
            format!(
                "must include at least one of {}",
                CONVERSION_REVIEW_VERSIONS.join(", ")
            ),
        ));
    }
    errors
}

/// Why a `caBundle` (base64 of PEM) does not make a certificate pool, as client-go words it.
fn ca_bundle_error(ca_bundle: &str) -> Option<String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(ca_bundle)
        .unwrap_or_default();
    let text = String::from_utf8_lossy(&bytes);
    let has_certificate =
        text.contains("-----BEGIN CERTIFICATE-----") && text.contains("-----END CERTIFICATE-----");
    (!has_certificate)
        .then(|| "unable to load root certificates: unable to parse bytes as PEM block".to_owned())
}

fn validate_stored_versions(stored: &[String], versions: &[Value], path: &Path) -> ErrorList {
    let mut errors = ErrorList::new();
    if stored.is_empty() {
        errors.push(Error::invalid(
            path,
            Value::Array(Vec::new()),
            "must have at least one stored version",
        ));
        return errors;
    }
    let mut remaining: Vec<(usize, &str)> = stored
        .iter()
        .enumerate()
        .map(|(i, v)| (i, v.as_str()))
        .collect();
    // Go keeps the last index of a repeated name.
    remaining.reverse();
    let mut seen = BTreeSet::new();
    remaining.retain(|(_, v)| seen.insert(*v));
    remaining.reverse();
    for version in versions {
        let name = version.get("name").and_then(Value::as_str).unwrap_or("");
        let storage = version.get("storage").and_then(Value::as_bool) == Some(true);
        let found = remaining.iter().any(|(_, v)| *v == name);
        if storage && !found {
            errors.push(Error::invalid(
                path,
                Value::from(stored.to_vec()),
                format!("must have the storage version {name}"),
            ));
        }
        remaining.retain(|(_, v)| *v != name);
    }
    for (i, version) in remaining {
        errors.push(Error::invalid(
            &path.index(i),
            version,
            format!(
                "missing from spec.versions; {version} was previously a storage version, and must remain in spec.versions until a storage migration ensures no data remains persisted in {version} and removes {version} from status.storedVersions"
            ),
        ));
    }
    errors
}

fn approval_state(meta: &ObjectMeta) -> (Approval, String) {
    approval_of(
        meta.annotations
            .get(API_APPROVED_ANNOTATION)
            .map(String::as_str),
    )
}

fn validate_api_approval(group: &str, meta: &ObjectMeta, old: Option<&ObjectMeta>) -> ErrorList {
    let mut errors = ErrorList::new();
    if !is_protected_community_group(group) {
        return errors;
    }
    let (state, reason) = approval_state(meta);
    if old.is_some_and(|old| approval_state(old).0 == state) {
        return errors;
    }
    let at = Path::new("metadata")
        .child("annotations")
        .key(API_APPROVED_ANNOTATION);
    let value = meta
        .annotations
        .get(API_APPROVED_ANNOTATION)
        .cloned()
        .unwrap_or_default();
    match state {
        Approval::Missing => errors.push(Error::required(&at, reason)),
        Approval::Invalid => errors.push(Error::invalid(&at, value, reason)),
        Approval::Approved | Approval::Bypassed => {}
    }
    errors
}
