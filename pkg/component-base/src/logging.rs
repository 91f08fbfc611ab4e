//! Logging: `--log-format=text|json`, `-v N`, and `RUST_LOG`-style filter directives.
//!
//! [`LoggingConfig::subscriber`] builds a tracing subscriber that writes to standard error; the
//! binary installs it as the global default (libraries never do).

use std::str::FromStr;

use tracing::Subscriber;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;

/// Errors of the logging options.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A log format other than `text` or `json`.
    #[error("unsupported log format {0:?}: must be \"text\" or \"json\"")]
    Format(String),
    /// Filter directives that do not parse.
    #[error("invalid log filter {directives:?}: {source}")]
    Filter {
        /// The directives as given.
        directives: String,
        /// Why they do not parse.
        #[source]
        source: tracing_subscriber::filter::ParseError,
    },
}

/// How log lines are written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Format {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line, for log collectors.
    Json,
}

impl FromStr for Format {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "text" => Ok(Format::Text),
            "json" => Ok(Format::Json),
            other => Err(Error::Format(other.to_owned())),
        }
    }
}

/// Validated logging options.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoggingConfig {
    /// The line format.
    pub format: Format,
    /// The filter directives in force (from `--log-filter`, `RUST_LOG` or `-v`).
    pub directives: String,
}

/// The filter directives that `-v N` stands for.
pub fn verbosity_directives(v: u8) -> &'static str {
    match v {
        0 => "info",
        1..=4 => "debug",
        _ => "trace",
    }
}

impl LoggingConfig {
    /// Logging in `format`, filtered by `directives` when given, else by verbosity `v`.
    pub fn new(format: Format, v: u8, directives: Option<&str>) -> Result<Self, Error> {
        let directives = directives
            .map(str::trim)
            .filter(|d| !d.is_empty())
            .unwrap_or_else(|| verbosity_directives(v))
            .to_owned();
        EnvFilter::builder()
            .parse(&directives)
            .map_err(|source| Error::Filter {
                directives: directives.clone(),
                source,
            })?;
        Ok(Self { format, directives })
    }

    /// A subscriber that writes to standard error.
    pub fn subscriber(&self) -> Box<dyn Subscriber + Send + Sync> {
        self.subscriber_with_writer(std::io::stderr)
    }

    /// A subscriber that writes to `writer`; for tests and embedding.
    pub fn subscriber_with_writer<W>(&self, writer: W) -> Box<dyn Subscriber + Send + Sync>
    where
        W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
    {
        // Validated in `new`; a failure here would only drop to the default filter.
        let filter = EnvFilter::builder()
            .parse(&self.directives)
            .unwrap_or_else(|_| EnvFilter::new(verbosity_directives(0)));
        let builder = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(writer);
        match self.format {
            Format::Text => Box::new(builder.with_ansi(false).finish()),
            Format::Json => Box::new(builder.json().flatten_event(true).finish()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Capture(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Capture {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn capture(config: &LoggingConfig, f: impl FnOnce()) -> String {
        let out = Capture::default();
        let writer = out.clone();
        let subscriber = config.subscriber_with_writer(move || writer.clone());
        tracing::subscriber::with_default(subscriber, f);
        String::from_utf8(out.0.lock().unwrap().clone()).unwrap()
    }

    #[test]
    fn json_lines_carry_level_message_and_fields() {
        let config = LoggingConfig::new(Format::Json, 0, None).unwrap();
        let out = capture(&config, || {
            tracing::info!(port = 6443, "serving");
            tracing::debug!("hidden at -v 0");
        });
        let lines: Vec<serde_json::Value> = out
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 1, "{out}");
        assert_eq!(lines[0]["level"], "INFO");
        assert_eq!(lines[0]["message"], "serving");
        assert_eq!(lines[0]["port"], 6443);
    }

    #[test]
    fn verbosity_and_directives_select_what_is_logged() {
        let verbose = LoggingConfig::new(Format::Text, 2, None).unwrap();
        assert_eq!(verbose.directives, "debug");
        let out = capture(&verbose, || tracing::debug!("shown at -v 2"));
        assert!(out.contains("shown at -v 2"), "{out}");
        let directed = LoggingConfig::new(Format::Text, 5, Some("warn")).unwrap();
        let out = capture(&directed, || {
            tracing::info!("not shown");
            tracing::warn!("shown");
        });
        assert!(out.contains("shown") && !out.contains("not shown"), "{out}");
    }

    #[test]
    fn bad_input_is_refused() {
        assert!(matches!("xml".parse::<Format>(), Err(Error::Format(_))));
        assert!(matches!(
            LoggingConfig::new(Format::Text, 0, Some("foo=notalevel")),
            Err(Error::Filter { .. })
        ));
    }
}
