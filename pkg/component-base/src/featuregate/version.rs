//! Kubernetes minor versions, as features' histories and `--emulated-version` name them.

use super::Error;
use serde::Deserialize;
use serde::Serialize;
use serde::Serializer;
use serde::de;
use serde::de::Deserializer;
use std::fmt;
use std::str::FromStr;

/// A Kubernetes minor version, `MAJOR.MINOR` (patch versions are not meaningful for features).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Version {
    /// The major version.
    pub major: u32,
    /// The minor version.
    pub minor: u32,
}

impl Version {
    /// The version `major.minor`.
    pub const fn new(major: u32, minor: u32) -> Self {
        Self { major, minor }
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

impl FromStr for Version {
    type Err = Error;

    /// Parses `1.33` or `v1.33`; a patch version (`1.33.2`) is refused, as upstream refuses it.
    fn from_str(input: &str) -> Result<Self, Error> {
        let invalid = |reason| Error::InvalidVersion {
            input: input.to_owned(),
            reason,
        };
        let trimmed = input.trim();
        let digits = trimmed.strip_prefix('v').unwrap_or(trimmed);
        let mut parts = digits.split('.');
        let (Some(major), Some(minor)) = (parts.next(), parts.next()) else {
            return Err(invalid("must be MAJOR.MINOR, e.g. 1.33"));
        };
        if parts.next().is_some() {
            return Err(invalid("a patch version is not allowed; use MAJOR.MINOR"));
        }
        let number = |s: &str| -> Result<u32, Error> {
            if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
                return Err(invalid("must be MAJOR.MINOR, e.g. 1.33"));
            }
            s.parse().map_err(|_| invalid("number too large"))
        };
        Ok(Self::new(number(major)?, number(minor)?))
    }
}

impl Serialize for Version {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Version {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        s.parse().map_err(de::Error::custom)
    }
}
