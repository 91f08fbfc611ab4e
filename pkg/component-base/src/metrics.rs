//! The metrics registry of a component, served on `/metrics`.
//!
//! A thin, cloneable wrapper around a [`prometheus_client`] registry. Scrapers that ask for
//! OpenMetrics (`Accept: application/openmetrics-text`) get it; everyone else gets the Prometheus
//! text format 0.0.4, which is what Kubernetes components serve.

use std::sync::{Arc, Mutex, PoisonError};

use prometheus_client::registry::Metric;

/// The content type of the Prometheus text format.
pub const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";
/// The content type of the OpenMetrics text format.
pub const OPENMETRICS_TEXT: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// A component's metrics. Cheap to clone; clones share the registry.
#[derive(Clone, Debug, Default)]
pub struct Registry {
    inner: Arc<Mutex<prometheus_client::registry::Registry>>,
}

/// The encoded metrics and the content type to serve them with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Encoded {
    /// The `Content-Type` header value.
    pub content_type: &'static str,
    /// The body.
    pub body: String,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers a metric under its full name. Counters get `_total` appended to their samples,
    /// as OpenMetrics requires.
    pub fn register(&self, name: &str, help: &str, metric: impl Metric) {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .register(name, help, metric);
    }

    /// Encodes every metric in the format the `Accept` header asks for.
    pub fn encode(&self, accept: Option<&str>) -> Encoded {
        let openmetrics = accept.is_some_and(|a| a.contains("application/openmetrics-text"));
        let mut body = String::new();
        {
            let registry = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
            // Writing into a String cannot fail; an error here would be a bug in a metric's
            // encoder, and then the partial output is still the best answer.
            let _ = prometheus_client::encoding::text::encode(&mut body, &registry);
        }
        if openmetrics {
            Encoded {
                content_type: OPENMETRICS_TEXT,
                body,
            }
        } else {
            // The 0.0.4 format has no end marker.
            if let Some(stripped) = body.strip_suffix("# EOF\n") {
                body.truncate(stripped.len());
            }
            Encoded {
                content_type: PROMETHEUS_TEXT,
                body,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::metrics::counter::Counter;

    #[test]
    fn encodes_both_formats() {
        let registry = Registry::new();
        let counter = Counter::<u64>::default();
        registry.register("genplane_things", "Things seen", counter.clone());
        counter.inc();
        let text = registry.encode(None);
        assert_eq!(text.content_type, PROMETHEUS_TEXT);
        assert!(
            text.body.contains("genplane_things_total 1\n"),
            "{}",
            text.body
        );
        assert!(!text.body.contains("# EOF"));
        let om = registry.encode(Some("application/openmetrics-text;version=1.0.0"));
        assert_eq!(om.content_type, OPENMETRICS_TEXT);
        assert!(om.body.ends_with("# EOF\n"));
    }
}
