#!/usr/bin/env python3
"""Lists the public items of a crate from its `cargo doc` output (target/doc/<crate>/all.html).

    cargo doc -p tern --no-deps && python3 scripts/public_items.py [--list] [target/doc/tern/all.html]

Prints the count per kind and per top-level module; `--list` prints every item path too.
"""
import collections
import re
import sys


def items(html):
    found = collections.OrderedDict()
    for m in re.finditer(r'<h3 id="([a-z-]+)">[^<]*</h3><ul class="all-items">(.*?)</ul>', html, re.S):
        found[m.group(1)] = re.findall(r'<a href="[^"]*">([^<]*)</a>', m.group(2))
    return found


def main(argv):
    show = "--list" in argv
    paths = [a for a in argv if a != "--list"] or ["target/doc/tern/all.html"]
    for path in paths:
        with open(path, encoding="utf-8") as f:
            found = items(f.read())
        total = sum(len(v) for v in found.values())
        print(f"{path}: {total} public items")
        print("  by kind:", ", ".join(f"{k} {len(v)}" for k, v in found.items()))
        modules = collections.Counter(i.split("::")[0] if "::" in i else "(root)" for v in found.values() for i in v)
        print("  by module:", ", ".join(f"{k} {n}" for k, n in sorted(modules.items())))
        if show:
            for kind, names in found.items():
                for n in names:
                    print(f"  {kind[:-1]} {n}")


if __name__ == "__main__":
    main(sys.argv[1:])
