#!/bin/bash
# fold_kernels.sh LRC MODEL COMPARE — LayerRoPE folds away: compiled with
# weights, a LayerRoPE model reports the same `kernels N` as the Pre-Norm
# model of the same size, and its package gives the logits of the unfolded
# graph on the reference backend within 1e-5.
set -u
lrc=$1 model=$2 compare=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
passed=0 failed=0
check() { if eval "$2"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL $1"; fi; }
python3 - "$dir/in.safetensors" <<'PY'
import json, struct, sys
tokens = [(7 * i + 3) % 256 for i in range(2 * 13)]
header = json.dumps({"tokens": {"dtype": "I32", "shape": [2, 13], "data_offsets": [0, 4 * len(tokens)]}}).encode()
header += b" " * (-len(header) % 8)
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<Q", len(header)) + header + struct.pack("<%di" % len(tokens), *tokens))
PY
for preset in tiny small; do
  for norm in pre layerrope peri layerrope_peri; do
    "$lrc" init "$model" --preset $preset --set norm=$norm --seed 5 -o "$dir/w_$norm.safetensors" >/dev/null
    "$lrc" compile "$model" --preset $preset --set norm=$norm --target cpu --weights "$dir/w_$norm.safetensors" \
      --batch 2 --seq 13 -o "$dir/pkg_$norm" >"$dir/compile_$norm.txt" || { failed=$((failed + 1)); echo "FAIL compile $preset $norm"; }
    # outputs named per case, and each forward's status checked: a failed
    # forward must not leave an earlier case's files to be compared
    pkg_out=$dir/out_pkg_${preset}_$norm.safetensors ref_out=$dir/out_ref_${preset}_$norm.safetensors
    check "$preset $norm: the folded package runs" \
      "'$lrc' forward '$dir/pkg_$norm' --input '$dir/in.safetensors' -o '$pkg_out' >/dev/null"
    check "$preset $norm: the unfolded graph runs on ref" \
      "'$lrc' forward '$model' --preset $preset --set norm=$norm --weights '$dir/w_$norm.safetensors' \
         --input '$dir/in.safetensors' -o '$ref_out' --target ref"
    check "$preset $norm: folded package vs unfolded ref" \
      "[ -s '$pkg_out' ] && [ -s '$ref_out' ] && '$compare' '$pkg_out' '$ref_out' logits 1e-5 >/dev/null"
  done
  k() { grep '^kernels ' "$dir/compile_$1.txt"; }
  echo "$preset: pre $(k pre), layerrope $(k layerrope), peri $(k peri), layerrope_peri $(k layerrope_peri)"
  check "$preset: layerrope has the kernels of pre" '[ -n "$(k pre)" ] && [ "$(k pre)" = "$(k layerrope)" ]'
  check "$preset: layerrope_peri has the kernels of peri" '[ -n "$(k peri)" ] && [ "$(k peri)" = "$(k layerrope_peri)" ]'
  complete() {
    for f in kernels.cu kernels.cubin kernels.ptx package.json weights.safetensors; do [ -s "$1/$f" ] || return 1; done
    grep -q '"target":[[:space:]]*"cuda"' "$1/package.json"
  }
  # the same folding for cuda: a complete package (CUDA C, cubin, PTX, plan, weights), no GPU needed
  for norm in pre layerrope; do
    "$lrc" compile "$model" --preset $preset --set norm=$norm --target cuda --arch sm_90 --weights "$dir/w_$norm.safetensors" \
      --batch 2 --seq 13 -o "$dir/cu_$norm" >"$dir/compile_cu_$norm.txt" || { failed=$((failed + 1)); echo "FAIL compile cuda $preset $norm"; }
    check "$preset $norm: cuda package complete" \
      "complete '$dir/cu_$norm'"
  done
  kc() { grep '^kernels ' "$dir/compile_cu_$1.txt"; }
  echo "$preset cuda: pre $(kc pre), layerrope $(kc layerrope)"
  check "$preset cuda: layerrope has the kernels of pre" '[ -n "$(kc pre)" ] && [ "$(kc pre)" = "$(kc layerrope)" ]'
done
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
