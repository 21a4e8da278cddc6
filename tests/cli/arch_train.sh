#!/bin/bash
# arch_train.sh LRC MODEL FIXTURE_DIR [--set K=V]... — `lrc train` of one of
# examples/architectures at its fixture's config (config.txt) with a byte
# vocabulary, on a small repeated text: the run exits 0 and the validation
# loss falls by at least 0.5 nats over 30 steps. The extra options (a
# shorter --seq for a model with few learned positions) follow the config.
set -u
lrc=$1 model=$2 fixture=$3
shift 3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
sets=()
while IFS= read -r line; do sets+=(--set "$line"); done <"$fixture/config.txt"
for i in $(seq 1 60); do
  echo "In the beginning God created the heaven and the earth. And the earth was without form, and void."
done >"$dir/text.txt"
"$lrc" train "$model" "${sets[@]}" --set vocab=256 "$@" --steps 30 --lr 3e-3 --batch 2 --seq 8 \
  --eval-every 10 --data "$dir/text.txt" --threads 2 -o "$dir/run" >"$dir/log" 2>&1
s=$?
if [ $s != 0 ]; then cat "$dir/log"; echo "FAIL: lrc train exited $s"; exit 1; fi
first=$(grep -o '"val_loss":[0-9.]*' "$dir/run/metrics.jsonl" | head -1 | cut -d: -f2)
last=$(grep -o '"val_loss":[0-9.]*' "$dir/run/metrics.jsonl" | tail -1 | cut -d: -f2)
echo "validation loss: $first at step 10, $last at step 30"
if [ -z "$first" ] || ! awk "BEGIN { exit !($last < $first - 0.5) }"; then
  echo "FAIL: the validation loss did not fall by 0.5"
  exit 1
fi
