#!/usr/bin/env bash
# API server benchmarks (release build) against the real `genplane apiserver`: start-up time,
# ConfigMap create throughput on SQLite and etcd against raw etcd, GET/LIST against a bare hyper
# server answering the same bytes, watch fan-out, and memory. Arguments go to the benchmark;
# --help lists them, --quick is a smoke run of a few seconds.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
. hack/lib/ensure.sh
ensure_apt_packages "${GENPLANE_APT_PACKAGES[@]}"
# Two builds: the binary under test is built exactly as `cargo build --release -p genplane`.
cargo build --locked --release -p genplane
cargo build --locked --release -p genplane-bench-apiserver
target_dir="${CARGO_TARGET_DIR:-$PWD/target}"
exec "$target_dir/release/genplane-bench-apiserver" --genplane "$target_dir/release/genplane" "$@"
