//! Where a Service reference is reached: the one resolver of admission webhooks', conversion
//! webhooks' and (later) aggregated APIServices' `service` references.
//!
//! A generic control plane serves no Services or Endpoints, so a reference resolves as
//! upstream's default resolver does, through DNS: `<name>.<namespace>.svc` at the reference's
//! port (443 when none), the name the server's certificate must carry. On a single host, where
//! no DNS knows such names, `--service-address-override` maps a reference to an address
//! (`<namespace>/<name>:<port>=<ip>:<port>`): the connection goes there, and the certificate is
//! still checked against `<name>.<namespace>.svc`.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

use serde::Deserialize;

/// A `service` reference of a webhook's `clientConfig` (or an APIService's `spec.service`).
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", default)]
pub struct ServiceReference {
    /// The Service's namespace.
    pub namespace: String,
    /// The Service's name.
    pub name: String,
    /// The URL path sent to it (webhooks only).
    pub path: Option<String>,
    /// The port; 443 when none.
    pub port: Option<i32>,
}

impl ServiceReference {
    /// The port, 443 by default.
    pub fn port(&self) -> i32 {
        self.port.unwrap_or(443)
    }

    /// The DNS name of the Service, which its serving certificate must carry:
    /// `<name>.<namespace>.svc`.
    pub fn server_name(&self) -> String {
        format!("{}.{}.svc", self.name, self.namespace)
    }
}

/// Where a reference is reached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// `https://<name>.<namespace>.svc:<port><path>` (the port of the address when
    /// overridden).
    pub url: String,
    /// The name the server's certificate is checked against (`<name>.<namespace>.svc`).
    pub server_name: String,
    /// The address to connect to, when overridden; DNS resolves `server_name` otherwise.
    pub address: Option<SocketAddr>,
}

/// Why an override or a reference is refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// An override is not `<namespace>/<name>:<port>=<ip>:<port>`.
    #[error(
        "service address override {0:?} is not <namespace>/<name>:<port>=<ip>:<port> (e.g. kube-system/metrics:443=127.0.0.1:8443)"
    )]
    Override(String),
    /// A reference lacks its namespace or name.
    #[error("service reference needs a namespace and a name")]
    Incomplete,
    /// A reference's port is not 1..=65535.
    #[error("service reference port {0} is not in 1..65535")]
    Port(i32),
}

/// The resolver of Service references: DNS, with per-reference overrides.
#[derive(Clone, Debug, Default)]
pub struct ServiceResolver {
    overrides: Arc<BTreeMap<(String, String, i32), SocketAddr>>,
}

impl ServiceResolver {
    /// A resolver through DNS with `overrides`, each `<namespace>/<name>:<port>=<ip>:<port>`.
    pub fn with_overrides<I, T>(overrides: I) -> Result<Self, Error>
    where
        I: IntoIterator<Item = T>,
        T: AsRef<str>,
    {
        let mut map = BTreeMap::new();
        for entry in overrides {
            let entry = entry.as_ref();
            let bad = || Error::Override(entry.to_owned());
            let (service, address) = entry.split_once('=').ok_or_else(bad)?;
            let (reference, port) = service.rsplit_once(':').ok_or_else(bad)?;
            let (namespace, name) = reference.split_once('/').ok_or_else(bad)?;
            let port: i32 = port.parse().map_err(|_| bad())?;
            if namespace.is_empty() || name.is_empty() || !(1..=65535).contains(&port) {
                return Err(bad());
            }
            let address: SocketAddr = address.trim().parse().map_err(|_| bad())?;
            map.insert((namespace.to_owned(), name.to_owned(), port), address);
        }
        Ok(Self {
            overrides: Arc::new(map),
        })
    }

    /// Where `reference` is reached.
    pub fn resolve(&self, reference: &ServiceReference) -> Result<Endpoint, Error> {
        if reference.namespace.is_empty() || reference.name.is_empty() {
            return Err(Error::Incomplete);
        }
        let port = reference.port();
        if !(1..=65535).contains(&port) {
            return Err(Error::Port(port));
        }
        let server_name = reference.server_name();
        let path = reference.path.as_deref().unwrap_or("");
        let address = self
            .overrides
            .get(&(reference.namespace.clone(), reference.name.clone(), port))
            .copied();
        // An overridden reference is called at the address's port (the client connects to
        // the URL's port, whatever the name resolves to).
        let port = address.map_or(port, |a| i32::from(a.port()));
        Ok(Endpoint {
            url: format!("https://{server_name}:{port}{path}"),
            server_name,
            address,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(port: Option<i32>, path: Option<&str>) -> ServiceReference {
        ServiceReference {
            namespace: "webhooks".into(),
            name: "policy".into(),
            path: path.map(str::to_owned),
            port,
        }
    }

    #[test]
    fn dns_names_and_overrides() {
        let dns = ServiceResolver::default();
        assert_eq!(
            dns.resolve(&reference(None, Some("/validate"))).unwrap(),
            Endpoint {
                url: "https://policy.webhooks.svc:443/validate".into(),
                server_name: "policy.webhooks.svc".into(),
                address: None,
            }
        );
        let overridden =
            ServiceResolver::with_overrides(["webhooks/policy:8443=127.0.0.1:9443"]).unwrap();
        let endpoint = overridden.resolve(&reference(Some(8443), None)).unwrap();
        assert_eq!(endpoint.url, "https://policy.webhooks.svc:9443");
        assert_eq!(endpoint.address, Some("127.0.0.1:9443".parse().unwrap()));
        // Another port of the same Service is not overridden.
        assert_eq!(
            overridden.resolve(&reference(None, None)).unwrap().address,
            None
        );
        assert_eq!(dns.resolve(&reference(Some(0), None)), Err(Error::Port(0)));
        assert_eq!(
            dns.resolve(&ServiceReference::default()),
            Err(Error::Incomplete)
        );
    }

    #[test]
    fn bad_overrides_are_named() {
        for bad in [
            "webhooks/policy=127.0.0.1:9443",
            "policy:443=127.0.0.1:9443",
            "webhooks/policy:443=localhost:9443",
            "webhooks/policy:70000=127.0.0.1:9443",
            "/policy:443=127.0.0.1:9443",
        ] {
            assert_eq!(
                ServiceResolver::with_overrides([bad]).unwrap_err(),
                Error::Override(bad.to_owned()),
                "{bad}"
            );
        }
    }
}
