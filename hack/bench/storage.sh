#!/usr/bin/env bash
# Storage benchmarks (release build): create throughput of raw etcd, the etcd backend and the
# SQLite backend side by side, and watch delivery latency to 10,000 watchers through the cache.
# Arguments go to the benchmark; --help lists them.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
. hack/lib/ensure.sh
ensure_apt_packages "${GENPLANE_APT_PACKAGES[@]}"
exec cargo run --locked --release -p genplane-bench-storage -- "$@"
