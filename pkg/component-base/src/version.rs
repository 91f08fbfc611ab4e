//! Version information: genplane's own version, the commit it was built from, and the
//! Kubernetes version whose API it emulates.

use clap::{Arg, ArgMatches, Command};
use serde::Serialize;

use crate::featuregate::Version;

/// Errors of rendering version information.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An output format other than `text`, `json` or `yaml`.
    #[error("unsupported output format {0:?}: must be text, json or yaml")]
    Format(String),
    /// Encoding failed.
    #[error("encoding version information: {0}")]
    Encode(String),
}

/// The Kubernetes version whose API genplane serves and whose behaviour it follows.
pub const KUBERNETES_VERSION: Version = Version::new(1, 33);

/// The oldest Kubernetes version that `--emulated-version` accepts: three minor versions back,
/// as KEP-4330 (compatibility versions) allows.
pub const MIN_EMULATED_VERSION: Version = Version::new(1, 30);

/// Version and build information of a binary.
///
/// The binary fills it in from its own build (the library cannot know which commit the final
/// executable was built from without rebuilding every crate on each commit).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BuildInfo {
    /// genplane's version, e.g. `0.1.0`.
    pub genplane_version: String,
    /// The git commit the binary was built from, or `unknown`.
    pub git_commit: String,
    /// The Kubernetes API version genplane emulates, e.g. `v1.33`.
    pub kubernetes_version: String,
    /// The target platform, e.g. `linux/amd64`.
    pub platform: String,
}

impl BuildInfo {
    /// Build information for the given genplane version and git commit, on this platform.
    pub fn new(genplane_version: &str, git_commit: Option<&str>) -> Self {
        let commit = git_commit.map(str::trim).filter(|c| !c.is_empty());
        Self {
            genplane_version: genplane_version.to_owned(),
            git_commit: commit.unwrap_or("unknown").to_owned(),
            kubernetes_version: format!("v{KUBERNETES_VERSION}"),
            platform: platform(),
        }
    }
}

impl Default for BuildInfo {
    fn default() -> Self {
        Self::new(env!("CARGO_PKG_VERSION"), None)
    }
}

/// The command line of `genplane version`.
pub fn command() -> Command {
    Command::new("version")
        .about("Print genplane's version, git commit, and the Kubernetes API version it emulates")
        .arg(
            Arg::new("output")
                .short('o')
                .long("output")
                .value_name("FORMAT")
                .value_parser(["text", "json", "yaml"])
                .default_value("text")
                .help("Output format"),
        )
}

/// Renders `info` in the format `matches` of [`command`] ask for.
pub fn render(info: &BuildInfo, matches: &ArgMatches) -> Result<String, Error> {
    let format = matches
        .get_one::<String>("output")
        .map_or("text", String::as_str);
    match format {
        "text" => Ok(format!(
            "genplane version: {}\ngit commit: {}\nkubernetes API version: {}\nplatform: {}\n",
            info.genplane_version, info.git_commit, info.kubernetes_version, info.platform
        )),
        "json" => serde_json::to_string_pretty(info)
            .map(|s| s + "\n")
            .map_err(|e| Error::Encode(e.to_string())),
        "yaml" => serde_saphyr::to_string(info).map_err(|e| Error::Encode(e.to_string())),
        other => Err(Error::Format(other.to_owned())),
    }
}

/// The platform in Go's `GOOS/GOARCH` spelling, which is what Kubernetes clients expect to see.
fn platform() -> String {
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "powerpc64" => "ppc64le",
        other => other,
    };
    format!("{}/{}", std::env::consts::OS, arch)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_info_reports_the_emulated_kubernetes_version() {
        let info = BuildInfo::new("1.2.3", Some("abc123\n"));
        assert_eq!(info.genplane_version, "1.2.3");
        assert_eq!(info.git_commit, "abc123");
        assert_eq!(info.kubernetes_version, "v1.33");
        assert!(info.platform.starts_with(std::env::consts::OS));
        assert_eq!(BuildInfo::new("1", Some("  ")).git_commit, "unknown");
    }

    #[test]
    fn renders_text_json_and_yaml() {
        let info = BuildInfo::new("1.2.3", Some("abc123"));
        let render_as =
            |args: &[&str]| render(&info, &command().try_get_matches_from(args).unwrap()).unwrap();
        let text = render_as(&["version"]);
        assert!(
            text.contains(
                "genplane version: 1.2.3\ngit commit: abc123\nkubernetes API version: v1.33\n"
            ),
            "{text}"
        );
        let json: serde_json::Value =
            serde_json::from_str(&render_as(&["version", "-o", "json"])).unwrap();
        assert_eq!(json["kubernetesVersion"], "v1.33");
        assert_eq!(json["gitCommit"], "abc123");
        let yaml: serde_json::Value =
            serde_saphyr::from_str(&render_as(&["version", "--output=yaml"])).unwrap();
        assert_eq!(yaml["genplaneVersion"], "1.2.3");
        assert!(
            command()
                .try_get_matches_from(["version", "-o", "xml"])
                .is_err()
        );
    }
}
