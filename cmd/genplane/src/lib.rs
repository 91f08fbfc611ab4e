//! The genplane multi-call binary: one executable, one applet per role.
//!
//! `genplane <applet> [flags]` runs an applet; so does a link to the executable named
//! `genplane-<applet>` (or `genplane-<alias>`), as hyperkube and coreutils do. `genplane --list`
//! lists the applets and the hidden `genplane --make-symlinks DIR` creates those links.
//!
//! This crate holds only the applet table and the mapping of errors to exit codes
//! ([`EXIT_OK`], [`EXIT_FAILURE`], [`EXIT_USAGE`], [`EXIT_CONFIG`]); each role lives in its own
//! crate.

#![warn(missing_docs)]

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::io::Write;
use std::path::Path;

use anyhow::Context as _;
use clap::{Arg, ArgAction, ArgMatches, Command};
use genplane_component_base::process::Process;
use genplane_component_base::{component, config};

mod applets;

pub use applets::APPLETS;

/// Success.
pub const EXIT_OK: u8 = 0;
/// A failure while running.
pub const EXIT_FAILURE: u8 = 1;
/// Bad command-line usage (clap's code for usage errors).
pub const EXIT_USAGE: u8 = 2;
/// An invalid configuration (`EX_USAGE` of sysexits.h, as linkerd uses it).
pub const EXIT_CONFIG: u8 = 64;

/// The prefix of applet links: `genplane-apiserver` runs the `apiserver` applet.
pub const LINK_PREFIX: &str = "genplane-";

/// One entry of the applet table.
#[derive(Debug)]
pub struct Applet {
    /// The subcommand name, e.g. `apiserver`.
    pub name: &'static str,
    /// Other names that run the same applet; only ever added, never removed.
    pub aliases: &'static [&'static str],
    /// Builds the applet's command line (flags and help).
    pub command: fn() -> Command,
    /// Runs the applet with its parsed arguments.
    pub run: fn(&ArgMatches, &Process) -> anyhow::Result<()>,
}

/// Names the root command uses itself; no applet may take them.
const RESERVED: &[&str] = &["help", "genplane"];

/// Checks an applet table: every name and alias unique, non-empty, lower-case kebab-case, and
/// not reserved. Returns every problem found.
pub fn check_table(applets: &[Applet]) -> Result<(), Vec<String>> {
    let mut seen = BTreeSet::new();
    let mut problems = Vec::new();
    for applet in applets {
        for name in std::iter::once(&applet.name).chain(applet.aliases) {
            let well_formed = !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
            if !well_formed {
                problems.push(format!("applet name {name:?} is not lower-case kebab-case"));
            }
            if RESERVED.contains(name) {
                problems.push(format!("applet name {name:?} is reserved"));
            }
            if !seen.insert(*name) {
                problems.push(format!("applet name {name:?} is used twice"));
            }
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems)
    }
}

/// Finds the applet that a program name (`argv[0]`) asks for: `genplane-<name or alias>`.
pub fn applet_for_program(program: &Path) -> Option<&'static Applet> {
    let base = program.file_name()?.to_str()?;
    let wanted = base.strip_prefix(LINK_PREFIX)?;
    find(wanted)
}

fn find(name: &str) -> Option<&'static Applet> {
    APPLETS
        .iter()
        .find(|a| a.name == name || a.aliases.contains(&name))
}

fn root_command() -> Command {
    let mut root = Command::new("genplane")
        .about("A Kubernetes-compatible generic control plane: one executable, one applet per role")
        .version(env!("CARGO_PKG_VERSION"))
        .disable_version_flag(true)
        .subcommand_value_name("APPLET")
        .args_conflicts_with_subcommands(true)
        .arg(
            Arg::new("list")
                .long("list")
                .action(ArgAction::SetTrue)
                .exclusive(true)
                .help("List the applets, one per line"),
        )
        .arg(
            Arg::new("make-symlinks")
                .long("make-symlinks")
                .value_name("DIR")
                .value_parser(clap::value_parser!(std::path::PathBuf))
                .exclusive(true)
                .hide(true)
                .help("Create a genplane-<applet> link to this executable in DIR for every applet"),
        );
    for applet in APPLETS {
        root = root.subcommand(
            (applet.command)()
                .name(applet.name)
                .visible_aliases(applet.aliases),
        );
    }
    root
}

/// Runs the binary with the given process context and returns its exit code.
pub fn run(process: &Process) -> u8 {
    let program = process
        .args
        .first()
        .cloned()
        .unwrap_or_else(|| OsString::from("genplane"));
    if let Some(applet) = applet_for_program(Path::new(&program)) {
        let name = Path::new(&program)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned());
        let command = (applet.command)().name(name.unwrap_or_else(|| applet.name.to_owned()));
        return match command.try_get_matches_from(&process.args) {
            Ok(matches) => finish(applet.run, &matches, process),
            Err(error) => clap_exit(&error),
        };
    }
    let matches = match root_command().try_get_matches_from(&process.args) {
        Ok(matches) => matches,
        Err(error) => return clap_exit(&error),
    };
    if matches.get_flag("list") {
        let mut out = std::io::stdout().lock();
        for applet in APPLETS {
            if writeln!(out, "{}", applet.name).is_err() {
                return EXIT_FAILURE;
            }
        }
        return EXIT_OK;
    }
    if let Some(dir) = matches.get_one::<std::path::PathBuf>("make-symlinks") {
        return finish(|_, process| make_symlinks(dir, process), &matches, process);
    }
    match matches.subcommand() {
        Some((name, sub)) => match find(name) {
            Some(applet) => finish(applet.run, sub, process),
            None => EXIT_USAGE,
        },
        None => {
            let _ = root_command().print_help();
            EXIT_USAGE
        }
    }
}

fn clap_exit(error: &clap::Error) -> u8 {
    let _ = error.print();
    u8::try_from(error.exit_code()).unwrap_or(EXIT_USAGE)
}

fn finish(
    run: impl FnOnce(&ArgMatches, &Process) -> anyhow::Result<()>,
    matches: &ArgMatches,
    process: &Process,
) -> u8 {
    match run(matches, process) {
        Ok(()) => EXIT_OK,
        Err(error) => {
            let invalid_config = is_invalid_config(&error);
            eprintln!("Error: {error:#}");
            if invalid_config {
                EXIT_CONFIG
            } else {
                EXIT_FAILURE
            }
        }
    }
}

/// Whether `error` is, or was caused by, an invalid configuration. A role's entry point hands
/// its error over boxed ([`component::Failure`]), whose own type only the box knows.
fn is_invalid_config(error: &anyhow::Error) -> bool {
    error.chain().any(|e| e.is::<config::Error>())
        || error
            .downcast_ref::<component::Failure>()
            .is_some_and(|failure| failure.is::<config::Error>())
}

fn make_symlinks(dir: &Path, process: &Process) -> anyhow::Result<()> {
    let target = process
        .current_exe
        .as_deref()
        .context("the path of this executable is unknown")?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for applet in APPLETS {
        let link = dir.join(format!("{LINK_PREFIX}{}", applet.name));
        match std::fs::symlink_metadata(&link) {
            Ok(meta) if meta.file_type().is_symlink() => std::fs::remove_file(&link)
                .with_context(|| format!("replacing {}", link.display()))?,
            Ok(_) => anyhow::bail!("{} exists and is not a symbolic link", link.display()),
            Err(_) => {}
        }
        std::os::unix::fs::symlink(target, &link)
            .with_context(|| format!("linking {} to {}", link.display(), target.display()))?;
        println!("{}", link.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake(name: &'static str, aliases: &'static [&'static str]) -> Applet {
        Applet {
            name,
            aliases,
            command: || Command::new("x"),
            run: |_, _| Ok(()),
        }
    }

    #[test]
    fn invalid_configurations_are_told_from_other_failures_boxed_or_not() {
        let invalid = || config::Error::Parse {
            path: "genplane.toml".into(),
            message: "not a table".to_owned(),
        };
        assert!(is_invalid_config(&anyhow::Error::from(invalid())));
        assert!(is_invalid_config(
            &anyhow::Error::from(invalid()).context("starting")
        ));
        let boxed: component::Failure = Box::new(invalid());
        assert!(is_invalid_config(&anyhow::Error::from_boxed(boxed)));
        let other: component::Failure = Box::new(std::io::Error::other("disk full"));
        assert!(!is_invalid_config(&anyhow::Error::from_boxed(other)));
        assert!(!is_invalid_config(&anyhow::anyhow!("failed")));
    }

    #[test]
    fn the_applet_table_is_consistent() {
        assert_eq!(check_table(APPLETS), Ok(()));
        root_command().debug_assert();
    }

    #[test]
    fn duplicate_or_malformed_names_are_refused() {
        let table = [
            fake("apiserver", &["api"]),
            fake("api", &[]),
            fake("Bad_Name", &["help"]),
            fake("version", &["apiserver"]),
        ];
        let problems = check_table(&table).unwrap_err();
        assert_eq!(
            problems,
            vec![
                "applet name \"api\" is used twice",
                "applet name \"Bad_Name\" is not lower-case kebab-case",
                "applet name \"help\" is reserved",
                "applet name \"apiserver\" is used twice",
            ]
        );
    }

    #[test]
    fn program_names_select_applets() {
        assert_eq!(
            applet_for_program(Path::new("/usr/bin/genplane-version")).map(|a| a.name),
            Some("version")
        );
        assert!(applet_for_program(Path::new("/usr/bin/genplane")).is_none());
        assert!(applet_for_program(Path::new("genplane-nope")).is_none());
        assert!(
            applet_for_program(Path::new("version")).is_none(),
            "only genplane-<name> dispatches"
        );
    }
}
