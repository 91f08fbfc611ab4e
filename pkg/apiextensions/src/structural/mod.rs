//! The checks a CustomResourceDefinition version's `openAPIV3Schema` must pass when the CRD is
//! written, with upstream's field paths, error types and messages (users read them in
//! `kubectl apply` errors).
//!
//! [`validate_schema`] runs, in upstream's order (`apiextensions.k8s.io/v1`, Kubernetes 1.33):
//!
//! 1. with the status subresource enabled ([`Options::status_subresource`]): only some fields
//!    may be set at the root, and the root type must be `object`;
//! 2. `nullable` cannot be true at the root;
//! 3. the structural-schema rules (upstream's `NewStructural` and `ValidateStructural`): every
//!    specified field has a `type` (unless `x-kubernetes-int-or-string` or
//!    `x-kubernetes-preserve-unknown-fields` say otherwise), arrays have `items`, value
//!    validations (`allOf`, `anyOf`, `oneOf`, `not`) only restrict what the structure already
//!    specifies and set no `type`, `default`, `description`, `nullable`, extension or
//!    `metadata`, `metadata` at the root restricts at most `name` and `generateName`, embedded
//!    resources are objects, int-or-string is not combined with other extensions, patterns are
//!    valid regular expressions. These errors are sorted by their text, as upstream sorts them.
//!    When the schema cannot even be read as a structural one (`$ref`, `definitions`,
//!    `items` as a list, ...), upstream reports that as one error on the schema, and only when
//!    nothing else is wrong; so does this.
//! 4. the OpenAPI rules (upstream's `ValidateCustomResourceDefinitionOpenAPISchema`): types
//!    are OpenAPI types, `id`, `$ref`, `definitions`, `dependencies`, `patternProperties`,
//!    `additionalItems`, `uniqueItems: true` and `type: null` are forbidden, `properties` and
//!    `additionalProperties` exclude each other, `default` is forbidden in the top-level
//!    `apiVersion`, `kind` and `metadata` and inside `additionalProperties` of object metadata,
//!    `x-kubernetes-embedded-resource` is forbidden inside resource metadata, the list-type,
//!    list-map-keys and map-type rules (map keys must be required or defaulted and not
//!    nullable; set items must be atomic), and the static checks of `x-kubernetes-validations`
//!    entries (rule present, message without line breaks, known reason, valid field path).
//!
//! Not here: compiling the CEL rules and estimating their cost (`genplane-cel`), and checking
//! the `default` values. Upstream validates every default against its schema (after pruning it
//! and, inside object metadata, as part of a whole object) only when the schema is otherwise
//! structural; [`defaults()`] lists them with what that check needs.
//!
//! The schema is read as raw JSON (the JSON form of `JSONSchemaProps`); unknown keys are
//! ignored as upstream's decoding drops them, and `null` counts as absent. A known key with a
//! value of the wrong JSON type makes upstream reject the body before validation; here it is
//! reported as an invalid value and nothing else is checked.
//!
//! # Files
//!
//! This file holds the entry points, their [`Options`] and step 2. `parse.rs` reads the JSON
//! into the tree the checks walk; `status_root.rs` is step 1; `convert.rs` (whether the schema
//! can be read as a structural one at all) and `invariants.rs` are step 3; `openapi_rules.rs`
//! is step 4, with `extensions.rs` (the `x-kubernetes-*` extensions) and `validation_rules.rs`
//! (the `x-kubernetes-validations` entries); `defaults.rs` lists the defaults.

mod convert;
mod defaults;
mod extensions;
mod invariants;
mod openapi_rules;
mod parse;
mod status_root;
#[cfg(test)]
mod tests;
mod validation_rules;

use genplane_apimachinery::validation::field::{Error, ErrorList, Path};
use serde_json::Value;

use self::convert::convertible;
pub use self::defaults::{DefaultSite, Location, defaults};
use self::extensions::{has_non_atomic_set_items, map_list_keys_map_set};
use self::invariants::structural_errors;
use self::openapi_rules::{Ssv, openapi_errors};
use self::parse::{OPENAPI_TYPES, parse};
use self::status_root::status_root;

/// What upstream's validation depends on besides the schema.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// The version has the status subresource: only some fields may be set at the root.
    pub status_subresource: bool,
    /// Types must be OpenAPI types (`string`, `number`, `integer`, `boolean`, `array`,
    /// `object`).
    pub require_valid_property_type: bool,
    /// The schema must be structural.
    pub require_structural: bool,
    /// The items of a `x-kubernetes-list-type: set` must be atomic.
    pub require_atomic_set_type: bool,
    /// The keys of a map list must be required or defaulted and not nullable, and the items
    /// of map and set lists not nullable.
    pub require_map_list_keys_map_set_validation: bool,
}

impl Default for Options {
    /// What a create checks: everything, without the status subresource.
    fn default() -> Self {
        Self {
            status_subresource: false,
            require_valid_property_type: true,
            require_structural: true,
            require_atomic_set_type: true,
            require_map_list_keys_map_set_validation: true,
        }
    }
}

impl Options {
    /// What an update checks, given every schema of the stored CRD (all versions): upstream
    /// does not tighten a rule the stored CRD already breaks, so that it can still be updated.
    pub fn for_update<'a>(old_schemas: impl IntoIterator<Item = &'a Value>) -> Self {
        let mut options = Self::default();
        for old in old_schemas {
            let mut errors = ErrorList::new();
            let node = parse(old, &Path::default(), &mut errors);
            if !errors.is_empty() {
                continue;
            }
            if node.any(&|n| {
                let ty = n.s("type");
                !ty.is_empty() && !OPENAPI_TYPES.contains(&ty)
            }) {
                options.require_valid_property_type = false;
            }
            if convertible(&node).is_err() || !structural_errors(&node, &Path::default()).is_empty()
            {
                options.require_structural = false;
            }
            if node.any(&|n| has_non_atomic_set_items(n)) {
                options.require_atomic_set_type = false;
            }
            if node.any(&|n| !map_list_keys_map_set(n, &Path::default()).is_empty()) {
                options.require_map_list_keys_map_set_validation = false;
            }
        }
        options
    }
}

/// Checks a CRD version's `openAPIV3Schema` at `path` (e.g.
/// `spec.versions[0].schema.openAPIV3Schema`) as a create does ([`Options::default`]).
///
/// Whether a version must have a schema at all (`schemas are required`) is the CRD's
/// validation; this checks one that is there.
pub fn validate_schema(schema: &Value, path: &Path) -> ErrorList {
    validate_schema_with(schema, path, &Options::default())
}

/// [`validate_schema`] with explicit [`Options`] (status subresource, update ratcheting).
pub fn validate_schema_with(schema: &Value, path: &Path, options: &Options) -> ErrorList {
    let mut parse_errors = ErrorList::new();
    let node = parse(schema, path, &mut parse_errors);
    if !parse_errors.is_empty() {
        return parse_errors;
    }
    let mut errors = ErrorList::new();
    if options.status_subresource {
        status_root(&node, schema, path, &mut errors);
    }
    if node.b("nullable") {
        errors.push(Error::forbidden(
            &path.child("nullable"),
            "nullable cannot be true at the root",
        ));
    }
    let mut conversion_error = None;
    if options.require_structural {
        match convertible(&node) {
            Err(message) => conversion_error = Some(Error::invalid(path, "", message)),
            Ok(()) => errors.extend(structural_errors(&node, path)),
        }
    }
    let ssv = Ssv {
        forbidden_defaults: None,
        inside_resource_meta: false,
        options,
    };
    openapi_errors(&node, path, &ssv, true, &mut errors);
    if errors.is_empty()
        && let Some(error) = conversion_error
    {
        errors.push(error);
    }
    errors
}

/// Whether `schema` is a structural schema (no errors from the structural rules alone). The
/// OpenAPI documents and the type model are only built from structural schemas.
pub fn is_structural(schema: &Value) -> bool {
    let mut errors = ErrorList::new();
    let node = parse(schema, &Path::default(), &mut errors);
    errors.is_empty()
        && convertible(&node).is_ok()
        && structural_errors(&node, &Path::default()).is_empty()
}

/// Whether upstream publishes `schema` in the OpenAPI documents (and builds the type model
/// from it): it is structural and every type is an OpenAPI type.
pub(crate) fn is_publishable(schema: &Value) -> bool {
    let mut errors = ErrorList::new();
    let node = parse(schema, &Path::default(), &mut errors);
    errors.is_empty()
        && !node.any(&|n| {
            let ty = n.ty();
            !ty.is_empty() && !OPENAPI_TYPES.contains(&ty)
        })
        && convertible(&node).is_ok()
        && structural_errors(&node, &Path::default()).is_empty()
}
