#!/usr/bin/env bash
# Storage-at-scale benchmark (release build; issue #43): a million small ConfigMaps and custom
# resources in one all-in-one server, on SQLite and on etcd; memory against the objects' JSON,
# cached and consistent GET, a paginated LIST of everything and a watch from an old
# resourceVersion at 10,000 objects and at all, the time to ready after a restart, and the
# deletion of a namespace of 100,000 objects, beside the issue's targets. Arguments go to the
# benchmark (`--quick` for a smoke run of 2,000 objects, `--scale-objects N`,
# `--scale-backends sqlite`; `--help` lists them).
set -euo pipefail
exec "$(dirname "${BASH_SOURCE[0]}")/apiserver.sh" --only storage-scale "$@"
