//! An API server assembled in code: [`Options`] (by concern, as flags or in a program) →
//! [`Config`] (validated) → [`CompletedConfig`] (certificates made, storage opened, the
//! resources and their watch caches set up) → [`CompletedConfig::run`] (security, audit and
//! admission assembled, HTTPS served, then the post-start hooks run, [`hooks`]: the system
//! namespaces, the bootstrap RBAC policy, the CRDs served, the identity Lease, feature
//! reporting, the well-known NetworkClaim, and the program's own, each a
//! `poststarthook/<name>` health check until it has finished; served until the shutdown
//! signal). `genplane apiserver` and `genplane all-in-one` are this and nothing more; a program of its own can serve resources of its own the same way, by
//! adding them to [`CompletedConfig::resources`], and steps of its own to
//! [`CompletedConfig::post_start_hooks`], before it runs.
//!
//! Security is not optional here: every server authenticates (client certificates against the
//! client CA, bearer tokens, anonymous only when allowed) and authorizes (RBAC by default) each
//! request. A server that allows everything is what `--authorization-mode=AlwaysAllow` asks for,
//! never what a missing call gives.
//!
//! ```no_run
//! # async fn example() -> Result<(), genplane_controlplane::server::Error> {
//! use genplane_component_base::featuregate::UseIdentity;
//! use genplane_component_base::config::Invalid;
//! use genplane_component_base::shutdown::Shutdown;
//! use genplane_component_base::version::BuildInfo;
//! use genplane_controlplane::server::Options;
//!
//! let mut options = Options::default();
//! options.data_dir = "/var/lib/my-control-plane".into();
//! options.serving.secure_port = 7443;
//! let mut invalid = Invalid::new();
//! let validated = options.validate(UseIdentity::new("apiserver", "host-1"), None, &mut invalid);
//! let config = invalid.finish(validated).expect("valid options");
//! let completed = config.complete().await?;
//! completed.run("my-control-plane", &BuildInfo::default(), Shutdown::new(), None).await
//! # }
//! ```

pub mod hooks;
pub mod options;
pub mod pki;
mod security;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use genplane_api::catalog::ResourceInfo;
use genplane_apiserver::metrics::ApiMetrics;
use genplane_apiserver::{ApiServer, Resource};
use genplane_authorization::rbac::RbacAuthorizer;
use genplane_component_base::config::Invalid;
use genplane_component_base::health::Health;
use genplane_component_base::http::{self, OpsHandler};
use genplane_component_base::metrics;
use genplane_component_base::shutdown::Shutdown;
use genplane_component_base::version::BuildInfo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

pub use self::options::{AuthorizationMode, Backend, Config, Options};
use crate::apiserver_identity::{IdentityLease, Timing};
use crate::{
    Backend as StorageBackend, EtcdConfig, EtcdTls, ResourceOptions, ResourceStorage,
    StorageConfig, bootstrap, features, open_storage, resources_with,
};
/// The stack each thread of a runtime that serves requests should have.
pub use genplane_apiserver::THREAD_STACK_BYTES;

/// `genplane apiserver` as a [`Role`](genplane_component_base::component::Role): [`Options`]
/// validated with the feature uses named `apiserver` and the instance `HOSTNAME`, completed and
/// run until shutdown; a unit of `Type=notify` hears it is ready once the server takes
/// requests and every post-start hook has finished.
#[derive(Debug)]
pub struct ApiServerRole;

impl ApiServerRole {
    /// Runs `genplane apiserver` with the arguments in `matches` until SIGTERM or SIGINT:
    /// [`component::run`](genplane_component_base::component::run) for this role. It is not
    /// generic, so the role is compiled here once and not again in every crate that runs it
    /// (see [`Failure`](genplane_component_base::component::Failure)).
    pub fn run(
        matches: &clap::ArgMatches,
        process: &genplane_component_base::process::Process,
    ) -> Result<(), genplane_component_base::component::Failure> {
        genplane_component_base::component::run::<Self, _>(matches, process)
    }
}

impl genplane_component_base::component::Role for ApiServerRole {
    type Options = Options;
    type Config = Config;
    type Error = Error;

    const THREAD_STACK: Option<usize> = Some(THREAD_STACK_BYTES);

    fn validate(
        options: &Options,
        environment: &genplane_component_base::component::Environment,
        invalid: &mut Invalid,
    ) -> Option<Config> {
        options.validate(
            environment.identity(genplane_api::featuregates::API_SERVER),
            environment.rust_log.as_deref(),
            invalid,
        )
    }

    fn common(config: &Config) -> &genplane_component_base::config::CommonConfig {
        &config.common
    }

    async fn serve(
        config: Config,
        context: genplane_component_base::component::Context<'_>,
    ) -> Result<(), Error> {
        let (ready, started) = tokio::sync::oneshot::channel::<Ready>();
        let notifier = context.notifier;
        tokio::spawn(async move {
            if let Ok(started) = started.await {
                notifier.ready(&format!("serving on {}", started.server_url));
            }
        });
        config
            .complete()
            .await?
            .run(
                genplane_api::featuregates::API_SERVER,
                &context.process.build,
                context.shutdown,
                Some(ready),
            )
            .await
    }
}

/// How long open requests may finish after a shutdown signal.
const DRAIN: Duration = Duration::from_secs(10);

/// Why a server could not be set up or stopped serving. Each variant names what was being
/// done; the cause is its [`std::error::Error::source`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The data directory could not be created.
    #[error("creating {path}")]
    DataDir {
        /// The directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Certificates or kubeconfigs could not be made.
    #[error("preparing certificates")]
    Pki(#[from] pki::PkiError),
    /// The serving certificate, its key or the client CA could not be used.
    #[error("{0}")]
    Tls(String),
    /// Storage could not be opened, or a start-up object written.
    #[error("{what}")]
    ControlPlane {
        /// What was being done.
        what: &'static str,
        /// Why it failed.
        source: crate::Error,
    },
    /// Authentication could not be set up (a key, the issuer, token options).
    #[error("{0}")]
    Security(String),
    /// The audit log could not be started.
    #[error("starting the audit log: {0}")]
    Audit(String),
    /// The program's post-start hooks do not fit the server's (a name taken twice).
    #[error("{0}")]
    Hooks(#[from] hooks::HookError),
    /// A post-start hook failed: the server stops.
    #[error("post-start hook {name:?} failed: {error}")]
    PostStartHook {
        /// The hook.
        name: String,
        /// Why.
        error: String,
    },
    /// The listener could not be bound or failed.
    #[error("serving")]
    Serve(#[from] http::Error),
    /// The bound address could not be read.
    #[error("reading the bound address")]
    Address(#[from] std::io::Error),
}

impl Config {
    /// Makes what the server needs before it can run: the data directory, the certificates
    /// (generated there unless given), the storage backend and a watch cache per served
    /// resource.
    pub async fn complete(self) -> Result<CompletedConfig, Error> {
        let options = &self.options;
        std::fs::create_dir_all(&options.data_dir).map_err(|source| Error::DataDir {
            path: options.data_dir.clone(),
            source,
        })?;
        let extra_hosts: Vec<String> = Some(self.bind_address)
            .filter(|a| !a.is_unspecified())
            .map(|a| a.to_string())
            .into_iter()
            .collect();
        let pki = pki::ensure(&options.data_dir.join("pki"), &extra_hosts)?;
        let serving = &options.serving;
        let (cert, key) = match (&serving.tls_cert_file, &serving.tls_private_key_file) {
            (Some(cert), Some(key)) => (cert.clone(), key.clone()),
            _ => (pki.serving_cert.clone(), pki.serving_key.clone()),
        };
        // Client certificates of the client CA name users; those of the front-proxy CA make
        // a front proxy's headers believed (security.rs tells them apart per connection).
        let client_cas = [
            security::client_ca_path(&self),
            security::requestheader_ca_path(&self),
        ];
        let tls = server_tls(&cert, &key, &client_cas).map_err(Error::Tls)?;
        let backend = open_storage(&storage_config(&self))
            .await
            .map_err(|source| Error::ControlPlane {
                what: "opening storage",
                source,
            })?;
        let gates = Arc::new(features::StrategyGates(self.common.feature_gate.clone()));
        let turning_off = crate::turning_off(&backend, &self.encryption, gates.as_ref())
            .await
            .map_err(|source| Error::ControlPlane {
                what: "reading which features the cluster is turning off",
                source,
            })?;
        let resources = resources_with(
            backend.clone(),
            &ResourceOptions {
                encryption: self.encryption.clone(),
                enablement: self.api_enablement.clone(),
                gates,
                turning_off,
                ..ResourceOptions::default()
            },
        )
        .map_err(|source| Error::ControlPlane {
            what: "setting up the watch caches",
            source,
        })?;
        Ok(CompletedConfig {
            config: self,
            pki,
            tls: tokio_rustls::TlsAcceptor::from(Arc::new(tls)),
            backend,
            resources,
            post_start_hooks: hooks::PostStartHooks::default(),
        })
    }
}

/// A server ready to run: certificates, storage and resources in place.
pub struct CompletedConfig {
    /// The validated configuration.
    pub config: Config,
    /// The certificates (generated or given) and the clients' identities.
    pub pki: pki::Pki,
    tls: tokio_rustls::TlsAcceptor,
    backend: Arc<StorageBackend>,
    /// The resources to serve, each with its store and watch cache; a program adds its own
    /// with [`CompletedConfig::add_resource`].
    pub resources: Vec<Resource<ResourceStorage>>,
    /// The steps the server takes once it listens, besides its own (see [`hooks`]): a program
    /// adds its own, or drops one of the server's by name.
    pub post_start_hooks: hooks::PostStartHooks,
}

impl std::fmt::Debug for CompletedConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompletedConfig")
            .field("config", &self.config)
            .field("resources", &self.resources.len())
            .finish_non_exhaustive()
    }
}

/// What a started server tells whoever embeds it, once it takes requests.
#[derive(Clone, Debug)]
pub struct Ready {
    /// The URL clients use.
    pub server_url: String,
    /// The data directory, holding the kubeconfig of each role.
    pub data_dir: PathBuf,
}

impl CompletedConfig {
    /// Serves a resource of the program's own, described by `info` as a built-in kind is
    /// (see `genplane_api::catalog::ResourceInfo`): its objects are kept below
    /// `/registry/<info.storage_prefix>/` in the server's storage, behind a watch cache of their
    /// own, encrypted at rest as the configuration says for its group and resource. It is served
    /// like the built-in resources: discovery, OpenAPI (from `info.openapi_schema`), every verb,
    /// watches, tables, server-side apply, its `status` subresource when it lists one.
    pub fn add_resource(&mut self, info: &'static ResourceInfo) -> Result<(), Error> {
        let storage = self.storage_for(info)?;
        let gates = self.strategy_gates();
        self.resources
            .push(Resource::builtin_with_gates(info, storage, gates));
        Ok(())
    }

    /// The storage a resource of the program's own, described by `info`, is kept in: below
    /// `/registry/<info.storage_prefix>/`, behind a watch cache of its own, encrypted at rest
    /// as the configuration says for its group and resource. What
    /// [`CompletedConfig::add_resource`] serves a kind with; a program that serves a kind with
    /// more than its catalog entry (a strategy or allocations of its own, an answered
    /// subresource: see `genplane_apiserver::Resource`) builds the [`Resource`] over it and
    /// pushes it to [`CompletedConfig::resources`]. Call it once per kind.
    pub fn storage_for(&self, info: &'static ResourceInfo) -> Result<Arc<ResourceStorage>, Error> {
        let prefix = format!("/registry/{}/", info.storage_prefix);
        crate::custom_storage(self.backend.clone(), self.config.encryption.clone())(
            &prefix,
            info.group,
            info.resource,
        )
        .map_err(|source| Error::ControlPlane {
            what: "setting up a watch cache",
            source: crate::Error::Storage(source),
        })
    }

    /// The storage backend the resources are kept in, opened by [`Config::complete`]: what a
    /// program reads or writes beside the API (a test compacting the history, say), and what
    /// it builds other watch caches over ([`crate::resources_with`]).
    pub fn backend(&self) -> &Arc<StorageBackend> {
        &self.backend
    }

    /// The server's feature gates, as strategies' hooks are told them.
    pub fn strategy_gates(&self) -> Arc<dyn genplane_api::catalog::FeatureGates> {
        Arc::new(features::StrategyGates(
            self.config.common.feature_gate.clone(),
        ))
    }

    /// Serves until `shutdown` is triggered, sending [`Ready`] on `ready` once requests are
    /// taken (the kubeconfigs are written by then); `role` names the server in its banner,
    /// `build` is what `/version` reports.
    pub async fn run(
        self,
        role: &str,
        build: &BuildInfo,
        shutdown: Shutdown,
        ready: Option<tokio::sync::oneshot::Sender<Ready>>,
    ) -> Result<(), Error> {
        let CompletedConfig {
            config,
            pki,
            tls,
            backend,
            resources: served,
            post_start_hooks: program_hooks,
        } = self;
        let options = &config.options;

        let listener = http::bind(SocketAddr::new(
            config.bind_address,
            options.serving.secure_port,
        ))
        .await?;
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
        crate::storage_health::register_metrics(&registry, &backend);
        let mut health = Health::new(&shutdown);
        crate::storage_health::add_checks(&mut health, &backend);
        let mut caches: Vec<(String, Arc<ResourceStorage>)> = Vec::new();
        for resource in &served {
            let Some(store) = resource.store() else {
                continue;
            };
            let cache = store.shared_storage();
            if !caches.iter().any(|(_, c)| Arc::ptr_eq(c, &cache)) {
                caches.push((resource.info.group_resource().to_string(), cache));
            }
        }
        crate::storage_health::add_informer_sync(&mut health, caches);
        let identity = config
            .common
            .feature_gate
            .enabled(genplane_features::API_SERVER_IDENTITY)
            .then(|| {
                IdentityLease::among(
                    &served,
                    &genplane_component_base::process::hostname(),
                    Timing::default(),
                )
            })
            .flatten();
        // Empty until the RBAC hook has read the policy: until then only `system:masters`
        // and what else the authorizer allows get through.
        let rbac = Arc::new(RbacAuthorizer::new());
        let security = security::security(&config, &served, &host.to_string(), &rbac)?;
        let audit = config
            .audit
            .build()
            .map_err(|e| Error::Audit(e.to_string()))?;

        // The server's own steps once it listens, then the program's; each is a health check
        // until it has finished. They reach the server through `serving`, set below.
        let serving: Arc<std::sync::OnceLock<Arc<ApiServer<ResourceStorage>>>> = Arc::default();
        let serves = |kind: &ResourceInfo| served.iter().any(|r| r.info.is(kind));
        // The loopback identity reports as the component `apiserver` only (the bootstrap
        // policy's `report` on `components/apiserver`).
        let component = &config.common.feature_gate.identity().component;
        let features = serves(&genplane_api::featuregates::feature::INFO);
        if features && component != genplane_api::featuregates::API_SERVER {
            tracing::warn!(
                %component,
                "feature uses are not reported: the server's loopback identity reports as \
                 component {:?} only; name the API server's component so to report them",
                genplane_api::featuregates::API_SERVER
            );
        }
        let clients = LoopbackClients {
            features: features && component == genplane_api::featuregates::API_SERVER,
            claims: serves(&genplane_api::networkregistry::networkclaim::INFO),
        };
        let aggregation = Aggregation {
            proxy_identity: proxy_identity(&config, &pki)?,
            published: security::published_authentication(&config)?,
            metrics: crate::aggregator::metrics::AvailabilityMetrics::registered(&registry),
        };
        let mut hooks = own_hooks(
            &config,
            &serving,
            &backend,
            &rbac,
            identity,
            clients,
            aggregation,
        );
        hooks.append(program_hooks).map_err(Error::Hooks)?;
        let hooks = hooks.checked(&mut health);

        let api_metrics = ApiMetrics::new(&registry);
        let mut api = ApiServer::serving(
            served,
            &config.api_enablement,
            build,
            &address.to_string(),
            Some(OpsHandler::new(health, registry)),
        )
        .with_security(security)
        .with_feature_gate(config.common.feature_gate.clone())
        .with_limits(config.limits)
        .with_shutdown(shutdown.clone())
        .with_metrics(api_metrics);
        if let Some(audit) = &audit {
            api = api.with_audit(audit.auditor.clone());
        }
        if let Some(mut context) = api.admission_context() {
            context.configuration = config.admission_configuration.clone();
            context.resolver = config.service_resolver.clone();
            api = api.with_admission(genplane_admission::plugins::chain_of(
                &config.admission_plugins,
                &context,
            ));
        }
        let api = Arc::new(api);
        let _ = serving.set(api.clone());
        let handler = move |request: hyper::Request<hyper::body::Incoming>| {
            let api = api.clone();
            async move { api.handle(request).await }
        };
        let served = tokio::spawn(http::serve_tls(
            listener,
            tls,
            handler,
            shutdown.clone(),
            DRAIN,
        ));

        let context = hooks::HookContext {
            server_url: server_url.clone(),
            data_dir: options.data_dir.clone(),
            shutdown: shutdown.clone(),
        };
        if let Err((name, error)) = hooks.run(context).await {
            tracing::error!(hook = %name, %error, "a post-start hook failed: stopping");
            shutdown.trigger();
            let _ = served.await;
            return Err(Error::PostStartHook { name, error });
        }
        let kubeconfig = std::fs::canonicalize(&kubeconfig).unwrap_or(kubeconfig);
        tracing::info!(%server_url, kubeconfig = %kubeconfig.display(), "serving");
        println!("genplane {role} serving on {server_url}");
        println!("export KUBECONFIG={}", kubeconfig.display());
        if let Some(ready) = ready {
            // Whoever waited may have stopped waiting; serving goes on.
            let _ = ready.send(Ready {
                server_url: server_url.clone(),
                data_dir: options.data_dir.clone(),
            });
        }
        match served.await {
            Ok(outcome) => outcome?,
            Err(error) => tracing::error!(%error, "the serving task failed"),
        }
        if let Some(audit) = audit {
            audit.backend.shutdown();
        }
        tracing::info!("stopped");
        Ok(())
    }
}

/// The server's own post-start hooks, in the order they run, named as upstream names its own:
/// the system namespaces, the bootstrap RBAC policy and the authorizer's feed of it (with RBAC
/// authorization), the CustomResourceDefinitions served, a Local APIService for every served
/// group-version (`kube-apiserver-autoregistration`), the priority and fairness configuration
/// kept (`priority-and-fairness-config-producer`, where FlowSchemas and levels are served), the ValidatingAdmissionPolicies'
/// status followed, the identity Lease kept (where Leases are served); then genplane's own:
/// `start-feature-reporting` (where the Feature API is served) reports the server's feature
/// uses like every role's (`genplane_featurecontroller::Reporter`), as
/// `system:genplane:apiserver` through the loopback kubeconfig, and has its dynamic features
/// follow their Feature objects (`genplane_featurecontroller::Follower`);
/// `start-network-registry-claim` (NetworkRegistry on and NetworkClaims served) keeps the
/// well-known NetworkClaim `kube-apiserver` of `--service-cluster-ip-range`. `serving` is the
/// server, set before they run.
fn own_hooks(
    config: &Config,
    serving: &Arc<std::sync::OnceLock<Arc<ApiServer<ResourceStorage>>>>,
    backend: &Arc<StorageBackend>,
    rbac: &Arc<RbacAuthorizer>,
    identity: Option<IdentityLease<ResourceStorage>>,
    clients: LoopbackClients,
    aggregation: Aggregation,
) -> hooks::PostStartHooks {
    let Aggregation {
        proxy_identity,
        published,
        metrics: availability_metrics,
    } = aggregation;
    let server = |serving: &Arc<std::sync::OnceLock<Arc<ApiServer<ResourceStorage>>>>| {
        serving
            .get()
            .cloned()
            .expect("invariant: the server is set before its hooks run")
    };
    let mut hooks = hooks::PostStartHooks::default();
    let add = |hooks: &mut hooks::PostStartHooks, name, hook: hooks::Hook| {
        hooks
            .add_boxed(name, hook)
            .expect("invariant: the server's own hooks have distinct names");
    };
    let api = serving.clone();
    add(
        &mut hooks,
        "start-system-namespaces-controller",
        Box::new(move |_| {
            Box::pin(async move {
                bootstrap(&server(&api).resources())
                    .await
                    .map_err(|e| format!("creating the system namespaces: {e}"))
            })
        }),
    );
    let api = serving.clone();
    add(
        &mut hooks,
        "start-cluster-authentication-info-controller",
        Box::new(move |context| {
            Box::pin(async move {
                let stop = context.shutdown.clone();
                crate::cluster_authentication::publish(
                    &server(&api).resources(),
                    published,
                    async move { stop.triggered().await },
                )
                .await;
                Ok(())
            })
        }),
    );
    if config
        .authorization_modes
        .contains(&AuthorizationMode::Rbac)
    {
        let (api, rbac) = (serving.clone(), rbac.clone());
        add(
            &mut hooks,
            "rbac/bootstrap-roles",
            Box::new(move |context| {
                Box::pin(async move {
                    let resources = server(&api).resources();
                    crate::rbac::bootstrap_policy(&resources)
                        .await
                        .map_err(|e| format!("writing the bootstrap RBAC policy: {e}"))?;
                    let stop = context.shutdown.clone();
                    crate::rbac::feed_policy(&resources, rbac, async move {
                        stop.triggered().await;
                    })
                    .await
                    .map_err(|e| format!("reading the RBAC policy: {e}"))
                })
            }),
        );
    }
    let (api, storage, encryption, resolver) = (
        serving.clone(),
        backend.clone(),
        config.encryption.clone(),
        config.service_resolver.clone(),
    );
    add(
        &mut hooks,
        "start-apiextensions-controllers",
        Box::new(move |context| {
            Box::pin(async move {
                let Some(crds) = crate::crd::CustomResources::new(
                    server(&api),
                    crate::custom_storage(storage, encryption),
                    resolver,
                ) else {
                    return Ok(());
                };
                let stop = context.shutdown.clone();
                crds.run(async move { stop.triggered().await })
                    .await
                    .map_err(|e| format!("serving the CustomResourceDefinitions: {e}"))
            })
        }),
    );
    let api = serving.clone();
    add(
        &mut hooks,
        "kube-apiserver-autoregistration",
        Box::new(move |context| {
            Box::pin(async move {
                let Some(registration) =
                    crate::aggregator::autoregister::AutoRegister::new(server(&api))
                else {
                    return Ok(());
                };
                let stop = context.shutdown.clone();
                registration
                    .run(async move { stop.triggered().await })
                    .await
                    .map_err(|e| format!("registering the served APIServices: {e}"))
            })
        }),
    );
    let (api, resolver) = (serving.clone(), config.service_resolver.clone());
    add(
        &mut hooks,
        "apiservice-status-remote-available-controller",
        Box::new(move |context| {
            Box::pin(async move {
                let Some(remote) = crate::aggregator::remote::Remote::new(
                    server(&api),
                    resolver,
                    Some(proxy_identity),
                    availability_metrics,
                ) else {
                    return Ok(());
                };
                let stop = context.shutdown.clone();
                remote
                    .run(async move { stop.triggered().await })
                    .await
                    .map_err(|e| format!("following the remote APIServices: {e}"))
            })
        }),
    );
    let api = serving.clone();
    add(
        &mut hooks,
        "priority-and-fairness-config-producer",
        Box::new(move |context| {
            Box::pin(async move {
                let Some(configuration) = crate::flowcontrol::Configuration::new(&server(&api))
                else {
                    return Ok(());
                };
                let stop = context.shutdown.clone();
                configuration
                    .run(move || {
                        let stop = stop.clone();
                        async move { stop.triggered().await }
                    })
                    .await
                    .map_err(|e| format!("keeping the priority and fairness configuration: {e}"))
            })
        }),
    );
    let api = serving.clone();
    add(
        &mut hooks,
        "start-validating-admission-policy-status-controller",
        Box::new(move |context| {
            Box::pin(async move {
                let Some(policies) = crate::policy_status::PolicyStatus::new(server(&api)) else {
                    return Ok(());
                };
                let stop = context.shutdown.clone();
                policies
                    .run(async move { stop.triggered().await })
                    .await
                    .map_err(|e| format!("following the ValidatingAdmissionPolicies: {e}"))
            })
        }),
    );
    if let Some(identity) = identity {
        add(
            &mut hooks,
            "start-kube-apiserver-identity-lease-controller",
            Box::new(move |context| {
                Box::pin(async move {
                    tracing::info!(
                        lease = identity.name(),
                        holder = identity.holder(),
                        "apiserver identity"
                    );
                    let stop = context.shutdown.clone();
                    tokio::spawn(async move { identity.run(stop.triggered()).await });
                    Ok(())
                })
            }),
        );
    }
    let gate = config.common.feature_gate.clone();
    let period = config.common.feature_use_report_period;
    let dynamic = config.dynamic_features.clone();
    if clients.features {
        add(
            &mut hooks,
            "start-feature-reporting",
            Box::new(move |context| {
                Box::pin(async move {
                    let client = loopback_client(&context).await?;
                    let follower =
                        genplane_featurecontroller::Follower::new(gate.clone(), "kube-system");
                    let following = context.shutdown.clone();
                    tokio::spawn(follower.run(client.clone(), async move {
                        following.triggered().await;
                    }));
                    let reporter =
                        genplane_featurecontroller::Reporter::new(gate, "kube-system", period)
                            .allowing_dynamic(&dynamic);
                    let stop = context.shutdown.clone();
                    tokio::spawn(async move {
                        reporter
                            .run(client, async move { stop.triggered().await })
                            .await;
                    });
                    Ok(())
                })
            }),
        );
    }
    if clients.claims
        && config
            .common
            .feature_gate
            .enabled(genplane_features::NETWORK_REGISTRY)
    {
        let ranges = config.service_cluster_ip_range.clone();
        add(
            &mut hooks,
            "start-network-registry-claim",
            Box::new(move |context| {
                Box::pin(async move {
                    let client = loopback_client(&context).await?;
                    let stop = context.shutdown.clone();
                    tokio::spawn(genplane_networkregistry::well_known::keep(
                        client,
                        service_claim(ranges),
                        async move { stop.triggered().await },
                    ));
                    Ok(())
                })
            }),
        );
    }
    hooks
}

/// What the hooks of aggregation are given: the proxy's client certificate and key (PEM),
/// what `kube-system/extension-apiserver-authentication` publishes for extension servers, and
/// the availability metrics.
struct Aggregation {
    proxy_identity: String,
    published: crate::cluster_authentication::Published,
    metrics: crate::aggregator::metrics::AvailabilityMetrics,
}

/// The aggregator's client certificate and key (PEM, one after the other): the
/// `--proxy-client-cert-file` and `--proxy-client-key-file` given, else the generated ones.
fn proxy_identity(config: &Config, pki: &pki::Pki) -> Result<String, Error> {
    let serving = &config.options.serving;
    let (cert, key) = match (
        &serving.proxy_client_cert_file,
        &serving.proxy_client_key_file,
    ) {
        (Some(cert), Some(key)) => (cert.clone(), key.clone()),
        _ => (pki.proxy_client_cert.clone(), pki.proxy_client_key.clone()),
    };
    let mut pem = String::new();
    for path in [&cert, &key] {
        let text = std::fs::read_to_string(path).map_err(|source| {
            Error::Pki(pki::PkiError::File {
                what: "reading",
                path: path.clone(),
                source,
            })
        })?;
        pem.push_str(&text);
        pem.push('\n');
    }
    genplane_admission::webhook::client::Identity::from_pem(&pem).map_err(|why| {
        Error::Pki(pki::PkiError::Unusable {
            path: cert.clone(),
            why,
        })
    })?;
    Ok(pem)
}

/// Which of the server's own hooks that act as a client of it have what they need served: the
/// Feature API (feature reporting) and NetworkClaims (the well-known claim).
#[derive(Clone, Copy, Debug)]
struct LoopbackClients {
    features: bool,
    claims: bool,
}

/// A client of the server through the loopback kubeconfig it wrote (as its own role identity,
/// `system:genplane:apiserver`). The server's own clients reach it as any client would, so it
/// says at once, in the log, when they cannot (a serving certificate that does not name the
/// address, say); readiness then fails on the hooks that need it.
async fn loopback_client(context: &hooks::HookContext) -> Result<kube::Client, String> {
    let kubeconfig = context.loopback_kubeconfig();
    let (client, _) = genplane_controller::client::connect(Some(&kubeconfig))
        .await
        .map_err(|e| format!("connecting through {}: {e}", kubeconfig.display()))?;
    if let Err(error) = client.apiserver_version().await {
        tracing::error!(
            %error,
            kubeconfig = %kubeconfig.display(),
            "the API server cannot reach itself through its loopback kubeconfig: feature \
             reports and well-known claims will fail"
        );
    }
    Ok(client)
}

/// The well-known claim of the Service IP ranges (`kube-apiserver`, for
/// `--service-cluster-ip-range`).
fn service_claim(
    ranges: Vec<genplane_api::networkregistry::Prefix>,
) -> genplane_networkregistry::WellKnown {
    genplane_networkregistry::WellKnown {
        name: genplane_api::networkregistry::KUBE_APISERVER_CLAIM,
        reference: genplane_api::networkregistry::networkclaim::ResourceReference {
            group: String::new(),
            resource: "services".to_owned(),
        },
        prefixes: ranges,
        flag: "--service-cluster-ip-range",
        component: "kube-apiserver",
    }
}

/// The TLS configuration: the serving certificate, and client certificates verified against
/// `client_cas` (the client CA and the front proxies' CA) but not required (anonymous
/// requests may reach the health endpoints).
fn server_tls(
    cert: &Path,
    key: &Path,
    client_cas: &[PathBuf],
) -> Result<rustls::ServerConfig, String> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let chain = CertificateDer::pem_file_iter(cert)
        .map_err(|e| format!("reading {}: {e}", cert.display()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("parsing {}: {e}", cert.display()))?;
    let key =
        PrivateKeyDer::from_pem_file(key).map_err(|e| format!("reading {}: {e}", key.display()))?;
    let mut roots = rustls::RootCertStore::empty();
    for client_ca in client_cas {
        for ca in security::certificates_of(client_ca)? {
            roots
                .add(ca)
                .map_err(|e| format!("adding {}: {e}", client_ca.display()))?;
        }
    }
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .allow_unauthenticated()
    .build()
    .map_err(|e| format!("building the client certificate verifier: {e}"))?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .map_err(|e| format!("loading the serving certificate: {e}"))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

fn storage_config(config: &Config) -> StorageConfig {
    let options = &config.options;
    match config.backend {
        Backend::Sqlite => StorageConfig::Sqlite {
            path: options.data_dir.join("genplane.db"),
        },
        Backend::Etcd => {
            let storage = &options.storage;
            let mut etcd = EtcdConfig::new(storage.etcd_servers.clone());
            etcd.prefix = storage.etcd_prefix.clone();
            etcd.compaction_interval = config.etcd_compaction_interval;
            // A stalled etcd request ends before the API request waiting for it, which then
            // says what stalled.
            etcd.request_timeout = etcd.request_timeout.min(config.limits.request_timeout / 2);
            if storage.etcd_cafile.is_some() || storage.etcd_certfile.is_some() {
                etcd.tls = Some(EtcdTls {
                    ca_file: storage.etcd_cafile.clone(),
                    cert_file: storage.etcd_certfile.clone(),
                    key_file: storage.etcd_keyfile.clone(),
                });
            }
            StorageConfig::Etcd(etcd)
        }
    }
}
