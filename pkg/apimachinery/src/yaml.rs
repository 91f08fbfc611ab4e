//! YAML from clients, read into JSON values safely: the parser recurses once per level of
//! nesting before any depth limit applies, so it runs on a stack segment of its own when the
//! caller's is short (a tokio worker has 2 MiB, and a debug build's frames are large), and no
//! document, however deep, can exhaust a thread's stack.

use serde_json::Value;

/// The stack the parser may need: enough for the deepest document it accepts, in a debug build.
const PARSER_STACK: usize = 16 * 1024 * 1024;

/// Reads one YAML document into a JSON value; the error is the parser's, in words.
pub fn from_str(text: &str) -> Result<Value, String> {
    stacker::maybe_grow(PARSER_STACK / 2, PARSER_STACK, || {
        serde_saphyr::from_str::<Value>(text).map_err(|e| e.to_string())
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn any_depth_is_an_error_or_a_value_on_a_small_stack() {
        for depth in [10usize, 1_000, 100_000] {
            let flow = format!("a: {}1{}\n", "[".repeat(depth), "]".repeat(depth));
            let block: String = (0..depth.min(2_000))
                .map(|i| format!("{}k:\n", " ".repeat(i)))
                .collect();
            let outcome = std::thread::Builder::new()
                .stack_size(256 * 1024)
                .spawn(move || {
                    (
                        super::from_str(&flow).is_ok(),
                        super::from_str(&block).is_ok(),
                    )
                })
                .unwrap()
                .join();
            let (flow_ok, _) = outcome.expect("the parser overflowed its stack");
            assert_eq!(flow_ok, depth <= 10, "{depth}");
        }
    }
}
