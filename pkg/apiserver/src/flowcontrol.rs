//! API Priority and Fairness classification: which FlowSchema, priority level and flow a
//! request belongs to, as upstream's APF filter decides it.
//!
//! [`Snapshot::new`] compiles the stored FlowSchemas and PriorityLevelConfigurations once per
//! change; [`Snapshot::classify`] is then a pure function of the request's [`RequestInfo`] and
//! user that allocates nothing: it tries the FlowSchemas whose priority level exists by
//! `matchingPrecedence`, then name, and answers the first that matches. A FlowSchema matches
//! when one of its rules does: one of the rule's subjects is the user (`User` by name or `*`,
//! `Group` by one of the user's groups or `*`, `ServiceAccount` by
//! `system:serviceaccount:<namespace>:<name>`, any name for `*`), and, for a resource request,
//! one of its resource rules matches the verb, API group, resource (`resource/subresource`
//! for a subresource) and namespace (`clusterScope` for a request without one, the namespace
//! or `*` otherwise), for any other request one of its non-resource rules matches the verb
//! and path (`*`, the path itself, or a prefix given as `/prefix/*`). The flow distinguisher
//! is the user name (`ByUser`), the namespace (`ByNamespace`) or empty.
//!
//! What follows classification lives in the submodules: [`width`] estimates a request's
//! seats, [`dispatch`] shares the server's concurrency among the levels and admits, queues or
//! rejects each request by its level's [`queueset`], and `allocation` lends and borrows
//! seats between levels from their demand.

pub(crate) mod allocation;
mod debug;
pub mod dispatch;
pub mod queueset;
pub mod width;

pub use dispatch::FlowControl;

use std::sync::Arc;

use genplane_api::flowcontrol::{
    ALL, BY_NAMESPACE, BY_USER, FlowSchemaSpec, NonResourcePolicyRule, PolicyRulesWithSubjects,
    PriorityLevelSpec, ResourcePolicyRule, Subject,
};
use genplane_authentication::UserInfo;
use serde_json::Value;

use crate::request_info::RequestInfo;

/// The prefix of service accounts' user names.
const SERVICE_ACCOUNT_PREFIX: &str = "system:serviceaccount:";

/// A priority level as classification answers it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Level {
    /// The PriorityLevelConfiguration's name.
    pub name: Arc<str>,
    /// Its `metadata.uid` (the `X-Kubernetes-PF-PriorityLevel-UID` answer header).
    pub uid: Arc<str>,
    /// Its spec.
    pub spec: PriorityLevelSpec,
}

/// How a FlowSchema splits its requests into flows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Distinguisher {
    /// One flow.
    None,
    /// A flow per user name.
    ByUser,
    /// A flow per namespace.
    ByNamespace,
}

/// A compiled FlowSchema.
#[derive(Clone, Debug)]
struct Schema {
    name: Arc<str>,
    uid: Arc<str>,
    precedence: i32,
    distinguisher: Distinguisher,
    rules: Vec<PolicyRulesWithSubjects>,
    level: usize,
}

/// The FlowSchemas (those whose level exists, in matching order) and the levels.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    schemas: Vec<Schema>,
    levels: Vec<Level>,
}

/// Where a request belongs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Classification<'a> {
    /// The FlowSchema's name.
    pub flow_schema: &'a Arc<str>,
    /// The FlowSchema's `metadata.uid` (the `X-Kubernetes-PF-FlowSchema-UID` answer header).
    pub flow_schema_uid: &'a Arc<str>,
    /// The priority level.
    pub level: &'a Level,
    /// The level's index in [`Snapshot::levels`].
    pub level_index: usize,
    /// The FlowSchema's index in [`Snapshot::flow_schemas`].
    pub schema_index: usize,
    /// The flow within the FlowSchema: the user name, the namespace, or empty.
    pub distinguisher: &'a str,
}

fn text(object: &Value, pointer: &str) -> Arc<str> {
    Arc::from(
        object
            .pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or(""),
    )
}

impl Snapshot {
    /// Compiles stored FlowSchemas and PriorityLevelConfigurations (their JSON); objects
    /// whose spec cannot be read, and FlowSchemas whose level is missing (`Dangling`), are
    /// left out.
    pub fn new(flow_schemas: &[Value], levels: &[Value]) -> Self {
        let levels: Vec<Level> = levels
            .iter()
            .filter_map(|object| {
                let spec = serde_json::from_value(object.get("spec")?.clone()).ok()?;
                Some(Level {
                    name: text(object, "/metadata/name"),
                    uid: text(object, "/metadata/uid"),
                    spec,
                })
            })
            .collect();
        let mut schemas: Vec<Schema> = flow_schemas
            .iter()
            .filter_map(|object| {
                let spec: FlowSchemaSpec =
                    serde_json::from_value(object.get("spec")?.clone()).ok()?;
                let level = levels
                    .iter()
                    .position(|l| *l.name == *spec.priority_level_configuration.name)?;
                let distinguisher =
                    match spec.distinguisher_method.as_ref().map(|m| m.type_.as_str()) {
                        Some(BY_USER) => Distinguisher::ByUser,
                        Some(BY_NAMESPACE) => Distinguisher::ByNamespace,
                        _ => Distinguisher::None,
                    };
                Some(Schema {
                    name: text(object, "/metadata/name"),
                    uid: text(object, "/metadata/uid"),
                    precedence: spec.matching_precedence,
                    distinguisher,
                    rules: spec.rules,
                    level,
                })
            })
            .collect();
        schemas.sort_by(|a, b| a.precedence.cmp(&b.precedence).then(a.name.cmp(&b.name)));
        Self { schemas, levels }
    }

    /// The levels.
    pub fn levels(&self) -> &[Level] {
        &self.levels
    }

    /// The FlowSchemas in matching order, each as its name, its `metadata.uid` and its
    /// level's index in [`Snapshot::levels`].
    pub fn flow_schemas(&self) -> impl ExactSizeIterator<Item = (&Arc<str>, &Arc<str>, usize)> {
        self.schemas.iter().map(|s| (&s.name, &s.uid, s.level))
    }

    /// Where the request `info` of `user` belongs; `None` when no FlowSchema matches (a
    /// configuration without the mandatory `catch-all`).
    pub fn classify<'a>(
        &'a self,
        info: &'a RequestInfo,
        user: &'a UserInfo,
    ) -> Option<Classification<'a>> {
        let (schema_index, schema) = self
            .schemas
            .iter()
            .enumerate()
            .find(|(_, s)| s.rules.iter().any(|r| rule_matches(r, info, user)))?;
        let distinguisher = match schema.distinguisher {
            Distinguisher::None => "",
            Distinguisher::ByUser => user.username.as_str(),
            Distinguisher::ByNamespace => info.namespace.as_str(),
        };
        Some(Classification {
            flow_schema: &schema.name,
            flow_schema_uid: &schema.uid,
            level: &self.levels[schema.level],
            level_index: schema.level,
            schema_index,
            distinguisher,
        })
    }
}

fn listed(values: &[String], value: &str) -> bool {
    values.iter().any(|v| v == ALL || v == value)
}

fn subject_matches(subject: &Subject, user: &UserInfo) -> bool {
    match subject.kind.as_str() {
        "User" => subject
            .user
            .as_ref()
            .is_some_and(|u| u.name == ALL || u.name == user.username),
        "Group" => subject
            .group
            .as_ref()
            .is_some_and(|g| g.name == ALL || user.groups.contains(&g.name)),
        "ServiceAccount" => {
            let Some(account) = &subject.service_account else {
                return false;
            };
            let Some(rest) = user.username.strip_prefix(SERVICE_ACCOUNT_PREFIX) else {
                return false;
            };
            let Some((namespace, name)) = rest.split_once(':') else {
                return false;
            };
            !name.contains(':')
                && namespace == account.namespace
                && (account.name == ALL || account.name == name)
        }
        _ => false,
    }
}

fn resource_rule_matches(rule: &ResourcePolicyRule, info: &RequestInfo) -> bool {
    if !listed(&rule.verbs, &info.verb) || !listed(&rule.api_groups, &info.api_group) {
        return false;
    }
    let resource_matches = rule.resources.iter().any(|r| {
        if r == ALL {
            return true;
        }
        if info.subresource.is_empty() {
            *r == info.resource
        } else {
            r.split_once('/')
                .is_some_and(|(res, sub)| res == info.resource && sub == info.subresource)
        }
    });
    if !resource_matches {
        return false;
    }
    if info.namespace.is_empty() {
        rule.cluster_scope
    } else {
        listed(&rule.namespaces, &info.namespace)
    }
}

fn non_resource_rule_matches(rule: &NonResourcePolicyRule, info: &RequestInfo) -> bool {
    listed(&rule.verbs, &info.verb)
        && rule.non_resource_urls.iter().any(|url| {
            url == ALL
                || *url == info.path
                || url
                    .strip_suffix('*')
                    .is_some_and(|prefix| info.path.starts_with(prefix))
        })
}

fn rule_matches(rule: &PolicyRulesWithSubjects, info: &RequestInfo, user: &UserInfo) -> bool {
    if !rule.subjects.iter().any(|s| subject_matches(s, user)) {
        return false;
    }
    if info.is_resource_request {
        rule.resource_rules
            .iter()
            .any(|r| resource_rule_matches(r, info))
    } else {
        rule.non_resource_rules
            .iter()
            .any(|r| non_resource_rule_matches(r, info))
    }
}

#[cfg(test)]
mod tests;
