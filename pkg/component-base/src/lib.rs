//! What every genplane role shares.
//!
//! Each role of the `genplane` multi-call binary (apiserver, controller-manager, feature-controller,
//! ...) is assembled from the same base, so that they all behave the same way to an operator:
//!
//! - [`component`]: the start-up sequence every role shares (defaults, check, validation).
//! - [`config`]: layered configuration. Built-in defaults < a config file (`--config`, TOML or YAML)
//!   < `GENPLANE_*` environment variables < command-line flags, with `--print-default-config` and
//!   `--config-check`, and every validation error reported at once.
//! - [`logging`]: `--log-format=text|json`, `-v N` and `RUST_LOG`-style filter directives.
//! - [`metrics`]: a registry served on `/metrics` in the Prometheus text format.
//! - [`health`]: `/healthz`, `/livez` and `/readyz` with named checks, `?verbose`, `?exclude=` and
//!   `/readyz/<check>`, as kube-apiserver serves them.
//! - [`shutdown`]: SIGTERM/SIGINT start a graceful shutdown that has a deadline.
//! - [`notify`]: systemd's notification protocol (`READY=1`, `STOPPING=1`, the watchdog) for
//!   units of `Type=notify`.
//! - [`featuregate`]: Kubernetes-style feature gates with versioned specs, `--feature-gates`,
//!   `--emulated-version`, the `kubernetes_feature_enabled` gauge, and a use log (KEP-3920's client
//!   flow) that records every check so that a later component can report it to the API.
//! - [`http`]: a small HTTP server for the endpoints above, with graceful shutdown.
//! - [`probe`]: the client side of those endpoints, as the kubelet probes them (`genplane
//!   healthcheck URL`, the container images' `HEALTHCHECK`).
//! - [`strconv`]: values read by Go's rules (`strconv.ParseBool`), as flags, labels and query
//!   parameters are.
//! - [`tls`]: TLS pieces the roles share (a verifier accepting any server certificate).
//! - [`version`]: genplane's version, git commit, and the Kubernetes version it emulates.
//! - [`process`]: the process context (arguments, environment) handed to a role, so that
//!   libraries never read process-global state themselves.
//!
//! Nothing in this crate installs process-global state on its own: the binary decides when to
//! install a tracing subscriber or a signal handler, and passes the environment in.

#![warn(missing_docs)]

pub mod component;
pub mod config;
pub mod featuregate;
pub mod health;
pub mod http;
pub mod logging;
pub mod metrics;
pub mod notify;
pub mod probe;
pub mod process;
pub mod shutdown;
pub mod strconv;
pub mod tls;
pub mod version;
