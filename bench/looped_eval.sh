#!/bin/bash
# looped_eval.sh — a looped model's validation loss against the number of
# iterations at evaluation: trains Parcae (preset small by default) on the
# King James Bible with T ~ max(1, Poisson(mu_rec)) per sequence and
# truncated gradients, unless RUN_DIR already holds a finished run, then
# evaluates its weights at every T given on the same fixed validation
# batches, and prints one table.
#   bench/looped_eval.sh [RUN_DIR [T...]]     (defaults: runs/parcae-small, 1 2 4 8 16)
# Environment: LRC (default build/lrc), STEPS (600), NORM (pre), THREADS (2).
set -euo pipefail
cd "$(dirname "$0")/.."
lrc=${LRC:-build/lrc}
run=${1:-runs/parcae-small}
shift || true
Ts=("$@")
[ ${#Ts[@]} -gt 0 ] || Ts=(1 2 4 8 16)
steps=${STEPS:-600} norm=${NORM:-pre} threads=${THREADS:-2}
model=(parcae --preset small --set "norm=$norm")
if [ ! -f "$run/model.safetensors" ]; then
  mkdir -p "$(dirname "$run")"
  echo "training ${model[*]} for $steps steps into $run"
  start=$(date +%s)
  "$lrc" train "${model[@]}" --steps "$steps" --lr 3e-3 --batch 16 --seq 256 --warmup 0.05 \
    --eval-every $((steps / 6)) --threads "$threads" -o "$run" | tr '\r' '\n' | grep -E '^step [0-9]+/[0-9]+ .*val|^trained'
  echo "trained in $(($(date +%s) - start)) s"
fi
echo
echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "validation loss of $run/model.safetensors (nats/byte, 8 fixed batches of 16x256):"
printf '%6s  %10s\n' T val_loss
for T in "${Ts[@]}"; do
  loss=$("$lrc" eval "${model[@]}" --set "T=$T" --weights "$run/model.safetensors" --threads "$threads" |
    sed -n 's/^validation loss \([0-9.]*\).*/\1/p')
  printf '%6s  %10s\n' "$T" "$loss"
done
