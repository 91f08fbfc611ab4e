#!/usr/bin/env bash
# CRD-scale benchmark (release build; issue #43): generates a cloud provider's worth of
# Crossplane-shaped CRDs (2,000 by default), posts them at once and in batches to a SQLite
# all-in-one server, and reports the time until all are Established, memory per CRD (settled
# and peak), discovery and OpenAPI latency and size, custom resources of a sample of kinds, and
# memory after the CRDs are deleted, beside the issue's targets. Arguments go to the benchmark
# (`--quick` for a smoke run of 50 CRDs, `--crd-scale-count N`, `--crd-scale-batch N`,
# `--crd-scale-role apiserver`; `--help` lists them).
set -euo pipefail
exec "$(dirname "${BASH_SOURCE[0]}")/apiserver.sh" --only crd-scale "$@"
