#!/bin/bash
# nn_scan.sh LRC ST_COMPARE — tests/cli/nn_scan.lua (the delta rule on
# nn.scan) against tests/reference/nn_scan_ref.py: the logits on ref and cpu
# within 1e-5 of torch; the graph of the same size at T = 4 and T = 64 (the
# body traced once); and backward refused in one line naming the model's
# line, as no gradient flows through nn.scan yet.
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
done
n4=$("$lrc" inspect "$model" --ir --seq 4 --batch 2 | grep -c '^%')
n64=$("$lrc" inspect "$model" --ir --seq 64 --batch 2 | grep -c '^%')
check "the graph has as many nodes at T = 64 as at T = 4 ($n64, $n4)" "[ '$n4' -gt 0 ] && [ '$n4' = '$n64' ]"
"$lrc" backward "$model" --weights "$dir/w.st" --input "$dir/in.st" -o "$dir/b.st" --target ref >/dev/null 2>"$dir/b.err"
rc=$?
check "backward through nn.scan exits 1 (got $rc)" "[ $rc = 1 ]"
check "backward names the line and says why ($(head -c 300 "$dir/b.err"))" \
  "[ \$(wc -l <'$dir/b.err') = 1 ] && grep -q 'nn_scan\.lua:16: nn.scan: no gradient flows through nn.scan yet' '$dir/b.err'"
summary
