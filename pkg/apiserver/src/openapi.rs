//! Serving the OpenAPI v3 documents below `/openapi/v3`, as kube-apiserver serves them.
//!
//! - `GET /openapi/v3`: the index, `{"paths": {"api/v1": {"serverRelativeURL":
//!   "/openapi/v3/api/v1?hash=<H>"}, ...}}`, one entry per document.
//! - `GET /openapi/v3/<path>`: one document (built by [`genplane_api::openapi`]).
//!
//! Every document is serialized and hashed once, when the server is built: `<H>` is the
//! upper-case hex SHA-512 of its bytes, which is also its `ETag`. A request whose `hash` matches
//! may be cached for good (`Cache-Control: public, immutable`); one with a stale hash is
//! redirected (301) to the current URL; other answers are `no-cache, private`, like every
//! other API answer upstream. `If-None-Match` with the current `ETag` gets a 304. Only JSON is
//! served: an `Accept` that admits only the protobuf form gets 406. `/openapi/v2` is not served
//! (kubectl asks for it only as protobuf, and only when v3 is missing).

use std::fmt::Write as _;
use std::time::Instant;

use bytes::Bytes;
use genplane_api::openapi::{self, ServedResource};
use genplane_apimachinery::errors::{ApiError, Status, StatusReason};
use hyper::header::{
    ACCEPT, CACHE_CONTROL, CONTENT_TYPE, ETAG, EXPIRES, HeaderMap, HeaderValue, IF_NONE_MATCH,
    LOCATION, VARY,
};
use hyper::{Response, StatusCode};
use serde_json::{Map, json};

use crate::body::ResponseBody;

/// One serialized document.
#[derive(Debug)]
struct Served {
    /// The path below `/openapi/v3/`.
    path: String,
    bytes: Bytes,
    /// Upper-case hex SHA-512 of `bytes`.
    hash: String,
}

impl Served {
    fn new(path: String, bytes: Vec<u8>) -> Self {
        let hash = hash(&bytes);
        Self {
            path,
            bytes: Bytes::from(bytes),
            hash,
        }
    }
}

/// The OpenAPI v3 documents of a server, serialized and hashed.
#[derive(Debug)]
pub struct OpenApiV3 {
    index: Served,
    documents: Vec<Served>,
}

/// Upper-case hex SHA-512, as upstream computes its OpenAPI ETags.
fn hash(bytes: &[u8]) -> String {
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA512, bytes);
    let mut out = String::with_capacity(128);
    for b in digest.as_ref() {
        let _ = write!(out, "{b:02X}");
    }
    out
}

/// How an `Accept` header is answered.
#[derive(Debug, PartialEq, Eq)]
enum Accepted {
    Json,
    NotAcceptable,
}

/// JSON when `Accept` is absent or admits `application/json` (or `application/*`, `*/*`).
fn accepted(accept: Option<&str>) -> Accepted {
    let Some(accept) = accept.map(str::trim).filter(|a| !a.is_empty()) else {
        return Accepted::Json;
    };
    let json = accept.split(',').any(|clause| {
        let media = clause.split(';').next().unwrap_or("").trim();
        matches!(media, "application/json" | "application/*" | "*/*")
    });
    if json {
        Accepted::Json
    } else {
        Accepted::NotAcceptable
    }
}

/// Whether `If-None-Match` names `etag` (a quoted hash) or is `*`.
fn not_modified(headers: &HeaderMap, etag: &str) -> bool {
    headers
        .get_all(IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|t| t.trim().trim_start_matches("W/"))
        .any(|t| t == etag || t == "*")
}

fn header(value: &str) -> HeaderValue {
    HeaderValue::from_str(value).unwrap_or_else(|_| HeaderValue::from_static(""))
}

impl OpenApiV3 {
    /// Builds, serializes and hashes the documents of `resources`.
    pub fn new(resources: &[ServedResource]) -> Self {
        let started = Instant::now();
        let documents: Vec<Served> = openapi::documents(resources)
            .into_iter()
            .map(|d| {
                let bytes = serde_json::to_vec(&d.document)
                    .expect("invariant: a serde_json::Value always serializes");
                Served::new(d.path, bytes)
            })
            .collect();
        let mut paths = Map::new();
        for d in &documents {
            paths.insert(
                d.path.clone(),
                json!({"serverRelativeURL": format!("/openapi/v3/{}?hash={}", d.path, d.hash)}),
            );
        }
        let index = serde_json::to_vec(&json!({"paths": paths}))
            .expect("invariant: a serde_json::Value always serializes");
        let index = Served::new(String::new(), index);
        tracing::debug!(
            documents = documents.len(),
            bytes = documents.iter().map(|d| d.bytes.len()).sum::<usize>(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "built the OpenAPI v3 documents"
        );
        Self { index, documents }
    }

    /// The paths below `/openapi/v3/` with a document, and each document's size in bytes.
    pub fn sizes(&self) -> Vec<(&str, usize)> {
        self.documents
            .iter()
            .map(|d| (d.path.as_str(), d.bytes.len()))
            .collect()
    }

    /// Answers `GET /openapi/v3[/<path>]`; `rest` is the path after `/openapi/v3`, `query`
    /// the query string.
    pub fn handle(
        &self,
        rest: &str,
        query: Option<&str>,
        headers: &HeaderMap,
        head: bool,
    ) -> Result<Response<ResponseBody>, ApiError> {
        let accept = headers.get(ACCEPT).and_then(|v| v.to_str().ok());
        let rest = rest.trim_matches('/');
        let document = if rest.is_empty() {
            &self.index
        } else {
            self.documents
                .iter()
                .find(|d| d.path == rest)
                .ok_or_else(|| {
                    ApiError::from(Status::failure(
                        StatusReason::NotFound,
                        "the server could not find the requested resource",
                    ))
                })?
        };
        if accepted(accept) == Accepted::NotAcceptable {
            return Err(Status::not_acceptable(&["application/json"]).into());
        }
        let etag = format!("\"{}\"", document.hash);
        let mut response = Response::new(ResponseBody::full(Bytes::new()));
        let h = response.headers_mut();
        h.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        h.insert(ETAG, header(&etag));
        h.insert(VARY, HeaderValue::from_static("Accept"));
        let requested_hash = query.and_then(|q| {
            form_urlencoded::parse(q.as_bytes())
                .find(|(k, _)| k == "hash")
                .map(|(_, v)| v.into_owned())
        });
        match requested_hash {
            Some(hash) if !rest.is_empty() && hash != document.hash => {
                let location = format!("/openapi/v3/{}?hash={}", document.path, document.hash);
                *response.status_mut() = StatusCode::MOVED_PERMANENTLY;
                let h = response.headers_mut();
                h.insert(LOCATION, header(&location));
                h.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache, private"));
                return Ok(response);
            }
            Some(_) if !rest.is_empty() => {
                h.insert(CACHE_CONTROL, HeaderValue::from_static("public, immutable"));
                h.insert(EXPIRES, header(&expires_in_a_year()));
            }
            _ => {
                h.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache, private"));
            }
        }
        if not_modified(headers, &etag) {
            *response.status_mut() = StatusCode::NOT_MODIFIED;
            return Ok(response);
        }
        if !head {
            *response.body_mut() = ResponseBody::full(document.bytes.clone());
        }
        Ok(response)
    }
}

/// An HTTP date a year from now (`Expires` of an immutable document).
fn expires_in_a_year() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    http_date(now + 365 * 24 * 3600)
}

/// Formats Unix seconds as an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`).
fn http_date(secs: u64) -> String {
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (hour, minute, second) = (rem / 3600, rem % 3600 / 60, rem % 60);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    const WEEKDAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    format!(
        "{}, {day:02} {} {year} {hour:02}:{minute:02}:{second:02} GMT",
        WEEKDAYS[(days % 7) as usize],
        MONTHS[(month - 1) as usize],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_imf_fixdates() {
        assert_eq!(http_date(0), "Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(http_date(784_111_777), "Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(http_date(1_709_251_200), "Fri, 01 Mar 2024 00:00:00 GMT");
    }

    #[test]
    fn hashes_are_upper_case_sha512() {
        let h = hash(b"abc");
        assert_eq!(h.len(), 128);
        assert!(h.starts_with("DDAF35A193617ABA"), "{h}");
    }

    #[test]
    fn accept_headers() {
        assert_eq!(accepted(None), Accepted::Json);
        assert_eq!(accepted(Some("application/json, */*")), Accepted::Json);
        assert_eq!(accepted(Some("*/*")), Accepted::Json);
        assert_eq!(
            accepted(Some(
                "application/com.github.proto-openapi.spec.v3@v1.0+protobuf"
            )),
            Accepted::NotAcceptable
        );
    }
}
