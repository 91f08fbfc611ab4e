#!/usr/bin/env bash
# Writes cmd/genplane/symbol-order.txt: the functions genplane runs when its long-running roles
# start and serve, in the order the linker is to lay them out at the front of the executable's
# code (cmd/genplane/build.rs hands the file to the linker for release builds).
#
# Why: the kernel maps a program's code in 64 KiB windows around each page it first runs
# (fault-around), so the API server's start-up, which runs 6 MiB of functions scattered over
# 42 MiB of code, made 21-25 MiB of it resident. Laid out together: 9 MiB.
#
#   hack/symbol-order.sh [--genplane BIN] [--out FILE]
#   hack/symbol-order.sh --check BIN     # how many of the file's symbols BIN has
#
# It builds the release binary the README's way (unless --genplane), then runs under valgrind's
# callgrind, on loopback: `genplane apiserver` (start-up, then kubectl's common requests:
# discovery, OpenAPI, create, get, list, watch, server-side apply, patch, a CRD and one of its
# objects, delete), `genplane controller-manager` against it (start-up, leader election, a
# namespace deleted), `genplane feature-controller` against it (start-up) and `genplane
# all-in-one` (start-up). Functions every run used come first, then those fewer runs used.
#
# The names drift as the code changes (the hashes of mangled names follow the compiler's and
# the dependencies' versions and the functions' types; LLVM's `.llvm.N` suffixes of local
# functions follow their module's code): regenerate after changing code on the start-up or
# request path and after upgrading the compiler or dependencies. A stale file costs memory at
# start-up, never correctness; --check says how much of it a build still has.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. hack/lib/ensure.sh

genplane=""
out="$PWD/cmd/genplane/symbol-order.txt"
check=""
while [ $# -gt 0 ]; do
  case "$1" in
    --genplane) genplane=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --check) check=$2; shift 2 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done

if [ -n "$check" ]; then
  exec python3 hack/lib/symbol_order.py check "$check" "$out"
fi

ensure_apt_packages "${GENPLANE_APT_PACKAGES[@]}" valgrind curl
command -v kubectl >/dev/null || { echo "kubectl is needed (it makes the requests)" >&2; exit 1; }
if [ -z "$genplane" ]; then
  cargo build --locked --release --bin genplane
  genplane="${CARGO_TARGET_DIR:-$PWD/target}/release/genplane"
fi
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [ -n "${GENPLANE_KEEP_PROFILES:-}" ] || rm -rf "$work"
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
# Starts `genplane ROLE ARGS...` under callgrind; its profile goes to $work/ROLE.out.
profiled() {
  local role=$1
  shift
  valgrind --tool=callgrind --demangle=no --callgrind-out-file="$work/$role.out" \
    "$genplane" "$role" "$@" >"$work/$role.log" 2>&1 &
  pids+=($!)
}
# Waits until URL answers (anything but a connection failure), up to 10 minutes.
wait_for() {
  local url=$1 pid=$2 log=$3
  for _ in $(seq 1200); do
    curl -sk -o /dev/null "$url" && return 0
    kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; exit 1; }
    sleep 0.5
  done
  echo "$url did not answer" >&2
  exit 1
}
# Stops the profiled process PID (callgrind writes its profile on exit).
stop() {
  kill -TERM "$1"
  wait "$1" 2>/dev/null || true
}

port=$(free_port)
profiled apiserver --data-dir "$work/data" --secure-port "$port" --bind-address 127.0.0.1
apiserver=${pids[-1]}
wait_for "https://127.0.0.1:$port/readyz" "$apiserver" "$work/apiserver.log"
kubeconfig="$work/data/admin.kubeconfig"
for _ in $(seq 600); do
  curl -sk "https://127.0.0.1:$port/readyz" | grep -qx ok && [ -f "$kubeconfig" ] && break
  sleep 0.5
done
kubectl() { command kubectl --kubeconfig "$kubeconfig" --request-timeout=120s "$@"; }
kubectl api-resources >/dev/null
kubectl explain configmap.data >/dev/null
kubectl create namespace order >/dev/null
kubectl -n order create configmap one --from-literal=a=b >/dev/null
kubectl -n order create secret generic two --from-literal=c=d >/dev/null
kubectl -n order get configmap one -o yaml >/dev/null
kubectl -n order get configmaps,secrets >/dev/null
kubectl -n order label configmap one tier=x >/dev/null
kubectl -n order patch configmap one --type=merge -p '{"data":{"e":"f"}}' >/dev/null
kubectl apply --server-side -f - >/dev/null <<'YAML'
apiVersion: v1
kind: ConfigMap
metadata: {name: applied, namespace: order}
data: {g: h}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.order.example.com}
spec:
  group: order.example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            x-kubernetes-validations: [{rule: "self.size >= 0"}]
            properties: {size: {type: integer}}
YAML
kubectl wait --for=condition=Established crd/widgets.order.example.com --timeout=300s >/dev/null
for _ in $(seq 120); do
  kubectl -n order apply --server-side -f - >/dev/null 2>&1 <<'YAML' && break
apiVersion: order.example.com/v1
kind: Widget
metadata: {name: w}
spec: {size: 3}
YAML
  sleep 1
done
kubectl -n order get widgets -o json >/dev/null
kubectl -n order get configmaps --watch --request-timeout=5s >/dev/null 2>&1 || true
kubectl -n order delete secret two >/dev/null

cm_port=$(free_port)
profiled controller-manager --kubeconfig "$kubeconfig" --secure-port "$cm_port" \
  --bind-address 127.0.0.1
manager=${pids[-1]}
wait_for "https://127.0.0.1:$cm_port/healthz" "$manager" "$work/controller-manager.log"
fc_port=$(free_port)
profiled feature-controller --kubeconfig "$kubeconfig" --secure-port "$fc_port" \
  --bind-address 127.0.0.1
features=${pids[-1]}
wait_for "https://127.0.0.1:$fc_port/healthz" "$features" "$work/feature-controller.log"
# The namespace controller empties and removes the namespace.
kubectl delete namespace order --wait=true --timeout=600s >/dev/null
stop "$features"
stop "$manager"
stop "$apiserver"

aio_port=$(free_port)
profiled all-in-one --data-dir "$work/aio" --secure-port "$aio_port" --bind-address 127.0.0.1
aio=${pids[-1]}
wait_for "https://127.0.0.1:$aio_port/readyz" "$aio" "$work/all-in-one.log"
for _ in $(seq 600); do
  curl -sk "https://127.0.0.1:$aio_port/readyz" | grep -qx ok && break
  sleep 0.5
done
stop "$aio"

python3 hack/lib/symbol_order.py write "$genplane" "$out" \
  "$work/apiserver.out" "$work/controller-manager.out" "$work/feature-controller.out" \
  "$work/all-in-one.out"
