//! `csrcleaner`: deletes CertificateSigningRequests past upstream's retention, checking every
//! request at start and then every hour ([`POLLING_INTERVAL`]): approved and issued ones an
//! hour after the approval, denied and failed ones an hour after that condition, pending ones
//! (no condition at all) a day after their creation, and issued ones whose certificate
//! expired ([`expired`]).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use genplane_api::certificates::{bytes_at, conditions, pem_blocks};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams};
use serde_json::Value;

/// How often every request is checked.
pub const POLLING_INTERVAL: Duration = Duration::from_secs(3600);
/// How long an approved and issued request is kept after its approval.
pub const APPROVED_EXPIRATION: i64 = 3600;
/// How long a denied (or failed) request is kept after that condition.
pub const DENIED_EXPIRATION: i64 = 3600;
/// How long a request without any condition is kept after its creation.
pub const PENDING_EXPIRATION: i64 = 24 * 3600;

fn seconds(time: Option<&Value>) -> Option<i64> {
    genplane_apimachinery::time::parse_time(time?.as_str()?).map(|t| t.seconds)
}

fn older_than(time: Option<&Value>, age: i64, now: i64) -> bool {
    seconds(time).is_some_and(|t| now - t > age)
}

/// Why `csr` (JSON) is to be deleted at `now` (Unix seconds), if it is.
pub fn expired(csr: &Value, now: i64) -> Option<&'static str> {
    let list = csr
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let certificate = bytes_at(csr, "/status/certificate");
    let condition_older = |type_: &str, age: i64| {
        list.iter()
            .any(|c| c["type"] == type_ && older_than(c.get("lastUpdateTime"), age, now))
    };
    if !certificate.is_empty() && condition_older(conditions::APPROVED, APPROVED_EXPIRATION) {
        return Some("issued and approved more than an hour ago");
    }
    if condition_older(conditions::DENIED, DENIED_EXPIRATION) {
        return Some("denied more than an hour ago");
    }
    if condition_older(conditions::FAILED, DENIED_EXPIRATION) {
        return Some("failed more than an hour ago");
    }
    if list.is_empty()
        && older_than(
            csr.pointer("/metadata/creationTimestamp"),
            PENDING_EXPIRATION,
            now,
        )
    {
        return Some("pending for more than a day");
    }
    let issued_expired = pem_blocks(&certificate).iter().any(|block| {
        x509_parser::parse_x509_certificate(&block.contents)
            .is_ok_and(|(_, cert)| cert.validity().not_after.timestamp() < now)
    });
    issued_expired.then_some("its certificate expired")
}

/// Runs the controller until it fails to list (it does not stop on its own).
pub async fn run(client: kube::Client) -> Result<(), kube::Error> {
    let resource = kube::api::ApiResource::erase::<
        k8s_openapi::api::certificates::v1::CertificateSigningRequest,
    >(&());
    let api: Api<DynamicObject> = Api::all_with(client, &resource);
    loop {
        match api.list(&ListParams::default()).await {
            Ok(list) => {
                let now = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
                for object in list.items {
                    let Ok(csr) = serde_json::to_value(&object) else {
                        continue;
                    };
                    let Some(why) = expired(&csr, now) else {
                        continue;
                    };
                    let name = object.metadata.name.clone().unwrap_or_default();
                    tracing::info!(name, why, "csrcleaner: deleting");
                    if let Err(error) = api.delete(&name, &DeleteParams::default()).await {
                        tracing::warn!(name, %error, "csrcleaner: delete failed");
                    }
                }
            }
            Err(error) => tracing::warn!(%error, "csrcleaner: list failed"),
        }
        tokio::time::sleep(POLLING_INTERVAL).await;
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const NOW: i64 = 1_800_000_000;

    fn at(seconds_ago: i64) -> String {
        genplane_apimachinery::meta::rfc3339(NOW - seconds_ago)
    }

    #[test]
    fn retention_is_upstreams() {
        let pending = |age: i64| json!({"metadata": {"creationTimestamp": at(age)}});
        assert_eq!(expired(&pending(3600), NOW), None);
        assert_eq!(
            expired(&pending(25 * 3600), NOW),
            Some("pending for more than a day")
        );
        let with = |type_: &str, age: i64, certificate: &str| {
            json!({"metadata": {"creationTimestamp": at(30 * 3600)}, "status": {
                "conditions": [{"type": type_, "status": "True", "lastUpdateTime": at(age)}],
                "certificate": certificate}})
        };
        // Approved but not issued stays; issued an hour after approval goes.
        assert_eq!(expired(&with("Approved", 7200, ""), NOW), None);
        assert_eq!(
            expired(&with("Approved", 7200, "eA=="), NOW),
            Some("issued and approved more than an hour ago")
        );
        assert_eq!(expired(&with("Approved", 60, "eA=="), NOW), None);
        assert_eq!(
            expired(&with("Denied", 7200, ""), NOW),
            Some("denied more than an hour ago")
        );
        assert_eq!(expired(&with("Denied", 60, ""), NOW), None);
        assert_eq!(
            expired(&with("Failed", 7200, ""), NOW),
            Some("failed more than an hour ago")
        );
        // An issued certificate past its NotAfter goes at once.
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.not_before = rcgen::date_time_ymd(2020, 1, 1);
        params.not_after = rcgen::date_time_ymd(2021, 1, 1);
        let old = params.self_signed(&key).unwrap().pem();
        use base64::Engine as _;
        let encoded = base64::engine::general_purpose::STANDARD.encode(old);
        assert_eq!(
            expired(&with("Approved", 60, &encoded), NOW),
            Some("its certificate expired")
        );
    }
}
