#!/usr/bin/env bash
# Brings the Compose cluster (manifests/compose/compose.yaml) up from the images and checks it end
# to end, then tears it down: every service healthy; kubectl 1.33 with the printed kubeconfig
# creates and reads a namespace and a ConfigMap through one API server and reads them through the
# other; one controller-manager holds the leader Lease and only it leads (its
# leader_election_master_status gauge); with the first API server killed (`docker kill`), kubectl
# works against the second and the controllers act through it; with the leading
# controller-manager killed, the other takes the Lease; `up` again brings every service back
# healthy. Prints the time of each step.
#
# The cluster runs as a Compose project of its own (not the README's `genplane`), its API servers
# published on free ports of 127.0.0.1.
#
# Usage: hack/compose-check.sh [OPTIONS]
#   --genplane PATH  build the images from this genplane executable (hack/image.sh --genplane)
#   --no-build       use the images already loaded (genplane-*:TAG, genplane-etcd:latest)
#   --tag TAG        the genplane images' tag (default: latest)
#   --project NAME   the Compose project (default: genplane-check)
#   --keep           leave the cluster running at the end (prints how to use and remove it)
#   -h, --help       print this help
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'; }

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
genplane=
build=true
tag=latest
project="genplane-check"
keep=false
while [ $# -gt 0 ]; do
  case "$1" in
    --genplane) genplane="${2:?--genplane needs a path}"; shift 2 ;;
    --genplane=*) genplane="${1#--genplane=}"; shift ;;
    --no-build) build=false; shift ;;
    --tag) tag="${2:?--tag needs a tag}"; shift 2 ;;
    --tag=*) tag="${1#--tag=}"; shift ;;
    --project) project="${2:?--project needs a name}"; shift 2 ;;
    --project=*) project="${1#--project=}"; shift ;;
    --keep) keep=true; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "compose-check: unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done
if ! [[ "$project" =~ ^[a-z0-9][a-z0-9_-]*$ ]]; then
  echo "compose-check: --project $project: lower-case letters, digits, - and _ only" >&2
  exit 2
fi
if ! $build && [ -n "$genplane" ]; then
  echo "compose-check: --genplane and --no-build contradict each other" >&2
  exit 2
fi
absolute() { case "$1" in /*) printf '%s\n' "$1" ;; *) printf '%s\n' "$PWD/$1" ;; esac; }
[ -n "$genplane" ] && genplane="$(absolute "$genplane")"

cd "$repo"
. hack/lib/compose.sh

# kubectl 1.33 lives beside the real kubectl (which may be a link on PATH).
kubectl_real="$(command -v kubectl || true)"
[ -n "$kubectl_real" ] || { echo "compose-check: no kubectl on PATH" >&2; exit 1; }
kubectl_133="$(dirname "$(readlink -f "$kubectl_real")")/kubectl.1.33"
[ -x "$kubectl_133" ] || kubectl_133="$(command -v kubectl.1.33 || true)"
[ -x "$kubectl_133" ] || { echo "compose-check: kubectl.1.33 is neither beside $(readlink -f "$kubectl_real") nor on PATH" >&2; exit 1; }

started=$SECONDS
step_started=$SECONDS
timings=()
step() {
  if [ -n "${step_name:-}" ]; then
    timings+=("$(printf '%-80s %4ss' "$step_name" $((SECONDS - step_started)))")
  fi
  step_name=$1
  step_started=$SECONDS
  echo "--- $step_name"
}
fail() {
  echo "FAILED: $*" >&2
  exit 1
}

if $build; then
  step "building the images (hack/image.sh)"
  image_args=(--tag "$tag")
  [ -n "$genplane" ] && image_args+=(--genplane "$genplane")
  hack/image.sh "${image_args[@]}"
fi
for image in apiserver controller-manager feature-controller; do
  docker image inspect "genplane-$image:$tag" >/dev/null 2>&1 ||
    fail "no image genplane-$image:$tag (run hack/image.sh)"
done
docker image inspect genplane-etcd:latest >/dev/null 2>&1 || fail "no image genplane-etcd:latest (run hack/image.sh)"

compose_init "$project"
work="$(mktemp -d "${TMPDIR:-/tmp}/genplane-compose-check.XXXXXX")"
export GENPLANE_TAG="$tag" GENPLANE_ETCD_TAG=latest
GENPLANE_APISERVER_1_PORT="$(free_port)"
GENPLANE_APISERVER_2_PORT="$(free_port)"
while [ "$GENPLANE_APISERVER_2_PORT" = "$GENPLANE_APISERVER_1_PORT" ]; do
  GENPLANE_APISERVER_2_PORT="$(free_port)"
done
export GENPLANE_APISERVER_1_PORT GENPLANE_APISERVER_2_PORT

finish() {
  local status=$?
  if [ $status -ne 0 ]; then
    echo "--- the cluster when it failed" >&2
    compose ps >&2 || true
  fi
  if $keep; then
    echo "--- left running: project $project"
    echo "    export KUBECONFIG=$work/kubeconfig   (contexts genplane and genplane-2)"
    echo "    remove it: ${COMPOSE[*]} ${COMPOSE_ARGS[*]} down -v"
  else
    echo "--- tearing down"
    compose down -v --remove-orphans >/dev/null 2>&1 || compose down -v --remove-orphans
    rm -rf "$work"
  fi
  exit $status
}
trap finish EXIT

k() { "$kubectl_133" --kubeconfig "$work/kubeconfig" --cache-dir "$work/kubectl-cache" "$@"; }

# A project left over by an interrupted run starts from nothing.
compose down -v --remove-orphans >/dev/null 2>&1 || true

step "compose up (PKI, etcd x3, apiserver x2, controller-manager x2, feature-controller)"
compose up -d
step "waiting until every service is healthy"
compose_wait_healthy 300 "${GENPLANE_COMPOSE_SERVICES[@]}"

step "the admin kubeconfig (compose run kubeconfig)"
compose_kubeconfig "$work/kubeconfig"
grep -q "server: https://127.0.0.1:$GENPLANE_APISERVER_2_PORT" "$work/kubeconfig" ||
  fail "the kubeconfig does not name the second API server's port"

step "kubectl 1.33: namespace and ConfigMap through apiserver-1, read through apiserver-2"
k version
k get namespaces
k create namespace compose-check
k -n compose-check create configmap settings --from-literal=written-through=apiserver-1
value="$(k --context genplane-2 -n compose-check get configmap settings -o jsonpath='{.data.written-through}')"
[ "$value" = apiserver-1 ] || fail "apiserver-2 reads written-through=$value"
k --context genplane-2 get namespace compose-check
k --context genplane-2 -n compose-check get configmaps

# holder: the controller-manager holding the leader Lease (its hostname, the identity's prefix).
holder() {
  k --context "$1" -n kube-system get lease genplane-controller-manager \
    -o jsonpath='{.spec.holderIdentity}' 2>/dev/null | sed 's/_.*//'
}
# leading SERVICE: its leader_election_master_status gauge (1 leading, 0 standing by).
leading() {
  docker exec "$(compose_container "$1")" /usr/local/bin/genplane healthcheck \
    https://127.0.0.1:10257/metrics | sed -n 's/^leader_election_master_status{.*} \([01]\)$/\1/p'
}

# kill_service SERVICE: SIGKILL to its container, returning once it is gone.
kill_service() {
  local id
  id="$(compose_container "$1")"
  docker kill "$id" >/dev/null
  docker wait "$id" >/dev/null
}

step "leader election: one controller-manager holds the Lease and leads"
leader="$(holder genplane)"
case "$leader" in
  controller-manager-1) standby=controller-manager-2 ;;
  controller-manager-2) standby=controller-manager-1 ;;
  *) fail "the Lease kube-system/genplane-controller-manager is held by '$leader'" ;;
esac
[ "$(leading "$leader")" = 1 ] || fail "$leader holds the Lease but its gauge says it does not lead"
[ "$(leading "$standby")" = 0 ] || fail "$standby leads too"
echo "$leader holds the Lease and leads; $standby stands by"
# The controllers act: a new namespace gets its default ServiceAccount.
k create namespace lease-check
deadline=$((SECONDS + 60))
until k -n lease-check get serviceaccount default >/dev/null 2>&1; do
  [ $SECONDS -lt $deadline ] || fail "no default ServiceAccount in a new namespace after 60s"
  sleep 1
done

step "apiserver-1 killed: kubectl against apiserver-2, the controllers through it"
kill_service apiserver-1
if k get namespaces >/dev/null 2>&1; then
  fail "apiserver-1 still answers after docker kill"
fi
k --context genplane-2 get namespaces
k --context genplane-2 create namespace after-apiserver-1
deadline=$((SECONDS + 60))
until k --context genplane-2 -n after-apiserver-1 get serviceaccount default >/dev/null 2>&1; do
  [ $SECONDS -lt $deadline ] || fail "the controllers did not act through apiserver-2 in 60s"
  sleep 1
done
echo "the controllers made the ServiceAccount default in after-apiserver-1"

step "the leading controller-manager killed: the other takes the Lease"
kill_service "$leader"
killed_at=$SECONDS
deadline=$((SECONDS + 90))
until [ "$(holder genplane-2)" = "$standby" ]; do
  [ $SECONDS -lt $deadline ] || fail "$standby did not take the Lease within 90s"
  sleep 1
done
echo "$standby took the Lease $((SECONDS - killed_at))s after $leader was killed (lease duration 15s)"
deadline=$((SECONDS + 30))
until [ "$(leading "$standby")" = 1 ]; do
  [ $SECONDS -lt $deadline ] || fail "$standby holds the Lease but does not lead"
  sleep 1
done

step "compose up again: the killed services come back healthy"
compose up -d
compose_wait_healthy 300 "${GENPLANE_COMPOSE_SERVICES[@]}"
k get namespace after-apiserver-1
[ "$(leading "$leader")" = 0 ] || fail "$leader leads again beside $standby"
[ "$(holder genplane)" = "$standby" ] || fail "the Lease moved again"

step "done"
echo "--- timings"
printf '%s\n' "${timings[@]}"
printf '%-80s %4ss\n' "total" $((SECONDS - started))
echo "compose-check passed"
