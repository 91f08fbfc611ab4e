//! A generated set of CustomResourceDefinitions (the CRD-scale benchmark's, and the test that
//! serves a few hundred of them): CustomResourceDefinitions shaped like those of a
//! cloud provider's Crossplane provider (or Azure Service Operator), deterministic from a seed.
//!
//! What makes real provider CRDs large, and what is reproduced here:
//! - each CRD's parameters appear three times per version (`spec.forProvider`,
//!   `spec.initProvider`, `status.atProvider`), and there are two versions (`v1alpha1` served
//!   only, `v1beta1` served and stored, conversion `None`) with the same schema;
//! - parameters are nested objects, arrays of objects, maps (`additionalProperties`), string
//!   lists, enums, formats, a few defaults and a few `x-kubernetes-preserve-unknown-fields`
//!   objects, most with a long `description`, and references to other resources come with a
//!   `...Ref` and a `...Selector` object;
//! - Crossplane's fixed fields: `deletionPolicy`, `managementPolicies`, `providerConfigRef`,
//!   `publishConnectionDetailsTo`, `writeConnectionSecretToRef`, `status.conditions` (a list
//!   map keyed by `type`), the READY, SYNCED, EXTERNAL-NAME and AGE printer columns, the
//!   `status` subresource, the categories `crossplane`, `managed` and the provider's;
//! - a fraction of the CRDs carry `x-kubernetes-validations` rules as upjet generates them
//!   (a required parameter unless the management policies say the resource is only observed),
//!   plus a size bound on a map, a bound on an integer and an immutable field.
//!
//! The size of each CRD (as YAML, the form the published distributions count) is drawn from a
//! log-normal distribution with the median and 90th percentile of a real provider's set (27 KB
//! and 94 KB), and one CRD in a thousand is an outlier of up to 1.6 MB, as the largest real
//! ones are; the parameters of each CRD are then generated to fill that size.

use std::collections::BTreeSet;

use bytes::Bytes;
use serde_json::{Map, Value, json};

/// The API group suffix every generated group ends with.
pub const DOMAIN: &str = "bench.genplane.io";
/// The provider's name: the middle label of every group, and a category of every CRD.
pub const PROVIDER: &str = "acme";
/// The served-only version.
pub const OLD_VERSION: &str = "v1alpha1";
/// The served and stored version.
pub const VERSION: &str = "v1beta1";

/// The median CRD size (YAML bytes) of a real provider's set.
pub const REAL_MEDIAN: usize = 27_000;
/// The 90th percentile.
pub const REAL_P90: usize = 94_000;
/// The largest.
pub const REAL_MAX: usize = 1_600_000;

/// splitmix64: a tiny, good-enough generator, so that the set depends on the seed alone.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator that follows from `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next number.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`.
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `[low, high]`.
    fn range(&mut self, low: usize, high: usize) -> usize {
        low + (self.next_u64() % (high - low + 1) as u64) as usize
    }

    fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    /// A standard normal deviate (Box-Muller).
    fn normal(&mut self) -> f64 {
        let u = 1.0 - self.unit();
        let v = self.unit();
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.range(0, items.len() - 1)]
    }

    fn word(&mut self, words: &[&'static str]) -> &'static str {
        words[self.range(0, words.len() - 1)]
    }
}

/// Words the service (group) names are made of.
const SERVICES: &[&str] = &[
    "compute",
    "network",
    "storage",
    "database",
    "identity",
    "monitor",
    "dns",
    "cache",
    "queue",
    "container",
    "keyvault",
    "cdn",
    "analytics",
    "search",
    "eventing",
    "logging",
    "backup",
    "firewall",
    "gateway",
    "registry",
    "streaming",
    "workflow",
    "ml",
    "iot",
    "secrets",
    "certificates",
    "directory",
    "mail",
    "media",
    "billing",
    "policy",
    "resources",
    "web",
    "functions",
    "kubernetes",
    "datalake",
    "warehouse",
    "bastion",
    "vpn",
    "loadbalancer",
];

/// Words kinds and field names are made of.
const NOUNS: &[&str] = &[
    "access",
    "account",
    "action",
    "address",
    "alarm",
    "alias",
    "api",
    "app",
    "attachment",
    "backend",
    "bucket",
    "cache",
    "capacity",
    "certificate",
    "channel",
    "cluster",
    "config",
    "connection",
    "consumer",
    "container",
    "credential",
    "dashboard",
    "delivery",
    "deployment",
    "destination",
    "disk",
    "domain",
    "endpoint",
    "engine",
    "environment",
    "event",
    "filter",
    "flow",
    "gateway",
    "group",
    "health",
    "host",
    "identity",
    "image",
    "instance",
    "integration",
    "key",
    "label",
    "layer",
    "link",
    "listener",
    "log",
    "member",
    "metric",
    "mount",
    "network",
    "node",
    "notification",
    "option",
    "origin",
    "parameter",
    "peering",
    "permission",
    "pipeline",
    "plan",
    "policy",
    "pool",
    "port",
    "principal",
    "profile",
    "queue",
    "record",
    "region",
    "replica",
    "repository",
    "resource",
    "role",
    "route",
    "rule",
    "schedule",
    "schema",
    "secret",
    "segment",
    "server",
    "service",
    "setting",
    "share",
    "snapshot",
    "source",
    "stage",
    "subnet",
    "subscription",
    "table",
    "tag",
    "target",
    "task",
    "template",
    "tier",
    "token",
    "topic",
    "trigger",
    "user",
    "vault",
    "version",
    "volume",
    "workspace",
    "zone",
];

/// Words descriptions are made of.
const WORDS: &[&str] = &[
    "the",
    "of",
    "to",
    "a",
    "is",
    "in",
    "for",
    "this",
    "that",
    "be",
    "resource",
    "value",
    "when",
    "if",
    "which",
    "set",
    "specified",
    "name",
    "configuration",
    "block",
    "as",
    "documented",
    "below",
    "changing",
    "forces",
    "new",
    "created",
    "must",
    "identifier",
    "unique",
    "within",
    "used",
    "by",
    "default",
    "enabled",
    "whether",
    "should",
    "the",
    "possible",
    "values",
    "are",
    "and",
    "or",
    "not",
    "can",
    "only",
    "one",
    "more",
    "than",
    "between",
    "characters",
    "length",
    "maximum",
    "minimum",
    "number",
    "of",
    "seconds",
    "period",
    "after",
    "before",
    "update",
    "delete",
    "reference",
    "selector",
    "populate",
    "select",
    "labels",
    "matching",
    "controller",
    "policies",
    "resolution",
    "required",
    "optional",
    "attribute",
    "returned",
    "provider",
    "region",
    "zone",
    "network",
    "address",
    "list",
    "map",
    "key",
    "pairs",
    "assign",
    "tags",
    "an",
    "existing",
    "instance",
    "account",
    "service",
    "endpoint",
    "certificate",
    "encryption",
    "storage",
    "type",
    "mode",
    "state",
];

/// The formats string fields carry, and a value valid for each.
const FORMATS: &[(&str, &str)] = &[
    ("date-time", "2024-05-01T10:00:00Z"),
    ("byte", "c2FtcGxl"),
    ("password", "sample-secret"),
    ("uri", "https://example.com/path"),
];

/// A description of `low` to `high` words (plus an occasional long tail).
fn sentence(rng: &mut Rng, low: usize, high: usize) -> String {
    let mut words = rng.range(low, high);
    if rng.chance(0.1) {
        words *= 3;
    }
    let mut text = String::with_capacity(words * 8);
    for i in 0..words {
        let word = rng.word(WORDS);
        if i > 0 {
            text.push(' ');
        }
        // Sentences of twelve words.
        if i % 12 == 0 {
            text.push_str(&capitalized(word));
        } else {
            text.push_str(word);
        }
        if i + 1 < words && i % 12 == 11 {
            text.push('.');
        }
    }
    text.push('.');
    text
}

fn capitalized(word: &str) -> String {
    let mut chars = word.chars();
    chars.next().map_or_else(String::new, |first| {
        first.to_uppercase().chain(chars).collect::<String>()
    })
}

/// A camelCase name of one to three nouns.
fn field_name(rng: &mut Rng) -> String {
    let words = rng.range(1, 3);
    let mut name = rng.word(NOUNS).to_owned();
    for _ in 1..words {
        name.push_str(&capitalized(rng.word(NOUNS)));
    }
    name
}

/// The English plural of a lower-case kind, as CRD authors write it.
fn plural(lower: &str) -> String {
    if lower.ends_with('s')
        || lower.ends_with('x')
        || lower.ends_with("sh")
        || lower.ends_with("ch")
    {
        format!("{lower}es")
    } else if let Some(stem) = lower.strip_suffix('y')
        && !stem.ends_with(['a', 'e', 'i', 'o', 'u'])
    {
        format!("{stem}ies")
    } else {
        format!("{lower}s")
    }
}

/// One generated CRD: its names, what a valid object of it needs, and its body.
#[derive(Debug)]
pub struct GeneratedCrd {
    /// `<plural>.<group>`.
    pub name: String,
    /// Its API group.
    pub group: String,
    /// Its resource.
    pub plural: String,
    /// Its kind.
    pub kind: String,
    /// Whether its objects are namespaced.
    pub namespaced: bool,
    /// Whether it carries `x-kubernetes-validations` rules.
    pub cel: bool,
    /// A valid `spec.forProvider` of an object of this kind (its required parameters and a few
    /// others).
    pub for_provider: Value,
    /// The CRD as posted (JSON).
    pub body: Bytes,
    /// Its size as YAML printed by kubectl (see [`yaml_len`]).
    pub yaml_bytes: usize,
}

/// What the set is asked to be.
#[derive(Clone, Copy, Debug)]
pub struct SetOptions {
    /// How many CRDs.
    pub count: usize,
    /// The seed the whole set follows from.
    pub seed: u64,
    /// The fraction of CRDs with CEL rules.
    pub cel_fraction: f64,
    /// The fraction of namespaced CRDs.
    pub namespaced_fraction: f64,
}

/// One CRD's identity before its schema is generated.
#[derive(Clone, Debug)]
struct Plan {
    group: String,
    kind: String,
    plural: String,
    namespaced: bool,
    cel: bool,
    seed: u64,
    /// YAML bytes to aim for.
    target: usize,
}

/// Generates the set: groups of 20 to 40 kinds, sizes drawn from the real distribution.
pub fn generate(options: SetOptions) -> Vec<GeneratedCrd> {
    let mut rng = Rng::new(options.seed);
    let sigma = (REAL_P90 as f64 / REAL_MEDIAN as f64).ln() / 1.281_551_6;
    let mut plans = Vec::with_capacity(options.count);
    let mut service = 0;
    while plans.len() < options.count {
        let word = SERVICES[service % SERVICES.len()];
        let group = match service / SERVICES.len() {
            0 => format!("{word}.{PROVIDER}.{DOMAIN}"),
            n => format!("{word}{}.{PROVIDER}.{DOMAIN}", n + 1),
        };
        service += 1;
        let size = rng.range(20, 40).min(options.count - plans.len());
        let mut kinds = BTreeSet::new();
        while kinds.len() < size {
            let words = rng.range(1, 3);
            let kind: String = (0..words).map(|_| capitalized(rng.word(NOUNS))).collect();
            kinds.insert(kind);
        }
        // Shuffled out of alphabetical order, so that sizes and CEL do not follow names.
        let mut kinds: Vec<String> = kinds.into_iter().collect();
        for i in (1..kinds.len()).rev() {
            let j = rng.range(0, i);
            kinds.swap(i, j);
        }
        for kind in kinds {
            let target = (REAL_MEDIAN as f64 * (sigma * rng.normal()).exp()) as usize;
            plans.push(Plan {
                group: group.clone(),
                plural: plural(&kind.to_ascii_lowercase()),
                kind,
                namespaced: rng.chance(options.namespaced_fraction),
                cel: rng.chance(options.cel_fraction),
                seed: rng.next_u64(),
                // The log-normal's own tail stops well short of the real outliers.
                target: target.clamp(2_000, 900_000),
            });
        }
    }
    // One outlier a thousand CRDs, the largest as large as the largest real one.
    for k in 0..options.count / 1000 {
        let i = rng.range(0, plans.len() - 1);
        plans[i].target = REAL_MAX * 2 / (2 + k);
    }
    plans.iter().map(build).collect()
}

/// Generates `plan`'s CRD, its parameters sized so that its YAML comes close to the target.
fn build(plan: &Plan) -> GeneratedCrd {
    // The size grows about linearly with the parameters' budget, though not smoothly (the
    // shape drawn changes with it): measure the CRD without parameters and with a guess, aim
    // from the last attempt, and keep the closest of a few.
    let (base, base_sample) = definition(plan, 0);
    let base_len = yaml_len(&base);
    let (mut crd, mut for_provider, mut yaml_bytes) = (base, base_sample, base_len);
    if plan.target > base_len {
        let mut budget = (plan.target - base_len) / 8;
        for _ in 0..8 {
            let (attempt, sample) = definition(plan, budget);
            let len = yaml_len(&attempt);
            if len.abs_diff(plan.target) < yaml_bytes.abs_diff(plan.target) {
                (crd, for_provider, yaml_bytes) = (attempt, sample, len);
            }
            if yaml_bytes.abs_diff(plan.target) * 50 < plan.target || len <= base_len {
                break;
            }
            let per_byte = (len - base_len) as f64 / budget.max(1) as f64;
            budget = ((plan.target - base_len) as f64 / per_byte) as usize;
        }
    }
    GeneratedCrd {
        name: format!("{}.{}", plan.plural, plan.group),
        group: plan.group.clone(),
        plural: plan.plural.clone(),
        kind: plan.kind.clone(),
        namespaced: plan.namespaced,
        cel: plan.cel,
        for_provider,
        body: Bytes::from(crd.to_string()),
        yaml_bytes,
    }
}

/// A generated property schema and what generating it spent of the budget.
struct Property {
    schema: Value,
    cost: usize,
    /// A sample value, for a scalar that a sample object may set.
    sample: Option<Value>,
}

/// The parameters' generator.
struct Params {
    rng: Rng,
}

impl Params {
    fn describe(&mut self, schema: &mut Value) {
        if self.rng.chance(0.85) {
            schema["description"] = sentence(&mut self.rng, 6, 40).into();
        }
    }

    /// A scalar (or string list or map) property.
    fn leaf(&mut self) -> Property {
        let roll = self.rng.unit();
        let (mut schema, sample) = if roll < 0.45 {
            let mut s = json!({"type": "string"});
            if self.rng.chance(0.05) {
                s["maxLength"] = self.rng.range(64, 1024).into();
            }
            if self.rng.chance(0.03) {
                s["pattern"] = "^[a-zA-Z0-9._-]*$".into();
            }
            (s, Some(json!("sample-value")))
        } else if roll < 0.52 {
            let count = self.rng.range(2, 6);
            let values: Vec<String> = (0..count)
                .map(|i| format!("{}{i}", capitalized(self.rng.word(NOUNS))))
                .collect();
            let mut s = json!({"type": "string", "enum": values});
            if self.rng.chance(0.3) {
                s["default"] = values[0].clone().into();
            }
            (s, Some(Value::from(values[0].clone())))
        } else if roll < 0.57 {
            let (format, value) = *self.rng.pick(FORMATS);
            (
                json!({"type": "string", "format": format}),
                Some(json!(value)),
            )
        } else if roll < 0.67 {
            let mut s = json!({"type": "integer"});
            if self.rng.chance(0.5) {
                s["format"] = "int64".into();
            }
            if self.rng.chance(0.2) {
                s["minimum"] = 0.into();
                s["maximum"] = self.rng.range(100, 100_000).into();
            }
            if self.rng.chance(0.1) {
                s["default"] = 1.into();
            }
            (s, Some(json!(1)))
        } else if roll < 0.72 {
            let mut s = json!({"type": "number"});
            if self.rng.chance(0.3) {
                s["format"] = "double".into();
            }
            (s, Some(json!(1.5)))
        } else if roll < 0.82 {
            let mut s = json!({"type": "boolean"});
            if self.rng.chance(0.2) {
                s["default"] = false.into();
            }
            (s, Some(json!(true)))
        } else if roll < 0.90 {
            let mut items = json!({"type": "string"});
            self.describe(&mut items);
            let mut s = json!({"type": "array", "items": items});
            if self.rng.chance(0.1) {
                s["x-kubernetes-list-type"] = "set".into();
            }
            (s, None)
        } else if roll < 0.98 {
            (
                json!({"type": "object", "additionalProperties": {"type": "string"}}),
                None,
            )
        } else {
            (
                json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
                None,
            )
        };
        self.describe(&mut schema);
        Property {
            cost: schema.to_string().len(),
            schema,
            sample,
        }
    }

    /// The `...Ref` and `...Selector` objects beside a reference to another resource.
    fn reference(&mut self) -> (Value, Value) {
        let policy = json!({
            "description": sentence(&mut self.rng, 8, 14),
            "type": "object",
            "properties": {
                "resolution": {
                    "default": "Required",
                    "description": sentence(&mut self.rng, 20, 30),
                    "enum": ["Required", "Optional"],
                    "type": "string",
                },
                "resolve": {
                    "description": sentence(&mut self.rng, 20, 35),
                    "enum": ["Always", "IfNotPresent"],
                    "type": "string",
                },
            },
        });
        let reference = json!({
            "description": sentence(&mut self.rng, 6, 12),
            "type": "object",
            "properties": {
                "name": {"description": "Name of the referenced object.", "type": "string"},
                "policy": policy.clone(),
            },
            "required": ["name"],
        });
        let selector = json!({
            "description": sentence(&mut self.rng, 6, 12),
            "type": "object",
            "properties": {
                "matchControllerRef": {"description": sentence(&mut self.rng, 12, 20), "type": "boolean"},
                "matchLabels": {
                    "additionalProperties": {"type": "string"},
                    "description": sentence(&mut self.rng, 8, 12),
                    "type": "object",
                },
                "policy": policy,
            },
        });
        (reference, selector)
    }

    /// The properties of an object, generated until `budget` bytes (of JSON) are spent.
    /// Returns them, what they cost, and the samples of the scalar ones.
    fn properties(
        &mut self,
        budget: usize,
        depth: usize,
        first: Option<&str>,
    ) -> (Map<String, Value>, usize, Vec<(String, Value)>) {
        let mut properties = Map::new();
        let mut samples = Vec::new();
        let mut spent = 0;
        if let Some(first) = first {
            let mut schema = json!({"type": "string"});
            schema["description"] = sentence(&mut self.rng, 10, 30).into();
            spent += schema.to_string().len() + first.len();
            properties.insert(first.to_owned(), schema);
            samples.push((first.to_owned(), json!("sample-value")));
        }
        while spent < budget || properties.is_empty() {
            let mut name = field_name(&mut self.rng);
            while properties.contains_key(&name) {
                name.push_str(&capitalized(self.rng.word(NOUNS)));
            }
            let remaining = budget.saturating_sub(spent);
            let nested = depth < 5 && remaining > 1_500 && self.rng.chance(0.22);
            let property = if nested {
                let share = 0.05 + 0.3 * self.rng.unit();
                let sub = ((remaining as f64 * share) as usize).max(600);
                let (children, cost, _) = self.properties(sub, depth + 1, None);
                let object = json!({"type": "object", "properties": children});
                let mut schema = if self.rng.chance(0.5) {
                    let mut s = json!({"type": "array", "items": object});
                    if self.rng.chance(0.1) {
                        s["maxItems"] = self.rng.range(1, 64).into();
                    }
                    s
                } else {
                    object
                };
                self.describe(&mut schema);
                Property {
                    cost: cost + 60,
                    schema,
                    sample: None,
                }
            } else if depth <= 1 && self.rng.chance(0.08) {
                // A reference to another resource: an ID and its resolvers.
                name.push_str("Id");
                let mut schema = json!({"type": "string"});
                self.describe(&mut schema);
                let (reference, selector) = self.reference();
                let cost = schema.to_string().len()
                    + reference.to_string().len()
                    + selector.to_string().len();
                let stem = name.trim_end_matches("Id").to_owned();
                properties.insert(format!("{stem}Ref"), reference);
                properties.insert(format!("{stem}Selector"), selector);
                Property {
                    cost,
                    schema,
                    sample: None,
                }
            } else {
                self.leaf()
            };
            spent += property.cost + name.len() + 4;
            if let Some(sample) = property.sample {
                samples.push((name.clone(), sample));
            }
            properties.insert(name, property.schema);
        }
        (properties, spent, samples)
    }
}

/// A required parameter's upjet-style rule on `spec`.
fn required_rule(field: &str) -> Value {
    json!({
        "message": format!("spec.forProvider.{field} is a required parameter"),
        "rule": format!(
            "!('*' in self.managementPolicies || 'Create' in self.managementPolicies || \
             'Update' in self.managementPolicies) || has(self.forProvider.{field}) || \
             (has(self.initProvider) && has(self.initProvider.{field}))"
        ),
    })
}

/// The CRD of `plan` with parameters generated from `budget` bytes; and the sample
/// `spec.forProvider` of a valid object.
fn definition(plan: &Plan, budget: usize) -> (Value, Value) {
    let mut params = Params {
        rng: Rng::new(plan.seed),
    };
    let (properties, _, samples) = params.properties(budget, 0, Some("region"));
    let rng = &mut params.rng;

    // The parameters a valid object sets: the required ones (the first is always `region`),
    // and a few scalars.
    let mut required = vec!["region".to_owned()];
    for (name, sample) in &samples[1..] {
        if required.len() < 3 && sample.is_string() && rng.chance(0.2) {
            required.push(name.clone());
        }
    }
    let mut for_provider = Map::new();
    for (name, sample) in &samples {
        if required.contains(name) || for_provider.len() < 6 {
            for_provider.insert(name.clone(), sample.clone());
        }
    }

    let mut for_provider_schema = json!({"type": "object", "properties": properties.clone()});
    let init_provider_schema = json!({
        "description": sentence(rng, 13, 20),
        "type": "object",
        "properties": properties.clone(),
    });
    let mut at_provider = properties;
    at_provider.insert(
        "id".to_owned(),
        json!({"description": "The ID of this resource.", "type": "string"}),
    );
    let mut spec_rules = Vec::new();
    if plan.cel {
        for field in &required {
            spec_rules.push(required_rule(field));
        }
        if let Some((field, _)) = samples.iter().find(|(_, s)| s.is_i64()) {
            spec_rules.push(json!({
                "message": format!("spec.forProvider.{field} must be at most 100000"),
                "rule": format!("!has(self.forProvider.{field}) || self.forProvider.{field} <= 100000"),
            }));
        }
        let fields = for_provider_schema["properties"]
            .as_object_mut()
            .map(|p| p.iter_mut().collect::<Vec<_>>())
            .unwrap_or_default();
        let mut map_rule = None;
        for (name, schema) in fields {
            if map_rule.is_none() && schema.get("additionalProperties").is_some() {
                map_rule = Some(json!({
                    "message": format!("{name} holds at most 64 entries"),
                    "rule": format!("!has(self.{name}) || self.{name}.size() <= 64"),
                }));
            }
            if name.as_str() == "region" {
                schema["x-kubernetes-validations"] =
                    json!([{"message": "region is immutable", "rule": "self == oldSelf"}]);
            }
        }
        if let Some(rule) = map_rule {
            for_provider_schema["x-kubernetes-validations"] = json!([rule]);
        }
    } else {
        for_provider_schema["required"] = json!(required);
    }
    for_provider_schema["description"] = sentence(rng, 3, 6).into();

    let conditions = json!({
        "description": "Conditions of the resource.",
        "type": "array",
        "items": {
            "description": sentence(rng, 3, 5),
            "type": "object",
            "properties": {
                "lastTransitionTime": {"description": sentence(rng, 3, 5), "format": "date-time", "type": "string"},
                "message": {"description": sentence(rng, 4, 6), "type": "string"},
                "observedGeneration": {"description": sentence(rng, 6, 10), "format": "int64", "type": "integer"},
                "reason": {"description": sentence(rng, 3, 4), "type": "string"},
                "status": {"description": sentence(rng, 3, 4), "type": "string"},
                "type": {"description": sentence(rng, 3, 4), "type": "string"},
            },
            "required": ["lastTransitionTime", "reason", "status", "type"],
        },
        "x-kubernetes-list-map-keys": ["type"],
        "x-kubernetes-list-type": "map",
    });
    let policy = json!({
        "description": sentence(rng, 3, 4),
        "type": "object",
        "properties": {
            "resolution": {"default": "Required", "description": sentence(rng, 6, 10), "enum": ["Required", "Optional"], "type": "string"},
            "resolve": {"description": sentence(rng, 6, 11), "enum": ["Always", "IfNotPresent"], "type": "string"},
        },
    });
    let mut spec = json!({
        "description": format!("{}Spec defines the desired state of {}", plan.kind, plan.kind),
        "type": "object",
        "properties": {
            "deletionPolicy": {
                "default": "Delete",
                "description": sentence(rng, 10, 16),
                "enum": ["Orphan", "Delete"],
                "type": "string",
            },
            "forProvider": for_provider_schema,
            "initProvider": init_provider_schema,
            "managementPolicies": {
                "default": ["*"],
                "description": sentence(rng, 13, 20),
                "items": {
                    "description": sentence(rng, 6, 10),
                    "enum": ["Observe", "Create", "Update", "Delete", "LateInitialize", "*"],
                    "type": "string",
                },
                "type": "array",
            },
            "providerConfigRef": {
                "default": {"name": "default"},
                "description": sentence(rng, 4, 6),
                "type": "object",
                "properties": {
                    "name": {"description": "Name of the referenced object.", "type": "string"},
                    "policy": policy.clone(),
                },
                "required": ["name"],
            },
            "publishConnectionDetailsTo": {
                "description": sentence(rng, 10, 13),
                "type": "object",
                "properties": {
                    "configRef": {
                        "default": {"name": "default"},
                        "description": sentence(rng, 4, 6),
                        "type": "object",
                        "properties": {
                            "name": {"description": "Name of the referenced object.", "type": "string"},
                            "policy": policy,
                        },
                        "required": ["name"],
                    },
                    "metadata": {
                        "description": sentence(rng, 3, 4),
                        "type": "object",
                        "properties": {
                            "annotations": {"additionalProperties": {"type": "string"}, "description": sentence(rng, 6, 10), "type": "object"},
                            "labels": {"additionalProperties": {"type": "string"}, "description": sentence(rng, 6, 10), "type": "object"},
                            "type": {"description": sentence(rng, 3, 4), "type": "string"},
                        },
                    },
                    "name": {"description": sentence(rng, 3, 4), "type": "string"},
                },
                "required": ["name"],
            },
            "writeConnectionSecretToRef": {
                "description": sentence(rng, 10, 13),
                "type": "object",
                "properties": {
                    "name": {"description": "Name of the secret.", "type": "string"},
                    "namespace": {"description": "Namespace of the secret.", "type": "string"},
                },
                "required": ["name", "namespace"],
            },
        },
        "required": ["forProvider"],
    });
    if !spec_rules.is_empty() {
        spec["x-kubernetes-validations"] = Value::Array(spec_rules);
    }
    let schema = json!({
        "description": format!("{} is the Schema for the {} API. {}", plan.kind, plan.plural, sentence(rng, 3, 5)),
        "type": "object",
        "properties": {
            "apiVersion": {"description": sentence(rng, 10, 13), "type": "string"},
            "kind": {"description": sentence(rng, 10, 13), "type": "string"},
            "metadata": {"type": "object"},
            "spec": spec,
            "status": {
                "description": format!("{}Status defines the observed state of {}.", plan.kind, plan.kind),
                "type": "object",
                "properties": {
                    "atProvider": {"type": "object", "properties": at_provider},
                    "conditions": conditions,
                    "observedGeneration": {"description": sentence(rng, 6, 10), "format": "int64", "type": "integer"},
                },
            },
        },
        "required": ["spec"],
    });
    let columns = json!([
        {"jsonPath": ".status.conditions[?(@.type=='Ready')].status", "name": "READY", "type": "string"},
        {"jsonPath": ".status.conditions[?(@.type=='Synced')].status", "name": "SYNCED", "type": "string"},
        {"jsonPath": ".metadata.annotations.crossplane\\.io/external-name", "name": "EXTERNAL-NAME", "type": "string"},
        {"jsonPath": ".metadata.creationTimestamp", "name": "AGE", "type": "date"},
    ]);
    let versions: Vec<Value> = [OLD_VERSION, VERSION]
        .iter()
        .map(|version| {
            json!({
                "name": version,
                "served": true,
                "storage": *version == VERSION,
                "additionalPrinterColumns": columns,
                "schema": {"openAPIV3Schema": schema},
                "subresources": {"status": {}},
            })
        })
        .collect();
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": format!("{}.{}", plan.plural, plan.group),
            "annotations": {"bench.genplane.io/generated": "crd-scale"},
        },
        "spec": {
            "group": plan.group,
            "names": {
                "categories": ["crossplane", "managed", PROVIDER],
                "kind": plan.kind,
                "listKind": format!("{}List", plan.kind),
                "plural": plan.plural,
                "singular": plan.kind.to_ascii_lowercase(),
            },
            "scope": if plan.namespaced { "Namespaced" } else { "Cluster" },
            "versions": versions,
            "conversion": {"strategy": "None"},
        },
    });
    (crd, Value::Object(for_provider))
}

/// The length of `value` printed as YAML the way kubectl prints it (go-yaml through
/// sigs.k8s.io/yaml: block style, two-space indentation, sequences at their key's indentation,
/// single quotes where a plain scalar would be misread, long plain scalars folded at spaces
/// past column 80). An estimate of the size of the CRD's YAML file, which is what the
/// published distributions of real CRD sets count.
pub fn yaml_len(value: &Value) -> usize {
    match value {
        Value::Object(map) => entries_len(map, 0, 0),
        other => scalar_len(other, 0, 0),
    }
}

/// A mapping's entries at `indent`, the first starting at column `first` (after a "- ").
fn entries_len(map: &Map<String, Value>, indent: usize, first: usize) -> usize {
    let mut len = 0;
    for (i, (key, value)) in map.iter().enumerate() {
        let column = if i == 0 { first } else { indent };
        len += if i == 0 { 0 } else { indent };
        let key_len = scalar_len(&Value::String(key.clone()), column, indent);
        len += key_len + 1 + after_key_len(value, indent, column + key_len + 1);
    }
    len
}

/// What follows `key:` at `indent`, the colon ending at `column`.
fn after_key_len(value: &Value, indent: usize, column: usize) -> usize {
    match value {
        Value::Object(map) if map.is_empty() => 4,
        Value::Array(items) if items.is_empty() => 4,
        Value::Object(map) => 1 + entries_len(map, indent + 2, indent + 2) + indent + 2,
        Value::Array(items) => 1 + items_len(items, indent),
        scalar => 2 + scalar_len(scalar, column + 1, indent + 2),
    }
}

/// A sequence's items at `indent`.
fn items_len(items: &[Value], indent: usize) -> usize {
    items
        .iter()
        .map(|item| {
            indent
                + 2
                + match item {
                    Value::Object(map) if map.is_empty() => 3,
                    Value::Array(items) if items.is_empty() => 3,
                    Value::Object(map) => entries_len(map, indent + 2, indent + 2),
                    Value::Array(items) => items_len(items, indent + 2) - (indent + 2),
                    scalar => scalar_len(scalar, indent + 2, indent + 2) + 1,
                }
        })
        .sum()
}

/// A scalar's length starting at `column`, continuation lines at `indent`.
fn scalar_len(value: &Value, column: usize, indent: usize) -> usize {
    let text = match value {
        Value::String(s) => s,
        Value::Null => return 4,
        other => return other.to_string().len(),
    };
    let quoted = text.is_empty()
        || matches!(
            text.as_str(),
            "true" | "false" | "null" | "~" | "yes" | "no" | "on" | "off" | "y" | "n"
        )
        || text.parse::<f64>().is_ok()
        || text.starts_with([
            '-', '?', ':', ',', '[', ']', '{', '}', '#', '&', '*', '!', '|', '>', '\'', '"', '%',
            '@', '`', ' ',
        ])
        || text.ends_with([' ', ':'])
        || text.contains(": ")
        || text.contains(" #");
    let mut len = text.len() + if quoted { 2 } else { 0 };
    // Folding: past column 80, a space becomes a line break and the next line's indentation.
    let mut at = column;
    for (i, word) in text.split(' ').enumerate() {
        if i > 0 && at > 80 {
            len += indent;
            at = indent + word.len();
        } else {
            at += word.len() + usize::from(i > 0);
        }
    }
    len
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_sized() {
        let options = SetOptions {
            count: 60,
            seed: 7,
            cel_fraction: 0.5,
            namespaced_fraction: 0.3,
        };
        let a = generate(options);
        let b = generate(options);
        assert_eq!(a.len(), 60);
        for (x, y) in a.iter().zip(&b) {
            assert_eq!(x.body, y.body);
        }
        let names: BTreeSet<&str> = a.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names.len(), 60, "names are unique");
        assert!(a.iter().any(|c| c.cel) && a.iter().any(|c| !c.cel));
    }

    #[test]
    fn yaml_estimate() {
        let value = json!({"a": {"b": [1, {"c": "d", "e": ""}], "f": {}}, "g": "x: y"});
        // a:\n  b:\n  - 1\n  - c: d\n    e: ''\n  f: {}\ng: 'x: y'\n
        assert_eq!(
            yaml_len(&value),
            "a:\n  b:\n  - 1\n  - c: d\n    e: ''\n  f: {}\ng: 'x: y'\n".len()
        );
    }

    #[test]
    fn plurals() {
        assert_eq!(plural("policy"), "policies");
        assert_eq!(plural("address"), "addresses");
        assert_eq!(plural("key"), "keys");
        assert_eq!(plural("subnet"), "subnets");
    }
}
