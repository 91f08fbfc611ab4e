//! Content negotiation: which form a response takes (from `Accept`) and how a body is read
//! (from `Content-Type`), with the rules real clients depend on:
//!
//! - kubectl asks for `application/json;as=Table;v=v1;g=meta.k8s.io` and falls back to JSON;
//! - kube-rs asks for `...;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1` for metadata-only
//!   reads;
//! - discovery clients ask for `application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList`
//!   and need that exact content type back;
//! - the Python client sends bodies without a `Content-Type`, which means JSON;
//! - kubectl (client-go ≥ 1.31) asks for `application/vnd.kubernetes.protobuf,application/json`
//!   on typed commands (`kubectl create configmap`): resource endpoints answer protobuf then, for
//!   objects, lists, watches and errors; Tables and partial object metadata are JSON or YAML
//!   only, so a protobuf clause asking for them is skipped;
//! - clauses are tried by `q` value, then in the order given; one the server cannot produce is
//!   skipped, and when none is left the answer is 406.

use genplane_apimachinery::errors::{ApiError, Status};

/// The serialization of a response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `application/json`.
    Json,
    /// `application/yaml`.
    Yaml,
    /// `application/vnd.kubernetes.protobuf` (plain objects only).
    Protobuf,
}

impl Format {
    /// The content type of the serialization.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Json => "application/json",
            Format::Yaml => "application/yaml",
            Format::Protobuf => genplane_apimachinery::codec::protobuf::CONTENT_TYPE,
        }
    }
}

/// What a response holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// The object or list itself.
    Object,
    /// A `meta.k8s.io` Table of the given version (`v1` or `v1beta1`).
    Table(&'static str),
    /// `PartialObjectMetadata` (for a single object).
    PartialObjectMetadata(&'static str),
    /// `PartialObjectMetadataList` (for a list).
    PartialObjectMetadataList(&'static str),
    /// An aggregated discovery document of the given version (`v2` or `v2beta1`).
    GroupDiscoveryList(&'static str),
}

/// The negotiated form of a response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Negotiated {
    /// The serialization.
    pub format: Format,
    /// What it holds.
    pub target: Target,
}

impl Negotiated {
    /// Whether the answer is the objects themselves as JSON (what the store can write from the
    /// stored bytes), not a Table, metadata only, YAML or protobuf.
    pub fn is_json_objects(&self) -> bool {
        self.format == Format::Json
            && matches!(self.target, Target::Object | Target::GroupDiscoveryList(_))
    }

    /// The `Content-Type` to answer with.
    pub fn content_type(&self) -> String {
        match self.target {
            Target::Object => self.format.content_type().to_owned(),
            Target::Table(v) => format!(
                "{};as=Table;v={v};g=meta.k8s.io",
                self.format.content_type()
            ),
            Target::PartialObjectMetadata(v) => format!(
                "{};as=PartialObjectMetadata;v={v};g=meta.k8s.io",
                self.format.content_type()
            ),
            Target::PartialObjectMetadataList(v) => {
                format!(
                    "{};as=PartialObjectMetadataList;v={v};g=meta.k8s.io",
                    self.format.content_type()
                )
            }
            Target::GroupDiscoveryList(v) => format!(
                "{};g=apidiscovery.k8s.io;v={v};as=APIGroupDiscoveryList",
                self.format.content_type()
            ),
        }
    }
}

/// What an endpoint can produce besides plain objects.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Capabilities {
    /// Partial object metadata (resource endpoints).
    pub transforms: bool,
    /// Tables (resource endpoints of a kind with a table convertor: every stored kind; a kind
    /// that is never stored, a review or a TokenRequest, has none and answers a Table with
    /// 406, as upstream).
    pub tables: bool,
    /// Whether the endpoint answers with a list (lists and watches).
    pub list: bool,
    /// Aggregated discovery (`/api`, `/apis`).
    pub aggregated_discovery: bool,
    /// Kubernetes protobuf (resource endpoints, whose objects have a protobuf schema).
    pub protobuf: bool,
}

/// One `Accept` clause.
struct Clause<'a> {
    media: &'a str,
    params: Vec<(&'a str, &'a str)>,
    q: f32,
}

fn clauses(accept: &str) -> Vec<Clause<'_>> {
    let mut clauses: Vec<Clause<'_>> = accept
        .split(',')
        .filter_map(|clause| {
            let mut pieces = clause.split(';').map(str::trim);
            let media = pieces.next().filter(|m| !m.is_empty())?;
            let mut params = Vec::new();
            let mut q = 1.0;
            for piece in pieces {
                let (k, v) = piece.split_once('=').unwrap_or((piece, ""));
                let (k, v) = (k.trim(), v.trim().trim_matches('"'));
                if k == "q" {
                    q = v.parse().unwrap_or(0.0);
                } else {
                    params.push((k, v));
                }
            }
            Some(Clause { media, params, q })
        })
        .collect();
    // Highest q first; a stable sort keeps the client's order among equals.
    clauses.sort_by(|a, b| b.q.partial_cmp(&a.q).unwrap_or(std::cmp::Ordering::Equal));
    clauses
}

fn version(v: &str, known: &[&'static str]) -> Option<&'static str> {
    known.iter().copied().find(|k| *k == v)
}

fn resolve(clause: &Clause<'_>, capabilities: Capabilities) -> Option<Negotiated> {
    if clause.q <= 0.0 {
        return None;
    }
    let format = match clause.media {
        "application/json" | "application/*" | "*/*" => Format::Json,
        "application/yaml" => Format::Yaml,
        "application/vnd.kubernetes.protobuf" if capabilities.protobuf => Format::Protobuf,
        _ => return None,
    };
    let param = |name: &str| {
        clause
            .params
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| *v)
    };
    let target = match (param("as"), param("g"), param("v")) {
        (None, _, _) => Target::Object,
        (Some("Table"), Some("meta.k8s.io"), Some(v)) if capabilities.tables => {
            Target::Table(version(v, &["v1", "v1beta1"])?)
        }
        (Some("PartialObjectMetadata"), Some("meta.k8s.io"), Some(v))
            if capabilities.transforms && !capabilities.list =>
        {
            Target::PartialObjectMetadata(version(v, &["v1", "v1beta1"])?)
        }
        (Some("PartialObjectMetadataList"), Some("meta.k8s.io"), Some(v))
            if capabilities.transforms && capabilities.list =>
        {
            Target::PartialObjectMetadataList(version(v, &["v1", "v1beta1"])?)
        }
        (Some("APIGroupDiscoveryList"), Some("apidiscovery.k8s.io"), Some(v))
            if capabilities.aggregated_discovery =>
        {
            Target::GroupDiscoveryList(version(v, &["v2", "v2beta1"])?)
        }
        _ => return None,
    };
    if format == Format::Protobuf && target != Target::Object {
        return None;
    }
    Some(Negotiated { format, target })
}

/// The form of a response for the `Accept` header; a missing or empty header means JSON.
pub fn negotiate(accept: Option<&str>, capabilities: Capabilities) -> Result<Negotiated, ApiError> {
    let accept = accept.map(str::trim).filter(|a| !a.is_empty());
    let Some(accept) = accept else {
        return Ok(Negotiated {
            format: Format::Json,
            target: Target::Object,
        });
    };
    clauses(accept)
        .iter()
        .find_map(|clause| resolve(clause, capabilities))
        .ok_or_else(|| {
            let mut accepted = vec!["application/json", "application/yaml"];
            if capabilities.protobuf {
                accepted.push(genplane_apimachinery::codec::protobuf::CONTENT_TYPE);
            }
            Status::not_acceptable(&accepted).into()
        })
}

/// How a request body is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyFormat {
    /// JSON (also when no `Content-Type` is given).
    Json,
    /// YAML.
    Yaml,
    /// Kubernetes protobuf (`application/vnd.kubernetes.protobuf`, the `k8s\0` envelope).
    Protobuf,
}

/// The body types a write accepts, for 415 messages.
pub const BODY_TYPES: &[&str] = &[
    "application/json",
    "application/yaml",
    "application/vnd.kubernetes.protobuf",
];

/// How a create or update body is written, from its `Content-Type`.
pub fn body_format(content_type: Option<&str>) -> Result<BodyFormat, ApiError> {
    // No Content-Type, or an empty one, is JSON (upstream's first serializer).
    let Some(given) = content_type.filter(|c| !c.trim().is_empty()) else {
        return Ok(BodyFormat::Json);
    };
    match content_media_type(given).as_deref() {
        Some("application/json") => Ok(BodyFormat::Json),
        Some("application/yaml") => Ok(BodyFormat::Yaml),
        Some("application/vnd.kubernetes.protobuf") => Ok(BodyFormat::Protobuf),
        Some(other) => Err(Status::unsupported_media_type(other, BODY_TYPES).into()),
        None => Err(Status::unsupported_media_type(given, BODY_TYPES).into()),
    }
}

/// Whether `c` may be part of a token (RFC 2045: any visible ASCII but the tspecials).
fn is_token_char(c: char) -> bool {
    c.is_ascii_graphic()
        && !matches!(
            c,
            '(' | ')'
                | '<'
                | '>'
                | '@'
                | ','
                | ';'
                | ':'
                | '\\'
                | '"'
                | '/'
                | '['
                | ']'
                | '?'
                | '='
        )
}

/// The media type of a `Content-Type` (`type/subtype`, lower-cased), if the header is well formed as Go's `mime.ParseMediaType` reads it: a
/// type and subtype of token characters, then `; name=value` parameters (a token or a
/// quoted string each, no name twice), a trailing `;` tolerated. Parameters are not
/// interpreted, as upstream ignores them; a malformed header is `None` (415 upstream).
fn content_media_type(header: &str) -> Option<String> {
    let (media, mut rest) = header.split_once(';').map_or((header, ""), |(m, r)| (m, r));
    let media = media.trim();
    let (kind, subtype) = media.split_once('/')?;
    if kind.is_empty()
        || subtype.is_empty()
        || !kind.chars().chain(subtype.chars()).all(is_token_char)
    {
        return None;
    }
    let mut names: Vec<String> = Vec::new();
    loop {
        rest = rest.trim_start();
        if rest.is_empty() {
            break;
        }
        // One parameter: `name=value` up to the next `;` (a quoted value may hold one).
        let (name, after) = rest.split_once('=')?;
        let name = name.trim();
        if name.is_empty() || !name.chars().all(is_token_char) {
            return None;
        }
        let after = after.trim_start();
        let (value_ok, remainder) = if let Some(quoted) = after.strip_prefix('"') {
            let mut escaped = false;
            let mut end = None;
            for (i, c) in quoted.char_indices() {
                match c {
                    _ if escaped => escaped = false,
                    '\\' => escaped = true,
                    '"' => {
                        end = Some(i);
                        break;
                    }
                    _ => {}
                }
            }
            let end = end?;
            (true, &quoted[end + 1..])
        } else {
            let end = after
                .find(|c: char| !is_token_char(c))
                .unwrap_or(after.len());
            (end > 0, &after[end..])
        };
        if !value_ok {
            return None;
        }
        let lower = name.to_ascii_lowercase();
        if names.contains(&lower) {
            return None;
        }
        names.push(lower);
        let remainder = remainder.trim_start();
        match remainder.strip_prefix(';') {
            Some(next) => rest = next,
            None if remainder.is_empty() => break,
            None => return None,
        }
    }
    Some(media.to_ascii_lowercase())
}

/// A patch type, from the `Content-Type` of a PATCH.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchType {
    /// `application/json-patch+json` (RFC 6902).
    Json,
    /// `application/merge-patch+json` (RFC 7386).
    Merge,
    /// `application/strategic-merge-patch+json`.
    StrategicMerge,
    /// `application/apply-patch+yaml` (server-side apply).
    Apply,
}

/// The patch types, for 415 messages.
pub const PATCH_TYPES: &[&str] = &[
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
];

/// The patch type of a PATCH, from its `Content-Type`.
pub fn patch_type(content_type: Option<&str>) -> Result<PatchType, ApiError> {
    let media = content_type.and_then(content_media_type);
    match media.as_deref().unwrap_or("") {
        "application/json-patch+json" => Ok(PatchType::Json),
        "application/merge-patch+json" => Ok(PatchType::Merge),
        "application/strategic-merge-patch+json" => Ok(PatchType::StrategicMerge),
        "application/apply-patch+yaml" => Ok(PatchType::Apply),
        _ => Err(Status::unsupported_media_type(content_type.unwrap_or(""), PATCH_TYPES).into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RESOURCE: Capabilities = Capabilities {
        transforms: true,
        tables: true,
        list: false,
        aggregated_discovery: false,
        protobuf: true,
    };
    const LIST: Capabilities = Capabilities {
        transforms: true,
        tables: true,
        list: true,
        aggregated_discovery: false,
        protobuf: true,
    };
    const DISCOVERY: Capabilities = Capabilities {
        transforms: false,
        tables: false,
        list: false,
        aggregated_discovery: true,
        protobuf: false,
    };

    #[test]
    fn content_types_are_read_as_go_reads_them() {
        for (header, media) in [
            ("application/json", Some("application/json")),
            ("Application/JSON", Some("application/json")),
            ("application/json; charset=utf-8", Some("application/json")),
            (
                "application/json;charset=\"utf-8\"",
                Some("application/json"),
            ),
            ("application/json;", Some("application/json")),
            (
                "application/json; foo=bar; baz=\"a;b\"",
                Some("application/json"),
            ),
            (
                "application/vnd.kubernetes.protobuf",
                Some("application/vnd.kubernetes.protobuf"),
            ),
            (";;;///", None),
            ("application/json;;;", None),
            ("application/json; charset", None),
            ("application/json; charset=", None),
            ("application/json; a=1; a=2", None),
            ("application/json; a=\"open", None),
            ("application/json x", None),
            ("application", None),
            ("/json", None),
            ("", None),
        ] {
            assert_eq!(content_media_type(header).as_deref(), media, "{header:?}");
        }
        assert!(body_format(Some(";;;///")).is_err());
        assert!(body_format(Some("application/json; charset")).is_err());
        assert_eq!(
            body_format(Some("application/json; charset=utf-8")).unwrap(),
            BodyFormat::Json
        );
        assert_eq!(body_format(None).unwrap(), BodyFormat::Json);
        assert!(patch_type(Some("application/merge-patch+json;;")).is_err());
    }

    #[test]
    fn what_real_clients_send() {
        let kubectl_table = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        let n = negotiate(Some(kubectl_table), LIST).unwrap();
        assert_eq!(n.target, Target::Table("v1"));
        assert_eq!(
            n.content_type(),
            "application/json;as=Table;v=v1;g=meta.k8s.io"
        );
        let kube_rs_metadata = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
        assert_eq!(
            negotiate(Some(kube_rs_metadata), LIST).unwrap().target,
            Target::PartialObjectMetadataList("v1")
        );
        let single = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
        assert_eq!(
            negotiate(Some(single), RESOURCE).unwrap().target,
            Target::PartialObjectMetadata("v1")
        );
        let discovery = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
        let n = negotiate(Some(discovery), DISCOVERY).unwrap();
        assert_eq!(
            n.content_type(),
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
        );
        // A legacy discovery endpoint falls back to plain JSON.
        assert_eq!(
            negotiate(Some(discovery), Capabilities::default())
                .unwrap()
                .target,
            Target::Object
        );
        // kubectl's protobuf preference gets protobuf from resource endpoints, JSON elsewhere.
        let proto_first = "application/vnd.kubernetes.protobuf,application/json";
        let n = negotiate(Some(proto_first), RESOURCE).unwrap();
        assert_eq!(
            n,
            Negotiated {
                format: Format::Protobuf,
                target: Target::Object
            }
        );
        assert_eq!(n.content_type(), "application/vnd.kubernetes.protobuf");
        assert_eq!(
            negotiate(Some(proto_first), DISCOVERY).unwrap().format,
            Format::Json
        );
        // A watch asks with stream=watch.
        let watch = "application/vnd.kubernetes.protobuf;stream=watch";
        assert_eq!(
            negotiate(Some(watch), LIST).unwrap().format,
            Format::Protobuf
        );
        // Tables and metadata are not served in protobuf: the clause is skipped.
        let proto_table = "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1;g=meta.k8s.io,application/json";
        assert_eq!(
            negotiate(Some(proto_table), LIST).unwrap(),
            Negotiated {
                format: Format::Json,
                target: Target::Table("v1")
            }
        );
        let proto_meta = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";
        assert_eq!(
            negotiate(Some(proto_meta), RESOURCE).unwrap(),
            Negotiated {
                format: Format::Json,
                target: Target::Object
            }
        );
        assert_eq!(
            negotiate(Some("application/json, */*"), RESOURCE)
                .unwrap()
                .target,
            Target::Object
        );
        assert_eq!(negotiate(None, RESOURCE).unwrap().format, Format::Json);
        assert_eq!(
            negotiate(Some("application/yaml"), RESOURCE)
                .unwrap()
                .format,
            Format::Yaml
        );
    }

    #[test]
    fn q_values_and_unproducible_clauses() {
        assert_eq!(
            negotiate(Some("application/json;q=0.5, application/yaml"), RESOURCE)
                .unwrap()
                .format,
            Format::Yaml
        );
        assert_eq!(
            negotiate(
                Some("application/json;as=Table;g=meta.k8s.io;v=v2,application/json"),
                LIST
            )
            .unwrap()
            .target,
            Target::Object,
            "unknown Table version skipped"
        );
        let status = negotiate(Some("application/vnd.kubernetes.protobuf"), DISCOVERY).unwrap_err();
        assert_eq!(
            (status.code, status.reason.as_str()),
            (406, "NotAcceptable")
        );
        let status = negotiate(Some("text/html"), RESOURCE).unwrap_err();
        assert_eq!(
            status.message,
            "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf"
        );
        assert!(negotiate(Some("text/html"), RESOURCE).is_err());
        assert!(negotiate(Some("application/json;q=0"), RESOURCE).is_err());
    }

    #[test]
    fn bodies_and_patches() {
        assert_eq!(
            body_format(None).unwrap(),
            BodyFormat::Json,
            "the Python client sends no Content-Type"
        );
        assert_eq!(
            body_format(Some("application/json; charset=utf-8")).unwrap(),
            BodyFormat::Json
        );
        assert_eq!(
            body_format(Some("application/vnd.kubernetes.protobuf")).unwrap(),
            BodyFormat::Protobuf
        );
        let status = body_format(Some("text/plain")).unwrap_err();
        assert_eq!(
            (status.code, status.reason.as_str()),
            (415, "UnsupportedMediaType")
        );
        assert_eq!(
            patch_type(Some("application/merge-patch+json")).unwrap(),
            PatchType::Merge
        );
        assert_eq!(
            patch_type(Some("application/json-patch+json")).unwrap(),
            PatchType::Json
        );
        assert_eq!(
            patch_type(Some("application/strategic-merge-patch+json")).unwrap(),
            PatchType::StrategicMerge
        );
        assert_eq!(
            patch_type(Some("application/apply-patch+yaml")).unwrap(),
            PatchType::Apply
        );
        assert_eq!(patch_type(Some("application/json")).unwrap_err().code, 415);
        assert_eq!(patch_type(None).unwrap_err().code, 415);
    }
}
