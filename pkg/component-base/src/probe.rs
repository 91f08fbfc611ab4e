//! A probe of a health endpoint, as the kubelet's HTTP probes ask one: `genplane healthcheck
//! URL`, which the container images run as their `HEALTHCHECK` (they hold no curl, no shell).
//!
//! One `GET` over HTTP/1.1, plain (`http://`) or over TLS (`https://`); healthy when the answer
//! is 2xx or 3xx (redirects are not followed), as the kubelet decides. Over TLS the server's
//! certificate is not verified, as the kubelet does not verify it for its probes: the probe
//! asks its own container's loopback address, and the roles' ops endpoints serve a self-signed
//! certificate (`http::self_signed_tls`). The handshake's signatures are still checked against
//! the certificate presented. The whole probe (connection, handshake, answer) has one deadline.

use std::sync::Arc;
use std::time::Duration;

use clap::{Arg, ArgMatches, Command};
use http_body_util::{BodyExt as _, Empty};
use hyper::body::Bytes;
use hyper::{Request, StatusCode, Uri};
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite};

/// The deadline of a probe when `--timeout` is not given. The kubelet's default is one second;
/// a container's health check runs beside the role's own work on what may be a busy machine.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// The most of an answer's body a probe keeps (and prints): a `/readyz` that failed lists its
/// checks in far less.
const BODY_LIMIT: usize = 16 * 1024;

/// Why a probe did not find the endpoint healthy.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The URL is not an absolute `http://` or `https://` URL with a host.
    #[error("{url:?} is not an http:// or https:// URL with a host: {reason}")]
    Url {
        /// The URL given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// `--timeout` is not a duration.
    #[error("--timeout {0:?} is not a duration such as 5s or 500ms")]
    Timeout(String),
    /// No answer within the deadline.
    #[error("no answer from {url} within {timeout:?}")]
    Deadline {
        /// The URL probed.
        url: String,
        /// The deadline.
        timeout: Duration,
    },
    /// The connection, the TLS handshake or the exchange failed.
    #[error("GET {url}: {what}: {reason}")]
    Exchange {
        /// The URL probed.
        url: String,
        /// The step that failed (`connecting`, `TLS handshake`, ...).
        what: &'static str,
        /// Why.
        reason: String,
    },
    /// The endpoint answered, with a status other than 2xx or 3xx.
    #[error("GET {url}: {status}\n{body}")]
    Unhealthy {
        /// The URL probed.
        url: String,
        /// The answer's status.
        status: StatusCode,
        /// The answer's body (its first 16 KiB).
        body: String,
    },
}

/// A healthy endpoint's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Healthy {
    /// The answer's status (2xx or 3xx).
    pub status: StatusCode,
    /// The answer's body (its first 16 KiB).
    pub body: String,
}

/// The command line of `genplane healthcheck`.
pub fn command() -> Command {
    Command::new("healthcheck")
        .about(
            "Probe a health endpoint as the kubelet does (the container images' HEALTHCHECK): \
             GET the URL, exit 0 on a 2xx or 3xx answer and 1 otherwise; over HTTPS the \
             certificate is not verified",
        )
        .arg(
            Arg::new("url")
                .value_name("URL")
                .required(true)
                .help("The endpoint, e.g. https://127.0.0.1:6443/readyz"),
        )
        .arg(
            Arg::new("timeout")
                .long("timeout")
                .value_name("DURATION")
                .default_value("5s")
                .allow_hyphen_values(true)
                .help("How long the whole probe may take (a Go duration such as 5s or 500ms)"),
        )
}

/// Probes the endpoint `matches` of [`command`] name, on a runtime of its own.
pub fn run(matches: &ArgMatches) -> Result<Healthy, Error> {
    let url = matches
        .get_one::<String>("url")
        .map_or("", String::as_str)
        .to_owned();
    let timeout = matches
        .get_one::<String>("timeout")
        .map_or(Ok(DEFAULT_TIMEOUT), |text| {
            genplane_apimachinery::duration::parse(text)
                .ok()
                .filter(|d| !d.is_zero())
                .ok_or_else(|| Error::Timeout(text.clone()))
        })?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::Exchange {
            url: url.clone(),
            what: "starting the runtime",
            reason: e.to_string(),
        })?;
    runtime.block_on(probe(&url, timeout))
}

/// The parts of a probed URL.
struct Target {
    tls: bool,
    host: String,
    port: u16,
    authority: String,
    path: String,
}

fn target(url: &str) -> Result<Target, Error> {
    let invalid = |reason: &str| Error::Url {
        url: url.to_owned(),
        reason: reason.to_owned(),
    };
    let uri: Uri = url
        .parse()
        .map_err(|e: hyper::http::uri::InvalidUri| invalid(&e.to_string()))?;
    let tls = match uri.scheme_str() {
        Some("https") => true,
        Some("http") => false,
        Some(other) => {
            return Err(invalid(&format!(
                "scheme {other} is neither http nor https"
            )));
        }
        None => return Err(invalid("no scheme")),
    };
    let authority = uri.authority().ok_or_else(|| invalid("no host"))?;
    let host = authority
        .host()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    if host.is_empty() {
        return Err(invalid("no host"));
    }
    let port = authority.port_u16().unwrap_or(if tls { 443 } else { 80 });
    let path = uri.path_and_query().map_or("/", |p| p.as_str()).to_owned();
    Ok(Target {
        tls,
        host,
        port,
        authority: authority.as_str().to_owned(),
        path,
    })
}

/// GETs `url` within `timeout`: healthy on 2xx and 3xx, as the kubelet's probes.
pub async fn probe(url: &str, timeout: Duration) -> Result<Healthy, Error> {
    let target = target(url)?;
    match tokio::time::timeout(timeout, exchange(url, &target)).await {
        Ok(answer) => answer,
        Err(_) => Err(Error::Deadline {
            url: url.to_owned(),
            timeout,
        }),
    }
}

async fn exchange(url: &str, target: &Target) -> Result<Healthy, Error> {
    let failed = |what: &'static str| {
        move |e: &dyn std::fmt::Display| Error::Exchange {
            url: url.to_owned(),
            what,
            reason: e.to_string(),
        }
    };
    let tcp = tokio::net::TcpStream::connect((target.host.as_str(), target.port))
        .await
        .map_err(|e| failed("connecting")(&e))?;
    let (status, body) = if target.tls {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| failed("configuring TLS")(&e))?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(crate::tls::AnyCertificate::new(provider)))
            .with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let name = ServerName::try_from(target.host.clone())
            .map_err(|e| failed("naming the server")(&e))?;
        let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
            .connect(name, tcp)
            .await
            .map_err(|e| failed("TLS handshake")(&e))?;
        get(tls, target, url).await?
    } else {
        get(tcp, target, url).await?
    };
    if status.is_success() || status.is_redirection() {
        Ok(Healthy { status, body })
    } else {
        Err(Error::Unhealthy {
            url: url.to_owned(),
            status,
            body,
        })
    }
}

/// One GET over `io`: the status and the body's first [`BODY_LIMIT`] bytes.
async fn get<IO>(io: IO, target: &Target, url: &str) -> Result<(StatusCode, String), Error>
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let failed = |what: &'static str| {
        move |e: hyper::Error| Error::Exchange {
            url: url.to_owned(),
            what,
            reason: e.to_string(),
        }
    };
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .map_err(failed("HTTP handshake"))?;
    // Drives the connection; it ends with the answer or when the probe's deadline drops it.
    tokio::spawn(connection);
    let request = Request::get(target.path.as_str())
        .header(hyper::header::HOST, target.authority.as_str())
        .header(
            hyper::header::USER_AGENT,
            concat!("genplane-healthcheck/", env!("CARGO_PKG_VERSION")),
        )
        .body(Empty::<Bytes>::new())
        .map_err(|e| Error::Exchange {
            url: url.to_owned(),
            what: "building the request",
            reason: e.to_string(),
        })?;
    let response = sender
        .send_request(request)
        .await
        .map_err(failed("sending the request"))?;
    let status = response.status();
    let mut body = response.into_body();
    let mut kept = Vec::new();
    while kept.len() < BODY_LIMIT {
        match body.frame().await {
            Some(frame) => {
                if let Ok(data) = frame.map_err(failed("reading the answer"))?.into_data() {
                    kept.extend_from_slice(&data);
                }
            }
            None => break,
        }
    }
    kept.truncate(BODY_LIMIT);
    Ok((status, String::from_utf8_lossy(&kept).into_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_split_into_what_the_probe_needs() {
        let t = target("https://127.0.0.1:6443/readyz?verbose").unwrap();
        assert!(t.tls);
        assert_eq!((t.host.as_str(), t.port), ("127.0.0.1", 6443));
        assert_eq!(t.authority, "127.0.0.1:6443");
        assert_eq!(t.path, "/readyz?verbose");
        let t = target("http://[::1]/health").unwrap();
        assert!(!t.tls);
        assert_eq!((t.host.as_str(), t.port), ("::1", 80));
        assert_eq!(target("https://localhost").unwrap().path, "/");
        assert_eq!(target("https://localhost").unwrap().port, 443);
    }

    #[test]
    fn bad_urls_say_what_is_wrong() {
        for (url, reason) in [
            ("127.0.0.1:6443/readyz", "invalid format"),
            ("/readyz", "no scheme"),
            (
                "ftp://127.0.0.1/readyz",
                "scheme ftp is neither http nor https",
            ),
            ("https://", "is not an http:// or https:// URL with a host"),
            ("", "empty string"),
        ] {
            let error = target(url).err().unwrap().to_string();
            assert!(error.contains(reason), "{url}: {error}");
        }
    }

    #[test]
    fn the_timeout_must_be_a_positive_duration() {
        for bad in ["0s", "five", "-1s"] {
            let matches =
                command().get_matches_from(["healthcheck", "--timeout", bad, "https://x"]);
            match run(&matches) {
                Err(Error::Timeout(t)) => assert_eq!(t, bad),
                other => panic!("{bad}: {other:?}"),
            }
        }
    }
}
