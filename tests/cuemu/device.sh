#!/bin/bash
# device.sh LRC MODEL ST_COMPARE — the cuda target's run-time behaviour that
# needs a device, on the host emulator: out of device memory (forward,
# backward, train: one line, exit status 1, no run directory left), a
# driver too old for CUDA 13, a kernel that faults (the launches named), a
# package for a newer architecture than the device's (one line, status 1),
# one for an older one (runs its PTX, the same logits as its cubin), the
# residual GEMMs where cuBLASLt has no algorithm or no room for its
# workspace (the same logits), lrc
# profile of a package and of a model (the table, every launch in the
# trace), LRC_PROFILE of lrc backward, lrc generate of a cuda decoder
# package against the cpu's, and the plans run as CUDA graphs.
# Training on cuda is train.sh's.
set -u
lrc=$1 model=$2 compare=$3
source "$(dirname "$0")/common.sh"
tokens "$out/in.st" 2 16
printf 'In the beginning God created the heaven and the earth. %.0s' $(seq 1 200) >"$out/text.txt"
"$lrc" init "$model" --preset tiny --seed 1 -o "$out/w.st" >/dev/null
"$lrc" compile "$model" --preset tiny --target cuda --arch sm_90 --weights "$out/w.st" --batch 2 --seq 16 -o "$out/pkg" >/dev/null ||
  { echo "FAIL: lrc compile --target cuda"; exit 1; }

# expect STATUS PATTERN CMD...: the exit status, and one line on stderr matching PATTERN
expect() {
  local want=$1 pat=$2
  shift 2
  "$@" >"$out/stdout" 2>"$out/stderr"
  local rc=$? lines
  lines=$(wc -l <"$out/stderr")
  if [ $rc != "$want" ] || [ "$lines" != 1 ] || ! grep -q -- "$pat" "$out/stderr"; then
    echo "FAIL ($rc, $lines lines): $*"
    cat "$out/stderr"
    failed=1
  else
    echo "ok: $(cat "$out/stderr")"
  fi
}

export LRC_CUEMU_MEMORY=100000 # bytes: less than the arena of any of these
expect 1 'out of device memory' "$lrc" forward "$out/pkg" --input "$out/in.st" -o "$out/o.st"
expect 1 'out of device memory' "$lrc" backward "$model" --preset tiny --weights "$out/w.st" --input "$out/in.st" -o "$out/g.st" --target cuda
expect 1 'out of device memory' "$lrc" train "$model" --preset tiny --steps 2 --lr 1e-3 --batch 2 --seq 16 --data "$out/text.txt" \
  --target cuda -o "$out/run_oom"
[ -e "$out/run_oom" ] && { echo "FAIL: a failed cuda train left $out/run_oom"; failed=1; }
[ -e "$out/o.st" ] && { echo "FAIL: a failed forward wrote its output"; failed=1; }
unset LRC_CUEMU_MEMORY

# a driver too old for CUDA 13 (12.8 here): one line naming its version,
# the one needed and what to install, before anything is loaded
LRC_CUEMU_DRIVER=12080 expect 1 'supports CUDA 12\.8.* need 13\.0 or newer: install a newer NVIDIA driver (the 580' \
  "$lrc" forward "$out/pkg" --input "$out/in.st" -o "$out/o.st"
LRC_CUEMU_DRIVER=12080 expect 1 'supports CUDA 12\.8' "$lrc" train "$model" --preset tiny --steps 2 --lr 1e-3 --batch 2 --seq 16 \
  --data "$out/text.txt" --target cuda -o "$out/run_old"
[ -e "$out/o.st" ] || [ -e "$out/run_old" ] && { echo "FAIL: a run refused for its driver left output behind"; failed=1; }
# a kernel that faults (the emulator's LRC_CUEMU_FAULT: the launch succeeds,
# every wait after it fails, as on a GPU): the error says which launches
# ran since the last synchronize and how to name the one; LRC_CUDA_SYNC=1
# (and LRC_CUDA_CHECK=1, which the tests set) name it
attn=$(python3 -c "import json, sys; print(next(l['symbol'] for l in json.load(open(sys.argv[1]))['launches'] if 'attention' in l['label']))" "$out/pkg/package.json")
LRC_CUDA_CHECK=0 LRC_CUEMU_FAULT=$attn expect 1 "a kernel failed (CUDA_ERROR_ILLEGAL_ADDRESS) in launches 0 '.*' to [0-9]* '.*', since the last synchronize: LRC_CUDA_SYNC=1" \
  "$lrc" forward "$out/pkg" --input "$out/in.st" -o "$out/o.st"
LRC_CUDA_CHECK=0 LRC_CUDA_SYNC=1 LRC_CUEMU_FAULT=$attn expect 1 "launch [0-9]* 'attention .*' failed: CUDA_ERROR_ILLEGAL_ADDRESS" \
  "$lrc" forward "$out/pkg" --input "$out/in.st" -o "$out/o.st"
LRC_CUEMU_FAULT=$attn expect 1 "launch [0-9]* 'attention .*' failed: CUDA_ERROR_ILLEGAL_ADDRESS" "$lrc" forward "$out/pkg" --input "$out/in.st" -o "$out/o.st"
[ -e "$out/o.st" ] && { echo "FAIL: a run whose kernel faulted wrote its output"; failed=1; }
LRC_CUEMU_SM=80 expect 1 'compile it again with --arch sm_80' "$lrc" forward "$out/pkg" --input "$out/in.st" -o "$out/o.st"
"$lrc" forward "$out/pkg" --input "$out/in.st" -o "$out/sm90.st" >/dev/null &&
  LRC_CUEMU_SM=100 "$lrc" forward "$out/pkg" --input "$out/in.st" -o "$out/sm100.st" >/dev/null &&
  cmp "$out/sm90.st" "$out/sm100.st" && echo "ok: an sm_90 package on an sm_100 device runs its PTX, the same logits" ||
  { echo "FAIL: the sm_90 package on sm_100 (its PTX)"; failed=1; }
# the package stores what the device keeps in bf16 as BF16 (half the
# file), rounded as the upload rounds, and uploads it as it is: the same
# logits as from that file widened to F32, which the upload rounds again
dtypes=$(py dtypes "$out/pkg/weights.safetensors")
[[ $dtypes == BF16\ * ]] && echo "ok: the cuda package's weights: $dtypes" || { echo "FAIL: the cuda package's weights are $dtypes"; failed=1; }
cp -r "$out/pkg" "$out/pkg_f32" && py widen "$out/pkg/weights.safetensors" "$out/pkg_f32/weights.safetensors" &&
  "$lrc" forward "$out/pkg_f32" --input "$out/in.st" -o "$out/wide.st" >/dev/null && cmp -s "$out/sm90.st" "$out/wide.st" &&
  echo "ok: BF16 weights uploaded as they are, the same logits as F32 ones rounded on upload" ||
  { echo "FAIL: the package's BF16 weights against the same widened to F32"; failed=1; }
# a package without weights takes a BF16 checkpoint (copied to bf16
# storage, widened for f32 storage) as it takes that checkpoint in F32
"$lrc" compile "$model" --preset tiny --target cuda --arch sm_90 --batch 2 --seq 16 -o "$out/pkg_nw" >/dev/null &&
  py bf16 "$out/w.st" "$out/w_bf16.st" && py widen "$out/w_bf16.st" "$out/w_wide.st" &&
  "$lrc" forward "$out/pkg_nw" --weights "$out/w_bf16.st" --input "$out/in.st" -o "$out/nw_bf16.st" >/dev/null &&
  "$lrc" forward "$out/pkg_nw" --weights "$out/w_wide.st" --input "$out/in.st" -o "$out/nw_wide.st" >/dev/null &&
  cmp -s "$out/nw_bf16.st" "$out/nw_wide.st" && echo "ok: a BF16 checkpoint into a package without weights, the same logits as in F32" ||
  { echo "FAIL: a BF16 checkpoint into a cuda package without weights"; failed=1; }
# same_logits LABEL VAR=VALUE...: the package's forward under those
# variables gives the logits of the plain run, byte for byte
same_logits() {
  local label=$1
  shift
  env "$@" "$lrc" forward "$out/pkg" --input "$out/in.st" -o "$out/same.st" >/dev/null &&
    cmp -s "$out/sm90.st" "$out/same.st" && echo "ok: $label, the same logits" || { echo "FAIL: $label"; failed=1; }
}
# the residual GEMMs (the package has some) where cuBLASLt has no algorithm,
# refuses a matmul its heuristic offered, or has no room for its 32 MiB
# workspace: the residual copied into the output, cublasGemmEx adds the product
grep -q '"c_arg"' "$out/pkg/package.json" || { echo "FAIL: the package has no residual GEMM"; failed=1; }
same_logits "residual GEMMs without a cuBLASLt algorithm (cublasGemmEx in place)" LRC_CUEMU_LT_NONE=1
same_logits "residual GEMMs cuBLASLt refuses at run time (cublasGemmEx in place)" LRC_CUEMU_LT_REFUSE=1
same_logits "no room for cuBLASLt's workspace (cublasGemmEx in place)" LRC_CUEMU_MEMORY=$((16 << 20))
# without LRC_CUDA_CHECK the tensors share the arena at 64-byte offsets
# (three bf16 rows of 64 put the residuals at 64 and 128): cuBLASLt's
# algorithms must be chosen for that alignment (the emulator fails a matmul
# whose operands are less aligned than its preference said)
py make "$out/in3.st" '{"tokens": ["I32", [1, 3], [5, 9, 200]]}'
"$lrc" compile "$model" --preset tiny --target cuda --arch sm_90 --weights "$out/w.st" --batch 1 --seq 3 -o "$out/pkg3" >/dev/null &&
  LRC_CUDA_CHECK=0 "$lrc" forward "$out/pkg3" --input "$out/in3.st" -o "$out/arena.st" >/dev/null &&
  "$lrc" forward "$out/pkg3" --input "$out/in3.st" -o "$out/alone.st" >/dev/null &&
  cmp "$out/alone.st" "$out/arena.st" && echo "ok: residual GEMMs in the arena (64-byte alignment), the same logits as every buffer alone" ||
  { echo "FAIL: the residual GEMMs in the arena"; failed=1; }
# a shorter run: the [2, 16] package on [1, 3] tokens runs its [1, 16]
# shape padded, with the logits of the package compiled for exactly [1, 3]
"$lrc" forward "$out/pkg" --input "$out/in3.st" -o "$out/short.st" >/dev/null &&
  [ -d "$out/pkg/shape-1x16" ] && "$compare" "$out/short.st" "$out/alone.st" logits 1e-6 >/dev/null &&
  echo "ok: a [2, 16] cuda package runs [1, 3] (its shape-1x16, padded) with the logits of one compiled for [1, 3]" ||
  { echo "FAIL: a shorter run of a cuda package"; failed=1; }

# profile: a package, then the model compiled on the fly; every function in
# the table, every launch of every run in the trace, no temporary package left
# launches a run times: those with a kernel or a cuBLAS GEMM
per_run=$(python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
print(sum(1 for l in d["meta"]["cuda"]["launches"] if l["block"] or l.get("gemm")))' "$out/pkg/package.json")
before=$(ls -d /tmp/lrc-profile-* 2>/dev/null | wc -l)
for what in package model; do
  if [ $what = package ]; then args=("$out/pkg"); else args=("$model" --preset tiny --weights "$out/w.st" --target cuda); fi
  LRC_CUEMU_MEMORY=$((64 << 20)) "$lrc" profile "${args[@]}" --input "$out/in.st" --repeat 2 -o "$out/trace_$what.json" \
    >"$out/profile.txt" 2>"$out/profile.err"
  rc=$?
  python3 - "$out/profile.txt" "$out/trace_$what.json" "$per_run" <<'PY' && [ $rc = 0 ] && echo "ok: profile of the $what" ||
import json, re, sys
text = open(sys.argv[1]).read()
events = json.load(open(sys.argv[2]))["traceEvents"]
ceil = re.search(r"ceilings measured now: ([0-9.]+) GFLOP/s \(bf16 cuBLAS GEMM\), ([0-9.]+) GB/s", text)
rows = [l for l in text.splitlines() if re.match(r"^(k\d+_\w+|cublas) +\d+ ", l)]
assert ceil and float(ceil.group(1)) > 0 and float(ceil.group(2)) > 0, "no ceilings"
assert rows, "no rows"
assert sum(int(l.split()[1]) for l in rows) == len(events), "calls in the table %d, events %d" % (sum(int(l.split()[1]) for l in rows), len(events))
assert len(events) == 2 * int(sys.argv[3]), "%d events for 2 runs of %s launches" % (len(events), sys.argv[3])
# every kernel that is not a GEMM and stays under 60% says why, in brackets
for l in rows:
    f = l.split()
    pct = int(re.match(r"(\d+)%", f[6]).group(1))
    if f[0] != "cublas" and "gemm" not in f[0] and pct < 60:
        assert re.search(r"\[(launch-bound|compute-bound|\d+ blocks for \d+ SMs|\d+-byte accesses|under 60%)", l), "no reason: " + l
PY
    { echo "FAIL: profile of the $what (status $rc)"; cat "$out/profile.txt" "$out/profile.err"; failed=1; }
done
after=$(ls -d /tmp/lrc-profile-* 2>/dev/null | wc -l)
[ "$after" = "$before" ] || { echo "FAIL: lrc profile --target cuda left a temporary package"; failed=1; }

# LRC_PROFILE=1 lrc backward --target cuda --repeat N: after the median, a
# line per launch of the step on stderr, the largest share first, and the
# step's gradients the same as without it
"$lrc" backward "$model" --preset tiny --weights "$out/w.st" --input "$out/in.st" -o "$out/g_plain.st" --target cuda \
  --repeat 2 >/dev/null 2>&1 &&
  LRC_PROFILE=1 "$lrc" backward "$model" --preset tiny --weights "$out/w.st" --input "$out/in.st" -o "$out/g_prof.st" \
    --target cuda --repeat 2 >/dev/null 2>"$out/bprof.txt"
rc=$?
grep ' ms .*GFLOP/s' "$out/bprof.txt" | awk '{print $3 + 0}' >"$out/bprof_share.txt"
if [ $rc = 0 ] && [ "$(wc -l <"$out/bprof_share.txt")" -gt 20 ] && grep -q 'attention_grad' "$out/bprof.txt" &&
  sort -g -r -s "$out/bprof_share.txt" | cmp -s - "$out/bprof_share.txt" && cmp -s "$out/g_plain.st" "$out/g_prof.st"; then
  echo "ok: LRC_PROFILE of lrc backward --target cuda: $(wc -l <"$out/bprof_share.txt") launches, the largest share first"
else
  echo "FAIL: LRC_PROFILE of lrc backward --target cuda (status $rc)"; head -5 "$out/bprof.txt"; failed=1
fi

# generate: a decoder package (KV caches, one token a step) on cuda and on
# the cpu, greedy: the same bytes (f32 storage: the same arithmetic up to
# rounding; bf16 could flip a near tie)
for norm in pre layerrope; do
  rm -rf "$out"/dec_* "$out"/gen_*
  "$lrc" init "$model" --preset tiny --set norm=$norm --seed 2 -o "$out/w_$norm.st" >/dev/null
  for t in cuda cpu; do
    p=(--target $t); [ $t = cuda ] && p+=(--precision f32)
    "$lrc" compile "$model" --preset tiny --set norm=$norm "${p[@]}" --ctx 40 --weights "$out/w_$norm.st" -o "$out/dec_$t" >/dev/null &&
      "$lrc" generate "$out/dec_$t" --prompt "In the beginning" -n 24 --temperature 0 >"$out/gen_$t.txt" 2>"$out/gen_$t.err" ||
      { echo "FAIL: generate on $t ($norm): $(tail -1 "$out/gen_$t.err")"; failed=1; }
  done
  cmp -s "$out/gen_cuda.txt" "$out/gen_cpu.txt" && echo "ok: generate $norm, cuda and cpu the same 24 bytes" ||
    { echo "FAIL: generate $norm differs between cuda and cpu"; od -c "$out/gen_cuda.txt" "$out/gen_cpu.txt" | head; failed=1; }
  # bf16 storage (the default): its one-row activations meet bf16 weights in cuBLAS
  # bf16 may flip a near tie, after which the texts part: so every byte it
  # chose is checked against the f32 model's logits (the cpu target) on the
  # text it generated, and must be their argmax up to bf16's rounding (a
  # logit within 4e-2 of max - mean of the largest, twice the 2e-2 that bf16
  # logits are held to), the prompt kept
  "$lrc" compile "$model" --preset tiny --set norm=$norm --target cuda --ctx 40 --weights "$out/w_$norm.st" -o "$out/dec_bf16" >/dev/null &&
    "$lrc" generate "$out/dec_bf16" --prompt "In the beginning" -n 24 --temperature 0 >"$out/gen_bf16.txt" 2>"$out/gen.err" &&
    python3 - "$out/gen_bf16.txt" "$out/gen_in.st" <<'PY' &&
import json, struct, sys
text = open(sys.argv[1], "rb").read()
assert len(text) == 41 and text.startswith(b"In the beginning") and text.endswith(b"\n"), text
ids = list(text[:-1])
h = json.dumps({"tokens": {"dtype": "I32", "shape": [1, 40], "data_offsets": [0, 160]}}).encode()
h += b" " * (-len(h) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(h)) + h + struct.pack("<40i", *ids))
PY
    "$lrc" forward "$model" --preset tiny --set norm=$norm --weights "$out/w_$norm.st" --input "$out/gen_in.st" \
      -o "$out/gen_logits.st" --target cpu >/dev/null 2>>"$out/gen.err" &&
    PYTHONPATH="$tools" python3 - "$out/gen_in.st" "$out/gen_logits.st" $norm <<'PY' ||
import sys
import st
_, _, ids = st.arrays(sys.argv[1])["tokens"]
_, shape, logits = st.arrays(sys.argv[2])["logits"]
V, worst, exact = shape[-1], 0.0, 0
for t in range(15, 39):
    row = logits[t * V:(t + 1) * V]
    top, mean = max(row), sum(row) / V
    gap = (top - row[ids[t + 1]]) / (top - mean)
    worst = gap if gap != gap else max(worst, gap)  # a NaN stays the worst
    exact += row[ids[t + 1]] == top
print("%s: generate %s at bf16 storage: %d of 24 bytes the f32 argmax, the others within %.1e of it (4e-2 allowed)"
      % ("ok" if worst <= 4e-2 else "FAIL", sys.argv[3], exact, worst))
sys.exit(0 if worst <= 4e-2 else 1)  # False for a NaN
PY
    { echo "FAIL: generate $norm at bf16: $(tail -1 "$out/gen.err")"; failed=1; }
done

# CUDA graphs: without LRC_CUDA_CHECK (whose guard checks go between
# launches), a plan without loops runs launch by launch once, then is
# captured and replayed, one graph launch a run: generate's steps of the
# f32 decoder and the 3 runs of a forward --repeat 3, each
# the same bytes as launch by launch (LRC_CUDA_GRAPH=0); a capture the
# driver invalidates leaves the plan launch by launch, the same bytes again
graph_run() { # NAME ENV...: generate and forward with ENV, the emulator's trace kept
  env -u LRC_CUDA_CHECK LRC_CUEMU_TRACE=1 "${@:2}" "$lrc" generate "$out/dec_cuda" --prompt "In the beginning" -n 24 --temperature 0 \
    >"$out/g_$1.txt" 2>"$out/g_$1.err" &&
    env -u LRC_CUDA_CHECK LRC_CUEMU_TRACE=1 "${@:2}" "$lrc" forward "$out/pkg" --input "$out/in.st" -o "$out/g_$1.st" --repeat 3 \
      >/dev/null 2>"$out/gf_$1.err"
}
if graph_run on && graph_run off LRC_CUDA_GRAPH=0 && graph_run refused LRC_CUEMU_CAPTURE_REFUSE=1; then
  cap=$(grep -c '^graph: captured [0-9]* calls$' "$out/g_on.err") launches=$(grep -c '^graph launch' "$out/g_on.err")
  fcap=$(grep -c '^graph: captured' "$out/gf_on.err") flaunch=$(grep -c '^graph launch' "$out/gf_on.err")
  off=$(cat "$out/g_off.err" "$out/gf_off.err" | grep -c '^graph')
  inval=$(grep -c '^graph: captured [0-9]* calls, invalidated$' "$out/g_refused.err")
  refused_launches=$(grep -c '^graph launch' "$out/g_refused.err")
  if [ "$cap" = 1 ] && [ "$launches" -ge 23 ] && [ "$fcap" = 1 ] && [ "$flaunch" -ge 2 ] && [ "$off" = 0 ] && [ "$inval" = 1 ] &&
    [ "$refused_launches" = 0 ] && cmp -s "$out/g_on.txt" "$out/g_off.txt" && cmp -s "$out/g_on.txt" "$out/g_refused.txt" &&
    cmp -s "$out/g_on.txt" "$out/gen_cpu.txt" && cmp -s "$out/g_on.st" "$out/g_off.st" && cmp -s "$out/g_on.st" "$out/g_refused.st"; then
    echo "ok: CUDA graphs: generate's decoder captured once, $launches graph launches; a forward --repeat 3, $flaunch; the same bytes as launch by launch, and after a refused capture"
  else
    echo "FAIL: CUDA graphs (captures $cap, launches $launches; forward $fcap, $flaunch; without: $off; refused: $inval, $refused_launches)"
    failed=1
  fi
else
  echo "FAIL: CUDA graphs: a run failed: $(tail -1 "$out"/g_*.err "$out"/gf_*.err | tail -3)"
  failed=1
fi

exit $failed
