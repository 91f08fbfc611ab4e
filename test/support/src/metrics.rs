//! Reading a scrape of `/metrics` (Prometheus' text format), as the tests that count what a
//! server did read it.

/// The value of `series` (a metric's name, with its labels if it has any, as a sample line
/// starts: `apiserver_registered_watchers{group="",kind="ConfigMap",version="v1"}`) in the
/// scrape `text`, if the scrape has it. A series is matched whole: `foo_total` is not read
/// from `foo_total_bytes 3`.
pub fn sample<T: std::str::FromStr>(text: &str, series: &str) -> Option<T> {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|value| value.trim().parse().ok())
}

/// Whether the scrape `text` has every line of `wanted` (whole sample lines, value included).
pub fn has_all(text: &str, wanted: &[&str]) -> bool {
    wanted
        .iter()
        .all(|line| text.lines().any(|have| have == *line))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCRAPE: &str =
        "# TYPE foo_total counter\nfoo_total 3\nfoo_total_bytes 7\nbar{a=\"b\"} 1.5\n";

    #[test]
    fn samples_are_read_by_their_whole_series() {
        assert_eq!(sample::<u64>(SCRAPE, "foo_total"), Some(3));
        assert_eq!(sample::<u64>(SCRAPE, "foo_total_bytes"), Some(7));
        assert_eq!(sample::<f64>(SCRAPE, "bar{a=\"b\"}"), Some(1.5));
        assert_eq!(sample::<f64>(SCRAPE, "bar"), None);
        assert!(has_all(SCRAPE, &["foo_total 3", "bar{a=\"b\"} 1.5"]));
        assert!(!has_all(SCRAPE, &["foo_total 4"]));
    }
}
