#!/usr/bin/env bash
# CEL benchmark (release build): the cost of validating one object against compiled
# x-kubernetes-validations rules, per object (a small object with one rule and with none, and
# one root rule on a 500-item object). Micro-measurements belong here, not in tests.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
exec cargo run --locked --release -p genplane-cel --example validate_throughput
