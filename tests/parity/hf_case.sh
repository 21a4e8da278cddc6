#!/bin/bash
# hf_case.sh LRC FIXTURE_DIR ST_COMPARE TARGET — a Hugging Face directory
# written by transformers (tests/reference/make_hf_fixtures.py) run as lrc's
# MODEL with no other option: its logits within 1e-5 relative of
# transformers', the loss and every parameter's gradient within 1e-4 of
# torch autograd through the transformers model, and the greedy continuation
# of 32 tokens (lrc generate on the same target) equal to model.generate's.
set -eu
lrc=$1 dir=$2 compare=$3 target=$4
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$lrc" forward "$dir" --input "$dir/input.safetensors" -o "$out/logits.safetensors" --target "$target"
"$compare" "$out/logits.safetensors" "$dir/expected.safetensors" logits 1e-5
"$lrc" backward "$dir" --input "$dir/input.safetensors" -o "$out/grads.safetensors" --target "$target"
"$compare" "$out/grads.safetensors" "$dir/grads.safetensors" '*' 1e-4
want=$(sed -n 's/^greedy //p' "$dir/generate.txt")
got=$("$lrc" generate "$dir" --prompt-ids "$(sed -n 's/^prompt //p' "$dir/generate.txt")" -n 32 --temperature 0 --target "$target" 2>/dev/null)
if [ "$got" != "$want" ]; then
  echo "FAIL: greedy continuation on $target differs from transformers' model.generate"
  echo "  lrc:          $got"
  echo "  transformers: $want"
  exit 1
fi
echo "greedy continuation of 32 tokens on $target: equal to transformers'"
