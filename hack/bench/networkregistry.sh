#!/usr/bin/env bash
# Network registry benchmarks (release build), in process: the networkclaim controller's
# decision pass over 1,000, 10,000 and 100,000 records (time, resident memory added) and
# owner_of / overlaps latency as the prefix index grows. Arguments go to the benchmark:
# `--records 1000,10000`, `--lookups N`; `--help` lists them.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
cargo build --locked --release -p genplane-bench-networkregistry
target_dir="${CARGO_TARGET_DIR:-$PWD/target}"
exec "$target_dir/release/genplane-bench-networkregistry" "$@"
