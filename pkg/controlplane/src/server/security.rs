//! Who may make requests, and what they may do: authentication and authorization assembled
//! from the configuration.

use std::sync::Arc;

use genplane_apiserver::security::OidcDocuments;
use genplane_apiserver::{Resource, Security};
use genplane_authentication::request::{Authentication, TokenAuthenticator};
use genplane_authentication::requestheader::{ClientCertificates, RequestHeader};
use genplane_authorization::rbac::RbacAuthorizer;
use genplane_authorization::{AlwaysAllow, AlwaysDeny, Authorizer, PrivilegedGroups, Union};

use super::{AuthorizationMode, Config, Error};
use crate::ResourceStorage;
use crate::auth::{CacheLookup, ServiceAccountTokens, StaticTokens, TokenRequestIssuer};
use crate::rbac::EscalationChecks;

/// Who may make requests, and what they may do: the authentication chain (client
/// certificates, static tokens, service-account tokens, anonymous), the service-account
/// token issuer and its discovery documents, and the authorizer.
pub(super) fn security(
    config: &Config,
    served: &[Resource<ResourceStorage>],
    external_address: &str,
    rbac: &Arc<RbacAuthorizer>,
) -> Result<Security, Error> {
    use genplane_authentication::{keys, oidc, serviceaccount};
    let options = &config.options.authentication;
    // A server that serves no ServiceAccounts (a program's own control plane, or
    // `--runtime-config` turning them off) neither accepts nor issues their tokens.
    let lookup = CacheLookup::among(served);
    if lookup.is_none() {
        tracing::info!(
            "service accounts are not served: no service-account token authentication or TokenRequest"
        );
    }
    let signing_key = match &options.service_account_signing_key_file {
        Some(path) => keys::SigningKey::from_file(path).map_err(|e| {
            Error::Security(format!(
                "failed to parse service-account-issuer-key-file: {e}"
            ))
        })?,
        None => {
            let path = config
                .options
                .data_dir
                .join("pki")
                .join(keys::GENERATED_KEY_FILE);
            let (key, generated) = keys::SigningKey::load_or_generate(&path, Default::default())
                .map_err(|e| Error::Security(format!("preparing {}: {e}", path.display())))?;
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
                .map_err(|e| Error::Security(format!("reading {}: {e}", file.display())))?,
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
    if let Some(lookup) = &lookup {
        tokens.push(Arc::new(ServiceAccountTokens {
            verifier: serviceaccount::TokenAuthenticator::new(
                issuers.clone(),
                keys,
                audiences.clone(),
            ),
            lookup: lookup.clone(),
        }));
    }
    // Tokens this server does not know, the server it delegates to reviews.
    if let Some(kubeconfig) = &options.authentication_kubeconfig {
        tokens.push(Arc::new(
            crate::auth::delegated::DelegatedAuthenticator::new(kubeconfig.clone()),
        ));
    }
    let token_requests = TokenRequestIssuer {
        issuer: serviceaccount::TokenIssuer::new(issuers[0].clone(), signing_key),
        options: genplane_authentication::token_request::TokenRequestOptions::new(
            audiences,
            config.max_token_expiration,
        )
        .map_err(|e| Error::Security(e.to_string()))?,
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
    // What this server's own authorizers leave open, the server it delegates to decides.
    if let Some(kubeconfig) = &config.options.authorization.authorization_kubeconfig {
        chain.push(Arc::new(crate::auth::delegated::DelegatedAuthorizer::new(
            kubeconfig.clone(),
        )));
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
    let (client_certificates, request_header) = request_header(config)?;
    let mut security = Security::new(
        Authentication {
            tokens,
            anonymous,
            client_certificates: Some(client_certificates),
            request_header: Some(Arc::new(request_header)),
        },
        authorizer.clone(),
    );
    if config
        .authorization_modes
        .contains(&AuthorizationMode::Rbac)
    {
        security.escalation = Some(Arc::new(EscalationChecks {
            authorizer,
            resolver: rbac.clone(),
        }));
    }
    if lookup.is_some() {
        security.token_requests = Some(Arc::new(token_requests));
    }
    security.oidc = oidc;
    Ok(security)
}

/// The client CA (certificates naming users) and the CA of front proxies whose headers are
/// believed ([`RequestHeader`]), with the names and headers of `--requestheader-*`; the
/// generated front-proxy CA (names `front-proxy-client`) by default.
fn request_header(config: &Config) -> Result<(ClientCertificates, RequestHeader), Error> {
    let options = &config.options;
    let read = |path: &std::path::Path| -> Result<ClientCertificates, Error> {
        let roots = certificates_of(path).map_err(Error::Security)?;
        ClientCertificates::new(&roots)
            .map_err(|e| Error::Security(format!("{}: {e}", path.display())))
    };
    let clients = read(&client_ca_path(config))?;
    let proxies = read(&requestheader_ca_path(config))?;
    let lower = |names: &[String]| -> Vec<String> {
        names.iter().map(|n| n.to_ascii_lowercase()).collect()
    };
    let allowed_names = allowed_names(config);
    Ok((
        clients,
        RequestHeader {
            proxies,
            allowed_names,
            username_headers: lower(&options.authentication.requestheader_username_headers),
            group_headers: lower(&options.authentication.requestheader_group_headers),
            extra_prefixes: lower(&options.authentication.requestheader_extra_headers_prefix),
        },
    ))
}

/// The names a front proxy's certificate may have: `--requestheader-allowed-names`, or, with
/// the generated front-proxy CA, the generated proxy client's.
fn allowed_names(config: &Config) -> Vec<String> {
    let authentication = &config.options.authentication;
    if authentication.requestheader_client_ca_file.is_none()
        && authentication.requestheader_allowed_names.is_empty()
    {
        vec![super::pki::PROXY_CLIENT_USER.to_owned()]
    } else {
        authentication.requestheader_allowed_names.clone()
    }
}

/// What `kube-system/extension-apiserver-authentication` publishes of this configuration.
pub(super) fn published_authentication(
    config: &Config,
) -> Result<crate::cluster_authentication::Published, Error> {
    let read = |path: std::path::PathBuf| {
        std::fs::read_to_string(&path)
            .map_err(|e| Error::Security(format!("reading {}: {e}", path.display())))
    };
    let authentication = &config.options.authentication;
    Ok(crate::cluster_authentication::Published {
        client_ca: read(client_ca_path(config))?,
        requestheader_client_ca: read(requestheader_ca_path(config))?,
        allowed_names: allowed_names(config),
        username_headers: authentication.requestheader_username_headers.clone(),
        group_headers: authentication.requestheader_group_headers.clone(),
        extra_headers_prefix: authentication.requestheader_extra_headers_prefix.clone(),
    })
}

/// The CA of client certificates: `--client-ca-file`, or the generated one.
pub(super) fn client_ca_path(config: &Config) -> std::path::PathBuf {
    config
        .options
        .serving
        .client_ca_file
        .clone()
        .unwrap_or_else(|| config.options.data_dir.join("pki").join("ca.crt"))
}

/// The CA of front proxies: `--requestheader-client-ca-file`, or the generated one.
pub(super) fn requestheader_ca_path(config: &Config) -> std::path::PathBuf {
    config
        .options
        .authentication
        .requestheader_client_ca_file
        .clone()
        .unwrap_or_else(|| {
            config
                .options
                .data_dir
                .join("pki")
                .join("front-proxy-ca.crt")
        })
}

/// The certificates (DER) of the PEM file at `path`.
pub(super) fn certificates_of(
    path: &std::path::Path,
) -> Result<Vec<rustls::pki_types::CertificateDer<'static>>, String> {
    use rustls::pki_types::pem::PemObject as _;
    rustls::pki_types::CertificateDer::pem_file_iter(path)
        .map_err(|e| format!("reading {}: {e}", path.display()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("parsing {}: {e}", path.display()))
}
