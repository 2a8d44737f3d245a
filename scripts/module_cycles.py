#!/usr/bin/env python3
"""Import cycles between the modules of a Rust crate.

Reads every `crate::a::b` path in a crate's sources (in `use` lines and in code, tests
excluded: `#[cfg(test)]` modules and `tests.rs` files may reach anywhere), maps each file to its
module (`src/energy/control.rs` -> `energy::control`), and reports the strongly connected
components of the graph "module M names module N" at the given depth (1: top-level modules
such as `energy`, `engine`; 2: `energy::control` too). A file's module names its parent freely
(`super::`), so edges from a module to its own ancestors are left out.

    python3 scripts/module_cycles.py sdk/core/src [--depth 2]

Exits with 1 when there is a cycle, printing each one.
"""
import os
import re
import sys

PATH = re.compile(r"\bcrate::((?:[a-z_][a-z0-9_]*::)*[a-z_][a-z0-9_]*)")
GROUP = re.compile(r"\bcrate::((?:[a-z_][a-z0-9_]*::)*)\{([^}]*)\}")


def module_of(root, path):
    rel = os.path.relpath(path, root)[:-3].split(os.sep)
    if rel[-1] in ("mod", "lib", "main"):
        rel = rel[:-1]
    return rel


def strip_tests(text):
    """Drops `#[cfg(test)] mod NAME { ... }` blocks (brace-matched) from a source file."""
    out, i = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]\s*(?:pub(?:\([a-z]+\))?\s+)?mod\s+\w+\s*\{", text):
        if m.start() < i:
            continue
        out.append(text[i:m.start()])
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        i = j
    out.append(text[i:])
    return "".join(out)


def edges(root, depth):
    graph = {}
    for dirpath, _, files in os.walk(root):
        for f in files:
            if not f.endswith(".rs") or f.endswith("tests.rs"):
                continue
            path = os.path.join(dirpath, f)
            src = module_of(root, path)
            if not src:
                continue  # lib.rs: the crate root re-exports everything
            text = strip_tests(open(path, encoding="utf-8").read())
            text = re.sub(r"//[^\n]*", "", text)
            names = [m.group(1) for m in PATH.finditer(text)]
            for m in GROUP.finditer(text):
                prefix = m.group(1)
                for item in m.group(2).split(","):
                    item = item.strip().split(" ")[0]
                    if item:
                        names.append(prefix + item)
            a = tuple(src[:depth])
            for name in names:
                parts = name.split("::")
                b = tuple(parts[:depth])
                # Only module names count: `crate::Error` at the root is an item, not a module.
                if not os.path.exists(os.path.join(root, *b) + ".rs") and not os.path.isdir(os.path.join(root, *b)):
                    b = tuple(parts[: depth - 1]) if depth > 1 else ()
                if not b or a[: len(b)] == b or b[: len(a)] == a:
                    continue
                graph.setdefault(a, set()).add(b)
    return graph


def cycles(graph):
    """Tarjan's strongly connected components with more than one module."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]
    nodes = set(graph) | {b for bs in graph.values() for b in bs}

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
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
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def main():
    args = sys.argv[1:]
    depth = 1
    if "--depth" in args:
        i = args.index("--depth")
        depth = int(args[i + 1])
        del args[i : i + 2]
    if len(args) != 1:
        sys.exit(__doc__)
    graph = edges(args[0], depth)
    found = cycles(graph)
    for comp in found:
        names = ["::".join(c) for c in comp]
        print("cycle:", " <-> ".join(names))
        for a in comp:
            for b in sorted(graph.get(a, ())):
                if b in comp:
                    print(f"  {'::'.join(a)} -> {'::'.join(b)}")
    if not found:
        print(f"no import cycles among the modules of {args[0]} (depth {depth})")
    sys.exit(1 if found else 0)


if __name__ == "__main__":
    main()
