//! The audit policy: `audit.k8s.io/v1` `Policy`, how it is read, checked and evaluated.
//!
//! A policy is a list of rules; the first rule that matches a request decides its [`Level`] and
//! the [`Stage`]s that are not recorded. A request no rule matches is not audited
//! ([`Level::None`]).
//!
//! Reading follows kube-apiserver's `--audit-policy-file`: the file is YAML or JSON, must be
//! `apiVersion: audit.k8s.io/v1`, `kind: Policy`, and must hold at least one rule. Unknown and
//! repeated fields are *strict decoding errors*: like upstream, [`Policy::parse`] then reads the
//! file leniently (unknown fields ignored, the last of repeated keys kept) and reports the
//! problem as a warning; [`Policy::parse_strict`] refuses such a file instead. Values that
//! cannot be used (a level or stage that does not exist, a malformed non-resource URL, an API
//! group that is not a DNS subdomain) are validation errors, worded as upstream's.

use std::fmt;
use std::path::{Path, PathBuf};

use genplane_apimachinery::validation::field::{self, ErrorList};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::attributes::RequestAttributes;

/// The `apiVersion` of audit policies and events.
pub const API_VERSION: &str = "audit.k8s.io/v1";

/// How much of a request is recorded, from least to most.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Level {
    /// Nothing is recorded.
    None,
    /// Who did what to which object, and the response code; no bodies.
    Metadata,
    /// Metadata plus the request body.
    Request,
    /// Metadata plus the request and response bodies.
    RequestResponse,
}

impl Level {
    /// Every level, in upstream's order.
    pub const ALL: [Level; 4] = [
        Level::None,
        Level::Metadata,
        Level::Request,
        Level::RequestResponse,
    ];

    /// The level's name as written in policies and events.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::None => "None",
            Level::Metadata => "Metadata",
            Level::Request => "Request",
            Level::RequestResponse => "RequestResponse",
        }
    }

    /// The level named `name` (case-sensitive), if any.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|l| l.as_str() == name)
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A point in the handling of a request at which an event is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Stage {
    /// As soon as the request is received, before it is handled further.
    RequestReceived,
    /// When the response headers are sent, before the body: long-running requests (watch) only.
    ResponseStarted,
    /// When the response has been sent completely.
    ResponseComplete,
    /// When handling the request panicked.
    Panic,
}

impl Stage {
    /// Every stage, in upstream's order.
    pub const ALL: [Stage; 4] = [
        Stage::RequestReceived,
        Stage::ResponseStarted,
        Stage::ResponseComplete,
        Stage::Panic,
    ];

    /// The stage's name as written in policies and events.
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::RequestReceived => "RequestReceived",
            Stage::ResponseStarted => "ResponseStarted",
            Stage::ResponseComplete => "ResponseComplete",
            Stage::Panic => "Panic",
        }
    }

    /// The stage named `name` (case-sensitive), if any.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == name)
    }

    fn bit(self) -> u8 {
        match self {
            Stage::RequestReceived => 1,
            Stage::ResponseStarted => 2,
            Stage::ResponseComplete => 4,
            Stage::Panic => 8,
        }
    }
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A set of stages (a bit set: copying and testing it costs nothing).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct StageSet(u8);

impl StageSet {
    /// No stage.
    pub const EMPTY: StageSet = StageSet(0);

    /// Whether `stage` is in the set.
    pub fn contains(self, stage: Stage) -> bool {
        self.0 & stage.bit() != 0
    }

    /// Adds `stage`.
    pub fn insert(&mut self, stage: Stage) {
        self.0 |= stage.bit();
    }

    /// The stages in either set.
    #[must_use]
    pub fn union(self, other: StageSet) -> StageSet {
        StageSet(self.0 | other.0)
    }

    /// Whether the set is empty.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The stages in the set, in upstream's order.
    pub fn iter(self) -> impl Iterator<Item = Stage> {
        Stage::ALL.into_iter().filter(move |s| self.contains(*s))
    }
}

impl FromIterator<Stage> for StageSet {
    fn from_iter<I: IntoIterator<Item = Stage>>(iter: I) -> Self {
        let mut set = StageSet::EMPTY;
        for stage in iter {
            set.insert(stage);
        }
        set
    }
}

/// Resources of one API group a rule applies to (`rules[].resources[]`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupResources {
    /// The API group; empty for the core group.
    pub group: String,
    /// Resources: `pods`, `pods/log` (a subresource), `*/scale` (that subresource of any
    /// resource), `pods/*` (pods and all their subresources), `*` (everything). Empty means
    /// every resource of the group.
    pub resources: Vec<String>,
    /// Object names; empty means any name.
    pub resource_names: Vec<String>,
}

/// One rule of a policy (`rules[]`). Empty lists match everything.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyRule {
    /// The level of requests this rule matches.
    pub level: Level,
    /// User names the rule applies to.
    pub users: Vec<String>,
    /// Groups the rule applies to (a user in any of them matches).
    pub user_groups: Vec<String>,
    /// Verbs the rule applies to (`get`, `list`, `watch`, `create`, ...; lower-case HTTP methods
    /// for non-resource requests).
    pub verbs: Vec<String>,
    /// Resources the rule applies to (resource requests only).
    pub resources: Vec<GroupResources>,
    /// Namespaces the rule applies to; `""` means cluster-scoped resources (resource requests
    /// only).
    pub namespaces: Vec<String>,
    /// Paths of non-resource requests the rule applies to: exact, `*`, or a prefix ending in `*`.
    pub non_resource_urls: Vec<String>,
    /// Stages not recorded for requests this rule matches (the policy's are added).
    pub omit_stages: StageSet,
    /// Whether `metadata.managedFields` is left out of recorded bodies; `None` takes the
    /// policy's default.
    pub omit_managed_fields: Option<bool>,
}

/// An audit policy (`audit.k8s.io/v1` `Policy`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    /// The rules; the first that matches decides.
    pub rules: Vec<PolicyRule>,
    /// Stages never recorded.
    pub omit_stages: StageSet,
    /// Whether `metadata.managedFields` is left out of recorded bodies, unless a rule says
    /// otherwise.
    pub omit_managed_fields: bool,
}

/// What the policy decided for one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestAuditConfig {
    /// How much is recorded.
    pub level: Level,
    /// The stages not recorded (the rule's and the policy's).
    pub omit_stages: StageSet,
    /// Whether `metadata.managedFields` is left out of recorded bodies.
    pub omit_managed_fields: bool,
}

/// A policy read from a file, with the strict-decoding problems that were tolerated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParsedPolicy {
    /// The policy.
    pub policy: Policy,
    /// Problems that upstream logs as warnings ("Audit policy contains errors, falling back to
    /// lenient decoding: ..."): unknown fields, repeated keys. Empty for a clean file.
    pub warnings: Vec<String>,
}

/// Why a policy could not be read.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// The file could not be read.
    #[error("failed to read file path {path:?}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        source: std::io::Error,
    },
    /// The file is not a policy document: bad YAML/JSON, a field of the wrong type, or a
    /// missing or foreign `apiVersion`/`kind`.
    #[error("failed decoding: {0}")]
    Decode(String),
    /// Strict decoding failed (unknown or repeated fields), from [`Policy::parse_strict`].
    #[error("{0}")]
    Strict(String),
    /// The policy has values that cannot be used.
    #[error("{0}")]
    Invalid(ErrorList),
    /// The policy has no rules.
    #[error("loaded illegal policy with 0 rules")]
    NoRules,
    /// One of the above, in the named file.
    #[error("{source}: from file {}", path.display())]
    InFile {
        /// The file.
        path: PathBuf,
        /// The problem.
        #[source]
        source: Box<PolicyError>,
    },
}

impl Policy {
    /// A policy of one rule recording every request at `level` (handy for tests and for
    /// `--audit-policy-file`-less setups).
    pub fn everything_at(level: Level) -> Self {
        Policy {
            rules: vec![PolicyRule::at(level)],
            omit_stages: StageSet::EMPTY,
            omit_managed_fields: false,
        }
    }

    /// Reads the policy file at `path` as kube-apiserver's `--audit-policy-file`.
    pub fn load(path: &Path) -> Result<ParsedPolicy, PolicyError> {
        let bytes = std::fs::read(path).map_err(|source| PolicyError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(&bytes).map_err(|e| PolicyError::InFile {
            path: path.to_owned(),
            source: Box::new(e),
        })
    }

    /// Reads a policy from YAML or JSON, tolerating unknown and repeated fields as upstream
    /// does (they are returned as warnings).
    pub fn parse(bytes: &[u8]) -> Result<ParsedPolicy, PolicyError> {
        let mut warnings = Vec::new();
        let value = match parse_document(bytes, serde_saphyr::DuplicateKeyPolicy::Error) {
            Ok(value) => value,
            Err(strict) => {
                let value = parse_document(bytes, serde_saphyr::DuplicateKeyPolicy::LastWins)
                    .map_err(PolicyError::Decode)?;
                warnings.push(lenient_warning(&format!("strict decoding error: {strict}")));
                value
            }
        };
        let Decoded {
            policy,
            unknown,
            problems,
        } = decode_policy(&value)?;
        if !unknown.is_empty() {
            let list: Vec<String> = unknown
                .iter()
                .map(|f| format!("unknown field {f:?}"))
                .collect();
            warnings.push(lenient_warning(&format!(
                "strict decoding error: {}",
                list.join(", ")
            )));
        }
        policy
            .validate_with(problems)
            .map_err(PolicyError::Invalid)?;
        if policy.rules.is_empty() {
            return Err(PolicyError::NoRules);
        }
        Ok(ParsedPolicy { policy, warnings })
    }

    /// Reads a policy from YAML or JSON, refusing unknown and repeated fields.
    pub fn parse_strict(bytes: &[u8]) -> Result<Policy, PolicyError> {
        let parsed = Self::parse(bytes)?;
        if let Some(first) = parsed.warnings.first() {
            let problem = first.strip_prefix(LENIENT_PREFIX).unwrap_or(first.as_str());
            return Err(PolicyError::Strict(problem.to_owned()));
        }
        Ok(parsed.policy)
    }

    /// Checks the policy as upstream's `ValidatePolicy` does.
    pub fn validate(&self) -> Result<(), ErrorList> {
        self.validate_with(Problems::default())
    }

    /// Validation, with the level and stage problems found while decoding put where upstream
    /// reports them.
    fn validate_with(&self, mut problems: Problems) -> Result<(), ErrorList> {
        let mut errors = std::mem::take(&mut problems.omit_stages);
        let rules = field::Path::new("rules");
        for (i, rule) in self.rules.iter().enumerate() {
            let found = problems.rules.get_mut(i).map(std::mem::take);
            rule.validate(&rules.index(i), found.unwrap_or_default(), &mut errors);
        }
        errors.into_result()
    }

    /// What the policy decides for a request: the first matching rule's level, the stages to
    /// leave out and whether managed fields are left out; [`Level::None`] when no rule
    /// matches. Allocates nothing.
    pub fn evaluate(&self, attrs: &RequestAttributes<'_>) -> RequestAuditConfig {
        for rule in &self.rules {
            if rule.matches(attrs) {
                return RequestAuditConfig {
                    level: rule.level,
                    omit_stages: rule.omit_stages.union(self.omit_stages),
                    omit_managed_fields: rule
                        .omit_managed_fields
                        .unwrap_or(self.omit_managed_fields),
                };
            }
        }
        RequestAuditConfig {
            level: Level::None,
            omit_stages: self.omit_stages,
            omit_managed_fields: self.omit_managed_fields,
        }
    }
}

const LENIENT_PREFIX: &str = "Audit policy contains errors, falling back to lenient decoding: ";

fn lenient_warning(problem: &str) -> String {
    format!("{LENIENT_PREFIX}{problem}")
}

impl PolicyRule {
    /// A rule matching every request, at `level`.
    pub fn at(level: Level) -> Self {
        PolicyRule {
            level,
            users: Vec::new(),
            user_groups: Vec::new(),
            verbs: Vec::new(),
            resources: Vec::new(),
            namespaces: Vec::new(),
            non_resource_urls: Vec::new(),
            omit_stages: StageSet::EMPTY,
            omit_managed_fields: None,
        }
    }

    /// Whether the rule applies to a request (upstream's `ruleMatches`).
    pub fn matches(&self, attrs: &RequestAttributes<'_>) -> bool {
        if !self.users.is_empty() && !has(&self.users, &attrs.user.username) {
            return false;
        }
        if !self.user_groups.is_empty()
            && !attrs.user.groups.iter().any(|g| has(&self.user_groups, g))
        {
            return false;
        }
        if !self.verbs.is_empty() && !has(&self.verbs, attrs.verb) {
            return false;
        }
        if !self.namespaces.is_empty() || !self.resources.is_empty() {
            return self.matches_resource(attrs);
        }
        if !self.non_resource_urls.is_empty() {
            return self.matches_non_resource(attrs);
        }
        true
    }

    fn matches_non_resource(&self, attrs: &RequestAttributes<'_>) -> bool {
        if attrs.resource.is_some() {
            return false;
        }
        let path = attrs.path();
        self.non_resource_urls
            .iter()
            .any(|spec| path_matches(path, spec))
    }

    fn matches_resource(&self, attrs: &RequestAttributes<'_>) -> bool {
        let Some(res) = &attrs.resource else {
            return false;
        };
        if !self.namespaces.is_empty() && !has(&self.namespaces, res.namespace) {
            return false;
        }
        if self.resources.is_empty() {
            return true;
        }
        self.resources
            .iter()
            .filter(|gr| gr.group == res.api_group)
            .any(|gr| {
                if gr.resources.is_empty() {
                    return true;
                }
                if !gr.resource_names.is_empty() && !has(&gr.resource_names, res.name) {
                    return false;
                }
                gr.resources
                    .iter()
                    .any(|spec| resource_matches(spec, res.resource, res.subresource))
            })
    }

    fn validate(&self, path: &field::Path, problems: RuleProblems, errors: &mut ErrorList) {
        // Levels and stages are checked while decoding (bad names cannot be represented).
        if let Some(level) = problems.level {
            errors.push(level);
        }
        let urls = path.child("nonResourceURLs");
        for (i, url) in self.non_resource_urls.iter().enumerate() {
            if url == "*" {
                continue;
            }
            if !url.starts_with('/') {
                errors.push(field::Error::invalid(
                    &urls.index(i),
                    url.as_str(),
                    "non-resource URL rules must begin with a '/' character",
                ));
            }
            let mut head = url.chars();
            head.next_back();
            if head.as_str().contains('*') {
                errors.push(field::Error::invalid(
                    &urls.index(i),
                    url.as_str(),
                    "non-resource URL wildcards '*' must be the final character of the rule",
                ));
            }
        }
        let resources = path.child("resources");
        for gr in &self.resources {
            if !gr.group.is_empty() {
                let problems =
                    genplane_apimachinery::validation::name_is_dns_subdomain(&gr.group, false);
                if !problems.is_empty() {
                    errors.push(field::Error::invalid(
                        &resources.child("group"),
                        gr.group.as_str(),
                        problems.join(","),
                    ));
                }
            }
            if !gr.resource_names.is_empty() && gr.resources.is_empty() {
                errors.push(field::Error::invalid(
                    &resources.child("resourceNames"),
                    Value::from(gr.resource_names.clone()),
                    "using resourceNames requires at least one resource",
                ));
            }
        }
        errors.extend(problems.omit_stages);
        if !self.non_resource_urls.is_empty()
            && (!self.resources.is_empty() || !self.namespaces.is_empty())
        {
            errors.push(field::Error::invalid(
                &urls,
                Value::from(self.non_resource_urls.clone()),
                "rules cannot apply to both regular resources and non-resource URLs",
            ));
        }
    }
}

fn has(list: &[String], value: &str) -> bool {
    list.iter().any(|s| s == value)
}

/// Upstream's `pathMatches`: `*`, exact, or a prefix ending in `*`.
fn path_matches(path: &str, spec: &str) -> bool {
    spec == "*"
        || spec == path
        || (spec.ends_with('*') && path.starts_with(spec.trim_end_matches('*')))
}

/// Whether a policy resource spec matches a resource and (possibly empty) subresource.
fn resource_matches(spec: &str, resource: &str, subresource: &str) -> bool {
    if spec == "*" {
        return true;
    }
    // The combined "resource/subresource", compared without building it.
    let combined = if subresource.is_empty() {
        spec == resource
    } else {
        spec.len() == resource.len() + 1 + subresource.len()
            && spec.starts_with(resource)
            && spec[resource.len()..].starts_with('/')
            && spec.ends_with(subresource)
    };
    if combined {
        return true;
    }
    if !subresource.is_empty() && spec.strip_prefix("*/") == Some(subresource) {
        return true;
    }
    spec.strip_suffix("/*") == Some(resource)
}

/// Parses YAML (or JSON, which is YAML) into a JSON value.
fn parse_document(
    bytes: &[u8],
    duplicates: serde_saphyr::DuplicateKeyPolicy,
) -> Result<Value, String> {
    let options = serde_saphyr::options! {
        duplicate_keys: duplicates,
        legacy_octal_numbers: false,
    };
    serde_saphyr::from_slice_with_options::<Value>(bytes, options).map_err(|e| e.to_string())
}

/// A decoded policy, with what decoding found wrong but could go on with.
struct Decoded {
    policy: Policy,
    /// Unknown fields, as dotted paths.
    unknown: Vec<String>,
    problems: Problems,
}

/// Bad level and stage names, reported with the validation errors.
#[derive(Debug, Default)]
struct Problems {
    omit_stages: ErrorList,
    rules: Vec<RuleProblems>,
}

#[derive(Debug, Default)]
struct RuleProblems {
    level: Option<field::Error>,
    omit_stages: ErrorList,
}

/// Reads the policy out of a parsed document.
fn decode_policy(value: &Value) -> Result<Decoded, PolicyError> {
    let Some(object) = value.as_object() else {
        return Err(PolicyError::Decode(format!(
            "the policy must be an object, not {}",
            kind_of(value)
        )));
    };
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or("");
    let api_version = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    if kind.is_empty() {
        return Err(PolicyError::Decode(
            "Object 'Kind' is missing in the policy".to_owned(),
        ));
    }
    if api_version.is_empty() {
        return Err(PolicyError::Decode(
            "Object 'apiVersion' is missing in the policy".to_owned(),
        ));
    }
    if api_version != API_VERSION || kind != "Policy" {
        return Err(PolicyError::Decode(format!(
            "no kind {kind:?} is registered for version {api_version:?}: an audit policy is \
             apiVersion {API_VERSION:?}, kind \"Policy\""
        )));
    }
    let mut policy = Policy {
        rules: Vec::new(),
        omit_stages: StageSet::EMPTY,
        omit_managed_fields: false,
    };
    let mut unknown = Vec::new();
    let mut problems = Problems::default();
    for (key, field_value) in object {
        match key.as_str() {
            "apiVersion" | "kind" => {}
            "metadata" => {
                if !field_value.is_null() && !field_value.is_object() {
                    return Err(wrong_type("metadata", "an object", field_value));
                }
            }
            "rules" => {
                for (i, rule) in list(field_value, "rules")?.iter().enumerate() {
                    let (rule, found) = decode_rule(rule, &format!("rules[{i}]"), &mut unknown)?;
                    policy.rules.push(rule);
                    problems.rules.push(found);
                }
            }
            "omitStages" => {
                (policy.omit_stages, problems.omit_stages) = stages(field_value, "omitStages")?;
            }
            "omitManagedFields" => {
                policy.omit_managed_fields =
                    boolean(field_value, "omitManagedFields")?.unwrap_or(false);
            }
            other => unknown.push(other.to_owned()),
        }
    }
    Ok(Decoded {
        policy,
        unknown,
        problems,
    })
}

fn decode_rule(
    value: &Value,
    path: &str,
    unknown: &mut Vec<String>,
) -> Result<(PolicyRule, RuleProblems), PolicyError> {
    let object = object(value, path)?;
    let mut rule = PolicyRule::at(Level::None);
    let mut problems = RuleProblems::default();
    let mut level = None;
    for (key, v) in object {
        let at = format!("{path}.{key}");
        match key.as_str() {
            "level" => level = string(v, &at)?,
            "users" => rule.users = strings(v, &at)?,
            "userGroups" => rule.user_groups = strings(v, &at)?,
            "verbs" => rule.verbs = strings(v, &at)?,
            "namespaces" => rule.namespaces = strings(v, &at)?,
            "nonResourceURLs" => rule.non_resource_urls = strings(v, &at)?,
            "omitStages" => (rule.omit_stages, problems.omit_stages) = stages(v, &at)?,
            "omitManagedFields" => rule.omit_managed_fields = boolean(v, &at)?,
            "resources" => {
                for (i, gr) in list(v, &at)?.iter().enumerate() {
                    rule.resources.push(decode_group_resources(
                        gr,
                        &format!("{at}[{i}]"),
                        unknown,
                    )?);
                }
            }
            _ => unknown.push(at),
        }
    }
    let level_path = field::Path::new(&format!("{path}.level"));
    match level.as_deref() {
        None | Some("") => problems.level = Some(field::Error::required(&level_path, "")),
        Some(name) => match Level::from_name(name) {
            Some(level) => rule.level = level,
            None => {
                let names: Vec<&str> = Level::ALL.iter().map(|l| l.as_str()).collect();
                problems.level = Some(field::Error::not_supported(&level_path, name, &names));
            }
        },
    }
    Ok((rule, problems))
}

fn decode_group_resources(
    value: &Value,
    path: &str,
    unknown: &mut Vec<String>,
) -> Result<GroupResources, PolicyError> {
    let mut gr = GroupResources::default();
    for (key, v) in object(value, path)? {
        let at = format!("{path}.{key}");
        match key.as_str() {
            "group" => gr.group = string(v, &at)?.unwrap_or_default(),
            "resources" => gr.resources = strings(v, &at)?,
            "resourceNames" => gr.resource_names = strings(v, &at)?,
            _ => unknown.push(at),
        }
    }
    Ok(gr)
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

fn wrong_type(path: &str, want: &str, got: &Value) -> PolicyError {
    PolicyError::Decode(format!("{path}: expected {want}, got {}", kind_of(got)))
}

static EMPTY_LIST: Vec<Value> = Vec::new();

fn list<'v>(value: &'v Value, path: &str) -> Result<&'v Vec<Value>, PolicyError> {
    match value {
        Value::Null => Ok(&EMPTY_LIST),
        Value::Array(items) => Ok(items),
        other => Err(wrong_type(path, "a list", other)),
    }
}

fn object<'v>(value: &'v Value, path: &str) -> Result<&'v Map<String, Value>, PolicyError> {
    value
        .as_object()
        .ok_or_else(|| wrong_type(path, "an object", value))
}

fn string(value: &Value, path: &str) -> Result<Option<String>, PolicyError> {
    match value {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(s.clone())),
        other => Err(wrong_type(path, "a string", other)),
    }
}

fn strings(value: &Value, path: &str) -> Result<Vec<String>, PolicyError> {
    list(value, path)?
        .iter()
        .enumerate()
        .map(|(i, item)| match item {
            Value::String(s) => Ok(s.clone()),
            other => Err(wrong_type(&format!("{path}[{i}]"), "a string", other)),
        })
        .collect()
}

fn boolean(value: &Value, path: &str) -> Result<Option<bool>, PolicyError> {
    match value {
        Value::Null => Ok(None),
        Value::Bool(b) => Ok(Some(*b)),
        other => Err(wrong_type(path, "a boolean", other)),
    }
}

/// The stages named, and the names that are not stages.
fn stages(value: &Value, path: &str) -> Result<(StageSet, ErrorList), PolicyError> {
    let mut set = StageSet::EMPTY;
    let mut errors = ErrorList::new();
    let names = strings(value, path)?;
    let base = field::Path::new(path);
    for (i, name) in names.iter().enumerate() {
        match Stage::from_name(name) {
            Some(stage) => set.insert(stage),
            None => {
                let allowed: Vec<&str> = Stage::ALL.iter().map(|s| s.as_str()).collect();
                errors.push(field::Error::invalid(
                    &base.index(i),
                    name.as_str(),
                    format!("allowed stages are {}", allowed.join(",")),
                ));
            }
        }
    }
    Ok((set, errors))
}

/// The fuzz entry point of [`Policy::parse`]: the input as a policy file. A policy that
/// parses decides a level for a few requests (resource and not, by a user and a group).
///
/// # Panics
///
/// When parsing or evaluating panics.
pub fn exercise(data: &[u8]) {
    let Ok(parsed) = Policy::parse(data) else {
        return;
    };
    let user = genplane_authentication::UserInfo::authenticated("alice", vec!["ops".into()]);
    let plain = crate::RequestAttributes::new(&user, "get", "/healthz?verbose");
    parsed.policy.evaluate(&plain);
    let resource = crate::RequestAttributes {
        resource: Some(crate::ResourceAttributes {
            api_group: "",
            api_version: "v1",
            resource: "configmaps",
            subresource: "",
            namespace: "default",
            name: "settings",
        }),
        ..crate::RequestAttributes::new(
            &user,
            "update",
            "/api/v1/namespaces/default/configmaps/settings",
        )
    };
    parsed.policy.evaluate(&resource);
}

#[cfg(test)]
mod tests {
    use genplane_authentication::UserInfo;

    use super::*;
    use crate::attributes::{ResourceAttributes, SourceIps};

    /// A policy in the spirit of the example in the Kubernetes audit documentation.
    const EXAMPLE: &str = r#"
apiVersion: audit.k8s.io/v1
kind: Policy
# Nothing at RequestReceived, for every rule.
omitStages:
  - "RequestReceived"
rules:
  # Pod changes in full.
  - level: RequestResponse
    resources:
    - group: ""
      resources: ["pods"]
  # Pod logs and status, metadata only.
  - level: Metadata
    resources:
    - group: ""
      resources: ["pods/log", "pods/status"]
  # One configmap is not interesting.
  - level: None
    resources:
    - group: ""
      resources: ["configmaps"]
      resourceNames: ["controller-leader"]
  # Watches on endpoints and services by the proxy.
  - level: None
    users: ["system:kube-proxy"]
    verbs: ["watch"]
    resources:
    - group: ""
      resources: ["endpoints", "services"]
  # Authenticated health checks.
  - level: None
    userGroups: ["system:authenticated"]
    nonResourceURLs:
    - "/api*"
    - "/version"
  # Configmaps in kube-system with bodies.
  - level: Request
    resources:
    - group: ""
      resources: ["configmaps"]
    namespaces: ["kube-system"]
  # Secrets and configmaps elsewhere: metadata only.
  - level: Metadata
    resources:
    - group: ""
      resources: ["secrets", "configmaps"]
  # Everything else of these groups with bodies.
  - level: Request
    resources:
    - group: ""
    - group: "extensions"
  # Everything else, metadata; nothing recorded when a request arrives.
  - level: Metadata
    omitStages:
      - "RequestReceived"
"#;

    fn user(name: &str, groups: &[&str]) -> UserInfo {
        UserInfo {
            username: name.to_owned(),
            groups: groups.iter().map(|g| (*g).to_owned()).collect(),
            ..UserInfo::default()
        }
    }

    fn resource<'a>(
        user: &'a UserInfo,
        verb: &'a str,
        group: &'a str,
        resource: &'a str,
        subresource: &'a str,
        namespace: &'a str,
        name: &'a str,
    ) -> RequestAttributes<'a> {
        RequestAttributes {
            resource: Some(ResourceAttributes {
                api_group: group,
                api_version: "v1",
                resource,
                subresource,
                namespace,
                name,
            }),
            ..RequestAttributes::new(user, verb, "/apis/x")
        }
    }

    fn non_resource<'a>(user: &'a UserInfo, verb: &'a str, uri: &'a str) -> RequestAttributes<'a> {
        RequestAttributes {
            source_ips: SourceIps::default(),
            ..RequestAttributes::new(user, verb, uri)
        }
    }

    #[test]
    fn the_documentation_example_parses_cleanly() {
        let parsed = Policy::parse(EXAMPLE.as_bytes()).expect("valid policy");
        assert!(parsed.warnings.is_empty(), "{:?}", parsed.warnings);
        let policy = parsed.policy;
        assert_eq!(policy.rules.len(), 9);
        assert!(policy.omit_stages.contains(Stage::RequestReceived));
        assert_eq!(policy.rules[0].level, Level::RequestResponse);
        assert_eq!(
            policy.rules[2].resources[0].resource_names,
            ["controller-leader"]
        );
        assert_eq!(policy.rules[4].non_resource_urls, ["/api*", "/version"]);
        assert_eq!(policy.rules[5].namespaces, ["kube-system"]);
    }

    #[test]
    fn json_policies_parse_too() {
        let json = r#"{"apiVersion":"audit.k8s.io/v1","kind":"Policy",
            "omitManagedFields":true,
            "rules":[{"level":"Metadata","verbs":["get"],"omitManagedFields":false}]}"#;
        let policy = Policy::parse_strict(json.as_bytes()).expect("valid policy");
        assert!(policy.omit_managed_fields);
        assert_eq!(policy.rules[0].omit_managed_fields, Some(false));
        assert_eq!(policy.rules[0].verbs, ["get"]);
        let tabs = "{\n\t\"apiVersion\": \"audit.k8s.io/v1\",\n\t\"kind\": \"Policy\",\n\t\"rules\": \
                    [\n\t\t{\"level\": \"None\"}\n\t]\n}\n";
        let policy = Policy::parse_strict(tabs.as_bytes()).expect("tab-indented JSON");
        assert_eq!(policy.rules[0].level, Level::None);
    }

    #[test]
    fn rule_matching_table() {
        let policy = Policy::parse_strict(EXAMPLE.as_bytes()).expect("valid policy");
        let alice = user("alice", &["dev", "system:authenticated"]);
        let proxy = user("system:kube-proxy", &["system:authenticated"]);
        let anonymous = user("system:anonymous", &["system:unauthenticated"]);
        let level = |attrs: RequestAttributes<'_>| policy.evaluate(&attrs).level;
        let cases: Vec<(&str, RequestAttributes<'_>, Level)> = vec![
            (
                "pods in full",
                resource(&alice, "create", "", "pods", "", "default", "p"),
                Level::RequestResponse,
            ),
            (
                "pods/log is its own resource",
                resource(&alice, "get", "", "pods", "log", "default", "p"),
                Level::Metadata,
            ),
            (
                "pods/exec matches no pod rule, then the core-group rule",
                resource(&alice, "create", "", "pods", "exec", "default", "p"),
                Level::Request,
            ),
            (
                "resourceNames: the named configmap",
                resource(
                    &alice,
                    "update",
                    "",
                    "configmaps",
                    "",
                    "default",
                    "controller-leader",
                ),
                Level::None,
            ),
            (
                "resourceNames: another configmap",
                resource(&alice, "update", "", "configmaps", "", "default", "other"),
                Level::Metadata,
            ),
            (
                "namespaces: kube-system configmaps",
                resource(
                    &alice,
                    "update",
                    "",
                    "configmaps",
                    "",
                    "kube-system",
                    "other",
                ),
                Level::Request,
            ),
            (
                "users and verbs: the proxy's watch",
                resource(&proxy, "watch", "", "services", "", "", ""),
                Level::None,
            ),
            (
                "users and verbs: the proxy's list",
                resource(&proxy, "list", "", "services", "", "", ""),
                Level::Request,
            ),
            (
                "secrets stay at metadata",
                resource(&alice, "get", "", "secrets", "", "default", "s"),
                Level::Metadata,
            ),
            (
                "other groups fall through to the catch-all",
                resource(&alice, "get", "apps", "deployments", "", "default", "d"),
                Level::Metadata,
            ),
            (
                "groups and non-resource prefix",
                non_resource(&alice, "get", "/apis/apps/v1?timeout=32s"),
                Level::None,
            ),
            (
                "non-resource exact",
                non_resource(&alice, "get", "/version"),
                Level::None,
            ),
            (
                "non-resource: exact does not mean prefix",
                non_resource(&alice, "get", "/versions"),
                Level::Metadata,
            ),
            (
                "non-resource: the group does not match",
                non_resource(&anonymous, "get", "/api"),
                Level::Metadata,
            ),
        ];
        for (name, attrs, want) in cases {
            assert_eq!(level(attrs), want, "{name}");
        }
    }

    #[test]
    fn resource_spec_forms() {
        assert!(resource_matches("pods", "pods", ""));
        assert!(!resource_matches("pods", "pods", "log"));
        assert!(resource_matches("pods/log", "pods", "log"));
        assert!(!resource_matches("pods/log", "pods", "exec"));
        assert!(!resource_matches("pods/log", "pod", "s/log"));
        assert!(resource_matches("*/scale", "deployments", "scale"));
        assert!(!resource_matches("*/scale", "deployments", ""));
        assert!(resource_matches("pods/*", "pods", "exec"));
        assert!(resource_matches("pods/*", "pods", ""));
        assert!(!resource_matches("pods/*", "secrets", ""));
        assert!(resource_matches("*", "anything", "sub"));
    }

    #[test]
    fn namespaces_empty_string_means_cluster_scoped() {
        let policy = Policy {
            rules: vec![PolicyRule {
                namespaces: vec![String::new()],
                ..PolicyRule::at(Level::Request)
            }],
            omit_stages: StageSet::EMPTY,
            omit_managed_fields: false,
        };
        let u = user("u", &[]);
        let cluster = resource(&u, "get", "", "namespaces", "", "", "default");
        let namespaced = resource(&u, "get", "", "configmaps", "", "default", "c");
        assert_eq!(policy.evaluate(&cluster).level, Level::Request);
        assert_eq!(policy.evaluate(&namespaced).level, Level::None);
        // A namespace rule never matches a non-resource request.
        assert_eq!(
            policy.evaluate(&non_resource(&u, "get", "/healthz")).level,
            Level::None
        );
    }

    #[test]
    fn first_match_wins_and_stages_and_managed_fields_combine() {
        let yaml = r#"
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [Panic]
omitManagedFields: true
rules:
- level: Metadata
  verbs: [get]
  omitStages: [ResponseStarted]
  omitManagedFields: false
- level: RequestResponse
"#;
        let policy = Policy::parse_strict(yaml.as_bytes()).expect("valid");
        let u = user("u", &[]);
        let get = policy.evaluate(&non_resource(&u, "get", "/x"));
        assert_eq!(get.level, Level::Metadata);
        assert_eq!(
            get.omit_stages.iter().collect::<Vec<_>>(),
            [Stage::ResponseStarted, Stage::Panic]
        );
        assert!(!get.omit_managed_fields);
        let post = policy.evaluate(&non_resource(&u, "post", "/x"));
        assert_eq!(post.level, Level::RequestResponse);
        assert_eq!(post.omit_stages.iter().collect::<Vec<_>>(), [Stage::Panic]);
        assert!(post.omit_managed_fields);

        let none = Policy {
            rules: vec![PolicyRule {
                verbs: vec!["delete".into()],
                ..PolicyRule::at(Level::Metadata)
            }],
            ..policy
        };
        let unmatched = none.evaluate(&non_resource(&u, "get", "/x"));
        assert_eq!(unmatched.level, Level::None);
        assert_eq!(
            unmatched.omit_stages.iter().collect::<Vec<_>>(),
            [Stage::Panic]
        );
    }

    fn error_of(yaml: &str) -> String {
        Policy::parse(yaml.as_bytes())
            .expect_err("the policy must be refused")
            .to_string()
    }

    #[test]
    fn bad_levels_and_stages_are_named() {
        let head = "apiVersion: audit.k8s.io/v1\nkind: Policy\n";
        assert_eq!(
            error_of(&format!("{head}rules:\n- level: Everything\n")),
            "rules[0].level: Unsupported value: \"Everything\": supported values: \"None\", \
             \"Metadata\", \"Request\", \"RequestResponse\""
        );
        assert_eq!(
            error_of(&format!("{head}rules:\n- verbs: [get]\n")),
            "rules[0].level: Required value"
        );
        assert_eq!(
            error_of(&format!(
                "{head}rules:\n- level: None\n  omitStages: [Done]\n"
            )),
            "rules[0].omitStages[0]: Invalid value: \"Done\": allowed stages are \
             RequestReceived,ResponseStarted,ResponseComplete,Panic"
        );
        assert_eq!(
            error_of(&format!(
                "{head}omitStages: [Later]\nrules:\n- level: None\n"
            )),
            "omitStages[0]: Invalid value: \"Later\": allowed stages are \
             RequestReceived,ResponseStarted,ResponseComplete,Panic"
        );
    }

    #[test]
    fn validation_errors_are_upstreams() {
        let head = "apiVersion: audit.k8s.io/v1\nkind: Policy\n";
        assert_eq!(
            error_of(&format!(
                "{head}rules:\n- level: None\n  nonResourceURLs: [healthz, /a*b]\n"
            )),
            "[rules[0].nonResourceURLs[0]: Invalid value: \"healthz\": non-resource URL rules \
             must begin with a '/' character, rules[0].nonResourceURLs[1]: Invalid value: \
             \"/a*b\": non-resource URL wildcards '*' must be the final character of the rule]"
        );
        assert_eq!(
            error_of(&format!(
                "{head}rules:\n- level: None\n  nonResourceURLs: [/x]\n  namespaces: [a]\n"
            )),
            "rules[0].nonResourceURLs: Invalid value: [\"/x\"]: rules cannot apply to both \
             regular resources and non-resource URLs"
        );
        assert_eq!(
            error_of(&format!(
                "{head}rules:\n- level: None\n  resources:\n  - group: apps\n    resourceNames: [x]\n"
            )),
            "rules[0].resources.resourceNames: Invalid value: [\"x\"]: using resourceNames \
             requires at least one resource"
        );
        assert!(
            error_of(&format!(
                "{head}rules:\n- level: None\n  resources:\n  - group: rbac.authorization.k8s.io/v1\n"
            ))
            .starts_with(
                "rules[0].resources.group: Invalid value: \"rbac.authorization.k8s.io/v1\": \
                 a lowercase RFC 1123 subdomain"
            )
        );
        assert_eq!(
            error_of(&format!("{head}rules: []\n")),
            "loaded illegal policy with 0 rules"
        );
        // Every problem at once, in upstream's order.
        assert_eq!(
            error_of(&format!(
                "{head}omitStages: [Later]\nrules:\n- level: None\n- omitStages: [Never]\n  \
                 nonResourceURLs: [x]\n"
            )),
            "[omitStages[0]: Invalid value: \"Later\": allowed stages are \
             RequestReceived,ResponseStarted,ResponseComplete,Panic, rules[1].level: Required \
             value, rules[1].nonResourceURLs[0]: Invalid value: \"x\": non-resource URL rules \
             must begin with a '/' character, rules[1].omitStages[0]: Invalid value: \"Never\": \
             allowed stages are RequestReceived,ResponseStarted,ResponseComplete,Panic]"
        );
    }

    #[test]
    fn wrong_documents_are_decode_errors() {
        assert_eq!(
            error_of("apiVersion: audit.k8s.io/v1beta1\nkind: Policy\nrules: [{level: None}]\n"),
            "failed decoding: no kind \"Policy\" is registered for version \
             \"audit.k8s.io/v1beta1\": an audit policy is apiVersion \"audit.k8s.io/v1\", kind \
             \"Policy\""
        );
        assert_eq!(
            error_of("apiVersion: audit.k8s.io/v1\nrules: [{level: None}]\n"),
            "failed decoding: Object 'Kind' is missing in the policy"
        );
        assert_eq!(
            error_of(
                "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: None, users: bob}]\n"
            ),
            "failed decoding: rules[0].users: expected a list, got a string"
        );
        assert!(error_of("rules: [").starts_with("failed decoding: "));
    }

    #[test]
    fn unknown_and_repeated_fields_warn_or_fail_strictly() {
        let yaml = "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n  \
                    resources:\n  - group: \"\"\n    resource: [pods]\n  lvl: None\n";
        let parsed = Policy::parse(yaml.as_bytes()).expect("lenient decoding succeeds");
        assert_eq!(
            parsed.warnings,
            [
                "Audit policy contains errors, falling back to lenient decoding: strict decoding \
              error: unknown field \"rules[0].lvl\", unknown field \
              \"rules[0].resources[0].resource\""
            ]
        );
        // Leniently, the misspelt field is ignored: the rule covers the whole core group.
        assert!(parsed.policy.rules[0].resources[0].resources.is_empty());
        let strict = Policy::parse_strict(yaml.as_bytes()).expect_err("strict refuses");
        assert!(matches!(strict, PolicyError::Strict(_)));
        assert!(
            strict
                .to_string()
                .contains("unknown field \"rules[0].lvl\"")
        );

        let repeated = "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: None\n  \
                        level: Metadata\n";
        let parsed = Policy::parse(repeated.as_bytes()).expect("lenient decoding succeeds");
        assert_eq!(parsed.warnings.len(), 1);
        assert!(parsed.warnings[0].contains("strict decoding error"));
        assert_eq!(parsed.policy.rules[0].level, Level::Metadata);
        assert!(Policy::parse_strict(repeated.as_bytes()).is_err());
    }

    #[test]
    fn load_names_the_file() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("policy.yaml");
        std::fs::write(
            &path,
            "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: []\n",
        )
        .expect("write");
        let err = Policy::load(&path).expect_err("no rules");
        assert_eq!(
            err.to_string(),
            format!(
                "loaded illegal policy with 0 rules: from file {}",
                path.display()
            )
        );
        let missing = Policy::load(&dir.path().join("nope.yaml")).expect_err("missing");
        assert!(missing.to_string().starts_with("failed to read file path"));
    }
}
