//! The metrics registry of a component, served on `/metrics`.
//!
//! A thin, cloneable wrapper around a [`prometheus_client`] registry, encoded in the
//! Prometheus text format 0.0.4 whatever the scraper asks for, as Kubernetes components serve
//! their metrics. OpenMetrics is not offered: it names a counter's family without its
//! `_total`, so Kubernetes' metric names, which set a gauge `x` beside a counter `x_total`
//! (`aggregator_unavailable_apiservice`), cannot all be valid OpenMetrics families.

use std::sync::{Arc, Mutex, PoisonError};

use prometheus_client::registry::Metric;

/// The content type of the Prometheus text format.
pub const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

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

    /// Registers a metric under its full name. A counter's samples, and its family, are
    /// named with `_total` appended.
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

    /// Encodes every metric in the Prometheus text format.
    pub fn encode(&self) -> Encoded {
        let mut body = String::new();
        {
            let registry = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
            // Writing into a String cannot fail; an error here would be a bug in a metric's
            // encoder, and then the partial output is still the best answer.
            let _ = prometheus_client::encoding::text::encode(&mut body, &registry);
        }
        Encoded {
            content_type: PROMETHEUS_TEXT,
            body: to_prometheus_text(&body),
        }
    }
}

/// Rewrites OpenMetrics text (what the encoder writes) as the Prometheus text format 0.0.4: no
/// end marker, no `# UNIT` lines, and each counter family named after its samples (`x_total`)
/// in its `# HELP` and `# TYPE` lines, as Kubernetes components write them. Only the lines of
/// the counter's own family are renamed: a gauge `x` may stand beside a counter `x_total`.
fn to_prometheus_text(openmetrics: &str) -> String {
    let mut out = String::with_capacity(openmetrics.len());
    let mut lines = openmetrics.lines().peekable();
    while let Some(line) = lines.next() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let family = line
            .strip_prefix("# HELP ")
            .map(|rest| ("# HELP ", rest))
            .or_else(|| line.strip_prefix("# TYPE ").map(|rest| ("# TYPE ", rest)));
        if let Some((prefix, rest)) = family {
            let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
            // A family's HELP comes right before its TYPE.
            let counter = if prefix == "# HELP " {
                lines.peek().is_some_and(|next| {
                    next.strip_prefix("# TYPE ")
                        .and_then(|t| t.strip_prefix(name))
                        == Some(" counter")
                })
            } else {
                tail == "counter"
            };
            if counter && !name.ends_with("_total") {
                out.push_str(&format!("{prefix}{name}_total {tail}"));
                out.push('\n');
                continue;
            }
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::metrics::counter::Counter;

    #[test]
    fn counters_are_named_after_their_samples() {
        let registry = Registry::new();
        let counter = Counter::<u64>::default();
        registry.register("genplane_things", "Things seen", counter.clone());
        counter.inc();
        let text = registry.encode();
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
    }

    #[test]
    fn a_gauge_beside_a_counter_of_its_name_and_total_keeps_its_own_name() {
        let registry = Registry::new();
        let gauge = prometheus_client::metrics::gauge::Gauge::<i64>::default();
        let counter = Counter::<u64>::default();
        registry.register("genplane_down", "Down now", gauge.clone());
        registry.register("genplane_down", "Times gone down", counter.clone());
        gauge.set(1);
        counter.inc();
        let text = registry.encode().body;
        for line in [
            "# HELP genplane_down Down now.\n# TYPE genplane_down gauge\ngenplane_down 1\n",
            "# HELP genplane_down_total Times gone down.\n# TYPE genplane_down_total counter\n\
             genplane_down_total 1\n",
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
    }
}
