#!/bin/bash
# grad_case.sh LRC MODEL FIXTURE_DIR ST_COMPARE [TARGET [TOL]] — `lrc backward`
# on one PyTorch fixture: the loss and every parameter's gradient against
# PyTorch autograd in f64 (grads.safetensors), each within TOL (default 1e-4)
# relative.
set -eu
lrc=$1 model=$2 dir=$3 compare=$4 target=${5:-ref} tol=${6:-1e-4}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
sets=()
while IFS= read -r line; do sets+=(--set "$line"); done < "$dir/config.txt"
"$lrc" backward "$model" "${sets[@]}" --weights "$dir/weights.safetensors" \
  --input "$dir/input.safetensors" -o "$out/grads.safetensors" --target "$target"
"$compare" "$out/grads.safetensors" "$dir/grads.safetensors" '*' "$tol"
