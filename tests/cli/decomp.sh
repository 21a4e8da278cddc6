#!/bin/bash
# decomp.sh LRC ST_COMPARE TARGET — the high-level ops (rmsnorm, layernorm,
# softmax, silu, sigmoid, gelu, gelu_tanh, relu, causal attention without a
# bias) against their decompositions into primitives (decomp.lua) on
# TARGET: the logits of the two forms within 1e-5, the loss and every
# gradient within 1e-5 (each op's own input projection's among them).
set -eu
lrc=$1 compare=$2 target=$3
here=$(cd "$(dirname "$0")" && pwd)
model=$here/decomp.lua
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$lrc" init "$model" --seed 3 -o "$out/w.safetensors" >/dev/null
/usr/bin/python3 "$here/../tools/st.py" make "$out/in.safetensors" \
  '{"tokens": ["I32", [2, 7], [3, 17, 5, 29, 0, 11, 8, 8, 21, 2, 30, 14, 31, 6]]}'
for form in fast prims; do
  m=("$model" --set form=$form --weights "$out/w.safetensors")
  if [ "$target" = cuda ]; then # a cuda forward runs a package (f32 storage)
    "$lrc" compile "${m[@]}" --target cuda --arch sm_90 --precision f32 --batch 2 --seq 7 -o "$out/pkg_$form" >/dev/null
    "$lrc" forward "$out/pkg_$form" --input "$out/in.safetensors" -o "$out/logits_$form.safetensors" >/dev/null
  else
    "$lrc" forward "${m[@]}" --input "$out/in.safetensors" -o "$out/logits_$form.safetensors" --target "$target" >/dev/null
  fi
  prec=()
  [ "$target" = cuda ] && prec=(--precision f32)
  "$lrc" backward "${m[@]}" --input "$out/in.safetensors" -o "$out/grads_$form.safetensors" --target "$target" \
    "${prec[@]}" >/dev/null
done
echo -n "$target logits, fast ops against their primitives: "
"$compare" "$out/logits_fast.safetensors" "$out/logits_prims.safetensors" logits 1e-5
echo -n "$target gradients, fast ops against their primitives: "
"$compare" "$out/grads_fast.safetensors" "$out/grads_prims.safetensors" '*' 1e-5
