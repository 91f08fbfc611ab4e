#!/usr/bin/env bash
# Runs the control plane's roles as separate processes on this machine, each with its own log:
# `genplane apiserver` (embedded SQLite, or a local etcd with --etcd), then
# `genplane controller-manager` with the controller-manager's kubeconfig and leader election.
# Waits until each answers /readyz, prints where the logs are and the `export KUBECONFIG=...`
# line, and stops everything on Ctrl-C or SIGTERM. `hack/run.sh` is the one-process version.
#
# Usage: hack/local-up.sh [OPTIONS] [-- APISERVER-FLAGS...]
#   --dir DIR        the run directory: data, logs and pid files (default: ./.genplane-local in
#                    the repository; GENPLANE_LOCAL_DIR)
#   --etcd           store the data in a local etcd (Debian's etcd-server) on free loopback
#                    ports, its data under the run directory, instead of SQLite
#   --port N         the API server's port (default 6443; 0 picks a free one)
#   --release        build genplane with --release (the default is a debug build)
#   --genplane PATH  use this genplane executable and build nothing (GENPLANE_BIN)
#   --clean          delete the run directory's data first
#   -h, --help       print this help
# Flags after `--` go to `genplane apiserver`.
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'; }

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
run_dir="${GENPLANE_LOCAL_DIR:-}"
genplane="${GENPLANE_BIN:-}"
use_etcd=false
release=false
clean=false
port=6443
client_port=
peer_port=
cm_port=
apiserver_flags=()
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) run_dir="${2:?--dir needs a directory}"; shift 2 ;;
    --dir=*) run_dir="${1#--dir=}"; shift ;;
    --etcd) use_etcd=true; shift ;;
    --port) port="${2:?--port needs a number}"; shift 2 ;;
    --port=*) port="${1#--port=}"; shift ;;
    --release) release=true; shift ;;
    --genplane) genplane="${2:?--genplane needs a path}"; shift 2 ;;
    --genplane=*) genplane="${1#--genplane=}"; shift ;;
    --clean) clean=true; shift ;;
    -h|--help) usage; exit 0 ;;
    --) shift; apiserver_flags=("$@"); break ;;
    *) echo "local-up: unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done
case "$port" in ''|*[!0-9]*) echo "local-up: --port must be a number" >&2; exit 2 ;; esac

# Paths given by the caller are relative to where they called from; the default is in the repo.
absolute() { case "$1" in /*) printf '%s\n' "$1" ;; *) printf '%s\n' "$PWD/$1" ;; esac; }
run_dir="$(absolute "${run_dir:-$repo/.genplane-local}")"
[ -n "$genplane" ] && genplane="$(absolute "$genplane")"

cd "$repo"
. hack/lib/ensure.sh

# --- what runs, so that a signal at any point stops what has started.
roles=()     # in start order
declare -A pid_of=()
stopping=false

# stop_all: SIGTERM to each role in reverse start order (each stops gracefully), SIGKILL to
# whatever is still running 20 seconds later. Called again meanwhile (a second Ctrl-C), it
# kills every role at once.
stop_all() {
  local i role pid deadline
  if $stopping; then
    for role in "${roles[@]}"; do kill -KILL "${pid_of[$role]}" 2>/dev/null || true; done
    return 0
  fi
  stopping=true
  for ((i = ${#roles[@]} - 1; i >= 0; i--)); do
    role="${roles[$i]}"
    pid="${pid_of[$role]}"
    if ! kill -0 "$pid" 2>/dev/null; then
      rm -f "$run_dir/$role.pid"
      continue
    fi
    echo "--- stopping $role (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    deadline=$((SECONDS + 20))
    while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
      echo "--- $role did not stop within 20s: killing it" >&2
      kill -KILL "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
    rm -f "$run_dir/$role.pid"
  done
}
trap 'stop_all' EXIT
trap 'echo; stop_all; exit 0' INT TERM

# start ROLE COMMAND...: runs COMMAND in its own session (so that Ctrl-C reaches only this
# script, which then stops the roles in order), logging to <run dir>/ROLE.log.
start() {
  local role="$1"
  shift
  echo "--- starting $role: $*"
  setsid "$@" </dev/null >"$run_dir/$role.log" 2>&1 &
  pid_of[$role]=$!
  # A role started again (on another port) keeps its place.
  [[ " ${roles[*]} " == *" $role "* ]] || roles+=("$role")
  echo "${pid_of[$role]}" >"$run_dir/$role.pid"
}

# try_ready ROLE SECONDS COMMAND...: waits until COMMAND succeeds (status 0), or the role
# exits first (status 1); fails when the time is up, showing the end of its log.
try_ready() {
  local role="$1" limit="$2" deadline
  shift 2
  deadline=$((SECONDS + limit))
  until "$@" >/dev/null 2>&1; do
    if ! kill -0 "${pid_of[$role]}" 2>/dev/null; then
      return 1
    fi
    if [ $SECONDS -ge $deadline ]; then
      echo "local-up: $role was not ready within ${limit}s; the end of $run_dir/$role.log:" >&2
      tail -n 20 "$run_dir/$role.log" >&2
      exit 1
    fi
    sleep 0.2
  done
  echo "--- $role is ready"
}

# wait_ready ROLE SECONDS COMMAND...: waits until COMMAND succeeds; fails when the role exits
# first or the time is up, showing the end of its log.
wait_ready() {
  try_ready "$@" && return
  echo "local-up: $1 exited before it was ready; the end of $run_dir/$1.log:" >&2
  tail -n 20 "$run_dir/$1.log" >&2
  exit 1
}

# lost_port ROLE: whether ROLE exited because another process took its port first (free_port
# only tells that nobody listened a moment ago); then it is started again on another one.
lost_port() {
  grep -qi "address already in use" "$run_dir/$1.log"
}

# free_port VAR: sets VAR to a loopback port nothing listens on and not handed out before,
# below the ephemeral range (32768-) so that outgoing connections do not take it meanwhile.
taken_ports=" "
free_port() {
  local candidate
  while :; do
    candidate=$((20000 + RANDOM % 12000))
    case "$taken_ports" in *" $candidate "*) continue ;; esac
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$candidate") 2>/dev/null; then
      taken_ports+="$candidate "
      printf -v "$1" '%s' "$candidate"
      return
    fi
  done
}

# --- what is needed.
command -v curl >/dev/null || ensure_apt_packages curl
if $use_etcd; then
  command -v etcd >/dev/null || ensure_apt_packages etcd-server
fi
if [ -z "$genplane" ]; then
  # protoc and its standard .proto files for etcd-client's generated code.
  ensure_apt_packages protobuf-compiler libprotobuf-dev
  profile=debug
  build=(cargo build --locked --bin genplane)
  if $release; then
    profile=release
    build+=(--release)
  fi
  echo "--- building genplane ($profile)"
  "${build[@]}"
  genplane="$(absolute "${CARGO_TARGET_DIR:-target}")/$profile/genplane"
fi
[ -x "$genplane" ] || { echo "local-up: $genplane is not an executable" >&2; exit 1; }

if $clean; then
  rm -rf "$run_dir/data" "$run_dir/etcd"
fi
mkdir -p "$run_dir"
for role in etcd apiserver controller-manager; do
  if [ -f "$run_dir/$role.pid" ] && kill -0 "$(cat "$run_dir/$role.pid")" 2>/dev/null; then
    echo "local-up: $role from an earlier run is still running (pid $(cat "$run_dir/$role.pid")) in $run_dir" >&2
    trap - EXIT
    exit 1
  fi
  rm -f "$run_dir/$role.pid"
done

# --- etcd, when asked for.
storage=()
if $use_etcd; then
  for attempt in 1 2 3 4 5; do
    free_port client_port
    free_port peer_port
    start etcd etcd --name=local --data-dir="$run_dir/etcd" \
      --listen-client-urls="http://127.0.0.1:$client_port" \
      --advertise-client-urls="http://127.0.0.1:$client_port" \
      --listen-peer-urls="http://127.0.0.1:$peer_port" \
      --initial-advertise-peer-urls="http://127.0.0.1:$peer_port" \
      --initial-cluster="local=http://127.0.0.1:$peer_port"
    try_ready etcd 60 curl -fsS "http://127.0.0.1:$client_port/health" && break
    if [ $attempt -lt 5 ] && lost_port etcd; then
      rm -rf "$run_dir/etcd"
      continue
    fi
    wait_ready etcd 0 false
  done
  storage=(--storage-backend=etcd "--etcd-servers=http://127.0.0.1:$client_port")
fi

# --- the API server. Port 0: it binds a free port itself and prints its address.
data="$run_dir/data"
start apiserver "$genplane" apiserver --bind-address=127.0.0.1 "--secure-port=$port" \
  "--data-dir=$data" "${storage[@]}" "${apiserver_flags[@]}"
serving="^genplane apiserver serving on https://[^:]*:"
wait_ready apiserver 120 grep -q "$serving" "$run_dir/apiserver.log"
port="$(grep -m1 "$serving" "$run_dir/apiserver.log" | sed 's/.*://')"
# /readyz is open to anonymous users; the CA is the one the API server keeps in its data dir.
wait_ready apiserver 120 curl -fsS --cacert "$data/pki/ca.crt" "https://127.0.0.1:$port/readyz"

# --- the controller-manager, as its own least-privileged user.
for attempt in 1 2 3 4 5; do
  free_port cm_port
  start controller-manager "$genplane" controller-manager \
    "--kubeconfig=$data/controller-manager.kubeconfig" --leader-elect=true \
    --bind-address=127.0.0.1 "--secure-port=$cm_port"
  # The ops endpoints have a self-signed certificate: nothing to verify them against.
  try_ready controller-manager 120 curl -fsSk "https://127.0.0.1:$cm_port/readyz" && break
  [ $attempt -lt 5 ] && lost_port controller-manager && continue
  wait_ready controller-manager 0 false
done

echo
echo "genplane is running (Ctrl-C or SIGTERM to stop):"
printf '  %-19s %-27s log: %s\n' apiserver "https://127.0.0.1:$port" "$run_dir/apiserver.log"
printf '  %-19s %-27s log: %s\n' controller-manager "https://127.0.0.1:$cm_port" \
  "$run_dir/controller-manager.log"
if $use_etcd; then
  printf '  %-19s %-27s log: %s\n' etcd "http://127.0.0.1:$client_port" "$run_dir/etcd.log"
fi
echo
echo "export KUBECONFIG=$data/admin.kubeconfig"

# --- until a signal or a role's exit.
while :; do
  pids=()
  for role in "${roles[@]}"; do pids+=("${pid_of[$role]}"); done
  wait -n "${pids[@]}" || true
  for role in "${roles[@]}"; do
    if ! kill -0 "${pid_of[$role]}" 2>/dev/null; then
      echo "local-up: $role exited; the end of $run_dir/$role.log:" >&2
      tail -n 20 "$run_dir/$role.log" >&2
      exit 1
    fi
  done
done
