#!/usr/bin/env python3
"""call_circles.py BUILD DIR... — files that call one another in a circle.

Reads the object files the build made of the sources under each DIR (nm:
the symbols each defines and leaves undefined), draws an edge from a file
to every file whose function or table it uses, and prints each circle (a
strongly connected set of two or more files) with its edges. Exits 1 when
there is one: two files that call each other are one concept, and a layer
split into files must not circle back (docs/architecture.md)."""
import collections
import glob
import os
import subprocess
import sys

sys.setrecursionlimit(100000)
build, dirs = sys.argv[1], sys.argv[2:]
objs = []
for d in dirs:
    objs += glob.glob(os.path.join(build, 'CMakeFiles', '*.dir', d, '*.o'))
defs, undef = {}, collections.defaultdict(set)
for o in objs:
    name = o.split('.dir' + os.sep, 1)[1][:-len('.c.o')]
    for line in subprocess.run(['nm', o], capture_output=True, text=True, check=True).stdout.splitlines():
        p = line.split()
        if len(p) == 3 and p[1] in 'TDBRC':
            defs[p[2]] = name
        elif len(p) == 2 and p[0] == 'U':
            undef[name].add(p[1])
edges = collections.defaultdict(set)
for name, syms in undef.items():
    edges[name] |= {defs[s] for s in syms if s in defs and defs[s] != name}
index, low, stack, on, circles = {}, {}, [], set(), []


def visit(v):
    index[v] = low[v] = len(index)
    stack.append(v)
    on.add(v)
    for w in edges[v]:
        if w not in index:
            visit(w)
            low[v] = min(low[v], low[w])
        elif w in on:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        c = []
        while True:
            w = stack.pop()
            on.discard(w)
            c.append(w)
            if w == v:
                break
        if len(c) > 1:
            circles.append(sorted(c))


for v in sorted(set(edges) | set(defs.values())):
    if v not in index:
        visit(v)
for c in circles:
    print('circle: ' + '; '.join(f"{a} -> {', '.join(sorted(x for x in edges[a] if x in c))}" for a in c))
print(f'call_circles: {len(objs)} objects under {" ".join(dirs)}, {len(circles)} circles')
sys.exit(1 if circles or not objs else 0)
