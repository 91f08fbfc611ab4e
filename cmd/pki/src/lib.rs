//! `genplane pki`: makes, ahead of time, what `genplane apiserver` makes in its data directory
//! at its first start: the CA, the service-account signing key, the serving certificate, a
//! client certificate per identity (admin and each role) under `DIR/pki/`, and a kubeconfig per
//! identity in `DIR`. It reuses what is there (as the API server does: a serving certificate
//! that does not name every `--apiserver-cert-extra-sans` is made again), so it can run at
//! every start of a cluster, as the Compose cluster's one-shot `pki` service does.
//!
//! Several API servers on one etcd share the CA and the service-account key: each runs with a
//! data directory whose `pki/` is this one (or a copy), and makes nothing of its own. With
//! `--print-kubeconfig admin` it writes no kubeconfig and prints that one, for a user outside
//! the network the roles reach each other on (`--server https://127.0.0.1:6443`).

#![warn(missing_docs)]

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::{ArgMatches, CommandFactory, FromArgMatches as _, Parser};
use genplane_authentication::keys;
use genplane_component_base::process::Process;
use genplane_controlplane::server::pki;

#[derive(Parser, Debug)]
#[command(
    name = "pki",
    about = "Make the certificates, service-account key and kubeconfigs of a control plane ahead \
             of time (what `genplane apiserver` makes in its data directory), reusing what is there"
)]
struct Cli {
    /// The directory: certificates and keys go to DIR/pki, kubeconfigs to DIR (the layout of
    /// `genplane apiserver --data-dir DIR`)
    #[arg(long, value_name = "DIR", default_value = ".genplane")]
    data_dir: PathBuf,
    /// More names and IP addresses for the serving certificate, comma-separated, besides
    /// localhost, kubernetes, kubernetes.default, 127.0.0.1 and ::1
    #[arg(long, value_name = "NAMES", value_delimiter = ',')]
    apiserver_cert_extra_sans: Vec<String>,
    /// The API server URL the kubeconfigs name (repeatable: a context per server, the first
    /// current, `genplane-2` the second)
    #[arg(long, value_name = "URL", default_value = "https://127.0.0.1:6443", value_parser = https_url)]
    server: Vec<String>,
    /// Which kubeconfigs to write, comma-separated (default: every identity)
    #[arg(long, value_name = "IDENTITIES", value_delimiter = ',', value_parser = clap::builder::PossibleValuesParser::new(pki::identities()), conflicts_with = "print_kubeconfig")]
    kubeconfigs: Vec<String>,
    /// Write no kubeconfig; print this identity's to standard output (what had to be made is
    /// reported on standard error)
    #[arg(long, value_name = "IDENTITY", value_parser = clap::builder::PossibleValuesParser::new(pki::identities()))]
    print_kubeconfig: Option<String>,
}

/// An `https://HOST[:PORT][/PATH]` URL, as a kubeconfig's `server`.
fn https_url(text: &str) -> Result<String, String> {
    let rest = text
        .strip_prefix("https://")
        .ok_or_else(|| format!("{text:?} is not an https:// URL"))?;
    let authority = rest.split('/').next().unwrap_or_default();
    let (host, port) = match authority.rsplit_once(':') {
        // An IPv6 address in brackets has colons of its own.
        Some((host, port)) if !port.contains(']') => (host, Some(port)),
        _ => (authority, None),
    };
    if host.is_empty() || host.contains(char::is_whitespace) {
        return Err(format!("{text:?} names no host"));
    }
    if let Some(port) = port
        && port.parse::<u16>().is_err()
    {
        return Err(format!(
            "{text:?}: the port {port:?} is not a number up to 65535"
        ));
    }
    Ok(text.to_owned())
}

/// The command line of `genplane pki`.
pub fn command() -> clap::Command {
    Cli::command()
}

/// Runs `genplane pki`.
pub fn run(matches: &ArgMatches, _process: &Process) -> anyhow::Result<()> {
    let cli = Cli::from_arg_matches(matches)?;
    let printing = cli.print_kubeconfig.is_some();
    let report = make(&cli)?;
    let mut out: Box<dyn std::io::Write> = if printing {
        Box::new(std::io::stderr())
    } else {
        Box::new(std::io::stdout())
    };
    // Printing, what was kept goes unsaid: only what this run made is reported.
    for line in report
        .lines
        .iter()
        .filter(|line| !(printing && line.starts_with("kept ")))
    {
        writeln!(out, "{line}")?;
    }
    if let Some(kubeconfig) = report.printed {
        print!("{kubeconfig}");
    }
    Ok(())
}

/// What [`make`] did: a line per file, and the kubeconfig to print.
#[derive(Debug)]
struct Report {
    lines: Vec<String>,
    printed: Option<String>,
}

/// The regular files of `dir` and their contents (none when it does not exist yet).
fn snapshot(dir: &Path) -> anyhow::Result<BTreeMap<PathBuf, Vec<u8>>> {
    let mut files = BTreeMap::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(files),
        Err(e) => return Err(e).with_context(|| format!("reading {}", dir.display())),
    };
    for entry in entries {
        let path = entry
            .with_context(|| format!("reading {}", dir.display()))?
            .path();
        if path.is_file() {
            let bytes =
                std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
            files.insert(path, bytes);
        }
    }
    Ok(files)
}

fn make(cli: &Cli) -> anyhow::Result<Report> {
    let dir = cli.data_dir.join("pki");
    let before = snapshot(&dir)?;
    let made = pki::ensure(&dir, &cli.apiserver_cert_extra_sans)
        .with_context(|| format!("making the certificates in {}", dir.display()))?;
    let sa_key = dir.join(keys::GENERATED_KEY_FILE);
    keys::SigningKey::load_or_generate(&sa_key, keys::GeneratedKeyType::default()).with_context(
        || {
            format!(
                "making the service-account signing key {}",
                sa_key.display()
            )
        },
    )?;
    let mut lines = Vec::new();
    for (path, bytes) in snapshot(&dir)? {
        let what = match before.get(&path) {
            None => "made",
            Some(old) if *old != bytes => "made again",
            Some(_) => "kept",
        };
        lines.push(format!("{what} {}", path.display()));
    }

    let servers: Vec<&str> = cli.server.iter().map(String::as_str).collect();
    let kubeconfig = |stem: &str| -> anyhow::Result<String> {
        let client = made
            .clients
            .iter()
            .find(|c| c.stem == stem)
            .with_context(|| format!("no identity {stem}"))?;
        Ok(pki::kubeconfig(
            &servers,
            &made.ca,
            &client.cert,
            &client.key,
            client.user,
        )?)
    };
    if let Some(stem) = &cli.print_kubeconfig {
        return Ok(Report {
            lines,
            printed: Some(kubeconfig(stem)?),
        });
    }
    let wanted: Vec<&str> = if cli.kubeconfigs.is_empty() {
        pki::identities()
    } else {
        cli.kubeconfigs.iter().map(String::as_str).collect()
    };
    for stem in wanted {
        let path = cli.data_dir.join(format!("{stem}.kubeconfig"));
        write_private(&path, &kubeconfig(stem)?)?;
        lines.push(format!(
            "wrote {} for {}",
            path.display(),
            servers.join(" ")
        ));
    }
    Ok(Report {
        lines,
        printed: None,
    })
}

/// Writes a file only its owner may read (a kubeconfig holds a private key).
fn write_private(path: &Path, contents: &str) -> anyhow::Result<()> {
    use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("writing {}", path.display()))?;
    file.set_permissions(std::fs::Permissions::from_mode(0o600))
        .with_context(|| format!("protecting {}", path.display()))?;
    file.write_all(contents.as_bytes())
        .with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn cli(args: &[&str]) -> Cli {
        Cli::try_parse_from(std::iter::once("pki").chain(args.iter().copied())).unwrap()
    }

    fn yaml(text: &str) -> serde_json::Value {
        serde_saphyr::from_str(text).unwrap()
    }

    #[test]
    fn makes_what_an_api_server_needs_then_keeps_it() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let data_dir = format!("--data-dir={}", data.display());
        let first = make(&cli(&[
            &data_dir,
            "--apiserver-cert-extra-sans=apiserver-1,10.0.0.7",
            "--server=https://kubernetes:6443",
            "--kubeconfigs=controller-manager,feature-controller",
        ]))
        .unwrap();
        let pki = data.join("pki");
        for file in [
            "ca.crt",
            "ca.key",
            "sa.key",
            "apiserver.crt",
            "apiserver.key",
            "admin.crt",
            "controller-manager.key",
        ] {
            let line = format!("made {}", pki.join(file).display());
            assert!(first.lines.contains(&line), "{line}: {:?}", first.lines);
        }
        // Only the kubeconfigs asked for, naming the server given.
        let cm = std::fs::read_to_string(data.join("controller-manager.kubeconfig")).unwrap();
        assert_eq!(
            yaml(&cm)["clusters"][0]["cluster"]["server"],
            "https://kubernetes:6443"
        );
        assert!(data.join("feature-controller.kubeconfig").exists());
        assert!(!data.join("admin.kubeconfig").exists());
        use std::os::unix::fs::PermissionsExt as _;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&data.join("controller-manager.kubeconfig")), 0o600);
        assert_eq!(mode(&pki.join("ca.key")), 0o600);
        assert_eq!(mode(&pki.join("sa.key")), 0o600);

        // Again with the same names: everything kept, byte for byte.
        let ca = std::fs::read(pki.join("ca.crt")).unwrap();
        let again = make(&cli(&[
            &data_dir,
            "--apiserver-cert-extra-sans=apiserver-1,10.0.0.7",
        ]))
        .unwrap();
        assert!(
            again
                .lines
                .iter()
                .filter(|l| l.contains("/pki/"))
                .all(|l| l.starts_with("kept ")),
            "{:?}",
            again.lines
        );
        assert_eq!(std::fs::read(pki.join("ca.crt")).unwrap(), ca);
        // Without a --kubeconfigs, every identity's.
        for stem in pki::identities() {
            assert!(data.join(format!("{stem}.kubeconfig")).exists(), "{stem}");
        }

        // A name the serving certificate lacks: it alone is made again, by the same CA.
        let more = make(&cli(&[
            &data_dir,
            "--apiserver-cert-extra-sans=apiserver-2",
        ]))
        .unwrap();
        let remade: Vec<&String> = more
            .lines
            .iter()
            .filter(|l| l.starts_with("made again "))
            .collect();
        assert_eq!(
            remade,
            [
                &format!("made again {}", pki.join("apiserver.crt").display()),
                &format!("made again {}", pki.join("apiserver.key").display()),
            ]
        );
        assert_eq!(std::fs::read(pki.join("ca.crt")).unwrap(), ca);
    }

    #[test]
    fn prints_one_kubeconfig_with_a_context_per_server_and_writes_none() {
        let dir = tempfile::tempdir().unwrap();
        let data_dir = format!("--data-dir={}", dir.path().display());
        let report = make(&cli(&[
            &data_dir,
            "--server=https://127.0.0.1:6443",
            "--server=https://127.0.0.1:6444",
            "--print-kubeconfig=admin",
        ]))
        .unwrap();
        let config = yaml(report.printed.as_deref().unwrap());
        assert_eq!(config["current-context"], "genplane");
        assert_eq!(
            config["clusters"][1]["cluster"]["server"],
            "https://127.0.0.1:6444"
        );
        assert_eq!(config["contexts"][1]["name"], "genplane-2");
        assert_eq!(config["users"][0]["name"], pki::ADMIN_USER);
        let kubeconfigs = std::fs::read_dir(dir.path())
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .path()
                    .extension()
                    .is_some_and(|x| x == "kubeconfig")
            })
            .count();
        assert_eq!(kubeconfigs, 0);
    }

    #[test]
    fn bad_input_is_refused_with_its_reason() {
        let refused = |args: &[&str]| {
            Cli::try_parse_from(std::iter::once("pki").chain(args.iter().copied()))
                .unwrap_err()
                .to_string()
        };
        assert!(refused(&["--server=http://x:6443"]).contains("is not an https:// URL"));
        assert!(refused(&["--server=https://"]).contains("names no host"));
        assert!(refused(&["--server=https://:6443"]).contains("names no host"));
        assert!(refused(&["--server=https://x:70000"]).contains("is not a number up to 65535"));
        cli(&["--server=https://[::1]:6443/prefix"]);
        assert!(refused(&["--kubeconfigs=kubelet"]).contains("invalid value 'kubelet'"));
        assert!(refused(&["--print-kubeconfig=root"]).contains("invalid value 'root'"));
        assert!(
            refused(&["--print-kubeconfig=admin", "--kubeconfigs=admin"])
                .contains("cannot be used with")
        );
    }

    #[test]
    fn a_directory_that_cannot_be_written_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("file");
        std::fs::write(&file, "").unwrap();
        let data_dir = format!("--data-dir={}", file.display());
        let error = format!("{:#}", make(&cli(&[&data_dir])).unwrap_err());
        assert!(error.contains(&file.display().to_string()), "{error}");
    }
}
