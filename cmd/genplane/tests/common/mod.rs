//! What the tests of the real binary share: a `genplane apiserver` on loopback with its own
//! data directory, and the kubectl versions the tracker requires.

#![allow(clippy::unwrap_used, dead_code, unreachable_pub)]

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_genplane");

pub struct Apiserver {
    pub child: Child,
    pub dir: tempfile::TempDir,
    pub port: u16,
}

impl Drop for Apiserver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Apiserver {
    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join("data/admin.kubeconfig")
    }

    pub fn kubectl(&self, kubectl: impl AsRef<std::ffi::OsStr>, args: &[&str]) -> Output {
        Command::new(kubectl)
            .arg("--kubeconfig")
            .arg(self.kubeconfig())
            .args(args)
            .output()
            .unwrap()
    }
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub fn start() -> Apiserver {
    start_with(&[])
}

/// Starts `genplane apiserver` with `extra` flags (a storage backend, say).
pub fn start_with(extra: &[&str]) -> Apiserver {
    start_in(tempfile::tempdir().unwrap(), extra)
}

/// Starts `genplane apiserver` over the data directory in `dir` (which may hold an earlier
/// run's data) with `extra` flags, and waits until it is ready; fails if it exits first.
pub fn start_in(dir: tempfile::TempDir, extra: &[&str]) -> Apiserver {
    start_logging_in(dir, extra, None)
}

/// As [`start_in`], appending the server's log (standard error) to `log` when given.
pub fn start_logging_in(
    dir: tempfile::TempDir,
    extra: &[&str],
    log: Option<&std::path::Path>,
) -> Apiserver {
    let port = free_port();
    let stderr = match log {
        Some(path) => Stdio::from(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .unwrap(),
        ),
        None => Stdio::null(),
    };
    let child = Command::new(BIN)
        .args([
            "apiserver",
            "--bind-address=127.0.0.1",
            &format!("--secure-port={port}"),
        ])
        .arg(format!("--data-dir={}", dir.path().join("data").display()))
        .args(extra)
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .unwrap();
    let mut server = Apiserver { child, dir, port };
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(status) = server.child.try_wait().unwrap() {
            panic!("the apiserver exited: {status}");
        }
        if server.kubeconfig().exists()
            && server
                .kubectl("kubectl", &["get", "--raw", "/readyz"])
                .status
                .success()
        {
            return server;
        }
        assert!(
            Instant::now() < deadline,
            "the apiserver did not become ready"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Stops the server and hands back its directory for the next start.
pub fn stop(mut server: Apiserver) -> tempfile::TempDir {
    server.child.kill().unwrap();
    server.child.wait().unwrap();
    // Swap the kept directory out of the server before it is dropped.
    std::mem::replace(&mut server.dir, tempfile::tempdir().unwrap())
}

pub fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

pub fn ok(output: Output) -> String {
    assert!(output.status.success(), "{}", text(&output));
    String::from_utf8(output.stdout).unwrap()
}

/// The kubectl named `name` (`kubectl`, `kubectl.1.33`, ...). The versioned ones live beside
/// the real `kubectl`, which may be a symbolic link from a directory on `PATH`. A missing one
/// fails the test: a test that skips what it cannot find proves nothing.
pub fn kubectl_path(name: &str) -> PathBuf {
    let output = Command::new("sh")
        .args(["-c", "command -v kubectl"])
        .output()
        .unwrap();
    let found = String::from_utf8(output.stdout).unwrap();
    assert!(!found.trim().is_empty(), "no kubectl on PATH");
    let real = std::fs::canonicalize(found.trim()).unwrap();
    let path = real.parent().unwrap().join(name);
    assert!(path.exists(), "{} is missing", path.display());
    path
}

/// kubectl (whatever version is installed), 1.33 and 1.27.
pub fn kubectl_binaries() -> Vec<String> {
    ["kubectl", "kubectl.1.33", "kubectl.1.27"]
        .into_iter()
        .map(|name| kubectl_path(name).display().to_string())
        .collect()
}

/// One HTTPS request to the server on `port`, trusting `ca`, without a client certificate:
/// the status code and body. `headers` are added as given (an `Authorization` header, say).
pub fn https(
    port: u16,
    ca: &std::path::Path,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> (u16, String) {
    use rustls::pki_types::pem::PemObject;
    use std::io::{Read, Write};
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(cert.unwrap()).unwrap();
    }
    let provider = std::sync::Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let mut connection = rustls::ClientConnection::new(std::sync::Arc::new(config), name).unwrap();
    let mut socket = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut tls = rustls::Stream::new(&mut connection, &mut socket);
    let mut request =
        format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    if let Some(body) = body {
        request.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    request.push_str("\r\n");
    request.push_str(body.unwrap_or(""));
    tls.write_all(request.as_bytes()).unwrap();
    let mut raw = Vec::new();
    let _ = tls.read_to_end(&mut raw);
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        let mut out = String::new();
        let mut rest = body;
        while let Some((size, after)) = rest.split_once("\r\n") {
            let Ok(size) = usize::from_str_radix(size.trim(), 16) else {
                break;
            };
            if size == 0 || after.len() < size {
                break;
            }
            out.push_str(&after[..size]);
            rest = after[size..].trim_start_matches("\r\n");
        }
        out
    } else {
        body.to_owned()
    };
    (head.split(' ').nth(1).unwrap().parse().unwrap(), body)
}
