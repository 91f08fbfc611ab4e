//! genplane's controller roles assembled, as the `genplane` binary runs them and all-in-one runs
//! them beside its API server: each an options struct (flags, config file keys, `GENPLANE_*`
//! variables), its validated config, and a `serve` that runs until shutdown. They install no
//! signal handler or log subscriber, so several can share a process.
//!
//! - [`controller_manager`]: the generic controllers, with leader election.
//! - [`feature_controller`]: KEP-3920's server flow (announcing features and turning them on
//!   and off).

pub mod controller_manager;
pub mod feature_controller;

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::time::Duration;

use genplane_component_base::config::Invalid;
use genplane_component_base::http::{self, OpsHandler};
use genplane_component_base::shutdown::Shutdown;

/// How long open requests to a role's ops endpoints may finish after shutdown began.
const OPS_DRAIN: Duration = Duration::from_secs(5);

/// Records in `invalid` that `--kubeconfig` is missing, unless the role runs in a pod.
fn check_kubeconfig(kubeconfig: Option<&Path>, in_cluster: bool, invalid: &mut Invalid) {
    if kubeconfig.is_none() && !in_cluster {
        invalid.push(
            "kubeconfig",
            "required unless running in a pod (KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT set)",
        );
    }
}

/// `--bind-address`: an IP address.
fn bind_address(text: &str) -> Result<IpAddr, String> {
    text.parse::<IpAddr>()
        .map_err(|e| format!("{text:?} is not an IP address: {e}"))
}

/// A role's ops endpoints served over HTTPS with a self-signed certificate until shutdown;
/// [`Ops::finish`] waits for them to close.
struct Ops(Option<tokio::task::JoinHandle<Result<(), http::Error>>>);

impl Ops {
    /// Serves `handler` on `address`:`port`; port 0 serves nothing.
    async fn start(
        address: IpAddr,
        port: u16,
        handler: OpsHandler,
        shutdown: &Shutdown,
    ) -> Result<Self, http::Error> {
        if port == 0 {
            return Ok(Self(None));
        }
        let tls = http::self_signed_tls()?;
        let listener = http::bind(SocketAddr::new(address, port)).await?;
        if let Ok(address) = listener.local_addr() {
            tracing::info!(%address, "serving the ops endpoints over HTTPS");
        }
        Ok(Self(Some(tokio::spawn(http::serve_ops_tls(
            listener,
            tls,
            handler,
            shutdown.clone(),
            OPS_DRAIN,
        )))))
    }

    /// Waits until the endpoints closed (shutdown must have been triggered), logging a failure.
    async fn finish(self) {
        let Some(ops) = self.0 else { return };
        match ops.await {
            Ok(Err(error)) => tracing::warn!(%error, "closing the ops endpoints"),
            Err(error) => tracing::warn!(%error, "the ops server task failed"),
            Ok(Ok(())) => {}
        }
    }
}
