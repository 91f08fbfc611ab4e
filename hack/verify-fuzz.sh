#!/usr/bin/env bash
# The cargo-fuzz crate (fuzz/, its own workspace, run on nightly) must keep building: checks it
# on stable, with the versions the main workspace pins (its lock file is not kept in git).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cp Cargo.lock fuzz/Cargo.lock
exec cargo check --manifest-path fuzz/Cargo.toml --quiet
