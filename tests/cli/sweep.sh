#!/bin/bash
# sweep.sh LRC — lrc sweep:
# - its table of a synthetic sweep.jsonl (two arms; seeds; a diverged run; a
#   loss above ln V; rates that one arm alone swept) equals the hand
#   computation below: eta*, L*, the seeds' spread, the largest stable rate,
#   the failed runs and S;
# - a real sweep (the tiny LLaMA, 2 rates x 2 seeds, one job) stopped by
#   SIGINT after its first point and started again finishes the grid without
#   running the first point again, and its table equals an uninterrupted
#   sweep's, byte for byte.
lrc=$1
source "$(dirname "$0")/../tools/check.sh"

# ---- the table, by hand ----
# l0 = ln 256 = 5.545177. Arm norm=pre: L(1e-3) = (2.0 + 2.2)/2 = 2.1,
# L(3e-3) = (1.5 + 1.7)/2 = 1.6, L(1e-2) = (l0 [diverged] + 3.0)/2 = 4.272589,
# L(3e-2) = (2.9 + 2.5)/2 = 2.7 (pre alone). eta* = 3e-3, L* = 1.6, sd of
# (1.5, 1.7) = 0.141421. Failed (diverged, or above L* + 1 = 2.6): the
# diverged run, 3.0, 2.9: 3 of 8; stable rates (no failed run): 1e-3, 3e-3:
# the largest 3e-3. S over the rates both arms swept (1e-3, 3e-3, 1e-2):
# (0.5 + 0 + 2.672589)/3 = 1.057530.
# Arm norm=layerrope: L(1e-4) = (min(6.0, l0) + 5.0)/2 = 5.272589 (layerrope
# alone), L(1e-3) = (2.3 + 2.6)/2 = 2.45, L(3e-3) = (1.9 + 2.1)/2 = 2.0,
# L(1e-2) = (1.3 + 1.5)/2 = 1.4. eta* = 1e-2, L* = 1.4, sd 0.141421. Failed
# (above 2.4): 2.6, 6.0, 5.0: 3 of 8; stable: 3e-3, 1e-2: 1e-2.
# S = (1.05 + 0.6 + 0)/3 = 0.55.
mkdir "$dir/syn"
l0=5.545177444479562
{
  for r in "1e-3 1 2.0" "1e-3 2 2.2" "3e-3 1 1.5" "3e-3 2 1.7" "1e-2 2 3.0" "3e-2 1 2.9" "3e-2 2 2.5"; do
    set -- $r
    echo "{\"run\":\"norm=pre,lr=$1,seed=$2\",\"arm\":\"norm=pre\",\"lr\":$1,\"seed\":$2,\"val_loss\":$3,\"diverged\":false,\"l0\":$l0}"
  done
  echo "{\"run\":\"norm=pre,lr=1e-2,seed=1\",\"arm\":\"norm=pre\",\"lr\":1e-2,\"seed\":1,\"diverged\":true,\"l0\":$l0}"
  for r in "1e-4 1 6.0" "1e-4 2 5.0" "1e-3 1 2.3" "1e-3 2 2.6" "3e-3 1 1.9" "3e-3 2 2.1" "1e-2 1 1.3" "1e-2 2 1.5"; do
    set -- $r
    echo "{\"run\":\"norm=layerrope,lr=$1,seed=$2\",\"arm\":\"norm=layerrope\",\"lr\":$1,\"seed\":$2,\"val_loss\":$3,\"diverged\":false,\"l0\":$l0}"
  done
} >"$dir/syn/sweep.jsonl"
"$lrc" sweep --table "$dir/syn" >"$dir/syn.out" 2>&1
check "sweep --table runs" "[ $? = 0 ] && [ -s '$dir/syn/sweep.md' ] && [ -s '$dir/syn/sweep.png' ]"
row() { grep -qF -- "$1" "$dir/syn/sweep.md" || { echo "missing: $1"; cat "$dir/syn/sweep.md"; return 1; }; }
check "pre: eta* 3e-3, L* 1.6, 2 seeds (sd 0.1414), stable to 3e-3, 3 of 8 failed, S 1.0575 over 3 rates" \
  "row '| norm=pre | 0.003 | 1.6000 | 2 (0.1414) | 0.003 | 3 of 8 | 1.0575 (3) |'"
check "layerrope: eta* 1e-2, L* 1.4, 2 seeds (sd 0.1414), stable to 1e-2, 3 of 8 failed, S 0.5500 over 3 rates" \
  "row '| norm=layerrope | 0.01 | 1.4000 | 2 (0.1414) | 0.01 | 3 of 8 | 0.5500 (3) |'"
check "L(rate): a rate one arm alone swept, a diverged run counted as ln V" \
  "row '| 0.0001 | - | 5.2726 |' && row '| 0.01 | 4.2726 (1 diverged) | 1.4000 |' && row '| 0.03 | 2.7000 | - |'"

# ---- a real sweep: stopped by SIGINT, started again ----
grid=(sweep llama --preset tiny --grid lr=3e-3,1e-2 --grid seed=1,2 --steps 40 --batch 4 --seq 64 --eval-every 20)
"$lrc" "${grid[@]}" -o "$dir/whole" >"$dir/whole.out" 2>&1
check "the uninterrupted sweep" "[ $? = 0 ] && [ \$(wc -l <'$dir/whole/sweep.jsonl') = 4 ]"
# lrc itself in the background (a function would run in a subshell, which
# would take the SIGINT)
"$lrc" "${grid[@]}" -o "$dir/cut" >"$dir/cut.out" 2>&1 &
pid=$!
for _ in $(seq 600); do # until the first point is recorded and the second is in its steps
  [ -s "$dir/cut/sweep.jsonl" ] && grep -q 'step [0-9]*/40' "$dir/cut/lr=3e-3,seed=2.log" 2>/dev/null && break
  sleep 0.05
done
kill -INT $pid
wait $pid
rc=$?
first_log=$(cksum <"$dir/cut/lr=3e-3,seed=1.log")
check "SIGINT: the sweep stops (130) with fewer than 4 points recorded" "[ $rc = 130 ] && [ \$(wc -l <'$dir/cut/sweep.jsonl') -lt 4 ]"
check "SIGINT: the point in its steps wrote its checkpoint" "[ -f '$dir/cut/lr=3e-3,seed=2/checkpoint.safetensors' ] && grep -q 'interrupted after step' '$dir/cut/lr=3e-3,seed=2.log'"
"$lrc" "${grid[@]}" -o "$dir/cut" >"$dir/cut2.out" 2>&1
check "started again: the grid finishes" "[ $? = 0 ] && [ \$(wc -l <'$dir/cut/sweep.jsonl') = 4 ]"
check "started again: the first point is not run again" \
  "grep -q 'already finished' '$dir/cut2.out' && ! grep -q '^sweep: lr=3e-3,seed=1 ' '$dir/cut2.out' && [ \"\$(cksum <'$dir/cut/lr=3e-3,seed=1.log')\" = '$first_log' ]"
check "the table equals the uninterrupted sweep's" "cmp '$dir/whole/sweep.md' '$dir/cut/sweep.md'"
summary
