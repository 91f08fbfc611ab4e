//! Sending a [`Probe`] from the machine this runs on: what the runner does when the provider
//! has no [`Capability::TrafficProbe`](crate::Capability::TrafficProbe), and what a provider
//! whose probes start from the runner's machine can answer with.

use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::{Probe, ProbeAnswer, ProbeKind};

/// The most of an HTTP probe's answer that is read: far more than any test's backend sends (a
/// host name, a short page), so that a backend streaming without end costs the runner at most
/// this much before the probe fails, not memory until the probe's timeout.
pub const MAX_HTTP_ANSWER_BYTES: u64 = 1 << 20;

fn failed(error: impl std::fmt::Display) -> ProbeAnswer {
    ProbeAnswer {
        status: None,
        body: None,
        error: Some(error.to_string()),
    }
}

/// Sends `probe` directly; a connection refused, reset or timed out is an answer with an
/// `error`, not a failure of the call.
pub async fn send(probe: &Probe) -> ProbeAnswer {
    let timeout = Duration::from_millis(probe.timeout_ms.max(1));
    let sent = match &probe.kind {
        ProbeKind::Http { path } => {
            tokio::time::timeout(timeout, http_get(&probe.address, probe.port, path)).await
        }
        ProbeKind::Udp { message } => {
            tokio::time::timeout(timeout, udp_ask(&probe.address, probe.port, message)).await
        }
    };
    match sent {
        Ok(Ok(answer)) => answer,
        Ok(Err(error)) => failed(error),
        Err(_) => failed(format!("no answer within {timeout:?}")),
    }
}

fn host(address: &str) -> &str {
    address.trim_start_matches('[').trim_end_matches(']')
}

async fn http_get(address: &str, port: u16, path: &str) -> std::io::Result<ProbeAnswer> {
    let mut stream = tokio::net::TcpStream::connect((host(address), port)).await?;
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\nUser-Agent: genplane-ccm-e2e\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await?;
    let mut answer = Vec::new();
    (&mut stream)
        .take(MAX_HTTP_ANSWER_BYTES + 1)
        .read_to_end(&mut answer)
        .await?;
    if answer.len() as u64 > MAX_HTTP_ANSWER_BYTES {
        return Ok(failed(format!(
            "the answer is larger than {MAX_HTTP_ANSWER_BYTES} bytes"
        )));
    }
    let text = String::from_utf8_lossy(&answer);
    let Some((head, body)) = text.split_once("\r\n\r\n") else {
        return Ok(failed(if text.is_empty() {
            "the connection was closed without an answer".to_owned()
        } else {
            format!(
                "not an HTTP answer: {:?}",
                text.chars().take(80).collect::<String>()
            )
        }));
    };
    let status = head.split(' ').nth(1).and_then(|code| code.parse().ok());
    let chunked = head.lines().any(|l| {
        l.to_ascii_lowercase()
            .starts_with("transfer-encoding: chunked")
    });
    Ok(ProbeAnswer {
        status,
        body: Some(if chunked {
            dechunk(body)
        } else {
            body.to_owned()
        }),
        error: None,
    })
}

/// The body of a chunked answer.
fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if size == 0 || rest.len() < size {
            break;
        }
        out.push_str(&rest[..size]);
        body = rest[size..].trim_start_matches("\r\n");
    }
    out
}

async fn udp_ask(address: &str, port: u16, message: &str) -> std::io::Result<ProbeAnswer> {
    let target = tokio::net::lookup_host((host(address), port))
        .await?
        .next()
        .ok_or_else(|| std::io::Error::other(format!("{address} has no address")))?;
    let local: std::net::SocketAddr = if target.is_ipv4() {
        ([0, 0, 0, 0], 0).into()
    } else {
        ([0u16; 8], 0).into()
    };
    let socket = tokio::net::UdpSocket::bind(local).await?;
    socket.send_to(message.as_bytes(), target).await?;
    let mut buffer = vec![0u8; 65536];
    let (length, _) = socket.recv_from(&mut buffer).await?;
    Ok(ProbeAnswer {
        status: None,
        body: Some(String::from_utf8_lossy(&buffer[..length]).into_owned()),
        error: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn http_and_udp_probes_answer_or_say_why_not() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let port = listener.local_addr().map(|a| a.port()).unwrap_or_default();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let mut buffer = [0u8; 1024];
                let _ = stream.read(&mut buffer).await;
                let _ = stream
                    .write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\npod\r\n2\r\n-1\r\n0\r\n\r\n")
                    .await;
            }
        });
        let probe = |kind, port| Probe {
            kind,
            address: "127.0.0.1".into(),
            port,
            timeout_ms: 2000,
        };
        let answer = send(&probe(
            ProbeKind::Http {
                path: "/hostname".into(),
            },
            port,
        ))
        .await;
        assert_eq!(answer.ok_body(), Some("pod-1"), "{answer:?}");

        let udp = tokio::net::UdpSocket::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let udp_port = udp.local_addr().map(|a| a.port()).unwrap_or_default();
        tokio::spawn(async move {
            let mut buffer = [0u8; 64];
            if let Ok((_, from)) = udp.recv_from(&mut buffer).await {
                let _ = udp.send_to(b"pod-2", from).await;
            }
        });
        let answer = send(&probe(
            ProbeKind::Udp {
                message: "hostname".into(),
            },
            udp_port,
        ))
        .await;
        assert_eq!(answer.ok_body(), Some("pod-2"), "{answer:?}");

        // Nothing listens on a port just released.
        let closed = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .unwrap_or_default();
        let answer = send(&probe(ProbeKind::Http { path: "/".into() }, closed)).await;
        assert!(
            answer.error.is_some() && answer.ok_body().is_none(),
            "{answer:?}"
        );
    }

    #[tokio::test]
    async fn an_endless_http_answer_fails_the_probe_at_the_size_limit() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let port = listener.local_addr().map(|a| a.port()).unwrap_or_default();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let mut buffer = [0u8; 1024];
                let _ = stream.read(&mut buffer).await;
                let _ = stream.write_all(b"HTTP/1.1 200 OK\r\n\r\n").await;
                let chunk = vec![b'x'; 64 * 1024];
                // Without end, until the reader goes away.
                while stream.write_all(&chunk).await.is_ok() {}
            }
        });
        let answer = send(&Probe {
            kind: ProbeKind::Http { path: "/".into() },
            address: "127.0.0.1".into(),
            port,
            timeout_ms: 20_000,
        })
        .await;
        assert_eq!(
            answer.error.as_deref(),
            Some("the answer is larger than 1048576 bytes"),
            "{answer:?}"
        );
        assert!(answer.ok_body().is_none());
    }
}
