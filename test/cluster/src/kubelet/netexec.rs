//! What a pod running agnhost's `netexec` answers, served in-process on the pod's own address:
//! over HTTP (`--http-port`, default 8080) `/hostname` (the pod's name), `/clientip` (the
//! caller's `ip:port`), `/echo?msg=...`, `/healthz`, `/` (`NOW: <time>`) and
//! `/dial?request=...&host=...&port=...&protocol=http|udp&tries=N` (the pod asks another
//! address, from its own, and answers `{"responses": [...]}` with `"errors"` when some
//! tries failed: how upstream's tests send traffic from inside the cluster); over UDP
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
                        async move {
                            let answer = match answer {
                                Answer::Now(response) => response,
                                Answer::Dial(dial) => dial.run(ip).await,
                            };
                            Ok::<_, Infallible>(answer)
                        }
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

/// What a request is answered with: at once, or after dialing out.
enum Answer {
    Now(Response<Full<Bytes>>),
    Dial(Dial),
}

/// A `/dial` request: `tries` times `request` to `host:port` over `protocol`.
#[derive(Debug, PartialEq, Eq)]
struct Dial {
    request: String,
    host: String,
    port: u16,
    udp: bool,
    tries: usize,
}

/// How long one try of a dial may take.
const DIAL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

impl Dial {
    /// The dial a `/dial` query asks for, or why it is bad.
    fn parse(query: &str) -> Result<Self, String> {
        let get = |name: &str| {
            form_urlencoded::parse(query.as_bytes())
                .find(|(key, _)| key == name)
                .map(|(_, value)| value.into_owned())
        };
        let port = get("port").unwrap_or_default();
        let tries = get("tries").map_or(Ok(1), |t| t.parse::<usize>());
        Ok(Dial {
            request: get("request").unwrap_or_default(),
            host: get("host").ok_or("host is required")?,
            port: port.parse().map_err(|_| format!("bad port {port:?}"))?,
            udp: match get("protocol").as_deref() {
                None | Some("http") => false,
                Some("udp") => true,
                Some(other) => return Err(format!("unsupported protocol {other:?}")),
            },
            tries: tries.map_err(|e| e.to_string())?.clamp(1, 100),
        })
    }

    /// Dials from `source` and answers the JSON of what came back.
    async fn run(self, source: IpAddr) -> Response<Full<Bytes>> {
        let mut responses = Vec::new();
        let mut errors = Vec::new();
        for _ in 0..self.tries {
            let answer = if self.udp {
                self.udp_once(source).await
            } else {
                self.http_once(source).await
            };
            match answer {
                Ok(body) => responses.push(body),
                Err(error) => errors.push(error),
            }
        }
        let mut body = serde_json::json!({"responses": responses});
        if !errors.is_empty() {
            body["errors"] = serde_json::json!(errors);
        }
        let mut response = Response::new(Full::new(Bytes::from(body.to_string())));
        response.headers_mut().insert(
            hyper::header::CONTENT_TYPE,
            hyper::header::HeaderValue::from_static("application/json"),
        );
        response
    }

    async fn http_once(&self, source: IpAddr) -> Result<String, String> {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let target: IpAddr = self
            .host
            .parse()
            .map_err(|_| format!("bad host {:?}", self.host))?;
        let exchange = async {
            let socket = tokio::net::TcpSocket::new_v4()?;
            socket.bind(SocketAddr::new(source, 0))?;
            let mut stream = socket.connect(SocketAddr::new(target, self.port)).await?;
            let path = self.request.trim_start_matches('/');
            let head = format!(
                "GET /{path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
                self.host
            );
            stream.write_all(head.as_bytes()).await?;
            let mut answer = Vec::new();
            stream.read_to_end(&mut answer).await?;
            std::io::Result::Ok(String::from_utf8_lossy(&answer).into_owned())
        };
        let answer = tokio::time::timeout(DIAL_TIMEOUT, exchange)
            .await
            .map_err(|_| "timed out".to_owned())?
            .map_err(|e| e.to_string())?;
        match answer.split_once("\r\n\r\n") {
            Some((head, body)) if head.starts_with("HTTP/1.1 200") => Ok(body.to_owned()),
            Some((head, _)) => Err(head.lines().next().unwrap_or("").to_owned()),
            None => Err("no answer".to_owned()),
        }
    }

    async fn udp_once(&self, source: IpAddr) -> Result<String, String> {
        let target: IpAddr = self
            .host
            .parse()
            .map_err(|_| format!("bad host {:?}", self.host))?;
        let exchange = async {
            let socket = UdpSocket::bind(SocketAddr::new(source, 0)).await?;
            socket.connect(SocketAddr::new(target, self.port)).await?;
            socket.send(self.request.as_bytes()).await?;
            let mut buffer = vec![0u8; 2048];
            let read = socket.recv(&mut buffer).await?;
            std::io::Result::Ok(String::from_utf8_lossy(&buffer[..read]).into_owned())
        };
        tokio::time::timeout(DIAL_TIMEOUT, exchange)
            .await
            .map_err(|_| "timed out".to_owned())?
            .map_err(|e| e.to_string())
    }
}

fn answer(request: &Request<hyper::body::Incoming>, hostname: &str, peer: SocketAddr) -> Answer {
    let text = |status: StatusCode, body: String| {
        let mut response = Response::new(Full::new(Bytes::from(body)));
        *response.status_mut() = status;
        Answer::Now(response)
    };
    match request.uri().path() {
        "/dial" => match Dial::parse(request.uri().query().unwrap_or("")) {
            Ok(dial) => Answer::Dial(dial),
            Err(error) => text(StatusCode::BAD_REQUEST, format!("{error}\n")),
        },
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
    #![allow(clippy::unwrap_used)]

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

    #[test]
    fn dial_requests_are_read_as_agnhost_reads_them() {
        assert_eq!(
            Dial::parse("request=hostname&host=127.96.0.3&port=80&protocol=udp&tries=3"),
            Ok(Dial {
                request: "hostname".into(),
                host: "127.96.0.3".into(),
                port: 80,
                udp: true,
                tries: 3
            })
        );
        assert_eq!(
            Dial::parse("request=echo%3Fmsg%3Dhi&host=h&port=8080")
                .map(|d| (d.request, d.udp, d.tries)),
            Ok(("echo?msg=hi".into(), false, 1))
        );
        assert!(Dial::parse("host=h&port=x").is_err());
        assert!(Dial::parse("port=80").is_err());
        assert!(Dial::parse("host=h&port=80&protocol=sctp").is_err());
    }

    #[tokio::test]
    async fn a_dial_goes_out_from_the_pods_address() {
        let mut tasks = JoinSet::new();
        let server: IpAddr = "127.0.0.1".parse().unwrap();
        let netexec = Netexec {
            http_port: 0,
            udp_port: 0,
            delay_shutdown: 0,
        };
        let listener = std::net::TcpListener::bind((server, 0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        let netexec = Netexec {
            http_port: port,
            ..netexec
        };
        netexec.serve(server, "target", &mut tasks).await.unwrap();
        let source: IpAddr = "127.0.0.2".parse().unwrap();
        let dial = Dial::parse(&format!(
            "request=clientip&host=127.0.0.1&port={port}&tries=2"
        ))
        .unwrap();
        let response = dial.run(source).await;
        let body = http_body_util::BodyExt::collect(response.into_body())
            .await
            .unwrap()
            .to_bytes();
        let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
        let responses = body["responses"].as_array().unwrap();
        assert_eq!(responses.len(), 2, "{body}");
        assert!(
            responses[0].as_str().unwrap().starts_with("127.0.0.2:"),
            "{body}"
        );
        let refused = Dial::parse("request=hostname&host=127.0.0.1&port=1")
            .unwrap()
            .run(source)
            .await;
        let body = http_body_util::BodyExt::collect(refused.into_body())
            .await
            .unwrap()
            .to_bytes();
        let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(body["responses"], serde_json::json!([]));
        assert_eq!(body["errors"].as_array().unwrap().len(), 1, "{body}");
    }
}
