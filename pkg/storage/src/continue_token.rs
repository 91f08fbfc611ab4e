//! Continue tokens for paginated lists, in the format kube-apiserver uses.
//!
//! A token carries the revision of the first page and the key to resume from, so every page of
//! one list reads the same snapshot. It is `base64url(JSON {"v":"meta.k8s.io/v1","rv":N,
//! "start":"<key after the prefix>"})`, as upstream encodes it, so tokens look the same to
//! clients; a token of [`encode_counted`] adds `"remaining":N`, the keys left in the snapshot,
//! so that later pages need not count them. Once the revision is compacted, reading the next page fails as
//! [`crate::Error::Compacted`] (HTTP 410 Expired); the answer then carries a token from
//! [`encode_latest`], whose revision is `-1` as upstream writes it: it goes on from the same key
//! at whatever the current revision is, so the list is no longer one snapshot.

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
    /// The token's revision is zero.
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
    /// The keys from `start` on at `rv`, when the first page counted them: every page reads
    /// the same snapshot, so each later page's remaining count follows from it without
    /// counting the rest of the range again (which, page after page, made a paginated list
    /// of a large collection cost the square of its length).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    remaining: Option<i64>,
}

/// The position a token encodes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Position {
    /// The key to resume from (inclusive), with the list prefix.
    pub start: String,
    /// The revision to read at; `None` for the current one (a token from [`encode_latest`]).
    pub revision: Option<Revision>,
    /// How many keys there are from `start` on at `revision`, when the token says (one from
    /// [`encode_counted`]).
    pub remaining: Option<i64>,
}

/// The token for the page after `last_key`, of a list of `prefix` read at `revision`.
pub fn encode_after(last_key: &str, prefix: &str, revision: Revision) -> String {
    after(last_key, prefix, revision, None)
}

/// Like [`encode_after`], for a list that knows `remaining` keys follow `last_key` at
/// `revision`: the next page reads the count from the token ([`Position::remaining`]).
pub fn encode_counted(last_key: &str, prefix: &str, revision: Revision, remaining: i64) -> String {
    after(last_key, prefix, revision, Some(remaining))
}

fn after(last_key: &str, prefix: &str, revision: Revision, remaining: Option<i64>) -> String {
    // The smallest key greater than `last_key`.
    let next = format!("{last_key}\0");
    let start = next.strip_prefix(prefix).unwrap_or(&next).to_owned();
    let token = Token {
        v: API_VERSION.to_owned(),
        rv: revision,
        start,
        remaining,
    };
    encode(&token)
}

/// The token that goes on from `start` (a key within `prefix`, as [`decode`] returned it) at
/// the current revision, whatever it is when the token is used: what an expired token is
/// answered with, so that a client may finish its list, knowing that it no longer reads one
/// snapshot.
pub fn encode_latest(start: &str, prefix: &str) -> String {
    encode(&Token {
        v: API_VERSION.to_owned(),
        rv: -1,
        start: start.strip_prefix(prefix).unwrap_or(start).to_owned(),
        remaining: None,
    })
}

fn encode(token: &Token) -> String {
    let json = serde_json::to_vec(token)
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
    // Upstream's rule: 0 is invalid, a negative revision means the current one.
    if token.rv == 0 {
        return Err(Error::BadRevision);
    }
    let escapes =
        token.start.starts_with('/') || token.start.split('/').any(|segment| segment == "..");
    if escapes {
        return Err(Error::BadKey);
    }
    let revision = (token.rv > 0).then_some(token.rv);
    Ok(Position {
        start: format!("{prefix}{}", token.start),
        revision,
        // A count belongs to its snapshot, and is never negative.
        remaining: token.remaining.filter(|n| *n >= 0 && revision.is_some()),
    })
}

/// The fuzz entry point of [`decode`]: the input (read lossily as UTF-8) as a token of a list
/// of `/registry/configmaps/`. A token that decodes stays within the prefix, and the tokens
/// made from its position decode back to it.
///
/// # Panics
///
/// When decoding panics, a decoded position leaves the prefix, or a round trip fails.
pub fn exercise(data: &[u8]) {
    const PREFIX: &str = "/registry/configmaps/";
    let text = String::from_utf8_lossy(data);
    let Ok(position) = decode(&text, PREFIX) else {
        return;
    };
    let key = position
        .start
        .strip_prefix(PREFIX)
        .expect("invariant: decode puts the prefix in front");
    assert!(
        !key.starts_with('/') && !key.split('/').any(|segment| segment == ".."),
        "{text:?} leaves the prefix: {key:?}"
    );
    let latest = decode(&encode_latest(&position.start, PREFIX), PREFIX);
    assert_eq!(
        latest,
        Ok(Position {
            start: position.start.clone(),
            revision: None,
            remaining: None,
        })
    );
    if let Some(revision) = position.revision
        && let Some(before) = position.start.strip_suffix('\0')
    {
        let again = match position.remaining {
            Some(n) => encode_counted(before, PREFIX, revision, n),
            None => encode_after(before, PREFIX, revision),
        };
        assert_eq!(decode(&again, PREFIX), Ok(position));
    }
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
                revision: Some(42),
                remaining: None,
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
    fn a_latest_token_goes_on_from_the_same_key_at_the_current_revision() {
        let start = "/registry/configmaps/ns/b\0";
        let token = encode_latest(start, "/registry/configmaps/");
        let json = String::from_utf8(URL_SAFE_NO_PAD.decode(&token).unwrap()).unwrap();
        assert_eq!(
            json,
            r#"{"v":"meta.k8s.io/v1","rv":-1,"start":"ns/b\u0000"}"#
        );
        assert_eq!(
            decode(&token, "/registry/configmaps/").unwrap(),
            Position {
                start: start.into(),
                revision: None,
                remaining: None,
            }
        );
    }

    #[test]
    fn a_counted_token_carries_the_remaining_keys_of_its_snapshot() {
        let prefix = "/registry/configmaps/";
        let token = encode_counted("/registry/configmaps/ns/b", prefix, 42, 7);
        assert_eq!(
            decode(&token, prefix).unwrap(),
            Position {
                start: "/registry/configmaps/ns/b\0".into(),
                revision: Some(42),
                remaining: Some(7),
            }
        );
        // A count that is negative, or without a snapshot to belong to, is not believed.
        let encode = |json: &str| URL_SAFE_NO_PAD.encode(json);
        for json in [
            r#"{"v":"meta.k8s.io/v1","rv":3,"start":"a","remaining":-1}"#,
            r#"{"v":"meta.k8s.io/v1","rv":-1,"start":"a","remaining":5}"#,
        ] {
            assert_eq!(decode(&encode(json), prefix).unwrap().remaining, None);
        }
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
