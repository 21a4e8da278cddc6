#!/bin/bash
# train.sh LRC MODEL ST_COMPARE — lrc train end to end on a small text: the validation
# loss falls, and a run stopped with --stop-after then continued with
# --resume ends with a checkpoint byte-identical to the uninterrupted run's
# (weights, optimizer state, step, random state).
set -u
lrc=$1 model=$2 compare=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
passed=0 failed=0
check() { if eval "$2"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL $1"; fi; }
for i in $(seq 1 120); do
  echo "In the beginning God created the heaven and the earth. And the earth was without form, and void."
done >"$dir/text.txt"
args=(--preset tiny --steps 20 --lr 3e-3 --batch 4 --seq 32 --eval-every 5 --data "$dir/text.txt" --threads 2)
"$lrc" train "$model" "${args[@]}" -o "$dir/full" >/dev/null
"$lrc" train "$model" "${args[@]}" -o "$dir/part" --stop-after 10 >/dev/null
check "stopped run at step 10" "grep -q '\"step\":10,' '$dir/part/metrics.jsonl' && ! grep -q '\"step\":11,' '$dir/part/metrics.jsonl'"
"$lrc" train --resume "$dir/part" --threads 2 >/dev/null
check "resumed run is bit-identical" "cmp -s '$dir/full/checkpoint.safetensors' '$dir/part/checkpoint.safetensors'"
first=$(grep -o '"val_loss":[0-9.]*' "$dir/full/metrics.jsonl" | head -1 | cut -d: -f2)
last=$(grep -o '"val_loss":[0-9.]*' "$dir/full/metrics.jsonl" | tail -1 | cut -d: -f2)
echo "validation loss: $first at step 5, $last at step 20"
check "validation loss falls" "awk 'BEGIN { exit !($last < $first - 0.5) }'"
check "20 metric lines" "[ \$(wc -l <'$dir/full/metrics.jsonl') = 20 ]"
# Ctrl-C: the step in flight ends, a checkpoint is written, exit status 130; --resume finishes the run
"$lrc" train "$model" --preset tiny --steps 100000 --lr 1e-3 --batch 4 --seq 32 --eval-every 1000 \
  --data "$dir/text.txt" --threads 2 -o "$dir/int" >/dev/null 2>&1 &
pid=$!
for i in $(seq 1 100); do [ -s "$dir/int/metrics.jsonl" ] && break; sleep 0.1; done
kill -INT $pid
wait $pid
status=$?
check "Ctrl-C exits with 130" "[ $status = 130 ]"
check "Ctrl-C writes a checkpoint" "[ -s '$dir/int/checkpoint.safetensors' ]"
"$lrc" train --resume "$dir/int" --stop-after "$(($(wc -l <"$dir/int/metrics.jsonl") + 2))" --threads 2 >/dev/null
resumed=$?
check "an interrupted run resumes" "[ $resumed = 0 ] && [ -s '$dir/int/model.safetensors' ]"
# LRC_PROFILE: a line per launch of the step on stderr (time a call, share
# of the total), the largest share first
LRC_PROFILE=1 "$lrc" train "$model" "${args[@]}" --steps 2 --eval-every 2 -o "$dir/prof" >/dev/null 2>"$dir/prof.txt"
grep ' ms .*GFLOP/s' "$dir/prof.txt" | awk '{print $3 + 0}' >"$dir/prof_share.txt"
check "LRC_PROFILE: a line per launch, the largest share first" \
  "[ \$(wc -l <'$dir/prof_share.txt') -gt 20 ] && sort -g -r -s '$dir/prof_share.txt' | cmp -s - '$dir/prof_share.txt'"
"$lrc" train "$model" "${args[@]}" --clip 0.5 -o "$dir/clip" >/dev/null
check "--clip trains" "grep -q '\"step\":20,' '$dir/clip/metrics.jsonl'"
# --accum 2 of batches of 2 draws the same windows as one batch of 4: the
# same loss and gradient norm at step 1 (up to f32 summation order)
one=(--preset tiny --steps 1 --lr 3e-3 --seq 32 --data "$dir/text.txt" --threads 2)
"$lrc" train "$model" "${one[@]}" --batch 4 -o "$dir/b4" >/dev/null
"$lrc" train "$model" "${one[@]}" --batch 2 --accum 2 -o "$dir/acc" >/dev/null
field() { grep -o "\"$1\":[0-9.e+-]*" "$2/metrics.jsonl" | head -1 | cut -d: -f2; }
for f in train_loss grad_norm; do
  a=$(field $f "$dir/b4") b=$(field $f "$dir/acc")
  echo "$f: batch 4 $a, batch 2 x accum 2 $b"
  check "--accum 2 gives the $f of a batch twice as large" "awk 'BEGIN { d = $a - $b; exit !(d * d <= 1e-10 * $a * $a) }'"
done
# --weight-decay: step 1's gradients are the same, so the decay alone moves
# the weights apart: matrices only, or everything with --decay-all
"$lrc" train "$model" "${one[@]}" --batch 4 --weight-decay 0.1 -o "$dir/wd" >/dev/null
"$lrc" train "$model" "${one[@]}" --batch 4 --weight-decay 0.1 --decay-all -o "$dir/wda" >/dev/null
same() { "$compare" "$dir/$1/model.safetensors" "$dir/b4/model.safetensors" "$2" 0 >/dev/null; }
check "--weight-decay leaves the norm gains" "same wd model.norm.weight"
check "--weight-decay moves the matrices" "! same wd lm_head.weight"
check "--decay-all moves the gains too" "! same wda model.norm.weight"
check "--accum is kept for --resume" "grep -q '\"accum\":\\s*2' '$dir/acc/run.json'"
# a learning rate that blows the weights up: the step whose gradient is not
# finite stops the run with a message naming it and the tensor, exit 1, and
# the checkpoint of the last good step stays
"$lrc" train "$model" --preset tiny --steps 20 --lr 1e30 --warmup 0 --batch 2 --seq 16 --eval-every 1 \
  --data "$dir/text.txt" --threads 2 -o "$dir/nan" >/dev/null 2>"$dir/nan.err"
status=$?
cat "$dir/nan.err"
check "a non-finite gradient exits 1" "[ $status = 1 ]"
check "it names the step and the tensor" "grep -q \"step 2: the gradient of 'model\\.[a-z_.0-9]*' is not finite\" '$dir/nan.err'"
check "the last good checkpoint is kept" "[ -s '$dir/nan/checkpoint.safetensors' ] && grep -q '\"step\":1,' '$dir/nan/metrics.jsonl'"
# an image model on Fashion-MNIST (Debian's dataset-fashion-mnist): metrics
# with validation accuracy, resume bit for bit (the data order comes from
# the seed and the step), and lrc eval's test accuracy
vit=$(dirname "$model")/vit.lua
V=(train "$vit" --preset tiny --set image_size=28 --steps 6 --lr 1e-3 --batch 16 --eval-every 3 --threads 2)
"$lrc" "${V[@]}" -o "$dir/vit" >/dev/null
"$lrc" "${V[@]}" -o "$dir/vit_half" --stop-after 3 >/dev/null
"$lrc" train --resume "$dir/vit_half" >/dev/null
check "vit: a resumed run is bit-identical" "cmp -s '$dir/vit/checkpoint.safetensors' '$dir/vit_half/checkpoint.safetensors'"
check "vit: metrics hold val_acc, a fraction" "tail -n 1 '$dir/vit/metrics.jsonl' | grep -q '\"val_acc\":0\.[0-9]'"
check "vit: lrc eval prints the test accuracy of 10000 images" \
  "'$lrc' eval '$vit' --preset tiny --set image_size=28 --weights '$dir/vit/model.safetensors' --threads 2 | grep -q '^test accuracy 0\.[0-9]* (10000 images)'"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
