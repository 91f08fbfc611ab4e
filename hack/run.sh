#!/usr/bin/env bash
# The main job: builds genplane (release) and runs `genplane all-in-one` (the API server and the
# controllers in one process) on embedded storage in ./.genplane, printing the
# `export KUBECONFIG=...` line to use with kubectl. Arguments, when given, go to genplane
# instead, e.g. `hack/run.sh version`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. hack/lib/ensure.sh

ensure_apt_packages "${GENPLANE_BUILD_APT_PACKAGES[@]}"
cargo build --locked --release --bin genplane
if [ $# -eq 0 ]; then
  set -- all-in-one --bind-address=127.0.0.1 --data-dir=.genplane
fi
exec "${CARGO_TARGET_DIR:-target}/release/genplane" "$@"
