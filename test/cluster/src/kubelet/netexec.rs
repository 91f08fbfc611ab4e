//! What a pod running agnhost's `netexec` answers, served in-process on the pod's own address:
//! over HTTP (`--http-port`, default 8080) `/hostname` (the pod's name), `/clientip` (the
//! caller's `ip:port`), `/echo?msg=...`, `/healthz` and `/` (`NOW: <time>`); over UDP
//! (`--udp-port`, default 8081) `hostname`, `echo <text>` and `clientip`.

use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, UdpSocket};
use tokio::task::JoinSet;

/// A container's `netexec` settings, read from its command and arguments.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Netexec {
    /// The HTTP (TCP) port.
    pub http_port: u16,
    /// The UDP port (0: none).
    pub udp_port: u16,
    /// How long it keeps serving after it is told to stop (`--delay-shutdown`, seconds).
    pub delay_shutdown: u64,
}

impl Netexec {
    /// The settings of a container running `agnhost netexec`; `None` for anything else.
    pub fn of(image: &str, words: &[String]) -> Option<Self> {
        if !image.contains("agnhost") || !words.iter().any(|w| w == "netexec") {
            return None;
        }
        let mut settings = Netexec {
            http_port: 8080,
            udp_port: 8081,
            delay_shutdown: 0,
        };
        let mut words = words.iter();
        while let Some(word) = words.next() {
            let (flag, inline) = match word.split_once('=') {
                Some((flag, value)) => (flag, Some(value.to_owned())),
                None => (word.as_str(), None),
            };
            let mut value = || inline.clone().or_else(|| words.next().cloned());
            match flag {
                "--http-port" => settings.http_port = value()?.parse().ok()?,
                "--udp-port" => settings.udp_port = value()?.parse().ok()?,
                "--delay-shutdown" => settings.delay_shutdown = value()?.parse().ok()?,
                _ => {}
            }
        }
        Some(settings)
    }

    /// Serves as pod `hostname` on `ip` in tasks of `tasks`.
    pub async fn serve(
        &self,
        ip: IpAddr,
        hostname: &str,
        tasks: &mut JoinSet<()>,
    ) -> std::io::Result<()> {
        let listener = TcpListener::bind((ip, self.http_port)).await?;
        let name = hostname.to_owned();
        tasks.spawn(async move {
            while let Ok((stream, peer)) = listener.accept().await {
                let name = name.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |request| {
                        let answer = answer(&request, &name, peer);
                        async move { Ok::<_, Infallible>(answer) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        if self.udp_port != 0 {
            let socket = UdpSocket::bind((ip, self.udp_port)).await?;
            let name = hostname.to_owned();
            tasks.spawn(async move {
                let mut buffer = vec![0u8; 2048];
                while let Ok((read, peer)) = socket.recv_from(&mut buffer).await {
                    let message = String::from_utf8_lossy(&buffer[..read]).trim().to_owned();
                    let reply = match message.split_once(' ') {
                        Some(("echo", text)) => text.to_owned(),
                        _ if message == "hostname" => name.clone(),
                        _ if message == "clientip" => peer.to_string(),
                        _ => continue,
                    };
                    let _ = socket.send_to(reply.as_bytes(), peer).await;
                }
            });
        }
        Ok(())
    }
}

fn answer(
    request: &Request<hyper::body::Incoming>,
    hostname: &str,
    peer: SocketAddr,
) -> Response<Full<Bytes>> {
    let text = |status: StatusCode, body: String| {
        let mut response = Response::new(Full::new(Bytes::from(body)));
        *response.status_mut() = status;
        response
    };
    match request.uri().path() {
        "/hostname" | "/hostName" => text(StatusCode::OK, hostname.to_owned()),
        "/clientip" => text(StatusCode::OK, peer.to_string()),
        "/healthz" | "/readyz" => text(StatusCode::OK, "ok".to_owned()),
        "/echo" => {
            let message = form_urlencoded::parse(request.uri().query().unwrap_or("").as_bytes())
                .find(|(key, _)| key == "msg")
                .map(|(_, value)| value.into_owned())
                .unwrap_or_default();
            text(StatusCode::OK, message)
        }
        "/" => text(
            StatusCode::OK,
            format!("NOW: {}", genplane_apimachinery::meta::rfc3339(unix_now())),
        ),
        _ => text(StatusCode::NOT_FOUND, "404 page not found\n".to_owned()),
    }
}

/// The time in Unix seconds.
pub(crate) fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(all: &[&str]) -> Vec<String> {
        all.iter().map(|w| (*w).to_owned()).collect()
    }

    #[test]
    fn flags_are_read_as_agnhost_reads_them() {
        assert_eq!(
            Netexec::of(
                "registry.k8s.io/e2e-test-images/agnhost:2.53",
                &words(&[
                    "netexec",
                    "--http-port=80",
                    "--udp-port",
                    "90",
                    "--delay-shutdown=5"
                ])
            ),
            Some(Netexec {
                http_port: 80,
                udp_port: 90,
                delay_shutdown: 5
            })
        );
        assert_eq!(Netexec::of("busybox", &words(&["netexec"])), None);
        assert_eq!(Netexec::of("agnhost", &words(&["pause"])), None);
    }
}
