//! Where a request carries its bearer token, as upstream's `bearertoken` and `websocket`
//! request authenticators read it.
//!
//! - `Authorization: Bearer <token>`: the header value is trimmed, split on single spaces; the
//!   scheme is compared case-insensitively and the token is the second part (so
//!   `Bearer  token`, with two spaces, carries an empty token and is not a bearer token).
//! - WebSocket requests (which browsers cannot give headers) may carry it as a subprotocol
//!   `base64url.bearer.authorization.k8s.io.<unpadded base64url of the token>` in
//!   `Sec-WebSocket-Protocol`, next to at least one real subprotocol.
//!
//! When the token then fails to authenticate without a more specific error, upstream answers
//! [`INVALID_BEARER_TOKEN`].

/// The error of a bearer token no token authenticator recognised.
pub const INVALID_BEARER_TOKEN: &str = "invalid bearer token";

/// The subprotocol prefix of a token carried in `Sec-WebSocket-Protocol`.
pub const WEBSOCKET_PROTOCOL_PREFIX: &str = "base64url.bearer.authorization.k8s.io.";

/// What is wrong with a token carried in `Sec-WebSocket-Protocol` (upstream's words).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BearerError {
    /// Two subprotocols carry a token.
    #[error("multiple base64.bearer.authorization tokens specified")]
    MultipleTokens,
    /// The token is not unpadded base64url.
    #[error("invalid base64.bearer.authorization token encoding")]
    InvalidEncoding,
    /// The token is not UTF-8.
    #[error("invalid base64.bearer.authorization token")]
    InvalidToken,
    /// The token subprotocol is the only one, so none would be left to answer with.
    #[error("missing additional subprotocol")]
    MissingAdditionalSubprotocol,
}

/// The bearer token of an `Authorization` header value, or `None` when the header does not
/// carry one (another authenticator may still apply).
pub fn token_from_authorization(value: &str) -> Option<&str> {
    let mut parts = value.trim().split(' ');
    let scheme = parts.next()?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    parts.next().filter(|token| !token.is_empty())
}

/// Whether a request is a WebSocket upgrade (upstream's `wsstream.IsWebSocketRequest`):
/// `Upgrade: websocket` (any case) and a `Connection` value containing `upgrade` (any case).
pub fn is_websocket_request<'a>(
    upgrade: Option<&str>,
    connection: impl IntoIterator<Item = &'a str>,
) -> bool {
    upgrade.is_some_and(|u| u.eq_ignore_ascii_case("websocket"))
        && connection
            .into_iter()
            .any(|c| c.to_ascii_lowercase().contains("upgrade"))
}

/// A bearer token found in `Sec-WebSocket-Protocol`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WebSocketToken {
    /// The token.
    pub token: String,
    /// The other subprotocols, in order: once the token authenticates, the request's
    /// `Sec-WebSocket-Protocol` becomes these joined with `,` so nothing downstream sees the
    /// token.
    pub other_protocols: Vec<String>,
}

/// The bearer token in the `Sec-WebSocket-Protocol` header values of a WebSocket request
/// (check [`is_websocket_request`] first), or `None` when they carry none.
pub fn token_from_websocket_protocols<'a>(
    values: impl IntoIterator<Item = &'a str>,
) -> Result<Option<WebSocketToken>, BearerError> {
    let mut token: Option<String> = None;
    let mut other_protocols = Vec::new();
    for value in values {
        for protocol in value.split(',').map(str::trim) {
            let Some(encoded) = protocol.strip_prefix(WEBSOCKET_PROTOCOL_PREFIX) else {
                other_protocols.push(protocol.to_owned());
                continue;
            };
            if token.is_some() {
                return Err(BearerError::MultipleTokens);
            }
            use base64::Engine as _;
            let decoded = base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(encoded)
                .map_err(|_| BearerError::InvalidEncoding)?;
            token = Some(String::from_utf8(decoded).map_err(|_| BearerError::InvalidToken)?);
        }
    }
    match token {
        Some(token) if !token.is_empty() => {
            if other_protocols.is_empty() {
                return Err(BearerError::MissingAdditionalSubprotocol);
            }
            Ok(Some(WebSocketToken {
                token,
                other_protocols,
            }))
        }
        _ => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authorization_headers_carry_bearer_tokens_as_upstream_reads_them() {
        assert_eq!(token_from_authorization("Bearer abc"), Some("abc"));
        assert_eq!(token_from_authorization("bearer abc"), Some("abc"));
        assert_eq!(token_from_authorization("BEARER abc"), Some("abc"));
        assert_eq!(token_from_authorization("  Bearer abc  "), Some("abc"));
        // Only the second space-separated part is the token.
        assert_eq!(token_from_authorization("Bearer abc def"), Some("abc"));
        assert_eq!(token_from_authorization("Bearer  abc"), None);
        assert_eq!(token_from_authorization("Bearer"), None);
        assert_eq!(token_from_authorization("Bearer "), None);
        assert_eq!(token_from_authorization("Basic YWxhZGRpbg=="), None);
        assert_eq!(token_from_authorization("Bearer\tabc"), None);
        assert_eq!(token_from_authorization(""), None);
    }

    #[test]
    fn websocket_requests_are_recognised_by_their_headers() {
        assert!(is_websocket_request(Some("websocket"), ["Upgrade"]));
        assert!(is_websocket_request(
            Some("WebSocket"),
            ["keep-alive, upgrade"]
        ));
        assert!(!is_websocket_request(Some("h2c"), ["Upgrade"]));
        assert!(!is_websocket_request(None, ["Upgrade"]));
        assert!(!is_websocket_request(Some("websocket"), ["keep-alive"]));
    }

    #[test]
    fn websocket_subprotocols_carry_base64url_tokens() {
        // "abc.def" in unpadded base64url.
        let found = token_from_websocket_protocols([
            "v4.channel.k8s.io, base64url.bearer.authorization.k8s.io.YWJjLmRlZg",
            "v5.channel.k8s.io",
        ])
        .unwrap()
        .unwrap();
        assert_eq!(found.token, "abc.def");
        assert_eq!(
            found.other_protocols,
            ["v4.channel.k8s.io", "v5.channel.k8s.io"]
        );
        assert_eq!(
            token_from_websocket_protocols(["v4.channel.k8s.io"]).unwrap(),
            None
        );
        assert_eq!(
            token_from_websocket_protocols(["base64url.bearer.authorization.k8s.io., v4"]).unwrap(),
            None
        );
    }

    #[test]
    fn bad_websocket_tokens_are_refused_with_upstreams_words() {
        let refused = |values: &[&str]| token_from_websocket_protocols(values.iter().copied());
        assert_eq!(
            refused(&["base64url.bearer.authorization.k8s.io.YWJj"]),
            Err(BearerError::MissingAdditionalSubprotocol)
        );
        assert_eq!(
            refused(&["v4, base64url.bearer.authorization.k8s.io.YWJj=="]),
            Err(BearerError::InvalidEncoding)
        );
        assert_eq!(
            refused(&["v4, base64url.bearer.authorization.k8s.io._w"]),
            Err(BearerError::InvalidToken)
        );
        assert_eq!(
            refused(&[
                "v4, base64url.bearer.authorization.k8s.io.YWJj",
                "base64url.bearer.authorization.k8s.io.YWJj"
            ]),
            Err(BearerError::MultipleTokens)
        );
        assert_eq!(
            BearerError::MultipleTokens.to_string(),
            "multiple base64.bearer.authorization tokens specified"
        );
    }
}
