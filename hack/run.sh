#!/usr/bin/env bash
# The main job: builds genplane (release) and runs it. Until the apiserver lands this prints
# the version; arguments are passed to genplane instead when given.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. hack/lib/ensure.sh

ensure_apt_packages "${GENPLANE_APT_PACKAGES[@]}"
cargo build --locked --release --bin genplane
if [ $# -eq 0 ]; then
  set -- version
fi
exec target/release/genplane "$@"
