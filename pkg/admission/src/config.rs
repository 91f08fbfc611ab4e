//! `--admission-control-config-file`: upstream's `AdmissionConfiguration`, giving plugins their
//! configuration, for the plugins of genplane's that upstream configures this way:
//!
//! ```yaml
//! apiVersion: apiserver.config.k8s.io/v1        # or apiserver.k8s.io/v1alpha1
//! kind: AdmissionConfiguration
//! plugins:
//! - name: ValidatingAdmissionWebhook             # and MutatingAdmissionWebhook
//!   configuration:
//!     apiVersion: apiserver.config.k8s.io/v1
//!     kind: WebhookAdmissionConfiguration          # or WebhookAdmission
//!     kubeConfigFile: /etc/genplane/webhook-credentials.kubeconfig
//! - name: ResourceQuota
//!   path: resourcequota.yaml                      # relative to this file
//! ```
//!
//! - The webhook plugins read a kubeconfig whose `users` say which credentials genplane
//!   presents to which webhook ([`WebhookCredentials`]): a user is picked by the host (and
//!   port) of the webhook's URL, as upstream picks it: the exact `host:port` as written in the
//!   URL, then `*.` wildcards of its domain suffixes, then the same without a `:443` port, then
//!   `*`. A user may have a bearer token (`token`, `tokenFile`), a client certificate
//!   (`client-certificate[-data]` with `client-key[-data]`) or a username and password; other
//!   kinds of credentials (exec plugins, auth providers) are refused when the file is read.
//! - `ResourceQuota` reads a `ResourceQuotaConfiguration` (`apiserver.config.k8s.io/v1`, or
//!   `resourcequota.admission.k8s.io/v1beta1` `Configuration`) whose `limitedResources` name
//!   resources that may only be created where a quota covers them ([`QuotaConfiguration`]).
//!
//! A plugin's configuration is inline (`configuration`) or in a file (`path`, relative to the
//! configuration file). Configurations of plugins that take none are ignored with a warning,
//! as upstream ignores them.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;

/// Errors of reading an admission configuration.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A file is not what it should be.
    #[error("{path}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong, naming the field.
        message: String,
    },
}

/// The plugin configurations read from `--admission-control-config-file`.
#[derive(Debug, Default, Clone)]
pub struct Configuration {
    /// The credentials ValidatingAdmissionWebhook presents to webhooks.
    pub validating_webhook: Option<Arc<WebhookCredentials>>,
    /// The credentials MutatingAdmissionWebhook presents to webhooks.
    pub mutating_webhook: Option<Arc<WebhookCredentials>>,
    /// ResourceQuota's configuration.
    pub quota: Arc<QuotaConfiguration>,
}

/// The configuration file's own shape.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct AdmissionConfiguration {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    plugins: Vec<PluginConfiguration>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PluginConfiguration {
    name: String,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    configuration: Option<Value>,
}

/// Reads a file's YAML or JSON.
fn read_document(path: &Path) -> Result<Value, Error> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::Read {
        path: path.to_owned(),
        source,
    })?;
    genplane_apimachinery::yaml::from_str(&text).map_err(|message| Error::Invalid {
        path: path.to_owned(),
        message,
    })
}

impl Configuration {
    /// Reads the configuration at `path` and every file it names.
    pub fn load(path: &Path) -> Result<Configuration, Error> {
        let invalid = |message: String| Error::Invalid {
            path: path.to_owned(),
            message,
        };
        let document = read_document(path)?;
        let file: AdmissionConfiguration =
            serde_json::from_value(document).map_err(|e| invalid(e.to_string()))?;
        if !matches!(
            file.api_version.as_str(),
            "apiserver.config.k8s.io/v1" | "apiserver.k8s.io/v1alpha1"
        ) || file.kind != "AdmissionConfiguration"
        {
            return Err(invalid(format!(
                "apiVersion {:?}, kind {:?}: expected an AdmissionConfiguration of apiserver.config.k8s.io/v1",
                file.api_version, file.kind
            )));
        }
        let dir = path.parent().unwrap_or(Path::new("."));
        let mut configuration = Configuration::default();
        let mut seen: Vec<&str> = Vec::new();
        for plugin in &file.plugins {
            if seen.contains(&plugin.name.as_str()) {
                return Err(invalid(format!(
                    "plugins: {:?} is configured more than once",
                    plugin.name
                )));
            }
            seen.push(&plugin.name);
            // the plugin's own configuration, and the file it is in
            let (value, from) = match (&plugin.configuration, &plugin.path) {
                (Some(value), _) => (value.clone(), path.to_owned()),
                (None, Some(file)) => {
                    let file = dir.join(file);
                    (read_document(&file)?, file)
                }
                (None, None) => continue,
            };
            match plugin.name.as_str() {
                "ValidatingAdmissionWebhook" => {
                    configuration.validating_webhook = Some(Arc::new(
                        WebhookCredentials::from_configuration(&value, &from)?,
                    ));
                }
                "MutatingAdmissionWebhook" => {
                    configuration.mutating_webhook = Some(Arc::new(
                        WebhookCredentials::from_configuration(&value, &from)?,
                    ));
                }
                "ResourceQuota" => {
                    configuration.quota =
                        Arc::new(QuotaConfiguration::from_configuration(&value, &from)?);
                }
                other => {
                    tracing::warn!(
                        plugin = other,
                        file = %path.display(),
                        "ignoring the configuration of an admission plugin that takes none here"
                    );
                }
            }
        }
        Ok(configuration)
    }
}

/// Checks a plugin configuration's `apiVersion` and `kind` against the accepted pairs.
fn check_type(value: &Value, accepted: &[(&str, &str)], path: &Path) -> Result<(), Error> {
    let api_version = value["apiVersion"].as_str().unwrap_or_default();
    let kind = value["kind"].as_str().unwrap_or_default();
    if accepted
        .iter()
        .any(|(v, k)| *v == api_version && *k == kind)
    {
        return Ok(());
    }
    let expected: Vec<String> = accepted.iter().map(|(v, k)| format!("{v} {k}")).collect();
    Err(Error::Invalid {
        path: path.to_owned(),
        message: format!(
            "apiVersion {api_version:?}, kind {kind:?}: expected one of {}",
            expected.join(", ")
        ),
    })
}

/// The credentials the webhook plugins present to webhooks: the users of a kubeconfig, by
/// name (a webhook's `host[:port]`, a `*.domain` wildcard, or `*`).
#[derive(Clone, Default)]
pub struct WebhookCredentials {
    users: Vec<(String, Arc<Credentials>)>,
}

impl std::fmt::Debug for WebhookCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // never the secrets
        let names: Vec<&str> = self.users.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("WebhookCredentials")
            .field("users", &names)
            .finish()
    }
}

/// One user's credentials.
#[derive(Clone, Default)]
pub struct Credentials {
    /// The `Authorization` header: `Bearer <token>` or `Basic <user:password>`.
    pub authorization: Option<String>,
    /// The client certificate and its key, PEM, one after the other.
    pub identity: Option<String>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field(
                "authorization",
                &self.authorization.as_ref().map(|_| "<hidden>"),
            )
            .field("identity", &self.identity.as_ref().map(|_| "<hidden>"))
            .finish()
    }
}

/// The kubeconfig fields read.
#[derive(Deserialize)]
struct Kubeconfig {
    #[serde(default)]
    users: Vec<NamedUser>,
}

#[derive(Deserialize)]
struct NamedUser {
    name: String,
    #[serde(default)]
    user: Value,
}

impl WebhookCredentials {
    /// Reads a `WebhookAdmission` configuration (in the file `path`) and its kubeconfig.
    fn from_configuration(value: &Value, path: &Path) -> Result<WebhookCredentials, Error> {
        check_type(
            value,
            &[
                (
                    "apiserver.config.k8s.io/v1",
                    "WebhookAdmissionConfiguration",
                ),
                ("apiserver.config.k8s.io/v1", "WebhookAdmission"),
                ("apiserver.config.k8s.io/v1alpha1", "WebhookAdmission"),
            ],
            path,
        )?;
        let invalid = |message: String| Error::Invalid {
            path: path.to_owned(),
            message,
        };
        let file = value["kubeConfigFile"].as_str().unwrap_or_default();
        if file.is_empty() {
            return Err(invalid("kubeConfigFile: Required value".to_owned()));
        }
        let file = Path::new(file);
        if !file.is_absolute() {
            return Err(invalid(format!(
                "kubeConfigFile {:?} must be an absolute file path",
                file.display()
            )));
        }
        WebhookCredentials::from_kubeconfig(file)
    }

    /// The users of the kubeconfig at `path` (relative file names in it are relative to it).
    pub fn from_kubeconfig(path: &Path) -> Result<WebhookCredentials, Error> {
        let invalid = |message: String| Error::Invalid {
            path: path.to_owned(),
            message,
        };
        let kubeconfig: Kubeconfig =
            serde_json::from_value(read_document(path)?).map_err(|e| invalid(e.to_string()))?;
        let dir = path.parent().unwrap_or(Path::new("."));
        let mut users = Vec::new();
        for user in kubeconfig.users {
            let credentials = credentials(&user.user, dir)
                .map_err(|message| invalid(format!("user {:?}: {message}", user.name)))?;
            users.push((user.name, Arc::new(credentials)));
        }
        Ok(WebhookCredentials { users })
    }

    /// The credentials for a webhook at `host` (as its URL writes it: `host[:port]`), as
    /// upstream picks them; `None` when no user matches.
    pub fn for_host(&self, host: &str) -> Option<&Arc<Credentials>> {
        let named = |name: &str| {
            self.users
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, credentials)| credentials)
        };
        let exact_or_wildcard = |target: &str| {
            named(target).or_else(|| {
                let labels: Vec<&str> = target.split('.').collect();
                (1..labels.len()).find_map(|i| named(&format!("*.{}", labels[i..].join("."))))
            })
        };
        exact_or_wildcard(host)
            .or_else(|| host.strip_suffix(":443").and_then(exact_or_wildcard))
            .or_else(|| named("*"))
    }
}

/// A kubeconfig user's credentials; relative file names are relative to `dir`.
fn credentials(user: &Value, dir: &Path) -> Result<Credentials, String> {
    let text = |field: &str| user[field].as_str().filter(|s| !s.is_empty());
    let file = |field: &str| -> Result<Option<String>, String> {
        match text(field) {
            None => Ok(None),
            Some(name) => std::fs::read_to_string(dir.join(name))
                .map(Some)
                .map_err(|e| format!("{field} {name:?}: {e}")),
        }
    };
    let data = |field: &str| -> Result<Option<String>, String> {
        match text(field) {
            None => Ok(None),
            Some(encoded) => {
                let bytes = data_encoding::BASE64
                    .decode(encoded.as_bytes())
                    .map_err(|e| format!("{field}: not base64: {e}"))?;
                String::from_utf8(bytes)
                    .map(Some)
                    .map_err(|_| format!("{field}: not PEM text"))
            }
        }
    };
    for unsupported in ["exec", "auth-provider", "as", "as-user-extra", "as-groups"] {
        if !user[unsupported].is_null() {
            return Err(format!(
                "{unsupported} is not supported for webhook credentials; use a token, a client certificate or a username and password"
            ));
        }
    }
    let token = match text("token") {
        Some(token) => Some(token.to_owned()),
        None => file("tokenFile")?.map(|t| t.trim().to_owned()),
    };
    let certificate = match data("client-certificate-data")? {
        Some(pem) => Some(pem),
        None => file("client-certificate")?,
    };
    let key = match data("client-key-data")? {
        Some(pem) => Some(pem),
        None => file("client-key")?,
    };
    let identity = match (certificate, key) {
        (Some(certificate), Some(key)) => {
            let pem = format!("{}\n{key}", certificate.trim_end());
            crate::webhook::client::Identity::from_pem(&pem)
                .map_err(|e| format!("client certificate and key: {e}"))?;
            Some(pem)
        }
        (None, None) => None,
        (Some(_), None) => return Err("client-certificate without client-key".to_owned()),
        (None, Some(_)) => return Err("client-key without client-certificate".to_owned()),
    };
    let basic = match (text("username"), text("password")) {
        (Some(user), password) => Some(format!(
            "Basic {}",
            data_encoding::BASE64.encode(format!("{user}:{}", password.unwrap_or("")).as_bytes())
        )),
        (None, Some(_)) => return Err("password without username".to_owned()),
        (None, None) => None,
    };
    if token.is_some() && basic.is_some() {
        return Err("both a token and a username are set: choose one".to_owned());
    }
    Ok(Credentials {
        authorization: token.map(|t| format!("Bearer {t}")).or(basic),
        identity,
    })
}

/// ResourceQuota's configuration: the resources that may be created only in a namespace with a
/// quota covering them.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct QuotaConfiguration {
    /// The limited resources.
    pub limited_resources: Vec<LimitedResource>,
}

/// A resource limited by default.
#[derive(Debug, Default, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LimitedResource {
    /// Its API group (`""`: the core group).
    #[serde(default)]
    pub api_group: String,
    /// Its resource (plural name).
    pub resource: String,
    /// A quota resource name of a create that contains one of these (`count/configmaps`
    /// contains `configmaps`) must be covered by a quota limiting it.
    #[serde(default)]
    pub match_contains: Vec<String>,
    /// Scopes whose use must be covered: every scope is about pods, so none ever matches
    /// the objects of a generic control plane (as upstream's object-count evaluator matches
    /// no scope); accepted and checked for shape.
    #[serde(default)]
    pub match_scopes: Vec<Value>,
}

impl QuotaConfiguration {
    fn from_configuration(value: &Value, path: &Path) -> Result<QuotaConfiguration, Error> {
        check_type(
            value,
            &[
                ("apiserver.config.k8s.io/v1", "ResourceQuotaConfiguration"),
                ("resourcequota.admission.k8s.io/v1beta1", "Configuration"),
                ("resourcequota.admission.k8s.io/v1alpha1", "Configuration"),
            ],
            path,
        )?;
        let invalid = |message: String| Error::Invalid {
            path: path.to_owned(),
            message,
        };
        let limited: Vec<LimitedResource> =
            serde_json::from_value(value["limitedResources"].clone())
                .or_else(|e| {
                    if value["limitedResources"].is_null() {
                        Ok(Vec::new())
                    } else {
                        Err(e)
                    }
                })
                .map_err(|e| invalid(format!("limitedResources: {e}")))?;
        for (i, resource) in limited.iter().enumerate() {
            if resource.resource.is_empty() {
                return Err(invalid(format!(
                    "limitedResources[{i}].resource: Required value"
                )));
            }
            for (j, scope) in resource.match_scopes.iter().enumerate() {
                if scope["scopeName"].as_str().is_none_or(str::is_empty)
                    || scope["operator"].as_str().is_none_or(str::is_empty)
                {
                    return Err(invalid(format!(
                        "limitedResources[{i}].matchScopes[{j}]: scopeName and operator are required"
                    )));
                }
            }
        }
        Ok(QuotaConfiguration {
            limited_resources: limited,
        })
    }

    /// Of the quota resource names a create of `group`/`resource` counts against, those that
    /// must be covered by a quota (sorted).
    pub fn limited_names(&self, group: &str, resource: &str, names: &[String]) -> Vec<String> {
        let mut limited: Vec<String> = names
            .iter()
            .filter(|name| {
                self.limited_resources.iter().any(|l| {
                    l.api_group == group
                        && l.resource == resource
                        && l.match_contains.iter().any(|m| name.contains(m.as_str()))
                })
            })
            .cloned()
            .collect();
        limited.sort();
        limited.dedup();
        limited
    }
}

#[cfg(test)]
mod tests;
