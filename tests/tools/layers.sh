#!/bin/bash
# layers.sh REPO BUILD — the layers of docs/architecture.md, checked where
# the compiler sees them:
#  1. include lines: each folder includes headers only of the layers below
#     it (ir < ir/passes < codegen, runtime < frontend/compile,
#     frontend/lua < frontend/tools < frontend/cli), and codegen/ and
#     runtime/ side by side include neither the other;
#  2. calls: the compile half's library (liblrc_compile.a) and the Lua
#     binding's (liblrc_lua.a) leave undefined no function of a layer above
#     them (cli_*, the tools' lrc_analyze/diagnose/sweep/plot_*, and for the
#     compile half the Lua binding's lrc_model_*, lrc_hf_*, lua_*);
#  3. cli_args, the command line's options, appears only in frontend/cli/;
#  4. no two files of frontend/ call one another in a circle (call_circles.py).
# Prints one line per breach, then a summary; exits 1 on any.
set -u
repo=${1:?usage: layers.sh REPO BUILD}
build=${2:?usage: layers.sh REPO BUILD}
here=$(cd "$(dirname "$0")" && pwd)
build=$(realpath "$build")
cd "$repo" || exit 2
bad=0
breach() { echo "layers: $*"; bad=$((bad + 1)); }

# the folders a folder's files may include from (besides their own)
allowed() {
  case $1 in
    ir) echo "ir" ;;
    ir/passes) echo "ir ir/passes" ;;
    codegen|codegen/*) echo "ir ir/passes codegen codegen/llvm codegen/cuda" ;;
    runtime|runtime/*) echo "ir runtime runtime/ref" ;;
    frontend/compile) echo "ir ir/passes codegen codegen/llvm codegen/cuda runtime frontend/compile" ;;
    frontend/lua) echo "ir ir/passes runtime frontend/lua" ;;
    frontend/tools) echo "ir ir/passes codegen codegen/llvm codegen/cuda runtime frontend/compile frontend/lua frontend/tools" ;;
    frontend/cli) echo "ir ir/passes codegen codegen/llvm codegen/cuda runtime frontend/compile frontend/lua frontend/tools frontend/cli" ;;
    *) echo "" ;;
  esac
}
n_files=0
while IFS= read -r f; do
  dir=${f%/*}
  ok=$(allowed "$dir")
  [ -n "$ok" ] || continue
  n_files=$((n_files + 1))
  while IFS= read -r inc; do
    # as the compiler finds it: beside the file, else from the repository's root
    if [ -e "$dir/$inc" ]; then target=$(realpath -m --relative-to=. "$dir/$inc"); else target=$(realpath -m --relative-to=. "$inc"); fi
    tdir=${target%/*}
    [ "$tdir" = "$target" ] && tdir=.
    case " $ok " in *" $tdir "*) ;; *) breach "$f includes $inc ($tdir is not below $dir)" ;; esac
  done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
done < <(git ls-files --cached --others --exclude-standard -- 'ir/*.[ch]' 'codegen/*.[ch]' 'runtime/*.[ch]' 'frontend/*.[ch]')

# undefined symbols of a static library that name a layer above it
calls_up() { # LIB REGEX
  local lib=$build/$1
  if [ ! -e "$lib" ]; then breach "$lib: not built"; return; fi
  nm -u "$lib" 2>/dev/null | awk '{print $NF}' | grep -E "$2" | sort -u | while read -r s; do echo "$1 calls $s"; done
}
up=$( { calls_up liblrc_compile.a '^(cli_|lrc_model_|lrc_hf_|lua_|luaL_|lrc_(analyze|diagnose|sweep|plot)_)';
        calls_up liblrc_lua.a '^(cli_|lrc_(analyze|diagnose|sweep|plot)_|lrc_compile_|lrc_target_)';
        [ -e "$build/liblrc_tools.a" ] && calls_up liblrc_tools.a '^cli_'; } )
[ -n "$up" ] && while IFS= read -r l; do breach "$l"; done <<<"$up"

while IFS= read -r l; do breach "cli_args outside frontend/cli/: $l"; done < <(git grep -n 'cli_args' -- ir codegen runtime frontend ':!frontend/cli')

while IFS= read -r l; do breach "$l"; done < <("$here"/call_circles.py "$build" frontend/cli frontend/tools frontend/compile frontend/lua | grep '^circle' || true)

echo "layers: $n_files files, $bad breaches"
[ "$bad" -eq 0 ]
