//! `genplane apiserver`: the Kubernetes API for the generic resources, over HTTPS.
//!
//! Options → validated config → storage (SQLite by default, or etcd) with a watch cache per
//! resource → system namespaces → HTTPS with x509 client-certificate authentication. With no
//! certificates given, a CA, a serving certificate and an admin client certificate are made in
//! the data directory, and `admin.kubeconfig` is written next to them.

#![warn(missing_docs)]

pub mod options;
pub mod pki;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::{ArgMatches, CommandFactory, Parser};
use genplane_apiserver::authn::{Authentication, OidcDocuments, TokenAuthenticator};
use genplane_apiserver::metrics::ApiMetrics;
use genplane_apiserver::{ApiServer, Security};
use genplane_authorization::rbac::RbacAuthorizer;
use genplane_authorization::{AlwaysAllow, AlwaysDeny, Authorizer, PrivilegedGroups, Union};
use genplane_component_base::component::{self, Startup};
use genplane_component_base::config::ConfigFlags;
use genplane_component_base::featuregate::UseIdentity;
use genplane_component_base::health::Health;
use genplane_component_base::http::{self, OpsHandler};
use genplane_component_base::metrics;
use genplane_component_base::process::Process;
use genplane_component_base::shutdown::{Shutdown, Signals};
use genplane_controlplane::identity::{IdentityLease, Timing};
use genplane_controlplane::rbac::EscalationChecks;
use genplane_controlplane::{
    EtcdConfig, EtcdTls, ResourceOptions, ResourceStorage, StorageConfig, bootstrap, features,
    open_storage, resources_with,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::options::{ApiserverConfig, ApiserverOptions, AuthorizationMode, Backend};

/// How long open requests may finish after a shutdown signal.
const DRAIN: Duration = Duration::from_secs(10);

#[derive(Parser)]
#[command(
    name = "apiserver",
    about = "Serve the Kubernetes API for the generic resources (namespaces, configmaps, secrets, ...)"
)]
struct Cli {
    #[command(flatten)]
    config: ConfigFlags,
    #[command(flatten)]
    options: ApiserverOptions,
}

/// The command line of `genplane apiserver`.
pub fn command() -> clap::Command {
    Cli::command()
}

/// Validates the options of `matches` as `genplane apiserver` does; `None` when the command
/// only printed something (`--print-default-config`, `--config-check`). For a caller that
/// starts the API server itself, such as all-in-one: see [`serve_until_ready`].
pub fn configure(
    matches: &ArgMatches,
    process: &Process,
) -> anyhow::Result<Option<ApiserverConfig>> {
    let instance = process.var("HOSTNAME").unwrap_or("localhost").to_owned();
    let rust_log = process.var("RUST_LOG").map(str::to_owned);
    let startup = component::configure::<ApiserverOptions, _>(
        matches,
        process,
        &mut std::io::stdout(),
        |options, invalid| {
            options.validate(
                UseIdentity::new("apiserver", instance.clone()),
                rust_log.as_deref(),
                invalid,
            )
        },
    )?;
    let Startup::Run(config) = startup else {
        return Ok(None);
    };
    // The binary's one subscriber; a second role in the same process keeps the first.
    let _ = tracing::subscriber::set_global_default(config.common.logging.subscriber());
    for warning in config.common.feature_gate.warnings() {
        tracing::warn!("{warning}");
    }
    Ok(Some(config))
}

/// Runs `genplane apiserver` until SIGTERM or SIGINT.
pub fn run(matches: &ArgMatches, process: &Process) -> anyhow::Result<()> {
    let Some(config) = configure(matches, process)? else {
        return Ok(());
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_stack_size(genplane_apiserver::THREAD_STACK_BYTES)
        .build()
        .context("starting the runtime")?;
    runtime.block_on(async {
        let shutdown = Shutdown::new();
        tokio::spawn(shutdown.clone().trigger_on(Signals::install()?));
        serve(config, process, shutdown).await
    })
}

/// The TLS configuration: the serving certificate, and client certificates verified against
/// `client_ca` but not required (anonymous requests may reach the health endpoints).
fn server_tls(cert: &Path, key: &Path, client_ca: &Path) -> anyhow::Result<rustls::ServerConfig> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let chain = CertificateDer::pem_file_iter(cert)
        .with_context(|| format!("reading {}", cert.display()))?
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("parsing {}", cert.display()))?;
    let key =
        PrivateKeyDer::from_pem_file(key).with_context(|| format!("reading {}", key.display()))?;
    let mut roots = rustls::RootCertStore::empty();
    for ca in CertificateDer::pem_file_iter(client_ca)
        .with_context(|| format!("reading {}", client_ca.display()))?
    {
        roots.add(ca.with_context(|| format!("parsing {}", client_ca.display()))?)?;
    }
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .allow_unauthenticated()
    .build()
    .context("building the client certificate verifier")?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .context("loading the serving certificate")?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// The host name, as the operating system reports it (upstream's identity Lease is named
/// after it).
fn hostname() -> String {
    hostname::get()
        .ok()
        .and_then(|h| h.into_string().ok())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_owned())
}

fn storage_config(config: &ApiserverConfig) -> StorageConfig {
    let options = &config.options;
    match config.backend {
        Backend::Sqlite => StorageConfig::Sqlite {
            path: options.data_dir.join("genplane.db"),
        },
        Backend::Etcd => {
            let mut etcd = EtcdConfig::new(options.etcd_servers.clone());
            etcd.prefix = options.etcd_prefix.clone();
            etcd.compaction_interval = config.etcd_compaction_interval;
            // A stalled etcd request ends before the API request waiting for it, which then
            // says what stalled.
            etcd.request_timeout = etcd.request_timeout.min(config.limits.request_timeout / 2);
            if options.etcd_cafile.is_some() || options.etcd_certfile.is_some() {
                etcd.tls = Some(EtcdTls {
                    ca_file: options.etcd_cafile.clone(),
                    cert_file: options.etcd_certfile.clone(),
                    key_file: options.etcd_keyfile.clone(),
                });
            }
            StorageConfig::Etcd(etcd)
        }
    }
}

/// Who may make requests, and what they may do: the authentication chain (client
/// certificates, static tokens, service-account tokens, anonymous), the service-account
/// token issuer and its discovery documents, and the authorizer.
fn security(
    config: &ApiserverConfig,
    served: &[genplane_apiserver::Resource<ResourceStorage>],
    external_address: &str,
    rbac: &Arc<RbacAuthorizer>,
) -> anyhow::Result<Security> {
    use genplane_authentication::{keys, oidc, serviceaccount};
    use genplane_controlplane::auth::{
        CacheLookup, ServiceAccountTokens, StaticTokens, TokenRequestIssuer,
    };
    let options = &config.options;
    let lookup = CacheLookup::among(served).context("finding the service-account caches")?;
    let signing_key = match &options.service_account_signing_key_file {
        Some(path) => keys::SigningKey::from_file(path)
            .context("failed to parse service-account-issuer-key-file")?,
        None => {
            let path = options.data_dir.join("pki").join(keys::GENERATED_KEY_FILE);
            let (key, generated) = keys::SigningKey::load_or_generate(&path, Default::default())
                .with_context(|| format!("preparing {}", path.display()))?;
            if generated {
                tracing::info!(path = %path.display(), "generated a service-account signing key");
            }
            key
        }
    };
    let mut public = Vec::new();
    for file in &options.service_account_key_file {
        public.extend(
            keys::public_keys_from_file(file)
                .with_context(|| format!("reading {}", file.display()))?,
        );
    }
    let keys = keys::verification_keys(public, Some(&signing_key));
    let issuers: Vec<String> = options
        .service_account_issuer
        .iter()
        .filter(|i| !i.is_empty())
        .cloned()
        .collect();
    let audiences = serviceaccount::default_api_audiences(&options.api_audiences, &issuers);
    let oidc = match oidc::Discovery::new(
        &issuers[0],
        options.service_account_jwks_uri.as_deref(),
        Some(external_address),
        &keys,
    ) {
        Ok(discovery) => Some(OidcDocuments {
            configuration: discovery.config_json().to_vec().into(),
            keys: discovery.keyset_json().to_vec().into(),
        }),
        Err(error) => {
            tracing::warn!(%error, "not serving the service-account issuer discovery documents");
            None
        }
    };
    let mut tokens: Vec<Arc<dyn TokenAuthenticator>> = Vec::new();
    if let Some(file) = &config.token_file {
        tokens.push(Arc::new(StaticTokens {
            file: file.clone(),
            api_audiences: audiences.clone(),
        }));
    }
    tokens.push(Arc::new(ServiceAccountTokens {
        verifier: serviceaccount::TokenAuthenticator::new(issuers.clone(), keys, audiences.clone()),
        lookup: lookup.clone(),
    }));
    let token_requests = TokenRequestIssuer {
        issuer: serviceaccount::TokenIssuer::new(issuers[0].clone(), signing_key),
        options: genplane_authentication::token_request::TokenRequestOptions::new(
            audiences,
            config.max_token_expiration,
        )
        .map_err(|e| anyhow::anyhow!("{e}"))?,
    };
    let mut chain: Vec<Arc<dyn Authorizer>> = vec![Arc::new(PrivilegedGroups::new([
        genplane_authentication::SYSTEM_MASTERS,
    ]))];
    for mode in &config.authorization_modes {
        chain.push(match mode {
            AuthorizationMode::Rbac => rbac.clone(),
            AuthorizationMode::AlwaysAllow => Arc::new(AlwaysAllow),
            AuthorizationMode::AlwaysDeny => Arc::new(AlwaysDeny),
        });
    }
    let authorizer: Arc<dyn Authorizer> = Arc::new(Union::new(chain));
    let mut anonymous = options.anonymous_auth;
    if anonymous
        && config
            .authorization_modes
            .contains(&AuthorizationMode::AlwaysAllow)
    {
        // As upstream: with AlwaysAllow, anonymous requests would be allowed everything.
        tracing::warn!(
            "AnonymousAuth is not allowed with the AlwaysAllow authorizer. Resetting AnonymousAuth to false. You should use a different authorizer"
        );
        anonymous = false;
    }
    let mut security = Security::new(Authentication { tokens, anonymous }, authorizer.clone());
    if config
        .authorization_modes
        .contains(&AuthorizationMode::Rbac)
    {
        security.escalation = Some(Arc::new(EscalationChecks {
            authorizer,
            resolver: rbac.clone(),
        }));
    }
    security.token_requests = Some(Arc::new(token_requests));
    security.oidc = oidc;
    Ok(security)
}

/// Serves until `shutdown` is triggered.
pub async fn serve(
    config: ApiserverConfig,
    process: &Process,
    shutdown: Shutdown,
) -> anyhow::Result<()> {
    serve_until_ready("apiserver", config, process, shutdown, None).await
}

/// What a started API server tells whoever embeds it, once it takes requests.
#[derive(Clone, Debug)]
pub struct Ready {
    /// The URL clients use.
    pub server_url: String,
    /// The data directory, holding the kubeconfig of each role.
    pub data_dir: std::path::PathBuf,
}

/// Serves until `shutdown` is triggered, sending [`Ready`] on `ready` once requests are
/// taken (the kubeconfigs are written by then); `role` names the applet in the banner.
pub async fn serve_until_ready(
    role: &str,
    config: ApiserverConfig,
    process: &Process,
    shutdown: Shutdown,
    ready: Option<tokio::sync::oneshot::Sender<Ready>>,
) -> anyhow::Result<()> {
    let options = &config.options;
    std::fs::create_dir_all(&options.data_dir)
        .with_context(|| format!("creating {}", options.data_dir.display()))?;
    let extra_hosts: Vec<String> = Some(config.bind_address)
        .filter(|a| !a.is_unspecified())
        .map(|a| a.to_string())
        .into_iter()
        .collect();
    let pki = pki::ensure(&options.data_dir.join("pki"), &extra_hosts)
        .context("preparing certificates")?;
    let (cert, key) = match (&options.tls_cert_file, &options.tls_private_key_file) {
        (Some(cert), Some(key)) => (cert.clone(), key.clone()),
        _ => (pki.serving_cert.clone(), pki.serving_key.clone()),
    };
    let client_ca = options
        .client_ca_file
        .clone()
        .unwrap_or_else(|| pki.ca.clone());
    let tls = tokio_rustls::TlsAcceptor::from(Arc::new(server_tls(&cert, &key, &client_ca)?));

    let backend = open_storage(&storage_config(&config))
        .await
        .context("opening storage")?;
    let served = resources_with(
        backend.clone(),
        &ResourceOptions {
            encryption: config.encryption.clone(),
            enablement: config.api_enablement.clone(),
            ..ResourceOptions::default()
        },
    )
    .context("setting up the watch caches")?;
    bootstrap(&served)
        .await
        .context("creating the system namespaces")?;

    let listener = http::bind(SocketAddr::new(config.bind_address, options.secure_port)).await?;
    let address = listener.local_addr()?;
    let host = if config.bind_address.is_unspecified() {
        SocketAddr::new([127, 0, 0, 1].into(), address.port())
    } else {
        address
    };
    let server_url = format!("https://{host}");
    // A kubeconfig per identity: the admin's, and one per other role with its own user.
    for client in &pki.clients {
        pki::write_kubeconfig(
            &options.data_dir.join(format!("{}.kubeconfig", client.stem)),
            &server_url,
            &pki.ca,
            &client.cert,
            &client.key,
            client.user,
        )?;
    }
    let kubeconfig = options.data_dir.join("admin.kubeconfig");

    let registry = metrics::Registry::new();
    config.common.feature_gate.register_metrics(&registry);
    genplane_controlplane::storage_health::register_metrics(&registry, &backend);
    let mut health = Health::new(&shutdown);
    genplane_controlplane::storage_health::add_checks(&mut health, &backend);
    let identity = config
        .common
        .feature_gate
        .enabled(features::API_SERVER_IDENTITY)
        .then(|| IdentityLease::among(&served, &hostname(), Timing::default()))
        .flatten();
    let rbac = Arc::new(RbacAuthorizer::new());
    if config
        .authorization_modes
        .contains(&AuthorizationMode::Rbac)
    {
        genplane_controlplane::rbac::bootstrap_policy(&served)
            .await
            .context("writing the bootstrap RBAC policy")?;
        let stop = shutdown.clone();
        genplane_controlplane::rbac::feed_policy(&served, rbac.clone(), async move {
            stop.triggered().await;
        })
        .await
        .context("reading the RBAC policy")?;
    }
    let security = security(&config, &served, &host.to_string(), &rbac)?;
    let audit = config.audit.build().context("starting the audit log")?;
    let api_metrics = ApiMetrics::new(&registry);
    let mut api = ApiServer::serving(
        served,
        &config.api_enablement,
        &process.build,
        &address.to_string(),
        Some(OpsHandler::new(health, registry)),
    )
    .with_security(security)
    .with_limits(config.limits)
    .with_shutdown(shutdown.clone())
    .with_metrics(api_metrics, |cache: &Arc<ResourceStorage>| {
        cache.object_count()
    });
    if let Some(audit) = &audit {
        api = api.with_audit(audit.auditor.clone());
    }
    if let Some(context) = api.admission_context() {
        api = api.with_admission(genplane_admission::plugins::chain_of(
            &config.admission_plugins,
            &context,
        ));
    }
    let api = Arc::new(api);
    if let Some(crds) = genplane_controlplane::crd::CustomResources::new(
        api.clone(),
        genplane_controlplane::custom_storage(backend.clone(), config.encryption.clone()),
    ) {
        let stop = shutdown.clone();
        crds.run(async move { stop.triggered().await })
            .await
            .context("serving the CustomResourceDefinitions")?;
    }
    if let Some(identity) = identity {
        tracing::info!(
            lease = identity.name(),
            holder = identity.holder(),
            "apiserver identity"
        );
        let stop = shutdown.clone();
        tokio::spawn(async move { identity.run(stop.triggered()).await });
    }
    let handler = move |request: hyper::Request<hyper::body::Incoming>| {
        let api = api.clone();
        async move { api.handle(request).await }
    };
    let kubeconfig = std::fs::canonicalize(&kubeconfig).unwrap_or(kubeconfig);
    tracing::info!(%server_url, kubeconfig = %kubeconfig.display(), "serving");
    println!("genplane {role} serving on {server_url}");
    println!("export KUBECONFIG={}", kubeconfig.display());
    if let Some(ready) = ready {
        let _ = ready.send(Ready {
            server_url: server_url.clone(),
            data_dir: options.data_dir.clone(),
        });
    }
    http::serve_tls(listener, tls, handler, shutdown, DRAIN).await?;
    if let Some(audit) = audit {
        audit.backend.shutdown();
    }
    tracing::info!("stopped");
    Ok(())
}
