# Sourced by hack/release.sh and hack/image.sh: how the shipped executable is stripped.
#
# GENPLANE_UNNAMED_SYMBOLS: objcopy options that drop the symbols no backtrace names, the
# compiler's labels of exception tables (GCC_except_table*) and of anonymous constants (anon.*).
# In genplane's release build they are about 59,000 of the symbol table's 139,000 entries and
# 2.5 MB; every function keeps its symbol, so a backtrace names the same frames.
GENPLANE_UNNAMED_SYMBOLS=(--wildcard --strip-symbol='GCC_except_table*' --strip-symbol='anon.*')
