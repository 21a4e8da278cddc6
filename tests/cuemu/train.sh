#!/bin/bash
# train.sh LRC MODEL — lrc train --target cuda on the host emulator: 10
# steps of a tiny LLaMA against the same run on the cpu, the same in a byte
# less device memory than it held (cuBLASLt's workspace given up), stopped
# after 5 then resumed byte for byte, and as CUDA graphs; a ViT's likewise (4 steps, 2 then 2),
# its validation on the CPU with the weights read back.
set -u
lrc=$1 model=$2
source "$(dirname "$0")/common.sh"
printf 'In the beginning God created the heaven and the earth. %.0s' $(seq 1 200) >"$out/text.txt"

# the tiny LLaMA's run, and a ViT's (its validation on the CPU with the
# weights read back, once a step however many want them)
L=(train "$model" --preset tiny --set norm=layerrope --steps 10 --lr 3e-3 --batch 4 --seq 32 --eval-every 5 --data "$out/text.txt")
V=(train "$(dirname "$model")/vit.lua" --preset tiny --set image_size=28 --steps 4 --lr 1e-3 --batch 16 --eval-every 2 --threads 2)
for t in cuda cpu; do
  LRC_CUEMU_PEAK="$out/peak" "$lrc" "${L[@]}" --target $t -o "$out/run_$t" >/dev/null 2>"$out/train_$t.err" ||
    { echo "FAIL: lrc train --target $t: $(tail -1 "$out/train_$t.err")"; failed=1; }
done
# a byte less device memory than that run held at most: the optimizer's
# moments take the place of cuBLASLt's workspace (the model comes first),
# and the run ends with the same checkpoint
LRC_CUEMU_MEMORY=$(($(cat "$out/peak") - 1)) "$lrc" "${L[@]}" --target cuda -o "$out/run_tight" >/dev/null 2>"$out/train_tight.err" &&
  cmp -s "$out/run_cuda/checkpoint.safetensors" "$out/run_tight/checkpoint.safetensors" &&
  echo "ok: training in a byte less memory than it held ($(cat "$out/peak") bytes): cuBLASLt's workspace given up, the same checkpoint" ||
  { echo "FAIL: training with cuBLASLt's workspace given up: $(tail -1 "$out/train_tight.err")"; failed=1; }
# without LRC_CUDA_CHECK the training step runs as a CUDA graph (launch by
# launch once, then captured and replayed), AdamW's kernels after it on the
# legacy stream: the same checkpoint as launch by launch
env -u LRC_CUDA_CHECK LRC_CUEMU_TRACE=1 "$lrc" "${L[@]}" --target cuda -o "$out/run_graph" >/dev/null 2>"$out/train_graph.err" &&
  n=$(grep -c '^graph launch' "$out/train_graph.err") && [ "$n" -ge 9 ] &&
  cmp -s "$out/run_cuda/checkpoint.safetensors" "$out/run_graph/checkpoint.safetensors" &&
  echo "ok: cuda training with the step as a CUDA graph ($n graph launches): the same checkpoint as launch by launch" ||
  { echo "FAIL: cuda training as CUDA graphs: $(grep -v '^launch\|^gemm\|^ltmatmul\|^dtoh' "$out/train_graph.err" | tail -2)"; failed=1; }
# AdamW on the device: its weights and moments come back for the
# checkpoint, and go up again with --resume, bit for bit
"$lrc" "${L[@]}" --target cuda --stop-after 5 -o "$out/run_part" >/dev/null 2>"$out/train_part.err" &&
  "$lrc" train --resume "$out/run_part" >/dev/null 2>>"$out/train_part.err" &&
  cmp -s "$out/run_cuda/checkpoint.safetensors" "$out/run_part/checkpoint.safetensors" &&
  echo "ok: cuda training stopped after 5 steps and resumed ends with the checkpoint of 10 in one go, byte for byte" ||
  { echo "FAIL: cuda --stop-after 5 then --resume differs from the run in one go: $(tail -1 "$out/train_part.err")"; failed=1; }
"$lrc" "${V[@]}" --target cuda -o "$out/vit_cuda" >/dev/null 2>"$out/vit.err" &&
  "$lrc" "${V[@]}" --target cpu -o "$out/vit_cpu" >/dev/null 2>>"$out/vit.err" &&
  "$lrc" "${V[@]}" --target cuda --stop-after 2 -o "$out/vit_part" >/dev/null 2>>"$out/vit.err" &&
  "$lrc" train --resume "$out/vit_part" >/dev/null 2>>"$out/vit.err" &&
  cmp -s "$out/vit_cuda/checkpoint.safetensors" "$out/vit_part/checkpoint.safetensors" &&
  echo "ok: vit trained on cuda, stopped after 2 steps and resumed: the checkpoint of 4 in one go, byte for byte" ||
  { echo "FAIL: vit training on cuda: $(tail -1 "$out/vit.err")"; failed=1; }
# after 4 steps the ViT's loss is still about ln 10 on either target, so the
# losses alone would pass a model that never moved: each tensor's update
# (the weights less the initial ones, which lrc init writes from the run's
# seed) on cuda against the cpu's, within 0.5 (the emulator's worst, 0.25, a
# layer norm's gain in bf16); an update never applied is 1. A tensor whose
# cpu update is under 1e-3 of the largest (the key biases: softmax ignores
# them, their gradient is zero but for rounding) is not compared.
"$lrc" init "$(dirname "$model")/vit.lua" --preset tiny --set image_size=28 --seed 0 -o "$out/vit_w0.st" >/dev/null &&
  PYTHONPATH="$tools" python3 - "$out/vit_w0.st" "$out/vit_cuda/model.safetensors" "$out/vit_cpu/model.safetensors" <<'PY' || failed=1
import math, sys
import st
def load(p):
    ts = st.arrays(p)
    assert len(ts) == len(st.tensors(p)) and all(dt == "F32" for dt, _, _ in ts.values()), p
    return {k: a for k, (_, _, a) in ts.items()}
w0, cu, cpu = (load(p) for p in sys.argv[1:4])
assert w0.keys() == cu.keys() == cpu.keys(), "the three files hold other tensors"
ups = {k: ([a - z for a, z in zip(cu[k], w0[k])], [b - z for b, z in zip(cpu[k], w0[k])]) for k in w0}
norm = {k: math.sqrt(sum(y * y for y in ups[k][1])) for k in ups}
largest = max(norm.values())
rel = {k: math.sqrt(sum((x - y) ** 2 for x, y in zip(*ups[k]))) / norm[k] for k in ups if norm[k] >= 1e-3 * largest}
worst = max(rel, key=lambda k: math.inf if math.isnan(rel[k]) else rel[k])  # a NaN is the worst
ok = rel[worst] <= 0.5
print("%s: vit's 4 steps on cuda: every tensor's update within %.2e of the cpu's (%s; 0.5 allowed; %d of %d compared)"
      % ("ok" if ok else "FAIL", rel[worst], worst, len(rel), len(ups)))
sys.exit(0 if ok else 1)
PY
# the last validation loss of each cuda run against its cpu run within 2e-2;
# the LLaMA's train loss falls, the ViT's accuracy is the cpu's within 2e-2
python3 - "$out" <<'PY' || failed=1
import json, sys
ok = True
for name, run, steps in (("vit", "vit_%s", 4), ("train", "run_%s", 10)):
    rows = {t: [json.loads(l) for l in open(sys.argv[1] + "/" + run % t + "/metrics.jsonl")] for t in ("cuda", "cpu")}
    a, b = rows["cuda"][-1], rows["cpu"][-1]
    rel = abs(a["val_loss"] - b["val_loss"]) / b["val_loss"]
    if name == "vit":
        extra = "accuracy %.3f, %.3f" % (a["val_acc"], b["val_acc"])
        ok = ok and abs(a["val_acc"] - b["val_acc"]) <= 2e-2
    else:
        extra = "train loss %.4f -> %.4f" % (rows["cuda"][0]["train_loss"], a["train_loss"])
        ok = ok and a["train_loss"] < rows["cuda"][0]["train_loss"]
    print("%s: validation loss after %d steps, cuda %.5f, cpu %.5f (%.1e relative; 2e-2 allowed); %s"
          % (name, steps, a["val_loss"], b["val_loss"], rel, extra))
    ok = ok and rel < 2e-2
sys.exit(0 if ok else 1)
PY
exit $failed
