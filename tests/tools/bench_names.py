#!/usr/bin/env python3
"""bench_names.py BENCH_DIR — no script in bench/ takes the name of a module of
Python's standard library. A script's folder comes first on sys.path, so
bench/tokenize.py stood in for the standard `tokenize`, which torch imports:
every bench script that imports torch failed ("No module named 'tokenizers'")."""
import os
import sys

bench = sys.argv[1]
clash = sorted(f for f in os.listdir(bench) if f.endswith(".py") and f[:-3] in sys.stdlib_module_names)
for f in clash:
    print("FAIL: bench/%s shadows the standard library's %s for every script beside it" % (f, f[:-3]))
print("%d passed, %d failed" % (0 if clash else 1, len(clash)))
sys.exit(1 if clash else 0)
