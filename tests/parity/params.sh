#!/bin/bash
# params.sh LRC MODEL — parameter counts of every preset and placement:
# the 60m totals of docs/models.md, and LayerRoPE's saving of 2Ld - 4d - 16 against
# Pre-Norm and 4Ld - 4d - 16 against Peri-Norm (the paper's Table 5).
set -u
lrc=$1 model=$2
passed=0 failed=0
total() { "$lrc" inspect "$model" --preset "$1" --set norm="$2" --params | tail -1 | awk '$1 == "total" {print $2}'; }
expect() { # name got want
  if [ "$2" = "$3" ]; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL $1: got $2, want $3"; fi
}
expect "60m pre total" "$(total 60m pre)" 58073600
expect "60m layerrope total" "$(total 60m layerrope)" 58067472
# preset d L
while read -r p d L; do
  pre=$(total "$p" pre) lr=$(total "$p" layerrope) peri=$(total "$p" peri) lrp=$(total "$p" layerrope_peri)
  expect "$p pre - layerrope" $((pre - lr)) $((2 * L * d - 4 * d - 16))
  expect "$p peri - layerrope_peri" $((peri - lrp)) $((4 * L * d - 4 * d - 16))
  for n in post lns deepnet; do expect "$p $n = pre" "$(total "$p" $n)" "$pre"; done
  echo "$p: pre $pre, layerrope $lr (-$((pre - lr))), peri $peri, layerrope_peri $lrp (-$((peri - lrp)))"
done <<'TABLE'
60m 512 8
130m 768 12
250m 896 20
500m 1280 24
1b 2048 24
depth-L48 128 48
depth-L96 128 96
depth-L192 128 192
depth-L256 128 256
depth-L384 128 384
depth-L512 128 512
TABLE
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
