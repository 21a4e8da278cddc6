#!/bin/bash
# along.sh LRC ST_COMPARE — tests/cli/along.lua, a small model of every op
# along one axis (reductions over the batch, sequence and feature axes,
# softmax over the sequence, cumsum both ways, expand, concat, stack),
# against tests/reference/along_ref.py, the same in PyTorch: the logits
# (forward) within 1e-5 and the loss and every gradient (backward) within
# 1e-4 on ref, cpu and cuda (f32; the emulator in CI, tests/cuemu), and
# within 2e-2 with cuda's bf16 storage.
# along.sh LRC ST_COMPARE MODEL REF PARAMS runs the same checks on another
# model of tests/cli, its reference script in tests/reference and the
# parameters (space-separated) whose gradients are compared (ctest scan_torch).
set -u
lrc=$1 compare=$2
here=$(cd "$(dirname "$0")" && pwd)
model=$here/${3:-along.lua}
ref=$here/../reference/${4:-along_ref.py}
params=${5:-embed.weight head.weight}
st="/usr/bin/python3 $here/../tools/st.py"
source "$here/../tools/check.sh" # $dir, check, summary
"$lrc" init "$model" --seed 3 -o "$dir/w.st" >/dev/null
$st make "$dir/in.st" '{"tokens": ["I32", [2, 6], [3, 17, 5, 29, 0, 11, 8, 8, 21, 2, 30, 14]]}'
/usr/bin/python3 "$ref" "$dir/w.st" "$dir/in.st" "$dir/torch.st"
check "$(basename "$ref") writes the reference" "[ -s '$dir/torch.st' ]"
for t in ref cpu; do
  "$lrc" forward "$model" --weights "$dir/w.st" --input "$dir/in.st" -o "$dir/f_$t.st" --target $t --threads 2 >/dev/null 2>"$dir/f_$t.err"
  check "forward --target $t exits 0 ($(head -c 300 "$dir/f_$t.err"))" "[ -s '$dir/f_$t.st' ]"
  check "forward --target $t: logits within 1e-5 of torch" "'$compare' '$dir/f_$t.st' '$dir/torch.st' logits 1e-5 >/dev/null"
done
for t in ref cpu cuda; do
  prec=()
  [ $t = cuda ] && prec=(--precision f32)
  "$lrc" backward "$model" --weights "$dir/w.st" --input "$dir/in.st" -o "$dir/b_$t.st" --target $t "${prec[@]}" --threads 2 \
    >/dev/null 2>"$dir/b_$t.err"
  check "backward --target $t exits 0 ($(head -c 300 "$dir/b_$t.err"))" "[ -s '$dir/b_$t.st' ]"
  for p in loss $params; do
    check "backward --target $t: $p within 1e-4 of torch" "'$compare' '$dir/b_$t.st' '$dir/torch.st' '$p' 1e-4 >/dev/null"
  done
done
"$lrc" backward "$model" --weights "$dir/w.st" --input "$dir/in.st" -o "$dir/b_bf16.st" --target cuda --precision bf16 >/dev/null 2>"$dir/b_bf16.err"
check "backward --target cuda --precision bf16 exits 0 ($(head -c 300 "$dir/b_bf16.err"))" "[ -s '$dir/b_bf16.st' ]"
for p in loss $params; do
  check "backward --target cuda --precision bf16: $p within 2e-2 of torch" "'$compare' '$dir/b_bf16.st' '$dir/torch.st' '$p' 2e-2 >/dev/null"
done
summary
