#!/usr/bin/env bash
# Authorization benchmark (release build): GET of a ConfigMap by a bearer-token user on an
# apiserver authorizing with RBAC (1,000 RoleBindings of other subjects) against one with
# AlwaysAllow, side by side on SQLite; target: RBAC >= 90% of AlwaysAllow. Arguments go to the
# benchmark (`--quick` for a smoke run, `--bindings N`; `--help` lists them).
set -euo pipefail
exec "$(dirname "${BASH_SOURCE[0]}")/apiserver.sh" --only authz "$@"
