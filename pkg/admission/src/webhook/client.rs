//! The HTTPS client of webhooks, shared by admission webhooks and CustomResourceDefinition
//! conversion webhooks: one client per CA bundle (HTTP/1.1 only, rustls with aws-lc-rs, the
//! bundle's roots or the system's), JSON POSTs with client-go's `?timeout=` query, and errors
//! worded as client-go words them (`Post "<url>": <cause>`, a Status body's message).

use std::time::Duration;

use reqwest::header::{ACCEPT, CONTENT_TYPE};
use serde_json::Value;

/// How much of a non-JSON error body goes into a message, as client-go keeps.
const MAX_ERROR_BODY: usize = 2048;

/// Decodes a `caBundle`: base64 (as `[]byte` fields are in JSON) of PEM certificates.
pub fn parse_ca_bundle(bundle: &str) -> Result<Vec<reqwest::Certificate>, String> {
    let pem = data_encoding::BASE64
        .decode(bundle.as_bytes())
        .map_err(|error| format!("caBundle is not base64: {error}"))?;
    let certificates =
        reqwest::Certificate::from_pem_bundle(&pem).map_err(|error| error_chain(&error))?;
    if certificates.is_empty() {
        return Err("unable to parse bytes as PEM block".to_owned());
    }
    Ok(certificates)
}

/// One client: HTTP/1.1 only, rustls with aws-lc-rs, the CA bundle's roots or the system's,
/// presenting `identity` (a client certificate) when one is given.
pub fn build_client(
    roots: Option<&[reqwest::Certificate]>,
    identity: Option<reqwest::Identity>,
) -> reqwest::Result<reqwest::Client> {
    let mut builder = reqwest::Client::builder()
        .http1_only()
        .user_agent(concat!("genplane/", env!("CARGO_PKG_VERSION")));
    if let Some(roots) = roots {
        builder = builder.tls_certs_only(roots.iter().cloned());
    }
    if let Some(identity) = identity {
        builder = builder.identity(identity);
    }
    builder.build()
}

/// `base` with `?timeout=<timeout>`, as client-go tells the server how long it waits.
pub fn url_with_timeout(base: &reqwest::Url, timeout: Duration) -> reqwest::Url {
    let mut url = base.clone();
    url.set_query(Some(&format!(
        "timeout={}",
        genplane_apimachinery::duration::format(timeout)
    )));
    url
}

/// POSTs the JSON `body` (a review) to `url`, with the `Authorization` header `authorization`
/// when given; the response body on a 2xx answer, else the
/// error as client-go words it.
pub async fn post_json(
    client: &reqwest::Client,
    url: &reqwest::Url,
    body: Vec<u8>,
    timeout: Duration,
    authorization: Option<&str>,
) -> Result<Vec<u8>, String> {
    let describe = |error: reqwest::Error| describe_transport_error(url, &error);
    let mut request = client
        .post(url.clone())
        .header(CONTENT_TYPE, "application/json")
        .header(ACCEPT, "application/json, */*");
    if let Some(authorization) = authorization {
        request = request.header(reqwest::header::AUTHORIZATION, authorization);
    }
    let response = request
        .timeout(timeout)
        .body(body)
        .send()
        .await
        .map_err(describe)?;
    let status = response.status();
    let text_plain = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("text/plain"));
    let body = response.bytes().await.map_err(describe)?;
    if status.is_success() {
        Ok(body.to_vec())
    } else {
        Err(status_error_message(status.as_u16(), &body, text_plain))
    }
}

/// `Post "<url>": <cause>`, close to what Go's HTTP client says.
fn describe_transport_error(url: &reqwest::Url, error: &reqwest::Error) -> String {
    let cause = if error.is_timeout() {
        "context deadline exceeded (Client.Timeout exceeded while awaiting headers)".to_owned()
    } else {
        let mut causes: Vec<String> = Vec::new();
        let mut source = std::error::Error::source(error);
        while let Some(inner) = source {
            let text = inner.to_string();
            // hyper-util's "client error (Connect)" only wraps the cause that follows.
            if causes.last() != Some(&text) && !text.starts_with("client error (") {
                causes.push(text);
            }
            source = inner.source();
        }
        if causes.is_empty() {
            error.to_string()
        } else {
            causes.join(": ")
        }
    };
    format!("Post {:?}: {cause}", url.as_str())
}

/// An error and its sources, joined by `: `.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(inner) = source {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        source = inner.source();
    }
    text
}

/// The message client-go gives a non-2xx answer: a `Status` body's message, else a phrase per
/// status code.
fn status_error_message(code: u16, body: &[u8], text_plain: bool) -> String {
    if let Ok(status) = serde_json::from_slice::<Value>(body)
        && status.get("kind").and_then(Value::as_str) == Some("Status")
        && let Some(message) = status.get("message").and_then(Value::as_str)
        && !message.is_empty()
    {
        return message.to_owned();
    }
    let server_message = if text_plain {
        let text = String::from_utf8_lossy(body);
        let text = text.trim();
        if text.len() > MAX_ERROR_BODY {
            let mut end = MAX_ERROR_BODY;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            format!("{}...", &text[..end])
        } else {
            text.to_owned()
        }
    } else {
        "unknown".to_owned()
    };
    match code {
        409 => "the server reported a conflict".to_owned(),
        404 => "the server could not find the requested resource".to_owned(),
        400 => "the server rejected our request for an unknown reason".to_owned(),
        401 => "the server has asked for the client to provide credentials".to_owned(),
        403 | 415 => server_message,
        406 if server_message.is_empty() || server_message == "unknown" => {
            "the server was unable to respond with a content type that the client supports"
                .to_owned()
        }
        406 => server_message,
        405 => "the server does not allow this method on the requested resource".to_owned(),
        422 => "the server rejected our request due to an error in our request".to_owned(),
        503 => "the server is currently unable to handle the request".to_owned(),
        504 => "the server was unable to return a response in the time allotted, but may still be processing the request".to_owned(),
        429 => "the server has received too many requests and has asked us to try again later"
            .to_owned(),
        code if code >= 500 => format!(
            "an error on the server ({}) has prevented the request from succeeding", genplane_apimachinery::gofmt::Quoted(&server_message)
        ),
        code => format!(
            "the server responded with the status code {code} but did not return more information"
        ),
    }
}
