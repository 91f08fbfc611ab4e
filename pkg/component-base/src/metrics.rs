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

    /// Registers a collector, asked for its samples on every scrape (for values computed
    /// when read, such as object counts).
    pub fn register_collector(&self, collector: Box<dyn prometheus_client::collector::Collector>) {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .register_collector(collector);
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
            Encoded {
                content_type: PROMETHEUS_TEXT,
                body: to_prometheus_text(&body),
            }
        }
    }
}

/// Rewrites OpenMetrics text as the Prometheus text format 0.0.4: no end marker, no `# UNIT`
/// lines, and counter families named after their samples (`x_total`), as Kubernetes
/// components write them.
fn to_prometheus_text(openmetrics: &str) -> String {
    let counters: Vec<&str> = openmetrics
        .lines()
        .filter_map(|line| line.strip_prefix("# TYPE ")?.strip_suffix(" counter"))
        .filter(|name| !name.ends_with("_total"))
        .collect();
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let renamed = ["# HELP ", "# TYPE "].iter().find_map(|prefix| {
            let rest = line.strip_prefix(prefix)?;
            let (name, tail) = rest.split_once(' ')?;
            counters
                .contains(&name)
                .then(|| format!("{prefix}{name}_total {tail}"))
        });
        match renamed {
            Some(line) => out.push_str(&line),
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
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
        assert!(
            text.body.contains(
                "# HELP genplane_things_total Things seen.\n# TYPE genplane_things_total counter\n"
            ),
            "{}",
            text.body
        );
        let om = registry.encode(Some("application/openmetrics-text;version=1.0.0"));
        assert_eq!(om.content_type, OPENMETRICS_TEXT);
        assert!(om.body.ends_with("# EOF\n"));
    }
}
