# shellcheck shell=bash
# Helpers that install what the project's scripts need when it is missing. Sourced, not run.

# ensure_apt_packages PKG...: installs the Debian packages that are not installed yet.
ensure_apt_packages() {
  local missing=() pkg
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  local sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "need root (or sudo) to install: ${missing[*]}" >&2; return 1; }
    sudo=(sudo)
  fi
  echo "--- installing Debian packages: ${missing[*]}"
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# ensure_nextest: installs cargo-nextest when cargo does not have it.
ensure_nextest() {
  cargo nextest --version >/dev/null 2>&1 && return 0
  echo "--- installing cargo-nextest"
  cargo install --locked cargo-nextest
}

# ensure_python_module MODULE PACKAGE: installs a Python package with pip when the module is
# missing (the client tests use the `kubernetes` Python client).
ensure_python_module() {
  python3 -c "import $1" >/dev/null 2>&1 && return 0
  echo "--- installing Python package $2"
  python3 -m pip install --quiet --disable-pip-version-check "$2"
}

# The Python client version the tests run against.
GENPLANE_PYTHON_KUBERNETES="kubernetes==37.0.2"

# The Debian packages the build needs: protoc and its standard .proto files (libprotobuf-dev)
# for etcd-client's generated code.
GENPLANE_BUILD_APT_PACKAGES=(protobuf-compiler libprotobuf-dev)
# The Debian packages the build and the tests need: etcd for the etcd backend's tests (and,
# with etcdctl, for the etcd image the Compose chaos test builds with `hack/image.sh
# --installed-etcd`).
GENPLANE_APT_PACKAGES=(etcd-server etcd-client "${GENPLANE_BUILD_APT_PACKAGES[@]}")
