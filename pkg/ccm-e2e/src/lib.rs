//! The conformance suite of `genplane ccm-e2e` for external cloud controller managers.
//!
//! It runs upstream's cloud-provider tests (nodes deleted with their instances, reboots,
//! upgrades) and the LoadBalancer and Service tests of `test/e2e/network` ([`specs`])
//! against a cluster (`--kubeconfig`, `--context`), with the infrastructure actions they need
//! (delete or reboot an instance, describe a load balancer, probe from outside) done by a
//! provider (`--provider exec:PATH` for an exec plugin, or a built-in name; see
//! `genplane_cloudprovider`). A test needing a capability the provider does not declare is
//! skipped with that reason.
//!
//! Selection is upstream's: `--focus`/`--skip` (regular expressions on the full name, labels
//! included in brackets) and `--label-filter` (Ginkgo's syntax). `--list` prints the tests
//! with their labels and needs, `--dry-run` walks the selection against the provider's
//! capabilities without touching the cluster. Each test gets a namespace of its own, deleted
//! after it with its Services (so the cloud's load balancers go too); Ctrl-C and
//! `--timeout` clean up the same way, and `--clean-start` deletes what an interrupted run
//! left (namespaces labelled `e2e-framework=ccm-e2e`) before the tests. Waits are upstream's
//! timeouts times `--timeout-scale`. The upgrade tests run upstream's upgrade tests (a
//! LoadBalancer Service, a Deployment, a ReplicaSet) while the upgrade happens
//! ([`upgrades`]) and write their results to `junit_upgrades.xml` in `--report-dir`
//! ([`UPGRADES_JUNIT`]). On a terminal one status line follows the run
//! ([`display`]); elsewhere the output is plain lines, one per finished test.
//!
//! The flags are [`Options`]; [`run_suite`] runs what they select and writes the reports
//! ([`runner`]), [`suite::run`] runs given tests with a given provider. The tests are written
//! with [`framework`]; a test that does not pass says why in a [`framework::Error`], which
//! the report shows with its causes (`creating Service lb: <the API server's message>`). The
//! command, `genplane ccm-e2e` (`cmd/ccm-e2e`), finds the kubeconfig in the environment, runs
//! [`run_until_interrupted`] (which prints as [`run_printing`] does) until done or Ctrl-C, and
//! prints the summary.

#![warn(missing_docs)]

pub mod display;
pub mod framework;
pub mod options;
pub mod results;
pub mod runner;
pub mod specs;
pub mod suite;
pub mod upgrades;

pub use options::{BUILT_IN_PROVIDERS, Options};
pub use runner::{
    client, list, run_printing, run_suite, run_suite_with, run_until_interrupted, selected,
};
pub use suite::UPGRADES_JUNIT;
