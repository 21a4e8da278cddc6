#!/bin/sh
# liblrc_no_exit.sh LIBLRC — the embedding library never ends its host:
# it imports none of exit, _exit, _Exit, abort or quick_exit, so no path in
# it can call them (lrc.h: "never an abort"; only the CLI's own helpers,
# ir/xalloc.c's among them, may exit; assertions guard internal
# invariants only, as in the rest of lrc). A match names the symbol, and
# `nm -A` on the static libraries finds the object that brings it in.
set -eu
lib=$1
[ -f "$lib" ] || { echo "no library at $lib"; exit 1; }
# every symbol the library imports, with a version suffix or not
syms=$(nm -D --undefined-only "$lib" | awk '{print $NF}' | sed 's/@.*//')
[ -n "$syms" ] || { echo "$lib imports nothing: not a dynamic library nm can read?"; exit 1; }
bad=$(printf '%s\n' "$syms" | grep -xE 'exit|_exit|_Exit|abort|quick_exit' || true)
if [ -n "$bad" ]; then
    echo "$lib imports what ends its host: $(echo $bad)"
    exit 1
fi
echo "$lib imports none of exit, _exit, _Exit, abort, quick_exit ($(printf '%s\n' "$syms" | wc -l) imports)"
