//! `--feature-gates`: the values asked for.

use super::{Error, join_errors};
use serde::Deserialize;
use serde::Serialize;
use serde::Serializer;
use serde::de;
use serde::de::Deserializer;
use serde::de::MapAccess;
use serde::de::Visitor;
use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

/// The values asked for with `--feature-gates` or the `feature-gates` key of a config file.
///
/// Parses from `A=true,B=false` (as the flag and environment variables give it) and deserializes
/// from that string or from a map of booleans (as a config file gives it). Values accept what
/// Go's `strconv.ParseBool` accepts: `1 t T TRUE true True 0 f F FALSE false False`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FeatureGateSettings(pub BTreeMap<String, bool>);

impl FeatureGateSettings {
    /// Parses `A=true,B=false`, collecting every malformed pair.
    pub fn parse(input: &str) -> Result<Self, Vec<Error>> {
        let mut map = BTreeMap::new();
        let mut errors = Vec::new();
        for pair in input.split(',') {
            let pair = pair.trim();
            if pair.is_empty() {
                continue;
            }
            let Some((key, value)) = pair.split_once('=') else {
                errors.push(Error::MissingValue {
                    key: pair.to_owned(),
                });
                continue;
            };
            let (key, value) = (key.trim(), value.trim());
            if key.is_empty() {
                errors.push(Error::MissingName {
                    pair: pair.to_owned(),
                });
                continue;
            }
            match crate::strconv::parse_bool(value) {
                Some(b) => {
                    map.insert(key.to_owned(), b);
                }
                None => errors.push(Error::InvalidValue {
                    key: key.to_owned(),
                    value: value.to_owned(),
                }),
            }
        }
        if errors.is_empty() {
            Ok(Self(map))
        } else {
            Err(errors)
        }
    }

    /// Whether no feature is set.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl FromStr for FeatureGateSettings {
    type Err = String;

    fn from_str(input: &str) -> Result<Self, String> {
        Self::parse(input).map_err(|errors| join_errors(&errors))
    }
}

impl fmt::Display for FeatureGateSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (k, v) in &self.0 {
            if !first {
                f.write_str(",")?;
            }
            first = false;
            write!(f, "{k}={v}")?;
        }
        Ok(())
    }
}

impl Serialize for FeatureGateSettings {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for FeatureGateSettings {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct SettingsVisitor;

        impl<'de> Visitor<'de> for SettingsVisitor {
            type Value = FeatureGateSettings;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map of feature names to booleans, or \"A=true,B=false\"")
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                v.parse().map_err(E::custom)
            }

            fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Self::Value, M::Error> {
                let mut out = BTreeMap::new();
                while let Some((key, value)) = map.next_entry::<String, BoolOrString>()? {
                    let value = match value {
                        BoolOrString::Bool(b) => b,
                        BoolOrString::String(s) => crate::strconv::parse_bool(s.trim())
                            .ok_or_else(|| {
                                de::Error::custom(Error::InvalidValue {
                                    key: key.clone(),
                                    value: s.clone(),
                                })
                            })?,
                    };
                    out.insert(key, value);
                }
                Ok(FeatureGateSettings(out))
            }
        }

        deserializer.deserialize_any(SettingsVisitor)
    }
}

#[derive(Deserialize)]
#[serde(untagged)]
enum BoolOrString {
    Bool(bool),
    String(String),
}
