//! The configuration layers of a role, end to end through the shared start-up sequence:
//! defaults < config file < GENPLANE_* environment < flags, and `--config-check`.

#![allow(clippy::unwrap_used)] // test helpers may unwrap, like the tests themselves

use clap::{CommandFactory, Parser};
use genplane_component_base::component::{self, Startup};
use genplane_component_base::config::{CommonConfig, CommonOptions, ConfigFlags, Error, Invalid};
use genplane_component_base::featuregate::{
    Feature, FeatureSpec, Registry, Stage, UseIdentity, Version,
};
use genplane_component_base::process::Process;

const WATCH_LIST: Feature = Feature::new("WatchList");

#[derive(Parser, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case", default)]
struct Options {
    /// The port to serve on.
    #[arg(long, default_value_t = 6443)]
    secure_port: u16,
    /// Set by the file only.
    #[arg(long, default_value = "default")]
    from_file: String,
    /// Set by the file and the environment.
    #[arg(long, default_value = "default")]
    from_env: String,
    /// Set by the file, the environment and a flag.
    #[arg(long, default_value = "default")]
    from_flag: String,
    /// Set by nothing.
    #[arg(long, default_value = "default")]
    untouched: String,
    /// A list, comma-separated.
    #[arg(long, value_delimiter = ',')]
    servers: Vec<String>,
    #[command(flatten)]
    #[serde(flatten)]
    common: CommonOptions,
}

impl Default for Options {
    fn default() -> Self {
        let d = || "default".to_owned();
        Self {
            secure_port: 6443,
            from_file: d(),
            from_env: d(),
            from_flag: d(),
            untouched: d(),
            servers: Vec::new(),
            common: CommonOptions::default(),
        }
    }
}

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    config: ConfigFlags,
    #[command(flatten)]
    options: Options,
}

#[derive(Debug)]
struct Config {
    secure_port: u16,
    servers: Vec<String>,
    values: [String; 4],
    common: CommonConfig,
}

fn features() -> Registry {
    let mut registry = Registry::new();
    registry
        .add(
            WATCH_LIST,
            &[
                FeatureSpec::new(Version::new(1, 27), Stage::Alpha, false),
                FeatureSpec::new(Version::new(1, 32), Stage::Beta, true),
            ],
        )
        .unwrap();
    registry
}

fn validate(o: &Options, invalid: &mut Invalid) -> Option<Config> {
    if o.secure_port == 0 {
        invalid.push("secure-port", "must be between 1 and 65535");
    }
    let common = o
        .common
        .validate(&features(), UseIdentity::new("test", "1"), None, invalid);
    Some(Config {
        secure_port: o.secure_port,
        servers: o.servers.clone(),
        values: [
            o.from_file.clone(),
            o.from_env.clone(),
            o.from_flag.clone(),
            o.untouched.clone(),
        ],
        common: common?,
    })
}

fn run(args: &[&str], env: &[(&str, &str)]) -> (Result<Startup<Config>, Error>, String) {
    let matches = Cli::command()
        .try_get_matches_from(std::iter::once("role").chain(args.iter().copied()))
        .unwrap();
    let mut process = Process::with_args(["role"]);
    for (k, v) in env {
        process = process.with_env(*k, *v);
    }
    let mut out = Vec::new();
    let result = component::configure::<Options, _>(&matches, &process, &mut out, validate);
    (result, String::from_utf8(out).unwrap())
}

#[test]
fn each_layer_overrides_the_one_below() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("role.toml");
    std::fs::write(
        &file,
        "from-file = \"file\"\nfrom-env = \"file\"\nfrom-flag = \"file\"\nsecure-port = 7000\nlog-format = \"json\"\n[feature-gates]\nWatchList = false\n",
    )
    .unwrap();
    let config_arg = format!("--config={}", file.display());
    let env = [
        ("GENPLANE_FROM_ENV", "env"),
        ("GENPLANE_FROM_FLAG", "env"),
        ("GENPLANE_SECURE_PORT", "8000"),
        ("OTHER_FROM_FLAG", "ignored"),
    ];
    let (result, _) = run(
        &[
            &config_arg,
            "--from-flag=flag",
            "--secure-port",
            "9000",
            "-v",
            "3",
        ],
        &env,
    );
    let Ok(Startup::Run(config)) = result else {
        panic!("{result:?}")
    };
    assert_eq!(
        config.values,
        ["file", "env", "flag", "default"].map(String::from)
    );
    assert_eq!(
        config.secure_port, 9000,
        "the flag beats the environment and the file"
    );
    assert_eq!(
        config.common.logging.directives, "debug",
        "-v 3 from the flag"
    );
    assert_eq!(
        config.common.logging.format,
        genplane_component_base::logging::Format::Json,
        "log-format from the file"
    );
    assert!(
        !config.common.feature_gate.enabled(WATCH_LIST),
        "feature gate from the file"
    );

    // Without the flags, the environment wins over the file; without both, the file over defaults.
    let (result, _) = run(&[&config_arg], &env);
    let Ok(Startup::Run(config)) = result else {
        panic!("{result:?}")
    };
    assert_eq!(
        config.values,
        ["file", "env", "env", "default"].map(String::from)
    );
    assert_eq!(config.secure_port, 8000);
    let (result, _) = run(&[&config_arg], &[]);
    let Ok(Startup::Run(config)) = result else {
        panic!("{result:?}")
    };
    assert_eq!(
        config.values,
        ["file", "file", "file", "default"].map(String::from)
    );
    assert_eq!(config.secure_port, 7000);
    let (result, _) = run(&[], &[]);
    let Ok(Startup::Run(config)) = result else {
        panic!("{result:?}")
    };
    assert_eq!(config.secure_port, 6443);
    assert!(
        config.common.feature_gate.enabled(WATCH_LIST),
        "Beta and on at 1.33 by default"
    );

    // The environment can set feature gates and the emulated version too.
    let (result, _) = run(&[], &[("GENPLANE_EMULATED_VERSION", "1.31")]);
    let Ok(Startup::Run(config)) = result else {
        panic!("{result:?}")
    };
    assert!(
        !config.common.feature_gate.enabled(WATCH_LIST),
        "Alpha and off at 1.31"
    );
}

#[test]
fn config_check_reports_every_independent_error_in_one_run() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("role.yaml");
    std::fs::write(&file, "log-format: xml\nsecure-port: 0\n").unwrap();
    let config_arg = format!("--config={}", file.display());
    let (result, out) = run(
        &[
            &config_arg,
            "--config-check",
            "--feature-gates=NoSuchFeature=true",
            "--emulated-version=1.40",
        ],
        &[],
    );
    let Err(Error::Invalid(invalid)) = result else {
        panic!("{result:?}")
    };
    let fields: Vec<&str> = invalid.errors.iter().map(|e| e.field.as_str()).collect();
    assert_eq!(
        fields,
        ["secure-port", "log-format", "emulated-version"],
        "{invalid}"
    );
    assert!(out.is_empty());
    let message = Error::Invalid(invalid).to_string();
    assert!(
        message.contains("unsupported log format \"xml\""),
        "{message}"
    );
    assert!(
        message.contains("emulated version 1.40 is not between 1.30 and 1.33"),
        "{message}"
    );

    // With a valid version, the unknown feature gate is reported alongside the other errors.
    let (result, _) = run(
        &[
            &config_arg,
            "--config-check",
            "--feature-gates=NoSuchFeature=true",
        ],
        &[],
    );
    let Err(Error::Invalid(invalid)) = result else {
        panic!("{result:?}")
    };
    let message = invalid.to_string();
    assert!(
        message.starts_with("invalid configuration (3 errors)"),
        "{message}"
    );
    assert!(
        message.contains("feature-gates: unrecognized feature gate: NoSuchFeature"),
        "{message}"
    );

    let (result, out) = run(&["--config-check"], &[]);
    assert!(matches!(result, Ok(Startup::Done)));
    assert_eq!(out, "configuration is valid\n");
}

#[test]
fn print_default_config_prints_loadable_defaults() {
    let (result, out) = run(&["--print-default-config", "--secure-port=1"], &[]);
    assert!(matches!(result, Ok(Startup::Done)));
    assert!(
        out.contains("secure-port = 6443"),
        "defaults, not the flags: {out}"
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("defaults.toml");
    std::fs::write(&file, &out).unwrap();
    let (result, _) = run(
        &[&format!("--config={}", file.display()), "--config-check"],
        &[],
    );
    assert!(matches!(result, Ok(Startup::Done)), "{result:?}");
}

#[test]
fn environment_variables_are_read_as_their_flags_are() {
    let (result, _) = run(
        &[],
        &[
            ("GENPLANE_SERVERS", "https://a:2379,https://b:2379"),
            ("GENPLANE_V", "4"),
        ],
    );
    let Ok(Startup::Run(config)) = result else {
        panic!("{result:?}");
    };
    assert_eq!(config.servers, ["https://a:2379", "https://b:2379"]);
    assert_eq!(config.common.logging.directives, "debug");
    // A value the flag refuses is an error naming the variable.
    let (result, _) = run(&[], &[("GENPLANE_V", "loud")]);
    let message = result.unwrap_err().to_string();
    assert!(message.contains("GENPLANE_V"), "{message}");
}
