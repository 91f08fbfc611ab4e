"""The symbol order of genplane's code (hack/symbol-order.sh).

  symbol_order.py write BIN OUT PROFILE...   writes OUT from callgrind profiles of BIN
  symbol_order.py check BIN ORDER            says whether BIN was laid out by ORDER and how
                                             many of its functions BIN defines

`write` keeps the functions the profiles ran that BIN defines (by their mangled names, which
is what the linker's --symbol-ordering-file matches), those every profile ran first, then
those fewer ran; within a group, in the order of the first profile that ran them.
"""

import re
import subprocess
import sys

# A callgrind function line, of a function counted (fn=) or called (cfn=): "fn=(id) name" the
# first time the file names the id, in either kind of line, "fn=(id)" after.
FN = re.compile(r"^(c?)fn=\((\d+)\)(?: (.*))?$")


def code_symbols(binary):
    """The functions BIN defines (text symbols), by name, with their addresses."""
    out = subprocess.run(
        ["nm", "--defined-only", binary], capture_output=True, text=True, check=True
    ).stdout
    names = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "tTwW":
            names[parts[2]] = int(parts[0], 16)
    return names


def functions_run(profile):
    """The functions a callgrind profile (written with --demangle=no) counted, in order."""
    seen = {}
    names = {}
    with open(profile, errors="replace") as f:
        for line in f:
            m = FN.match(line.rstrip("\n"))
            if not m:
                continue
            called, ident, name = m.group(1), m.group(2), m.group(3)
            if name:
                names[ident] = name.strip()
            if called:
                continue
            name = names.get(ident)
            if name is not None and name not in seen:
                seen[name] = len(seen)
    return list(seen)


def write(binary, out, profiles):
    defined = code_symbols(binary)
    runs = [functions_run(p) for p in profiles]
    key = {}
    for r, names in enumerate(runs):
        for i, name in enumerate(names):
            if name not in defined:
                continue
            if name in key:
                key[name][0] -= 1
            else:
                key[name] = [-1, r, i]
    order = sorted(key, key=lambda n: key[n])
    with open(out, "w") as f:
        f.write("".join(n + "\n" for n in order))
    counts = ", ".join(str(len(r)) for r in runs)
    print(f"{out}: {len(order)} functions (the runs counted {counts})")


def check(binary, order):
    """Says how much of ORDER BIN has, and whether BIN was laid out by it: most listed
    neighbours at rising addresses (a build linked without it has the compiler's order)."""
    defined = code_symbols(binary)
    with open(order) as f:
        wanted = [line.strip() for line in f if line.strip()]
    addresses = [defined[n] for n in wanted if n in defined]
    found = len(addresses)
    share = 100.0 * found / len(wanted) if wanted else 0.0
    rising = sum(1 for a, b in zip(addresses, addresses[1:]) if b > a)
    laid_out = rising * 10 > max(found - 1, 0) * 9
    print(f"{binary}: {'laid out' if laid_out else 'not laid out'} by {order}, "
          f"{found} of whose {len(wanted)} functions it has ({share:.1f}%)")


def main(argv):
    if len(argv) >= 4 and argv[1] == "write":
        write(argv[2], argv[3], argv[4:])
    elif len(argv) == 4 and argv[1] == "check":
        check(argv[2], argv[3])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
