//! What the schema engines do for the CRD machinery: checking the schemas of a CRD being
//! written, compiling each served version of a stored CRD (what writes and reads of its objects
//! run, what OpenAPI publishes), and the status the CRD controllers write.
//!
//! The engines: `genplane-apiextensions` (structural-schema rules, validation, defaulting,
//! pruning, the published schema) and `genplane-cel` (`x-kubernetes-validations`).

use std::collections::BTreeMap;
use std::sync::Arc;

use genplane_api::apiextensions::{self as crds, status};
use genplane_apiextensions::pruning::{self, Source};
use genplane_apiextensions::schema::Structural;
use genplane_apiextensions::structural::{self, Options};
use genplane_apiextensions::{defaulting, object_validation, openapi};
use genplane_apimachinery::errors::{ApiError, Status};
use genplane_apimachinery::schema::{GroupResource, GroupVersionKind};
use genplane_apimachinery::validation::field::{Error, ErrorList, Path};
use genplane_cel::Rules;
use genplane_registry::{CatalogStrategy, CustomResourceStrategy, CustomSchema, Strategy};
use serde_json::Value;
#[cfg(test)]
use serde_json::json;

/// What a CRD version's group-version OpenAPI document publishes of its kind.
#[derive(Debug)]
pub struct Published {
    /// The OpenAPI component name of the kind.
    pub component: String,
    /// The published schema of the kind.
    pub schema: Value,
    /// The published schema of its list.
    pub list_schema: Value,
}

/// The schema of one CRD version, compiled once: structural schema and CEL rules.
#[derive(Debug)]
pub struct VersionSchema {
    structural: Option<Structural>,
    rules: Option<Rules>,
}

impl VersionSchema {
    /// Compiles `schema` (a version's `openAPIV3Schema`; none keeps every field). A schema the
    /// CRD checks would have refused compiles to what could be read of it.
    pub fn new(schema: Option<&Value>) -> Self {
        let structural = schema.and_then(|s| match Structural::new(s) {
            Ok(structural) => Some(structural),
            Err(error) => {
                tracing::warn!(%error, "a stored CRD schema does not compile");
                None
            }
        });
        let rules = schema
            .map(|s| Rules::compile(s, &Path::new("openAPIV3Schema")).0)
            .filter(|r| !r.is_empty());
        Self { structural, rules }
    }
}

impl CustomSchema for VersionSchema {
    fn prune(&self, object: &mut Value) -> Result<Vec<String>, ApiError> {
        let Some(schema) = &self.structural else {
            return Ok(Vec::new());
        };
        pruning::normalize(schema, object, Source::Request)
            .map_err(|error| Status::bad_request(error.to_string()).into())
    }

    fn read(&self, object: &mut Value) {
        if let Some(schema) = &self.structural {
            let _ = pruning::normalize(schema, object, Source::Storage);
            defaulting::default(schema, object);
        }
    }

    fn default(&self, object: &mut Value) {
        if let Some(schema) = &self.structural {
            defaulting::default(schema, object);
        }
    }

    fn validate(&self, object: &Value, old: Option<&Value>) -> ErrorList {
        let mut errors = match (&self.structural, old) {
            (Some(schema), None) => object_validation::validate(schema, object),
            (Some(schema), Some(old)) => object_validation::validate_update(schema, object, old),
            (None, _) => ErrorList::new(),
        };
        if let Some(rules) = &self.rules {
            if object_validation::blocks_cel(&errors) {
                errors.push(object_validation::cel_skipped());
            } else {
                // cheap rules run inline, others where they hold no runtime worker
                let (found, _) = genplane_admission::evaluation::run(|inline| match inline {
                    Some(inline) => rules.validate_inline(object, old, inline),
                    None => Some(rules.validate_with_warnings(object, old)),
                });
                errors.extend(found);
            }
        }
        errors
    }
}

fn text<'a>(value: &'a Value, pointer: &str) -> &'a str {
    value.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// What the OpenAPI document of `version`'s group-version publishes of `crd`'s kind in it.
pub fn publish(crd: &Value, version: &Value) -> Published {
    let spec = &crd["spec"];
    let group = text(spec, "/group");
    let kind = text(spec, "/names/kind");
    let plural = text(spec, "/names/plural");
    let list_kind = match text(spec, "/names/listKind") {
        "" => format!("{kind}List"),
        list => list.to_owned(),
    };
    let name = text(version, "/name");
    let schema = version.pointer("/schema/openAPIV3Schema");
    let mut published = openapi::kind_schema(schema.unwrap_or(&Value::Null), group, name, kind);
    let selectable: Vec<&str> = version
        .get("selectableFields")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|f| f.get("jsonPath").and_then(Value::as_str))
        .collect();
    openapi::with_selectable_fields(&mut published, &selectable);
    Published {
        component: openapi::component_name(group, name, kind),
        schema: published,
        list_schema: openapi::list_schema(group, name, kind, &list_kind, plural),
    }
}

/// The schema of one `version` of a CRD, compiled (pruning, defaulting, validation).
pub fn version_schema(version: &Value) -> Arc<dyn CustomSchema> {
    Arc::new(VersionSchema::new(
        version.pointer("/schema/openAPIV3Schema"),
    ))
}

/// The strategy of `crd`'s storage version (for deleting its objects).
pub fn compile_storage(crd: &Value) -> CustomResourceStrategy {
    let spec = &crd["spec"];
    let versions = spec["versions"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let storage = versions.iter().find(|v| v["storage"] == true);
    let name = storage.map(|v| text(v, "/name")).unwrap_or_default();
    CustomResourceStrategy::new(
        text(spec, "/group"),
        text(spec, "/names/plural"),
        text(spec, "/names/kind"),
        name,
        name,
        text(spec, "/scope") != "Cluster",
        Arc::new(VersionSchema::new(
            storage.and_then(|v| v.pointer("/schema/openAPIV3Schema")),
        )),
    )
}

/// The status the CRD controllers would write for `crd`, given the other stored CRDs: the
/// naming controller's accepted names and `NamesAccepted`/`Established`, the establishing
/// controller's `Established`, the API approval condition, and `Terminating` while it is
/// deleted. Conditions keep their transition time when they do not change. `used` holds the
/// names the stored CRDs (this one among them) have accepted.
pub fn status(crd: &Value, used: &status::NamesInUse) -> Value {
    let now = crate::now_rfc3339();
    let mut next = crd.clone();
    if let Some((names, names_accepted, established)) = status::naming_update(crd, used) {
        next["status"]["acceptedNames"] = names;
        status::set_condition(&mut next, names_accepted, &now);
        status::set_condition(&mut next, established, &now);
    }
    if status::should_establish(&next) {
        status::set_condition(&mut next, status::established(), &now);
    }
    if let Some(approval) = status::api_approval_condition(&next) {
        status::set_condition(&mut next, approval, &now);
    }
    if next.pointer("/metadata/deletionTimestamp").is_some()
        && !status::is_condition_true(&next, status::TERMINATING)
    {
        status::set_condition(&mut next, status::terminating_in_progress(), &now);
    }
    next["status"].take()
}

/// Every problem of one `openAPIV3Schema` of a CRD being written, at `path`: upstream's
/// OpenAPI and structural-schema rules (lenient where the stored CRD `old` already broke them),
/// its defaults (pruned and valid), and its CEL rules (compiled within the cost limits).
pub fn check_schema(schema: &Value, path: &Path, old: Option<&Value>) -> ErrorList {
    let options = match old {
        Some(old) => Options::for_update(stored_schemas(old)),
        None => Options::default(),
    };
    let mut errors = structural::validate_schema_with(schema, path, &options);
    if errors.is_empty() {
        errors.extend(check_defaults(schema, path));
    }
    let (_, rules) = Rules::compile(schema, path);
    for error in rules.0 {
        // The static checks of each rule are made by both engines.
        if !errors.0.contains(&error) {
            errors.push(error);
        }
    }
    errors
}

/// The schemas of a stored CRD, every version's.
fn stored_schemas(crd: &Value) -> Vec<&Value> {
    crd.pointer("/spec/versions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| v.pointer("/schema/openAPIV3Schema"))
        .collect()
}

/// Upstream's checks of each `default` outside resource metadata: it must survive pruning by
/// its own schema unchanged, and be valid against it.
fn check_defaults(schema: &Value, path: &Path) -> ErrorList {
    let mut errors = ErrorList::new();
    for site in structural::defaults(schema, path) {
        if site.in_resource_meta {
            continue;
        }
        let Ok(compiled) = Structural::new(&site.schema) else {
            continue;
        };
        let mut pruned = site.value.clone();
        pruning::prune(&compiled, &mut pruned);
        if pruned != site.value {
            errors.push(Error::invalid(
                &site.path,
                site.value.clone(),
                "must not have unknown fields",
            ));
            continue;
        }
        for error in object_validation::schema_errors(&compiled, &site.value, None).0 {
            errors.push(Error {
                field: site.path.clone(),
                ..error
            });
        }
    }
    errors
}

/// The strategy of CustomResourceDefinitions: the catalog's, with each schema checked by the
/// schema engines (the catalog alone cannot: it knows no schema engine).
#[derive(Clone, Debug)]
pub struct CrdStrategy {
    base: CatalogStrategy,
}

impl CrdStrategy {
    /// The strategy of the catalog's CustomResourceDefinitions.
    pub fn new() -> Self {
        Self {
            base: CatalogStrategy::new(&genplane_api::apiextensions::INFO),
        }
    }

    /// The strategy under the server's feature `gates`.
    pub fn with_gates(gates: Arc<dyn genplane_api::catalog::FeatureGates>) -> Self {
        Self {
            base: CatalogStrategy::with_gates(&genplane_api::apiextensions::INFO, gates),
        }
    }
}

impl Default for CrdStrategy {
    fn default() -> Self {
        Self::new()
    }
}

impl Strategy for CrdStrategy {
    fn group_resource(&self) -> GroupResource {
        self.base.group_resource()
    }

    fn kind(&self) -> GroupVersionKind {
        self.base.kind()
    }

    fn namespaced(&self) -> bool {
        self.base.namespaced()
    }

    fn key_prefix(&self) -> String {
        self.base.key_prefix()
    }

    fn decode(&self, object: Value) -> Result<Value, ApiError> {
        self.base.decode(object)
    }

    fn stored_form(&self, object: Value) -> Result<Value, ApiError> {
        self.base.stored_form(object)
    }

    fn served_form(&self, object: Value) -> Result<Value, ApiError> {
        self.base.served_form(object)
    }

    fn conversion(&self) -> Option<&genplane_registry::Conversion> {
        self.base.conversion()
    }

    fn serves_stored_form(&self) -> bool {
        self.base.serves_stored_form()
    }

    fn default(&self, object: &mut Value) {
        self.base.default(object);
    }

    fn prepare_for_create(&self, object: &mut Value) {
        self.base.prepare_for_create(object);
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        self.base.prepare_for_update(new, old);
    }

    fn validate(&self, object: &Value) -> Result<ErrorList, ApiError> {
        crds::validation::validate_crd(object, None, &|schema, path| {
            check_schema(schema, path, None)
        })
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Result<ErrorList, ApiError> {
        crds::validation::validate_crd(new, Some(old), &|schema, path| {
            check_schema(schema, path, Some(old))
        })
    }

    fn warnings(&self, object: &Value, old: Option<&Value>) -> Vec<String> {
        self.base.warnings(object, old)
    }

    fn canonicalize(&self, object: &mut Value) {
        self.base.canonicalize(object);
    }

    fn selectable_fields(&self) -> Vec<&str> {
        self.base.selectable_fields()
    }

    fn field_values(&self, object: &Value) -> BTreeMap<String, String> {
        self.base.field_values(object)
    }

    fn pending_finalization(&self, object: &Value) -> bool {
        self.base.pending_finalization(object)
    }

    fn mark_deleting(&self, object: &mut Value) {
        self.base.mark_deleting(object);
    }
}

/// A CRD the tests use: a minimal CustomResourceDefinition with `schema`, defaulted and
/// prepared as the store does before validating.
#[cfg(test)]
pub(crate) fn example(schema: Value) -> Value {
    let strategy = CrdStrategy::new();
    let mut crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": schema}}],
        },
    });
    strategy.default(&mut crd);
    strategy.prepare_for_create(&mut crd);
    crd
}

/// The fuzz entry point of request bodies, with CustomResourceDefinitions checked by
/// [`CrdStrategy`] (their schemas included) as the API server checks them: see
/// `genplane_apiserver::request_body::exercise` for the input's layout.
///
/// # Panics
///
/// When the input makes the decoding answer a server error.
pub fn exercise_bodies(data: &[u8]) {
    genplane_apiserver::request_body::exercise_with(data, &|info| {
        if info.is(&genplane_api::apiextensions::INFO) {
            Box::new(CrdStrategy::new())
        } else {
            Box::new(CatalogStrategy::new(info))
        }
    });
}

/// The fuzz entry point of structural schemas: the first byte picks one of a few objects, the
/// rest is an `openAPIV3Schema` in JSON. A schema is checked as a CRD write checks it; one
/// that passes is compiled as a served version is and prunes, defaults and validates the
/// object, as created and as an update of itself.
///
/// # Panics
///
/// When checking, compiling or applying the schema panics.
pub fn exercise_schema(data: &[u8]) {
    let Some((&which, text)) = data.split_first() else {
        return;
    };
    let Ok(schema) = serde_json::from_slice::<Value>(text) else {
        return;
    };
    let path = Path::new("spec")
        .child("validation")
        .child("openAPIV3Schema");
    if !check_schema(&schema, &path, None).is_empty() {
        return;
    }
    let compiled = version_schema(&serde_json::json!({
        "name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": schema},
    }));
    let objects = [
        serde_json::json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "a"}}),
        serde_json::json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "a", "namespace": "default", "labels": {"app": "web"}},
            "spec": {"replicas": 3, "image": "web:1", "tags": ["a", "b"], "ports": [{"name": "http", "port": 80}], "when": "2026-01-01T00:00:00Z"},
            "status": {"ready": true}}),
        serde_json::json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "a"},
            "spec": {"replicas": "3", "image": null, "tags": [1, 1], "ports": {}, "extra": {"deep": [[[]]]}}, "status": 7}),
    ];
    let mut object = objects[usize::from(which) % objects.len()].clone();
    if compiled.prune(&mut object).is_err() {
        return;
    }
    compiled.default(&mut object);
    compiled.validate(&object, None);
    compiled.validate(&object, Some(&object));
    compiled.read(&mut object);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemas_are_checked_by_both_engines() {
        let crd = example(json!({
            "type": "object",
            "properties": {
                "spec": {"properties": {"size": {"type": "integer"}}},
                "count": {"type": "integer", "default": "many"},
            },
            "x-kubernetes-validations": [{"rule": "self.count >"}],
        }));
        let errors = CrdStrategy::new().validate(&crd).unwrap().to_string();
        assert!(
            errors
                .contains("spec.validation.openAPIV3Schema.properties[spec].type: Required value"),
            "{errors}"
        );
        assert!(
            errors.contains("x-kubernetes-validations[0].rule"),
            "{errors}"
        );
        let fine = example(json!({
            "type": "object",
            "properties": {"spec": {"type": "object", "properties": {"size": {"type": "integer", "default": 3}}}},
            "x-kubernetes-validations": [{"rule": "!has(self.spec) || self.spec.size < 10"}],
        }));
        let errors = CrdStrategy::new().validate(&fine).unwrap();
        assert!(errors.is_empty(), "{errors}");
    }

    #[test]
    fn hostile_rules_are_refused_with_their_limits_on_a_worker_stack() {
        // issue #21: these aborted the process with a stack overflow
        let errors = std::thread::Builder::new()
            .stack_size(2 * 1024 * 1024)
            .spawn(|| {
                let flat = vec!["1"; 5_000].join(" + ") + " > 0";
                let nested = format!("{}1{} == 1", "[".repeat(10_000), "]".repeat(10_000));
                let crd = example(json!({
                    "type": "object",
                    "x-kubernetes-validations": [
                        {"rule": flat},
                        {"rule": "true", "messageExpression": nested},
                        {"rule": "(".repeat(100_000)},
                    ],
                }));
                CrdStrategy::new()
                    .validate(&crd)
                    .expect("invariant: validation answers")
                    .to_string()
            })
            .expect("invariant: the thread starts")
            .join()
            .expect("the CRD was validated");
        for (field, limit) in [
            (
                "openAPIV3Schema.x-kubernetes-validations[0].rule: Invalid value",
                "expression recursion limit exceeded: 250",
            ),
            (
                "openAPIV3Schema.x-kubernetes-validations[1].messageExpression: Invalid value",
                "expression nesting limit exceeded: 64",
            ),
            (
                "openAPIV3Schema.x-kubernetes-validations[2].rule: Invalid value",
                "expression nesting limit exceeded: 64",
            ),
        ] {
            assert!(errors.contains(field), "{field}: {errors:.2000}");
            assert!(errors.contains(limit), "{limit}");
        }
    }

    #[test]
    fn the_deepest_schemas_and_objects_are_handled_on_a_worker_stack() {
        // serde_json refuses nesting beyond 128 levels: a schema can nest 63 properties (two
        // levels each) under a CRD's own 3 and an object 127 levels under preserved fields
        let outcome = std::thread::Builder::new()
            .stack_size(2 * 1024 * 1024)
            .spawn(|| {
                let mut schema = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                    "x-kubernetes-validations": [{"rule": "self == oldSelf || true"}]});
                for _ in 0..56 {
                    schema = json!({"type": "object", "properties": {"a": schema},
                        "x-kubernetes-validations": [{"rule": "has(self.a) || !has(self.a)"}]});
                }
                let crd = example(schema.clone());
                let crd_errors = CrdStrategy::new()
                    .validate(&crd)
                    .expect("invariant: validation answers");
                let version = VersionSchema::new(Some(&schema));
                let mut object = json!({"x": 1});
                for _ in 0..120 {
                    object = json!({"a": object});
                }
                let mut object = json!({"apiVersion": "example.com/v1", "kind": "Widget",
                    "metadata": {"name": "a"}, "a": object});
                let pruned = version.prune(&mut object).map(|p| p.len());
                version.default(&mut object);
                let errors = version.validate(&object, Some(&object));
                (crd_errors.to_string(), pruned.is_ok(), errors.to_string())
            })
            .expect("invariant: the thread starts")
            .join()
            .expect("the deep schema and object were handled");
        assert_eq!(outcome.0, "", "{}", outcome.0);
        assert!(outcome.1);
    }

    #[test]
    fn defaults_must_be_valid_for_their_schema() {
        let crd = example(json!({
            "type": "object",
            "properties": {"spec": {"type": "object", "properties": {
                "size": {"type": "integer", "maximum": 5, "default": 9},
            }}},
        }));
        let errors = CrdStrategy::new().validate(&crd).unwrap().to_string();
        assert!(
            errors.contains(
                "spec.validation.openAPIV3Schema.properties[spec].properties[size].default"
            ),
            "{errors}"
        );
    }

    #[test]
    fn custom_resources_are_pruned_defaulted_and_validated() {
        let schema = VersionSchema::new(Some(&json!({
            "type": "object",
            "properties": {"spec": {"type": "object", "properties": {
                "size": {"type": "integer", "maximum": 5, "default": 1},
            }, "x-kubernetes-validations": [{"rule": "self.size != 4", "message": "not four"}]}},
        })));
        let mut object = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "a"}, "spec": {"colour": "red"}});
        assert_eq!(
            schema.prune(&mut object).unwrap(),
            vec!["spec.colour".to_owned()]
        );
        schema.default(&mut object);
        assert_eq!(object["spec"], json!({"size": 1}));
        assert!(schema.validate(&object, None).is_empty());
        object["spec"]["size"] = json!(4);
        assert!(
            schema
                .validate(&object, None)
                .to_string()
                .contains("not four")
        );
        object["spec"]["size"] = json!(7);
        let errors = schema.validate(&object, None).to_string();
        assert!(errors.contains("spec.size: Invalid value: 7"), "{errors}");
    }
}
