"""Import cycles between the files of one crate.

A file *uses* another when it names one of that file's items through a path inside the crate:
`use crate::a::B`, `use super::B`, `self::b::C`, a path starting with a child module's name, or
such a path written inline (`crate::a::f(..)`). Two files are in a cycle when each uses the
other, directly or through other files: every strongly connected component of more than one file
is reported. Re-exports (`pub use`, `pub(crate) use`, ...) of a crate root (`lib.rs`, `main.rs`)
are the crate's front door, not a use: they make no edge, and a path through one is followed to
the file that defines the item. A re-export anywhere else is the edge a reader sees: the
re-exporting file uses what it re-exports, and a path through it uses the re-exporting file
(so a catalog that imports every kind, whose kinds import its re-exports, is a cycle).
`#[cfg(test)]` modules count like any other code; a file's own inline modules are the file.

A module's own submodules are no edge: a module may use what it is made of.

Usage: file_cycles.py [--self-test] [-v] [ROOT]   (ROOT: the workspace, default: the current folder)
Exits 1 when there is a cycle not in KNOWN (or a KNOWN one is gone), listing them with the
paths that make them (-v: the known ones' too). Reads only `src/` trees of crates (folders with a Cargo.toml).
"""
import os
import re
import sys

# Cycles that existed when this check was added, each as its sorted files. They are reported
# but do not fail the check; a new cycle does, and so does one of these once it is gone (then
# remove it here). Break them as the others were: move the shared item to a lower module.
KNOWN = []
ITEM_RE = re.compile(
    r"^(?:pub(?:\([^)]*\))?\s+)?(?:(?:const|async|unsafe|extern\s+\"[^\"]*\")\s+)*"
    r"(?:fn|struct|enum|union|trait|type|const|static|mod|macro_rules!)\s+([A-Za-z_][A-Za-z0-9_]*)"
)
TOKEN_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*!?|::|\{|\}|\(|\)|;|,|\*|\$|#|\[|\]|[^\sA-Za-z_]")


def strip(src):
    """Removes comments, strings and char literals (keeping lifetimes), keeping line breaks."""
    out = []
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
        elif src.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if src.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif src.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
            out.append(" ")
        elif c == "r" and re.match(r'r#*"', src[i:i + 260]) and not (i and (src[i - 1].isalnum() or src[i - 1] == "_")):
            hashes = re.match(r'r(#*)"', src[i:]).group(1)
            end = src.find('"' + hashes, i + 2 + len(hashes))
            i = n if end < 0 else end + 1 + len(hashes)
            out.append('""')
        elif c == "b" and i + 1 < n and src[i + 1] in "\"'" and not (i and (src[i - 1].isalnum() or src[i - 1] == "_")):
            i += 1
        elif c == '"':
            i += 1
            while i < n and src[i] != '"':
                i += 2 if src[i] == "\\" else 1
            i += 1
            out.append('""')
        elif c == "'":
            m = re.match(r"'(\\.[^']*|[^\\'])'", src[i:])
            if m:
                i += m.end()
                out.append("' '")
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


class Module:
    def __init__(self, path, file):
        self.path = path          # tuple of names from the crate root
        self.file = file          # the file holding it
        self.children = {}        # name -> Module
        self.items = set()        # names defined here
        self.imports = {}         # name -> absolute path (tuple), for `use` (pub or not)
        self.globs = []           # absolute module paths glob-imported
        self.reexports = set()    # names this module re-exports (`pub use`)
        self.reexported_globs = []  # module paths this module re-exports whole (`pub use m::*`)


def parse_use_tree(tokens, i):
    """Parses a use tree at tokens[i]; returns (list of (segments, alias, glob), next index)."""
    results = []
    prefix = []
    while i < len(tokens):
        t = tokens[i]
        if t == "{":
            i += 1
            while i < len(tokens) and tokens[i] != "}":
                sub, i = parse_use_tree(tokens, i)
                results += [(prefix + s, a, g) for s, a, g in sub]
                if i < len(tokens) and tokens[i] == ",":
                    i += 1
            return results, i + 1
        if t == "*":
            results.append((prefix, None, True))
            return results, i + 1
        if t in (",", "}", ";"):
            break
        if t == "::":
            i += 1
            continue
        if t == "as":
            alias = tokens[i + 1]
            results.append((prefix, alias, False))
            return results, i + 2
        prefix = prefix + [t]
        i += 1
    if prefix:
        results.append((prefix, None, False))
    return results, i


class Crate:
    def __init__(self, root_dir):
        self.src = os.path.join(root_dir, "src")
        self.modules = {}         # path tuple -> Module
        self.uses = []            # (file, module path, segments, is_glob, is_reexport)
        self.files = set()
        self.roots = set()        # the crate root files: their re-exports are the front door

    def load(self):
        for root_file in ("lib.rs", "main.rs"):
            p = os.path.join(self.src, root_file)
            if os.path.exists(p):
                self.load_file(p, (), root=True)
        bins = os.path.join(self.src, "bin")
        if os.path.isdir(bins):
            for f in sorted(os.listdir(bins)):
                if f.endswith(".rs"):
                    self.load_file(os.path.join(bins, f), ("<bin:" + f + ">",), root=True)

    def child_file(self, file, name, own_dir):
        base = os.path.join(own_dir, name)
        for cand in (base + ".rs", os.path.join(base, "mod.rs")):
            if os.path.exists(cand):
                return cand
        return None

    def load_file(self, path, modpath, root=False):
        self.files.add(path)
        if root:
            self.roots.add(path)
        with open(path, encoding="utf-8") as f:
            text = strip(f.read())
        name = os.path.basename(path)
        # a crate root's and a mod.rs's children sit beside it, another file's in its own folder
        if root or name == "mod.rs":
            own_dir = os.path.dirname(path)
        else:
            own_dir = os.path.join(os.path.dirname(path), name[:-3])
        module = Module(modpath, path)
        self.modules[modpath] = module
        tokens = TOKEN_RE.findall(text)
        self.scan(tokens, path, module, own_dir)

    def scan(self, tokens, path, top, own_dir):
        # stack of (module, brace depth at which it closes, dir for its file children)
        stack = [(top, None, own_dir)]
        depth = 0
        pending_path_attr = False
        i = 0
        at_item_start = True
        while i < len(tokens):
            t = tokens[i]
            module, _, mdir = stack[-1]
            if t == "#" and i + 2 < len(tokens) and tokens[i + 1] == "[" and tokens[i + 2] == "path":
                pending_path_attr = True
            if t == "{":
                depth += 1
                i += 1
                at_item_start = True
                continue
            if t == "}":
                if stack[-1][1] == depth:
                    stack.pop()
                depth -= 1
                i += 1
                at_item_start = True
                continue
            if t == ";":
                i += 1
                at_item_start = True
                continue
            if t == "mod" and i + 1 < len(tokens) and re.match(r"[A-Za-z_]", tokens[i + 1]) and i + 2 < len(tokens):
                name = tokens[i + 1]
                child_path = module.path + (name,)
                module.items.add(name)
                if tokens[i + 2] == "{":
                    child = Module(child_path, path)
                    self.modules[child_path] = child
                    module.children[name] = child
                    stack.append((child, depth + 1, os.path.join(mdir, name) if mdir else None))
                    i += 2
                    continue
                if tokens[i + 2] == ";" and not pending_path_attr and mdir:
                    f = self.child_file(path, name, mdir)
                    if f:
                        self.load_file(f, child_path)
                        module.children[name] = self.modules[child_path]
                pending_path_attr = False
                i += 3
                continue
            # (`&'static T` names no item: a lifetime's `static` is not the keyword)
            if t in ("fn", "struct", "enum", "union", "trait", "type", "const", "static", "macro_rules!") and i + 1 < len(tokens) and not (i and tokens[i - 1] == "'"):
                if re.match(r"[A-Za-z_]", tokens[i + 1]):
                    module.items.add(tokens[i + 1])
            if t == "use" and at_item_start:
                j = i - 1
                reexport = False
                while j >= 0 and tokens[j] in (")", "crate", "super", "self", "in", "(", "pub") or (j >= 0 and tokens[j] == "::"):
                    if tokens[j] == "pub":
                        reexport = True
                    j -= 1
                trees, i = parse_use_tree(tokens, i + 1)
                for segs, alias, glob in trees:
                    if not segs:
                        continue
                    if segs[-1] == "self":
                        segs = segs[:-1]
                        if not segs:
                            continue
                    absolute = self.absolute(module.path, segs)
                    if absolute is None:
                        continue
                    if glob:
                        module.globs.append(absolute)
                        if reexport:
                            module.reexported_globs.append(absolute)
                    else:
                        module.imports[alias or segs[-1]] = absolute
                        if reexport:
                            module.reexports.add(alias or segs[-1])
                    self.uses.append((path, module.path, absolute, glob, reexport))
                continue
            at_item_start = t in ("pub", "(", ")", "crate", "in", "super", "self") or t == "#" or t == "]" or t == "["
            # an inline path: crate::a::b, super::x, self::x, child::x
            if (t in ("crate", "super", "self") or t in module.children) and i + 1 < len(tokens) and tokens[i + 1] == "::" and (i == 0 or tokens[i - 1] not in ("::", "$")):
                segs = [t]
                j = i + 1
                while j + 1 < len(tokens) and tokens[j] == "::" and re.match(r"[A-Za-z_]", tokens[j + 1]):
                    segs.append(tokens[j + 1].rstrip("!"))
                    j += 2
                absolute = self.absolute(module.path, segs)
                if absolute is not None:
                    self.uses.append((path, module.path, absolute, False, False))
                i = j
                continue
            i += 1

    def absolute(self, here, segs):
        """Turns a path as written in module `here` into a path from the crate root."""
        segs = list(segs)
        if segs[0] == "crate":
            base = ()
            segs = segs[1:]
        elif segs[0] in ("super", "self"):
            base = here
            while segs and segs[0] in ("super", "self"):
                if segs[0] == "super":
                    if not base:
                        return None
                    base = base[:-1]
                segs = segs[1:]
        else:
            # relative: a child module of `here` (only those are crate paths)
            base = here
            mod = self.modules.get(here)
            if mod is None or segs[0] not in mod.children:
                return None
        return tuple(base) + tuple(segs)

    def resolve(self, absolute, seen=None):
        """The file defining what `absolute` names (a module's file, or the file of an item)."""
        seen = seen or set()
        if absolute in seen:
            return None
        seen.add(absolute)
        # the longest prefix that is a module
        k = len(absolute)
        while k >= 0 and absolute[:k] not in self.modules:
            k -= 1
        if k < 0:
            return None
        module = self.modules[absolute[:k]]
        rest = absolute[k:]
        if not rest:
            return module.file
        name = rest[0]
        if name in module.items or name in module.children:
            return module.file
        front_door = module.file in self.roots
        if name in module.imports:
            if name in module.reexports and not front_door:
                return module.file
            target = module.imports[name] + tuple(rest[1:])
            return self.resolve(target, seen) or module.file
        for g in module.globs:
            got = self.resolve(g + tuple(rest), seen)
            if got is not None:
                return module.file if g in module.reexported_globs and not front_door else got
        return module.file

    def edges(self):
        """file -> {file it uses: the first path that uses it}."""
        out = {}
        for file, here, absolute, glob, reexport in self.uses:
            if reexport and file in self.roots:
                continue
            target = self.resolve(absolute)
            if not target or target == file:
                continue
            # a module may use what it is made of: its own submodules are no edge
            target_mod = self.module_of(target)
            file_mod = self.module_of(file)
            if (
                target_mod is not None
                and file_mod is not None
                and target_mod[:len(file_mod)] == file_mod
            ):
                continue
            out.setdefault(file, {}).setdefault(target, "::".join(absolute))
        return out

    def module_of(self, file):
        """The module path of the module a file holds (the shortest one in it)."""
        best = None
        for path, m in self.modules.items():
            if m.file == file and (best is None or len(path) < len(best)):
                best = path
        return best


def sccs(nodes, edges):
    """Tarjan's strongly connected components."""
    index, low, on, stack, comps = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            comps.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return [c for c in comps if len(c) > 1]


def crate_dirs(root):
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith(".") and d not in ("target", "node_modules")]
        if "Cargo.toml" in filenames and os.path.isdir(os.path.join(dirpath, "src")):
            yield dirpath


def cycles(root):
    found = []
    for d in sorted(crate_dirs(root)):
        crate = Crate(d)
        crate.load()
        edges = crate.edges()
        for comp in sccs(crate.files, edges):
            rel = [os.path.relpath(f, root) for f in comp]
            why = sorted(f"{os.path.relpath(a, root)} -> {os.path.relpath(b, root)} ({p})"
                         for a in comp for b, p in edges.get(a, {}).items() if b in comp)
            found.append((rel, why))
    return sorted(found)


def self_test():
    import tempfile

    def crate(files):
        tmp = tempfile.mkdtemp()
        open(os.path.join(tmp, "Cargo.toml"), "w").close()
        for name, body in files.items():
            p = os.path.join(tmp, "src", name)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "w") as f:
                f.write(body)
        return cycles(tmp)

    base = {"lib.rs": "mod a;\nmod b;\npub use a::A;\npub struct Error;\n"}
    cases = [
        ("use crate:: both ways", {"a.rs": "use crate::b::B;\npub struct A;", "b.rs": "use crate::a::A;\npub struct B;"}, 1),
        ("one way only", {"a.rs": "use crate::b::B;\npub struct A;", "b.rs": "pub struct B;"}, 0),
        ("inline path", {"a.rs": "pub fn a() { crate::b::b() }", "b.rs": "pub fn b() { super::a::a() }"}, 1),
        ("use tree", {"a.rs": "use crate::{b::{B, C as D}};\npub struct A;", "b.rs": "pub struct B; pub struct C;\nfn f() -> crate::A { todo!() }"}, 1),
        ("through a re-export", {"a.rs": "pub struct A;\nfn f(_: crate::b::B) {}", "b.rs": "use crate::A;\npub struct B;"}, 1),
        ("re-export is no use", {"a.rs": "use crate::Error;\npub struct A;", "b.rs": "pub struct B;"}, 0),
        ("a module's re-export is the edge a reader sees", {"a.rs": "pub use crate::b::B;\npub struct A;", "b.rs": "use crate::a::A;\npub struct B;"}, 1),
        ("a path through a module's re-export uses that module", {"a.rs": "pub struct A;\nfn f(_: crate::c::B) {}", "b.rs": "pub struct B;", "c.rs": "pub use crate::b::B;\nfn g(_: crate::a::A) {}", "lib.rs": "mod a;\nmod b;\nmod c;\n"}, 1),
        ("strings and comments", {"a.rs": "// use crate::b::B;\nconst S: &str = \"crate::b::B\";\npub struct A;", "b.rs": "use crate::a::A;"}, 0),
        ("tests module uses its parent", {"a.rs": "pub struct A;\n#[cfg(test)]\nmod tests { use super::*; }", "b.rs": "pub struct B;"}, 0),
        ("child file tests uses parent", {"a.rs": "pub struct A;\n#[cfg(test)]\nmod tests;", "a/tests.rs": "use super::*;\nuse crate::b::B;", "b.rs": "pub struct B;"}, 0),
        ("lib uses a child that uses lib", {"a.rs": "use crate::Error;\npub struct A;\npub fn f() {}", "b.rs": "pub struct B;", "lib.rs": base["lib.rs"] + "fn g() { a::f() }\n"}, 0),
        ("a 'static lifetime names no item", {"a.rs": "pub struct A;\nfn f(_: crate::c::C) {}", "b.rs": "use crate::c::C;\nfn g(_: &'static C) {}\nfn k(_: crate::a::A) {}", "c.rs": "pub struct C;", "lib.rs": "mod a;\nmod b;\nmod c;\n"}, 0),
        ("siblings through the root", {"a.rs": "use crate::Error;\npub struct A;", "b.rs": "pub struct B;", "lib.rs": "mod a;\nmod b;\npub struct Error;\nfn g(_: crate::a::A) {}\n"}, 0),
    ]
    bad = []
    for name, files, want in cases:
        got = crate({**base, **files})
        got = [c for c, _ in got]
        if len(got) != want:
            bad.append(f"self-test {name!r}: want {want} cycle(s), got {got}")
    return bad


def main(argv):
    if "--self-test" in argv:
        bad = self_test()
        for b in bad:
            print(b, file=sys.stderr)
        return 1 if bad else 0
    root = next((a for a in argv if not a.startswith("-")), ".")
    found = cycles(root)
    failed = False
    for comp, why in found:
        known = comp in KNOWN
        failed |= not known
        print(("known " if known else "") + "import cycle between files: " + " <-> ".join(comp),
              file=sys.stdout if known else sys.stderr)
        if "-v" in argv or not known:
            for w in why:
                print("    " + w, file=sys.stdout if known else sys.stderr)
    for comp in KNOWN:
        if comp not in [c for c, _ in found]:
            failed = True
            print("no longer a cycle (remove it from KNOWN in hack/lib/file_cycles.py): "
                  + " <-> ".join(comp), file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
