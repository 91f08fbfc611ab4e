//! flowcontrol.apiserver.k8s.io/v1 resources: [`flowschema`] (which requests belong to which
//! priority level, and how they split into flows) and [`prioritylevelconfiguration`] (how much
//! of the server's concurrency a level gets, and what happens to requests beyond it), with the
//! configuration every server keeps ([`bootstrap`]).
//!
//! What the two kinds share lives here: the schemas of their nested types (protobuf numbers
//! from upstream's `generated.proto`), the typed views of their specs that validation, the
//! configuration controller and the API server's classification read, and the group's names.
//!
//! Go renders list and struct values in messages with `%#v`: lists of strings are shown here
//! as Go shows them (`[]string{"*", "get"}`), whole specs as JSON.

pub mod bootstrap;
pub mod flowschema;
pub mod prioritylevelconfiguration;

use genplane_apimachinery::codec::schema::{Field, Struct, Type};
use genplane_apimachinery::validation::field::{Error, Path};
use serde::{Deserialize, Serialize};

/// The API group.
pub const GROUP: &str = "flowcontrol.apiserver.k8s.io";
/// The API version of both kinds.
pub const API_VERSION: &str = "flowcontrol.apiserver.k8s.io/v1";
/// The annotation saying whether the server keeps a suggested object's spec up to date
/// (`"true"`) or leaves it as the cluster's administrators set it (anything else).
pub const AUTO_UPDATE_ANNOTATION: &str = "apf.kubernetes.io/autoupdate-spec";
/// The name of the exempt priority level and FlowSchema.
pub const EXEMPT: &str = "exempt";
/// The name of the catch-all priority level and FlowSchema.
pub const CATCH_ALL: &str = "catch-all";
/// The FlowSchema status condition saying its priority level is missing.
pub const DANGLING: &str = "Dangling";
/// `*`: every verb, API group, resource, namespace, non-resource URL or subject name.
pub const ALL: &str = "*";
/// The distinguisher by user name.
pub const BY_USER: &str = "ByUser";
/// The distinguisher by namespace.
pub const BY_NAMESPACE: &str = "ByNamespace";
/// A priority level whose requests are never limited.
pub const TYPE_EXEMPT: &str = "Exempt";
/// A priority level with a share of the server's concurrency.
pub const TYPE_LIMITED: &str = "Limited";
/// Requests beyond a level's concurrency wait in queues.
pub const RESPONSE_QUEUE: &str = "Queue";
/// Requests beyond a level's concurrency are rejected at once.
pub const RESPONSE_REJECT: &str = "Reject";

static CONDITION_FIELDS: &[Field] = &[
    Field::new("type", 1, Type::String),
    Field::new("status", 2, Type::String),
    Field::new("lastTransitionTime", 3, Type::Time),
    Field::new("reason", 4, Type::String),
    Field::new("message", 5, Type::String),
];

static FLOW_SCHEMA_CONDITION: Struct = Struct {
    name: "FlowSchemaCondition",
    fields: CONDITION_FIELDS,
};

static PRIORITY_LEVEL_CONDITION: Struct = Struct {
    name: "PriorityLevelConfigurationCondition",
    fields: CONDITION_FIELDS,
};

/// The shape of a FlowSchema's status.
pub(crate) static FLOW_SCHEMA_STATUS: Struct = Struct {
    name: "FlowSchemaStatus",
    fields: &[Field::new(
        "conditions",
        1,
        Type::List(&Type::Struct(&FLOW_SCHEMA_CONDITION)),
    )],
};

/// The shape of a PriorityLevelConfiguration's status.
pub(crate) static PRIORITY_LEVEL_STATUS: Struct = Struct {
    name: "PriorityLevelConfigurationStatus",
    fields: &[Field::new(
        "conditions",
        1,
        Type::List(&Type::Struct(&PRIORITY_LEVEL_CONDITION)),
    )],
};

static NAME_ONLY_USER: Struct = Struct {
    name: "UserSubject",
    fields: &[Field::new("name", 1, Type::String)],
};

static NAME_ONLY_GROUP: Struct = Struct {
    name: "GroupSubject",
    fields: &[Field::new("name", 1, Type::String)],
};

static SERVICE_ACCOUNT_SUBJECT: Struct = Struct {
    name: "ServiceAccountSubject",
    fields: &[
        Field::new("namespace", 1, Type::String),
        Field::new("name", 2, Type::String),
    ],
};

static SUBJECT: Struct = Struct {
    name: "Subject",
    fields: &[
        Field::new("kind", 1, Type::String),
        Field::pointer("user", 2, Type::Struct(&NAME_ONLY_USER)),
        Field::pointer("group", 3, Type::Struct(&NAME_ONLY_GROUP)),
        Field::pointer("serviceAccount", 4, Type::Struct(&SERVICE_ACCOUNT_SUBJECT)),
    ],
};

static RESOURCE_POLICY_RULE: Struct = Struct {
    name: "ResourcePolicyRule",
    fields: &[
        Field::new("verbs", 1, Type::List(&Type::String)),
        Field::new("apiGroups", 2, Type::List(&Type::String)),
        Field::new("resources", 3, Type::List(&Type::String)),
        Field::new("clusterScope", 4, Type::Bool),
        Field::new("namespaces", 5, Type::List(&Type::String)),
    ],
};

static NON_RESOURCE_POLICY_RULE: Struct = Struct {
    name: "NonResourcePolicyRule",
    fields: &[
        Field::new("verbs", 1, Type::List(&Type::String)),
        Field::new("nonResourceURLs", 6, Type::List(&Type::String)),
    ],
};

static POLICY_RULES_WITH_SUBJECTS: Struct = Struct {
    name: "PolicyRulesWithSubjects",
    fields: &[
        Field::new("subjects", 1, Type::List(&Type::Struct(&SUBJECT))),
        Field::new(
            "resourceRules",
            2,
            Type::List(&Type::Struct(&RESOURCE_POLICY_RULE)),
        ),
        Field::new(
            "nonResourceRules",
            3,
            Type::List(&Type::Struct(&NON_RESOURCE_POLICY_RULE)),
        ),
    ],
};

static PRIORITY_LEVEL_REFERENCE: Struct = Struct {
    name: "PriorityLevelConfigurationReference",
    fields: &[Field::new("name", 1, Type::String)],
};

static DISTINGUISHER_METHOD: Struct = Struct {
    name: "FlowDistinguisherMethod",
    fields: &[Field::new("type", 1, Type::String)],
};

/// The shape of a FlowSchema's spec.
pub(crate) static FLOW_SCHEMA_SPEC: Struct = Struct {
    name: "FlowSchemaSpec",
    fields: &[
        Field::new(
            "priorityLevelConfiguration",
            1,
            Type::Struct(&PRIORITY_LEVEL_REFERENCE),
        ),
        Field::new("matchingPrecedence", 2, Type::Int32),
        Field::pointer(
            "distinguisherMethod",
            3,
            Type::Struct(&DISTINGUISHER_METHOD),
        ),
        Field::new(
            "rules",
            4,
            Type::List(&Type::Struct(&POLICY_RULES_WITH_SUBJECTS)),
        ),
    ],
};

static QUEUING: Struct = Struct {
    name: "QueuingConfiguration",
    fields: &[
        Field::new("queues", 1, Type::Int32),
        Field::new("handSize", 2, Type::Int32),
        Field::new("queueLengthLimit", 3, Type::Int32),
    ],
};

static LIMIT_RESPONSE: Struct = Struct {
    name: "LimitResponse",
    fields: &[
        Field::new("type", 1, Type::String),
        Field::pointer("queuing", 2, Type::Struct(&QUEUING)),
    ],
};

static LIMITED: Struct = Struct {
    name: "LimitedPriorityLevelConfiguration",
    fields: &[
        Field::pointer("nominalConcurrencyShares", 1, Type::Int32),
        Field::new("limitResponse", 2, Type::Struct(&LIMIT_RESPONSE)),
        Field::pointer("lendablePercent", 3, Type::Int32),
        Field::pointer("borrowingLimitPercent", 4, Type::Int32),
    ],
};

static EXEMPT_CONFIGURATION: Struct = Struct {
    name: "ExemptPriorityLevelConfiguration",
    fields: &[
        Field::pointer("nominalConcurrencyShares", 1, Type::Int32),
        Field::pointer("lendablePercent", 2, Type::Int32),
    ],
};

/// The shape of a PriorityLevelConfiguration's spec.
pub(crate) static PRIORITY_LEVEL_SPEC: Struct = Struct {
    name: "PriorityLevelConfigurationSpec",
    fields: &[
        Field::new("type", 1, Type::String),
        Field::pointer("limited", 2, Type::Struct(&LIMITED)),
        Field::pointer("exempt", 3, Type::Struct(&EXEMPT_CONFIGURATION)),
    ],
};

/// A subject's name (`user`, `group`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default)]
pub struct NameSubject {
    /// The user or group name, or `*`.
    pub name: String,
}

/// A service account subject.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default)]
pub struct ServiceAccountSubject {
    /// The service account's namespace.
    pub namespace: String,
    /// Its name, or `*`.
    pub name: String,
}

/// Who a rule applies to: `kind` says which of the other fields is set.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Subject {
    /// `User`, `Group` or `ServiceAccount`.
    pub kind: String,
    /// The user, for `User`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user: Option<NameSubject>,
    /// The group, for `Group`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<NameSubject>,
    /// The service account, for `ServiceAccount`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_account: Option<ServiceAccountSubject>,
}

/// Requests for resources a rule matches.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ResourcePolicyRule {
    /// Verbs, or `*`.
    pub verbs: Vec<String>,
    /// API groups, or `*`.
    pub api_groups: Vec<String>,
    /// Resources (`resource` or `resource/subresource`), or `*`.
    pub resources: Vec<String>,
    /// Whether requests without a namespace match.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub cluster_scope: bool,
    /// Namespaces, or `*` (any namespace, not the requests without one).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub namespaces: Vec<String>,
}

/// Requests for non-resource URLs a rule matches.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default, rename_all = "camelCase")]
pub struct NonResourcePolicyRule {
    /// Verbs, or `*`.
    pub verbs: Vec<String>,
    /// Paths, `*`, or prefixes ending in `/*`.
    #[serde(rename = "nonResourceURLs")]
    pub non_resource_urls: Vec<String>,
}

/// Subjects and the requests of theirs that match.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PolicyRulesWithSubjects {
    /// Who.
    pub subjects: Vec<Subject>,
    /// Which resource requests.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub resource_rules: Vec<ResourcePolicyRule>,
    /// Which non-resource requests.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub non_resource_rules: Vec<NonResourcePolicyRule>,
}

/// A reference to a priority level by name.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default)]
pub struct PriorityLevelReference {
    /// The PriorityLevelConfiguration's name.
    pub name: String,
}

/// How a FlowSchema's requests split into flows.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default)]
pub struct DistinguisherMethod {
    /// `ByUser` or `ByNamespace`.
    #[serde(rename = "type")]
    pub type_: String,
}

/// A FlowSchema's spec.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default, rename_all = "camelCase")]
pub struct FlowSchemaSpec {
    /// The priority level of the matching requests.
    pub priority_level_configuration: PriorityLevelReference,
    /// Lower values are tried first (1..=10000; 1000 by default).
    pub matching_precedence: i32,
    /// How requests split into flows; none: one flow.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub distinguisher_method: Option<DistinguisherMethod>,
    /// The schema matches a request when one of these does.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<PolicyRulesWithSubjects>,
}

/// How a `Queue` level queues.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default, rename_all = "camelCase")]
pub struct QueuingConfiguration {
    /// Queues (64 by default).
    pub queues: i32,
    /// Queues dealt to each flow (8 by default).
    pub hand_size: i32,
    /// Requests a queue holds (50 by default).
    pub queue_length_limit: i32,
}

/// What a level does with requests beyond its concurrency.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default)]
pub struct LimitResponse {
    /// `Queue` or `Reject`.
    #[serde(rename = "type")]
    pub type_: String,
    /// The queues, for `Queue`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queuing: Option<QueuingConfiguration>,
}

/// A `Limited` level's configuration.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default, rename_all = "camelCase")]
pub struct LimitedConfiguration {
    /// The level's share of the server's concurrency (30 by default).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nominal_concurrency_shares: Option<i32>,
    /// What happens beyond it.
    pub limit_response: LimitResponse,
    /// The percentage of its seats other levels may borrow (0 by default).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lendable_percent: Option<i32>,
    /// How many seats it may borrow, as a percentage of its own; none: no limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub borrowing_limit_percent: Option<i32>,
}

/// The `Exempt` level's configuration.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ExemptConfiguration {
    /// Its share of the server's concurrency, which others may borrow (0 by default).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nominal_concurrency_shares: Option<i32>,
    /// The percentage of those seats others may borrow (0 by default).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lendable_percent: Option<i32>,
}

/// A PriorityLevelConfiguration's spec.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default)]
pub struct PriorityLevelSpec {
    /// `Exempt` or `Limited`.
    #[serde(rename = "type")]
    pub type_: String,
    /// The configuration of a `Limited` level.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limited: Option<LimitedConfiguration>,
    /// The configuration of the `Exempt` level.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exempt: Option<ExemptConfiguration>,
}

/// `Invalid value` for a list of strings, shown as Go shows it (`[]string{"*", "get"}`).
pub(crate) fn invalid_strings(path: &Path, values: &[String], detail: &str) -> Error {
    let mut error = Error::invalid(path, serde_json::json!(values), detail);
    error.shown = Some(go_strings(values));
    error
}

/// `Unsupported value` for a list of strings, shown as Go shows it.
pub(crate) fn unsupported_strings(path: &Path, values: &[String], supported: &[&str]) -> Error {
    let mut error = Error::not_supported(path, serde_json::json!(values), supported);
    error.shown = Some(go_strings(values));
    error
}

fn go_strings(values: &[String]) -> String {
    let items: Vec<String> = values
        .iter()
        .map(|v| genplane_apimachinery::gofmt::quote(v))
        .collect();
    format!("[]string{{{}}}", items.join(", "))
}

/// Whether `values` holds `*`.
pub fn has_wildcard(values: &[String]) -> bool {
    values.iter().any(|v| v == ALL)
}

/// Validates the conditions of a status at `path`: each has a type, no type twice.
pub(crate) fn validate_condition_types<'a>(
    types: impl Iterator<Item = &'a str>,
    path: &Path,
) -> genplane_apimachinery::validation::field::ErrorList {
    let mut errors = genplane_apimachinery::validation::field::ErrorList::new();
    let mut seen = std::collections::BTreeSet::new();
    for (i, type_) in types.enumerate() {
        let at = path.index(i);
        if !seen.insert(type_) {
            errors.push(Error::duplicate(&at.child("type"), type_));
        }
        if type_.is_empty() {
            errors.push(Error::required(&at.child("type"), "must not be empty"));
        }
    }
    errors
}

/// A condition's type, as validation reads it.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct ConditionType {
    #[serde(rename = "type")]
    pub(crate) type_: String,
}

#[cfg(test)]
mod tests;
