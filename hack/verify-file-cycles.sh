#!/usr/bin/env bash
# Checks that no two files of a crate use each other's items, directly or through other files
# (hack/lib/file_cycles.py: `use crate::…`, `super::…` and inline paths, per file).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
python3 hack/lib/file_cycles.py --self-test
python3 hack/lib/file_cycles.py .
