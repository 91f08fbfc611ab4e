//! The `--encryption-provider-config` file: kube-apiserver's `EncryptionConfiguration`
//! (`apiserver.config.k8s.io/v1`), in YAML or JSON, validated as upstream validates it.
//!
//! ```yaml
//! apiVersion: apiserver.config.k8s.io/v1
//! kind: EncryptionConfiguration
//! resources:
//!   - resources: [secrets, configmaps]
//!     providers:
//!       - aesgcm:
//!           keys:
//!             - name: key1
//!               secret: c2VjcmV0IGlzIHNlY3VyZSwgaXMgaXQ/  # base64 of 16, 24 or 32 bytes
//!       - identity: {}
//! ```
//!
//! Resources are named `<resource>` (core group), `<resource>.<group>`, `*.<group>` (every
//! resource of a group; `*.` for the core group) or `*.*` (everything). A resource takes the
//! providers of its exact entry, else of its group's wildcard, else of `*.*`; a resource listed
//! in several entries gets the providers of each, in order. An entry may not list a resource an
//! earlier wildcard already covers (it would be masked). `kms` providers are refused: genplane
//! does not talk to KMS plugins.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::sync::Arc;

use base64::Engine as _;
use genplane_apimachinery::validation::field::{self, ErrorList, Path as FieldPath};
use serde::Deserialize;

use crate::transformer::Transformer;

/// The one API version of the file.
pub const API_VERSION: &str = "apiserver.config.k8s.io/v1";
/// The kind of the file.
pub const KIND: &str = "EncryptionConfiguration";

const AES_KEY_SIZES: &[usize] = &[16, 24, 32];
const SECRETBOX_KEY_SIZES: &[usize] = &[32];

/// Why a configuration file was refused. Messages follow kube-apiserver's.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read.
    #[error("error reading encryption provider configuration file {path:?}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The file is empty.
    #[error("encryption provider configuration file {path:?} is empty")]
    Empty {
        /// The file.
        path: String,
    },
    /// The file is not an `EncryptionConfiguration` in YAML or JSON.
    #[error("error decoding encryption provider configuration file {path:?}: {message}")]
    Decode {
        /// The file.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// The configuration breaks validation rules; every problem is listed.
    #[error("{0}")]
    Invalid(ErrorList),
    /// A resource is listed after a wildcard of an earlier entry that already covers it.
    #[error("resource {resource:?} is masked by earlier rule {rule:?}")]
    Masked {
        /// The resource as written.
        resource: String,
        /// The earlier wildcard.
        rule: String,
    },
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct File {
    api_version: Option<String>,
    kind: Option<String>,
    #[serde(default)]
    resources: Option<Vec<ResourceConfiguration>>,
}

#[derive(Deserialize)]
struct ResourceConfiguration {
    #[serde(default)]
    resources: Option<Vec<String>>,
    #[serde(default)]
    providers: Option<Vec<ProviderConfiguration>>,
}

#[derive(Deserialize)]
struct ProviderConfiguration {
    aesgcm: Option<KeysConfiguration>,
    aescbc: Option<KeysConfiguration>,
    secretbox: Option<KeysConfiguration>,
    identity: Option<serde_json::Value>,
    kms: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct KeysConfiguration {
    #[serde(default)]
    keys: Option<Vec<Key>>,
}

#[derive(Deserialize)]
struct Key {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    secret: Option<String>,
}

/// A group and resource as the file names them (`secrets` is `("", "secrets")`, `*.apps` is
/// `("apps", "*")`, `*.*` is `("*", "*")`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GroupResource {
    /// The API group; empty for the core group, `*` for any.
    pub group: String,
    /// The resource; `*` for any.
    pub resource: String,
}

impl GroupResource {
    /// Parses `resource.group` at the first dot, as upstream does.
    pub fn parse(text: &str) -> Self {
        match text.split_once('.') {
            Some((resource, group)) => Self {
                group: group.to_owned(),
                resource: resource.to_owned(),
            },
            None => Self {
                group: String::new(),
                resource: text.to_owned(),
            },
        }
    }

    fn new(group: &str, resource: &str) -> Self {
        Self {
            group: group.to_owned(),
            resource: resource.to_owned(),
        }
    }

    fn any() -> Self {
        Self::new("*", "*")
    }
}

impl fmt::Display for GroupResource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.group.as_str(), self.resource.as_str()) {
            ("", "*") => f.write_str("*."),
            ("", resource) => f.write_str(resource),
            (group, resource) => write!(f, "{resource}.{group}"),
        }
    }
}

/// A validated configuration: the transformer of every resource it names.
#[derive(Clone, Default)]
pub struct EncryptionConfig {
    transformers: BTreeMap<GroupResource, Arc<Transformer>>,
}

impl fmt::Debug for EncryptionConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Transformer's Debug shows provider and key names, never secrets.
        f.debug_map()
            .entries(self.transformers.iter().map(|(gr, t)| (gr.to_string(), t)))
            .finish()
    }
}

impl EncryptionConfig {
    /// Reads, parses and validates the file at `path`.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let shown = path.display().to_string();
        let data = std::fs::read(path).map_err(|source| ConfigError::Read {
            path: shown.clone(),
            source,
        })?;
        Self::parse(&data, &shown)
    }

    /// Parses and validates the content of a file (`path` names it in messages).
    pub fn parse(data: &[u8], path: &str) -> Result<Self, ConfigError> {
        if data.is_empty() {
            return Err(ConfigError::Empty {
                path: path.to_owned(),
            });
        }
        let decode = |message: String| ConfigError::Decode {
            path: path.to_owned(),
            message,
        };
        let text = std::str::from_utf8(data).map_err(|e| decode(e.to_string()))?;
        let file: File = if text.trim_start().starts_with('{') {
            serde_json::from_str(text).map_err(|e| decode(e.to_string()))?
        } else {
            serde_saphyr::from_str(text).map_err(|e| decode(e.to_string()))?
        };
        let kind = file.kind.as_deref().unwrap_or_default();
        let version = file.api_version.as_deref().unwrap_or_default();
        if kind.is_empty() {
            return Err(decode("Object 'Kind' is missing".into()));
        }
        if version != API_VERSION || kind != KIND {
            return Err(decode(format!(
                "no kind {kind:?} is registered for version {version:?}"
            )));
        }
        let resources = file.resources.unwrap_or_default();
        validate(&resources)
            .into_result()
            .map_err(ConfigError::Invalid)?;
        build(&resources)
    }

    /// The transformer of a resource: its own entry's, else its group's wildcard's, else that
    /// of `*.*`; `None` when the file does not name it (values are stored as they are).
    pub fn transformer_for(&self, group: &str, resource: &str) -> Option<Arc<Transformer>> {
        [
            GroupResource::new(group, resource),
            GroupResource::new(group, "*"),
            GroupResource::any(),
        ]
        .iter()
        .find_map(|gr| self.transformers.get(gr).cloned())
    }

    /// Whether no resource is configured.
    pub fn is_empty(&self) -> bool {
        self.transformers.is_empty()
    }
}

/// The fuzz entry point of [`EncryptionConfig::parse`]: the input as an encryption
/// configuration file. Of a file that parses, the transformer of a few resources seals a
/// value and opens it again to the same bytes.
///
/// # Panics
///
/// When parsing panics, or a value does not survive the round trip.
pub fn exercise(data: &[u8]) {
    let Ok(config) = EncryptionConfig::parse(data, "fuzzed.yaml") else {
        return;
    };
    let value = genplane_storage::Bytes::from_static(b"{\"kind\":\"Secret\"}");
    for (group, resource) in [
        ("", "secrets"),
        ("", "configmaps"),
        ("example.com", "widgets"),
    ] {
        let Some(transformer) = config.transformer_for(group, resource) else {
            continue;
        };
        let key = format!("/registry/{resource}/default/x");
        let sealed = transformer.to_storage(&value, &key);
        let sealed = sealed.unwrap_or_else(|e| panic!("sealing {resource}: {e}"));
        let opened = transformer.from_storage(&sealed, &key);
        assert_eq!(opened.ok().as_ref(), Some(&value), "{resource}");
    }
}

fn validate(resources: &[ResourceConfiguration]) -> ErrorList {
    let root = FieldPath::new("resources");
    let mut errors = ErrorList::new();
    if resources.is_empty() {
        errors.push(field::Error::required(
            &root,
            format!("at least one {root} is required"),
        ));
        return errors;
    }
    for (i, entry) in resources.iter().enumerate() {
        let r = root.index(i).child("resources");
        let p = root.index(i).child("providers");
        let names = entry.resources.as_deref().unwrap_or_default();
        if names.is_empty() {
            errors.push(field::Error::required(
                &r,
                format!("at least one {r} is required"),
            ));
        }
        errors.extend(validate_overlap(names, &r));
        errors.extend(validate_names(names, &r));
        let providers = entry.providers.as_deref().unwrap_or_default();
        if providers.is_empty() {
            errors.push(field::Error::required(
                &p,
                format!("at least one {p} is required"),
            ));
        }
        for (j, provider) in providers.iter().enumerate() {
            errors.extend(validate_provider(provider, &p.index(j)));
        }
    }
    errors
}

fn validate_overlap(names: &[String], path: &FieldPath) -> ErrorList {
    let mut errors = ErrorList::new();
    if names.len() < 2 {
        return errors;
    }
    let parsed: Vec<GroupResource> = names.iter().map(|n| GroupResource::parse(n)).collect();
    let mut duplicate = false;
    let mut overlap = false;
    for (i, a) in parsed.iter().enumerate() {
        for (j, b) in parsed.iter().enumerate() {
            if i == j {
                continue;
            }
            if a == b {
                duplicate = true;
                continue;
            }
            if *a == GroupResource::any()
                || (a.group == b.group && (a.resource == "*" || b.resource == "*"))
            {
                overlap = true;
            }
        }
    }
    let value = serde_json::json!(names);
    if duplicate {
        errors.push(field::Error::invalid(
            path,
            value.clone(),
            "the same resource cannot be specified multiple times",
        ));
    }
    if overlap {
        errors.push(field::Error::invalid(
            path,
            value,
            "using overlapping resources such as 'secrets' and '*.' in the same resource list is not allowed as they will be masked",
        ));
    }
    errors
}

fn validate_names(names: &[String], path: &FieldPath) -> ErrorList {
    let mut errors = ErrorList::new();
    for (j, name) in names.iter().enumerate() {
        let gr = GroupResource::parse(name);
        let detail = if name.to_lowercase() != *name {
            "resource name should not contain capital letters"
        } else if name == "*" {
            "use '*.' to encrypt all the resources from core API group or *.* to encrypt all resources"
        } else if matches!(
            name.as_str(),
            "apiserveripinfo" | "serviceipallocations" | "servicenodeportallocations"
        ) {
            "resources which do not have REST API/s cannot be encrypted"
        } else if gr.group == "events.k8s.io" {
            "'*.events.k8s.io' objects are stored using the 'events' API group in etcd. Use 'events' instead in the config file"
        } else if gr.group == "extensions" {
            "'extensions' group has been removed and cannot be used for encryption"
        } else if gr.group == "*" && gr.resource != "*" {
            "encrypting the same resource across groups is not supported"
        } else {
            continue;
        };
        errors.push(field::Error::invalid(&path.index(j), name.as_str(), detail));
    }
    errors
}

fn validate_provider(provider: &ProviderConfiguration, path: &FieldPath) -> ErrorList {
    let mut errors = ErrorList::new();
    let found = [
        provider.kms.is_some(),
        provider.aesgcm.is_some(),
        provider.aescbc.is_some(),
        provider.secretbox.is_some(),
        provider.identity.is_some(),
    ]
    .into_iter()
    .filter(|&set| set)
    .count();
    if found == 0 {
        errors.push(field::Error::invalid(
            path,
            serde_json::json!({}),
            "provider does not contain any of the expected providers: KMS, AESGCM, AESCBC, Secretbox, Identity",
        ));
        return errors;
    }
    if found > 1 {
        errors.push(field::Error::invalid(
            path,
            serde_json::json!({}),
            "more than one provider specified in a single element, should split into different list elements",
        ));
        return errors;
    }
    if provider.kms.is_some() {
        errors.push(field::Error::forbidden(
            &path.child("kms"),
            "the kms provider is not supported by genplane: use aesgcm, aescbc or secretbox",
        ));
    } else if let Some(aes) = &provider.aesgcm {
        errors.extend(validate_keys(
            aes,
            &path.child("aesgcm").child("keys"),
            AES_KEY_SIZES,
        ));
    } else if let Some(aes) = &provider.aescbc {
        errors.extend(validate_keys(
            aes,
            &path.child("aescbc").child("keys"),
            AES_KEY_SIZES,
        ));
    } else if let Some(sb) = &provider.secretbox {
        errors.extend(validate_keys(
            sb,
            &path.child("secretbox").child("keys"),
            SECRETBOX_KEY_SIZES,
        ));
    }
    errors
}

fn validate_keys(config: &KeysConfiguration, path: &FieldPath, sizes: &[usize]) -> ErrorList {
    let mut errors = ErrorList::new();
    let keys = config.keys.as_deref().unwrap_or_default();
    if keys.is_empty() {
        errors.push(field::Error::required(
            path,
            "at least one keys is required",
        ));
        return errors;
    }
    for (i, key) in keys.iter().enumerate() {
        let path = path.index(i);
        if key.name.as_deref().unwrap_or_default().is_empty() {
            errors.push(field::Error::required(
                &path.child("name"),
                "name is a mandatory field for a key",
            ));
        }
        let secret = key.secret.as_deref().unwrap_or_default();
        if secret.is_empty() {
            errors.push(field::Error::required(
                &path.child("secret"),
                "secret is a mandatory field for a key",
            ));
            continue;
        }
        match decode_secret(secret) {
            Err(_) => errors.push(field::Error::invalid(
                &path.child("secret"),
                "REDACTED",
                "secrets must be base64 encoded",
            )),
            Ok(bytes) if !sizes.contains(&bytes.len()) => {
                let expected: Vec<String> = sizes.iter().map(ToString::to_string).collect();
                errors.push(field::Error::invalid(
                    &path.child("secret"),
                    "REDACTED",
                    format!(
                        "secret is not of the expected length, got {}, expected one of [{}]",
                        bytes.len(),
                        expected.join(" ")
                    ),
                ));
            }
            Ok(_) => {}
        }
    }
    errors
}

fn decode_secret(secret: &str) -> Result<Vec<u8>, base64::DecodeError> {
    base64::engine::general_purpose::STANDARD.decode(secret)
}

/// Builds the transformers of a validated configuration.
fn build(resources: &[ResourceConfiguration]) -> Result<EncryptionConfig, ConfigError> {
    let mut providers: BTreeMap<GroupResource, Vec<&ProviderConfiguration>> = BTreeMap::new();
    for entry in resources {
        let listed = entry.providers.as_deref().unwrap_or_default();
        for name in entry.resources.as_deref().unwrap_or_default() {
            let gr = GroupResource::parse(name);
            for rule in [GroupResource::new(&gr.group, "*"), GroupResource::any()] {
                if providers.contains_key(&rule) {
                    return Err(ConfigError::Masked {
                        resource: gr.to_string(),
                        rule: rule.to_string(),
                    });
                }
            }
            providers.entry(gr).or_default().extend(listed);
        }
    }
    let mut transformers = BTreeMap::new();
    for (gr, list) in providers {
        transformers.insert(gr, Arc::new(transformer(&list)));
    }
    Ok(EncryptionConfig { transformers })
}

/// The transformer of validated providers.
fn transformer(providers: &[&ProviderConfiguration]) -> Transformer {
    let mut t = Transformer::new();
    for provider in providers {
        let keys = |config: &KeysConfiguration| -> Vec<(String, Vec<u8>)> {
            config
                .keys
                .as_deref()
                .unwrap_or_default()
                .iter()
                .map(|k| {
                    (
                        k.name.clone().unwrap_or_default(),
                        decode_secret(k.secret.as_deref().unwrap_or_default()).unwrap_or_default(),
                    )
                })
                .collect()
        };
        t = if provider.identity.is_some() {
            t.with_identity()
        } else if let Some(c) = &provider.aesgcm {
            let keys = keys(c);
            t.with_aesgcm(keys.iter().map(|(n, s)| (n.as_str(), s.as_slice())))
                .expect("invariant: validated key sizes")
        } else if let Some(c) = &provider.aescbc {
            let keys = keys(c);
            t.with_aescbc(keys.iter().map(|(n, s)| (n.as_str(), s.as_slice())))
                .expect("invariant: validated key sizes")
        } else if let Some(c) = &provider.secretbox {
            let keys = keys(c);
            t.with_secretbox(keys.iter().map(|(n, s)| (n.as_str(), s.as_slice())))
                .expect("invariant: validated key sizes")
        } else {
            t
        };
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    // base64 of 16 and 32 bytes.
    const K16: &str = "MDEyMzQ1Njc4OWFiY2RlZg==";
    const K32: &str = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";

    fn parse(yaml: &str) -> Result<EncryptionConfig, ConfigError> {
        EncryptionConfig::parse(yaml.as_bytes(), "enc.yaml")
    }

    fn error(yaml: &str) -> String {
        parse(yaml).unwrap_err().to_string()
    }

    fn with_resources(resources: &str) -> String {
        format!(
            "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n{resources}"
        )
    }

    fn writes(config: &EncryptionConfig, group: &str, resource: &str) -> Option<String> {
        let t = config.transformer_for(group, resource)?;
        let stored = t.to_storage(&"{}".into(), "/k").unwrap();
        Some(String::from_utf8_lossy(&stored[..stored.len().min(30)]).into_owned())
    }

    #[test]
    fn yaml_and_json_give_the_same_configuration() {
        let yaml = with_resources(&format!(
            "  - resources: [secrets, configmaps]\n    providers:\n      - aesgcm:\n          keys:\n            - name: key1\n              secret: {K32}\n      - identity: {{}}\n"
        ));
        let json = format!(
            r#"{{"apiVersion":"apiserver.config.k8s.io/v1","kind":"EncryptionConfiguration","resources":[{{"resources":["secrets","configmaps"],"providers":[{{"aesgcm":{{"keys":[{{"name":"key1","secret":"{K32}"}}]}}}},{{"identity":{{}}}}]}}]}}"#
        );
        for text in [yaml, json] {
            let config = parse(&text).unwrap();
            for resource in ["secrets", "configmaps"] {
                assert!(
                    writes(&config, "", resource)
                        .unwrap()
                        .starts_with("k8s:enc:aesgcm:v1:key1:")
                );
            }
            assert_eq!(writes(&config, "", "namespaces"), None);
        }
    }

    #[test]
    fn wildcards_apply_exact_then_group_then_everything() {
        let config = parse(&with_resources(&format!(
            "  - resources: [secrets]\n    providers: [{{aesgcm: {{keys: [{{name: exact, secret: {K32}}}]}}}}]\n  - resources: ['*.apps']\n    providers: [{{aescbc: {{keys: [{{name: group, secret: {K32}}}]}}}}]\n  - resources: ['*.*']\n    providers: [{{secretbox: {{keys: [{{name: all, secret: {K32}}}]}}}}]\n"
        )))
        .unwrap();
        assert!(
            writes(&config, "", "secrets")
                .unwrap()
                .starts_with("k8s:enc:aesgcm:v1:exact:")
        );
        assert!(
            writes(&config, "apps", "deployments")
                .unwrap()
                .starts_with("k8s:enc:aescbc:v1:group:")
        );
        assert!(
            writes(&config, "", "configmaps")
                .unwrap()
                .starts_with("k8s:enc:secretbox:v1:all:")
        );
        assert!(
            writes(&config, "coordination.k8s.io", "leases")
                .unwrap()
                .starts_with("k8s:enc:secretbox:v1:all:")
        );
    }

    #[test]
    fn a_resource_in_several_entries_gets_every_entrys_providers_in_order() {
        let config = parse(&with_resources(&format!(
            "  - resources: [secrets]\n    providers: [{{aesgcm: {{keys: [{{name: new, secret: {K32}}}]}}}}]\n  - resources: [secrets]\n    providers: [{{identity: {{}}}}]\n"
        )))
        .unwrap();
        let t = config.transformer_for("", "secrets").unwrap();
        assert!(!t.writes_plaintext());
        assert_eq!(
            t.from_storage(&"{}".into(), "/k").unwrap(),
            "{}",
            "identity from the second entry reads plain data"
        );
    }

    #[test]
    fn a_resource_masked_by_an_earlier_wildcard_is_refused() {
        let err = error(&with_resources(
            "  - resources: ['*.']\n    providers: [{identity: {}}]\n  - resources: [secrets]\n    providers: [{identity: {}}]\n",
        ));
        assert_eq!(err, r#"resource "secrets" is masked by earlier rule "*.""#);
        let err = error(&with_resources(
            "  - resources: ['*.*']\n    providers: [{identity: {}}]\n  - resources: [deployments.apps]\n    providers: [{identity: {}}]\n",
        ));
        assert_eq!(
            err,
            r#"resource "deployments.apps" is masked by earlier rule "*.*""#
        );
    }

    #[test]
    fn key_lengths_and_encodings_are_validated_with_field_paths() {
        let err = error(&with_resources(&format!(
            "  - resources: [secrets]\n    providers:\n      - aesgcm: {{keys: [{{name: a, secret: c2hvcnQ=}}]}}\n      - aescbc: {{keys: [{{name: b, secret: '!!notbase64'}}]}}\n      - secretbox: {{keys: [{{name: c, secret: {K16}}}, {{secret: {K32}}}]}}\n"
        )));
        assert_eq!(
            err,
            "[resources[0].providers[0].aesgcm.keys[0].secret: Invalid value: \"REDACTED\": secret is not of the expected length, got 5, expected one of [16 24 32], \
             resources[0].providers[1].aescbc.keys[0].secret: Invalid value: \"REDACTED\": secrets must be base64 encoded, \
             resources[0].providers[2].secretbox.keys[0].secret: Invalid value: \"REDACTED\": secret is not of the expected length, got 16, expected one of [32], \
             resources[0].providers[2].secretbox.keys[1].name: Required value: name is a mandatory field for a key]"
        );
        assert!(!err.contains(K16), "secrets never appear in messages");
    }

    #[test]
    fn structure_is_validated_as_upstream() {
        assert_eq!(
            error(&with_resources("  []\n").replace("resources:\n  []", "resources: []")),
            "resources: Required value: at least one resources is required"
        );
        assert_eq!(
            error(&with_resources("  - resources: [secrets]\n")),
            "resources[0].providers: Required value: at least one resources[0].providers is required"
        );
        assert_eq!(
            error(&with_resources("  - providers: [{identity: {}}]\n")),
            "resources[0].resources: Required value: at least one resources[0].resources is required"
        );
        let err = error(&with_resources(
            "  - resources: [Secrets, '*', events.events.k8s.io, deployments.extensions, 'foo.*', serviceipallocations]\n    providers: [{identity: {}, aesgcm: {keys: []}}, {}]\n",
        ));
        for expected in [
            "resources[0].resources[0]: Invalid value: \"Secrets\": resource name should not contain capital letters",
            "resources[0].resources[1]: Invalid value: \"*\": use '*.' to encrypt all the resources from core API group or *.* to encrypt all resources",
            "resources[0].resources[2]: Invalid value: \"events.events.k8s.io\": '*.events.k8s.io' objects are stored using the 'events' API group in etcd. Use 'events' instead in the config file",
            "resources[0].resources[3]: Invalid value: \"deployments.extensions\": 'extensions' group has been removed and cannot be used for encryption",
            "resources[0].resources[4]: Invalid value: \"foo.*\": encrypting the same resource across groups is not supported",
            "resources[0].resources[5]: Invalid value: \"serviceipallocations\": resources which do not have REST API/s cannot be encrypted",
            "resources[0].providers[0]: Invalid value: {}: more than one provider specified in a single element, should split into different list elements",
            "resources[0].providers[1]: Invalid value: {}: provider does not contain any of the expected providers: KMS, AESGCM, AESCBC, Secretbox, Identity",
        ] {
            assert!(err.contains(expected), "{expected}\nnot in\n{err}");
        }
        let err = error(&with_resources(
            "  - resources: [secrets, secrets, '*.']\n    providers: [{identity: {}}]\n",
        ));
        assert!(
            err.contains("the same resource cannot be specified multiple times"),
            "{err}"
        );
        assert!(
            err.contains("using overlapping resources such as 'secrets' and '*.'"),
            "{err}"
        );
    }

    #[test]
    fn kms_is_refused_clearly() {
        let err = error(&with_resources(
            "  - resources: [secrets]\n    providers:\n      - kms: {apiVersion: v2, name: plugin, endpoint: unix:///kms.sock}\n",
        ));
        assert_eq!(
            err,
            "resources[0].providers[0].kms: Forbidden: the kms provider is not supported by genplane: use aesgcm, aescbc or secretbox"
        );
    }

    #[test]
    fn only_apiserver_config_k8s_io_v1_is_accepted() {
        for (version, kind) in [
            ("apiserver.k8s.io/v1", "EncryptionConfiguration"),
            ("apiserver.config.k8s.io/v1beta1", "EncryptionConfiguration"),
            ("apiserver.config.k8s.io/v1", "AdmissionConfiguration"),
            ("v1", "EncryptionConfig"),
        ] {
            let text = format!("apiVersion: {version}\nkind: {kind}\nresources: []\n");
            let err = error(&text);
            assert!(
                err.starts_with(
                    "error decoding encryption provider configuration file \"enc.yaml\": no kind"
                ),
                "{err}"
            );
        }
        assert!(error("resources: []\n").contains("Object 'Kind' is missing"));
        assert!(error(": : :\n  - [").starts_with("error decoding"));
        assert_eq!(
            EncryptionConfig::parse(b"", "enc.yaml")
                .unwrap_err()
                .to_string(),
            "encryption provider configuration file \"enc.yaml\" is empty"
        );
        let missing = EncryptionConfig::load(Path::new("/nonexistent/enc.yaml")).unwrap_err();
        assert!(missing.to_string().starts_with(
            "error reading encryption provider configuration file \"/nonexistent/enc.yaml\""
        ));
    }

    #[test]
    fn debug_never_shows_secrets() {
        let config = parse(&with_resources(&format!(
            "  - resources: [secrets]\n    providers: [{{aesgcm: {{keys: [{{name: key1, secret: {K32}}}]}}}}]\n"
        )))
        .unwrap();
        let shown = format!("{config:?}");
        assert!(
            shown.contains("key1") && shown.contains("secrets"),
            "{shown}"
        );
        assert!(!shown.contains("0123456789"), "{shown}");
    }
}
