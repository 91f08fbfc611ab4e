#!/usr/bin/env bash
# Builds the release binary (`cargo build --release --bin genplane`, line tables for
# backtraces) and splits its debug information off: target/release/dist/genplane is the program
# to ship (with its symbol table, less the compiler's labels no backtrace names: see
# hack/lib/strip.sh), target/release/dist/genplane.debug its debug information, linked from the
# binary (.gnu_debuglink) so that gdb and addr2line find it beside it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. hack/lib/strip.sh
cargo build --locked --release --bin genplane
target_dir="${CARGO_TARGET_DIR:-$PWD/target}"
dist="$target_dir/release/dist"
mkdir -p "$dist"
objcopy --only-keep-debug "$target_dir/release/genplane" "$dist/genplane.debug"
objcopy --strip-debug "${GENPLANE_UNNAMED_SYMBOLS[@]}" --add-gnu-debuglink="$dist/genplane.debug" \
  "$target_dir/release/genplane" "$dist/genplane"
ls -l "$target_dir/release/genplane" "$dist/genplane" "$dist/genplane.debug"
