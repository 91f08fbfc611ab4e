# shellcheck shell=bash
# Helpers for the Compose cluster (manifests/compose/compose.yaml). Sourced, not run: by
# hack/compose-check.sh, and by whatever drives the cluster under faults later.
#
# compose_init PROJECT: sets COMPOSE (the command: `docker compose` or `docker-compose`, as an
# array) and COMPOSE_ARGS (the file and the project name) for the cluster of that project.

GENPLANE_COMPOSE_FILE="${GENPLANE_COMPOSE_FILE:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/manifests/compose/compose.yaml}"

# The services that keep running, each with a health check (for the scripts sourcing this).
# shellcheck disable=SC2034
GENPLANE_COMPOSE_SERVICES=(etcd-1 etcd-2 etcd-3 apiserver-1 apiserver-2
  controller-manager-1 controller-manager-2 feature-controller)

compose_init() {
  local project=$1
  if docker compose version >/dev/null 2>&1; then
    COMPOSE=(docker compose)
  elif command -v docker-compose >/dev/null; then
    COMPOSE=(docker-compose)
  else
    echo "neither \`docker compose\` nor docker-compose is installed" >&2
    return 1
  fi
  COMPOSE_ARGS=(-f "$GENPLANE_COMPOSE_FILE" -p "$project")
  COMPOSE_PROJECT=$project
}

# compose ARGS...: the Compose command for the cluster.
compose() { "${COMPOSE[@]}" "${COMPOSE_ARGS[@]}" "$@"; }

# compose_container SERVICE: the id of the service's container, running or not (none when it
# has none), from the labels both Compose implementations set.
compose_container() {
  docker ps -a -q --filter "label=com.docker.compose.project=$COMPOSE_PROJECT" \
    --filter "label=com.docker.compose.service=$1" \
    --filter "label=com.docker.compose.oneoff=False" | head -n 1
}

# compose_health SERVICE: the health of its container: healthy, starting, unhealthy, or its
# state when it has no health (exited, ...), or `missing`.
compose_health() {
  local id
  id="$(compose_container "$1")"
  [ -n "$id" ] || { echo missing; return; }
  docker inspect -f '{{if .State.Health}}{{if eq .State.Status "running"}}{{.State.Health.Status}}{{else}}{{.State.Status}}{{end}}{{else}}{{.State.Status}}{{end}}' "$id"
}

# compose_wait_healthy DEADLINE SERVICE...: waits until every service's container is healthy;
# fails (naming the ones that are not, with their last log lines) after DEADLINE seconds or at
# once when one has exited.
compose_wait_healthy() {
  local deadline=$(( SECONDS + $1 )); shift
  local service health pending
  while :; do
    pending=()
    for service in "$@"; do
      health="$(compose_health "$service")"
      case "$health" in
        healthy) ;;
        exited|dead)
          echo "$service has $health:" >&2
          compose logs --tail 40 "$service" >&2
          return 1 ;;
        *) pending+=("$service:$health") ;;
      esac
    done
    [ ${#pending[@]} -eq 0 ] && return 0
    if [ $SECONDS -ge $deadline ]; then
      echo "not healthy in time: ${pending[*]}" >&2
      for service in "${pending[@]}"; do
        compose logs --tail 20 "${service%%:*}" >&2
      done
      return 1
    fi
    sleep 1
  done
}

# compose_kubeconfig FILE: writes the admin's kubeconfig for the host (a context per API
# server: genplane, genplane-2) to FILE, readable by its owner only.
compose_kubeconfig() {
  local file=$1
  (umask 077 && compose run --rm -T kubeconfig >"$file")
}

# free_port: a TCP port free on 127.0.0.1 right now.
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
