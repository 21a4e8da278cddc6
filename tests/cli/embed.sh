#!/bin/bash
# embed.sh BUILD LRC MODEL CMAKE [SANITIZE] — the embedding API as a user
# gets it: `cmake --install` into a scratch prefix, examples/generate.c built
# with pkg-config alone (and again with CMake's find_package(lrc)), run on
# cpu and cuda (the emulator of tests/cuemu when the environment has it)
# decoder packages, its text byte for byte what `lrc generate
# --temperature 0` prints for the same package and prompt; and ldd of the
# library and of the example: liblrc, and no LLVM, Lua or NVRTC. The cpu
# package's plan marks its gemm and attention launches, and only those,
# as stealing (items any thread may run).
# SANITIZE=ON: the library is instrumented, so the example is built with
# the sanitizers too (a program linking it needs their runtime).
build=$1 lrc=$2 model=$3 cmake=$4 sanitize=${5:-OFF}
source "$(dirname "$0")/../tools/check.sh"
src=$(cd "$(dirname "$0")/../.." && pwd)
inst=$dir/prefix
"$cmake" --install "$build" --prefix "$inst" >"$dir/install.txt" 2>&1
st=$?
check "cmake --install exits 0" "[ $st = 0 ]"
libdir=$(dirname "$(find "$inst" -name liblrc.so | head -1)")
check "installed: include/lrc.h, liblrc.so, lrc.pc, lrcConfig.cmake, lrcConfigVersion.cmake" \
  "[ -f '$inst/include/lrc.h' ] && [ -e '$libdir/liblrc.so' ] && [ -f '$libdir/pkgconfig/lrc.pc' ] &&
   [ -f '$libdir/cmake/lrc/lrcConfig.cmake' ] && [ -f '$libdir/cmake/lrc/lrcConfigVersion.cmake' ]"
extra=()
[ "$sanitize" = ON ] && extra=(-fsanitize=address,undefined)
flags=$(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags --libs lrc)
check "pkg-config --cflags --libs lrc ($flags)" "[ -n '$flags' ]"
# shellcheck disable=SC2086
cc -std=c11 -Wall -Wextra -Werror "${extra[@]}" "$src/examples/generate.c" $flags -o "$dir/generate" 2>"$dir/cc.txt"
check "the example builds with pkg-config alone: $(head -1 "$dir/cc.txt")" "[ -x '$dir/generate' ]"
check "the example is under 100 lines" "[ $(wc -l <"$src/examples/generate.c") -lt 100 ]"
"$cmake" -S "$src/examples" -B "$dir/ex" -DCMAKE_PREFIX_PATH="$inst" -DCMAKE_C_FLAGS="${extra[*]}" >"$dir/ex.txt" 2>&1 &&
  "$cmake" --build "$dir/ex" >>"$dir/ex.txt" 2>&1
check "the example builds with find_package(lrc) and lrc::lrc: $(grep -m1 -i error "$dir/ex.txt")" "[ -x '$dir/ex/generate' ]"
export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

for lib in "$libdir/liblrc.so" "$dir/generate"; do
  ldd "$lib" >"$dir/ldd.txt" 2>&1
  sed 's/^/    /' "$dir/ldd.txt"
  check "ldd $(basename "$lib"): no LLVM, Lua or NVRTC" "! grep -qiE 'libLLVM|liblua|libnvrtc' '$dir/ldd.txt'"
  check "ldd $(basename "$lib"): resolves everything" "! grep -q 'not found' '$dir/ldd.txt'"
done
check "ldd generate: liblrc from the installed tree" "ldd '$dir/generate' | grep -q 'liblrc\.so.* => $libdir/'"
check "ldd of the lrc command does list LLVM (so the check above can fail)" "ldd '$lrc' | grep -qi libLLVM"

"$lrc" init "$model" --preset tiny --seed 7 -o "$dir/w.st" >/dev/null
prompt="In the beginning God"
targets=(cpu)
[ -n "${LRC_CUEMU_DIR:-}" ] && targets+=(cuda) # the emulated GPU
for t in "${targets[@]}"; do
  opt=(); [ "$t" = cuda ] && opt=(--precision f32)
  "$lrc" compile "$model" --preset tiny --weights "$dir/w.st" --target "$t" "${opt[@]}" --ctx 64 -o "$dir/pkg_$t" >/dev/null
  if [ "$t" = cpu ]; then # the launches whose items threads may take from each other (lrc_pool_run_stealing)
    awk -F'"' '/"label":/ {l = $4; s = 0} /"steal":/ {s = 1} /"bytes":/ && l != "" {print s, l; l = ""}' \
      "$dir/pkg_$t/package.json" | sed 's/ (.*//' | sort -u >"$dir/steal.txt"
    check "package.json: every gemm and attention launch steals, no row or opaque one: $(tr '\n' ';' <"$dir/steal.txt")" \
      "grep -q '^1 gemm' '$dir/steal.txt' && grep -q '^1 attention' '$dir/steal.txt' && ! grep -qE '^0 (gemm|attention)|^1 (row|opaque)' '$dir/steal.txt'"
  fi
  "$lrc" generate "$dir/pkg_$t" --prompt "$prompt" -n 40 --temperature 0 >"$dir/cli_$t.txt" 2>/dev/null
  st=$?
  check "$t: lrc generate exits 0" "[ $st = 0 ]"
  for ex in "$dir/generate" "$dir/ex/generate"; do
    "$ex" "$dir/pkg_$t" "$prompt" 40 >"$dir/ex_$t.txt" 2>"$dir/ex_$t.err"
    st=$?
    check "$t: $(basename "$(dirname "$ex")")/generate exits 0: $(head -1 "$dir/ex_$t.err")" "[ $st = 0 ]"
    check "$t: its text is lrc generate's, byte for byte ($(wc -c <"$dir/cli_$t.txt") bytes)" \
      "[ $(wc -c <"$dir/cli_$t.txt") = $((${#prompt} + 41)) ] && cmp -s '$dir/ex_$t.txt' '$dir/cli_$t.txt'"
  done
done
# a failed open: the example prints the API's one-line message
"$dir/generate" "$dir/nope" "$prompt" 4 >/dev/null 2>"$dir/err.txt"
st=$?
check "a missing package: exit 1 and one line naming it ($(cat "$dir/err.txt"))" \
  "[ $st = 1 ] && [ $(wc -l <"$dir/err.txt") = 1 ] && grep -q 'nope: not an lrc package' '$dir/err.txt'"
"$dir/generate" "$dir/pkg_cpu" "$prompt" 60 >/dev/null 2>"$dir/err.txt"
st=$?
# (the example's own check, against the context lrc_session_describe reports)
check "a prompt and N past the context: exit 1, the described context 64 ($(cat "$dir/err.txt"))" "[ $st = 1 ] && grep -q 'holds 64 positions' '$dir/err.txt'"
summary
