//! TEMPORARY (not to be committed as is): the schema seam, until the helpers' engines land.

use std::sync::Arc;

use genplane_apimachinery::validation::field::ErrorList;
use genplane_registry::{CustomResourceStrategy, CustomSchema};
use serde_json::{Value, json};

/// A compiled CRD version.
#[derive(Debug)]
pub struct Compiled {
    /// What writes run.
    pub schema: Arc<dyn CustomSchema>,
    /// The component name.
    pub component: String,
    /// The published kind schema.
    pub published: Value,
    /// The published list schema.
    pub published_list: Value,
}

#[derive(Debug)]
struct Open;
impl CustomSchema for Open {
    fn prune(&self, _: &mut Value) -> Vec<String> {
        Vec::new()
    }
    fn default(&self, _: &mut Value) {}
    fn validate(&self, _: &Value, _: Option<&Value>) -> ErrorList {
        ErrorList::new()
    }
}

/// Compiles one version.
pub fn compile(crd: &Value, version: &Value) -> Compiled {
    let group = crd["spec"]["group"].as_str().unwrap_or("");
    let kind = crd["spec"]["names"]["kind"].as_str().unwrap_or("");
    let v = version["name"].as_str().unwrap_or("");
    let mut reversed: Vec<&str> = group.split('.').collect();
    reversed.reverse();
    let component = format!("{}.{v}.{kind}", reversed.join("."));
    let mut published = version
        .pointer("/schema/openAPIV3Schema")
        .cloned()
        .unwrap_or(json!({"type":"object"}));
    published["x-kubernetes-group-version-kind"] =
        json!([{"group": group, "version": v, "kind": kind}]);
    Compiled {
        schema: Arc::new(Open),
        published_list: json!({"type": "object", "x-kubernetes-group-version-kind": [{"group": group, "version": v, "kind": format!("{kind}List")}], "properties": {"items": {"type": "array", "items": {"$ref": format!("#/components/schemas/{component}")}}}}),
        component,
        published,
    }
}

/// The strategy of the storage version.
pub fn compile_storage(crd: &Value) -> CustomResourceStrategy {
    let spec = &crd["spec"];
    let storage = spec["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|v| v["storage"] == true)
        .and_then(|v| v["name"].as_str())
        .unwrap_or("");
    CustomResourceStrategy::new(
        spec["group"].as_str().unwrap_or(""),
        spec["names"]["plural"].as_str().unwrap_or(""),
        spec["names"]["kind"].as_str().unwrap_or(""),
        storage,
        storage,
        spec["scope"] != "Cluster",
        Arc::new(Open),
    )
}

/// The status.
pub fn status(crd: &Value, _others: &[Value]) -> Value {
    let mut status = crd.get("status").cloned().unwrap_or(json!({}));
    status["acceptedNames"] = crd["spec"]["names"].clone();
    let terminating = crd.pointer("/metadata/deletionTimestamp").is_some();
    let stamp = crd
        .pointer("/metadata/creationTimestamp")
        .cloned()
        .unwrap_or(Value::Null);
    let mut conditions = vec![
        json!({"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found", "lastTransitionTime": stamp}),
        json!({"type": "Established", "status": "True", "reason": "InitialNamesAccepted", "message": "the initial names have been accepted", "lastTransitionTime": stamp}),
    ];
    if terminating {
        conditions.push(json!({"type": "Terminating", "status": "True", "reason": "InstanceDeletionInProgress", "message": "CustomResource deletion is in progress", "lastTransitionTime": stamp}));
    }
    status["conditions"] = json!(conditions);
    if status.get("storedVersions").is_none() {
        let storage = crd["spec"]["versions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|v| v["storage"] == true)
            .and_then(|v| v["name"].as_str())
            .unwrap_or("");
        status["storedVersions"] = json!([storage]);
    }
    status
}
