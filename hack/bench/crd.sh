#!/usr/bin/env bash
# Custom-resource benchmark (release build): creates of custom resources of a namespaced CRD
# with a structural schema, and of the same CRD with one CEL rule, against ConfigMap creates,
# side by side on one SQLite apiserver; target: CR creates >= 80% of ConfigMap creates.
# Arguments go to the benchmark (`--quick` for a smoke run, `--rounds N`, `--value-size B`;
# `--help` lists them).
set -euo pipefail
exec "$(dirname "${BASH_SOURCE[0]}")/apiserver.sh" --only crd "$@"
