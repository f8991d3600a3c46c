#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The C tree's shape, checked: circles of #include among files, circles of calls among modules
(a module is x.c with x.h: x.c calls a function y.c defines), and includes that break
HACKING.md's layer table. Calls come from the objects of a
build (nm: who defines a symbol, who uses it), so build first.
    tools/scripts/layers.py [BUILD_DIR]    (default build; exit 1 when something is wrong)"""
import glob
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = sys.argv[1] if len(sys.argv) > 1 else "build"
DIRS = ["sim", "sim/core", "sim/scn", "plugin", "tools/common", "tools/harness",
        "tools/nccljob", "tools/profcheck"]

# HACKING.md's table: what a folder's files may include, as path prefixes (or whole paths).
ALLOWED = {
    "sim/core": ["sim/core/"],
    "sim/scn": ["sim/core/", "sim/scn/"],
    "sim": ["sim/core/", "sim/scn/", "sim/"],
    "plugin": ["sim/core/", "plugin/"],
    "tools/common": [],
    "tools/harness": ["tools/harness/", "tools/common/", "plugin/ncclnet.h", "plugin/prof.h",
                      "sim/core/version.h", "sim/core/units.h"],
    "tools/nccljob": ["tools/nccljob/", "tools/common/", "sim/core/version.h", "sim/core/units.h"],
    "tools/profcheck": ["tools/profcheck/", "plugin/prof.h", "plugin/ncclnet.h",
                        "sim/core/jsonw.h"],
}


def module(path):
    return os.path.splitext(path)[0]


def files():
    out = []
    for d in DIRS:
        out += sorted(glob.glob(os.path.join(ROOT, d, "*.[ch]")))
    return [os.path.relpath(f, ROOT) for f in out]


def sccs(graph):
    """Tarjan's strongly connected components of more than one node."""
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
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
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def main():
    bad = 0
    srcs = files()
    inc_graph, layer_breaks = {}, []
    for f in srcs:
        folder = os.path.dirname(f)
        for line in open(os.path.join(ROOT, f), errors="replace"):
            m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
            if not m:
                continue
            target = m.group(1)
            if not os.path.exists(os.path.join(ROOT, target)):
                target = os.path.normpath(os.path.join(folder, target))
            if target != f:
                inc_graph.setdefault(f, set()).add(target)
            allowed = ALLOWED.get(folder, [])
            if not any(target == p or (p.endswith("/") and target.startswith(p)
                                       and (p != "sim/" or target.count("/") == 1 or
                                            target.startswith(("sim/core/", "sim/scn/"))))
                       for p in allowed):
                layer_breaks.append("%s includes %s" % (f, target))
    # calls: symbols defined in one module's object and used by another's
    defs, uses = {}, {}
    for f in srcs:
        if not f.endswith(".c"):
            continue
        obj = os.path.join(ROOT, BUILD, "obj", f[:-2] + ".o")
        if not os.path.exists(obj):
            obj = os.path.join(ROOT, BUILD, "pic", f[:-2] + ".o")
        if not os.path.exists(obj):
            continue
        nm = subprocess.run(["nm", obj], capture_output=True, text=True).stdout
        for line in nm.splitlines():
            parts = line.split()
            # functions only: a shared variable (the plugin's logger, its globals) is no call
            if len(parts) == 3 and parts[1] == "T":
                defs[parts[2]] = module(f)
            elif len(parts) == 2 and parts[0] == "U":
                uses.setdefault(module(f), set()).add(parts[1])
    call_graph = {}
    for m, syms in uses.items():
        for s in syms:
            d = defs.get(s)
            if d and d != m:
                call_graph.setdefault(m, set()).add(d)
    inc_circles, call_circles = sccs(inc_graph), sccs(call_graph)
    print("files: %d, modules: %d; include arrows: %d; call arrows: %d" % (
        len(srcs), len({module(f) for f in srcs}), sum(map(len, inc_graph.values())),
        sum(map(len, call_graph.values()))))
    for c in inc_circles:
        print("include circle: " + " <-> ".join(c))
    for c in call_circles:
        print("call circle: " + " <-> ".join(c))
    for b in layer_breaks:
        print("layer: " + b)
    bad = len(inc_circles) + len(call_circles) + len(layer_breaks)
    print("%d include circle(s), %d call circle(s), %d include(s) against the layers" % (
        len(inc_circles), len(call_circles), len(layer_breaks)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
