#!/usr/bin/env bash
# Builds a systemd host as a Docker image, with no registry: a Debian root made here with
# mmdebstrap from the Debian mirror this machine's apt uses (its suite is this machine's, so
# that an executable built here runs there), imported with `docker import`. Its PID 1 is
# systemd; it holds systemd, D-Bus (for `systemd-analyze security` and `systemd-run`) and
# Debian's etcd-server (its etcd.service disabled: genplane-apiserver-etcd.service pulls it in).
# The units under manifests/systemd are started in it by the test `systemd::` of the genplane
# test binary; see manifests/systemd/README.md to try them by hand.
#
# The image is tagged with a digest of what it is made from (this script, the suite, the apt
# sources), so a second run finds it and builds nothing. Prints the image's name (NAME:TAG) as
# the last line of its standard output; progress goes to standard error.
#
# Run a container of it (cgroup v1 or v2; CAP_SYS_ADMIN and no seccomp profile of Docker's, so
# that systemd can mount, make namespaces and apply the units' own filters):
#   docker run -d --cap-add SYS_ADMIN --security-opt seccomp=unconfined \
#     --security-opt apparmor=unconfined --cgroupns private --tmpfs /run --tmpfs /run/lock \
#     --tmpfs /tmp --stop-signal SIGRTMIN+3 IMAGE
#
# Usage: hack/systemd-host.sh [OPTIONS]
#   --rebuild    build the image again even when one with the same tag is loaded
#   -h, --help   print this help
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'; }

rebuild=false
while [ $# -gt 0 ]; do
  case "$1" in
    --rebuild) rebuild=true; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "systemd-host: unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
. hack/lib/ensure.sh
command -v docker >/dev/null || { echo "systemd-host: docker is not installed" >&2; exit 1; }
docker info >/dev/null 2>&1 ||
  { echo "systemd-host: the Docker engine does not answer (docker info)" >&2; exit 1; }

# The packages besides the essential ones.
packages=systemd-sysv,dbus,etcd-server
# The suite of this machine, and the Debian sources its apt reads (deb822 or one-line), so that
# the root comes from the same mirror and its libraries match the executables built here.
suite="$(. /etc/os-release && printf '%s' "${VERSION_CODENAME:-}")"
[ -n "$suite" ] || { echo "systemd-host: /etc/os-release names no VERSION_CODENAME" >&2; exit 1; }
sources=
if [ -f /etc/apt/sources.list.d/debian.sources ]; then
  sources=/etc/apt/sources.list.d/debian.sources
elif grep -qs '^deb ' /etc/apt/sources.list; then
  sources="$(mktemp "${TMPDIR:-/tmp}/genplane-sources.XXXXXX")"
  trap 'rm -f "$sources"' EXIT
  grep '^deb ' /etc/apt/sources.list >"$sources"
fi

name=genplane-systemd-host
digest="$({ cat "${BASH_SOURCE[0]}"; echo "$suite"; [ -z "$sources" ] || cat "$sources"; } |
  sha256sum | cut -c1-16)"
image="$name:$digest"
if ! $rebuild && docker image inspect "$image" >/dev/null 2>&1; then
  echo "--- $image is loaded already" >&2
  echo "$image"
  exit 0
fi

ensure_apt_packages mmdebstrap >&2
sudo=()
[ "$(id -u)" -ne 0 ] && sudo=(sudo)
started=$SECONDS
echo "--- building $image: Debian $suite with $packages (mmdebstrap${sources:+, sources from $sources})" >&2
# Documentation, manual pages and translations are left out; etcd.service is not started at
# boot; the root is written as a tar to standard output and imported as the image's one layer.
mirror=()
[ -z "$sources" ] || mirror=("$sources")
"${sudo[@]}" mmdebstrap --quiet --variant=essential --include="$packages" \
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' \
  --customize-hook='systemctl --quiet --root="$1" disable etcd.service >&2' \
  --format=tar "$suite" - "${mirror[@]}" |
  docker import \
    --change 'ENV container=docker' \
    --change 'CMD ["/lib/systemd/systemd"]' \
    --change "LABEL org.opencontainers.image.title=$name" \
    --change "LABEL org.opencontainers.image.description=\"Debian $suite, systemd as PID 1\"" \
    - "$image" >/dev/null
docker tag "$image" "$name:latest"
size="$(docker image inspect -f '{{.Size}}' "$image")"
echo "--- built $image ($(( (size + 500000) / 1000000 )) MB) in $((SECONDS - started))s" >&2
echo "$image"
