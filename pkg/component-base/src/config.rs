//! Layered configuration: built-in defaults < config file < `GENPLANE_*` environment < flags.
//!
//! A role describes its options once, as one struct that derives both [`clap::Args`] (the flags,
//! with their help) and serde (the config file and environment). Keys are the flag names:
//! `--secure-port` is `secure-port` in a file and `GENPLANE_SECURE_PORT` in the environment.
//! Nested sections are not used; every option is a flag, as in Kubernetes components.
//!
//! [`load`] merges the layers:
//! 1. the options' [`Default`];
//! 2. the file named by `--config`: TOML, or YAML when the name ends in `.yaml`/`.yml`;
//!    unknown keys are errors, so a typo does not silently leave a default in place;
//! 3. environment variables `GENPLANE_<KEY>` (upper case, `-` written as `_`); variables that name
//!    no option are ignored, because one environment often serves several roles;
//! 4. the flags given on the command line (flags left out do not override anything).
//!
//! The merged raw options are then validated by the role into its typed configuration, with
//! every error collected in [`Invalid`] so that all of them are reported in one run.
//! [`ConfigFlags`] adds `--config`, `--print-default-config` and `--config-check`.

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};

use clap::parser::ValueSource;
use clap::{ArgMatches, Args, FromArgMatches};
use figment::value::{Dict, Map, Value};
use figment::{Figment, Metadata, Profile, Provider};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::featuregate::{self, FeatureGate, FeatureGateSettings, UseIdentity, Version};
use crate::logging::{self, LoggingConfig};
use crate::version::{KUBERNETES_VERSION, MIN_EMULATED_VERSION};

/// The prefix of environment variables that set options.
pub const ENV_PREFIX: &str = "GENPLANE_";

/// Errors of loading and validating a configuration. Every variant is an invalid configuration
/// (exit code 64 in the binary).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The config file could not be read.
    #[error("reading config file {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The config file is not valid TOML or YAML, or not a table of options.
    #[error("parsing config file {path}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A value has the wrong type for its option.
    #[error("{0}")]
    Extract(#[source] Box<figment::Error>),
    /// One or more options are invalid; every problem found is listed.
    #[error("{0}")]
    Invalid(Invalid),
}

/// One invalid option: which one, and what is wrong with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    /// The option's key, e.g. `secure-port` (the flag name without dashes).
    pub field: String,
    /// What is wrong.
    pub message: String,
}

/// Every validation error of a configuration, collected so that all are reported at once.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Invalid {
    /// The errors, in the order they were found.
    pub errors: Vec<FieldError>,
}

impl Invalid {
    /// No errors yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records an error of `field`.
    pub fn push(&mut self, field: &str, message: impl fmt::Display) {
        self.errors.push(FieldError {
            field: field.to_owned(),
            message: message.to_string(),
        });
    }

    /// Keeps the value of `result`, or records its error against `field`.
    pub fn check<T, E: fmt::Display>(&mut self, field: &str, result: Result<T, E>) -> Option<T> {
        result.map_err(|e| self.push(field, e)).ok()
    }

    /// Whether no error was recorded.
    pub fn is_empty(&self) -> bool {
        self.errors.is_empty()
    }

    /// `Ok(value)` when no error was recorded, else every error.
    ///
    /// `value` is what validation built; it is `None` only when a check failed, which recorded
    /// an error, so a `None` without errors is a bug in the validation and reported as such.
    pub fn finish<T>(self, value: Option<T>) -> Result<T, Error> {
        if !self.errors.is_empty() {
            return Err(Error::Invalid(self));
        }
        value.ok_or_else(|| {
            let mut invalid = Invalid::new();
            invalid.push(
                "config",
                "validation produced no value but reported no error",
            );
            Error::Invalid(invalid)
        })
    }
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid configuration ({} errors):", self.errors.len())?;
        for e in &self.errors {
            write!(f, "\n  - {}: {}", e.field, e.message)?;
        }
        Ok(())
    }
}

/// The flags of the configuration mechanism itself (not part of any configuration).
#[derive(Args, Clone, Debug, Default, PartialEq, Eq)]
pub struct ConfigFlags {
    /// Read options from this file: TOML, or YAML if the name ends in .yaml or .yml. Keys are the
    /// flag names (e.g. `log-format = "json"`); flags and GENPLANE_* variables override it.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Print the default configuration as TOML and exit.
    #[arg(long)]
    pub print_default_config: bool,
    /// Validate the configuration (defaults, file, environment, flags), report every error, and
    /// exit.
    #[arg(long)]
    pub config_check: bool,
}

/// Options every role has: logging and feature gates.
#[derive(Args, Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case", default)]
pub struct CommonOptions {
    /// Log format: text or json.
    #[arg(long, value_name = "FORMAT", default_value = "text")]
    pub log_format: String,
    /// Log verbosity: 0 logs info and above, 1 to 4 add debug, 5 and more add trace.
    #[arg(short = 'v', long = "v", value_name = "N", default_value_t = 0)]
    pub v: u8,
    /// Log filter directives in RUST_LOG syntax (e.g. `info,genplane_storage=debug`); they take
    /// precedence over -v. When unset, the RUST_LOG environment variable is used if present.
    #[arg(long, value_name = "DIRECTIVES")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_filter: Option<String>,
    /// Feature gates to set, as comma-separated Name=true|false pairs (see the list of features
    /// in --help).
    #[arg(long, value_name = "NAME=BOOL,...")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub feature_gates: Option<FeatureGateSettings>,
    /// The Kubernetes version whose feature defaults to use, MAJOR.MINOR (from 1.30 to 1.33).
    #[arg(long, value_name = "VERSION", default_value = "1.33")]
    pub emulated_version: String,
    /// How often the component reports the feature-gate values it saw to the Feature API
    /// (featuregates.genplane.io), and how long the feature-controller waits (twice this) for
    /// every instance to report after it cleared the uses; every component of a cluster should
    /// use the same period.
    #[arg(long, value_name = "DURATION", default_value = "30s")]
    pub feature_use_report_period: String,
}

impl Default for CommonOptions {
    fn default() -> Self {
        Self {
            log_format: "text".to_owned(),
            v: 0,
            log_filter: None,
            feature_gates: None,
            emulated_version: KUBERNETES_VERSION.to_string(),
            feature_use_report_period: "30s".to_owned(),
        }
    }
}

/// The validated common options.
#[derive(Clone, Debug)]
pub struct CommonConfig {
    /// How to log.
    pub logging: LoggingConfig,
    /// The resolved feature gate of this component, with its use log.
    pub feature_gate: FeatureGate,
    /// `--feature-use-report-period`.
    pub feature_use_report_period: std::time::Duration,
}

impl CommonOptions {
    /// Validates the options into a [`CommonConfig`], recording every problem in `invalid`.
    ///
    /// `rust_log` is the value of the `RUST_LOG` environment variable, if any; `identity` names
    /// the component instance that will record feature uses.
    pub fn validate(
        &self,
        features: &featuregate::Registry,
        identity: UseIdentity,
        rust_log: Option<&str>,
        invalid: &mut Invalid,
    ) -> Option<CommonConfig> {
        let format = invalid.check("log-format", self.log_format.parse::<logging::Format>());
        let filter = self.log_filter.as_deref().or(rust_log);
        let logging = invalid.check(
            "log-filter",
            LoggingConfig::new(format.unwrap_or_default(), self.v, filter),
        );
        let version = invalid.check("emulated-version", self.emulated_version());
        let settings = self.feature_gates.clone().unwrap_or_default();
        let gate = version.and_then(|version| {
            features
                .resolve(&settings, version, identity)
                .map_err(|errors| {
                    for e in errors {
                        invalid.push("feature-gates", e);
                    }
                })
                .ok()
        });
        let period = invalid.check(
            "feature-use-report-period",
            genplane_apimachinery::duration::parse(&self.feature_use_report_period)
                .map_err(|e| e.to_string())
                .and_then(|d| {
                    if d < std::time::Duration::from_secs(1) {
                        Err("must be at least 1s".to_owned())
                    } else {
                        Ok(d)
                    }
                }),
        );
        Some(CommonConfig {
            logging: logging.filter(|_| format.is_some())?,
            feature_gate: gate?,
            feature_use_report_period: period?,
        })
    }

    fn emulated_version(&self) -> Result<Version, featuregate::Error> {
        let version: Version = self.emulated_version.parse()?;
        if version < MIN_EMULATED_VERSION || version > KUBERNETES_VERSION {
            return Err(featuregate::Error::VersionOutOfRange {
                version,
                min: MIN_EMULATED_VERSION,
                max: KUBERNETES_VERSION,
            });
        }
        Ok(version)
    }
}

/// Loads options of type `O` from every layer: defaults < file < environment < flags.
///
/// `matches` are the parsed command-line arguments of the role (they must include `O`'s
/// arguments), `file` the `--config` file if any, and `env` the process environment.
pub fn load<'a, O>(
    matches: &ArgMatches,
    file: Option<&Path>,
    env: impl IntoIterator<Item = (&'a String, &'a String)>,
) -> Result<O, Error>
where
    O: Args + FromArgMatches + Serialize + DeserializeOwned + Default,
{
    let known = known_keys::<O>();
    let mut figment = Figment::from(Layer::serialize(
        "built-in defaults",
        Source::Default,
        &O::default(),
    )?);
    if let Some(path) = file {
        figment = figment.merge(file_layer(path, &known)?);
    }
    figment = figment.merge(env_layer::<O>(env, &known)?);
    figment = figment.merge(flag_layer::<O>(matches, &known)?);
    figment
        .extract_lossy()
        .map_err(|e| Error::Extract(Box::new(e)))
}

/// Renders the default configuration of `O` as TOML, for `--print-default-config`.
pub fn default_config_toml<O: Serialize + Default>() -> Result<String, Error> {
    toml::to_string_pretty(&O::default()).map_err(|e| Error::Parse {
        path: PathBuf::from("<defaults>"),
        message: e.to_string(),
    })
}

/// The option keys of `O`: its flag names.
fn known_keys<O: Args>() -> BTreeSet<String> {
    O::augment_args(clap::Command::new("options"))
        .get_arguments()
        .filter_map(|a| a.get_long().map(str::to_owned))
        .collect()
}

#[derive(Clone, Copy, Debug)]
enum Source {
    Default,
    File,
    Env,
    Flag,
}

/// One layer of configuration, named so that errors say where a bad value came from.
struct Layer {
    name: String,
    source: Source,
    dict: Dict,
}

impl Layer {
    fn serialize(name: &str, source: Source, value: &impl Serialize) -> Result<Self, Error> {
        let value = Value::serialize(value).map_err(|e| Error::Extract(Box::new(e)))?;
        let dict = value.into_dict().unwrap_or_default();
        Ok(Self {
            name: name.to_owned(),
            source,
            dict,
        })
    }
}

impl Provider for Layer {
    fn metadata(&self) -> Metadata {
        let source = self.source;
        Metadata::named(self.name.clone()).interpolater(move |_profile: &Profile, keys: &[&str]| {
            let key = keys.join(".");
            match source {
                Source::Env => format!("{ENV_PREFIX}{}", key.to_uppercase().replace('-', "_")),
                Source::Flag => format!("--{key}"),
                Source::Default | Source::File => key,
            }
        })
    }

    fn data(&self) -> Result<Map<Profile, Dict>, figment::Error> {
        let mut map = Map::new();
        map.insert(Profile::Default, self.dict.clone());
        Ok(map)
    }
}

fn file_layer(path: &Path, known: &BTreeSet<String>) -> Result<Layer, Error> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::Read {
        path: path.to_owned(),
        source,
    })?;
    let parse_error = |message: String| Error::Parse {
        path: path.to_owned(),
        message,
    };
    let is_yaml = path
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("yaml") || e.eq_ignore_ascii_case("yml"));
    let value: serde_json::Value = if is_yaml {
        if text.trim().is_empty() {
            serde_json::Value::Object(serde_json::Map::new())
        } else {
            serde_saphyr::from_str(&text).map_err(|e| parse_error(e.to_string()))?
        }
    } else {
        toml::from_str(&text).map_err(|e| parse_error(e.to_string()))?
    };
    let serde_json::Value::Object(object) = &value else {
        return Err(parse_error(
            "the file must hold a table (map) of options".to_owned(),
        ));
    };
    let mut invalid = Invalid::new();
    for key in object.keys().filter(|k| !known.contains(*k)) {
        invalid.push(
            key,
            format!("unknown option in config file {}", path.display()),
        );
    }
    if !invalid.is_empty() {
        return Err(Error::Invalid(invalid));
    }
    Layer::serialize(
        &format!("config file {}", path.display()),
        Source::File,
        &value,
    )
}

/// The `GENPLANE_*` variables that name options, each read as its flag would be (lists split
/// on commas, numbers and booleans parsed by the flag's own parser); a value the flag's parser
/// refuses is an error naming the variable.
fn env_layer<'a, O>(
    env: impl IntoIterator<Item = (&'a String, &'a String)>,
    known: &BTreeSet<String>,
) -> Result<Layer, Error>
where
    O: Args + FromArgMatches + Serialize,
{
    let mut dict = Dict::new();
    let mut invalid = Invalid::new();
    for (name, value) in env {
        let Some(rest) = name.strip_prefix(ENV_PREFIX) else {
            continue;
        };
        let key = rest.to_lowercase().replace('_', "-");
        if !known.contains(&key) {
            continue;
        }
        match as_flag::<O>(&key, value) {
            Ok(parsed) => {
                dict.insert(key, parsed.unwrap_or_else(|| Value::from(value.clone())));
            }
            Err(message) => invalid.push(name.as_str(), message),
        }
    }
    if !invalid.errors.is_empty() {
        return Err(Error::Invalid(invalid));
    }
    Ok(Layer {
        name: "environment".to_owned(),
        source: Source::Env,
        dict,
    })
}

/// `value` parsed as `--key=value` is, as the option's serialized value (`None` if the option
/// does not serialize under its flag name).
fn as_flag<O>(key: &str, value: &str) -> Result<Option<Value>, String>
where
    O: Args + FromArgMatches + Serialize,
{
    let command = O::augment_args(clap::Command::new("environment").no_binary_name(true));
    let matches = command
        .try_get_matches_from([format!("--{key}={value}")])
        .map_err(|e| {
            let rendered = e.render().to_string();
            let first = rendered
                .lines()
                .next()
                .unwrap_or("")
                .trim_start_matches("error: ");
            format!("in the environment: {first}")
        })?;
    let parsed = O::from_arg_matches(&matches).map_err(|e| e.to_string())?;
    let layer = Layer::serialize("environment", Source::Env, &parsed).map_err(|e| e.to_string())?;
    Ok(layer.dict.get(key).cloned())
}

fn flag_layer<O>(matches: &ArgMatches, known: &BTreeSet<String>) -> Result<Layer, Error>
where
    O: FromArgMatches + Serialize,
{
    let parsed = O::from_arg_matches(matches).map_err(|e| {
        let mut invalid = Invalid::new();
        invalid.push("flags", e);
        Error::Invalid(invalid)
    })?;
    let mut layer = Layer::serialize("command-line flags", Source::Flag, &parsed)?;
    let given: BTreeSet<String> = matches
        .ids()
        .filter(|id| matches.value_source(id.as_str()) == Some(ValueSource::CommandLine))
        .map(|id| id.as_str().replace('_', "-"))
        .filter(|key| known.contains(key))
        .collect();
    layer.dict.retain(|key, _| given.contains(key));
    Ok(layer)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, Parser};
    use std::collections::BTreeMap;

    #[derive(Parser, Debug, Serialize, serde::Deserialize, PartialEq)]
    #[serde(rename_all = "kebab-case", default)]
    struct TestOptions {
        #[arg(long, default_value_t = 6443)]
        secure_port: u16,
        #[arg(long, default_value = "default-name")]
        name: String,
        #[arg(long, default_value = "default-region")]
        region: String,
        #[arg(long, default_value_t = false)]
        debug_mode: bool,
        #[command(flatten)]
        #[serde(flatten)]
        common: CommonOptions,
    }

    impl Default for TestOptions {
        fn default() -> Self {
            Self {
                secure_port: 6443,
                name: "default-name".into(),
                region: "default-region".into(),
                debug_mode: false,
                common: CommonOptions::default(),
            }
        }
    }

    fn matches(args: &[&str]) -> ArgMatches {
        TestOptions::command()
            .try_get_matches_from(std::iter::once("test").chain(args.iter().copied()))
            .unwrap()
    }

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn clap_defaults_match_the_default_impl() {
        let parsed = TestOptions::from_arg_matches(&matches(&[])).unwrap();
        assert_eq!(parsed, TestOptions::default());
        let common = CommonOptions::augment_args(clap::Command::new("c"))
            .try_get_matches_from(["c"])
            .unwrap();
        assert_eq!(
            CommonOptions::from_arg_matches(&common).unwrap(),
            CommonOptions::default()
        );
    }

    #[test]
    fn unknown_file_keys_are_errors_and_unknown_env_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        std::fs::write(&path, "secure-prot = 1\nname = \"x\"\n").unwrap();
        let err = load::<TestOptions>(&matches(&[]), Some(&path), &env(&[])).unwrap_err();
        let Error::Invalid(invalid) = err else {
            panic!("{err:?}")
        };
        assert_eq!(invalid.errors[0].field, "secure-prot");
        let ok = load::<TestOptions>(
            &matches(&[]),
            None,
            &env(&[("GENPLANE_NOT_AN_OPTION", "1")]),
        )
        .unwrap();
        assert_eq!(ok, TestOptions::default());
    }

    #[test]
    fn type_errors_name_the_key_and_its_layer() {
        let err = load::<TestOptions>(
            &matches(&[]),
            None,
            &env(&[("GENPLANE_SECURE_PORT", "many")]),
        )
        .unwrap_err();
        let message = err.to_string();
        assert!(
            message.contains("GENPLANE_SECURE_PORT") && message.contains("environment"),
            "{message}"
        );
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.toml");
        assert!(matches!(
            load::<TestOptions>(&matches(&[]), Some(&missing), &env(&[])),
            Err(Error::Read { .. })
        ));
        let bad = dir.path().join("bad.yaml");
        std::fs::write(&bad, "- a list\n- not a table\n").unwrap();
        assert!(matches!(
            load::<TestOptions>(&matches(&[]), Some(&bad), &env(&[])),
            Err(Error::Parse { .. })
        ));
    }

    #[test]
    fn feature_gates_merge_across_layers() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.yaml");
        std::fs::write(&path, "feature-gates:\n  A: true\n  B: true\n").unwrap();
        let loaded = load::<TestOptions>(
            &matches(&["--feature-gates", "B=false,C=true"]),
            Some(&path),
            &env(&[]),
        )
        .unwrap();
        let gates = loaded.common.feature_gates.unwrap();
        assert_eq!(gates.to_string(), "A=true,B=false,C=true");
    }

    #[test]
    fn default_config_prints_as_toml_that_loads_back() {
        let text = default_config_toml::<TestOptions>().unwrap();
        assert!(text.contains("secure-port = 6443"), "{text}");
        assert!(text.contains("log-format = \"text\""), "{text}");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("defaults.toml");
        std::fs::write(&path, &text).unwrap();
        assert_eq!(
            load::<TestOptions>(&matches(&[]), Some(&path), &env(&[])).unwrap(),
            TestOptions::default()
        );
    }

    #[test]
    fn invalid_lists_every_error() {
        let mut invalid = Invalid::new();
        assert_eq!(invalid.check::<u8, String>("a", Ok(1)), Some(1));
        invalid.push("a", "bad a");
        invalid.push("b", "bad b");
        let message = Error::Invalid(invalid).to_string();
        assert_eq!(
            message,
            "invalid configuration (2 errors):\n  - a: bad a\n  - b: bad b"
        );
        assert_eq!(Invalid::new().finish(Some(3)).unwrap(), 3);
    }
}
