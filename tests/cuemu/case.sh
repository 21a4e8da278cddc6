#!/bin/bash
# case.sh LRC MODEL FIXTURE_DIR ST_COMPARE PRECISION FWD_TOL GRAD_TOL [FLOOR] — one
# PyTorch fixture (or, with MODEL "-", a Hugging Face directory written by
# transformers, which is its own model and weights) on the cuda target, run by the host emulator (the test's
# environment puts it first on LD_LIBRARY_PATH) or on a GPU: `lrc compile --target cuda
# --precision PRECISION` with the fixture's weights, `lrc forward` of the
# package twice (logits within FWD_TOL of PyTorch, the two runs
# bit-identical), then `lrc backward --target cuda` (every gradient within
# GRAD_TOL of PyTorch's, with st_compare's FLOOR when given).
set -eu
lrc=$1 model=$2 dir=$3 compare=$4 precision=$5 fwd_tol=$6 grad_tol=$7 floor=${8:-}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
sets=() weights=(--weights "$dir/weights.safetensors")
# fixtures/arch hold save_pretrained's model.safetensors
[ -f "$dir/weights.safetensors" ] || weights=(--weights "$dir/model.safetensors")
if [ "$model" = - ]; then
  model=$dir weights=()
else
  while IFS= read -r line; do sets+=(--set "$line"); done <"$dir/config.txt"
fi
# on the emulator in CI; bench/gpu/run.sh runs the same on a GPU
"$lrc" devices | grep -q 'target cuda, run: available' || { echo "no cuda device here: $("$lrc" devices | grep 'cuda, run')"; exit 1; }
# B and T from the input's header (the first shape in it)
read -r B T < <(python3 - "$dir/input.safetensors" <<'PY'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
h = json.loads(b[8:8 + struct.unpack("<Q", b[:8])[0]])
shape = next(v["shape"] for k, v in h.items() if k in ("tokens", "images"))
print(shape[0], shape[1] if len(shape) == 2 else 1)
PY
)
"$lrc" compile "$model" "${sets[@]}" --target cuda --arch sm_90 --precision "$precision" "${weights[@]}" --batch "$B" --seq "$T" \
  -o "$out/pkg" >/dev/null
"$lrc" forward "$out/pkg" --input "$dir/input.safetensors" -o "$out/a.safetensors" >/dev/null
"$lrc" forward "$out/pkg" --input "$dir/input.safetensors" -o "$out/b.safetensors" >/dev/null
echo -n "forward against PyTorch: "
"$compare" "$out/a.safetensors" "$dir/expected.safetensors" logits "$fwd_tol"
# under set -e a failing command left of && does not stop the script: test it
if ! cmp "$out/a.safetensors" "$out/b.safetensors"; then echo "FAIL: two runs of the package differ"; exit 1; fi
echo "two runs bit-identical"
input=$dir/input.safetensors
[ -f "$dir/batch.safetensors" ] && input=$dir/batch.safetensors # images and their labels
"$lrc" backward "$model" "${sets[@]}" "${weights[@]}" --input "$input" -o "$out/g.safetensors" \
  --target cuda --precision "$precision" >/dev/null
echo -n "gradients against PyTorch: "
"$compare" "$out/g.safetensors" "$dir/grads.safetensors" '*' "$grad_tol" $floor
if [ -f "$dir/generate.txt" ] && [ "$precision" = f32 ]; then
  # the KV-cache decoder: transformers' greedy continuation, one token a step
  "$lrc" compile "$model" --target cuda --arch sm_90 --precision f32 --ctx 40 -o "$out/dec" >/dev/null
  got=$("$lrc" generate "$out/dec" --prompt-ids "$(sed -n 's/^prompt //p' "$dir/generate.txt")" -n 32 --temperature 0 2>/dev/null)
  [ "$got" = "$(sed -n 's/^greedy //p' "$dir/generate.txt")" ] || { echo "FAIL: the cuda decoder's greedy continuation differs: $got"; exit 1; }
  echo "decoder: greedy continuation of 32 tokens equal to transformers'"
fi
