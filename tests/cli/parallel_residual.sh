#!/bin/bash
# parallel_residual.sh LRC ST_COMPARE — a model whose parameters' gradients
# coincide (issue 49): h + l1(h) + l2(h) with biases, where cse merges the
# gradients of l1 and l2 into one node. `lrc backward` on the cpu target
# gives every gradient within 1e-5 of ref (it once stopped with "output
# 'l2.weight' is an input or parameter"), and `lrc train` runs on it: 3
# steps exit 0, and over 20 steps the training loss falls.
set -u
lrc=$1 compare=$2
here=$(cd "$(dirname "$0")" && pwd)
model=$here/parallel_residual.lua
st="/usr/bin/python3 $here/../tools/st.py"
source "$here/../tools/check.sh" # $dir, check, summary
"$lrc" init "$model" --seed 3 -o "$dir/w.st" >/dev/null
$st make "$dir/in.st" "{\"tokens\": [\"I32\", [2, 12], [$(awk 'BEGIN { for (i = 0; i < 24; i++) printf "%s%d", i ? "," : "", (37 * i + 5) % 256 }')]]}"
for t in ref cpu; do
  "$lrc" backward "$model" --weights "$dir/w.st" --input "$dir/in.st" -o "$dir/$t.st" --target $t --threads 2 >/dev/null 2>"$dir/$t.err"
  s=$?
  check "backward --target $t exits 0 (status $s: $(head -c 300 "$dir/$t.err"))" "[ $s = 0 ]"
done
check "cpu gradients within 1e-5 of ref" "'$compare' '$dir/cpu.st' '$dir/ref.st' '*' 1e-5 >/dev/null 2>&1"
for p in loss embed.weight l1.weight l1.bias l2.weight l2.bias lm_head.weight; do
  check "the cpu's gradients hold $p" "'$compare' '$dir/cpu.st' '$dir/ref.st' '$p' 1e-5 >/dev/null 2>&1"
done
# l1's and l2's gradients are one value, so the merge this test is about happened
check "l1.weight's gradient equals l2.weight's" \
  "/usr/bin/python3 -c \"import sys; sys.path.insert(0, '$here/../tools'); import st; t = st.tensors('$dir/cpu.st'); sys.exit(t['l1.weight'][2] != t['l2.weight'][2] or t['l1.bias'][2] != t['l2.bias'][2])\" 2>/dev/null"
for i in $(seq 1 60); do echo "In the beginning God created the heaven and the earth."; done >"$dir/text.txt"
args=(--lr 1e-2 --batch 4 --seq 16 --eval-every 1000 --data "$dir/text.txt" --threads 2)
"$lrc" train "$model" "${args[@]}" --steps 3 -o "$dir/run3" >/dev/null 2>"$dir/run3.err"
s=$?
check "train --steps 3 exits 0 (status $s: $(head -c 300 "$dir/run3.err"))" "[ $s = 0 ]"
"$lrc" train "$model" "${args[@]}" --steps 20 -o "$dir/run20" >/dev/null 2>"$dir/run20.err"
s=$?
check "train --steps 20 exits 0 (status $s: $(head -c 300 "$dir/run20.err"))" "[ $s = 0 ]"
first=$(grep -o '"train_loss":[0-9.]*' "$dir/run20/metrics.jsonl" 2>/dev/null | head -1 | cut -d: -f2)
last=$(grep -o '"train_loss":[0-9.]*' "$dir/run20/metrics.jsonl" 2>/dev/null | tail -1 | cut -d: -f2)
echo "training loss: ${first:-none} at step 1, ${last:-none} at step 20"
check "the training loss falls over 20 steps" "[ -n '$first' ] && [ -n '$last' ] && awk 'BEGIN { exit !($last < $first - 0.1) }'"
summary
