//! The aggregator's availability metrics, with upstream's names and labels:
//! `aggregator_unavailable_apiservice{name}`, a gauge of 1 for each APIService not available
//! now and 0 for each available one (those deleted are forgotten), and
//! `aggregator_unavailable_apiservice_total{name,reason}`, a counter of the times an available
//! APIService became unavailable, by the reason of its `Available` condition.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use genplane_component_base::metrics::Registry;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
struct UnavailableLabels {
    name: String,
    reason: String,
}

/// Each APIService's availability as last found, by name.
#[derive(Clone, Debug, Default)]
struct Availability(Arc<Mutex<BTreeMap<String, bool>>>);

impl Collector for Availability {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), fmt::Error> {
        let availability = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let mut family = encoder.encode_descriptor(
            "aggregator_unavailable_apiservice",
            "Gauge of APIServices which are marked as unavailable broken down by APIService name",
            None,
            MetricType::Gauge,
        )?;
        for (name, available) in &availability {
            let labels = [("name", name.as_str())];
            ConstGauge::new(i64::from(!available)).encode(family.encode_family(&labels)?)?;
        }
        Ok(())
    }
}

/// The availability metrics of one API server's APIServices. Cheap to clone; clones share
/// the metrics.
#[derive(Clone, Debug, Default)]
pub struct AvailabilityMetrics {
    availability: Availability,
    became_unavailable: Family<UnavailableLabels, Counter>,
}

impl AvailabilityMetrics {
    /// The metrics, registered in `registry`.
    pub fn registered(registry: &Registry) -> Self {
        let metrics = Self::default();
        registry.register_collector(Box::new(metrics.availability.clone()));
        registry.register(
            "aggregator_unavailable_apiservice",
            "Counter of APIServices which are marked as unavailable broken down by APIService \
             name and reason",
            metrics.became_unavailable.clone(),
        );
        metrics
    }

    /// Records that `name` was available (`was`) and is now available or not (`now`, for
    /// `reason`): a change to unavailable is counted.
    pub fn observe(&self, name: &str, was: bool, now: bool, reason: &str) {
        if was && !now {
            self.became_unavailable
                .get_or_create(&UnavailableLabels {
                    name: name.to_owned(),
                    reason: if reason.is_empty() {
                        "UnknownReason".to_owned()
                    } else {
                        reason.to_owned()
                    },
                })
                .inc();
        }
    }

    /// Replaces the availability of every APIService (those not given are forgotten).
    pub fn set_all(&self, availability: BTreeMap<String, bool>) {
        *self
            .availability
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = availability;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gauge_shows_each_apiservice_and_the_counter_each_fall() {
        let registry = Registry::new();
        let metrics = AvailabilityMetrics::registered(&registry);
        metrics.observe("v1.up.example.com", true, true, "Passed");
        metrics.observe("v1.new.example.com", false, false, "ServiceNotFound");
        metrics.observe("v1.down.example.com", true, false, "FailedDiscoveryCheck");
        metrics.set_all(BTreeMap::from([
            ("v1.up.example.com".to_owned(), true),
            ("v1.new.example.com".to_owned(), false),
            ("v1.down.example.com".to_owned(), false),
        ]));
        let text = registry.encode().body;
        for line in [
            "# TYPE aggregator_unavailable_apiservice gauge\n",
            "aggregator_unavailable_apiservice{name=\"v1.up.example.com\"} 0\n",
            "aggregator_unavailable_apiservice{name=\"v1.new.example.com\"} 1\n",
            "aggregator_unavailable_apiservice{name=\"v1.down.example.com\"} 1\n",
            "# TYPE aggregator_unavailable_apiservice_total counter\n",
            "aggregator_unavailable_apiservice_total{name=\"v1.down.example.com\",\
             reason=\"FailedDiscoveryCheck\"} 1\n",
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
        // Only a fall is counted.
        assert_eq!(
            text.matches("aggregator_unavailable_apiservice_total{")
                .count(),
            1
        );
        // A deleted APIService is forgotten.
        metrics.set_all(BTreeMap::from([("v1.up.example.com".to_owned(), true)]));
        assert!(!registry.encode().body.contains("v1.new.example.com\"} 1"));
    }
}
