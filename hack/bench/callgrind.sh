#!/usr/bin/env bash
# Instruction counts of ConfigMap creates (release build, SQLite): runs `genplane apiserver` under
# valgrind's callgrind, makes 20 warm-up creates, then counts N creates (512 B of data each, over
# one HTTP/2 connection) and prints the instructions per create and the most expensive
# functions (inclusive). Counts repeat to a few tenths of a percent, unlike timings on a busy
# machine: compare two builds with --genplane.
#
#   hack/bench/callgrind.sh [--creates N] [--policy] [--genplane BIN] [--out DIR]
#                           [--reads N] [--flag FLAG]...
#
# --reads N counts, after the creates, N consistent LISTs of the namespace (JSON, as kubectl
# and client-go ask for them) and N GETs of one of its ConfigMaps, each kind on its own.
#
# --flag passes FLAG to the apiserver (e.g. --flag=--enable-priority-and-fairness=false to
# count what priority and fairness costs per request).
#
# --policy adds the admission benchmark's ValidatingAdmissionPolicy (a ConfigMap param, a
# variable, two validations) matching every create. The callgrind file stays in DIR (default:
# a new temporary directory) for callgrind_annotate.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
. hack/lib/ensure.sh
ensure_apt_packages "${GENPLANE_APT_PACKAGES[@]}" valgrind curl

creates=200
reads=0
policy=false
genplane=""
out=""
flags=()
while [ $# -gt 0 ]; do
  case "$1" in
    --creates) creates=$2; shift 2 ;;
    --reads) reads=$2; shift 2 ;;
    --policy) policy=true; shift ;;
    --genplane) genplane=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --flag) flags+=("$2"); shift 2 ;;
    --flag=*) flags+=("${1#--flag=}"); shift ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
if [ -z "$genplane" ]; then
  cargo build --locked --release -p genplane
  genplane="${CARGO_TARGET_DIR:-$PWD/target}/release/genplane"
fi
out=${out:-$(mktemp -d)}
mkdir -p "$out"
data="$out/data"
rm -rf "$data"

# A free loopback port (the server is started on it at once).
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
valgrind --tool=callgrind --callgrind-out-file="$out/callgrind.out" \
  "$genplane" apiserver --data-dir "$data" --secure-port "$port" --bind-address 127.0.0.1 \
  ${flags[@]+"${flags[@]}"} >"$out/apiserver.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
kubeconfig="$data/admin.kubeconfig"
for _ in $(seq 1200); do
  if [ -f "$kubeconfig" ] && curl -sk "https://127.0.0.1:$port/readyz" >/dev/null 2>&1; then
    break
  fi
  kill -0 $server 2>/dev/null || { cat "$out/apiserver.log" >&2; exit 1; }
  sleep 0.5
done
kubectl() { command kubectl --kubeconfig "$kubeconfig" "$@"; }
kubectl create namespace bench >/dev/null
if $policy; then
  kubectl apply -f - >/dev/null <<'YAML'
apiVersion: v1
kind: ConfigMap
metadata: {name: limits, namespace: bench}
data: {maxKeys: "4", maxBytes: "65536"}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: bench}
spec:
  failurePolicy: Fail
  paramKind: {apiVersion: v1, kind: ConfigMap}
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [configmaps]}]
  variables: [{name: data, expression: "has(object.data) ? object.data : {}"}]
  validations:
  - expression: "size(variables.data) <= int(params.data.maxKeys)"
    messageExpression: "'at most ' + params.data.maxKeys + ' keys'"
  - expression: "variables.data.all(k, size(variables.data[k]) <= int(params.data.maxBytes))"
    message: a value is too large
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: bench}
spec:
  policyName: bench
  validationActions: [Deny]
  paramRef: {name: limits, namespace: bench, parameterNotFoundAction: Deny}
  matchResources: {namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: bench}}}
YAML
fi
# The admin's client certificate, for curl.
field() { kubectl config view --raw -o "jsonpath={$1}" | base64 -d >"$2"; }
field '.users[0].user.client-certificate-data' "$out/client.crt"
field '.users[0].user.client-key-data' "$out/client.key"
field '.clusters[0].cluster.certificate-authority-data' "$out/ca.crt"
printf '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"generateName":"cm-"},"data":{"v":"%s"}}' \
  "$(head -c 512 /dev/zero | tr '\0' x)" >"$out/body.json"
post() {
  local urls=()
  for _ in $(seq "$1"); do urls+=("https://127.0.0.1:$port/api/v1/namespaces/bench/configmaps"); done
  curl -sf --http2 --cert "$out/client.crt" --key "$out/client.key" --cacert "$out/ca.crt" \
    -H 'Content-Type: application/json' --data-binary @"$out/body.json" "${urls[@]}" >/dev/null
}
# With the policy: wait until it refuses what it should (the server reads policies from a
# mirror, a moment after the writes). Then warm up, and count.
if $policy; then
  refused=false
  for _ in $(seq 600); do
    if ! kubectl create configmap too-many -n bench --dry-run=server \
      --from-literal=a=1 --from-literal=b=2 --from-literal=c=3 --from-literal=d=4 \
      --from-literal=e=5 >/dev/null 2>&1; then
      refused=true
      break
    fi
    sleep 0.1
  done
  $refused || { echo "the policy never refused a 5-key ConfigMap" >&2; exit 1; }
fi
get() {
  local urls=()
  for _ in $(seq "$1"); do urls+=("https://127.0.0.1:$port$2"); done
  curl -sf --http2 --cert "$out/client.crt" --key "$out/client.key" --cacert "$out/ca.crt" \
    "${urls[@]}" >/dev/null
}
# Counts what `$2...` does between a zeroing and a dump of the counters, as `$1` (its name).
count() {
  local name=$1
  shift
  callgrind_control -z $server >/dev/null 2>&1
  "$@"
  callgrind_control -d "$name" $server >/dev/null 2>&1
}
post 20
count creates post "$creates"
if [ "$reads" -gt 0 ]; then
  item=$(kubectl get configmaps -n bench -o 'jsonpath={.items[0].metadata.name}')
  get 20 "/api/v1/namespaces/bench/configmaps"
  count lists get "$reads" "/api/v1/namespaces/bench/configmaps"
  count gets get "$reads" "/api/v1/namespaces/bench/configmaps/$item"
fi
kill $server
wait $server 2>/dev/null || true
trap - EXIT
# One file per dump, numbered in order: creates, then lists and gets.
report() {
  local profile=$1 what=$2 n=$3
  local total
  total=$(callgrind_annotate "$profile" | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
  echo "instructions per $what: $((total / n)) ($n ${what}s, policy: $policy)"
  echo "profile: $profile"
  callgrind_annotate --inclusive=yes "$profile" 2>/dev/null |
    grep -E '/(pkg|cmd)/' | grep -v 'future.rs' | sed -n '1,25p'
}
mapfile -t profiles < <(ls -v "$out"/callgrind.out.*)
report "${profiles[0]}" create "$creates"
if [ "$reads" -gt 0 ]; then
  echo
  report "${profiles[1]}" "LIST (the namespace's $((20 + creates)) ConfigMaps)" "$reads"
  echo
  report "${profiles[2]}" GET "$reads"
fi
