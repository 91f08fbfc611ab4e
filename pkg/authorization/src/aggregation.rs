//! ClusterRole aggregation, as upstream's clusterrole-aggregation controller computes it: an
//! aggregated ClusterRole (one with an `aggregationRule`) holds the rules of every other
//! ClusterRole whose labels match one of its `clusterRoleSelectors`, taken in name order, each
//! rule once.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use crate::policy::{PolicyRule, nullable};

/// A label selector (`metav1.LabelSelector`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct LabelSelector {
    /// Labels that must be present with these values.
    #[serde(deserialize_with = "nullable")]
    pub match_labels: BTreeMap<String, String>,
    /// Further requirements.
    #[serde(deserialize_with = "nullable")]
    pub match_expressions: Vec<Requirement>,
}

/// One `matchExpressions` entry.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct Requirement {
    /// The label key.
    #[serde(deserialize_with = "nullable")]
    pub key: String,
    /// `In`, `NotIn`, `Exists` or `DoesNotExist`.
    #[serde(deserialize_with = "nullable")]
    pub operator: String,
    /// The values for `In` and `NotIn`.
    #[serde(deserialize_with = "nullable")]
    pub values: Vec<String>,
}

impl LabelSelector {
    /// Whether `labels` satisfy the selector (an empty selector matches everything; an unknown
    /// operator matches nothing).
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.match_labels
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
            && self.match_expressions.iter().all(|r| {
                let value = labels.get(&r.key);
                match r.operator.as_str() {
                    "In" => value.is_some_and(|v| r.values.contains(v)),
                    "NotIn" => value.is_none_or(|v| !r.values.contains(v)),
                    "Exists" => value.is_some(),
                    "DoesNotExist" => value.is_none(),
                    _ => false,
                }
            })
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Meta {
    #[serde(deserialize_with = "nullable")]
    name: String,
    #[serde(deserialize_with = "nullable")]
    labels: BTreeMap<String, String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct AggregationRule {
    #[serde(deserialize_with = "nullable")]
    cluster_role_selectors: Vec<LabelSelector>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct ClusterRole {
    metadata: Meta,
    aggregation_rule: Option<AggregationRule>,
    #[serde(deserialize_with = "nullable")]
    rules: Vec<PolicyRule>,
}

fn read(role: &Value) -> ClusterRole {
    ClusterRole::deserialize(role).unwrap_or_default()
}

/// The rules the aggregated ClusterRole `role` should hold given all `cluster_roles` (it may
/// be among them; it never aggregates itself). `None` when `role` has no `aggregationRule`.
pub fn aggregated_rules(role: &Value, cluster_roles: &[Value]) -> Option<Vec<PolicyRule>> {
    let this = read(role);
    let selectors = this.aggregation_rule?.cluster_role_selectors;
    let mut sources: Vec<ClusterRole> = cluster_roles
        .iter()
        .map(read)
        .filter(|r| r.metadata.name != this.metadata.name)
        .filter(|r| selectors.iter().any(|s| s.matches(&r.metadata.labels)))
        .collect();
    sources.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let mut rules: Vec<PolicyRule> = Vec::new();
    for rule in sources.into_iter().flat_map(|r| r.rules) {
        if !rules.contains(&rule) {
            rules.push(rule);
        }
    }
    Some(rules)
}

/// Fills the `rules` of every aggregated ClusterRole among `cluster_roles`, repeating until
/// nothing changes (aggregated roles may aggregate others, as `view` into `edit` into
/// `admin`). Returns the names of the roles changed.
pub fn aggregate_cluster_roles(cluster_roles: &mut [Value]) -> Vec<String> {
    let mut changed: Vec<String> = Vec::new();
    for _ in 0..=cluster_roles.len() {
        let mut any = false;
        for i in 0..cluster_roles.len() {
            let Some(rules) = aggregated_rules(&cluster_roles[i], cluster_roles) else {
                continue;
            };
            let current = read(&cluster_roles[i]);
            if current.rules != rules {
                let value = serde_json::to_value(&rules).unwrap_or(Value::Null);
                cluster_roles[i]["rules"] = value;
                if !changed.contains(&current.metadata.name) {
                    changed.push(current.metadata.name);
                }
                any = true;
            }
        }
        if !any {
            break;
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect()
    }

    #[test]
    fn selectors_match_labels_and_expressions() {
        let s: LabelSelector = serde_json::from_value(json!({
            "matchLabels": {"a": "1"},
            "matchExpressions": [{"key": "b", "operator": "In", "values": ["x", "y"]},
                                 {"key": "c", "operator": "DoesNotExist"}]}))
        .unwrap();
        assert!(s.matches(&labels(&[("a", "1"), ("b", "y")])));
        assert!(!s.matches(&labels(&[("a", "1"), ("b", "z")])));
        assert!(!s.matches(&labels(&[("a", "1"), ("b", "x"), ("c", "")])));
        assert!(!s.matches(&labels(&[("b", "x")])));
        assert!(LabelSelector::default().matches(&labels(&[])));
        let not_in: LabelSelector = serde_json::from_value(json!({
            "matchExpressions": [{"key": "b", "operator": "NotIn", "values": ["x"]},
                                 {"key": "a", "operator": "Exists"}]}))
        .unwrap();
        assert!(not_in.matches(&labels(&[("a", "")])));
        assert!(!not_in.matches(&labels(&[("a", ""), ("b", "x")])));
    }

    #[test]
    fn aggregation_chains_and_dedups() {
        let mut roles = vec![
            json!({"metadata": {"name": "top"}, "aggregationRule": {"clusterRoleSelectors": [
                {"matchLabels": {"to-top": "true"}}]}}),
            json!({"metadata": {"name": "mid", "labels": {"to-top": "true"}},
                   "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"to-mid": "true"}}]}}),
            json!({"metadata": {"name": "b", "labels": {"to-mid": "true"}},
                   "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["b"]}]}),
            json!({"metadata": {"name": "a", "labels": {"to-mid": "true", "to-top": "true"}},
                   "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["a"]}]}),
            json!({"metadata": {"name": "c"},
                   "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["c"]}]}),
        ];
        let changed = aggregate_cluster_roles(&mut roles);
        assert_eq!(changed, ["top", "mid"]);
        assert_eq!(
            roles[1]["rules"],
            json!([{"verbs": ["get"], "apiGroups": [""], "resources": ["a"]},
                   {"verbs": ["get"], "apiGroups": [""], "resources": ["b"]}])
        );
        // top: a (direct) and mid's rules (a again, b), in name order, each once.
        assert_eq!(roles[0]["rules"], roles[1]["rules"]);
        assert!(aggregate_cluster_roles(&mut roles).is_empty());
        assert!(aggregated_rules(&roles[4], &roles).is_none());
    }
}
