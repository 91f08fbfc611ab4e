"""Crate layering rules of DESIGN.md section 1, checked on `cargo metadata --no-deps` output.

Rules (normal and build dependencies; dev-dependencies are free):
  1. A crate is named after its folder: cmd/genplane is `genplane`, cmd/<x> is `genplane-cmd-<x>`,
     pkg/a/b is `genplane-a-b`, test/<x> is `genplane-test-<x>`.
  2. pkg/* never depends on cmd/* or test/* crates, nor on anyhow.
  3. genplane-storage depends on no storage backend.
  4. genplane-apimachinery and genplane-api do no async or I/O.
  5. Storage backends are chosen in exactly one place: genplane-controlplane (tests and
     benchmarks excepted).
  6. Only the multi-call binary depends on applet crates: a role that composes others (all-in-one)
     does so through the library crates that assemble them.

Reads the metadata JSON on stdin; exits 1 listing every violation. `--self-test` checks that
each rule catches a violation.
"""
import json
import os
import sys

ASYNC_OR_IO = {"tokio", "hyper", "hyper-util", "futures", "async-trait", "reqwest", "rusqlite",
               "etcd-client", "tower", "tokio-rustls", "kube", "kube-runtime"}
BACKENDS = {"genplane-storage-sqlite", "genplane-storage-etcd"}
BACKEND_CHOOSERS = {"genplane-controlplane"}
APPLET_USERS = {"genplane"}


def expected_name(rel):
    parts = rel.split("/")
    if parts == ["cmd", "genplane"]:
        return "genplane"
    if parts[0] == "cmd":
        return "genplane-cmd-" + "-".join(parts[1:])
    if parts[0] == "pkg":
        return "genplane-" + "-".join(parts[1:])
    if parts[0] == "test":
        return "genplane-test-" + "-".join(parts[1:])
    return None


def check(metadata):
    root = metadata["workspace_root"]
    packages = {p["name"]: p for p in metadata["packages"]}
    kind_of = {}
    problems = []
    for name, pkg in packages.items():
        rel = os.path.relpath(os.path.dirname(pkg["manifest_path"]), root)
        kind_of[name] = rel.split("/")[0]
        want = expected_name(rel)
        if want is not None and want != name:
            problems.append(f"{rel}: crate is named {name}, expected {want}")
    for name, pkg in packages.items():
        deps = [d["name"] for d in pkg["dependencies"] if d.get("kind") in (None, "build")]
        for dep in deps:
            dep_kind = kind_of.get(dep)
            if kind_of[name] == "pkg":
                if dep_kind in ("cmd", "test"):
                    problems.append(f"{name}: pkg crates must not depend on {dep_kind} crate {dep}")
                if dep == "anyhow":
                    problems.append(f"{name}: pkg crates use thiserror, not anyhow")
            if name == "genplane-storage" and dep in BACKENDS:
                problems.append(f"{name}: the storage contract must not depend on backend {dep}")
            if name in ("genplane-apimachinery", "genplane-api") and dep in ASYNC_OR_IO:
                problems.append(f"{name}: no async or I/O here, but depends on {dep}")
            if dep in BACKENDS and name not in BACKEND_CHOOSERS and kind_of[name] not in ("test", "hack"):
                problems.append(f"{name}: only {sorted(BACKEND_CHOOSERS)} choose a storage backend, not via {dep}")
            if dep_kind == "cmd" and name not in APPLET_USERS:
                problems.append(f"{name}: only {sorted(APPLET_USERS)} depend on applet crate {dep}")
    return problems


def fake(root, crates):
    packages = []
    for rel, name, deps in crates:
        packages.append({
            "name": name,
            "manifest_path": f"{root}/{rel}/Cargo.toml",
            "dependencies": [{"name": d, "kind": None} for d in deps],
        })
    return {"workspace_root": root, "packages": packages}


def self_test():
    root = "/ws"
    clean = fake(root, [
        ("cmd/genplane", "genplane", ["genplane-cmd-apiserver", "anyhow"]),
        ("cmd/apiserver", "genplane-cmd-apiserver", ["genplane-controlplane", "anyhow"]),
        ("pkg/controlplane", "genplane-controlplane", ["genplane-storage-sqlite"]),
        ("pkg/storage/sqlite", "genplane-storage-sqlite", ["genplane-storage"]),
        ("pkg/storage", "genplane-storage", []),
    ])
    assert check(clean) == [], check(clean)
    cases = [
        (("pkg/registry", "genplane-registry", ["genplane-cmd-apiserver"]), "must not depend on cmd"),
        (("pkg/registry", "genplane-registry", ["anyhow"]), "not anyhow"),
        (("pkg/storage", "genplane-storage", ["genplane-storage-sqlite"]), "must not depend on backend"),
        (("pkg/apimachinery", "genplane-apimachinery", ["tokio"]), "no async or I/O"),
        (("pkg/registry", "genplane-registry", ["genplane-storage-etcd"]), "choose a storage backend"),
        (("cmd/controller-manager", "genplane-cmd-controller-manager", ["genplane-cmd-apiserver"]), "depend on applet crate"),
        (("pkg/storage/etcd", "genplane-etcd", []), "expected genplane-storage-etcd"),
    ]
    for crate, expected in cases:
        broken = fake(root, [c for c in [
            ("cmd/genplane", "genplane", ["genplane-cmd-apiserver"]),
            ("cmd/apiserver", "genplane-cmd-apiserver", []),
            ("pkg/storage/sqlite", "genplane-storage-sqlite", []),
            ("pkg/storage/etcd", "genplane-storage-etcd", []),
            ("pkg/storage", "genplane-storage", []),
        ] if c[1] != crate[1]] + [crate])
        found = check(broken)
        assert any(expected in p for p in found), (crate, expected, found)


def main():
    if "--self-test" in sys.argv:
        self_test()
        return 0
    problems = check(json.load(sys.stdin))
    for p in problems:
        print(f"crate layering: {p}", file=sys.stderr)
    if problems:
        return 1
    print("crate layering: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
