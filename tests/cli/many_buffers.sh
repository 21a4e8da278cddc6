#!/bin/bash
# many_buffers.sh LRC ST_COMPARE — kernels with far more than 64 arguments:
# an elementwise group of 152 buffers (models/many_buffers.lua: an embedding
# plus 150 parameter adds) and a recurrence h = a_t * h + b_t unrolled over
# 64 positions (models/recurrence64.lua), each run on cpu (JIT, and a
# compiled package) against ref within 1e-5. The plan once copied a launch's
# arguments into 64 slots and the package loader refused more than 64: the
# kernel then read past them and crashed. The cuda target compiles both
# (its renderer and executor take any count); where a GPU is present they
# also run there, against ref within 2e-2 (bf16).
set -u
if [ $# -ne 2 ] || [ ! -x "$1" ] || [ ! -x "$2" ]; then
  echo "usage: $0 PATH_TO_LRC PATH_TO_ST_COMPARE" >&2
  exit 2
fi
lrc=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
compare=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
models=$(cd "$(dirname "$0")/models" && pwd)
st=$(cd "$(dirname "$0")/../tools" && pwd)/st.py
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 2
passed=0 failed=0
check() {
  if eval "$2"; then
    passed=$((passed + 1))
    [ "${LRC_TEST_VERBOSE:-0}" != 0 ] && echo "ok   $1"
  else
    failed=$((failed + 1))
    echo "FAIL $1"
  fi
}
# the most arguments of one launch in package $1 (a cpu package's plan)
most_args() { python3 -c 'import json, sys; print(max(len(l["args"]) for l in json.load(open(sys.argv[1]))["launches"]))' "$1/package.json"; }
tokens() { # tokens OUT B T
  python3 "$st" make "$1" "{\"tokens\": [\"I32\", [$2, $3], [$(seq -s, 1 $(($2 * $3)) | awk -F, '{for (i = 1; i <= NF; i++) printf "%s%d", (i > 1 ? ", " : ""), (7 * $i + 3) % 32}')]]}"
}
gpu=no
"$lrc" devices 2>/dev/null | grep -q '^target cuda, run: available' && gpu=yes

for case in "many_buffers 2 16" "recurrence64 2 64"; do
  read -r m B T <<<"$case"
  tokens in_$m.safetensors "$B" "$T"
  check "$m: lrc init" "'$lrc' init '$models/$m.lua' --seed 7 -o w_$m.safetensors >/dev/null"
  check "$m: forward on ref" \
    "'$lrc' forward '$models/$m.lua' --weights w_$m.safetensors --input in_$m.safetensors -o ref_$m.safetensors --target ref >/dev/null"
  check "$m: forward on cpu (JIT)" \
    "'$lrc' forward '$models/$m.lua' --weights w_$m.safetensors --input in_$m.safetensors -o cpu_$m.safetensors --target cpu >/dev/null 2>&1"
  check "$m: cpu within 1e-5 of ref" "'$compare' cpu_$m.safetensors ref_$m.safetensors logits 1e-5 >/dev/null"
  check "$m: a cpu package compiles" \
    "'$lrc' compile '$models/$m.lua' --target cpu --weights w_$m.safetensors --batch $B --seq $T -o pkg_$m >/dev/null"
  n=$(most_args pkg_$m 2>/dev/null || echo 0)
  echo "$m: the widest launch has $n arguments"
  check "$m: a launch of the package has more than 64 arguments ($n)" "[ '$n' -gt 64 ]"
  check "$m: the package runs" "'$lrc' forward pkg_$m --input in_$m.safetensors -o pkgout_$m.safetensors >/dev/null"
  check "$m: the package within 1e-5 of ref" "'$compare' pkgout_$m.safetensors ref_$m.safetensors logits 1e-5 >/dev/null"
  check "$m: a cuda package compiles" \
    "'$lrc' compile '$models/$m.lua' --target cuda --arch sm_90 --weights w_$m.safetensors --batch $B --seq $T -o cu_$m >/dev/null"
  if [ $gpu = yes ]; then
    check "$m: forward on cuda" \
      "'$lrc' forward '$models/$m.lua' --weights w_$m.safetensors --input in_$m.safetensors -o cuda_$m.safetensors --target cuda >/dev/null 2>&1"
    check "$m: cuda within 2e-2 of ref" "'$compare' cuda_$m.safetensors ref_$m.safetensors logits 2e-2 >/dev/null"
  fi
done
[ $gpu = yes ] || echo "skip: no GPU here, the cuda runs were not made (the cuda packages were compiled)"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
