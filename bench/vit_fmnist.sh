#!/bin/bash
# vit_fmnist.sh — the ViT figure: the small ViT (d 64, 6 blocks, 2 heads,
# d_ff 256, patch 4) trained with lrc train on Fashion-MNIST, batches of 128,
# peak rate 1e-3, 2,500 steps, 5% warm-up, with norm=pre and norm=layerrope
# one after the other; then each one's test accuracy (lrc eval), its wall
# time, and both curves in one plot.
#   bench/vit_fmnist.sh [OUT_DIR]      (default runs/vit-fmnist; runs already there are reused)
# Environment: LRC (default build/lrc), STEPS (2500), THREADS (2).
set -euo pipefail
cd "$(dirname "$0")/.."
lrc=${LRC:-build/lrc}
out=${1:-runs/vit-fmnist}
steps=${STEPS:-2500} threads=${THREADS:-2}
mkdir -p "$out"
declare -A wall
for norm in pre layerrope; do
  run=$out/$norm
  if [ ! -f "$run/model.safetensors" ]; then
    start=$(date +%s)
    "$lrc" train vit --preset small --set norm=$norm --steps "$steps" --lr 1e-3 --batch 128 --warmup 0.05 \
      --eval-every $((steps / 10)) --threads "$threads" -o "$run" | tr '\r' '\n' | grep -E 'val|^trained'
    wall[$norm]=$(($(date +%s) - start))
  else
    wall[$norm]="(reused)"
  fi
done
echo
echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-10s %9s %9s %12s\n' norm val_acc test_acc "wall (s)"
for norm in pre layerrope; do
  run=$out/$norm
  val=$(tail -n 1 "$run/metrics.jsonl" | sed -n 's/.*"val_acc":\([0-9.]*\).*/\1/p')
  test=$("$lrc" eval vit --preset small --set norm=$norm --weights "$run/model.safetensors" --threads "$threads" |
    sed -n 's/^test accuracy \([0-9.]*\).*/\1/p')
  printf '%-10s %9s %9s %12s\n' "$norm" "$val" "$test" "${wall[$norm]}"
done
"$lrc" plot "$out/pre" "$out/layerrope" -o "$out/curves.png"
