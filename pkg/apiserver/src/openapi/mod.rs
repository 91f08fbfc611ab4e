//! Serving the OpenAPI documents, as kube-apiserver serves them.
//!
//! OpenAPI v3, below `/openapi/v3`:
//!
//! - `GET /openapi/v3`: the index, `{"paths": {"api/v1": {"serverRelativeURL":
//!   "/openapi/v3/api/v1?hash=<H>"}, ...}}`, one entry per document.
//! - `GET /openapi/v3/<path>`: one document (built by [`builder`]).
//!
//! Every document is serialized and hashed once, when what is served changes, and only its
//! bytes are kept (a parsed document takes several times their size): `<H>` is the upper-case
//! hex SHA-512 of its bytes, which is also its `ETag`. A request whose `hash` matches
//! may be cached for good (`Cache-Control: public, immutable`); one with a stale hash is
//! redirected (301) to the current URL; other answers are `no-cache, private`, like every
//! other API answer upstream. `If-None-Match` with the current `ETag` gets a 304. Only JSON is
//! served: an `Accept` that admits only the protobuf form gets 406.
//!
//! OpenAPI v2, at `/openapi/v2` ([`OpenApiV2`]): one Swagger 2.0 document of every served group
//! version, derived from the v3 documents ([`builder::v2`]) and from those of the
//! group-versions other servers serve (their paths below `/apis/<group>/<version>/` only; the
//! definitions of this server win), as JSON or as
//! gnostic's protobuf `Document` ([`builder::gnostic`]), which is the only form
//! kubectl before 1.29 asks for. Both are built from the v3 documents' bytes at the first request
//! for either (most clients never ask), and kept until what is served changes; their `ETag` is
//! the SHA-512 of the JSON, as upstream's, and there is no hash query.

pub mod builder;

use std::fmt::Write as _;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use bytes::Bytes;
use genplane_apimachinery::errors::{ApiError, Status, StatusReason};
use hyper::header::{
    ACCEPT, CACHE_CONTROL, CONTENT_TYPE, ETAG, EXPIRES, HeaderMap, HeaderValue, IF_NONE_MATCH,
    LAST_MODIFIED, LOCATION, VARY,
};
use hyper::{Response, StatusCode};
use serde_json::{Map, json};

use crate::body::ResponseBody;
use builder::{Document, ServedResource};

/// One serialized document, kept gzip-compressed: a document of custom resources' schemas
/// compresses to about a tenth, and most clients accept it so (it is then sent as it is).
#[derive(Clone, Debug)]
struct Served {
    /// The path below `/openapi/v3/`.
    path: String,
    /// The JSON, gzip-compressed.
    gzip: Bytes,
    /// The JSON's length.
    len: usize,
    /// Upper-case hex SHA-512 of the JSON.
    hash: String,
}

impl Served {
    fn new(path: String, json: Vec<u8>) -> Self {
        Self {
            path,
            gzip: Bytes::from(crate::body::gzip(&json)),
            len: json.len(),
            hash: hash(&json),
        }
    }

    /// The JSON (empty if the compressed bytes were damaged, which they never are).
    fn json(&self) -> Vec<u8> {
        crate::body::gunzip(&self.gzip, self.len).unwrap_or_default()
    }
}

/// A group-version document of custom resources, serialized and hashed once, when it is made:
/// a server serving many of them makes again only those whose resources changed. The type
/// model of its kinds (for patches and apply) is read from its bytes at the first request
/// that needs it, and kept with it.
#[derive(Debug)]
pub struct CustomDocument {
    served: Served,
    types: OnceLock<Arc<genplane_merge::Schema>>,
}

impl CustomDocument {
    /// Serializes and hashes `document`.
    pub fn new(document: Document) -> Self {
        let bytes = serde_json::to_vec(&document.document)
            .expect("invariant: a serde_json::Value always serializes");
        Self {
            served: Served::new(document.path, bytes),
            types: OnceLock::new(),
        }
    }

    /// The path below `/openapi/v3/` it is served at.
    pub fn path(&self) -> &str {
        &self.served.path
    }

    /// The type model of its component schemas, read at the first call. A document whose
    /// schemas do not read as a type model has an empty one (and says why in the log).
    pub fn types(&self) -> Arc<genplane_merge::Schema> {
        self.types
            .get_or_init(|| {
                let model = parsed(&self.served).map_or_else(
                    || Ok(genplane_merge::Schema::default()),
                    |document| builder::type_model(std::slice::from_ref(&document)),
                );
                Arc::new(model.unwrap_or_else(|error| {
                    tracing::error!(path = self.served.path, %error,
                        "reading the type model of a custom resources' OpenAPI document");
                    genplane_merge::Schema::default()
                }))
            })
            .clone()
    }
}

/// The OpenAPI v3 documents of a server, serialized and hashed. A clone shares the documents'
/// bytes.
#[derive(Clone, Debug)]
pub struct OpenApiV3 {
    index: Served,
    documents: Vec<Served>,
    /// The index entries of group-versions other servers serve (path below `/openapi/v3/`,
    /// and the URL of their document, their server's hash in it), whose documents are
    /// proxied.
    remote: Vec<(String, String)>,
}

/// Upper-case hex SHA-512, as upstream computes its OpenAPI and aggregated discovery ETags.
pub(crate) fn hash(bytes: &[u8]) -> String {
    hex_upper(aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA512, bytes).as_ref())
}

/// `bytes` in upper-case hex.
fn hex_upper(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(out, "{b:02X}");
    }
    out
}

/// Serializes and hashes `documents`.
fn serialized(documents: Vec<Document>) -> Vec<Served> {
    let started = Instant::now();
    let documents: Vec<Served> = documents
        .into_iter()
        .map(|d| {
            let bytes = serde_json::to_vec(&d.document)
                .expect("invariant: a serde_json::Value always serializes");
            Served::new(d.path, bytes)
        })
        .collect();
    tracing::debug!(
        documents = documents.len(),
        bytes = documents.iter().map(|d| d.len).sum::<usize>(),
        elapsed_ms = started.elapsed().as_millis() as u64,
        "serialized OpenAPI v3 documents"
    );
    documents
}

/// A served document parsed back (`None` only if its bytes were not JSON, which
/// [`serialized`] never writes).
fn parsed(served: &Served) -> Option<Document> {
    let document = serde_json::from_slice(&served.json()).ok()?;
    Some(Document {
        path: served.path.clone(),
        document,
    })
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
pub(crate) fn not_modified(headers: &HeaderMap, etag: &str) -> bool {
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
        Self::from_documents(builder::documents(resources))
    }

    /// Serializes and hashes `documents` (as [`builder::documents`] builds them).
    pub fn from_documents(documents: Vec<Document>) -> Self {
        Self::indexed(serialized(documents))
    }

    /// These documents followed by `more`, under a new index: every document's bytes are
    /// shared, not serialized again.
    pub fn extended(&self, more: &[Arc<CustomDocument>]) -> Self {
        let mut documents = self.documents.clone();
        documents.extend(more.iter().map(|d| d.served.clone()));
        Self::indexed(documents)
    }

    /// The index of `documents`.
    fn indexed(documents: Vec<Served>) -> Self {
        Self::indexed_with(documents, Vec::new())
    }

    /// The index of `documents` and of the `remote` entries (path, URL) not among them.
    fn indexed_with(documents: Vec<Served>, remote: Vec<(String, String)>) -> Self {
        let mut paths = Map::new();
        for d in &documents {
            paths.insert(
                d.path.clone(),
                json!({"serverRelativeURL": format!("/openapi/v3/{}?hash={}", d.path, d.hash)}),
            );
        }
        let remote: Vec<(String, String)> = remote
            .into_iter()
            .filter(|(path, _)| !paths.contains_key(path))
            .collect();
        for (path, url) in &remote {
            paths.insert(path.clone(), json!({ "serverRelativeURL": url }));
        }
        let index = serde_json::to_vec(&json!({"paths": paths}))
            .expect("invariant: a serde_json::Value always serializes");
        let index = Served::new(String::new(), index);
        Self {
            index,
            documents,
            remote,
        }
    }

    /// These documents, with `remote` index entries (path below `/openapi/v3/`, URL) for the
    /// group-versions other servers serve, in place of those it had.
    pub fn with_remote(&self, remote: Vec<(String, String)>) -> Self {
        if remote.is_empty() && self.remote.is_empty() {
            return self.clone();
        }
        Self::indexed_with(self.documents.clone(), remote)
    }

    /// The document below `/openapi/v3/<path>`, parsed back from its bytes.
    pub fn document(&self, path: &str) -> Option<Document> {
        self.documents
            .iter()
            .find(|d| d.path == path)
            .and_then(parsed)
    }

    /// Every document, parsed back from its bytes, in the index's order.
    pub fn documents(&self) -> Vec<Document> {
        self.documents.iter().filter_map(parsed).collect()
    }

    /// The paths below `/openapi/v3/` with a document, and each document's size in bytes.
    pub fn sizes(&self) -> Vec<(&str, usize)> {
        self.documents
            .iter()
            .map(|d| (d.path.as_str(), d.len))
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
            *response.body_mut() = ResponseBody::gzipped([document.gzip.clone()], document.len);
        }
        Ok(response)
    }
}

/// The media type kubectl asks `/openapi/v2` for (gnostic's protobuf `Document`).
pub const PROTOBUF_V2: &str = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";

/// The media type upstream answers the protobuf form with, whichever of the two protobuf
/// names was asked for.
pub const PROTOBUF_V2_ANSWER: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

/// How an `Accept` header on `/openapi/v2` is answered.
#[derive(Debug, PartialEq, Eq)]
enum AcceptedV2 {
    Json,
    Protobuf,
    NotAcceptable,
}

/// The first clause of `accept` (highest quality first, then the most specific) that names
/// JSON, one of the two protobuf media types, or a wildcard; a missing `Accept` is `*/*`.
/// Wildcards choose JSON, as upstream's handler lists JSON first.
fn accepted_v2(accept: Option<&str>) -> AcceptedV2 {
    let accept = accept
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .unwrap_or("*/*");
    let mut clauses: Vec<(&str, f32, usize)> = Vec::new();
    for clause in accept.split(',') {
        let mut parts = clause.split(';');
        let media = parts.next().unwrap_or("").trim();
        let mut quality = 1.0;
        for parameter in parts {
            if let Some((key, value)) = parameter.split_once('=')
                && key.trim() == "q"
            {
                quality = value.trim().parse().unwrap_or(0.0);
            }
        }
        let specificity = match media {
            "*/*" => 0,
            m if m.ends_with("/*") => 1,
            _ => 2,
        };
        if quality > 0.0 && !media.is_empty() {
            clauses.push((media, quality, specificity));
        }
    }
    clauses.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.2.cmp(&a.2)));
    for (media, _, _) in clauses {
        match media {
            "*/*" | "application/*" | "application/json" => return AcceptedV2::Json,
            m if m == PROTOBUF_V2 || m == PROTOBUF_V2_ANSWER => return AcceptedV2::Protobuf,
            _ => {}
        }
    }
    AcceptedV2::NotAcceptable
}

/// The OpenAPI v2 document of a server, as JSON and as protobuf, built from the v3
/// documents at the first request for it.
#[derive(Debug)]
pub struct OpenApiV2 {
    /// The v3 documents it is derived from (their bytes are shared).
    source: OpenApiV3,
    /// The v3 documents of group-versions other servers serve: the path they describe
    /// (`/apis/<group>/<version>`) and their bytes as their servers answered them.
    remote: Vec<(String, Bytes)>,
    /// The server's `gitVersion`, the document's `info.version`.
    version: String,
    /// When what it describes was last changed, as an HTTP date (its `Last-Modified`).
    built: String,
    /// Upper-case hex SHA-512 of what the document is made of (the server's version, its v3
    /// documents' hashes, the other servers' documents): the ETag of both encodings, as
    /// upstream gives both one ETag, known without building either.
    hash: String,
    /// The document as JSON, built at the first request for it, gzip-compressed as it was
    /// built (with thousands of custom resource definitions it is over 100 MB, a tenth of
    /// that compressed: never held uncompressed).
    json: OnceLock<EncodedV2>,
    /// The document as protobuf, likewise.
    protobuf: OnceLock<EncodedV2>,
}

/// One encoding of the v2 document: one gzip stream in pieces, and its length uncompressed.
#[derive(Debug)]
struct EncodedV2 {
    gzip: Arc<[Bytes]>,
    len: usize,
}

impl OpenApiV2 {
    /// The document of `source` (the server's v3 documents) and of `remote` (the v3
    /// documents of group-versions other servers serve, by path below `/openapi/v3/`) for a
    /// server of `version`, dated now; it is built when first asked for.
    pub fn new(source: &OpenApiV3, remote: Vec<(String, Bytes)>, version: &str) -> Self {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let remote: Vec<(String, Bytes)> = remote
            .into_iter()
            .map(|(path, bytes)| (format!("/{path}"), bytes))
            .collect();
        let mut digest = aws_lc_rs::digest::Context::new(&aws_lc_rs::digest::SHA512);
        digest.update(version.as_bytes());
        for document in &source.documents {
            digest.update(document.hash.as_bytes());
        }
        for (path, bytes) in &remote {
            digest.update(path.as_bytes());
            digest.update(hash(bytes).as_bytes());
        }
        Self {
            source: source.clone(),
            remote,
            hash: hex_upper(digest.finish().as_ref()),
            version: version.to_owned(),
            built: http_date(now),
            json: OnceLock::new(),
            protobuf: OnceLock::new(),
        }
    }

    /// The v3 documents the v2 document is made from: the server's own, then the others'.
    fn sources(&self) -> Vec<builder::v2::Source<'_>> {
        let own = self.source.documents.iter().map(|d| builder::v2::Source {
            bytes: &d.gzip,
            gzip: Some(d.len),
            own_paths: None,
        });
        let remote = self.remote.iter().map(|(path, bytes)| builder::v2::Source {
            bytes,
            gzip: None,
            own_paths: Some(path),
        });
        own.chain(remote).collect()
    }

    /// The encoding kept in `cell`, written by `write` (`what` names it in the log) at the
    /// first call.
    fn encoded<'a>(
        &self,
        cell: &'a OnceLock<EncodedV2>,
        write: fn(&[builder::v2::Source<'_>], &str) -> (Vec<Bytes>, usize),
        what: &str,
    ) -> &'a EncodedV2 {
        cell.get_or_init(|| {
            let started = Instant::now();
            let (gzip, len) = write(&self.sources(), &self.version);
            let gzip: Arc<[Bytes]> = gzip.into();
            tracing::debug!(
                bytes = len,
                compressed = gzip.iter().map(Bytes::len).sum::<usize>(),
                elapsed_ms = started.elapsed().as_millis() as u64,
                "built the OpenAPI v2 document as {what}"
            );
            EncodedV2 { gzip, len }
        })
    }

    /// Answers `GET /openapi/v2` (or `HEAD` when `head`).
    pub fn handle(
        &self,
        headers: &HeaderMap,
        head: bool,
    ) -> Result<Response<ResponseBody>, ApiError> {
        let accept = headers.get(ACCEPT).and_then(|v| v.to_str().ok());
        let (content_type, encoded) = match accepted_v2(accept) {
            AcceptedV2::Json => (
                "application/json",
                self.encoded(&self.json, builder::v2::json, "JSON"),
            ),
            AcceptedV2::Protobuf => (
                PROTOBUF_V2_ANSWER,
                self.encoded(&self.protobuf, builder::v2::protobuf, "protobuf"),
            ),
            AcceptedV2::NotAcceptable => {
                return Err(
                    Status::not_acceptable(&["application/json", PROTOBUF_V2_ANSWER]).into(),
                );
            }
        };
        let etag = format!("\"{}\"", self.hash);
        let mut response = Response::new(ResponseBody::full(Bytes::new()));
        let h = response.headers_mut();
        h.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
        h.insert(ETAG, header(&etag));
        h.insert(VARY, HeaderValue::from_static("Accept"));
        h.insert(LAST_MODIFIED, header(&self.built));
        h.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache, private"));
        if not_modified(headers, &etag) {
            *response.status_mut() = StatusCode::NOT_MODIFIED;
            return Ok(response);
        }
        if !head {
            *response.body_mut() = ResponseBody::gzipped(encoded.gzip.iter().cloned(), encoded.len);
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

    #[test]
    fn v2_accept_headers() {
        assert_eq!(accepted_v2(None), AcceptedV2::Json);
        assert_eq!(accepted_v2(Some("application/json")), AcceptedV2::Json);
        assert_eq!(accepted_v2(Some(PROTOBUF_V2)), AcceptedV2::Protobuf);
        assert_eq!(accepted_v2(Some(PROTOBUF_V2_ANSWER)), AcceptedV2::Protobuf);
        assert_eq!(
            accepted_v2(Some(&format!("application/json;q=0.5, {PROTOBUF_V2}"))),
            AcceptedV2::Protobuf
        );
        assert_eq!(
            accepted_v2(Some(&format!("*/*, {PROTOBUF_V2}"))),
            AcceptedV2::Protobuf
        );
        assert_eq!(
            accepted_v2(Some(&format!("{PROTOBUF_V2};q=0, application/*"))),
            AcceptedV2::Json
        );
        assert_eq!(
            accepted_v2(Some("application/yaml")),
            AcceptedV2::NotAcceptable
        );
    }

    #[test]
    fn documents_are_kept_as_bytes_and_read_back_whole() {
        let builtin = builder::documents(&builder::all_served());
        let core = builtin.iter().find(|d| d.path == "api/v1").cloned();
        let served = OpenApiV3::from_documents(builtin.clone());
        assert_eq!(
            served.document("api/v1").map(|d| d.document),
            core.map(|d| d.document)
        );
        assert_eq!(served.documents().len(), builtin.len());

        // Extending shares the built-in bytes and indexes every document.
        let custom = Document {
            path: "apis/example.com/v1".to_owned(),
            document: json!({"openapi": "3.0.0", "paths": {}}),
        };
        let extended = served.extended(&[Arc::new(CustomDocument::new(custom.clone()))]);
        assert_eq!(extended.documents.len(), builtin.len() + 1);
        assert!(
            extended.documents[0]
                .gzip
                .as_ptr()
                .eq(&served.documents[0].gzip.as_ptr())
        );
        let index: serde_json::Value = serde_json::from_slice(&extended.index.json()).unwrap();
        assert!(index["paths"]["apis/example.com/v1"]["serverRelativeURL"].is_string());
        assert_eq!(
            extended.document("apis/example.com/v1").map(|d| d.document),
            Some(custom.document)
        );
        assert!(served.document("apis/example.com/v1").is_none());

        // Other servers' group-versions are indexed with their URLs; a local one wins.
        let remote = extended.with_remote(vec![
            (
                "apis/wardle.example.com/v1alpha1".to_owned(),
                "/openapi/v3/apis/wardle.example.com/v1alpha1?hash=AB".to_owned(),
            ),
            (
                "apis/example.com/v1".to_owned(),
                "/openapi/v3/apis/example.com/v1?hash=CD".to_owned(),
            ),
        ]);
        let index: serde_json::Value = serde_json::from_slice(&remote.index.json()).unwrap();
        assert_eq!(
            index["paths"]["apis/wardle.example.com/v1alpha1"]["serverRelativeURL"],
            "/openapi/v3/apis/wardle.example.com/v1alpha1?hash=AB"
        );
        assert_ne!(
            index["paths"]["apis/example.com/v1"]["serverRelativeURL"],
            "/openapi/v3/apis/example.com/v1?hash=CD"
        );
        assert_ne!(remote.index.hash, extended.index.hash);
        // Without them again, the index is the local one.
        assert_eq!(
            remote.with_remote(Vec::new()).index.hash,
            extended.index.hash
        );
    }

    /// The body of `answer`, as a client that does not ask for gzip reads it.
    fn sent(answer: Response<ResponseBody>) -> Vec<u8> {
        use http_body_util::BodyExt as _;
        let collected = futures::executor::block_on(answer.into_body().collect());
        collected.unwrap().to_bytes().to_vec()
    }

    /// An encoding of the v2 document, uncompressed.
    fn whole(encoded: &EncodedV2) -> Vec<u8> {
        crate::body::gunzip(&encoded.gzip.concat(), encoded.len).unwrap()
    }

    #[test]
    fn the_v2_document_is_built_at_its_first_request() {
        let v3 = OpenApiV3::new(&builder::all_served());
        let v2 = OpenApiV2::new(&v3, Vec::new(), "v1.33.0");
        assert!(v2.json.get().is_none());
        let answer = v2.handle(&HeaderMap::new(), false).unwrap();
        assert_eq!(answer.status(), StatusCode::OK);
        let built = v2.json.get().expect("built by the request");
        assert!(built.gzip.len() > 2, "held in pieces");
        assert!(
            built.gzip.iter().map(Bytes::len).sum::<usize>() < built.len / 4,
            "held compressed"
        );
        let sent = sent(answer);
        assert_eq!(sent.len(), built.len);
        assert_eq!(sent, whole(built));
        let swagger: serde_json::Value = serde_json::from_slice(&sent).unwrap();
        assert_eq!(swagger["swagger"], "2.0");
        assert_eq!(swagger["info"]["version"], "v1.33.0");
        assert!(swagger["definitions"]["io.k8s.api.core.v1.ConfigMap"].is_object());
        // Each encoding is built when it is first asked for; both have one ETag.
        assert!(v2.protobuf.get().is_none());
        let mut accept = HeaderMap::new();
        accept.insert(ACCEPT, HeaderValue::from_static(PROTOBUF_V2));
        let answer = v2.handle(&accept, false).unwrap();
        assert_eq!(answer.headers()[CONTENT_TYPE], PROTOBUF_V2_ANSWER);
        assert!(v2.protobuf.get().is_some(), "built by the request");
        assert_eq!(answer.headers()[ETAG], format!("\"{}\"", v2.hash));
        // The ETag follows what the document is made of.
        let again = OpenApiV2::new(&v3, Vec::new(), "v1.33.0");
        assert_eq!(again.hash, v2.hash);
        let other = OpenApiV2::new(&v3, Vec::new(), "v1.34.0");
        assert_ne!(other.hash, v2.hash);
        let custom = Document {
            path: "apis/example.com/v1".to_owned(),
            document: json!({"openapi": "3.0.0", "paths": {}}),
        };
        let extended = v3.extended(&[Arc::new(CustomDocument::new(custom))]);
        assert_ne!(
            OpenApiV2::new(&extended, Vec::new(), "v1.33.0").hash,
            v2.hash
        );
    }

    #[test]
    fn the_v2_document_takes_other_servers_own_paths_and_their_kinds() {
        let v3 = OpenApiV3::new(&builder::all_served());
        let operation = json!({"get": {"operationId": "x", "responses": {"200": {
            "description": "OK"}}}});
        let remote = json!({"openapi": "3.0.0", "paths": {
                "/apis/x.example.com/v1/": operation,
                "/apis/x.example.com/v1/namespaces/{namespace}/things": operation,
                "/api/v1/namespaces": operation,
                "/apis/x.example.com/v10/others": operation},
            "components": {"schemas": {
                "com.example.x.v1.Thing": {"type": "object", "x-kubernetes-group-version-kind":
                    [{"group": "x.example.com", "version": "v1", "kind": "Thing"}]},
                "io.k8s.api.core.v1.ConfigMap": {"type": "string"}}}});
        let v2 = OpenApiV2::new(
            &v3,
            vec![
                (
                    "apis/x.example.com/v1".to_owned(),
                    Bytes::from(remote.to_string()),
                ),
                ("apis/broken.example.com/v1".to_owned(), Bytes::from("{")),
            ],
            "v1.33.0",
        );
        let answer = v2.handle(&HeaderMap::new(), false).unwrap();
        assert_eq!(answer.status(), StatusCode::OK);
        let swagger: serde_json::Value =
            serde_json::from_slice(&whole(v2.json.get().unwrap())).unwrap();
        let paths = swagger["paths"].as_object().unwrap();
        assert!(paths.contains_key("/apis/x.example.com/v1/"));
        assert!(paths.contains_key("/apis/x.example.com/v1/namespaces/{namespace}/things"));
        assert!(!paths.contains_key("/apis/x.example.com/v10/others"));
        // What this server serves is described by this server alone.
        assert_ne!(
            paths["/api/v1/namespaces"]["get"]["operationId"], "x",
            "{}",
            paths["/api/v1/namespaces"]
        );
        assert!(swagger["definitions"]["com.example.x.v1.Thing"].is_object());
        assert_eq!(
            swagger["definitions"]["io.k8s.api.core.v1.ConfigMap"]["type"],
            "object"
        );
    }
}
