//! Records the git commit the binary is built from, for `genplane version`.
//!
//! `GENPLANE_GIT_COMMIT` overrides it (for builds outside a git checkout, e.g. from a source
//! tarball in a container build). Only this crate rebuilds when the commit changes.

use std::path::Path;
use std::process::Command;

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
}
