#!/usr/bin/env bash
# Builds the binary to ship: the release build with line tables (`-C debuginfo=line-tables-only`
# in RUSTFLAGS, in a target directory of its own, target/dist, so that the plain release build
# is not rebuilt; flags, unlike profile settings, leave the symbols' names as the release
# build's, which cmd/genplane/symbol-order.txt lists). Then splits its debug information off:
# target/dist/shipped/genplane is the program to ship (with its symbol table, less the
# compiler's labels no backtrace names: see hack/lib/strip.sh), target/dist/shipped/genplane.debug
# its debug information, linked from the binary (.gnu_debuglink) so that gdb and addr2line find
# it beside it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. hack/lib/strip.sh
target_dir="${CARGO_TARGET_DIR:-$PWD/target}"
CARGO_TARGET_DIR="$target_dir/dist" RUSTFLAGS="${RUSTFLAGS:-} -C debuginfo=line-tables-only" \
  cargo build --locked --release --bin genplane
built="$target_dir/dist/release/genplane"
shipped="$target_dir/dist/shipped"
mkdir -p "$shipped"
objcopy --only-keep-debug "$built" "$shipped/genplane.debug"
objcopy --strip-debug "${GENPLANE_UNNAMED_SYMBOLS[@]}" --add-gnu-debuglink="$shipped/genplane.debug" \
  "$built" "$shipped/genplane"
ls -l "$built" "$shipped/genplane" "$shipped/genplane.debug"

