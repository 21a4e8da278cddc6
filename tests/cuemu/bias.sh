#!/bin/bash
# bias.sh LRC VIT FIXTURE_DIR ST_COMPARE — GEMMs that add a bias (and a
# residual) in cuBLASLt's epilogue, on the emulator or a GPU: a ViT fixture
# (PyTorch's weights, biases not zero) compiled at f32 and bf16 storage has
# such GEMMs, bias alone and bias with residual; its logits match PyTorch's;
# and with cuBLASLt switched off (LRC_CUBLASLT=0), or on the emulator where
# cuBLASLt has no algorithm, refuses the matmul at run time, or has no room
# for its workspace, the launch's kernel adds the bias to the product in
# scratch instead: the same logits within what cuBLAS promises across
# algorithms (below).
set -u
lrc=$1 model=$2 dir=$3 compare=$4
source "$(dirname "$0")/common.sh"
sets=()
while IFS= read -r line; do sets+=(--set "$line"); done <"$dir/config.txt"
B=$(python3 -c 'import json,struct,sys; b=open(sys.argv[1],"rb").read(); print(json.loads(b[8:8+struct.unpack("<Q",b[:8])[0]])["images"]["shape"][0])' \
  "$dir/input.safetensors")
# The two paths run different GEMM algorithms. cuBLAS promises no bits
# across algorithms (CUBLAS_COMPUTE_32F fixes the precision, f32, not the
# order of the sums: tiles, split-K), so the fallback is held to what each
# path is held to against PyTorch at f32 (1e-5), not to the emulator's
# 2.9e-7; at bf16 the kernel path rounds the product to bf16 once more (5e-3).
for p in f32 bf16; do
  tol=1e-5 same=1e-5
  [ $p = bf16 ] && tol=2e-2 same=5e-3
  "$lrc" compile "$model" "${sets[@]}" --target cuda --arch sm_90 --precision $p --weights "$dir/weights.safetensors" --batch "$B" \
    -o "$out/pkg" >/dev/null && "$lrc" forward "$out/pkg" --input "$dir/input.safetensors" -o "$out/lt.st" >/dev/null ||
    { echo "FAIL $p: lrc failed"; failed=1; continue; }
  gemms=$(tr -d ' \t\n' <"$out/pkg/package.json" | grep -o '"gemm":\[{[^]]*\]')
  n_bias=$(echo "$gemms" | grep -c '"bias_arg"')
  n_both=$(echo "$gemms" | grep '"bias_arg"' | grep -c '"c_arg"')
  echo "$p: $n_bias GEMMs add a bias in cuBLASLt's epilogue, $n_both of them a residual too"
  [ "$n_bias" -gt "$n_both" ] && [ "$n_both" -gt 0 ] || { echo "FAIL $p: want GEMMs with a bias alone and with a residual"; failed=1; }
  echo -n "$p, against PyTorch: "
  "$compare" "$out/lt.st" "$dir/expected.safetensors" logits $tol || failed=1
  fallbacks=(LRC_CUBLASLT=0)
  # the emulator's cuBLASLt can also offer no algorithm, refuse one, or leave no room for its workspace
  [[ ${LD_LIBRARY_PATH:-} == *cuemu* ]] && fallbacks+=(LRC_CUEMU_LT_NONE=1 LRC_CUEMU_LT_REFUSE=1 LRC_CUEMU_MEMORY=$((16 << 20)))
  for v in "${fallbacks[@]}"; do
    echo -n "$p, $v (the kernels add the biases): "
    env $v "$lrc" forward "$out/pkg" --input "$dir/input.safetensors" -o "$out/fallback.st" >/dev/null &&
      "$compare" "$out/fallback.st" "$out/lt.st" logits $same || { echo "FAIL $p: $v"; failed=1; }
  done
done
exit $failed
