//! Clients built from a kubeconfig: raw HTTPS requests (one connection each, from the test's
//! own thread, no async runtime needed) and kube-rs clients. kubectl is
//! [`crate::kubectl_command`].

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use serde_json::Value;

/// A whole answer.
#[derive(Debug)]
pub struct Answer {
    /// The status code.
    pub status: u16,
    /// The header lines, names in lower case.
    pub headers: Vec<(String, String)>,
    /// The body, de-chunked.
    pub body: Vec<u8>,
}

impl Answer {
    /// The body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body as JSON (the test fails when it is not).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text()))
    }

    /// A header's value, empty when absent.
    pub fn header(&self, name: &str) -> &str {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map_or("", |(_, v)| v.as_str())
    }
}

/// An HTTPS client for one server: its address, the CA it trusts, and an optional client
/// certificate.
#[derive(Clone, Debug)]
pub struct Raw {
    /// `host:port`.
    pub address: String,
    config: Arc<rustls::ClientConfig>,
}

/// A client certificate and its key, PEM.
type Identity = (Vec<u8>, Vec<u8>);

/// The server, CA and client certificate of a kubeconfig's first cluster and user.
fn read_kubeconfig(path: &Path) -> (String, Vec<u8>, Option<Identity>) {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let config: Value = serde_saphyr::from_str(&text).unwrap();
    let data = |value: &Value| {
        base64::engine::general_purpose::STANDARD
            .decode(value.as_str().unwrap())
            .unwrap()
    };
    let cluster = &config["clusters"][0]["cluster"];
    let user = &config["users"][0]["user"];
    let identity = user
        .get("client-certificate-data")
        .map(|cert| (data(cert), data(&user["client-key-data"])));
    (
        cluster["server"].as_str().unwrap().to_owned(),
        data(&cluster["certificate-authority-data"]),
        identity,
    )
}

impl Raw {
    /// A client for the server of `kubeconfig`, as its user (a client certificate).
    pub fn from_kubeconfig(kubeconfig: &Path) -> Raw {
        let (server, ca, identity) = read_kubeconfig(kubeconfig);
        let address = server.strip_prefix("https://").unwrap().to_owned();
        Raw::new(address, &ca, identity)
    }

    /// The same server without a client certificate (anonymous, or a bearer token in the
    /// headers).
    pub fn without_certificate(kubeconfig: &Path) -> Raw {
        let (server, ca, _) = read_kubeconfig(kubeconfig);
        Raw::new(
            server.strip_prefix("https://").unwrap().to_owned(),
            &ca,
            None,
        )
    }

    /// A client for `address` trusting the PEM certificates in `ca_pem`.
    pub fn new(address: String, ca_pem: &[u8], identity: Option<Identity>) -> Raw {
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(ca_pem) {
            roots.add(cert.unwrap()).unwrap();
        }
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots);
        let config = match identity {
            Some((cert, key)) => {
                let certs = CertificateDer::pem_slice_iter(&cert)
                    .map(Result::unwrap)
                    .collect();
                builder
                    .with_client_auth_cert(certs, PrivateKeyDer::from_pem_slice(&key).unwrap())
                    .unwrap()
            }
            None => builder.with_no_client_auth(),
        };
        Raw {
            address,
            config: Arc::new(config),
        }
    }

    /// One request; the answer, or why none came (no connection, say).
    pub fn try_request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&[u8]>,
    ) -> Result<Answer, String> {
        let name = ServerName::try_from("localhost").unwrap();
        let mut connection =
            rustls::ClientConnection::new(self.config.clone(), name).map_err(|e| e.to_string())?;
        let mut socket = TcpStream::connect(&self.address).map_err(|e| e.to_string())?;
        socket
            .set_read_timeout(Some(Duration::from_secs(30)))
            .map_err(|e| e.to_string())?;
        let mut tls = rustls::Stream::new(&mut connection, &mut socket);
        let mut request =
            format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n");
        for (name, value) in headers {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
        if let Some(body) = body {
            if !headers
                .iter()
                .any(|(n, _)| n.eq_ignore_ascii_case("content-type"))
            {
                request.push_str("Content-Type: application/json\r\n");
            }
            request.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        request.push_str("\r\n");
        let mut bytes = request.into_bytes();
        bytes.extend_from_slice(body.unwrap_or_default());
        tls.write_all(&bytes).map_err(|e| e.to_string())?;
        let mut raw = Vec::new();
        match tls.read_to_end(&mut raw) {
            Ok(_) => {}
            // Servers may close without a TLS close_notify once the answer is complete.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !raw.is_empty() => {}
            Err(e) => return Err(e.to_string()),
        }
        parse(&raw)
    }

    /// One request; the test fails when no answer comes.
    pub fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&[u8]>,
    ) -> Answer {
        self.try_request(method, path, headers, body)
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"))
    }

    /// `GET path`.
    pub fn get(&self, path: &str) -> Answer {
        self.request("GET", path, &[], None)
    }

    /// The TLS configuration of its connections (the CA trusted, the client certificate if
    /// any), for a client of the test's own (a proxy's upstream side, say).
    pub fn tls_config(&self) -> Arc<rustls::ClientConfig> {
        self.config.clone()
    }
}

/// Splits a raw HTTP/1.1 answer into status, headers and (de-chunked) body.
fn parse(raw: &[u8]) -> Result<Answer, String> {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| format!("no complete answer: {}", String::from_utf8_lossy(raw)))?;
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|line| line.split(' ').nth(1))
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| format!("no status line: {head}"))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let mut body = raw[split + 4..].to_vec();
    let chunked = headers
        .iter()
        .any(|(n, v)| n == "transfer-encoding" && v.contains("chunked"));
    if chunked {
        let mut out = Vec::new();
        let mut rest = body.as_slice();
        while let Some(end) = rest.windows(2).position(|w| w == b"\r\n") {
            let size = std::str::from_utf8(&rest[..end])
                .ok()
                .and_then(|s| usize::from_str_radix(s.trim(), 16).ok())
                .ok_or("a malformed chunk size")?;
            let data = &rest[end + 2..];
            if size == 0 || data.len() < size {
                break;
            }
            out.extend_from_slice(&data[..size]);
            rest = data[size..].strip_prefix(b"\r\n").unwrap_or(&data[size..]);
        }
        body = out;
    }
    Ok(Answer {
        status,
        headers,
        body,
    })
}

/// One HTTPS request to the server on `port`, trusting `ca`, without a client certificate:
/// the status code and body. `headers` are added as given (an `Authorization` header, say).
pub fn https(
    port: u16,
    ca: &Path,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> (u16, String) {
    let ca = std::fs::read(ca).unwrap();
    let answer = Raw::new(format!("127.0.0.1:{port}"), &ca, None).request(
        method,
        path,
        headers,
        body.map(str::as_bytes),
    );
    (answer.status, answer.text())
}

/// A kube-rs client for the server and user of `kubeconfig`.
pub async fn kube_client(kubeconfig: &Path) -> kube::Client {
    kube::Client::try_from(kube_config(kubeconfig).await).unwrap()
}

/// The kube-rs configuration of `kubeconfig`'s current context, for a client that changes it
/// first (no retries of its own, say).
pub async fn kube_config(kubeconfig: &Path) -> kube::Config {
    let read = kube::config::Kubeconfig::read_from(kubeconfig)
        .unwrap_or_else(|e| panic!("reading {}: {e}", kubeconfig.display()));
    kube::Config::from_custom_kubeconfig(read, &Default::default())
        .await
        .unwrap()
}
