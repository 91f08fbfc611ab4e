//! The fake cloud over HTTP, for processes outside the cluster's (an exec provider of
//! `genplane ccm-e2e`, a shell with curl): JSON in upstream-neutral words.
//!
//! | request | answer |
//! |---|---|
//! | `GET /instances` | every [`Instance`](super::Instance) |
//! | `GET /instances/<name>` | one, or 404 |
//! | `POST /instances/<name>/stop`, `/start`, `/reboot` | 204, or 404 |
//! | `DELETE /instances/<name>` | 204, or 404 |
//! | `POST /upgrades/controlplane/<version>` | 204 once the control plane serves again at `version` ([`Cloud::upgrade_control_plane`](super::Cloud::upgrade_control_plane)), or 400 |
//! | `POST /upgrades/nodes/<version>` | 204 once every instance was re-imaged with `version` ([`Cloud::upgrade_nodes`](super::Cloud::upgrade_nodes)), or 400 |
//! | `GET /loadbalancers` | every [`LoadBalancer`](super::LoadBalancer) |
//! | `GET /loadbalancers/<name>` | one, or 404 |
//!
//! Errors are `{"error": "..."}`.

use std::convert::Infallible;
use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde::Serialize;
use tokio::net::TcpListener;

use super::{Cloud, Error};

fn json(status: StatusCode, body: &impl Serialize) -> Response<Full<Bytes>> {
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    let mut response = Response::new(Full::new(Bytes::from(bytes)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    response
}

fn error(status: StatusCode, message: &str) -> Response<Full<Bytes>> {
    json(status, &serde_json::json!({"error": message}))
}

fn done(result: Result<(), Error>) -> Response<Full<Bytes>> {
    match result {
        Ok(()) => json(StatusCode::NO_CONTENT, &()),
        Err(e) => error(StatusCode::NOT_FOUND, &e.to_string()),
    }
}

/// The answer to one request.
pub async fn answer(cloud: &Cloud, method: &Method, path: &str) -> Response<Full<Bytes>> {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    match (method, parts.as_slice()) {
        (&Method::GET, ["instances"]) => json(StatusCode::OK, &cloud.instances()),
        (&Method::GET, ["instances", name]) => match cloud.instance(name) {
            Ok(instance) => json(StatusCode::OK, &instance),
            Err(e) => error(StatusCode::NOT_FOUND, &e.to_string()),
        },
        (&Method::POST, ["instances", name, "stop"]) => done(cloud.stop_instance(name)),
        (&Method::POST, ["instances", name, "start"]) => done(cloud.start_instance(name)),
        (&Method::POST, ["instances", name, "reboot"]) => done(cloud.reboot_instance(name)),
        (&Method::DELETE, ["instances", name]) => done(cloud.delete_instance(name)),
        (&Method::POST, ["upgrades", "controlplane", version]) => {
            match cloud.upgrade_control_plane(version).await {
                Ok(()) => json(StatusCode::NO_CONTENT, &()),
                Err(e) => error(StatusCode::BAD_REQUEST, &e.to_string()),
            }
        }
        (&Method::POST, ["upgrades", "nodes", version]) => match cloud.upgrade_nodes(version).await
        {
            Ok(()) => json(StatusCode::NO_CONTENT, &()),
            Err(e) => error(StatusCode::BAD_REQUEST, &e.to_string()),
        },
        (&Method::GET, ["loadbalancers"]) => json(StatusCode::OK, &cloud.load_balancers()),
        (&Method::GET, ["loadbalancers", name]) => match cloud.load_balancer(name) {
            Ok(balancer) => json(StatusCode::OK, &balancer),
            Err(e) => error(StatusCode::NOT_FOUND, &e.to_string()),
        },
        _ => error(
            StatusCode::NOT_FOUND,
            &format!("no such request: {method} {path}"),
        ),
    }
}

/// Serves `cloud` on `listener` until the task is dropped.
pub async fn serve(cloud: Cloud, listener: TcpListener) {
    while let Ok((stream, _)) = listener.accept().await {
        let cloud = cloud.clone();
        tokio::spawn(async move {
            let service =
                hyper::service::service_fn(move |request: Request<hyper::body::Incoming>| {
                    let cloud = cloud.clone();
                    async move {
                        let response = answer(&cloud, request.method(), request.uri().path()).await;
                        Ok::<_, Infallible>(response)
                    }
                });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// Listens on `address` (port 0: any free one); returns the listener and its address.
pub async fn listen(address: SocketAddr) -> std::io::Result<(TcpListener, SocketAddr)> {
    let listener = TcpListener::bind(address).await?;
    let bound = listener.local_addr()?;
    Ok((listener, bound))
}
