//! A role's client of the API server: from `--kubeconfig`, or in a pod from its service
//! account, with the CA bundle the configuration trusts (for the root CA publisher).

use std::future::Future;
use std::path::{Path, PathBuf};

use genplane_component_base::process::Process;

use base64::Engine as _;

/// Where a pod's service-account CA bundle is mounted.
pub const IN_CLUSTER_CA: &str = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt";

/// Why no client could be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The kubeconfig could not be read or used.
    #[error("loading {path}: {message}")]
    Kubeconfig {
        /// The kubeconfig.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// The in-cluster configuration could not be loaded.
    #[error("loading the in-cluster configuration: {0}")]
    InCluster(String),
    /// The client could not be built.
    #[error("building the API client: {0}")]
    Build(String),
    /// A command-line tool was given no kubeconfig and found none.
    #[error("no --kubeconfig, KUBECONFIG or HOME")]
    NoKubeconfig,
    /// A one-shot command's runtime could not be started.
    #[error("starting the runtime")]
    Runtime(#[source] std::io::Error),
}

/// The CA bundle (PEM) of the kubeconfig's current cluster, if it names one.
fn kubeconfig_ca(
    path: &Path,
    kubeconfig: &kube::config::Kubeconfig,
) -> Result<Option<String>, String> {
    let Some(current) = kubeconfig.current_context.as_deref() else {
        return Ok(None);
    };
    let Some(cluster_name) = kubeconfig
        .contexts
        .iter()
        .find(|c| c.name == current)
        .and_then(|c| c.context.as_ref())
        .map(|c| c.cluster.clone())
    else {
        return Ok(None);
    };
    let Some(cluster) = kubeconfig
        .clusters
        .iter()
        .find(|c| c.name == cluster_name)
        .and_then(|c| c.cluster.as_ref())
    else {
        return Ok(None);
    };
    if let Some(data) = &cluster.certificate_authority_data {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .map_err(|e| format!("decoding certificate-authority-data: {e}"))?;
        return String::from_utf8(bytes)
            .map(Some)
            .map_err(|_| "certificate-authority-data is not PEM".to_owned());
    }
    if let Some(file) = &cluster.certificate_authority {
        let file = path.parent().unwrap_or(Path::new(".")).join(file);
        return std::fs::read_to_string(&file)
            .map(Some)
            .map_err(|e| format!("reading {}: {e}", file.display()));
    }
    Ok(None)
}

/// Runs a one-shot command-line tool's `work` with a client of the kubeconfig it uses
/// ([`kubeconfig_path`]: `explicit`, else `KUBECONFIG` or `HOME` of `process`), on a runtime
/// of its own (one thread), and returns what `work` returns.
pub fn run_once<T, E, F, Fut>(explicit: Option<&Path>, process: &Process, work: F) -> Result<T, E>
where
    F: FnOnce(kube::Client) -> Fut,
    Fut: Future<Output = Result<T, E>>,
    E: From<Error>,
{
    let kubeconfig = kubeconfig_path(explicit, process.var("KUBECONFIG"), process.var("HOME"))
        .ok_or(Error::NoKubeconfig)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(Error::Runtime)?;
    runtime.block_on(async {
        let (client, _) = connect(Some(&kubeconfig)).await?;
        work(client).await
    })
}

/// The kubeconfig a command-line tool uses, as kubectl picks it: `explicit` (`--kubeconfig`),
/// else the first file of `$KUBECONFIG` (`kubeconfig_env`), else `~/.kube/config` under `home`;
/// `None` when none of them is given.
pub fn kubeconfig_path(
    explicit: Option<&Path>,
    kubeconfig_env: Option<&str>,
    home: Option<&str>,
) -> Option<std::path::PathBuf> {
    if let Some(path) = explicit {
        return Some(path.to_owned());
    }
    if let Some(first) = kubeconfig_env.and_then(|list| list.split(':').find(|p| !p.is_empty())) {
        return Some(first.into());
    }
    home.map(|home| Path::new(home).join(".kube/config"))
}

/// A client of the API server from `kubeconfig`, or the pod's in-cluster configuration when
/// `None`, and the CA bundle (PEM) that configuration trusts.
pub async fn connect(kubeconfig: Option<&Path>) -> Result<(kube::Client, Option<String>), Error> {
    let (client_config, ca) = match kubeconfig {
        Some(path) => {
            let failed = |message: String| Error::Kubeconfig {
                path: path.to_owned(),
                message,
            };
            let kubeconfig =
                kube::config::Kubeconfig::read_from(path).map_err(|e| failed(e.to_string()))?;
            let ca = kubeconfig_ca(path, &kubeconfig).map_err(failed)?;
            let client_config = kube::Config::from_custom_kubeconfig(
                kubeconfig,
                &kube::config::KubeConfigOptions::default(),
            )
            .await
            .map_err(|e| failed(e.to_string()))?;
            (client_config, ca)
        }
        None => (
            kube::Config::incluster().map_err(|e| Error::InCluster(e.to_string()))?,
            std::fs::read_to_string(IN_CLUSTER_CA).ok(),
        ),
    };
    let client = kube::Client::try_from(client_config).map_err(|e| Error::Build(e.to_string()))?;
    Ok((client, ca))
}
