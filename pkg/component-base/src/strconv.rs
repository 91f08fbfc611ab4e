//! Values read as Go's `strconv` package reads them, since Kubernetes components (and the
//! clients that write their flags, labels and query parameters) use Go's rules.

/// A boolean as Go's `strconv.ParseBool` reads it (`1 t T TRUE true True`, `0 f F FALSE false
/// False`); anything else is no boolean. Kubernetes reads flags, feature gates, runtime-config
/// values, query parameters and labels such as
/// `node.kubernetes.io/exclude-from-external-load-balancers` this way.
pub fn parse_bool(value: &str) -> Option<bool> {
    match value {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn booleans_are_read_as_go_reads_them() {
        for yes in ["1", "t", "T", "TRUE", "true", "True"] {
            assert_eq!(parse_bool(yes), Some(true), "{yes}");
        }
        for no in ["0", "f", "F", "FALSE", "false", "False"] {
            assert_eq!(parse_bool(no), Some(false), "{no}");
        }
        for neither in ["", "yes", "tRUE", " true", "2", "on"] {
            assert_eq!(parse_bool(neither), None, "{neither:?}");
        }
    }
}
