#!/bin/bash
# arith.sh LRC — numbers on either side of + - * / and the elementwise
# primitives from Lua (tests/cli/arith.lua): `lrc forward` on ref and cpu
# gives, element by element within 1e-5, what Python's math computes from
# the same weights and tokens; and bad input (a division of i32 tensors, a
# string operand) is one line naming the Lua line, exit 1.
set -u
lrc=$1
here=$(cd "$(dirname "$0")" && pwd)
model=$here/arith.lua
py=/usr/bin/python3
st="$py $here/../tools/st.py"
source "$here/../tools/check.sh" # $dir, check, summary
"$lrc" init "$model" --seed 3 -o "$dir/w.st" >/dev/null
$st make "$dir/in.st" '{"tokens": ["I32", [2, 3], [1, 5, 7, 0, 15, 3]]}'
for t in ref cpu; do
  "$lrc" forward "$model" --weights "$dir/w.st" --input "$dir/in.st" -o "$dir/$t.st" --target $t --threads 2 >/dev/null 2>"$dir/$t.err"
  s=$?
  check "forward --target $t exits 0 (status $s: $(head -c 300 "$dir/$t.err"))" "[ $s = 0 ]"
  check "forward --target $t computes arith.lua's expression" "$py - '$here/../tools' '$dir/w.st' '$dir/$t.st' <<'PY'
import math, sys
sys.path.insert(0, sys.argv[1])
import st
w = st.arrays(sys.argv[2])['embed.weight'][2]
got = st.arrays(sys.argv[3])['logits'][2]
want = []
for tok in [1, 5, 7, 0, 15, 3]:
    for h in w[tok * 8:tok * 8 + 8]:
        a = (1 - h) * (2 / (h * h + 1)) + (h + 1) / (3 + h * h) - (h - 0.5)
        b = (math.sqrt(h) if h > 0 else math.exp(-h)) + max(h, 0.25) * math.sin(h)
        want.append(a + b + math.pow(h * h + 1, 0.5) - math.log1p(abs(h)))
err = max(abs(g - x) / max(1.0, abs(x)) for g, x in zip(got, want))
print('largest error %.2e' % err)
sys.exit(len(got) != len(want) or err > 1e-5)
PY"
done
bad() { # NAME LINE EXPR PATTERN: a model whose build computes EXPR at line 4
  printf 'local lrc = require "lrc"\nlocal M = { defaults = { d = 8 } }\nfunction M.build(cfg, tokens)\n  return %s\nend\nreturn M\n' "$3" >"$dir/$1.lua"
  "$lrc" init "$dir/$1.lua" -o "$dir/$1.st" >/dev/null 2>"$dir/$1.err"
  s=$?
  check "$1: exit 1 (status $s)" "[ $s = 1 ]"
  check "$1: one line naming $1.lua:4 and '$4' ($(head -c 300 "$dir/$1.err"))" \
    "[ \$(wc -l <'$dir/$1.err') = 1 ] && grep -Eq '$1\\.lua:4: .*$4' '$dir/$1.err'"
}
bad divi32 4 'tokens / tokens' 'div: input 1 must be a floating-point tensor, got i32'
bad strop 4 'lrc.input("x", {2, 3}) + "a"' '\+ needs tensors or a number, got string'
summary
