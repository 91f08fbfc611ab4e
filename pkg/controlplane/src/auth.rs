//! The authentication pieces that read the served resources: service-account tokens checked
//! against the live ServiceAccounts and Secrets in the watch caches, the static token file,
//! and the TokenRequest issuer (`serviceaccounts/<name>/token`); and [`delegated`]
//! authorization, asked of another API server.

pub mod delegated;

use std::sync::Arc;

use genplane_apimachinery::errors::ApiError;
use genplane_apiserver::security::TokenRequests;
use genplane_authentication::UserInfo;
use genplane_authentication::request::TokenAuthenticator;
use genplane_authentication::serviceaccount::{
    self, LiveObject, ServiceAccountLookup, TokenIssuer,
};
use genplane_authentication::token_file::TokenFile;
use genplane_authentication::token_request::{self, TokenRequestOptions};
use serde_json::Value;

use crate::ResourceStorage;

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// Finds ServiceAccounts and Secrets in their watch caches (a moment behind the store at
/// most, as upstream's informer-backed lookup).
#[derive(Clone, Debug)]
pub struct CacheLookup {
    service_accounts: Arc<ResourceStorage>,
    secrets: Arc<ResourceStorage>,
}

impl CacheLookup {
    /// A lookup in the caches of the served `resources`, or `None` when they do not serve
    /// both ServiceAccounts and Secrets.
    pub fn among(resources: &[genplane_apiserver::Resource<ResourceStorage>]) -> Option<Self> {
        let cache = |name: &str| {
            resources
                .iter()
                .find(|r| r.info.group.is_empty() && r.info.resource == name)
                .and_then(|r| r.store())
                .map(|store| store.shared_storage())
        };
        Some(Self {
            service_accounts: cache("serviceaccounts")?,
            secrets: cache("secrets")?,
        })
    }

    fn live(cache: &ResourceStorage, key: &str) -> Option<LiveObject> {
        let found = cache.peek(key)?;
        let object: Value = serde_json::from_slice(&found.value).ok()?;
        genplane_apiserver::security::live_object(&object)
    }
}

impl ServiceAccountLookup for CacheLookup {
    fn service_account(&self, namespace: &str, name: &str) -> Option<LiveObject> {
        Self::live(
            &self.service_accounts,
            &format!("/registry/serviceaccounts/{namespace}/{name}"),
        )
    }

    fn secret(&self, namespace: &str, name: &str) -> Option<LiveObject> {
        Self::live(
            &self.secrets,
            &format!("/registry/secrets/{namespace}/{name}"),
        )
    }
}

/// Service-account tokens as bearer tokens.
#[derive(Debug)]
pub struct ServiceAccountTokens {
    /// The verifier.
    pub verifier: serviceaccount::TokenAuthenticator,
    /// Where the accounts are looked up.
    pub lookup: CacheLookup,
}

impl TokenAuthenticator for ServiceAccountTokens {
    fn authenticate(
        &self,
        token: &str,
        audiences: Option<&[String]>,
    ) -> Result<Option<(UserInfo, Vec<String>)>, String> {
        match self
            .verifier
            .authenticate(token, audiences, &self.lookup, now())
        {
            Ok(found) => Ok(found.map(|a| (a.user, a.audiences))),
            Err(error) => Err(error.to_string()),
        }
    }
}

/// The static tokens of `--token-auth-file`. They carry no audience: as upstream's
/// audience-agnostic wrapper, they are good for the API server's audiences only.
#[derive(Debug)]
pub struct StaticTokens {
    /// The tokens.
    pub file: TokenFile,
    /// The API server's audiences (`--api-audiences`, or the first issuer).
    pub api_audiences: Vec<String>,
}

impl TokenAuthenticator for StaticTokens {
    fn authenticate(
        &self,
        token: &str,
        audiences: Option<&[String]>,
    ) -> Result<Option<(UserInfo, Vec<String>)>, String> {
        let Some(user) = self.file.authenticate(token) else {
            return Ok(None);
        };
        let good_for: Vec<String> = match audiences {
            None => self.api_audiences.clone(),
            Some(asked) => asked
                .iter()
                .filter(|a| self.api_audiences.contains(a))
                .cloned()
                .collect(),
        };
        if audiences.is_some() && good_for.is_empty() {
            return Ok(None);
        }
        Ok(Some((user, good_for)))
    }
}

/// Issues tokens for `serviceaccounts/<name>/token`.
#[derive(Debug)]
pub struct TokenRequestIssuer {
    /// The signer.
    pub issuer: TokenIssuer,
    /// Audiences and expiry limits.
    pub options: TokenRequestOptions,
}

impl TokenRequests for TokenRequestIssuer {
    fn create(
        &self,
        namespace: &str,
        name: &str,
        body: &Value,
        now: i64,
        lookup: &dyn ServiceAccountLookup,
    ) -> Result<(Value, Vec<String>), ApiError> {
        token_request::create(
            body,
            namespace,
            name,
            &self.options,
            &self.issuer,
            lookup,
            now,
        )
        .map(|created| (created.response, created.warnings))
        .map_err(|e| e.to_status().into())
    }
}
