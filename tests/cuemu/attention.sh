#!/bin/bash
# attention.sh LRC LLAMA VIT ST_COMPARE — attention on the tensor cores
# (bf16 storage, render_attention_tc.c) against the reference backend, on
# the emulator or a GPU: causal (LLaMA) at head dimensions 16, 32, 64 and
# 128 with T = 70 (three query blocks, three key tiles, the last partial),
# and full (ViT, 50 tokens); each package's source must hold the
# tensor-core kernel, and LRC_CUDA_TC_ATTENTION=0 must leave it out. For
# sm_90 its mma_bf16 is the mma.sync instruction (the emulator's model of
# it): the emulator's trace must count mma.sync operations in its launches.
# For sm_75 (no bf16 tensor cores) the same kernel sums through shuffles:
# none counted, and the same result. The f32 kernel's grid at B H = 65 536
# stays within the hardware's limits.
set -u
lrc=$1 llama=$2 vit=$3 compare=$4
source "$(dirname "$0")/common.sh"
tokens "$out/tok.st" 2 70
py make "$out/img.st" "{\"images\": [\"F32\", [2, 1, 28, 28], $(python3 -c 'import math; print([math.sin(0.37 * i) for i in range(1568)])')]}"
# the mma.sync operations the emulator's trace $out/trace counts (0 on a GPU, which has no trace)
mmas() { awk '/^launch .* mma\.sync [0-9]+:/ { for (i = 1; i < NF; i++) if ($i == "mma.sync") n += $(i + 1) } END { print n + 0 }' "$out/trace"; }
emulated=0
"$lrc" devices 2>/dev/null | grep -q cuemu && emulated=1
# CI always runs this on the emulator: there the mma.sync counts below must
# not switch themselves off
[ "${CI:-}" = true ] && [ "$emulated" = 0 ] && { echo "FAIL: CI=true, and lrc devices names no emulator"; exit 1; }
# check NAME MODEL INPUT B T ARCH SETS...: compile for cuda ARCH, run, compare with ref
check() {
  local name=$1 model=$2 input=$3 B=$4 T=$5 arch=$6
  shift 6
  "$lrc" init "$model" "$@" --seed 5 -o "$out/w.st" >/dev/null &&
    "$lrc" forward "$model" "$@" --weights "$out/w.st" --input "$input" -o "$out/ref.st" --target ref >/dev/null &&
    "$lrc" compile "$model" "$@" --target cuda --arch "$arch" --weights "$out/w.st" --batch "$B" --seq "$T" -o "$out/pkg" >/dev/null &&
    LRC_CUEMU_TRACE=1 LRC_CUEMU_SM=${arch#sm_} "$lrc" forward "$out/pkg" --input "$input" -o "$out/cuda.st" >/dev/null 2>"$out/trace" ||
    { cat "$out/trace"; echo "FAIL $name: lrc failed"; failed=1; return; }
  grep -q 'mma_bf16_row(s\[n\]' "$out/pkg/kernels.cu" || { echo "FAIL $name: the package has no tensor-core attention"; failed=1; }
  local n
  n=$(mmas)
  if [ "$emulated" = 1 ] && [ "$arch" = sm_75 ]; then
    [ "$n" = 0 ] || { echo "FAIL $name: $n mma.sync operations for sm_75, where mma_bf16 takes its shuffles"; failed=1; }
  elif [ "$emulated" = 1 ]; then
    [ "$n" -gt 0 ] || { echo "FAIL $name: no mma.sync operation counted: the tensor-core branch of mma_bf16 did not run"; failed=1; }
  fi
  echo -n "$name ($arch, $n mma.sync): "
  "$compare" "$out/cuda.st" "$out/ref.st" logits 2e-2 || failed=1
}
for h in 8:16 4:32 2:64 1:128; do
  check "causal, head dimension ${h#*:}" "$llama" "$out/tok.st" 2 70 sm_90 --preset small --set n_layers=2 --set n_heads=${h%:*}
done
check "full (vit), head dimension 32" "$vit" "$out/img.st" 2 1 sm_90 --preset small --set n_layers=2
# head dimension 16: NVRTC takes a minute over sm_75's unrolled shuffles at 64, 3 s at 16
check "causal, head dimension 16, mma_bf16's shuffles" "$llama" "$out/tok.st" 2 70 sm_75 --preset small --set n_layers=2 --set n_heads=8
LRC_CUDA_TC_ATTENTION=0 "$lrc" compile "$llama" --preset small --set n_layers=1 --target cuda --arch sm_90 --batch 2 --seq 70 \
  -o "$out/off" >/dev/null && ! grep -q 'mma_bf16_row(s\[n\]' "$out/off/kernels.cu" && grep -q '__global__' "$out/off/kernels.cu" &&
  echo "LRC_CUDA_TC_ATTENTION=0: the f32 attention kernel" || { echo "FAIL: LRC_CUDA_TC_ATTENTION=0"; failed=1; }
# the f32 attention kernel at B H = 65 536 (grid y and z take 65 535 at most,
# which the emulator enforces too): every launch of the package in bounds
# (compiled only: 65 536 blocks are more than the emulator runs in a test)
"$lrc" compile "$llama" --preset tiny --target cuda --precision f32 --arch sm_90 --batch 32768 --seq 2 -o "$out/wide" >/dev/null &&
  python3 - "$out/wide/package.json" <<'PY' || failed=1
import json, sys
grids = [l["grid"] for l in json.load(open(sys.argv[1]))["meta"]["cuda"]["launches"]]
bad = [g for g in grids if g[0] > 2**31 - 1 or g[1] > 65535 or g[2] > 65535]
wide = max(g[0] for g in grids)
print("%s: batch 32768 of 2 heads: %d launches, widest grid x %d, %d past the grid limits"
      % ("FAIL" if bad or wide < 65536 else "ok", len(grids), wide, len(bad)))
sys.exit(1 if bad or wide < 65536 else 0)
PY
exit $failed
