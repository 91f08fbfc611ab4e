#!/usr/bin/env bash
# Every static check, each with the command that fixes it. Runs them all and fails if any failed.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. hack/lib/ensure.sh
ensure_apt_packages "${GENPLANE_APT_PACKAGES[@]}" || exit 1

failed=()
check() {
  local name=$1 fix=$2; shift 2
  echo "--- verify $name"
  if ! "$@"; then
    echo "FAILED: $name. Fix: $fix" >&2
    failed+=("$name")
  fi
}

check fmt "cargo fmt --all" cargo fmt --all -- --check
# Also what keeps the cargo-fuzz targets building: fuzz/ is a workspace member, checked here with
# the dependencies compiled for everything else.
check clippy "fix the warnings above" cargo clippy --workspace --all-targets --locked -- -D warnings
check docs "fix the rustdoc warnings above" env RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked --quiet
check crate-deps "follow the layering rules in DESIGN.md §1" hack/verify-crate-deps.sh
check file-cycles "move the item both files use to a lower module" hack/verify-file-cycles.sh

if [ ${#failed[@]} -gt 0 ]; then
  echo "verify failed: ${failed[*]}" >&2
  exit 1
fi
echo "verify passed"
