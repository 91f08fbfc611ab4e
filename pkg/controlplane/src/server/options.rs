//! An API server's options (flags, config file keys and `GENPLANE_*` variables), grouped by
//! concern, and their validation into a [`Config`].

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::EncryptionConfig;
use clap::Args;
use genplane_api::networkregistry::Prefix;
use genplane_apimachinery::duration;
use genplane_apiserver::Limits;
use genplane_apiserver::enablement::{Api, ApiEnablement};
use genplane_audit::AuditOptions;
use genplane_authentication::token_file::TokenFile;
use genplane_component_base::config::{CommonConfig, CommonOptions, Invalid};
use genplane_component_base::featuregate::UseIdentity;
use serde::{Deserialize, Serialize};

/// The raw options of an API server, by concern: flags, config file keys and `GENPLANE_*`
/// variables (each group's keys are the flags' names, flat, as before the grouping).
#[derive(Args, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default)]
pub struct Options {
    /// Where the database (SQLite), generated certificates and kubeconfigs are kept.
    #[arg(long, default_value = ".genplane")]
    pub data_dir: PathBuf,
    /// Where and how the API is served: address, certificates, limits.
    #[command(flatten, next_help_heading = "Serving")]
    #[serde(flatten)]
    pub serving: ServingOptions,
    /// Where the data is kept: the backend, etcd's connection and compaction, encryption at rest.
    #[command(flatten, next_help_heading = "Storage")]
    #[serde(flatten)]
    pub storage: StorageOptions,
    /// Who a request is from: anonymous requests, static tokens, service-account tokens.
    #[command(flatten, next_help_heading = "Authentication")]
    #[serde(flatten)]
    pub authentication: AuthenticationOptions,
    /// What a user may do: the authorizers.
    #[command(flatten, next_help_heading = "Authorization")]
    #[serde(flatten)]
    pub authorization: AuthorizationOptions,
    /// Which requests are recorded, and where.
    #[command(flatten, next_help_heading = "Audit")]
    #[serde(flatten)]
    pub audit: AuditLogOptions,
    /// Which admission plugins every write goes through.
    #[command(flatten, next_help_heading = "Admission")]
    #[serde(flatten)]
    pub admission: AdmissionOptions,
    /// Which built-in APIs are served.
    #[command(flatten, next_help_heading = "API enablement")]
    #[serde(flatten)]
    pub apis: ApiEnablementOptions,
    /// The cluster's network parameters.
    #[command(flatten, next_help_heading = "Network")]
    #[serde(flatten)]
    pub network: NetworkOptions,
    /// The features clients may set in the Feature API.
    #[command(flatten, next_help_heading = "Feature gates")]
    #[serde(flatten)]
    pub features: FeatureOptions,
    /// Logging and feature gates.
    #[command(flatten)]
    #[serde(flatten)]
    pub common: CommonOptions,
}

/// Where and how the API is served: address, certificates, limits.
#[derive(Args, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default)]
pub struct ServingOptions {
    /// The port to serve HTTPS on.
    #[arg(long, default_value_t = 6443)]
    pub secure_port: u16,
    /// The address to listen on.
    #[arg(long, default_value = "0.0.0.0")]
    pub bind_address: String,
    /// The serving certificate (PEM); generated in the data directory when unset.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_cert_file: Option<PathBuf>,
    /// The serving certificate's key (PEM).
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_private_key_file: Option<PathBuf>,
    /// The CA that signs client certificates (PEM); the generated CA when unset.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_ca_file: Option<PathBuf>,
    /// The client certificate (PEM) the aggregator presents to extension API servers, which
    /// trust it for the front-proxy headers; generated in the data directory (signed by a
    /// front-proxy CA of its own) when unset.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proxy_client_cert_file: Option<PathBuf>,
    /// Its key (PEM).
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proxy_client_key_file: Option<PathBuf>,
    /// The most read-only requests answered at once; more are refused with 429 until others
    /// finish. Watches do not count. 0: no limit.
    #[arg(long, default_value_t = 400)]
    pub max_requests_inflight: usize,
    /// The most mutating requests (create, update, patch, delete) answered at once; more are
    /// refused with 429. 0: no limit.
    #[arg(long, default_value_t = 200)]
    pub max_mutating_requests_inflight: usize,
    /// How long a request may take before the server answers 504 (a Go duration such as
    /// `1m0s` or `30s`). Watches are not cut by it; a client's shorter `timeout` parameter wins.
    #[arg(long, default_value = "1m0s")]
    pub request_timeout: String,
    /// API Priority and Fairness: the sum of the two in-flight limits is shared among the
    /// priority levels the FlowSchemas classify requests into, each queuing fairly what it
    /// cannot run at once. `false`: the two limits apply as they are.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub enable_priority_and_fairness: bool,
}

impl Default for ServingOptions {
    fn default() -> Self {
        Self {
            secure_port: 6443,
            bind_address: "0.0.0.0".into(),
            tls_cert_file: None,
            tls_private_key_file: None,
            client_ca_file: None,
            proxy_client_cert_file: None,
            proxy_client_key_file: None,
            max_requests_inflight: 400,
            max_mutating_requests_inflight: 200,
            request_timeout: "1m0s".into(),
            enable_priority_and_fairness: true,
        }
    }
}

/// Where the data is kept: the backend, etcd's connection and compaction, encryption at rest.
#[derive(Args, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default)]
pub struct StorageOptions {
    /// The storage backend: sqlite (embedded, the default) or etcd.
    #[arg(long, default_value = "sqlite")]
    pub storage_backend: String,
    /// The etcd endpoints, comma-separated (with --storage-backend=etcd).
    #[arg(long, value_delimiter = ',')]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub etcd_servers: Vec<String>,
    /// A prefix for every etcd key, so that several control planes can share one etcd.
    #[arg(long, default_value = "")]
    pub etcd_prefix: String,
    /// The CA that signed etcd's serving certificate.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub etcd_cafile: Option<PathBuf>,
    /// The client certificate for etcd (mutual TLS).
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub etcd_certfile: Option<PathBuf>,
    /// The client certificate's key for etcd.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub etcd_keyfile: Option<PathBuf>,
    /// How often etcd's history is compacted (a Go duration; 0 disables). Every apiserver
    /// sharing the etcd runs the compactor; one of them compacts per interval, to the revision
    /// of one interval earlier.
    #[arg(long, default_value = "5m0s")]
    pub etcd_compaction_interval: String,
    /// The file that says which resources are encrypted at rest and with which keys:
    /// kube-apiserver's EncryptionConfiguration (apiserver.config.k8s.io/v1), YAML or JSON.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub encryption_provider_config: Option<PathBuf>,
}

impl Default for StorageOptions {
    fn default() -> Self {
        Self {
            storage_backend: "sqlite".into(),
            etcd_servers: Vec::new(),
            etcd_prefix: String::new(),
            etcd_cafile: None,
            etcd_certfile: None,
            etcd_keyfile: None,
            etcd_compaction_interval: "5m0s".into(),
            encryption_provider_config: None,
        }
    }
}

/// Who a request is from: anonymous requests, static tokens, service-account tokens.
#[derive(Args, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default)]
pub struct AuthenticationOptions {
    /// Whether requests without credentials proceed as `system:anonymous` (group
    /// `system:unauthenticated`); RBAC then grants them only the public endpoints.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub anonymous_auth: bool,
    /// A CSV file of static bearer tokens: `token,user,uid[,"group1,group2"]` per line.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_auth_file: Option<PathBuf>,
    /// The private key (PEM) that signs service-account tokens; generated in the data
    /// directory (ECDSA P-256) when unset.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_account_signing_key_file: Option<PathBuf>,
    /// More public keys (PEM files) that service-account tokens may be signed with
    /// (repeatable); the signing key's is always one.
    #[arg(long)]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub service_account_key_file: Vec<PathBuf>,
    /// The issuer (`iss`) of service-account tokens; repeatable: the first issues, all are
    /// accepted.
    #[arg(long, default_value = DEFAULT_ISSUER)]
    pub service_account_issuer: Vec<String>,
    /// The audiences the API server accepts tokens for, comma-separated (the issuers when
    /// unset).
    #[arg(long, value_delimiter = ',')]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub api_audiences: Vec<String>,
    /// The longest validity a TokenRequest may ask for (a Go duration; unlimited when unset).
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_account_max_token_expiration: Option<String>,
    /// The key set's URL in the OpenID discovery document (`https://<server>/openid/v1/jwks`
    /// when unset).
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_account_jwks_uri: Option<String>,
    /// The CA (PEM) of front proxies (aggregating API servers) whose requests name their user
    /// in headers; the generated front-proxy CA (`pki/front-proxy-ca.crt`) when unset. A
    /// certificate of this CA never names a user by itself.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requestheader_client_ca_file: Option<PathBuf>,
    /// The common names a front proxy's certificate may have, comma-separated (`front-proxy-
    /// client` when the CA is the generated one; any name of the CA when a CA is given and this
    /// is not).
    #[arg(long, value_delimiter = ',')]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub requestheader_allowed_names: Vec<String>,
    /// The headers a front proxy names the user in, comma-separated; the first set wins.
    #[arg(long, value_delimiter = ',', default_value = "X-Remote-User")]
    pub requestheader_username_headers: Vec<String>,
    /// The headers a front proxy names the user's groups in, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "X-Remote-Group")]
    pub requestheader_group_headers: Vec<String>,
    /// The prefixes of the headers a front proxy names the user's extra attributes in
    /// (`<prefix><key>`), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "X-Remote-Extra-")]
    pub requestheader_extra_headers_prefix: Vec<String>,
    /// A kubeconfig of the API server to delegate bearer tokens to, as an extension API server
    /// does: a token the authenticators above do not know is asked of that server with a
    /// TokenReview (its credentials need `create` on `tokenreviews`, as
    /// `system:auth-delegator` grants). Read at the first token it is asked for.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub authentication_kubeconfig: Option<PathBuf>,
}

impl Default for AuthenticationOptions {
    fn default() -> Self {
        Self {
            anonymous_auth: true,
            token_auth_file: None,
            service_account_signing_key_file: None,
            service_account_key_file: Vec::new(),
            service_account_issuer: vec![DEFAULT_ISSUER.to_owned()],
            api_audiences: Vec::new(),
            service_account_max_token_expiration: None,
            service_account_jwks_uri: None,
            requestheader_client_ca_file: None,
            requestheader_allowed_names: Vec::new(),
            requestheader_username_headers: vec!["X-Remote-User".to_owned()],
            requestheader_group_headers: vec!["X-Remote-Group".to_owned()],
            requestheader_extra_headers_prefix: vec!["X-Remote-Extra-".to_owned()],
            authentication_kubeconfig: None,
        }
    }
}

/// What a user may do: the authorizers.
#[derive(Args, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default)]
pub struct AuthorizationOptions {
    /// The authorizers, comma-separated, asked in order: RBAC, AlwaysAllow, AlwaysDeny.
    #[arg(long, value_delimiter = ',', default_value = "RBAC")]
    pub authorization_mode: Vec<String>,
    /// A kubeconfig of the API server to delegate decisions to, as an extension API server
    /// does: what the authorizers above leave open is asked of that server with a
    /// SubjectAccessReview (its credentials need `create` on `subjectaccessreviews`, as
    /// `system:auth-delegator` grants). Read at the first decision it is asked for.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub authorization_kubeconfig: Option<PathBuf>,
}

impl Default for AuthorizationOptions {
    fn default() -> Self {
        Self {
            authorization_mode: vec!["RBAC".into()],
            authorization_kubeconfig: None,
        }
    }
}

/// Which requests are recorded, and where.
#[derive(Args, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default)]
pub struct AuditLogOptions {
    /// The audit policy (audit.k8s.io/v1 Policy, YAML or JSON): which requests are logged at
    /// which level. No auditing without it.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub audit_policy_file: Option<PathBuf>,
    /// The audit log file (JSON lines of audit.k8s.io/v1 Events), `-` for standard output.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub audit_log_path: Option<PathBuf>,
    /// Days to keep rotated audit log files (0: no limit).
    #[arg(long, default_value_t = 0)]
    pub audit_log_maxage: u32,
    /// Rotated audit log files to keep (0: no limit).
    #[arg(long, default_value_t = 0)]
    pub audit_log_maxbackup: u32,
    /// Megabytes an audit log file may reach before it is rotated (0: 100).
    #[arg(long, default_value_t = 0)]
    pub audit_log_maxsize: u32,
    /// `blocking` (a request waits while the log's queue is full) or `batch` (events are
    /// dropped then).
    #[arg(long, default_value = "blocking")]
    pub audit_log_mode: String,
}

impl Default for AuditLogOptions {
    fn default() -> Self {
        Self {
            audit_policy_file: None,
            audit_log_path: None,
            audit_log_maxage: 0,
            audit_log_maxbackup: 0,
            audit_log_maxsize: 0,
            audit_log_mode: "blocking".into(),
        }
    }
}

/// Which admission plugins every write goes through.
#[derive(Args, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default)]
pub struct AdmissionOptions {
    /// Admission plugins to enable besides the default ones, comma-separated (upstream's
    /// names; the order is always upstream's). Enabled by default: NamespaceLifecycle, and the
    /// plugins upstream enables that act only on kinds not served here.
    #[arg(long, value_delimiter = ',')]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub enable_admission_plugins: Vec<String>,
    /// Admission plugins to disable, comma-separated, even if enabled by default.
    #[arg(long, value_delimiter = ',')]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub disable_admission_plugins: Vec<String>,
    /// An AdmissionConfiguration file (apiserver.config.k8s.io/v1) configuring admission
    /// plugins: the credentials the webhook plugins present to webhooks (a kubeconfig), and
    /// the resources ResourceQuota limits by default.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admission_control_config_file: Option<PathBuf>,
}

/// Which built-in APIs are served.
#[derive(Args, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default)]
pub struct ApiEnablementOptions {
    /// Which built-in APIs are served, comma-separated `key=value` entries (later ones win):
    /// `api/all`, `api/ga`, `api/beta`, `api/alpha` (every group version, or the GA, beta or
    /// alpha ones), `<group>/<version>` (`api/v1` for the core group) and
    /// `<group>/<version>/<resource>`, each `true` or `false` (`true` when the value is left
    /// out). Example: `events.k8s.io/v1=false`. Groups the server does not have are ignored.
    #[arg(long, value_delimiter = ',')]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub runtime_config: Vec<String>,
}

/// The cluster's network parameters.
#[derive(Args, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default)]
pub struct NetworkOptions {
    /// The Service IP ranges, as kube-apiserver's flag: one CIDR, or two of different IP
    /// families (dual stack), comma-separated. genplane serves no Services; with the
    /// NetworkRegistry feature gate on, the server claims these ranges in the network
    /// registry as the NetworkClaim `kube-apiserver` (reference `{"", services}`).
    #[arg(long, default_value = DEFAULT_SERVICE_CLUSTER_IP_RANGE)]
    pub service_cluster_ip_range: String,
    /// Where Services named by webhooks' `service` references are reached, for hosts where no
    /// DNS resolves `<name>.<namespace>.svc` (a single machine): comma-separated
    /// `<namespace>/<name>:<port>=<ip>:<port>` entries. The serving certificate is still checked
    /// against `<name>.<namespace>.svc`. Other references resolve through DNS.
    #[arg(long, value_delimiter = ',')]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub service_address_override: Vec<String>,
}

/// The features clients may set in the Feature API (KEP-3920's stage 3, which it puts on the
/// API servers' command line).
#[derive(Args, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default)]
pub struct FeatureOptions {
    /// Features whose `spec.desired` clients allowed to update Features may set
    /// (comma-separated names); every role then runs them with the value of the Feature's
    /// state, without a restart. A feature is dynamic while every live API server names it.
    /// Only features genplane consults at each use can be named.
    #[arg(long, value_delimiter = ',')]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub dynamic_features: Vec<String>,
}

/// kube-apiserver's default `--service-cluster-ip-range`.
pub const DEFAULT_SERVICE_CLUSTER_IP_RANGE: &str = "10.0.0.0/24";

impl Default for NetworkOptions {
    fn default() -> Self {
        Self {
            service_cluster_ip_range: DEFAULT_SERVICE_CLUSTER_IP_RANGE.to_owned(),
            service_address_override: Vec::new(),
        }
    }
}

/// The core resources the server itself stands on (namespaces: the system namespaces and
/// the namespace admission plugins), which `--runtime-config` may not turn off. Without
/// service accounts (and their secrets), service-account tokens are neither accepted nor
/// issued.
const CORE_RESOURCES: &[&str] = &["namespaces"];

/// An authorizer of `--authorization-mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuthorizationMode {
    /// Role-based access control over the rbac.authorization.k8s.io objects.
    Rbac,
    /// Every request is allowed.
    AlwaysAllow,
    /// No request is allowed (by this authorizer).
    AlwaysDeny,
}

/// The service-account issuer when none is given (upstream requires the flag; this is the
/// value kubeadm sets).
pub const DEFAULT_ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

impl Default for Options {
    fn default() -> Self {
        Self {
            data_dir: PathBuf::from(".genplane"),
            serving: ServingOptions::default(),
            storage: StorageOptions::default(),
            authentication: AuthenticationOptions::default(),
            authorization: AuthorizationOptions::default(),
            audit: AuditLogOptions::default(),
            admission: AdmissionOptions::default(),
            apis: ApiEnablementOptions::default(),
            network: NetworkOptions::default(),
            features: FeatureOptions::default(),
            common: CommonOptions::default(),
        }
    }
}

/// Where the data lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Backend {
    /// Embedded SQLite in the data directory.
    Sqlite,
    /// etcd.
    Etcd,
}

/// The validated options.
#[derive(Clone, Debug)]
pub struct Config {
    /// The options as given.
    pub options: Options,
    /// The listening address.
    pub bind_address: IpAddr,
    /// The backend.
    pub backend: Backend,
    /// `--etcd-compaction-interval` (zero: no compaction).
    pub etcd_compaction_interval: Duration,
    /// In-flight limits and the request timeout.
    pub limits: Limits,
    /// Which resources are encrypted at rest (none without `--encryption-provider-config`).
    pub encryption: EncryptionConfig,
    /// The static tokens of `--token-auth-file`.
    pub token_file: Option<TokenFile>,
    /// `--service-account-max-token-expiration` in seconds.
    pub max_token_expiration: Option<i64>,
    /// The audit log's options (the policy has been read and found valid).
    pub audit: AuditOptions,
    /// The authorizers, in order.
    pub authorization_modes: Vec<AuthorizationMode>,
    /// The enabled admission plugins, in the order they run.
    pub admission_plugins: Vec<&'static str>,
    /// The admission plugins' configuration (`--admission-control-config-file`).
    pub admission_configuration: Arc<genplane_admission::config::Configuration>,
    /// Which built-in APIs are served (`--runtime-config`).
    pub api_enablement: ApiEnablement,
    /// `--service-cluster-ip-range`.
    pub service_cluster_ip_range: Vec<Prefix>,
    /// Where `service` references are reached (`--service-address-override`, else DNS).
    pub service_resolver: genplane_admission::webhook::resolver::ServiceResolver,
    /// `--dynamic-features`.
    pub dynamic_features: std::collections::BTreeSet<String>,
    /// Logging and feature gates.
    pub common: CommonConfig,
}

impl Options {
    /// Validates every option, recording every problem in `invalid`.
    pub fn validate(
        &self,
        identity: UseIdentity,
        rust_log: Option<&str>,
        invalid: &mut Invalid,
    ) -> Option<Config> {
        let bind_address = invalid.check(
            "bind-address",
            self.serving
                .bind_address
                .parse::<IpAddr>()
                .map_err(|e| format!("{:?} is not an IP address: {e}", self.serving.bind_address)),
        );
        let backend = match self.storage.storage_backend.as_str() {
            "sqlite" => Some(Backend::Sqlite),
            "etcd" => Some(Backend::Etcd),
            other => {
                invalid.push(
                    "storage-backend",
                    format!("unsupported storage backend {other:?}: must be sqlite or etcd"),
                );
                None
            }
        };
        if backend == Some(Backend::Etcd) && self.storage.etcd_servers.is_empty() {
            invalid.push(
                "etcd-servers",
                "at least one etcd server is required with --storage-backend=etcd",
            );
        }
        if self.storage.etcd_certfile.is_some() != self.storage.etcd_keyfile.is_some() {
            invalid.push(
                "etcd-certfile",
                "--etcd-certfile and --etcd-keyfile go together",
            );
        }
        let auth = &self.authentication;
        for (flag, names) in [
            (
                "requestheader-username-headers",
                &auth.requestheader_username_headers,
            ),
            (
                "requestheader-group-headers",
                &auth.requestheader_group_headers,
            ),
            (
                "requestheader-extra-headers-prefix",
                &auth.requestheader_extra_headers_prefix,
            ),
        ] {
            for name in names {
                if hyper::header::HeaderName::from_bytes(name.to_ascii_lowercase().as_bytes())
                    .is_err()
                {
                    invalid.push(flag, format!("{name:?} is not an HTTP header name"));
                }
            }
        }
        if self.serving.proxy_client_cert_file.is_some()
            != self.serving.proxy_client_key_file.is_some()
        {
            invalid.push(
                "proxy-client-cert-file",
                "--proxy-client-cert-file and --proxy-client-key-file go together",
            );
        }
        if self.serving.tls_cert_file.is_some() != self.serving.tls_private_key_file.is_some() {
            invalid.push(
                "tls-cert-file",
                "--tls-cert-file and --tls-private-key-file go together",
            );
        }
        let etcd_compaction_interval = invalid.check(
            "etcd-compaction-interval",
            duration::parse(&self.storage.etcd_compaction_interval).map_err(|e| e.to_string()),
        );
        let request_timeout = invalid.check(
            "request-timeout",
            duration::parse(&self.serving.request_timeout)
                .map_err(|e| e.to_string())
                .and_then(|d| {
                    if d.is_zero() {
                        Err("must be greater than 0".to_owned())
                    } else {
                        Ok(d)
                    }
                }),
        );
        let encryption = match &self.storage.encryption_provider_config {
            None => Some(EncryptionConfig::default()),
            Some(path) => invalid.check(
                "encryption-provider-config",
                EncryptionConfig::load(path).map_err(|e| format!("error while parsing file: {e}")),
            ),
        };
        let common =
            self.common
                .validate(&genplane_features::registry(), identity, rust_log, invalid);
        let token_file = match &self.authentication.token_auth_file {
            None => Some(None),
            Some(path) => invalid
                .check(
                    "token-auth-file",
                    TokenFile::load(path).map_err(|e| e.to_string()),
                )
                .map(Some),
        };
        let max_token_expiration = match &self.authentication.service_account_max_token_expiration {
            // Zero is unset, as upstream reads it.
            None => Some(None),
            Some(text) if duration::parse(text).is_ok_and(|d| d.is_zero()) => Some(None),
            Some(text) => invalid
                .check(
                    "service-account-max-token-expiration",
                    duration::parse(text)
                        .map_err(|e| e.to_string())
                        .and_then(|d| {
                            let seconds = i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
                            if (3600..=1 << 32).contains(&seconds) {
                                Ok(seconds)
                            } else {
                                Err("must be between 1h and 2^32 seconds".to_owned())
                            }
                        }),
                )
                .map(Some),
        };
        if self
            .authentication
            .service_account_issuer
            .iter()
            .all(|i| i.is_empty())
        {
            invalid.push(
                "service-account-issuer",
                "at least one non-empty issuer is required",
            );
        }
        let log_mode = invalid.check(
            "audit-log-mode",
            genplane_audit::options::parse_mode(&self.audit.audit_log_mode)
                .map_err(|e| e.to_string()),
        );
        if let Some(path) = &self.audit.audit_policy_file
            && let Err(error) = genplane_audit::Policy::load(path)
        {
            invalid.push("audit-policy-file", error.to_string());
        }
        let mut authorization_modes = Vec::new();
        for mode in &self.authorization.authorization_mode {
            let parsed = match mode.as_str() {
                "RBAC" => AuthorizationMode::Rbac,
                "AlwaysAllow" => AuthorizationMode::AlwaysAllow,
                "AlwaysDeny" => AuthorizationMode::AlwaysDeny,
                other => {
                    invalid.push(
                        "authorization-mode",
                        format!(
                            "authorization-mode {other:?} is not a valid mode: must be one of RBAC, AlwaysAllow, AlwaysDeny"
                        ),
                    );
                    continue;
                }
            };
            if authorization_modes.contains(&parsed) {
                invalid.push(
                    "authorization-mode",
                    format!("authorization-mode {mode:?} has mode specified more than once"),
                );
            }
            authorization_modes.push(parsed);
        }
        let admission_plugins = invalid.check(
            "enable-admission-plugins",
            genplane_admission::plugins::enabled(
                &self.admission.enable_admission_plugins,
                &self.admission.disable_admission_plugins,
            )
            .map_err(|e| e.to_string()),
        );
        let admission_configuration = match &self.admission.admission_control_config_file {
            None => Some(Arc::default()),
            Some(path) => invalid.check(
                "admission-control-config-file",
                genplane_admission::config::Configuration::load(path)
                    .map(Arc::new)
                    .map_err(|e| e.to_string()),
            ),
        };
        let api_enablement = invalid
            .check(
                "runtime-config",
                ApiEnablement::parse(&self.apis.runtime_config, ApiEnablement::builtin_apis())
                    .map_err(|e| e.to_string()),
            )
            .filter(|enablement| {
                // What every other part of the server stands on.
                let missing: Vec<&str> = CORE_RESOURCES
                    .iter()
                    .copied()
                    .filter(|resource| {
                        !enablement.serves(Api {
                            group: "",
                            version: "v1",
                            resource,
                        })
                    })
                    .collect();
                if missing.is_empty() {
                    return true;
                }
                invalid.push(
                    "runtime-config",
                    format!(
                        "the core API's {} cannot be disabled: the server stands on them",
                        missing.join(", ")
                    ),
                );
                false
            })
            .filter(|enablement| {
                let rbac_off = ApiEnablement::builtin_apis()
                    .filter(|api| api.group == genplane_api::rbac::GROUP_NAME)
                    .any(|api| !enablement.serves(api));
                if rbac_off && authorization_modes.contains(&AuthorizationMode::Rbac) {
                    invalid.push(
                        "runtime-config",
                        "--authorization-mode=RBAC needs every resource of rbac.authorization.k8s.io/v1",
                    );
                    return false;
                }
                true
            });
        let service_cluster_ip_range = invalid.check(
            "service-cluster-ip-range",
            genplane_api::networkregistry::prefix::parse_dual_stack(
                &self.network.service_cluster_ip_range,
            ),
        );
        let service_resolver = invalid.check(
            "service-address-override",
            genplane_admission::webhook::resolver::ServiceResolver::with_overrides(
                &self.network.service_address_override,
            )
            .map_err(|e| e.to_string()),
        );
        for problem in genplane_features::dynamic_feature_problems(
            &genplane_features::registry(),
            &self.features.dynamic_features,
        ) {
            invalid.push("dynamic-features", problem);
        }
        if authorization_modes.is_empty() && self.authorization.authorization_mode.is_empty() {
            invalid.push(
                "authorization-mode",
                "at least one authorization-mode must be passed",
            );
        }
        Some(Config {
            authorization_modes,
            admission_plugins: admission_plugins?,
            admission_configuration: admission_configuration?,
            api_enablement: api_enablement?,
            service_cluster_ip_range: service_cluster_ip_range?,
            service_resolver: service_resolver?,
            dynamic_features: self.features.dynamic_features.iter().cloned().collect(),
            audit: AuditOptions {
                policy_file: self.audit.audit_policy_file.clone(),
                log_path: self.audit.audit_log_path.clone(),
                log_maxage: self.audit.audit_log_maxage,
                log_maxbackup: self.audit.audit_log_maxbackup,
                log_maxsize: self.audit.audit_log_maxsize,
                log_mode: log_mode?,
            },
            token_file: token_file?,
            max_token_expiration: max_token_expiration?,
            options: self.clone(),
            bind_address: bind_address?,
            backend: backend?,
            etcd_compaction_interval: etcd_compaction_interval?,
            limits: Limits {
                max_read_only: self.serving.max_requests_inflight,
                max_mutating: self.serving.max_mutating_requests_inflight,
                request_timeout: request_timeout?,
                priority_and_fairness: self.serving.enable_priority_and_fairness,
            },
            encryption: encryption?,
            common: common?,
        })
    }
}
