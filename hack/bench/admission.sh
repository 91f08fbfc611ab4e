#!/usr/bin/env bash
# Admission benchmark (release build): ConfigMap create throughput and CPU per create with one
# matching ValidatingAdmissionPolicy (a ConfigMap param, a variable, two CEL validations, Deny)
# against the plugin disabled, side by side on SQLite; target: the policy adds <= 20% to a
# create's CPU. Arguments go to the benchmark (`--quick` for a smoke run; `--help` lists them).
set -euo pipefail
exec "$(dirname "${BASH_SOURCE[0]}")/apiserver.sh" --only admission "$@"
