#!/bin/bash
# run_case.sh LRC MODEL FIXTURE_DIR ST_COMPARE [TARGET] — runs `lrc forward`
# (on TARGET, default ref) on one PyTorch fixture (config.txt, weights, input)
# and compares the logits with the expected ones within 1e-5 relative.
set -eu
lrc=$1 model=$2 dir=$3 compare=$4 target=${5:-ref}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
sets=()
# a PyTorch fixture names its weights weights.safetensors; a transformers
# save_pretrained one (fixtures/arch) model.safetensors
weights=$dir/weights.safetensors
[ -f "$weights" ] || weights=$dir/model.safetensors
while IFS= read -r line; do sets+=(--set "$line"); done < "$dir/config.txt"
"$lrc" forward "$model" "${sets[@]}" --weights "$weights" \
  --input "$dir/input.safetensors" -o "$out/logits.safetensors" --target "$target"
"$compare" "$out/logits.safetensors" "$dir/expected.safetensors" logits 1e-5
