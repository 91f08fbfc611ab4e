//! Reconciliation of stored bootstrap objects with the wanted ones, as upstream's
//! `reconciliation` package does at apiserver start (in its additive mode: it never removes
//! what an administrator added).
//!
//! For a role: the expected labels and annotations are added where missing (stored values
//! win), rules the stored object does not cover are added (broken down, as upstream appends
//! them), and the expected `aggregationRule` selectors are added (an aggregation rule is
//! removed only when the bootstrap role has none). For a binding: missing subjects are added; a
//! different `roleRef` (which cannot be updated) means delete-and-recreate. An object whose
//! annotation `rbac.authorization.kubernetes.io/autoupdate` is `"false"` is left alone.

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::bootstrap::AUTOUPDATE_ANNOTATION;
use crate::escalation::covers;
use crate::policy::{Kind, PolicyRule, RoleRef, Subject, nullable};

/// Errors reconciling.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// An object could not be read as its kind.
    #[error("cannot reconcile {kind}: {source}")]
    Decode {
        /// The kind.
        kind: Kind,
        /// What was wrong.
        #[source]
        source: serde_json::Error,
    },
}

/// What to write.
#[derive(Clone, Debug, PartialEq)]
pub enum Reconciled {
    /// Nothing stored: create this object.
    Create(Value),
    /// Update the stored object to this.
    Update(Value),
    /// The binding's roleRef differs: delete the stored binding, then create this one.
    Recreate(Value),
    /// The stored object is as it should be.
    Unchanged,
    /// The stored object opts out of reconciliation (autoupdate is "false").
    Protected,
}

impl Reconciled {
    /// The object to write, if any.
    pub fn object(&self) -> Option<&Value> {
        match self {
            Reconciled::Create(v) | Reconciled::Update(v) | Reconciled::Recreate(v) => Some(v),
            Reconciled::Unchanged | Reconciled::Protected => None,
        }
    }
}

fn protected(existing: &Value) -> bool {
    existing
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(AUTOUPDATE_ANNOTATION))
        .and_then(Value::as_str)
        == Some("false")
}

/// Adds `expected`'s entries missing from `existing`'s `metadata.<field>` map; whether any was.
fn merge_map(result: &mut Value, expected: &Value, field: &str) -> bool {
    let Some(wanted) = expected
        .pointer(&format!("/metadata/{field}"))
        .and_then(Value::as_object)
    else {
        return false;
    };
    if wanted.is_empty() {
        return false;
    }
    let Some(meta) = result.get_mut("metadata").and_then(Value::as_object_mut) else {
        return false;
    };
    let entry = meta
        .entry(field)
        .or_insert_with(|| Value::Object(Map::new()));
    if entry.is_null() {
        *entry = Value::Object(Map::new());
    }
    let Some(map) = entry.as_object_mut() else {
        return false;
    };
    let mut changed = false;
    for (k, v) in wanted {
        if !map.contains_key(k) {
            map.insert(k.clone(), v.clone());
            changed = true;
        }
    }
    changed
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct RoleView {
    #[serde(deserialize_with = "nullable")]
    rules: Vec<PolicyRule>,
    aggregation_rule: Option<AggregationView>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct AggregationView {
    #[serde(deserialize_with = "nullable")]
    cluster_role_selectors: Vec<Value>,
}

/// Reconciles a stored Role or ClusterRole (`kind` says which; `None` when not stored) with the
/// bootstrap one.
pub fn reconcile_role(
    kind: Kind,
    existing: Option<&Value>,
    expected: &Value,
) -> Result<Reconciled, ReconcileError> {
    let Some(existing) = existing else {
        return Ok(Reconciled::Create(expected.clone()));
    };
    if protected(existing) {
        return Ok(Reconciled::Protected);
    }
    let decode = |v: &Value| {
        RoleView::deserialize(v).map_err(|source| ReconcileError::Decode { kind, source })
    };
    let have = decode(existing)?;
    let want = decode(expected)?;
    let mut result = existing.clone();
    let mut changed = merge_map(&mut result, expected, "annotations");
    changed |= merge_map(&mut result, expected, "labels");

    let (_, missing) = covers(&have.rules, &want.rules);
    if !missing.is_empty() {
        let mut rules = have.rules.clone();
        rules.extend(missing);
        result["rules"] = serde_json::to_value(&rules)
            .map_err(|source| ReconcileError::Decode { kind, source })?;
        changed = true;
    }

    match (&have.aggregation_rule, &want.aggregation_rule) {
        (Some(_), None) => {
            if let Some(o) = result.as_object_mut() {
                o.remove("aggregationRule");
            }
            changed = true;
        }
        (have_rule, Some(want_rule)) => {
            let mut selectors = have_rule
                .as_ref()
                .map(|h| h.cluster_role_selectors.clone())
                .unwrap_or_default();
            let mut remaining = selectors.clone();
            let mut missing_selectors = Vec::new();
            for wanted in &want_rule.cluster_role_selectors {
                match remaining.iter().position(|s| s == wanted) {
                    Some(at) => {
                        remaining.remove(at);
                    }
                    None => missing_selectors.push(wanted.clone()),
                }
            }
            if !missing_selectors.is_empty() {
                selectors.extend(missing_selectors);
                result["aggregationRule"] = serde_json::json!({"clusterRoleSelectors": selectors});
                changed = true;
            }
        }
        (None, None) => {}
    }
    Ok(if changed {
        Reconciled::Update(result)
    } else {
        Reconciled::Unchanged
    })
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct BindingView {
    role_ref: RoleRef,
    #[serde(deserialize_with = "nullable")]
    subjects: Vec<Subject>,
}

/// Reconciles a stored RoleBinding or ClusterRoleBinding (`kind` says which; `None` when not
/// stored) with the bootstrap one.
pub fn reconcile_binding(
    kind: Kind,
    existing: Option<&Value>,
    expected: &Value,
) -> Result<Reconciled, ReconcileError> {
    let Some(existing) = existing else {
        return Ok(Reconciled::Create(expected.clone()));
    };
    if protected(existing) {
        return Ok(Reconciled::Protected);
    }
    let decode = |v: &Value| {
        BindingView::deserialize(v).map_err(|source| ReconcileError::Decode { kind, source })
    };
    let have = decode(existing)?;
    let want = decode(expected)?;
    if have.role_ref != want.role_ref {
        return Ok(Reconciled::Recreate(expected.clone()));
    }
    let mut result = existing.clone();
    let mut changed = merge_map(&mut result, expected, "annotations");
    changed |= merge_map(&mut result, expected, "labels");
    let mut missing: Vec<Subject> = Vec::new();
    for s in &want.subjects {
        if !have.subjects.contains(s) && !missing.contains(s) {
            missing.push(s.clone());
        }
    }
    if !missing.is_empty() {
        let mut subjects = have.subjects.clone();
        subjects.extend(missing);
        result["subjects"] = serde_json::to_value(&subjects)
            .map_err(|source| ReconcileError::Decode { kind, source })?;
        changed = true;
    }
    Ok(if changed {
        Reconciled::Update(result)
    } else {
        Reconciled::Unchanged
    })
}

/// Reconciles any bootstrap object of `kind`.
pub fn reconcile(
    kind: Kind,
    existing: Option<&Value>,
    expected: &Value,
) -> Result<Reconciled, ReconcileError> {
    match kind {
        Kind::Role | Kind::ClusterRole => reconcile_role(kind, existing, expected),
        Kind::RoleBinding | Kind::ClusterRoleBinding => reconcile_binding(kind, existing, expected),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::bootstrap;

    fn find(kind: Kind, name: &str) -> Value {
        bootstrap::objects()
            .into_iter()
            .find(|(k, o)| *k == kind && o["metadata"]["name"] == name)
            .map(|(_, o)| o)
            .unwrap()
    }

    #[test]
    fn missing_objects_are_created_and_equal_ones_left_alone() {
        let view = find(Kind::ClusterRole, "system:aggregate-to-view");
        assert_eq!(
            reconcile(Kind::ClusterRole, None, &view).unwrap(),
            Reconciled::Create(view.clone())
        );
        assert_eq!(
            reconcile(Kind::ClusterRole, Some(&view), &view).unwrap(),
            Reconciled::Unchanged
        );
        let binding = find(Kind::ClusterRoleBinding, "cluster-admin");
        assert_eq!(
            reconcile(Kind::ClusterRoleBinding, Some(&binding), &binding).unwrap(),
            Reconciled::Unchanged
        );
        for (kind, object) in bootstrap::objects() {
            assert_eq!(
                reconcile(kind, Some(&object), &object).unwrap(),
                Reconciled::Unchanged
            );
        }
    }

    #[test]
    fn missing_rules_are_added_and_extra_rules_kept() {
        let expected = find(Kind::ClusterRole, "system:basic-user");
        let mut stored = expected.clone();
        stored["metadata"]["resourceVersion"] = json!("7");
        stored["metadata"]["labels"] = json!({"team": "x"});
        stored["rules"] = json!([
            {"verbs": ["create"], "apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews"]},
            {"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"]}]);
        let Reconciled::Update(result) =
            reconcile(Kind::ClusterRole, Some(&stored), &expected).unwrap()
        else {
            panic!("expected an update")
        };
        assert_eq!(result["metadata"]["resourceVersion"], "7");
        assert_eq!(
            result["metadata"]["labels"],
            json!({"team": "x", "kubernetes.io/bootstrapping": "rbac-defaults"})
        );
        assert_eq!(
            result["rules"],
            json!([
                {"verbs": ["create"], "apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews"]},
                {"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"]},
                {"verbs": ["create"], "apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectrulesreviews"]},
                {"verbs": ["create"], "apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"]}])
        );
        // Reconciling the result again changes nothing.
        assert_eq!(
            reconcile(Kind::ClusterRole, Some(&result), &expected).unwrap(),
            Reconciled::Unchanged
        );
    }

    #[test]
    fn aggregation_rules_are_kept_and_completed() {
        let expected = find(Kind::ClusterRole, "admin");
        // Rules filled by the aggregation controller, an extra selector added by an admin.
        let mut stored = expected.clone();
        stored["rules"] =
            json!([{"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"]}]);
        stored["aggregationRule"] =
            json!({"clusterRoleSelectors": [{"matchLabels": {"mine": "true"}}]});
        let Reconciled::Update(result) =
            reconcile(Kind::ClusterRole, Some(&stored), &expected).unwrap()
        else {
            panic!("expected an update")
        };
        assert_eq!(result["rules"], stored["rules"]);
        assert_eq!(
            result["aggregationRule"],
            json!({"clusterRoleSelectors": [{"matchLabels": {"mine": "true"}},
                {"matchLabels": {"rbac.authorization.k8s.io/aggregate-to-admin": "true"}}]})
        );
        let mut filled = expected.clone();
        filled["rules"] = stored["rules"].clone();
        assert_eq!(
            reconcile(Kind::ClusterRole, Some(&filled), &expected).unwrap(),
            Reconciled::Unchanged
        );
        // An aggregation rule on a role that should have none is removed.
        let basic = find(Kind::ClusterRole, "system:basic-user");
        let mut aggregated = basic.clone();
        aggregated["aggregationRule"] = json!({"clusterRoleSelectors": []});
        let Reconciled::Update(result) =
            reconcile(Kind::ClusterRole, Some(&aggregated), &basic).unwrap()
        else {
            panic!("expected an update")
        };
        assert!(result.get("aggregationRule").is_none());
    }

    #[test]
    fn protected_objects_are_left_alone() {
        let expected = find(Kind::ClusterRole, "system:discovery");
        let mut stored = expected.clone();
        stored["metadata"]["annotations"][AUTOUPDATE_ANNOTATION] = json!("false");
        stored["rules"] = json!([]);
        assert_eq!(
            reconcile(Kind::ClusterRole, Some(&stored), &expected).unwrap(),
            Reconciled::Protected
        );
        assert_eq!(Reconciled::Protected.object(), None);
        let binding = find(Kind::ClusterRoleBinding, "system:discovery");
        let mut stored = binding.clone();
        stored["metadata"]["annotations"][AUTOUPDATE_ANNOTATION] = json!("false");
        stored["subjects"] = json!([]);
        assert_eq!(
            reconcile(Kind::ClusterRoleBinding, Some(&stored), &binding).unwrap(),
            Reconciled::Protected
        );
    }

    #[test]
    fn bindings_gain_missing_subjects_or_are_recreated() {
        let expected = find(Kind::ClusterRoleBinding, "system:public-info-viewer");
        let mut stored = expected.clone();
        stored["subjects"] = json!([
            {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "system:unauthenticated"},
            {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "extra"}]);
        let Reconciled::Update(result) =
            reconcile(Kind::ClusterRoleBinding, Some(&stored), &expected).unwrap()
        else {
            panic!("expected an update")
        };
        assert_eq!(
            result["subjects"],
            json!([
                {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "system:unauthenticated"},
                {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "extra"},
                {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "system:authenticated"}])
        );
        let mut moved = expected.clone();
        moved["roleRef"]["name"] = json!("cluster-admin");
        assert_eq!(
            reconcile(Kind::ClusterRoleBinding, Some(&moved), &expected).unwrap(),
            Reconciled::Recreate(expected.clone())
        );
        assert!(matches!(
            reconcile(Kind::RoleBinding, Some(&json!({"subjects": 1})), &expected),
            Err(ReconcileError::Decode { .. })
        ));
    }
}
