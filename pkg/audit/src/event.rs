//! The `audit.k8s.io/v1` `Event`, serialized as kube-apiserver writes it.
//!
//! Fields appear in the order of upstream's Go struct, empty optional fields are left out as
//! `omitempty` leaves them out, and timestamps are `metav1.MicroTime`: RFC 3339 in UTC with
//! exactly six fractional digits.

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use genplane_authentication::UserInfo;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::policy::{API_VERSION, Level, Stage};

/// One audit event (`audit.k8s.io/v1` `Event`).
///
/// The recorded bodies are kept as raw JSON, written as given.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    /// Always `Event`.
    pub kind: String,
    /// Always `audit.k8s.io/v1`.
    pub api_version: String,
    /// The level the request was audited at.
    pub level: Level,
    /// The request's audit ID, shared by all its events.
    #[serde(rename = "auditID")]
    pub audit_id: String,
    /// The stage this event was written at.
    pub stage: Stage,
    /// The path and query of the request.
    #[serde(rename = "requestURI")]
    pub request_uri: String,
    /// The verb.
    pub verb: String,
    /// The authenticated user.
    pub user: UserInfo,
    /// The user the request was made as, when impersonating.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub impersonated_user: Option<UserInfo>,
    /// The client addresses (see [`crate::SourceIps::resolve`]).
    #[serde(rename = "sourceIPs", default, skip_serializing_if = "Vec::is_empty")]
    pub source_ips: Vec<String>,
    /// The user agent, truncated to 1024 bytes.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub user_agent: String,
    /// The object the request addressed (resource requests only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object_ref: Option<ObjectReference>,
    /// The response code, and for `Status` responses their status, message, reason, details.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_status: Option<ResponseStatus>,
    /// The request body, at level `Request` and above.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_object: Option<Box<RawValue>>,
    /// The response body, at level `RequestResponse`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_object: Option<Box<RawValue>>,
    /// When the request was received.
    pub request_received_timestamp: String,
    /// When this stage was reached.
    pub stage_timestamp: String,
    /// Annotations set while handling the request (e.g. the authorization decision).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

impl Event {
    /// A new event for a request, at `RequestReceived`.
    pub(crate) fn new(level: Level, audit_id: String, verb: &str, request_uri: &str) -> Self {
        Event {
            kind: "Event".to_owned(),
            api_version: API_VERSION.to_owned(),
            level,
            audit_id,
            stage: Stage::RequestReceived,
            request_uri: request_uri.to_owned(),
            verb: verb.to_owned(),
            user: UserInfo::default(),
            impersonated_user: None,
            source_ips: Vec::new(),
            user_agent: String::new(),
            object_ref: None,
            response_status: None,
            request_object: None,
            response_object: None,
            request_received_timestamp: String::new(),
            stage_timestamp: String::new(),
            annotations: BTreeMap::new(),
        }
    }
}

/// The object a request addressed (`audit.k8s.io/v1` `ObjectReference`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectReference {
    /// The resource.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub resource: String,
    /// The namespace.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// The name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// The object's uid, from the request body.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// The API group; empty for the core group.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_group: String,
    /// The API version.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    /// The object's resourceVersion, from the request body.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub resource_version: String,
    /// The subresource.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub subresource: String,
}

/// The part of a `metav1.Status` an event records (`responseStatus`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ResponseStatus {
    /// Always empty; present because upstream's `ListMeta` is never left out.
    #[serde(default)]
    pub metadata: Map<String, Value>,
    /// `Success` or `Failure`, for `Status` responses.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub status: String,
    /// The message, for `Status` responses.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// The reason (`NotFound`, `Forbidden`, ...), for `Status` responses.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// The details, for `Status` responses that have them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<StatusDetails>,
    /// The HTTP status code.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub code: i32,
}

fn is_zero(code: &i32) -> bool {
    *code == 0
}

/// `metav1.StatusDetails`, in upstream's field order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusDetails {
    /// The name of the object concerned.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Its API group.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub group: String,
    /// Its kind (or resource).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// Its uid.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// The causes (field errors of an `Invalid` status).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub causes: Vec<StatusCause>,
    /// When to retry, in seconds.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub retry_after_seconds: i32,
}

/// `metav1.StatusCause`, in upstream's field order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusCause {
    /// The kind of problem (`FieldValueInvalid`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// The problem in words.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// The field concerned.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub field: String,
}

impl ResponseStatus {
    /// The fields an event keeps of a `Status` object (upstream copies status, message,
    /// reason, details and code, and nothing else).
    pub fn from_status(status: &Value) -> Self {
        let text = |key: &str| {
            status
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        ResponseStatus {
            metadata: Map::new(),
            status: text("status"),
            message: text("message"),
            reason: text("reason"),
            details: status
                .get("details")
                .filter(|d| d.is_object())
                .and_then(|d| StatusDetails::deserialize(d).ok()),
            code: status
                .get("code")
                .and_then(Value::as_i64)
                .and_then(|c| i32::try_from(c).ok())
                .unwrap_or(0),
        }
    }
}

/// Formats a time as `metav1.MicroTime` does: `2006-01-02T15:04:05.000000Z`, in UTC.
pub fn format_micro_time(time: SystemTime) -> String {
    let (secs, nanos) = match time.duration_since(UNIX_EPOCH) {
        Ok(d) => (
            i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
            d.subsec_nanos(),
        ),
        Err(before) => {
            let d = before.duration();
            let secs = i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
            if d.subsec_nanos() == 0 {
                (-secs, 0)
            } else {
                (-secs - 1, 1_000_000_000 - d.subsec_nanos())
            }
        }
    };
    let (date, clock) = civil(secs);
    format!("{date}T{clock}.{:06}Z", nanos / 1000)
}

/// `YYYY-MM-DD` and `HH:MM:SS` of a Unix time in UTC.
pub(crate) fn civil(secs: i64) -> (String, String) {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (
        format!("{year:04}-{month:02}-{day:02}"),
        format!("{:02}:{:02}:{:02}", rem / 3600, rem % 3600 / 60, rem % 60),
    )
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn micro_time_has_six_digits_in_utc() {
        let t = UNIX_EPOCH + Duration::new(1_700_000_000, 123_456_789);
        assert_eq!(format_micro_time(t), "2023-11-14T22:13:20.123456Z");
        assert_eq!(format_micro_time(UNIX_EPOCH), "1970-01-01T00:00:00.000000Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400); // 2000-02-29
        assert_eq!(format_micro_time(leap), "2000-02-29T00:00:00.000000Z");
    }

    #[test]
    fn response_status_keeps_only_upstreams_fields() {
        let status = serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {"resourceVersion": "5"},
            "status": "Failure", "message": "pods \"x\" not found", "reason": "NotFound",
            "details": {"kind": "pods", "name": "x", "causes": [{"field": "f", "reason": "R"}]},
            "code": 404
        });
        let kept = serde_json::to_string(&ResponseStatus::from_status(&status)).expect("json");
        assert_eq!(
            kept,
            r#"{"metadata":{},"status":"Failure","message":"pods \"x\" not found","reason":"NotFound","details":{"name":"x","kind":"pods","causes":[{"reason":"R","field":"f"}]},"code":404}"#
        );
        let code_only = ResponseStatus {
            code: 200,
            ..ResponseStatus::default()
        };
        assert_eq!(
            serde_json::to_string(&code_only).expect("json"),
            r#"{"metadata":{},"code":200}"#
        );
    }
}
