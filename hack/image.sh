#!/usr/bin/env bash
# Builds genplane's container images and loads them into the local Docker engine, with no
# registry: every layer is made here (manifests/container/Containerfile starts FROM scratch).
#
# The base is `scratch` plus exactly the shared libraries the executable needs (ldd), CA
# certificates, and /etc/passwd and /etc/group with the non-root user genplane (65532). The
# executable is genplane's release build with its debug information split off as
# hack/release.sh does (kept beside it, target/dist/shipped/genplane.debug, not in the image).
# The etcd image holds etcd and etcdctl from Debian's etcd-server and etcd-client packages
# (downloaded with apt-get, never installed; or, with --installed-etcd, the installed ones) on
# the same kind of base.
#
# Images (each tagged TAG and `latest`): genplane-apiserver, genplane-controller-manager,
# genplane-feature-controller, genplane-all-in-one, genplane-ccm-e2e (entrypoint `genplane
# <role>`), and genplane-etcd (tagged with etcd's version and `latest`; with --tag and
# --no-latest, TAG only). Prints their sizes.
#
# Usage: hack/image.sh [OPTIONS]
#   --genplane PATH  pack this genplane executable (its debug information is split off here)
#                    instead of building one with hack/release.sh (GENPLANE_BIN)
#   --tag TAG        the genplane images' tag besides `latest` (default: genplane's version,
#                    from `genplane version`)
#   --strip-all      also strip the executable's symbol table (objcopy --strip-all): about
#                    14 MB smaller, but a backtrace (RUST_BACKTRACE=1) names no function
#   --roles LIST     build only these role images (comma-separated, e.g.
#                    apiserver,controller-manager,feature-controller; default: all five)
#   --no-etcd        do not build the etcd image
#   --installed-etcd pack the etcd and etcdctl installed here (the etcd-server and etcd-client
#                    packages) instead of downloading the packages: no package mirror is asked
#   --no-latest      tag the images TAG only, not `latest` too (needs --tag): the images of a
#                    test, say, which must not replace what `latest` names
#   --context DIR    prepare the build contexts (the archives and the Containerfile; etcd's
#                    in DIR/etcd-image) in DIR, a new or empty directory, and leave them
#                    there (default: a temporary one)
#   -h, --help       print this help
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'; }

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
genplane="${GENPLANE_BIN:-}"
tag=
build_etcd=true
installed_etcd=false
latest=true
roles=(apiserver controller-manager feature-controller all-in-one ccm-e2e)
strip=--strip-debug
context=
while [ $# -gt 0 ]; do
  case "$1" in
    --genplane) genplane="${2:?--genplane needs a path}"; shift 2 ;;
    --genplane=*) genplane="${1#--genplane=}"; shift ;;
    --tag) tag="${2:?--tag needs a tag}"; shift 2 ;;
    --tag=*) tag="${1#--tag=}"; shift ;;
    --strip-all) strip=--strip-all; shift ;;
    --roles) IFS=, read -r -a roles <<<"${2:?--roles needs a list}"; shift 2 ;;
    --roles=*) IFS=, read -r -a roles <<<"${1#--roles=}"; shift ;;
    --no-etcd) build_etcd=false; shift ;;
    --installed-etcd) installed_etcd=true; shift ;;
    --no-latest) latest=false; shift ;;
    --context) context="${2:?--context needs a directory}"; shift 2 ;;
    --context=*) context="${1#--context=}"; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "image: unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done
# A tag is what Docker accepts: letters, digits, _ . -, not starting with . or -, 128 at most.
if [ -n "$tag" ] && ! [[ "$tag" =~ ^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$ ]]; then
  echo "image: --tag $tag is not a valid image tag" >&2
  exit 2
fi
if ! $latest && [ -z "$tag" ]; then
  echo "image: --no-latest needs --tag" >&2
  exit 2
fi
for role in "${roles[@]}"; do
  case "$role" in
    apiserver|controller-manager|feature-controller|all-in-one|ccm-e2e) ;;
    *) echo "image: --roles: no role $role" >&2; exit 2 ;;
  esac
done
absolute() { case "$1" in /*) printf '%s\n' "$1" ;; *) printf '%s\n' "$PWD/$1" ;; esac; }
[ -n "$genplane" ] && genplane="$(absolute "$genplane")"
if [ -n "$context" ]; then
  context="$(absolute "$context")"
  if [ -e "$context" ] && [ -n "$(ls -A "$context" 2>/dev/null || echo x)" ]; then
    echo "image: --context $context is not a new or empty directory" >&2
    exit 2
  fi
fi

cd "$repo"
. hack/lib/ensure.sh
. hack/lib/strip.sh
# objcopy (binutils), ldd (libc-bin), the CA bundle.
ensure_apt_packages binutils libc-bin ca-certificates
command -v docker >/dev/null || { echo "image: docker is not installed" >&2; exit 1; }
docker info >/dev/null 2>&1 || { echo "image: the Docker engine does not answer (docker info)" >&2; exit 1; }

started=$SECONDS
if [ -z "$genplane" ]; then
  echo "--- building genplane (hack/release.sh)"
  hack/release.sh
  genplane="${CARGO_TARGET_DIR:-$repo/target}/dist/shipped/genplane"
fi
[ -x "$genplane" ] || { echo "image: $genplane is not an executable" >&2; exit 1; }
# The images' health checks and the Compose cluster's PKI step are applets of the executable.
applets="$("$genplane" --list)" || { echo "image: $genplane --list failed" >&2; exit 1; }
for needed in apiserver controller-manager feature-controller all-in-one ccm-e2e healthcheck pki; do
  grep -qx "$needed" <<<"$applets" || {
    echo "image: $genplane has no applet $needed (built from an older commit?)" >&2
    exit 1
  }
done
version_json="$("$genplane" version -o json)"
field() { sed -n "s/^ *\"$1\": *\"\\([^\"]*\\)\".*/\\1/p" <<<"$version_json"; }
version="$(field genplaneVersion)"
revision="$(field gitCommit)"
source_url="$(sed -n 's/^repository *= *"\(.*\)"/\1/p' Cargo.toml | head -n 1)"
if [ -z "$version" ] || [ -z "$revision" ]; then
  echo "image: cannot read the version of $genplane (genplane version -o json)" >&2
  exit 1
fi
tag="${tag:-$version}"

if [ -n "$context" ]; then
  mkdir -p "$context"
else
  context="$(mktemp -d "${TMPDIR:-/tmp}/genplane-image.XXXXXX")"
  trap 'rm -rf "$context"' EXIT
fi

# copy_libraries ROOT EXECUTABLE...: copies the shared libraries and the program interpreter the
# executables load (as ldd resolves them here) into ROOT, at the same paths, links followed.
copy_libraries() {
  local root=$1; shift
  local exe path
  for exe in "$@"; do
    [ "$(head -c 4 "$exe" | od -An -c | tr -d ' ')" = '177ELF' ] ||
      { echo "image: $exe is not an ELF executable" >&2; exit 1; }
    # A static executable needs nothing (ldd says "not a dynamic executable").
    ldd "$exe" >/dev/null 2>&1 || continue
    # `name => /path (addr)`, or `/path (addr)` for the interpreter; the vDSO has no path.
    while read -r path; do
      [ -e "$root$path" ] && continue
      mkdir -p "$root$(dirname "$path")"
      cp -L "$path" "$root$path"
    done < <(ldd "$exe" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}')
  done
}

# base_root ROOT HOME: the files every image holds: users, name service, CA bundle, /tmp.
base_root() {
  local root=$1 home=$2
  mkdir -p "$root/etc/ssl/certs" "$root/tmp" "$root$home"
  chmod 1777 "$root/tmp"
  chmod 0700 "$root$home"
  printf '%s\n' 'root:x:0:0:root:/root:/sbin/nologin' \
    "genplane:x:65532:65532:genplane:$home:/sbin/nologin" >"$root/etc/passwd"
  printf '%s\n' 'root:x:0:' 'genplane:x:65532:' >"$root/etc/group"
  # Names from /etc/hosts (Docker writes it), then DNS (Docker's resolver on its networks).
  printf '%s\n' 'passwd: files' 'group: files' 'hosts: files dns' >"$root/etc/nsswitch.conf"
  cp -L /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
}

# pack ROOT ARCHIVE [OWNED-DIR]: a tar of ROOT owned by root, but OWNED-DIR by 65532 (the user
# genplane), so that a fresh volume mounted there starts with that owner.
pack() {
  local root=$1 archive=$2 owned=${3:-}
  local common=(--sort=name --mtime=@0 --numeric-owner --format=gnu -C "$root")
  if [ -n "$owned" ]; then
    tar -cf "$archive" --owner=0 --group=0 "${common[@]}" --exclude="./${owned#/}" .
    tar -rf "$archive" --owner=65532 --group=65532 "${common[@]}" "./${owned#/}"
  else
    tar -cf "$archive" --owner=0 --group=0 "${common[@]}" .
  fi
}

echo "--- preparing the build context in $context"
# The executable, its debug information split off (as hack/release.sh does; a no-op for one
# that has none) and with --strip-all its symbol table too, and a link per applet.
mkdir -p "$context/genplane/usr/local/bin"
exe="$context/genplane/usr/local/bin/genplane"
objcopy "$strip" "${GENPLANE_UNNAMED_SYMBOLS[@]}" "$genplane" "$exe"
chmod 0755 "$exe"
while read -r applet; do
  ln -s genplane "$context/genplane/usr/local/bin/genplane-$applet"
done <<<"$applets"
base_root "$context/base" /var/lib/genplane
# Where a volume of certificates goes (as `genplane apiserver --data-dir` keeps them), owned by
# genplane like the data directory, so that a fresh volume mounted there is writable by it.
mkdir -m 0700 "$context/base/var/lib/genplane/pki"
copy_libraries "$context/base" "$genplane"
pack "$context/base" "$context/base.tar" /var/lib/genplane
pack "$context/genplane" "$context/genplane.tar"

etcd_version=
if $build_etcd; then
  etcd_root="$context/etcd"
  mkdir -p "$etcd_root/usr/bin"
  if $installed_etcd; then
    echo "--- packing the installed etcd-server and etcd-client"
    for package in etcd-server etcd-client; do
      dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed' || {
        echo "image: --installed-etcd: $package is not installed" >&2
        exit 1
      }
    done
    cp /usr/bin/etcd /usr/bin/etcdctl "$etcd_root/usr/bin/"
    etcd_version="$(dpkg-query -W -f='${Version}' etcd-server)"
  else
    echo "--- downloading Debian's etcd-server and etcd-client"
    mkdir -p "$context/debs"
    if ! (cd "$context/debs" && apt-get download etcd-server etcd-client >/dev/null 2>&1); then
      # The package lists may be missing (a fresh container): fetch them once.
      sudo=()
      [ "$(id -u)" -ne 0 ] && sudo=(sudo)
      "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
      (cd "$context/debs" && apt-get download etcd-server etcd-client)
    fi
    for deb in "$context"/debs/*.deb; do
      dpkg-deb -x "$deb" "$context/debs/x"
    done
    cp "$context/debs/x/usr/bin/etcd" "$context/debs/x/usr/bin/etcdctl" "$etcd_root/usr/bin/"
    etcd_version="$(dpkg-deb -f "$(ls "$context"/debs/etcd-server_*.deb)" Version)"
  fi
  base_root "$etcd_root" /var/lib/etcd
  copy_libraries "$etcd_root" "$etcd_root/usr/bin/etcd" "$etcd_root/usr/bin/etcdctl"
  # The etcd image has a context of its own, with its stage alone (the file's global ARGs
  # and its last stage): Docker's legacy builder (an engine without buildx) runs every stage
  # before the target, which would send and build the genplane stages again and leave those
  # of the roles not asked for behind as untagged images.
  mkdir -p "$context/etcd-image"
  pack "$etcd_root" "$context/etcd-image/etcd.tar" /var/lib/etcd
  grep -q '^FROM scratch AS etcd$' manifests/container/Containerfile
  { sed '/^FROM /,$d' manifests/container/Containerfile
    sed -n '/^FROM scratch AS etcd$/,$p' manifests/container/Containerfile
  } >"$context/etcd-image/Containerfile"
fi
cp manifests/container/Containerfile "$context/Containerfile"
# Only the archives are sent to the engine.
printf '%s\n' '*' '!base.tar' '!genplane.tar' '!Containerfile' >"$context/.dockerignore"

# build TARGET DIR ARGS...: the stage TARGET of DIR/Containerfile, DIR the context.
build() {
  local target=$1 dir=$2; shift 2
  echo "--- building $target"
  # Quiet unless it fails: Docker's notice that its legacy builder (what an engine without
  # the buildx component uses) is deprecated would otherwise come once per image.
  if ! docker build --quiet -f "$dir/Containerfile" --target "$target" \
    --build-arg GENPLANE_VERSION="$version" \
    --build-arg GENPLANE_REVISION="$revision" \
    --build-arg GENPLANE_SOURCE="$source_url" \
    --build-arg ETCD_VERSION="$etcd_version" \
    "$@" "$dir" >"$context/build.log" 2>&1; then
    cat "$context/build.log" >&2
    echo "image: building $target failed" >&2
    exit 1
  fi
}
images=()
for role in "${roles[@]}"; do
  if $latest; then
    build "$role" "$context" -t "genplane-$role:$tag" -t "genplane-$role:latest"
  else
    build "$role" "$context" -t "genplane-$role:$tag"
  fi
  images+=("genplane-$role:$tag")
done
if $build_etcd; then
  if $latest; then
    etcd_tag="${etcd_version%%-*}"
    build etcd "$context/etcd-image" -t "genplane-etcd:$etcd_tag" -t "genplane-etcd:latest"
  else
    etcd_tag=$tag
    build etcd "$context/etcd-image" -t "genplane-etcd:$etcd_tag"
  fi
  images+=("genplane-etcd:$etcd_tag")
fi

echo "--- images (genplane $version, commit $revision)"
printf '%-40s %8s\n' IMAGE SIZE
for image in "${images[@]}"; do
  size="$(docker image inspect -f '{{.Size}}' "$image")"
  printf '%-40s %5s MB\n' "$image" "$(( (size + 500000) / 1000000 ))"
done
echo "(the genplane images share their layers: together they take the space of one)"
echo "executable: $(stat -c %s "$exe") bytes; libraries: $(cd "$context/base" && find . -name '*.so*' | sort | tr '\n' ' ')"
echo "built in $((SECONDS - started))s"
