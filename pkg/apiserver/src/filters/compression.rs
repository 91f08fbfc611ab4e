//! Response compression (the `APIResponseCompression` feature, on by default since 1.16): an
//! answer held in memory of at least [`THRESHOLD_BYTES`] goes out gzip-compressed when the
//! client accepts gzip, as kube-apiserver does (`Content-Encoding: gzip`, `Vary:
//! Accept-Encoding`, compression level 1: the least CPU for a ratio close to the best).
//!
//! kubectl and client-go accept gzip; a large LIST is typically a tenth of its size on the wire.
//! A body held compressed already ([`ResponseBody::gzipped`], as OpenAPI documents are kept)
//! goes out as it is to a client that accepts gzip, whatever its size, and is uncompressed as
//! it is sent to one that does not.
//! Watches and other streamed answers are never compressed (their events must reach the client
//! as they happen), and neither are small answers (compression would cost more than it saves).
//!
//! The gate is consulted for each answer that could be compressed, so the feature can change at
//! run time (a dynamic feature). The compression runs in a task of its own that hands the
//! compressed bytes to the connection in chunks as the client reads them, so a large answer is
//! neither held twice nor compressed on the connection's task.

use std::io::Write as _;

use bytes::Bytes;
use flate2::Compression;
use flate2::write::GzEncoder;
use genplane_component_base::featuregate::{Feature, FeatureGate};
use hyper::Response;
use hyper::header::{
    ACCEPT_ENCODING, CONTENT_ENCODING, CONTENT_LENGTH, HeaderMap, HeaderValue, VARY,
};

use crate::body::ResponseBody;

/// The smallest answer that is compressed, as kube-apiserver's threshold.
pub const THRESHOLD_BYTES: usize = 128 * 1024;

/// The feature that turns compression on (beta and on by default since 1.16, as upstream); the
/// server's feature registry must know it.
pub const FEATURE: Feature = genplane_features::API_RESPONSE_COMPRESSION;

/// How many compressed bytes are handed to the connection at a time.
const CHUNK_BYTES: usize = 64 * 1024;

/// Whether the request's `Accept-Encoding` accepts gzip (a `gzip` or `*` coding whose quality is
/// not zero).
pub fn accepts_gzip(headers: &HeaderMap) -> bool {
    headers
        .get_all(ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|coding| {
            let mut parts = coding.split(';');
            let name = parts.next().unwrap_or_default().trim();
            let refused = parts.any(|p| {
                p.trim()
                    .strip_prefix("q=")
                    .and_then(|q| q.trim().parse::<f32>().ok())
                    .is_some_and(|q| q <= 0.0)
            });
            (name.eq_ignore_ascii_case("gzip") || name == "*") && !refused
        })
}

/// The answer compressed when the client accepts gzip (`accepts`), the feature is on in `gate`
/// and the body is held in memory and large enough; otherwise the answer as it is.
pub fn compress(
    response: Response<ResponseBody>,
    accepts: bool,
    gate: Option<&FeatureGate>,
) -> Response<ResponseBody> {
    if !accepts || response.headers().contains_key(CONTENT_ENCODING) {
        return response;
    }
    let Some(gate) = gate else {
        return response;
    };
    if response.body().is_gzipped() {
        // Compressed already: sent as it is, whatever its size, or uncompressed when sent.
        if !gate.enabled(FEATURE) {
            return response;
        }
        let (mut parts, body) = response.into_parts();
        gzip_headers(&mut parts.headers);
        return Response::from_parts(parts, body.gzip_as_is());
    }
    let size = response.body().held_len();
    if size.is_none_or(|size| size < THRESHOLD_BYTES) || !gate.enabled(FEATURE) {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let (body, guard) = match body {
        ResponseBody::Guarded(inner, guard) => (*inner, Some(guard)),
        other => (other, None),
    };
    let chunks: Box<dyn Iterator<Item = Bytes> + Send> = match body {
        ResponseBody::Full(bytes) => Box::new(bytes.into_iter()),
        ResponseBody::List(list) => Box::new(list),
        ResponseBody::Pieces(pieces) => Box::new(pieces.into_iter()),
        // `held_len` said it is held in memory.
        other => return Response::from_parts(parts, other),
    };
    let (tx, compressed) = ResponseBody::channel(2);
    tokio::spawn(async move {
        let mut encoder = GzEncoder::new(Vec::with_capacity(CHUNK_BYTES), Compression::fast());
        for chunk in chunks {
            // Writing into a Vec cannot fail.
            let _ = encoder.write_all(&chunk);
            if encoder.get_ref().len() >= CHUNK_BYTES {
                let out = std::mem::replace(encoder.get_mut(), Vec::with_capacity(CHUNK_BYTES));
                if tx.send(Bytes::from(out)).await.is_err() {
                    // The client went away.
                    return;
                }
            }
        }
        if let Ok(rest) = encoder.finish()
            && !rest.is_empty()
        {
            let _ = tx.send(Bytes::from(rest)).await;
        }
    });
    gzip_headers(&mut parts.headers);
    let body = match guard {
        Some(guard) => ResponseBody::Guarded(Box::new(compressed), guard),
        None => compressed,
    };
    Response::from_parts(parts, body)
}

/// The headers of an answer sent gzip-compressed: its encoding, no length (the compressed
/// length is not known ahead), and that it varies with `Accept-Encoding`.
fn gzip_headers(headers: &mut HeaderMap) {
    headers.remove(CONTENT_LENGTH);
    headers.insert(CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    headers.append(VARY, HeaderValue::from_static("Accept-Encoding"));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::body::{gunzip, gzip};
    use genplane_component_base::featuregate::{
        FeatureGateSettings, FeatureSpec, Registry, Stage, UseIdentity, Version,
    };
    use http_body_util::BodyExt as _;

    fn gate(on: bool) -> FeatureGate {
        let mut registry = Registry::new();
        registry
            .add(
                FEATURE,
                &[FeatureSpec::new(Version::new(1, 16), Stage::Beta, true)],
            )
            .unwrap();
        registry.allow_dynamic(FEATURE).unwrap();
        let settings = FeatureGateSettings([(FEATURE.name().to_owned(), on)].into_iter().collect());
        registry
            .resolve(
                &settings,
                Version::new(1, 33),
                UseIdentity::new("apiserver", "t"),
            )
            .unwrap()
    }

    fn headers(accept: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(ACCEPT_ENCODING, HeaderValue::from_str(accept).unwrap());
        headers
    }

    #[test]
    fn accept_encoding_is_read_with_qualities() {
        assert!(accepts_gzip(&headers("gzip")));
        assert!(accepts_gzip(&headers("deflate, GZIP;q=0.5")));
        assert!(accepts_gzip(&headers("*")));
        assert!(!accepts_gzip(&headers("gzip;q=0")));
        assert!(!accepts_gzip(&headers("identity")));
        assert!(!accepts_gzip(&HeaderMap::new()));
    }

    fn list_of(size: usize) -> Response<ResponseBody> {
        let item = Bytes::from(format!(
            "{{\"kind\":\"ConfigMap\",\"data\":\"{}\"}}",
            "x".repeat(1000)
        ));
        let count = size.div_ceil(item.len());
        let items = std::iter::repeat_n(genplane_registry::JsonItem::Encoded(item), count);
        Response::new(ResponseBody::List(crate::body::ListBody::new(
            Bytes::from_static(b"{\"items\":["),
            items.collect(),
            Bytes::from_static(b"]}"),
        )))
    }

    async fn read(response: Response<ResponseBody>) -> Vec<u8> {
        response
            .into_body()
            .collect()
            .await
            .unwrap()
            .to_bytes()
            .to_vec()
    }

    #[tokio::test]
    async fn large_answers_are_compressed_and_decompress_to_the_same_bytes() {
        let plain = read(list_of(400 * 1024)).await;
        let gate = gate(true);
        let response = compress(list_of(400 * 1024), true, Some(&gate));
        assert_eq!(response.headers()[CONTENT_ENCODING], "gzip");
        assert_eq!(response.headers()[VARY], "Accept-Encoding");
        let compressed = read(response).await;
        assert!(compressed.len() * 10 < plain.len(), "{}", compressed.len());
        let mut decoded = Vec::new();
        std::io::Read::read_to_end(
            &mut flate2::read::GzDecoder::new(compressed.as_slice()),
            &mut decoded,
        )
        .unwrap();
        assert_eq!(decoded, plain);
    }

    #[tokio::test]
    async fn answers_held_in_pieces_are_compressed_whole() {
        let piece = Bytes::from("{\"a\":\"".to_owned() + &"y".repeat(100 * 1024) + "\"}");
        let pieces = || ResponseBody::pieces(std::iter::repeat_n(piece.clone(), 5));
        let plain = read(Response::new(pieces())).await;
        assert_eq!(plain.len(), 5 * piece.len());
        let gate = gate(true);
        let response = compress(Response::new(pieces()), true, Some(&gate));
        assert_eq!(response.headers()[CONTENT_ENCODING], "gzip");
        let mut decoded = Vec::new();
        std::io::Read::read_to_end(
            &mut flate2::read::GzDecoder::new(read(response).await.as_slice()),
            &mut decoded,
        )
        .unwrap();
        assert_eq!(decoded, plain);
    }

    #[tokio::test]
    async fn answers_held_compressed_go_as_they_are_or_uncompressed() {
        let json = br#"{"openapi":"3.0.0","paths":{}}"#.repeat(10);
        let held = || {
            Response::new(ResponseBody::gzipped(
                [Bytes::from(gzip(&json))],
                json.len(),
            ))
        };
        // Accepted: the compressed bytes as they are, however small.
        let on = gate(true);
        let response = compress(held(), true, Some(&on));
        assert_eq!(response.headers()[CONTENT_ENCODING], "gzip");
        assert_eq!(response.headers()[VARY], "Accept-Encoding");
        let sent = read(response).await;
        assert_eq!(sent, gzip(&json));
        assert_eq!(gunzip(&sent, 0).unwrap(), json);
        // Refused, or the feature off: uncompressed as sent.
        for (accepts, gate) in [(false, gate(true)), (true, gate(false))] {
            let response = compress(held(), accepts, Some(&gate));
            assert!(!response.headers().contains_key(CONTENT_ENCODING));
            assert_eq!(read(response).await, json);
        }
        assert_eq!(read(compress(held(), true, None)).await, json);
    }

    #[tokio::test]
    async fn small_answers_refusing_clients_and_the_feature_off_leave_answers_alone() {
        let on = gate(true);
        let small = compress(list_of(THRESHOLD_BYTES / 2), true, Some(&on));
        assert!(!small.headers().contains_key(CONTENT_ENCODING));
        let refused = compress(list_of(400 * 1024), false, Some(&on));
        assert!(!refused.headers().contains_key(CONTENT_ENCODING));
        let off = gate(false);
        let response = compress(list_of(400 * 1024), true, Some(&off));
        assert!(!response.headers().contains_key(CONTENT_ENCODING));
        // Turned on at run time: the next answer is compressed.
        off.set_dynamic(FEATURE.name(), Some(true)).unwrap();
        let response = compress(list_of(400 * 1024), true, Some(&off));
        assert_eq!(response.headers()[CONTENT_ENCODING], "gzip");
        // Streamed answers never are.
        let (_tx, stream) = ResponseBody::channel(1);
        let streamed = compress(Response::new(stream), true, Some(&on));
        assert!(!streamed.headers().contains_key(CONTENT_ENCODING));
    }
}
