#!/bin/bash
# errors.sh LRC MODEL ST_COMPARE — the cuda target's run-time behaviour that
# needs a device, on the host emulator: out of device memory (forward,
# backward, train: one line, exit status 1, no run directory left), a
# package for a newer architecture than the device's (one line, status 1),
# one for an older one (runs its PTX, the same logits as its cubin), and 20
# training steps on cuda against the same run on the cpu.
set -u
lrc=$1 model=$2 compare=$3
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
failed=0
py() { python3 "$(dirname "$0")/../tools/st.py" "$@"; }
toks=$(python3 -c 'print([(7 * i + 3) % 251 for i in range(32)])')
py make "$out/in.st" "{\"tokens\": [\"I32\", [2, 16], $toks]}"
printf 'In the beginning God created the heaven and the earth. %.0s' $(seq 1 200) >"$out/text.txt"
"$lrc" init "$model" --preset tiny --seed 1 -o "$out/w.st" >/dev/null
"$lrc" compile "$model" --preset tiny --target cuda --arch sm_90 --weights "$out/w.st" --batch 2 --seq 16 -o "$out/pkg" >/dev/null ||
  { echo "FAIL: lrc compile --target cuda"; exit 1; }

# expect STATUS PATTERN CMD...: the exit status, and one line on stderr matching PATTERN
expect() {
  local want=$1 pat=$2
  shift 2
  "$@" >"$out/stdout" 2>"$out/stderr"
  local rc=$? lines
  lines=$(wc -l <"$out/stderr")
  if [ $rc != "$want" ] || [ "$lines" != 1 ] || ! grep -q -- "$pat" "$out/stderr"; then
    echo "FAIL ($rc, $lines lines): $*"
    cat "$out/stderr"
    failed=1
  else
    echo "ok: $(cat "$out/stderr")"
  fi
}

export LRC_CUEMU_MEMORY=100000 # bytes: less than the arena of any of these
expect 1 'out of device memory' "$lrc" forward "$out/pkg" --input "$out/in.st" -o "$out/o.st"
expect 1 'out of device memory' "$lrc" backward "$model" --preset tiny --weights "$out/w.st" --input "$out/in.st" -o "$out/g.st" --target cuda
expect 1 'out of device memory' "$lrc" train "$model" --preset tiny --steps 2 --lr 1e-3 --batch 2 --seq 16 --data "$out/text.txt" \
  --target cuda -o "$out/run_oom"
[ -e "$out/run_oom" ] && { echo "FAIL: a failed cuda train left $out/run_oom"; failed=1; }
[ -e "$out/o.st" ] && { echo "FAIL: a failed forward wrote its output"; failed=1; }
unset LRC_CUEMU_MEMORY

LRC_CUEMU_SM=80 expect 1 'compile it again with --arch sm_80' "$lrc" forward "$out/pkg" --input "$out/in.st" -o "$out/o.st"
"$lrc" forward "$out/pkg" --input "$out/in.st" -o "$out/sm90.st" >/dev/null &&
  LRC_CUEMU_SM=100 "$lrc" forward "$out/pkg" --input "$out/in.st" -o "$out/sm100.st" >/dev/null &&
  cmp "$out/sm90.st" "$out/sm100.st" && echo "ok: an sm_90 package on an sm_100 device runs its PTX, the same logits" ||
  { echo "FAIL: the sm_90 package on sm_100 (its PTX)"; failed=1; }

for t in cuda cpu; do
  "$lrc" train "$model" --preset tiny --set norm=layerrope --steps 20 --lr 3e-3 --batch 4 --seq 32 --eval-every 10 \
    --data "$out/text.txt" --target $t -o "$out/run_$t" >/dev/null 2>"$out/train_$t.err" ||
    { echo "FAIL: lrc train --target $t: $(tail -1 "$out/train_$t.err")"; failed=1; }
done
python3 - "$out" <<'PY' || failed=1
import json, sys
rows = {t: [json.loads(l) for l in open(sys.argv[1] + "/run_%s/metrics.jsonl" % t)] for t in ("cuda", "cpu")}
a, b = rows["cuda"][-1], rows["cpu"][-1]
rel = abs(a["val_loss"] - b["val_loss"]) / b["val_loss"]
print("train: validation loss after 20 steps, cuda %.5f, cpu %.5f (%.1e relative; 2e-2 allowed); train loss %.4f -> %.4f"
      % (a["val_loss"], b["val_loss"], rel, rows["cuda"][0]["train_loss"], a["train_loss"]))
sys.exit(0 if rel < 2e-2 and a["train_loss"] < rows["cuda"][0]["train_loss"] else 1)
PY
exit $failed
