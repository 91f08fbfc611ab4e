//! The process context handed to each role.
//!
//! The binary reads argv and the environment once, at start, and passes them down in a
//! [`Process`]. Libraries read only what they are given, which keeps them free of process-global
//! state and lets tests run a role with an environment of their own.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;

use crate::version::BuildInfo;

/// What a role may know about the process it runs in.
#[derive(Clone, Debug, Default)]
pub struct Process {
    /// The command-line arguments, the program name first.
    pub args: Vec<OsString>,
    /// The environment variables whose names and values are valid UTF-8.
    pub env: BTreeMap<String, String>,
    /// The path of the running executable, when it is known.
    pub current_exe: Option<PathBuf>,
    /// Version and build information of the binary.
    pub build: BuildInfo,
}

impl Process {
    /// The context of the running process: its arguments, its environment (the variables
    /// whose names and values are valid UTF-8) and its executable's path. Only a program's
    /// `main` calls it, once: libraries take the context they are handed.
    #[allow(clippy::disallowed_methods)] // the one place that reads the process's own context
    pub fn current(build: BuildInfo) -> Self {
        Self {
            args: std::env::args_os().collect(),
            env: std::env::vars_os()
                .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
                .collect(),
            current_exe: std::env::current_exe().ok(),
            build,
        }
    }

    /// A process context with the given arguments and nothing else; for tests and embedding.
    pub fn with_args<I, S>(args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        Self {
            args: args.into_iter().map(Into::into).collect(),
            ..Self::default()
        }
    }

    /// Sets one environment variable of this context; for tests and embedding.
    #[must_use]
    pub fn with_env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.insert(name.into(), value.into());
        self
    }

    /// Looks up an environment variable of this context.
    pub fn var(&self, name: &str) -> Option<&str> {
        self.env.get(name).map(String::as_str)
    }
}

/// The host name, as the operating system reports it, or `localhost` when it has none (the
/// default identity of leader-election and identity Leases, as upstream names them).
pub fn hostname() -> String {
    hostname::get()
        .ok()
        .and_then(|h| h.into_string().ok())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_owned())
}
