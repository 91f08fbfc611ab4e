#!/usr/bin/env bash
# Fairness benchmark (release build): a steady tenant's latency and a controller's Lease
# renewals without and with a tenant flooding LISTs and creates from 50 connections, on an
# apiserver with API Priority and Fairness and on one with the in-flight limits alone.
# Target with priority and fairness: the steady tenant's p99 within 2x of its p99 without the
# flood, every renewal on time, the flood refused with 429s. Arguments go to the benchmark
# (`--quick` for a smoke run; `--fair-pin` to run the server on CPU 0 alone and the load on the
# others; `--fair-objects N`, `--fair-flood-connections N`,
# `--fair-steady-rate R`, `--fair-seconds S`; `--help` lists them).
set -euo pipefail
exec "$(dirname "${BASH_SOURCE[0]}")/apiserver.sh" --only fairness "$@"
