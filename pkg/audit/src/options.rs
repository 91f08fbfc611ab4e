//! The audit flags of kube-apiserver, in one place: `--audit-policy-file`,
//! `--audit-log-path`, `--audit-log-maxage`, `--audit-log-maxbackup`, `--audit-log-maxsize`
//! (and `--audit-log-mode`).
//!
//! As upstream, auditing is on only when both a policy file and a log path are given.

use std::path::PathBuf;
use std::sync::Arc;

use crate::auditor::Auditor;
use crate::log::{LogBackend, LogConfig, LogError, LogMode};
use crate::policy::{Policy, PolicyError};
use crate::rotate::{MEGABYTE, Rotation};

/// The audit flags, as given.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuditOptions {
    /// `--audit-policy-file`: the policy; no auditing without one.
    pub policy_file: Option<PathBuf>,
    /// `--audit-log-path`: the log file, `-` for standard output; no auditing without one.
    pub log_path: Option<PathBuf>,
    /// `--audit-log-maxage`: days to keep rotated files (0: no limit).
    pub log_maxage: u32,
    /// `--audit-log-maxbackup`: rotated files to keep (0: no limit).
    pub log_maxbackup: u32,
    /// `--audit-log-maxsize`: megabytes before the file is rotated (0: 100).
    pub log_maxsize: u32,
    /// `--audit-log-mode`: `blocking` (default) or `batch`.
    pub log_mode: LogMode,
}

/// Why the audit options could not be applied.
#[derive(Debug, thiserror::Error)]
pub enum OptionsError {
    /// The policy file is unusable.
    #[error(transparent)]
    Policy(#[from] PolicyError),
    /// The log could not be opened.
    #[error(transparent)]
    Log(#[from] LogError),
    /// `--audit-log-mode` is not a known mode.
    #[error("invalid audit log mode {0:?}, allowed modes are \"batch,blocking\"")]
    Mode(String),
}

/// Auditing, ready to use.
#[derive(Debug)]
pub struct Audit {
    /// The auditor for the filter chain.
    pub auditor: Auditor,
    /// The log backend: flush or shut it down when the server stops.
    pub backend: Arc<LogBackend>,
    /// Problems with the policy file that were tolerated (log them as warnings).
    pub warnings: Vec<String>,
}

/// Parses `--audit-log-mode`.
pub fn parse_mode(mode: &str) -> Result<LogMode, OptionsError> {
    match mode {
        "blocking" => Ok(LogMode::Blocking),
        "batch" => Ok(LogMode::Batch),
        other => Err(OptionsError::Mode(other.to_owned())),
    }
}

impl AuditOptions {
    /// Loads the policy and starts the log backend; `None` when auditing is off (no policy
    /// file or no log path). Policy warnings are logged and returned.
    pub fn build(&self) -> Result<Option<Audit>, OptionsError> {
        let (Some(policy_file), Some(log_path)) = (&self.policy_file, &self.log_path) else {
            if self.log_path.is_some() {
                tracing::warn!(
                    "No audit policy file provided, no events will be recorded for log backend"
                );
            }
            return Ok(None);
        };
        let parsed = Policy::load(policy_file)?;
        for warning in &parsed.warnings {
            tracing::warn!("{warning}");
        }
        let config = LogConfig {
            rotation: Rotation {
                max_size_bytes: u64::from(self.log_maxsize) * MEGABYTE,
                max_backups: self.log_maxbackup as usize,
                max_age_days: self.log_maxage,
            },
            mode: self.log_mode,
            ..LogConfig::new(log_path)
        };
        let backend = Arc::new(LogBackend::start(config)?);
        Ok(Some(Audit {
            auditor: Auditor::new(parsed.policy, backend.clone()),
            backend,
            warnings: parsed.warnings,
        }))
    }
}

#[cfg(test)]
mod tests {
    use genplane_authentication::UserInfo;

    use super::*;
    use crate::attributes::RequestAttributes;

    #[test]
    fn auditing_needs_a_policy_and_a_log() {
        let dir = tempfile::tempdir().expect("temp dir");
        let policy = dir.path().join("policy.yaml");
        std::fs::write(
            &policy,
            "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n  typo: 1\n",
        )
        .expect("write");
        let log = dir.path().join("audit.log");
        assert!(AuditOptions::default().build().expect("off").is_none());
        let only_log = AuditOptions {
            log_path: Some(log.clone()),
            ..AuditOptions::default()
        };
        assert!(only_log.build().expect("off").is_none());

        let options = AuditOptions {
            policy_file: Some(policy),
            log_path: Some(log.clone()),
            log_maxsize: 1,
            ..AuditOptions::default()
        };
        let audit = options.build().expect("valid").expect("on");
        assert_eq!(audit.warnings.len(), 1);
        let user = UserInfo::authenticated("alice", vec![]);
        let record = audit
            .auditor
            .begin(&RequestAttributes::new(&user, "get", "/version"))
            .expect("audited");
        record.finish();
        audit.backend.flush().expect("flush");
        assert_eq!(
            std::fs::read_to_string(&log).expect("read").lines().count(),
            2
        );
    }

    #[test]
    fn bad_policies_and_modes_fail() {
        let options = AuditOptions {
            policy_file: Some("/nonexistent/policy.yaml".into()),
            log_path: Some("-".into()),
            ..AuditOptions::default()
        };
        assert!(matches!(options.build(), Err(OptionsError::Policy(_))));
        assert_eq!(parse_mode("batch").expect("valid"), LogMode::Batch);
        assert_eq!(
            parse_mode("blocking-strict")
                .expect_err("unsupported")
                .to_string(),
            "invalid audit log mode \"blocking-strict\", allowed modes are \"batch,blocking\""
        );
    }
}
