//! What a test's run gives: its [`Outcome`] and [`TestResult`], the [`UpgradeReport`] of the
//! upgrade tests, and why a test that needs capabilities the provider lacks is skipped. Below
//! the runner ([`crate::suite`]) and the tests ([`crate::specs`], [`crate::upgrades`]), which
//! all use them.

use std::time::Duration;

use genplane_cloudprovider::{Capabilities, Capability};

/// How a test ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// It passed.
    Passed,
    /// It failed; why.
    Failed(String),
    /// It was skipped; why.
    Skipped(String),
    /// `--dry-run`: it would have run.
    DryRun,
    /// It did not finish: the run was interrupted or ran out of time.
    Stopped(String),
}

/// One test's result.
#[derive(Debug, Clone)]
pub struct TestResult {
    /// Its full name.
    pub name: &'static str,
    /// How it ended.
    pub outcome: Outcome,
    /// How long it took.
    pub duration: Duration,
    /// Its steps (and clean-up notes).
    pub steps: Vec<String>,
}

/// What the upgrade tests of one upgrade found (upstream's `junit_upgrades.xml` suite): the
/// upgrade itself, then each upgrade test.
#[derive(Debug, Clone)]
pub struct UpgradeReport {
    /// The suite's name, upstream's (`Master upgrade`).
    pub name: &'static str,
    /// The upgrade's result, then each upgrade test's.
    pub results: Vec<TestResult>,
    /// How long it took.
    pub duration: Duration,
}

/// Why something needing `needs` cannot run with `capabilities`, if it cannot.
pub fn missing_reason(capabilities: &Capabilities, needs: &[Capability]) -> Option<String> {
    let missing = capabilities.missing(needs);
    (!missing.is_empty()).then(|| {
        let names: Vec<&str> = missing.iter().map(|c| c.name()).collect();
        format!(
            "the provider does not declare the capabilit{} {}",
            if names.len() == 1 { "y" } else { "ies" },
            names.join(", ")
        )
    })
}
