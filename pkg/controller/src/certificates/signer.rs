//! `csrsigning`: upstream's signing controller for the signers a generic control plane has
//! clients of, `kubernetes.io/kube-apiserver-client` and `kubernetes.io/legacy-unknown`, each
//! with its CA ([`super::SigningConfig`]).
//!
//! A request is signed once it is approved, not failed, not yet issued, and for a signer
//! served here ([`decide`]). The lifetime is `--cluster-signing-duration`, or the request's
//! `spec.expirationSeconds` when shorter (at least ten minutes). A request the signer refuses
//! gets a `Failed` condition with reason `SignerValidationFailure` and the refusal as message,
//! as upstream: for `kube-apiserver-client`, usages other than `client auth` (required),
//! `digital signature` and `key encipherment`, and (where upstream relies on the
//! CertificateSubjectRestriction admission plugin alone) the group `system:masters`; for
//! both, a request that does not parse or whose signature does not verify. The certificate is
//! written through `status` over the version read, so a request changed meanwhile is decided
//! again from the next event.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use futures::StreamExt as _;
use genplane_api::certificates::{
    KUBE_APISERVER_CLIENT_SIGNER, LEGACY_UNKNOWN_SIGNER, SYSTEM_MASTERS, bytes_at, conditions,
    parse_request,
};
use kube::api::{Api, DynamicObject, PostParams};
use kube::runtime::{WatchStreamExt as _, watcher};
use serde_json::{Value, json};

use super::authority::Authority;
use super::{CaFiles, SigningConfig};

/// Errors of the signing controller.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A signer's CA could not be loaded.
    #[error("csrsigning: {signer}: {source}")]
    Authority {
        /// The signer.
        signer: &'static str,
        /// Why.
        source: super::authority::Error,
    },
}

/// What the controller does with a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Nothing: not approved, failed, issued, or another signer's.
    Skip,
    /// Refuse it: a `Failed` condition with this message.
    Fail(String),
    /// Issue a certificate for these usages, valid this many seconds.
    Sign {
        /// `spec.usages`.
        usages: Vec<String>,
        /// The lifetime.
        ttl_seconds: i64,
    },
}

fn has_condition(csr: &Value, type_: &str) -> bool {
    csr.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|list| {
            list.iter()
                .any(|c| c["type"] == type_ && c["status"] == "True")
        })
}

/// The usages a `kube-apiserver-client` certificate may have (upstream's
/// `validAPIServerClientUsages`).
fn client_usages_problem(usages: &[String]) -> Option<String> {
    let mut client_auth = false;
    for usage in usages {
        match usage.as_str() {
            "digital signature" | "key encipherment" => {}
            "client auth" => client_auth = true,
            other => return Some(format!("invalid usage for client certificate: {other}")),
        }
    }
    (!client_auth).then(|| "missing required usage for client certificate: client auth".to_owned())
}

/// The lifetime of a certificate for a request that asked for `expiration_seconds`, given
/// the longest `max_seconds` (upstream's `duration`: the shorter, at least ten minutes).
pub fn lifetime(expiration_seconds: Option<i64>, max_seconds: i64) -> i64 {
    match expiration_seconds {
        None => max_seconds,
        Some(asked) if asked > max_seconds => max_seconds,
        Some(asked) => asked.max(600),
    }
}

/// What to do with `csr` (a CertificateSigningRequest as JSON) for `signer`, issuing at most
/// `max_seconds`.
pub fn decide(csr: &Value, signer: &str, max_seconds: i64) -> Decision {
    if !has_condition(csr, conditions::APPROVED) || has_condition(csr, conditions::FAILED) {
        return Decision::Skip;
    }
    let spec = &csr["spec"];
    if spec["signerName"] != signer {
        return Decision::Skip;
    }
    if csr
        .pointer("/status/certificate")
        .and_then(Value::as_str)
        .is_some_and(|c| !c.is_empty())
    {
        return Decision::Skip;
    }
    let usages: Vec<String> = spec["usages"]
        .as_array()
        .map(|list| {
            list.iter()
                .filter_map(|u| u.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let request = match parse_request(&bytes_at(csr, "/spec/request")) {
        Ok(request) => request,
        Err(problem) => return Decision::Fail(format!("unable to parse csr: {problem}")),
    };
    if signer == KUBE_APISERVER_CLIENT_SIGNER {
        if let Some(problem) = client_usages_problem(&usages) {
            return Decision::Fail(problem);
        }
        if request.organizations.iter().any(|o| o == SYSTEM_MASTERS) {
            return Decision::Fail(format!(
                "use of {KUBE_APISERVER_CLIENT_SIGNER} signer with {SYSTEM_MASTERS} group is not allowed"
            ));
        }
    }
    Decision::Sign {
        usages,
        ttl_seconds: lifetime(spec["expirationSeconds"].as_i64(), max_seconds),
    }
}

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

struct Signer {
    name: &'static str,
    authority: Authority,
}

fn load(signer: &'static str, files: Option<&CaFiles>) -> Result<Option<Signer>, Error> {
    let Some(files) = files else {
        return Ok(None);
    };
    let authority = Authority::from_files(&files.cert, &files.key)
        .map_err(|source| Error::Authority { signer, source })?;
    Ok(Some(Signer {
        name: signer,
        authority,
    }))
}

/// Runs the controller until its watch ends (it does not on its own). With no signer
/// configured it logs so and waits.
pub async fn run(client: kube::Client, config: SigningConfig) -> Result<(), Error> {
    let signers: Vec<Signer> = [
        load(
            KUBE_APISERVER_CLIENT_SIGNER,
            config.kube_apiserver_client.as_ref(),
        )?,
        load(LEGACY_UNKNOWN_SIGNER, config.legacy_unknown.as_ref())?,
    ]
    .into_iter()
    .flatten()
    .collect();
    if signers.is_empty() {
        tracing::info!(
            "csrsigning: no signing CA configured (--cluster-signing-cert-file and --cluster-signing-key-file): no certificate is issued"
        );
        std::future::pending::<()>().await;
    }
    let signers = Arc::new(signers);
    let max_seconds = i64::try_from(config.duration.as_secs()).unwrap_or(i64::MAX);
    let resource = kube::api::ApiResource::erase::<
        k8s_openapi::api::certificates::v1::CertificateSigningRequest,
    >(&());
    let api: Api<DynamicObject> = Api::all_with(client, &resource);
    let mut events = watcher(api.clone(), watcher::Config::default())
        .default_backoff()
        .applied_objects()
        .boxed();
    while let Some(event) = events.next().await {
        let object = match event {
            Ok(object) => object,
            Err(error) => {
                tracing::debug!(%error, "csrsigning watch");
                continue;
            }
        };
        let Ok(csr) = serde_json::to_value(&object) else {
            continue;
        };
        for signer in signers.iter() {
            if let Err(error) = handle(&api, signer, &csr, max_seconds).await {
                tracing::warn!(%error, name = object.metadata.name.as_deref().unwrap_or(""), "csrsigning");
            }
        }
    }
    Ok(())
}

async fn handle(
    api: &Api<DynamicObject>,
    signer: &Signer,
    csr: &Value,
    max_seconds: i64,
) -> Result<(), kube::Error> {
    let name = csr
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let mut updated = csr.clone();
    match decide(csr, signer.name, max_seconds) {
        Decision::Skip => return Ok(()),
        Decision::Fail(message) => {
            tracing::info!(name, signer = signer.name, %message, "csrsigning: refused");
            let status = &mut updated["status"];
            if !status.is_object() {
                *status = json!({});
            }
            let condition = json!({
                "type": conditions::FAILED,
                "status": "True",
                "reason": "SignerValidationFailure",
                "message": message,
                "lastUpdateTime": genplane_apimachinery::meta::rfc3339(now()),
            });
            match status["conditions"].as_array_mut() {
                Some(list) => list.push(condition),
                None => status["conditions"] = json!([condition]),
            }
        }
        Decision::Sign {
            usages,
            ttl_seconds,
        } => {
            let Ok(request) = parse_request(&bytes_at(csr, "/spec/request")) else {
                return Ok(());
            };
            let pem = match signer.authority.sign(&request, &usages, ttl_seconds, now()) {
                Ok(pem) => pem,
                Err(error) => {
                    tracing::warn!(name, %error, "csrsigning: error auto signing csr");
                    return Ok(());
                }
            };
            use base64::Engine as _;
            updated["status"]["certificate"] =
                json!(base64::engine::general_purpose::STANDARD.encode(pem));
            tracing::info!(name, signer = signer.name, "csrsigning: issued");
        }
    }
    let Ok(body) = serde_json::from_value::<DynamicObject>(updated) else {
        return Ok(());
    };
    match api
        .replace_status(name, &PostParams::default(), &body)
        .await
    {
        // A request changed meanwhile comes again as a new event.
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        other => other.map(drop),
    }
}

#[cfg(test)]
mod tests;
