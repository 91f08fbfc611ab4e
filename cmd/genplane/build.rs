//! Records the git commit the binary is built from, for `genplane version`, and lays out the
//! code of release builds by `symbol-order.txt`.
//!
//! `GENPLANE_GIT_COMMIT` overrides the commit (for builds outside a git checkout, e.g. from a
//! source tarball in a container build). Only this crate rebuilds when the commit changes.
//!
//! Two link options of release builds keep the memory a process needs to start small:
//! - `symbol-order.txt` (written by `hack/symbol-order.sh`) lists the functions the
//!   long-running roles run to start and serve; the linker puts them first, together, so that
//!   a start-up makes about a third as much code resident (the kernel maps code in 64 KiB
//!   windows around each page first run). The list's names are those of the compiler it was
//!   made with (see the script). `GENPLANE_SYMBOL_ORDER=off` turns it off.
//! - Relative relocations packed (`-z pack-relative-relocs`): the 2.1 MiB table the loader
//!   reads at every start shrinks to 28 KiB. The C library must know the packed form (glibc
//!   2.36 and later): it is used only when a probe program linked so runs here, and
//!   `GENPLANE_PACK_RELOCATIONS=off` turns it off for a binary meant for older systems.
//!
//! Each is used when the linker takes it (LLD, the default on x86-64 Linux since Rust 1.90,
//! does; a link of an empty program with cargo's flags for this build tells); other builds keep
//! the defaults, and a release build says so in a warning.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
        .filter(|s| !s.is_empty())
}

#[allow(clippy::disallowed_methods)] // build scripts talk to cargo through the environment
fn main() {
    println!("cargo:rerun-if-env-changed=GENPLANE_GIT_COMMIT");
    let commit = std::env::var("GENPLANE_GIT_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(|| git(&["rev-parse", "HEAD"]));
    // Rebuild when HEAD moves: HEAD itself (switching branches) and the ref it points to.
    if let Some(git_dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        let common = git(&["rev-parse", "--path-format=absolute", "--git-common-dir"])
            .unwrap_or_else(|| git_dir.clone());
        let mut watch = vec![
            Path::new(&git_dir).join("HEAD"),
            Path::new(&common).join("packed-refs"),
        ];
        if let Some(head_ref) = git(&["symbolic-ref", "-q", "HEAD"]) {
            watch.push(Path::new(&common).join(head_ref));
        }
        for path in watch.iter().filter(|p| p.exists()) {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
    println!(
        "cargo:rustc-env=GENPLANE_BUILD_GIT_COMMIT={}",
        commit.unwrap_or_default()
    );
    let release = std::env::var("PROFILE").is_ok_and(|p| p == "release");
    if release {
        for arg in symbol_order_args().iter().chain(&packed_relocation_args()) {
            println!("cargo:rustc-link-arg-bins={arg}");
        }
    }
}

/// The linker argument that packs relative relocations, or none (turned off, cross-compiled,
/// or a linker or C library without them).
#[allow(clippy::disallowed_methods)] // build scripts talk to cargo through the environment
fn packed_relocation_args() -> Vec<String> {
    if turned_off("GENPLANE_PACK_RELOCATIONS") {
        return Vec::new();
    }
    let args = vec!["-Wl,-z,pack-relative-relocs".to_owned()];
    // Only a program that runs here shows the C library takes them.
    let native = std::env::var("HOST").ok() == std::env::var("TARGET").ok();
    if native && links_with(&args, "packed", true) {
        args
    } else {
        println!(
            "cargo:warning=relative relocations are not packed (a cross build, or a linker or \
             C library without them): each start reads the full relocation table"
        );
        Vec::new()
    }
}

/// Whether the environment variable `name` turns an option off (`off`); a change of it
/// reruns this script.
#[allow(clippy::disallowed_methods)] // build scripts talk to cargo through the environment
fn turned_off(name: &str) -> bool {
    println!("cargo:rerun-if-env-changed={name}");
    std::env::var(name).is_ok_and(|v| v == "off")
}

/// The linker arguments that order the executable's functions by `symbol-order.txt`, or none
/// (turned off, or a linker that does not take them).
#[allow(clippy::disallowed_methods)] // build scripts talk to cargo through the environment
fn symbol_order_args() -> Vec<String> {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let order = manifest.join("symbol-order.txt");
    println!("cargo:rerun-if-changed={}", order.display());
    if turned_off("GENPLANE_SYMBOL_ORDER") || !order.is_file() {
        return Vec::new();
    }
    // `-Wl,` splits its argument at commas.
    let Some(path) = order.to_str().filter(|p| !p.contains(',')) else {
        println!(
            "cargo:warning=the code is not laid out by symbol-order.txt: its path holds a comma"
        );
        return Vec::new();
    };
    let args = vec![
        format!("-Wl,--symbol-ordering-file={path}"),
        // Symbols the file names that this build does not define (another compiler version,
        // or functions changed since the file was written) are skipped without a word.
        "-Wl,--no-warn-symbol-ordering".to_owned(),
    ];
    if links_with(&args, "ordered", false) {
        args
    } else {
        println!(
            "cargo:warning=the code is not laid out by symbol-order.txt (the linker does not \
             take --symbol-ordering-file; LLD does): processes start with more code resident"
        );
        Vec::new()
    }
}

/// Whether the compiler, as cargo runs it for this build (its target, flags and linker),
/// links an empty program (`OUT_DIR/probe-NAME`) with the linker arguments `args`, and, with
/// `run`, whether that program then runs.
#[allow(clippy::disallowed_methods)] // build scripts talk to cargo through the environment
fn links_with(args: &[String], name: &str, run: bool) -> bool {
    let var = |key: &str| std::env::var_os(key);
    let (Some(rustc), Some(out_dir), Some(target)) = (var("RUSTC"), var("OUT_DIR"), var("TARGET"))
    else {
        return false;
    };
    let out_dir = PathBuf::from(out_dir);
    let source = out_dir.join("probe.rs");
    let program = out_dir.join(format!("probe-{name}"));
    if std::fs::write(&source, "fn main() {}\n").is_err() {
        return false;
    }
    let mut cmd = Command::new(rustc);
    cmd.arg("--target").arg(target);
    let flags = std::env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    cmd.args(flags.split('\x1f').filter(|f| !f.is_empty()));
    if let Some(linker) = var("RUSTC_LINKER") {
        let mut arg = OsString::from("linker=");
        arg.push(linker);
        cmd.arg("-C").arg(arg);
    }
    for arg in args {
        cmd.arg("-C").arg(format!("link-arg={arg}"));
    }
    cmd.arg("-o")
        .arg(&program)
        .arg(&source)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let linked = cmd.status().is_ok_and(|s| s.success());
    let ran = || {
        Command::new(&program)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    linked && (!run || ran())
}
