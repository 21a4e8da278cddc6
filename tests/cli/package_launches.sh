#!/usr/bin/env bash
# package_launches.sh — a cpu package whose package.json was edited so that
# a launch no longer matches the kernel compiled for it: more items, its
# argument list shifted or rotated, another buffer's size, flags or symbol,
# a launch dropped or added. Before the loader checked the plan against the
# launch table kernels.so holds, these crashed in a kernel (SIGSEGV, or
# glibc's abort on a heap it overwrote) or ran and gave wrong logits; each
# must now end in one line naming package.json, the launch and the key, exit
# 1 (the rule and the checks of errors.sh, error_harness.sh). And the edits
# the package fuzzer found (package_fuzz, tests/unit/fuzz_package.c): a
# target that is neither cpu nor cuda (a call of a kernel never loaded: a
# SIGSEGV), sizes no machine holds (an arena, an output no launch writes:
# an allocator that ends the process), and a looped model's default
# iteration count of 2^31 - 1 (a run that never ends).
#
#   tests/cli/package_launches.sh PATH_TO_LRC MODELS_DIR
set -u
export LC_ALL=C
if [ $# -ne 2 ] || [ ! -x "$1" ]; then
  echo "usage: $0 PATH_TO_LRC MODELS_DIR" >&2
  exit 2
fi
LRC=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
MODELS=$(cd "$2" && pwd)
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PY=${PYTHON:-python3}
VERBOSE=${LRC_TESTS_VERBOSE:-0}
# shellcheck source=error_harness.sh
. "$ROOT/tests/cli/error_harness.sh"

"$PY" "$ROOT/tests/tools/st.py" make in.safetensors '{"tokens": ["I32", [1, 8], [3, 1, 4, 1, 5, 9, 2, 6]]}' ||
  { echo "package_launches.sh: st.py failed" >&2; exit 2; }
"$LRC" init "$MODELS/llama.lua" --preset tiny --seed 1 -o w.safetensors >/dev/null &&
  "$LRC" compile "$MODELS/llama.lua" --preset tiny --target cpu --weights w.safetensors --batch 1 --seq 8 -o pkg >/dev/null &&
  "$LRC" compile "$MODELS/llama.lua" --preset tiny --target cpu --batch 1 --seq 8 -o bare >/dev/null &&
  "$LRC" init "$MODELS/parcae.lua" --preset tiny --seed 1 -o lw.safetensors >/dev/null &&
  "$LRC" compile "$MODELS/parcae.lua" --preset tiny --target cpu --weights lw.safetensors --batch 1 --seq 8 -o loop >/dev/null ||
  { echo "package_launches.sh: compiling the packages failed" >&2; exit 2; }

# mut SRC DST PYTHON: a copy of package SRC as DST, its package.json edited
# by the Python statements (d: the document, L: its launches, B: its buffers)
mut() {
  rm -rf "$2"
  cp -r "$1" "$2"
  "$PY" - "$2/package.json" "$3" <<'PYEOF' || { echo "package_launches.sh: editing $2 failed" >&2; exit 2; }
import json, sys
p, code = sys.argv[1], sys.argv[2]
d = json.load(open(p))
L, B = d["launches"], d["buffers"]
def first(kind):  # the index of the first launch whose symbol ends with kind
    return next(i for i, l in enumerate(L) if l["symbol"].endswith(kind))
exec(code)
json.dump(d, open(p, "w"), indent=1)
PYEOF
}
fwd() { echo forward "$1" --input in.safetensors -o out.safetensors; }
fwdw() { echo forward "$1" --weights w.safetensors --input in.safetensors -o out.safetensors; } # a package without weights
J='package\.json: launch '

ok "the package as compiled runs" $(fwd pkg)
ok "the package without weights (its pack launches kept) runs" $(fwdw bare)

mut pkg items 'L[0]["items"] = 65536'
t "a launch's items raised to 65536" 1 "items/${J}0 \(k0_opaque\): items = 65536" 'compiled for 8' -- $(fwd items)
mut pkg fewer 'L[0]["items"] = 4'
t "a launch's items lowered" 1 "${J}0 .*items = 4, the kernel was compiled for 8" -- $(fwd fewer)
mut pkg shift 'A = L[0]["args"]; L[0]["args"] = A[1:] + A[-1:]'
t "a launch's arguments shifted by one" 1 "${J}0 .*args\[0\] = buffer" -- $(fwd shift)
mut pkg shiftr 'i = first("gemm"); A = L[i]["args"]; L[i]["args"] = A[:1] + A[:-1]'
t "a gemm's arguments shifted right by one" 1 "${J}[0-9]+ \(k[0-9]+_gemm\): args\[1\] = buffer" -- $(fwd shiftr)
mut pkg rot8 'A = L[8]["args"]; L[8]["args"] = A[1:] + A[:1]'
t "a gemm's arguments rotated (a heap overrun before)" 1 "${J}8 .*args\[0\] = buffer" -- $(fwd rot8)
mut pkg rot9 'A = L[9]["args"]; L[9]["args"] = A[1:] + A[:1]'
t "a gemm's arguments rotated (wrong logits before)" 1 "${J}9 .*args\[0\] = buffer" -- $(fwd rot9)
mut pkg rotatt 'i = first("attention"); A = L[i]["args"]; L[i]["args"] = A[1:3] + A[:1] + A[3:]'
t "attention's q, k, v rotated" 1 "${J}[0-9]+ \(k[0-9]+_attention\): args\[0\] = buffer" -- $(fwd rotatt)
mut pkg fewargs 'L[1]["args"] = L[1]["args"][:-1]'
t "a launch with an argument fewer" 1 "${J}1 .*args has 1 buffers, the kernel was compiled for 2" -- $(fwd fewargs)
mut pkg moreargs 'L[1]["args"] = L[1]["args"] + [0]'
t "a launch with an argument more" 1 "${J}1 .*args has 3 buffers, the kernel was compiled for 2" -- $(fwd moreargs)
mut pkg bigbuf 'b = L[1]["args"][1]; B[b]["shape"] = [1, 16, B[b]["shape"][-1]]; B[b]["bytes"] *= 2; d["arena_bytes"] = max(d["arena_bytes"], (B[b]["offset"] + B[b]["bytes"] + 63) // 64 * 64)'
t "an argument's buffer made larger" 1 "${J}1 .*args\[1\], buffer [0-9]+, has [0-9]+ bytes of f32, the kernel was compiled for" -- $(fwd bigbuf)
mut pkg dtype 'B[L[1]["args"][1]]["dtype"] = "I32"'
t "an argument's buffer made i32" 1 "${J}1 .*args\[1\], buffer [0-9]+, has [0-9]+ bytes of i32, the kernel was compiled for [0-9]+ bytes of f32" -- $(fwd dtype)
mut pkg symbol 'i = first("attention"); L[1]["symbol"], L[i]["symbol"] = L[i]["symbol"], L[1]["symbol"]'
t "two launches' symbols swapped" 1 "${J}1: symbol 'k[0-9]+_attention' is not the kernel compiled for this launch" -- $(fwd symbol)
mut pkg steal 'L[0]["steal"] = True'
t "a launch marked steal" 1 "${J}0 .*steal = true" -- $(fwd steal)
mut pkg dropped 'del L[3]'
t "a launch dropped" 1 "${J}3 " -- $(fwd dropped)
mut pkg added 'L.append(dict(L[-1]))'
t "a launch added" 1 "${J}[0-9]+: not a launch the kernels were compiled for" -- $(fwd added)
mut bare bareitems 'i = next(i for i, l in enumerate(L) if l.get("once")); L[i]["items"] = L[i]["items"] * 64'
t "a pack launch's items raised" 1 "bareitems/${J}[0-9]+ \(pack[0-9]*\): items = " -- $(fwdw bareitems)
mut bare bareonce 'i = next(i for i, l in enumerate(L) if l.get("once")); L[i]["once"] = False'
t "a pack launch no longer once" 1 "${J}[0-9]+ .*once = false" -- $(fwdw bareonce)

mut pkg target 'd["meta"]["target"] = ""'
t "meta.target empty (a crash before)" 1 "target/${J%launch }meta\.target '' is not cpu or cuda" -- $(fwd target)
mut pkg target2 'd["meta"]["target"] = 7'
t "meta.target a number" 1 "meta\.target is not a string" -- $(fwd target2)
mut pkg arena 'd["arena_bytes"] = 2**40'
t "arena_bytes = 2^40 (an allocator's failure before)" 1 "arena/${J%launch }arena_bytes = 1099511627776, more than the [0-9]+ bytes its buffers take" -- $(fwd arena)
mut pkg bigout 'o = dict(next(b for b in B if b["kind"] == "output")); o["name"] = "huge"; o["shape"] = [2**19, 2**19]; o["bytes"] = 2**40; B.append(o)'
t "an output no launch writes of 2^40 bytes (an allocator's failure before)" 1 \
  "bigout/${J%launch }the plan allocates [0-9]+ bytes \(buffer [0-9]+ the most, 1099511627776\), more than this machine's [0-9.]+ GB of memory" -- $(fwd bigout)
mut loop iters 'd["meta"]["iterations"] = 2**31 - 1'
t "meta.iterations = 2^31 - 1 (a run without end before)" 1 "iters/${J%launch }meta\.iterations = 2147483647, more than 4096" -- $(fwd iters)
ok "a looped package with its default iterations runs" $(fwd loop)
t "a looped model compiled with T = 5000" 1 "T = 5000: a package runs at most 4096 iterations by default" -- \
  compile "$MODELS/parcae.lua" --preset tiny --set T=5000 --target cpu --batch 1 --seq 8 -o loop5000

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
