#!/bin/bash
# grad_case.sh LRC MODEL FIXTURE_DIR ST_COMPARE [TARGET [TOL [REF_TOL]]] —
# `lrc backward` on one PyTorch fixture: the loss and every parameter's
# gradient against PyTorch autograd in f64 (grads.safetensors), each within
# TOL (default 1e-4) relative; for a target other than ref, also against
# `ref` within REF_TOL (default TOL).
set -eu
lrc=$1 model=$2 dir=$3 compare=$4 target=${5:-ref} tol=${6:-1e-4} ref_tol=${7:-${6:-1e-4}}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
input=$dir/input.safetensors
[ -f "$dir/batch.safetensors" ] && input=$dir/batch.safetensors # images and their labels
sets=()
# a PyTorch fixture names its weights weights.safetensors; a transformers
# save_pretrained one (fixtures/arch) model.safetensors
weights=$dir/weights.safetensors
[ -f "$weights" ] || weights=$dir/model.safetensors
while IFS= read -r line; do sets+=(--set "$line"); done < "$dir/config.txt"
backward() {
  "$lrc" backward "$model" "${sets[@]}" --weights "$weights" \
    --input "$input" -o "$out/$1.safetensors" --target "$1"
}
backward "$target"
echo -n "against PyTorch: "
"$compare" "$out/$target.safetensors" "$dir/grads.safetensors" '*' "$tol"
if [ "$target" != ref ]; then
  backward ref
  echo -n "against ref: "
  "$compare" "$out/$target.safetensors" "$out/ref.safetensors" '*' "$ref_tol"
fi
