#!/usr/bin/env bash
# Network registry benchmarks (release build), in process: the networkclaim controller's
# decision pass over 1,000, 10,000 and 100,000 records (time, resident memory added) and
# owner_of / overlaps latency as the prefix index grows. Arguments go to the benchmark:
# `--records 1000,10000`, `--lookups N`; `--help` lists them.
#
# `--api` first runs it against a real API server and controller-manager (release builds of
# `genplane`, started here on loopback in a temporary directory and stopped at the end): the
# claims (`--records-per-claim`, 64 by default, up to the largest `--records`) are created
# through the API, and the controller-manager's peak resident memory, its memory when every
# claim is decided and `--settle` seconds later, and its CPU meanwhile, are reported. E.g.
#   hack/bench/networkregistry.sh --api --records 100000
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
api=false
if [[ "${1:-}" == "--api" ]]; then
    api=true
    shift
fi
target_dir="${CARGO_TARGET_DIR:-$PWD/target}"
if ! $api; then
    cargo build --locked --release -p genplane-bench-networkregistry
    exec "$target_dir/release/genplane-bench-networkregistry" "$@"
fi
cargo build --locked --release -p genplane-bench-networkregistry -p genplane
genplane="$target_dir/release/genplane"
dir=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$dir"
}
trap cleanup EXIT
"$genplane" apiserver --bind-address=127.0.0.1 --secure-port=0 --data-dir="$dir/data" \
    --feature-gates=NetworkRegistry=true >"$dir/apiserver.log" 2>&1 &
pids+=($!)
for _ in $(seq 300); do
    grep -q "serving on" "$dir/apiserver.log" && break
    sleep 0.1
done
grep -q "serving on" "$dir/apiserver.log" || { cat "$dir/apiserver.log"; exit 1; }
"$genplane" controller-manager --kubeconfig="$dir/data/controller-manager.kubeconfig" \
    --secure-port=0 --feature-gates=NetworkRegistry=true --controllers=networkclaim \
    >"$dir/controller-manager.log" 2>&1 &
cm=$!
pids+=("$cm")
"$target_dir/release/genplane-bench-networkregistry" --kubeconfig "$dir/data/admin.kubeconfig" \
    --controller-manager-pid "$cm" "$@"
