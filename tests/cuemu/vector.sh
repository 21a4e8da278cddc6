#!/bin/bash
# vector.sh LRC LLAMA ST_COMPARE — the vector loads and stores of elementwise
# and row kernels (codegen/cuda/render.c: a thread's 8, 4, 2 or 1
# consecutive elements, 16 bytes an access where the shape allows) against
# the reference backend, on the emulator (which aborts on a misaligned
# vector access) or a GPU, with LRC_CUDA_CHECK's guard regions: LLaMA
# shapes whose rows take each width, at f32 and bf16 storage, forward
# logits and every gradient.
#   d=36, d_ff=90, 2x8 tokens, weights frozen into the package: rows of 36
#     in chunks of 4; d_ff padded to 96 (the pad_hidden pass: GEMMs of
#     n = 96 and k = 96), the SwiGLU epilogue's 1536 elements in chunks of 8
#     (bf16);
#   the same frozen with LRC_PAD_HIDDEN=0: GEMMs of n = 90, the epilogue's
#     1440 elements flat in chunks of 8 across rows;
#   d=34 (one head), d_ff=91, 1x7 tokens, weights given at run time (no
#     padding): rows of 34 in chunks of 2; 637 elements one by one.
set -u
lrc=$1 model=$2 compare=$3
source "$(dirname "$0")/common.sh"
export LRC_CUDA_CHECK=1
# check NAME B T WIDTHS GEMM_N WEIGHTS SETS...: WIDTHS, the vector widths the
# bf16 package must use; GEMM_N, the width its SwiGLU GEMMs must have;
# WEIGHTS: frozen (into the package, pad_hidden on), unpadded (frozen, with
# LRC_PAD_HIDDEN=0) or run (given to lrc forward: nothing to pad)
check() {
  local name=$1 B=$2 T=$3 widths=$4 gemm_n=$5 weights=$6
  shift 6
  local sets=(--preset tiny "$@")
  tokens "$out/in.st" "$B" "$T"
  "$lrc" init "$model" "${sets[@]}" --seed 3 -o "$out/w.st" >/dev/null &&
    "$lrc" forward "$model" "${sets[@]}" --weights "$out/w.st" --input "$out/in.st" -o "$out/ref.st" --target ref >/dev/null &&
    "$lrc" backward "$model" "${sets[@]}" --weights "$out/w.st" --input "$out/in.st" -o "$out/gref.st" --target ref >/dev/null ||
    { echo "FAIL $name: the reference failed"; failed=1; return; }
  local frozen=(--weights "$out/w.st") run=() pad=1
  [ "$weights" = run ] && frozen=() run=(--weights "$out/w.st")
  [ "$weights" = unpadded ] && pad=0
  for p in f32 bf16; do
    local tol=1e-5 gtol=1e-4 floor=
    [ $p = bf16 ] && tol=2e-2 gtol=5e-2 floor=1e-2
    LRC_PAD_HIDDEN=$pad "$lrc" compile "$model" "${sets[@]}" --target cuda --arch sm_90 --precision $p "${frozen[@]}" --batch "$B" --seq "$T" \
      -o "$out/pkg" >/dev/null &&
      "$lrc" forward "$out/pkg" "${run[@]}" --input "$out/in.st" -o "$out/cuda.st" >/dev/null &&
      "$lrc" backward "$model" "${sets[@]}" --weights "$out/w.st" --input "$out/in.st" -o "$out/g.st" --target cuda --precision $p \
        >/dev/null || { echo "FAIL $name $p: lrc failed"; failed=1; continue; }
    echo -n "$name, $p, logits: "
    "$compare" "$out/cuda.st" "$out/ref.st" logits $tol || failed=1
    echo -n "$name, $p, gradients: "
    "$compare" "$out/g.st" "$out/gref.st" '*' $gtol $floor || failed=1
    tr -d ' \t\n' <"$out/pkg/package.json" | grep -q "\"op\":\"matmul\",\"m\":[0-9]*,\"n\":$gemm_n," ||
      { echo "FAIL $name $p: no SwiGLU GEMM of n = $gemm_n in the package"; failed=1; }
    [ $p = bf16 ] || continue
    for w in $widths; do # the widths meant are the widths rendered
      grep -q "ldv(.*, $w);" "$out/pkg/kernels.cu" && grep -q "stv(.*, $w);" "$out/pkg/kernels.cu" ||
        { echo "FAIL $name: no loads and stores of $w elements in the package"; failed=1; }
    done
  done
}
check "d=36, d_ff=90" 2 8 "4 8" 96 frozen --set d_model=36 --set d_ff=90 --set n_heads=2
check "d=36, d_ff=90, LRC_PAD_HIDDEN=0" 2 8 "4 8" 90 unpadded --set d_model=36 --set d_ff=90 --set n_heads=2
check "d=34, d_ff=91" 1 7 "2 1" 91 run --set d_model=34 --set d_ff=91 --set n_heads=1
exit $failed
