//! The client of CustomResourceDefinition conversion webhooks (`spec.conversion.strategy:
//! Webhook`), behaving as Kubernetes 1.33's apiextensions-apiserver does.
//!
//! A [`ConversionWebhook`] is built once per CRD from its `spec.conversion` and owns one HTTP
//! client (so one connection pool and one set of trusted roots: the CRD's `caBundle`, or the
//! system roots without one). [`ConversionWebhook::convert`] sends the objects that are not yet in
//! the desired version in one `apiextensions.k8s.io/v1` (or `v1beta1`) `ConversionReview`, and
//! checks the answer as upstream does:
//!
//! - the review must be a `ConversionReview` of the version sent (`v1` only: `v1beta1` answers
//!   were never checked upstream), carry a `response`, and (`v1` only) echo the request `uid`;
//! - `response.result.status` must be `Success`; otherwise the webhook's `result.message` is the
//!   error;
//! - it must return as many objects as were sent, each in the desired `apiVersion` with the same
//!   `kind`, `metadata.name`, `metadata.namespace` and `metadata.uid`;
//! - the webhook may change only `metadata.labels` and `metadata.annotations` (validated as on
//!   any write when they changed); every other metadata field is restored from the original.
//!
//! Objects already in the desired version are not sent, and no call is made when nothing needs
//! converting. An object holding only `apiVersion` and `kind` is "converted" locally by setting
//! its `apiVersion`, as upstream does for the cacher's start-up smoke conversion.
//!
//! Requests use HTTP/1.1 only (upstream chose it so that concurrent calls spread over several
//! webhook replicas), time out after [`DEFAULT_TIMEOUT`] (30 s, upstream's client timeout, also
//! sent to the webhook as `?timeout=30s` as client-go does), and honour the `HTTPS_PROXY` /
//! `NO_PROXY` environment variables as upstream's transport does.
//!
//! # Error messages
//!
//! [`ConversionError`]'s messages follow upstream's, because the API returns them to users in
//! `500` Status messages:
//!
//! - `conversion webhook for stable.example.com/v1, Kind=CronTab failed: <reason>` when the call
//!   fails or the review is malformed or reports a failure;
//! - `conversion for stable.example.com/v1, Kind=CronTab returned 1 objects, expected 2`, and
//!   `... returned invalid converted object at index 1: <reason>` / `... returned invalid metadata
//!   in object at index 1: <reason>` when the converted objects break the rules above. As
//!   upstream, the index counts the objects sent from 1.
//!
//! The `group/version, Kind=kind` named is that of the first object sent. Upstream 1.33 names
//! the list (or, for one object, an empty `/, Kind=`) in the inner part of a failed call and
//! prefixes it with `conversion for <object> failed: `; genplane names the object once instead.
//!
//! # No blocking
//!
//! A call is only ever awaited ([`ConversionWebhook::convert`]): the registry's store awaits
//! conversions before it asks a strategy for an object's served or stored form
//! (`genplane_registry::Conversion`), and watches share one call per event through an
//! asynchronous cell. No thread is parked and no lock is held while a webhook answers, so a
//! slow or hanging webhook holds up only the requests that need it.

use std::time::Duration;

use genplane_admission::webhook::client;
use genplane_admission::webhook::resolver::{ServiceReference, ServiceResolver};
use genplane_apimachinery::validation::field::Path;
use genplane_apimachinery::validation::{validate_annotations, validate_labels};
use serde_json::{Map, Value, json};

/// How long one conversion call may take, as upstream's webhook client allows.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// The group of `ConversionReview`.
const REVIEW_GROUP: &str = "apiextensions.k8s.io";

/// Why a CRD's `spec.conversion` cannot give a webhook client.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// `spec.conversion.strategy` is not `Webhook`.
    #[error("conversion strategy is {0:?}, not \"Webhook\"")]
    NotWebhook(String),
    /// `spec.conversion.webhook` is missing.
    #[error("spec.conversion.webhook is required when spec.conversion.strategy is \"Webhook\"")]
    MissingWebhook,
    /// The webhook's `service` reference cannot be resolved.
    #[error("conversion webhook service: {0}")]
    ServiceReference(String),
    /// Neither `url` nor `service` is set.
    #[error("webhook configuration must have either service or URL")]
    MissingUrl,
    /// `url` does not parse.
    #[error("Unparsable URL: {0}")]
    InvalidUrl(String),
    /// `url` is not `https://`.
    #[error("conversion webhook URL {0:?} must use the https scheme")]
    NotHttps(String),
    /// `caBundle` is not base64 of PEM certificates.
    #[error("unable to load root certificates: {0}")]
    CaBundle(String),
    /// `conversionReviewVersions` names neither `v1` nor `v1beta1`.
    #[error("no supported conversion review versions")]
    NoSupportedReviewVersion,
    /// The HTTP client could not be built (e.g. the system roots could not be loaded).
    #[error("building the conversion webhook client: {0}")]
    Client(#[source] reqwest::Error),
}

/// Why a conversion failed. The messages are upstream's (see the module documentation).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConversionError {
    /// An object given to convert is not a JSON object with string `apiVersion` and `kind`.
    #[error("object at index {index} to convert has no apiVersion or kind")]
    InvalidInput {
        /// The index in the objects given.
        index: usize,
    },
    /// The call failed, or the review it answered is malformed or reports a failure.
    #[error("conversion webhook for {subject} failed: {reason}")]
    Failed {
        /// `group/version, Kind=kind` of the first object sent.
        subject: String,
        /// What went wrong: the transport error, the malformed part, or the webhook's message.
        reason: String,
    },
    /// The webhook returned a different number of objects than it was sent.
    #[error("conversion for {subject} returned {returned} objects, expected {expected}")]
    WrongCount {
        /// `group/version, Kind=kind` of the first object sent.
        subject: String,
        /// How many came back.
        returned: usize,
        /// How many were sent.
        expected: usize,
    },
    /// A converted object has the wrong apiVersion or kind, or a changed name, namespace or uid.
    #[error(
        "conversion for {subject} returned invalid converted object at index {index}: {reason}"
    )]
    InvalidObject {
        /// `group/version, Kind=kind` of the first object sent.
        subject: String,
        /// The position among the objects sent, counted from 1 as upstream does.
        index: usize,
        /// What is wrong.
        reason: String,
    },
    /// A converted object's metadata is malformed, or its new labels or annotations are invalid.
    #[error(
        "conversion for {subject} returned invalid metadata in object at index {index}: {reason}"
    )]
    InvalidMetadata {
        /// `group/version, Kind=kind` of the first object sent.
        subject: String,
        /// The position among the objects sent, counted from 1 as upstream does.
        index: usize,
        /// What is wrong.
        reason: String,
    },
}

/// The `ConversionReview` version the webhook speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ReviewVersion {
    V1,
    V1beta1,
}

impl ReviewVersion {
    fn as_str(self) -> &'static str {
        match self {
            ReviewVersion::V1 => "v1",
            ReviewVersion::V1beta1 => "v1beta1",
        }
    }
}

/// The conversion webhook of one CRD. Share it behind an `Arc`; calls may run concurrently.
#[derive(Debug)]
pub struct ConversionWebhook {
    /// Where and how calls go.
    endpoint: Endpoint,
    /// The webhook URL without query, as configured.
    base_url: reqwest::Url,
}

/// Everything one call needs; cheap to clone (the client is shared).
#[derive(Clone, Debug)]
struct Endpoint {
    client: reqwest::Client,
    /// The URL called: the configured one with `?timeout=...`.
    url: reqwest::Url,
    review_version: ReviewVersion,
    timeout: Duration,
}

impl ConversionWebhook {
    /// Reads a CRD's `spec.conversion` (with `strategy: Webhook`), a `service` reference
    /// resolved through DNS (see [`ConversionWebhook::resolved`]).
    pub fn new(crd_conversion: &Value) -> Result<ConversionWebhook, Error> {
        Self::resolved(crd_conversion, &ServiceResolver::default())
    }

    /// Reads a CRD's `spec.conversion` (with `strategy: Webhook`): `webhook.clientConfig.url`
    /// (https only) or its `service` reference, reached through `resolver`;
    /// `webhook.clientConfig.caBundle` (base64 of PEM certificates; the system roots without
    /// it), and `webhook.conversionReviewVersions` (the first of `v1` / `v1beta1` listed, as
    /// upstream picks).
    pub fn resolved(
        crd_conversion: &Value,
        resolver: &ServiceResolver,
    ) -> Result<ConversionWebhook, Error> {
        let strategy = crd_conversion
            .get("strategy")
            .and_then(Value::as_str)
            .unwrap_or("None");
        if strategy != "Webhook" {
            return Err(Error::NotWebhook(strategy.to_owned()));
        }
        let webhook = crd_conversion
            .get("webhook")
            .filter(|webhook| webhook.is_object())
            .ok_or(Error::MissingWebhook)?;
        let client_config = webhook.get("clientConfig").unwrap_or(&Value::Null);

        let url = client_config
            .get("url")
            .and_then(Value::as_str)
            .filter(|url| !url.is_empty());
        let service = client_config
            .get("service")
            .filter(|s| !s.is_null())
            .map(|s| serde_json::from_value::<ServiceReference>(s.clone()));
        let (url, overridden) = match (url, service) {
            (Some(url), _) => (url.to_owned(), None),
            (None, Some(Ok(service))) => {
                let endpoint = resolver
                    .resolve(&service)
                    .map_err(|e| Error::ServiceReference(e.to_string()))?;
                let overridden = endpoint.address.map(|a| (endpoint.server_name, a));
                (endpoint.url, overridden)
            }
            (None, Some(Err(error))) => return Err(Error::ServiceReference(error.to_string())),
            (None, None) => return Err(Error::MissingUrl),
        };
        let url = url.as_str();
        let mut base_url =
            reqwest::Url::parse(url).map_err(|error| Error::InvalidUrl(error.to_string()))?;
        if base_url.scheme() != "https" {
            return Err(Error::NotHttps(url.to_owned()));
        }
        // client-go builds the request from the scheme, host and path only.
        base_url.set_query(None);
        base_url.set_fragment(None);

        let roots = match client_config.get("caBundle").and_then(Value::as_str) {
            Some(bundle) if !bundle.is_empty() => {
                Some(client::parse_ca_bundle(bundle).map_err(Error::CaBundle)?)
            }
            _ => None,
        };

        let review_version = webhook
            .get("conversionReviewVersions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find_map(|version| match version.as_str() {
                Some("v1") => Some(ReviewVersion::V1),
                Some("v1beta1") => Some(ReviewVersion::V1beta1),
                _ => None,
            })
            .ok_or(Error::NoSupportedReviewVersion)?;

        let client = client::build_client(
            roots.as_deref(),
            None,
            overridden
                .as_ref()
                .map(|(name, address)| (name.as_str(), *address)),
        )
        .map_err(Error::Client)?;
        Ok(ConversionWebhook {
            endpoint: Endpoint {
                client,
                url: client::url_with_timeout(&base_url, DEFAULT_TIMEOUT),
                review_version,
                timeout: DEFAULT_TIMEOUT,
            },
            base_url,
        })
    }

    /// The same webhook with another call timeout than [`DEFAULT_TIMEOUT`]. Meant for tests;
    /// CRDs have no timeout field.
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> ConversionWebhook {
        self.endpoint.timeout = timeout;
        self.endpoint.url = client::url_with_timeout(&self.base_url, timeout);
        self
    }

    /// The URL called, with its `?timeout=` query.
    pub fn url(&self) -> &str {
        self.endpoint.url.as_str()
    }

    /// The `ConversionReview` version sent: `v1` or `v1beta1`.
    pub fn review_version(&self) -> &'static str {
        self.endpoint.review_version.as_str()
    }

    /// The call timeout.
    pub fn timeout(&self) -> Duration {
        self.endpoint.timeout
    }

    /// Converts `objects` to `desired_api_version` (`group/version`), returning them in the
    /// same order. Objects already in that version are returned unchanged and not sent; when
    /// none needs converting, no call is made.
    pub async fn convert(
        &self,
        objects: Vec<Value>,
        desired_api_version: &str,
    ) -> Result<Vec<Value>, ConversionError> {
        self.endpoint.convert(objects, desired_api_version).await
    }
}

impl Endpoint {
    async fn convert(
        &self,
        mut objects: Vec<Value>,
        desired: &str,
    ) -> Result<Vec<Value>, ConversionError> {
        // Which objects go to the webhook, in order.
        let mut to_send = Vec::new();
        for (index, object) in objects.iter_mut().enumerate() {
            let (api_version, only_type) = match object.as_object() {
                Some(map) => match (
                    map.get("apiVersion").and_then(Value::as_str),
                    map.get("kind").and_then(Value::as_str),
                ) {
                    (Some(api_version), Some(_)) => (api_version, map.len() == 2),
                    _ => return Err(ConversionError::InvalidInput { index }),
                },
                None => return Err(ConversionError::InvalidInput { index }),
            };
            if api_version == desired {
                continue;
            }
            if only_type {
                // Nothing but apiVersion and kind: nothing for a webhook to convert.
                object["apiVersion"] = Value::String(desired.to_owned());
                continue;
            }
            to_send.push(index);
        }
        let Some(&first) = to_send.first() else {
            return Ok(objects);
        };
        let subject = subject_of(&objects[first]);

        let uid = uuid::Uuid::new_v4().to_string();
        // The objects move into the review for serialising and back out afterwards.
        let sent: Vec<Value> = to_send.iter().map(|&i| objects[i].take()).collect();
        let mut review = json!({
            "apiVersion": format!("{REVIEW_GROUP}/{}", self.review_version.as_str()),
            "kind": "ConversionReview",
            "request": {
                "uid": uid,
                "desiredAPIVersion": desired,
                "objects": sent,
            },
        });
        let body =
            serde_json::to_vec(&review).expect("invariant: a serde_json::Value always serialises");
        if let Value::Array(sent) = review["request"]["objects"].take() {
            for (&i, object) in to_send.iter().zip(sent) {
                objects[i] = object;
            }
        }

        let failed = |reason: String| ConversionError::Failed {
            subject: subject.clone(),
            reason,
        };
        let started = std::time::Instant::now();
        let answer = self.post(body).await;
        // Upstream logs calls slower than 50 ms plus 8 ms per object (its SLO allowance).
        let elapsed = started.elapsed();
        let allowance = Duration::from_millis(50 + 8 * to_send.len() as u64);
        if elapsed > allowance {
            tracing::info!(
                url = %self.url,
                uid,
                desired_api_version = desired,
                objects = to_send.len(),
                ?elapsed,
                "slow conversion webhook call"
            );
        }
        let answer = answer.map_err(&failed)?;
        let converted = self.converted_objects(&uid, &answer).map_err(&failed)?;
        if converted.len() != to_send.len() {
            return Err(ConversionError::WrongCount {
                subject,
                returned: converted.len(),
                expected: to_send.len(),
            });
        }

        for (position, (&i, converted)) in to_send.iter().zip(converted).enumerate() {
            let index = position + 1;
            let object = check_converted(&objects[i], converted, desired).map_err(
                |(metadata, reason)| {
                    if metadata {
                        ConversionError::InvalidMetadata {
                            subject: subject.clone(),
                            index,
                            reason,
                        }
                    } else {
                        ConversionError::InvalidObject {
                            subject: subject.clone(),
                            index,
                            reason,
                        }
                    }
                },
            )?;
            objects[i] = object;
        }
        Ok(objects)
    }

    /// POSTs the review; the response body on a 2xx answer, else the error as client-go
    /// words it.
    async fn post(&self, body: Vec<u8>) -> Result<Vec<u8>, String> {
        client::post_json(&self.client, &self.url, body, self.timeout, None).await
    }

    /// Checks the review answered and takes its converted objects.
    fn converted_objects(&self, uid: &str, answer: &[u8]) -> Result<Vec<Value>, String> {
        converted_objects(self.review_version, uid, answer)
    }
}

/// Checks that `answer` is the webhook's answer to the review `uid` of `review_version`, and
/// takes its converted objects.
fn converted_objects(
    review_version: ReviewVersion,
    uid: &str,
    answer: &[u8],
) -> Result<Vec<Value>, String> {
    let mut review: Value = serde_json::from_slice(answer)
        .map_err(|error| format!("couldn't get version/kind; json parse error: {error}"))?;
    if review_version == ReviewVersion::V1 {
        let api_version = review.get("apiVersion").and_then(Value::as_str);
        let kind = review.get("kind").and_then(Value::as_str);
        let expected = format!("{REVIEW_GROUP}/v1");
        if api_version != Some(expected.as_str()) || kind != Some("ConversionReview") {
            return Err(format!(
                "expected webhook response of {REVIEW_GROUP}/v1, Kind=ConversionReview, got {}",
                group_version_kind(api_version.unwrap_or_default(), kind.unwrap_or_default())
            ));
        }
    }
    let response = match review.get_mut("response") {
        Some(response @ Value::Object(_)) => response,
        _ => return Err("no response provided".to_owned()),
    };
    if review_version == ReviewVersion::V1 {
        let got = response
            .get("uid")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if got != uid {
            return Err(format!(
                "expected response.uid={}, got {}",
                genplane_apimachinery::gofmt::Quoted(uid),
                genplane_apimachinery::gofmt::Quoted(got)
            ));
        }
    }
    let result = response.get("result").unwrap_or(&Value::Null);
    let status = result
        .get("status")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if status != "Success" {
        let message = result
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or_default();
        return Err(if message.is_empty() {
            format!("response.result.status was '{status}', not 'Success'")
        } else {
            message.to_owned()
        });
    }
    match response.get_mut("convertedObjects").map(Value::take) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(objects)) => Ok(objects),
        Some(other) => Err(format!(
            "response.convertedObjects must be a list, but is {}",
            go_type(&other)
        )),
    }
}

/// `group/version, Kind=kind`, as Go prints a GroupVersionKind.
fn group_version_kind(api_version: &str, kind: &str) -> String {
    if api_version.contains('/') {
        format!("{api_version}, Kind={kind}")
    } else {
        format!("/{api_version}, Kind={kind}")
    }
}

fn subject_of(object: &Value) -> String {
    group_version_kind(
        object
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or_default(),
        object
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default(),
    )
}

/// A string field of `metadata`, `""` when absent, as unstructured getters read it.
fn metadata_string<'a>(metadata: Option<&'a Value>, field: &str) -> &'a str {
    metadata
        .and_then(|metadata| metadata.get(field))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// Checks one converted object against the original it came from, and restores the original's
/// metadata except labels and annotations. The error says whether it is about metadata.
fn check_converted(
    original: &Value,
    converted: Value,
    desired: &str,
) -> Result<Value, (bool, String)> {
    let Value::Object(mut converted) = converted else {
        return Err((
            false,
            format!("must be an object, but is {}", go_type(&converted)),
        ));
    };
    let got_api_version = converted
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if got_api_version != desired {
        return Err((
            false,
            format!("invalid groupVersion (expected {desired}, received {got_api_version})"),
        ));
    }
    let original_kind = original
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let got_kind = converted
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if got_kind != original_kind {
        return Err((
            false,
            format!("invalid kind (expected {original_kind}, received {got_kind})"),
        ));
    }
    for (field, label) in [("name", "name"), ("namespace", "namespace"), ("uid", "UID")] {
        let before = metadata_string(original.get("metadata"), field);
        let after = metadata_string(converted.get("metadata"), field);
        if before != after {
            return Err((
                false,
                format!("must have the same {label}: {before} != {after}"),
            ));
        }
    }
    restore_metadata(original, &mut converted).map_err(|reason| (true, reason))?;
    Ok(Value::Object(converted))
}

/// Puts the original's metadata back into `converted`, keeping the converted labels and
/// annotations (validated when they changed).
fn restore_metadata(original: &Value, converted: &mut Map<String, Value>) -> Result<(), String> {
    let original_metadata = original.get("metadata");
    let converted_metadata = match (original_metadata, converted.remove("metadata")) {
        (None, None) => return Ok(()),
        (Some(_), None) => return Err("missing metadata in converted object".to_owned()),
        (_, Some(Value::Object(metadata))) => metadata,
        (_, Some(other)) => {
            return Err(format!(
                "invalid metadata of type {} in converted object",
                go_type(&other)
            ));
        }
    };
    let mut result = match original_metadata {
        None => Map::new(),
        Some(Value::Object(metadata)) => metadata.clone(),
        Some(other) => {
            return Err(format!(
                "invalid metadata of type {} in input object",
                go_type(other)
            ));
        }
    };
    for field in ["labels", "annotations"] {
        let converted_field = match converted_metadata.get(field) {
            None | Some(Value::Null) => {
                result.remove(field);
                continue;
            }
            Some(Value::Object(map)) => map,
            Some(other) => {
                return Err(format!(
                    "invalid metadata.{field} of type {} in converted object",
                    go_type(other)
                ));
            }
        };
        let empty = Map::new();
        let original_field = match result.get(field) {
            Some(Value::Object(map)) => map,
            _ => &empty,
        };
        let mut changed = original_field.len() != converted_field.len();
        let mut strings = std::collections::BTreeMap::new();
        for (key, value) in converted_field {
            let Some(text) = value.as_str() else {
                return Err(format!(
                    "metadata.{field}[{key}] must be a string, but is {} in converted object",
                    go_type(value)
                ));
            };
            if original_field.get(key) != Some(value) {
                changed = true;
            }
            strings.insert(key.clone(), text.to_owned());
        }
        if changed {
            let errors = if field == "labels" {
                validate_labels(&strings, &Path::new("metadata").child("labels"))
            } else {
                // Upstream names the path in the singular here.
                validate_annotations(&strings, &Path::new("metadata").child("annotation"))
            };
            if !errors.is_empty() {
                return Err(errors.to_string());
            }
        }
        result.insert(field.to_owned(), Value::Object(converted_field.clone()));
    }
    converted.insert("metadata".to_owned(), Value::Object(result));
    Ok(())
}

/// The Go type an unstructured JSON value decodes to, for messages that print `%T`.
fn go_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(number) if number.is_f64() => "float64",
        Value::Number(_) => "int64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

/// The fuzz entry point of reading a conversion webhook's answer: the first byte picks the
/// review version (`v1` or `v1beta1`), the rest is the answer to a review (uid `fuzz`)
/// converting CronTabs to `stable.example.com/v2`. Each converted object is checked against
/// an original as an answer from a webhook is.
///
/// # Panics
///
/// When reading the answer or checking an object panics, or a checked object is not of the
/// desired version.
pub fn exercise(data: &[u8]) {
    let Some((&which, answer)) = data.split_first() else {
        return;
    };
    let review_version = if which & 1 == 0 {
        ReviewVersion::V1
    } else {
        ReviewVersion::V1beta1
    };
    let Ok(converted) = converted_objects(review_version, "fuzz", answer) else {
        return;
    };
    let original = json!({
        "apiVersion": "stable.example.com/v1", "kind": "CronTab",
        "metadata": {"name": "a", "namespace": "default", "uid": "5e1f0000-0000-0000-0000-000000000001",
            "labels": {"app": "web"}, "annotations": {"note": "x"}},
        "spec": {"cronSpec": "* * * * *"},
    });
    for object in converted {
        if let Ok(checked) = check_converted(&original, object, "stable.example.com/v2") {
            assert_eq!(checked["apiVersion"], "stable.example.com/v2", "{checked}");
        }
    }
}

#[cfg(test)]
mod tests;
