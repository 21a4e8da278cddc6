#!/bin/bash
# train_opts.sh LRC MODEL — the lrc train options that train.sh leaves out,
# each checked by content: --warmup's schedule against its closed form,
# the default data (the King James Bible from bible-kjv), a ViT's --flip and
# --crop-pad, and lrc init's tensors against the init rules of docs/models.md.
# What a missing Debian package leaves unchecked is said on a `skip:` line,
# and fails the test when CI=true (CI installs them).
set -u
lrc=$1 model=$2
tc="/usr/bin/python3 $(dirname "$0")/train_check.py"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
passed=0 failed=0
check() { if eval "$2"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL $1"; fi; }
run() { # a run that should succeed: its exit status is a check of its own
  local what=$1
  shift
  "$@" >/dev/null
  local s=$?
  check "$what exits 0 (status $s)" "[ $s = 0 ]"
}
skipped=0
skip() { # outside CI the test ends as skipped (77) unless something failed
  echo "skip: $1"
  skipped=1
  if [ "${CI:-}" = true ]; then check "CI=true: $1" false; fi
}
for i in $(seq 1 120); do
  echo "In the beginning God created the heaven and the earth. And the earth was without form, and void."
done >"$dir/text.txt"

# --warmup F: the lr of every step in metrics.jsonl is the closed form,
# warm-up over floor(F N) steps then cosine to 0.1x (train_check.py);
# F N = 2.5, so a warm-up of 2 or 3 steps tells floor from ceiling
run "--warmup 0.25 run" "$lrc" train "$model" --preset tiny --steps 10 --lr 3e-3 --warmup 0.25 --batch 2 --seq 16 \
  --eval-every 10 --data "$dir/text.txt" --threads 2 -o "$dir/warm"
check "--warmup 0.25: the learning rate of each step" "$tc schedule '$dir/warm/metrics.jsonl' 3e-3 0.25 10"
check "--warmup is kept for --resume" "grep -q '\"warmup\":\\s*0.25' '$dir/warm/run.json'"

# no --data: the King James Bible as `bible` prints it. The run equals one
# on a file of exactly those bytes, checkpoint for checkpoint (the same
# windows of the same text), and differs from one on another text
one=(--preset tiny --steps 1 --lr 3e-3 --seq 32 --batch 4 --threads 2)
if command -v bible >/dev/null && bible -f Gen1:1-Rev22:21 >"$dir/kjv.txt" 2>/dev/null && [ -s "$dir/kjv.txt" ]; then
  run "run without --data" "$lrc" train "$model" "${one[@]}" -o "$dir/default"
  run "run on the Bible's bytes" "$lrc" train "$model" "${one[@]}" --data "$dir/kjv.txt" -o "$dir/kjv"
  run "run on another text" "$lrc" train "$model" "${one[@]}" --data "$dir/text.txt" -o "$dir/other"
  check "no --data reads the King James Bible" "cmp -s '$dir/default/checkpoint.safetensors' '$dir/kjv/checkpoint.safetensors'"
  check "another text trains otherwise" "! cmp -s '$dir/default/checkpoint.safetensors' '$dir/other/checkpoint.safetensors'"
  check "no --data: run.json names no file, so --resume reads the Bible again" \
    "[ -s '$dir/default/run.json' ] && ! grep -q '\"data\"' '$dir/default/run.json'"
else
  skip "bible-kjv is not installed (apt-get install bible-kjv): the default data is not checked"
fi

# ViT augmentation: with a fixed seed, --flip and --crop-pad change what
# the first steps see (and so the weights), both are kept in run.json, and
# an augmented run resumes bit for bit (runtime/images.c: the draws depend
# on the seed and the sample). test_images checks the crops and mirrors.
vit=$(dirname "$model")/vit.lua
if [ -e /usr/share/datasets/fashion-mnist ]; then
  A=(train "$vit" --preset tiny --set image_size=28 --set patch=7 --steps 2 --lr 1e-2 --batch 16 --eval-every 2 --threads 2)
  run "vit plain" "$lrc" "${A[@]}" -o "$dir/plain"
  run "vit --flip" "$lrc" "${A[@]}" --flip -o "$dir/flip"
  run "vit --crop-pad 2" "$lrc" "${A[@]}" --crop-pad 2 -o "$dir/crop"
  run "vit --flip --crop-pad 2" "$lrc" "${A[@]}" --flip --crop-pad 2 -o "$dir/both"
  run "vit --flip --crop-pad 2, stopped after 1" "$lrc" "${A[@]}" --flip --crop-pad 2 --stop-after 1 -o "$dir/both_half"
  run "vit --flip --crop-pad 2, resumed" "$lrc" train --resume "$dir/both_half" --threads 2
  differ() { ! cmp -s "$dir/$1/checkpoint.safetensors" "$dir/$2/checkpoint.safetensors"; }
  check "--flip changes the training" "[ -s '$dir/flip/checkpoint.safetensors' ] && differ flip plain"
  check "--crop-pad 2 changes the training" "[ -s '$dir/crop/checkpoint.safetensors' ] && differ crop plain"
  check "--flip with --crop-pad is neither alone" "[ -s '$dir/both/checkpoint.safetensors' ] && differ both flip && differ both crop"
  check "--flip and --crop-pad are kept in run.json" \
    "grep -q '\"flip\":\\s*true' '$dir/both/run.json' && grep -q '\"crop_pad\":\\s*2' '$dir/both/run.json'"
  check "an augmented run resumes bit for bit" "cmp -s '$dir/both/checkpoint.safetensors' '$dir/both_half/checkpoint.safetensors'"
else
  skip "/usr/share/datasets/fashion-mnist not found (apt-get install dataset-fashion-mnist): --flip and --crop-pad are not checked"
fi

# lrc init: every tensor as its rule says (std within 5%, mean 0, a normal
# law's share within one std; gains exactly 1; LayerRoPE's gamma 1, alpha
# = alpha_rot = 0, beta = beta_rot = -0.5), for the ladder's init rules;
# the small preset so that a matrix has 16k values (the std's error: 0.6%).
# The file is the same for any thread count (a stream per parameter).
for norm in pre deepnet layerrope; do
  run "lrc init --set norm=$norm" "$lrc" init "$model" --preset small --set norm=$norm --threads 2 -o "$dir/init_$norm.safetensors"
  check "lrc init --set norm=$norm: the init rules" "$tc init '$dir/init_$norm.safetensors' $norm 4 -0.5"
done
run "lrc init --threads 1" "$lrc" init "$model" --preset small --set norm=pre --threads 1 -o "$dir/init_1.safetensors"
check "lrc init: the same file on 1 and 2 threads" "cmp -s '$dir/init_1.safetensors' '$dir/init_pre.safetensors'"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ] || exit 1
[ "$skipped" = 0 ] || exit 77
