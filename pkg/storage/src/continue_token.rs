//! Continue tokens for paginated lists, in the format kube-apiserver uses.
//!
//! A token carries the revision of the first page and the key to resume from, so every page of
//! one list reads the same snapshot. It is `base64url(JSON {"v":"meta.k8s.io/v1","rv":N,
//! "start":"<key after the prefix>"})`, as upstream encodes it, so tokens look the same to
//! clients. Once the revision is compacted, reading the next page fails as
//! [`crate::Error::Compacted`] (HTTP 410 Expired).

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};

use crate::Revision;

const API_VERSION: &str = "meta.k8s.io/v1";

/// Errors of decoding a continue token.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The token is not base64url-encoded JSON of the expected shape.
    #[error("continue key is not valid: {0}")]
    Malformed(String),
    /// The token was made by a different server or version.
    #[error("continue key is not supported by this server")]
    Unsupported,
    /// The token's revision is not positive.
    #[error(
        "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)"
    )]
    BadRevision,
    /// The token's key tries to leave the listed prefix.
    #[error("continue key is not valid: the start key must stay within the listed prefix")]
    BadKey,
}

#[derive(Serialize, Deserialize)]
struct Token {
    v: String,
    rv: Revision,
    start: String,
}

/// The position a token encodes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Position {
    /// The key to resume from (inclusive), with the list prefix.
    pub start: String,
    /// The revision to read at.
    pub revision: Revision,
}

/// The token for the page after `last_key`, of a list of `prefix` read at `revision`.
pub fn encode_after(last_key: &str, prefix: &str, revision: Revision) -> String {
    // The smallest key greater than `last_key`.
    let next = format!("{last_key}\0");
    let start = next.strip_prefix(prefix).unwrap_or(&next).to_owned();
    let token = Token {
        v: API_VERSION.to_owned(),
        rv: revision,
        start,
    };
    let json = serde_json::to_vec(&token)
        .expect("invariant: a struct of strings and an integer serializes");
    URL_SAFE_NO_PAD.encode(json)
}

/// Decodes a token for a list of `prefix`.
pub fn decode(token: &str, prefix: &str) -> Result<Position, Error> {
    let json = URL_SAFE_NO_PAD
        .decode(token.trim_end_matches('='))
        .map_err(|e| Error::Malformed(e.to_string()))?;
    let token: Token =
        serde_json::from_slice(&json).map_err(|e| Error::Malformed(e.to_string()))?;
    if token.v != API_VERSION {
        return Err(Error::Unsupported);
    }
    if token.rv <= 0 {
        return Err(Error::BadRevision);
    }
    let escapes =
        token.start.starts_with('/') || token.start.split('/').any(|segment| segment == "..");
    if escapes {
        return Err(Error::BadKey);
    }
    Ok(Position {
        start: format!("{prefix}{}", token.start),
        revision: token.rv,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_within_the_prefix() {
        let token = encode_after("/registry/configmaps/ns/b", "/registry/configmaps/", 42);
        let position = decode(&token, "/registry/configmaps/").unwrap();
        assert_eq!(
            position,
            Position {
                start: "/registry/configmaps/ns/b\0".into(),
                revision: 42
            }
        );
        // The JSON inside is what kube-apiserver writes.
        let json = String::from_utf8(URL_SAFE_NO_PAD.decode(&token).unwrap()).unwrap();
        assert_eq!(
            json,
            r#"{"v":"meta.k8s.io/v1","rv":42,"start":"ns/b\u0000"}"#
        );
    }

    #[test]
    fn refuses_bad_tokens() {
        let encode = |json: &str| URL_SAFE_NO_PAD.encode(json);
        assert!(matches!(decode("%%%", "/p/"), Err(Error::Malformed(_))));
        assert!(matches!(
            decode(&encode("{}"), "/p/"),
            Err(Error::Malformed(_))
        ));
        assert_eq!(
            decode(&encode(r#"{"v":"other/v1","rv":1,"start":"a"}"#), "/p/"),
            Err(Error::Unsupported)
        );
        assert_eq!(
            decode(
                &encode(r#"{"v":"meta.k8s.io/v1","rv":0,"start":"a"}"#),
                "/p/"
            ),
            Err(Error::BadRevision)
        );
        assert_eq!(
            decode(
                &encode(r#"{"v":"meta.k8s.io/v1","rv":3,"start":"../secrets/x"}"#),
                "/p/"
            ),
            Err(Error::BadKey)
        );
        assert_eq!(
            decode(
                &encode(r#"{"v":"meta.k8s.io/v1","rv":3,"start":"/etc"}"#),
                "/p/"
            ),
            Err(Error::BadKey)
        );
    }
}
