//! Records the git commit the binary is built from, for `genplane version`, and lays out the
//! code of release builds by `symbol-order.txt`.
//!
//! `GENPLANE_GIT_COMMIT` overrides the commit (for builds outside a git checkout, e.g. from a
//! source tarball in a container build). Only this crate rebuilds when the commit changes.
//!
//! Two link options of release builds keep the memory a process needs to start small:
//! - `symbol-order.txt` (written by `hack/symbol-order.sh`) lists the functions the
//!   long-running roles run to start and serve; the linker puts them first, together, so that
//!   a start-up makes half as much code resident (the kernel maps code in 64 KiB windows around
//!   each page first run). `GENPLANE_SYMBOL_ORDER=off` turns it off.
//! - Relative relocations packed (`-z pack-relative-relocs`): the 2 MiB table the loader reads
//!   at every start shrinks to a few KiB. The C library must know the packed form (glibc 2.36
//!   and later), so it is used only when a probe program linked so runs here.
//!
//! Each is used when the linker takes it (LLD, the default on x86-64 Linux, does; a link of an
//! empty program with cargo's flags for this build tells); other builds keep the defaults.

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
        let packed = ["-Wl,-z,pack-relative-relocs".to_owned()];
        let native = std::env::var("HOST").ok() == std::env::var("TARGET").ok();
        let packed = if native && links_with(&packed, "packed", true) {
            &packed[..]
        } else {
            &[]
        };
        for arg in symbol_order_args().iter().chain(packed) {
            println!("cargo:rustc-link-arg-bins={arg}");
        }
    }
}

/// The linker arguments that order the executable's functions by `symbol-order.txt`, or none
/// (turned off, or a linker that does not take them).
#[allow(clippy::disallowed_methods)] // build scripts talk to cargo through the environment
fn symbol_order_args() -> Vec<String> {
    println!("cargo:rerun-if-env-changed=GENPLANE_SYMBOL_ORDER");
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let order = manifest.join("symbol-order.txt");
    println!("cargo:rerun-if-changed={}", order.display());
    let off = std::env::var("GENPLANE_SYMBOL_ORDER").is_ok_and(|v| v == "off");
    // `-Wl,` splits its argument at commas.
    let Some(path) = order.to_str().filter(|p| !p.contains(',')) else {
        return Vec::new();
    };
    if off || !order.is_file() {
        return Vec::new();
    }
    let args = vec![
        format!("-Wl,--symbol-ordering-file={path}"),
        // Symbols the file names that this build does not define (another compiler version,
        // or functions changed since the file was written) are skipped without a word.
        "-Wl,--no-warn-symbol-ordering".to_owned(),
    ];
    if links_with(&args, "ordered", false) {
        args
    } else {
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
