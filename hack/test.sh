#!/usr/bin/env bash
# The one test command. Installs what the tests need when it is missing, then runs every tier:
# doc tests, then unit, integration and end-to-end tests under cargo-nextest, whose summary is
# the last thing printed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. hack/lib/ensure.sh

ensure_apt_packages "${GENPLANE_APT_PACKAGES[@]}"
ensure_nextest
ensure_python_module kubernetes "$GENPLANE_PYTHON_KUBERNETES"

echo "--- doc tests"
cargo test --workspace --locked --doc

echo "--- unit, integration and end-to-end tests"
exec cargo nextest run --workspace --locked --profile ci "$@"
