#!/usr/bin/env bash
# Aggregation benchmark (release build): GET and LIST of a custom resource and watch event
# latency directly from an extension apiserver and through an aggregator apiserver proxying its
# APIService, side by side; target: the proxy's CPU at most 1.5x the direct CPU per GET, watch
# events not buffered (latency through the aggregator the direct one within noise).
# Arguments go to the benchmark (`--quick` for a smoke run, `--rounds N`, `--objects N`,
# `--agg-events N`, `--agg-event-interval-ms MS`; `--help` lists them).
set -euo pipefail
exec "$(dirname "${BASH_SOURCE[0]}")/apiserver.sh" --only aggregation "$@"
