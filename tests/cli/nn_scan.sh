#!/bin/bash
# nn_scan.sh LRC ST_COMPARE — tests/cli/nn_scan.lua (the delta rule on
# nn.scan) against tests/reference/nn_scan_ref.py: the logits on ref and cpu
# within 1e-5 of torch; the graph of the same size at T = 4 and T = 64 (the
# body traced once); the loss and every gradient (a training graph unrolls
# the steps) on ref and cpu within 1e-4, and at T = 70, more steps than one
# lrc.stack joins, on ref.
set -u
lrc=$1 compare=$2
here=$(cd "$(dirname "$0")" && pwd)
model=$here/nn_scan.lua
st="/usr/bin/python3 $here/../tools/st.py"
source "$here/../tools/check.sh" # $dir, check, summary
"$lrc" init "$model" --seed 3 -o "$dir/w.st" >/dev/null
$st make "$dir/in.st" '{"tokens": ["I32", [2, 6], [3, 17, 5, 29, 0, 11, 8, 8, 21, 2, 30, 14]]}'
/usr/bin/python3 "$here/../reference/nn_scan_ref.py" "$dir/w.st" "$dir/in.st" "$dir/torch.st"
check "nn_scan_ref.py writes the reference" "[ -s '$dir/torch.st' ]"
for t in ref cpu; do
  "$lrc" forward "$model" --weights "$dir/w.st" --input "$dir/in.st" -o "$dir/f_$t.st" --target $t --threads 2 >/dev/null 2>"$dir/f_$t.err"
  check "forward --target $t exits 0 ($(head -c 300 "$dir/f_$t.err"))" "[ -s '$dir/f_$t.st' ]"
  check "forward --target $t: logits within 1e-5 of torch" "'$compare' '$dir/f_$t.st' '$dir/torch.st' logits 1e-5 >/dev/null"
  "$lrc" backward "$model" --weights "$dir/w.st" --input "$dir/in.st" -o "$dir/b_$t.st" --target $t --threads 2 \
    >/dev/null 2>"$dir/b_$t.err"
  check "backward --target $t exits 0 ($(head -c 300 "$dir/b_$t.err"))" "[ -s '$dir/b_$t.st' ]"
  for p in loss embed.weight q.weight k.weight v.weight beta.weight head.weight; do
    check "backward --target $t: $p within 1e-4 of torch" "'$compare' '$dir/b_$t.st' '$dir/torch.st' '$p' 1e-4 >/dev/null"
  done
done
n4=$("$lrc" inspect "$model" --ir --seq 4 --batch 2 | grep -c '^%')
n64=$("$lrc" inspect "$model" --ir --seq 64 --batch 2 | grep -c '^%')
check "the graph has as many nodes at T = 64 as at T = 4 ($n64, $n4)" "[ '$n4' -gt 0 ] && [ '$n4' = '$n64' ]"
# 70 steps: the ys stacked 64 at a time, then the blocks joined
ids=$(seq 0 69 | awk '{ printf "%s%d", (NR > 1 ? "," : ""), ($1 * 7) % 32 }')
$st make "$dir/in70.st" "{\"tokens\": [\"I32\", [1, 70], [$ids]]}"
/usr/bin/python3 "$here/../reference/nn_scan_ref.py" "$dir/w.st" "$dir/in70.st" "$dir/torch70.st"
"$lrc" backward "$model" --weights "$dir/w.st" --input "$dir/in70.st" -o "$dir/b70.st" --target ref >/dev/null 2>"$dir/b70.err"
check "backward at T = 70 exits 0 ($(head -c 300 "$dir/b70.err"))" "[ -s '$dir/b70.st' ]"
for p in loss embed.weight q.weight k.weight v.weight beta.weight head.weight; do
  check "backward at T = 70: $p within 1e-4 of torch" "'$compare' '$dir/b70.st' '$dir/torch70.st' '$p' 1e-4 >/dev/null"
done
summary
