#!/usr/bin/env bash
# Server-side apply benchmark (release build): apply of a 50-field ConfigMap against a plain
# update of the same object, side by side on the SQLite backend. Arguments go to the benchmark
# (`--quick` for a smoke run; `--help` lists them).
set -euo pipefail
exec "$(dirname "${BASH_SOURCE[0]}")/apiserver.sh" --only apply "$@"
