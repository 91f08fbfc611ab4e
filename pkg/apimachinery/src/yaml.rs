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

/// A key a YAML mapping repeats: where it repeats (its 1-based line) and its name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Repeated {
    /// The line of the repeat.
    pub line: u64,
    /// The key.
    pub key: String,
}

impl std::fmt::Display for Repeated {
    /// Upstream's YAML decoder's words: `line 5: key "name" already set in map`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "line {}: key {} already set in map",
            self.line,
            crate::gofmt::Quoted(&self.key)
        )
    }
}

/// Reads one YAML document like [`from_str`], except that a key a mapping repeats is no
/// error: its last value is kept (as upstream's non-strict YAML decoding keeps it), and the
/// repeats are answered in document order (what strict decoding reports).
pub fn from_str_repeating(text: &str) -> Result<(Value, Vec<Repeated>), String> {
    stacker::maybe_grow(PARSER_STACK / 2, PARSER_STACK, || {
        let options = serde_saphyr::options! {
            duplicate_keys: serde_saphyr::options::DuplicateKeyPolicy::PassThrough,
        };
        let mut record = Repeats(Vec::new());
        let value = serde_saphyr::with_deserializer_from_str_with_options(text, options, |d| {
            crate::json::parse_with(d, &mut record)
        })
        .map_err(|e| e.to_string())?;
        Ok((value, record.0))
    })
}

/// Records repeated keys with their lines.
struct Repeats(Vec<Repeated>);

impl crate::json::Record for Repeats {
    type Key = serde_saphyr::Spanned<String>;

    fn name(key: &Self::Key) -> &str {
        &key.value
    }

    fn key(&mut self, _: &crate::json::At<'_>, key: &Self::Key, repeated: bool) {
        if repeated {
            self.0.push(Repeated {
                line: key.referenced.line(),
                key: key.value.clone(),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn repeated_keys_are_found_with_their_lines_and_the_last_value_kept() {
        let text = "a: 1\nmetadata:\n  name: first\n  name: second\nlist:\n- k: 1\n  k: 2\na: 3\n";
        let (value, repeated) = super::from_str_repeating(text).unwrap();
        assert_eq!(
            value,
            serde_json::json!({"a": 3, "metadata": {"name": "second"}, "list": [{"k": 2}]})
        );
        let said: Vec<String> = repeated.iter().map(ToString::to_string).collect();
        assert_eq!(
            said,
            [
                "line 4: key \"name\" already set in map",
                "line 7: key \"k\" already set in map",
                "line 8: key \"a\" already set in map",
            ]
        );
        // Without repeats, the same value as `from_str`.
        let clean = "a: [1, {b: c}]\nd: ~\ne: 'x'\n";
        assert_eq!(
            super::from_str_repeating(clean).unwrap(),
            (super::from_str(clean).unwrap(), Vec::new())
        );
    }

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
