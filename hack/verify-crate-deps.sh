#!/usr/bin/env bash
# Checks the crate layering rules of DESIGN.md §1 against `cargo metadata`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
python3 hack/lib/crate_deps.py --self-test
cargo metadata --format-version 1 --no-deps --locked | python3 hack/lib/crate_deps.py
