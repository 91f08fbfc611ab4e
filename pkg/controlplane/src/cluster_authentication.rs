//! The `kube-system/extension-apiserver-authentication` ConfigMap, as upstream's cluster
//! authentication trust controller publishes it: what an extension API server needs to
//! authenticate the requests this server proxies to it and its own clients — the client CA
//! (`client-ca-file`) and the front-proxy CA with its names and headers
//! (`requestheader-client-ca-file`, `requestheader-allowed-names`,
//! `requestheader-username-headers`, `requestheader-group-headers`,
//! `requestheader-extra-headers-prefix`, the lists as JSON arrays). Readable by the
//! `extension-apiserver-authentication-reader` Role of the bootstrap policy.
//!
//! [`publish`] writes it when it differs, and again every [`REPUBLISH`] (a user's edit is put
//! back). Servers of one cluster share their CAs, so they publish the same content.

use std::time::Duration;

use genplane_apimachinery::errors::ApiError;
use genplane_apiserver::Resource;
use genplane_registry::{Store, WriteOptions};
use genplane_storage::Storage;
use serde_json::{Value, json};

/// The ConfigMap's namespace.
pub const NAMESPACE: &str = "kube-system";
/// The ConfigMap's name.
pub const NAME: &str = "extension-apiserver-authentication";
/// How often it is written again when changed by someone else.
pub const REPUBLISH: Duration = Duration::from_secs(60);

/// What the ConfigMap says.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Published {
    /// The client CA (PEM).
    pub client_ca: String,
    /// The front-proxy CA (PEM).
    pub requestheader_client_ca: String,
    /// The names a front proxy's certificate may have.
    pub allowed_names: Vec<String>,
    /// The username headers.
    pub username_headers: Vec<String>,
    /// The group headers.
    pub group_headers: Vec<String>,
    /// The extra headers' prefixes.
    pub extra_headers_prefix: Vec<String>,
}

impl Published {
    /// The ConfigMap's `data`.
    pub fn data(&self) -> Value {
        let list = |items: &[String]| Value::from(json!(items).to_string());
        json!({
            "client-ca-file": self.client_ca,
            "requestheader-client-ca-file": self.requestheader_client_ca,
            "requestheader-allowed-names": list(&self.allowed_names),
            "requestheader-username-headers": list(&self.username_headers),
            "requestheader-group-headers": list(&self.group_headers),
            "requestheader-extra-headers-prefix": list(&self.extra_headers_prefix),
        })
    }
}

/// The ConfigMaps' store among `resources`, when ConfigMaps are served.
fn config_maps<S: Storage>(resources: &[std::sync::Arc<Resource<S>>]) -> Option<Store<S>> {
    resources
        .iter()
        .find(|r| r.info.group.is_empty() && r.info.resource == "configmaps")
        .and_then(|r| r.store().cloned())
}

/// Writes the ConfigMap when it is missing or says something else.
pub async fn write<S: Storage>(store: &Store<S>, published: &Published) -> Result<(), ApiError> {
    let data = published.data();
    match store.get(NAMESPACE, NAME, None).await {
        Ok(mut current) => {
            if current.get("data") == Some(&data) {
                return Ok(());
            }
            current["data"] = data;
            store
                .update(NAMESPACE, NAME, current, &WriteOptions::default())
                .await
                .map(|_| ())
        }
        Err(error) if error.code == 404 => {
            let object = json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": NAME, "namespace": NAMESPACE}, "data": data});
            match store
                .create(NAMESPACE, object, &WriteOptions::default())
                .await
            {
                Ok(_) => Ok(()),
                // Another server made it: the next round compares.
                Err(error) if error.code == 409 => Ok(()),
                Err(error) => Err(error),
            }
        }
        Err(error) => Err(error),
    }
}

/// Publishes `published` now, then every [`REPUBLISH`] until `stop` completes; nothing when
/// ConfigMaps are not served. A write that fails (the stored ConfigMap cannot be read, say,
/// encrypted with a key the server no longer has) is logged and tried again later: the
/// server serves without it, as upstream's.
pub async fn publish<S: Storage>(
    resources: &[std::sync::Arc<Resource<S>>],
    published: Published,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) {
    let Some(store) = config_maps(resources) else {
        return;
    };
    if let Err(error) = write(&store, &published).await {
        tracing::warn!(%error, "publishing {NAMESPACE}/{NAME}");
    }
    tokio::spawn(async move {
        tokio::pin!(stop);
        loop {
            tokio::select! {
                () = &mut stop => return,
                () = tokio::time::sleep(REPUBLISH) => {}
            }
            if let Err(error) = write(&store, &published).await {
                tracing::warn!(%error, "publishing {NAMESPACE}/{NAME}");
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_are_json_arrays_as_upstream_writes_them() {
        let published = Published {
            client_ca: "CA".into(),
            requestheader_client_ca: "PROXY".into(),
            allowed_names: vec!["front-proxy-client".into()],
            username_headers: vec!["X-Remote-User".into()],
            group_headers: vec!["X-Remote-Group".into()],
            extra_headers_prefix: vec!["X-Remote-Extra-".into()],
        };
        assert_eq!(
            published.data(),
            json!({
                "client-ca-file": "CA",
                "requestheader-client-ca-file": "PROXY",
                "requestheader-allowed-names": "[\"front-proxy-client\"]",
                "requestheader-username-headers": "[\"X-Remote-User\"]",
                "requestheader-group-headers": "[\"X-Remote-Group\"]",
                "requestheader-extra-headers-prefix": "[\"X-Remote-Extra-\"]",
            })
        );
    }
}
