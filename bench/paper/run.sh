#!/bin/bash
# run.sh — the LayerRoPE paper's claims in miniature, with lrc alone, on this
# machine: writes bench/paper/REPORT.md and its plots.
#   bench/paper/run.sh [OUT_DIR]      (default runs/paper; finished runs are reused)
# Environment: LRC (default build/lrc), STEPS (600), JOBS (2).
#
# Stages, each a plain lrc command line (they are printed, and the report
# quotes them):
#   1. sweep   lrc sweep of norm = pre, peri, lns, layerrope over seven rates at
#              d 64, 12 layers (Fig. 4 and 6, Table 9);
#   2. depth   each arm at its best rate from stage 1, at 6, 24 and 48 layers
#              (Fig. 5 and 16; 12 layers is stage 1's run);
#   3. diagnose the residual stream's variance of each arm's best runs at 12
#              and 48 layers, with the read and write multipliers (Fig. 1a, 8);
#   4. analyze the learned schedules of the LayerRoPE runs (Fig. 19-21), their
#              slopes during training from metrics.jsonl, and the Pre-Norm
#              run's gains (Fig. 2), with --fit-layerrope and the fitted
#              checkpoint's validation loss beside the original's.
set -euo pipefail
cd "$(dirname "$0")/../.."
lrc=${LRC:-build/lrc}
out=${1:-runs/paper}
steps=${STEPS:-600} jobs=${JOBS:-2}
mkdir -p "$out"
shape=(--preset small --set d_model=64 --set n_heads=2 --set d_ff=176)
train=(--steps "$steps" --batch 16 --seq 128 --warmup 0.1 --clip 1.0 --eval-every $((steps / 6)) --val-tokens 32768 --seed 1)
rates=1e-3,2e-3,4e-3,8e-3,1.6e-2,3.2e-2,6.4e-2
arms=(pre peri lns layerrope)
log=$out/commands.txt # appended: a rerun's report keeps the first run's times (report.py)
run() { # the command line and its time go to the log, which the report quotes
  echo "+ $*" | sed "s#$out/#OUT/#g" | tee -a "$log" >&2
  local t0=$(date +%s)
  "$@"
  echo "  ($(($(date +%s) - t0)) s)" | tee -a "$log" >&2
}
start=$(date +%s)
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), $(nproc) cores" | tee -a "$log"

# 1. the learning-rate sweep at 12 layers
run "$lrc" sweep models/llama.lua "${shape[@]}" --set n_layers=12 "${train[@]}" \
  --grid norm=pre,peri,lns,layerrope --grid lr=$rates --jobs "$jobs" -o "$out/sweep" >/dev/null

best_lr() { # ARM: the rate with the lowest validation loss of stage 1
  /usr/bin/python3 - "$out/sweep/sweep.jsonl" "$1" <<'PY'
import json, sys
pts = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
pts = [p for p in pts if p["arm"] == "norm=" + sys.argv[2] and not p["diverged"]]
print(min(pts, key=lambda p: p["val_loss"])["run"].split("lr=")[1].split(",")[0])
PY
}

# 2. depth at each arm's best rate
for a in "${arms[@]}"; do
  run "$lrc" sweep models/llama.lua "${shape[@]}" --set norm=$a --lr "$(best_lr $a)" "${train[@]}" \
    --grid n_layers=6,24,48 --jobs "$jobs" -o "$out/depth-$a" >/dev/null
done

# 3. the residual stream of the best runs, on 16 validation windows of 128 bytes
for a in "${arms[@]}"; do
  lr=$(best_lr $a)
  for L in 12 48; do
    w=$out/sweep/norm=$a,lr=$lr/model.safetensors
    [ $L = 48 ] && w=$out/depth-$a/n_layers=48/model.safetensors
    run "$lrc" diagnose models/llama.lua "${shape[@]}" --set norm=$a --set n_layers=$L --weights "$w" \
      --batch 16 --seq 128 -o "$out/diagnose-$a-L$L.json" >/dev/null
  done
done

# 4. the learned schedules, and the gains of Pre-Norm with a LayerRoPE fit
lr=$(best_lr layerrope)
run "$lrc" analyze "$out/sweep/norm=layerrope,lr=$lr" -o "$out/analyze-layerrope-L12.json" --plot "$out/layerrope-L12" >/dev/null
run "$lrc" analyze "$out/depth-layerrope/n_layers=48" -o "$out/analyze-layerrope-L48.json" >/dev/null
lr=$(best_lr pre)
run "$lrc" analyze "$out/sweep/norm=pre,lr=$lr" -o "$out/analyze-pre-L12.json" --plot "$out/pre-L12" \
  --fit-layerrope "$out/pre-L12-fit.safetensors" >"$out/analyze-pre-L12.txt"
for w in "$out/sweep/norm=pre,lr=$lr/model.safetensors:pre" "$out/pre-L12-fit.safetensors:layerrope"; do
  run "$lrc" eval models/llama.lua "${shape[@]}" --set n_layers=12 --set norm=${w##*:} --weights "${w%:*}" \
    --batch 16 --seq 128 --steps 16 --seed 1 >"$out/eval-${w##*:}-fit.txt"
done

echo "# total $(($(date +%s) - start)) s" | tee -a "$log"
/usr/bin/python3 bench/paper/report.py "$out" bench/paper
