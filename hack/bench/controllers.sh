#!/usr/bin/env bash
# Controller benchmarks (release build) against the real `genplane apiserver` (SQLite) and
# `genplane controller-manager` as separate processes: deleting a namespace of 10,000
# ConfigMaps and Secrets, the garbage collector removing 10,000 dependents of one owner, and
# the idle memory of the controller-manager and of `genplane all-in-one`. Arguments go to the
# benchmark: `--objects N`, `--quick` for a smoke run with 500; `--help` lists them.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
. hack/lib/ensure.sh
ensure_apt_packages "${GENPLANE_APT_PACKAGES[@]}"
# Two builds: the binary under test is built exactly as `cargo build --release -p genplane`.
cargo build --locked --release -p genplane
cargo build --locked --release -p genplane-bench-controllers
target_dir="${CARGO_TARGET_DIR:-$PWD/target}"
exec "$target_dir/release/genplane-bench-controllers" --genplane "$target_dir/release/genplane" "$@"
