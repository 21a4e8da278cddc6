#!/bin/bash
# bench/gpu/run.sh — the device check, on a machine with an NVIDIA GPU, in
# one go (under 8 minutes):
#   1. which targets lrc sees (lrc devices);
#   2. attention on the tensor cores against ref (tests/cuemu/attention.sh);
#      GEMMs with a bias in cuBLASLt's epilogue (tests/cuemu/bias.sh);
#      every op fixture alone (test_cuda_ops: guard regions, 1e-5); AdamW's
#      kernels against the host's AdamW (test_cuda_optim); every
#      PyTorch fixture at f32 storage (tests/cuemu/case.sh, as CI runs
#      it on the emulator) with LRC_CUDA_CHECK's guard region after every
#      buffer, checked after every launch: logits within 1e-5, gradients
#      within 2e-4 (1e-3 Parcae);
#      every norm placement at preset small (B=2, T=64): the cuda package's
#      logits against the reference backend within 2e-2 relative, and two
#      runs bit-identical;
#   3. ViT and Parcae (small; Parcae's loop with 8 and 3 iterations in one
#      batch) against ref within 2e-2;
#   4. gradients on the GPU (lrc backward --target cuda) against ref for
#      pre and layerrope (small): f32 storage within 1e-4, bf16 within 5e-2
#      (each tensor against at least 1e-2 of the largest norm);
#   5. lrc train --target cuda (AdamW on the device), 30 steps, against the
#      same run on the cpu, and both runs' tokens/s;
#   6. forward of 130m and 1b at B=8, T=256, and a training step without
#      the optimizer (forward, loss, backward) of 130m: lrc against PyTorch
#      eager and torch.compile (bf16, same weights), device times, a table
#      of ratios last; lrc profile of the 1b package (each kernel against the
#      GPU's measured copy bandwidth and GEMM rate).
# It uses LRC (default gpu-carry/lrc, unpacked from the gpu-carry.tar.xz
# that bench/gpu/pack.sh makes here, else build/lrc)
# with the libraries in its lib/ folder, and python3 with torch for the
# PyTorch side. Exit status 1 when a check fails.
#
# bench/gpu/run.sh [parity] [train] [speed]: only those sections (2-4,
# 5, 6), in the order named, after step 1; none named: all of them, in that
# order. Speed also decodes 128 tokens of 1b (lrc generate of a decoder
# package against PyTorch with a static KV cache, eager and as a CUDA graph)
# and profiles 130m's training step (LRC_PROFILE=1 lrc backward).
set -u
sections=" ${*:-parity train speed} "
for s in $sections; do
  case $s in parity | train | speed) ;; *) echo "run.sh: unknown section '$s' (parity, train or speed)" >&2; exit 2 ;; esac
done
# KEEP=DIR: the profiles, the trace and the training metrics copied there too
keep() { [ -n "${KEEP:-}" ] && [ -f "$1" ] && cp "$1" "$KEEP/$2"; return 0; }
cd "$(dirname "$0")/../.."
[ -f gpu-carry.tar.xz ] && [ ! -x gpu-carry/lrc ] && tar -xJf gpu-carry.tar.xz
LRC=${LRC:-gpu-carry/lrc}
[ -x "$LRC" ] || LRC=build/lrc
BIN=$(dirname "$LRC")
COMPARE=${COMPARE:-$BIN/st_compare}
[ -x "$COMPARE" ] || COMPARE=$(find build -name st_compare -type f 2>/dev/null | head -1)
OPS=$BIN/test_cuda_ops
[ -x "$OPS" ] || OPS=$(find build -name test_cuda_ops -type f 2>/dev/null | head -1)
OPTIM=$BIN/test_cuda_optim
[ -x "$OPTIM" ] || OPTIM=$(find build -name test_cuda_optim -type f 2>/dev/null | head -1)
export LD_LIBRARY_PATH="$BIN/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
PY=${PY:-python3}
MODEL=models/llama.lua
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
failed=0
start=$SECONDS
step() { echo; echo "== $* ($((SECONDS - start)) s)"; }

step "lrc devices"
"$LRC" devices || failed=1
cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '. ')
arch=sm_${cap:-90}
echo "compiling for $arch"

tokens() { # tokens B T FILE
  "$PY" - "$1" "$2" "$3" <<'PY'
import json, struct, sys
B, T = int(sys.argv[1]), int(sys.argv[2])
ids = [(7 * i + 3) % 251 for i in range(B * T)]
h = json.dumps({"tokens": {"dtype": "I32", "shape": [B, T], "data_offsets": [0, 4 * B * T]}}).encode()
h += b" " * (-len(h) % 8)
open(sys.argv[3], "wb").write(struct.pack("<Q", len(h)) + h + struct.pack("<%di" % (B * T), *ids))
PY
}

parity() {
step "logits of every placement against ref (small, B=2, T=64)"
tokens 2 64 "$out/in.st"
for norm in pre post peri lns deepnet layerrope layerrope_peri; do
  "$LRC" init $MODEL --preset small --set norm=$norm --seed 3 -o "$out/w.st" >/dev/null &&
  "$LRC" forward $MODEL --preset small --set norm=$norm --weights "$out/w.st" --input "$out/in.st" -o "$out/ref.st" --target ref >/dev/null &&
  "$LRC" compile $MODEL --preset small --set norm=$norm --target cuda --arch $arch --weights "$out/w.st" --batch 2 --seq 64 \
    -o "$out/pkg_$norm" >/dev/null &&
  "$LRC" forward "$out/pkg_$norm" --input "$out/in.st" -o "$out/gpu1.st" >/dev/null &&
  "$LRC" forward "$out/pkg_$norm" --input "$out/in.st" -o "$out/gpu2.st" >/dev/null
  if [ $? != 0 ]; then echo "FAIL $norm: lrc failed"; failed=1; continue; fi
  printf '%-16s ' "$norm"
  "$COMPARE" "$out/gpu1.st" "$out/ref.st" logits 2e-2 || failed=1
  cmp -s "$out/gpu1.st" "$out/gpu2.st" && echo "                 two runs bit-identical" ||
    { echo "FAIL $norm: two runs differ"; failed=1; }
done

step "attention on the tensor cores (mma.sync, bf16) against ref: causal at head dimensions 16-128, full (ViT)"
tests/cuemu/attention.sh "$LRC" $MODEL models/vit.lua "$COMPARE" ||
  { echo "FAIL: tensor-core attention (LRC_CUDA_TC_ATTENTION=0 when compiling keeps the f32 kernel)"; failed=1; }

step "GEMMs adding a bias (and a residual) in cuBLASLt's epilogue: a ViT fixture against PyTorch, and with LRC_CUBLASLT=0 (the kernels add them)"
tests/cuemu/bias.sh "$LRC" models/vit.lua tests/fixtures/vit/pre_base "$COMPARE" || failed=1

step "every op fixture as a one-op graph on the GPU, guard regions after every buffer, 1e-5"
"$OPS" tests/fixtures/ops/*.safetensors || failed=1

step "AdamW on the GPU against the host's on the same gradients (test_cuda_optim: norm, step, --accum, bf16 masters, nan)"
"$OPTIM" $MODEL || failed=1

step "every PyTorch fixture (LLaMA placements, ViT, Parcae) at f32 storage: logits 1e-5, gradients 2e-4 (1e-3 Parcae; tests/CMakeLists.txt measures them)"
# the same script CI runs on the emulator (tests/cuemu/case.sh), here on the GPU
for model in llama vit parcae; do
  gt=2e-4; [ $model = parcae ] && gt=1e-3
  for dir in tests/fixtures/$model/*/; do
    res=$(LRC_CUDA_CHECK=1 tests/cuemu/case.sh "$LRC" models/$model.lua "${dir%/}" "$COMPARE" f32 1e-5 $gt 2>&1) ||
      { echo "FAIL $model $(basename "$dir"): $(echo "$res" | tail -2 | tr '\n' ' ')"; failed=1; continue; }
    echo "$model $(basename "$dir"): $(echo "$res" | grep -o 'worst relative error [0-9.e+-]*' | tr '\n' ' ')"
  done
done

step "ViT and Parcae (its loop region) on the GPU against ref"
ST=tests/tools/st.py
"$PY" -c 'import json, math; print(json.dumps({"images": ["F32", [4, 1, 28, 28], [math.sin(0.37 * i) for i in range(4 * 784)]]}))' >"$out/img.json"
"$PY" $ST make "$out/img.st" "$(cat "$out/img.json")"
toks='"tokens": ["I32", [2, 64], '"$("$PY" -c 'print([(7 * i + 3) % 251 for i in range(128)])')"']'
"$PY" $ST make "$out/pin.st" "{$toks, \"iterations\": [\"I32\", [2], [8, 3]]}"
for norm in pre layerrope; do
  "$LRC" init vit --preset small --set norm=$norm --seed 3 -o "$out/wv.st" >/dev/null &&
  "$LRC" forward vit --preset small --set norm=$norm --weights "$out/wv.st" --input "$out/img.st" -o "$out/vref.st" >/dev/null &&
  "$LRC" compile vit --preset small --set norm=$norm --target cuda --arch $arch --weights "$out/wv.st" --batch 4 \
    -o "$out/pkg_vit" >/dev/null &&
  "$LRC" forward "$out/pkg_vit" --input "$out/img.st" -o "$out/vgpu.st" >/dev/null
  if [ $? != 0 ]; then echo "FAIL vit $norm: lrc failed"; failed=1; else printf 'vit %-12s ' "$norm"; "$COMPARE" "$out/vgpu.st" "$out/vref.st" logits 2e-2 || failed=1; fi
  "$LRC" init parcae --preset small --set norm=$norm --set state_init=zero --seed 3 -o "$out/wp.st" >/dev/null &&
  "$LRC" forward parcae --preset small --set norm=$norm --set state_init=zero --weights "$out/wp.st" --input "$out/pin.st" -o "$out/pref.st" >/dev/null &&
  "$LRC" compile parcae --preset small --set norm=$norm --set state_init=zero --target cuda --arch $arch --weights "$out/wp.st" \
    --batch 2 --seq 64 -o "$out/pkg_parcae" >/dev/null &&
  "$LRC" forward "$out/pkg_parcae" --input "$out/pin.st" -o "$out/pgpu.st" >/dev/null
  if [ $? != 0 ]; then echo "FAIL parcae $norm: lrc failed"; failed=1; else printf 'parcae %-9s ' "$norm"; "$COMPARE" "$out/pgpu.st" "$out/pref.st" logits 2e-2 || failed=1; fi
done

step "gradients on the GPU against ref (small, B=2, T=64): f32 storage 1e-4; bf16 5e-2, each tensor against at least 1e-2 of the largest"
# bf16: a LayerRoPE slope's gradient is a nearly cancelling sum that bf16
# rounding moves by more than 5e-2 of itself (7.6e-2 on the emulator)
for norm in pre layerrope; do
  "$LRC" init $MODEL --preset small --set norm=$norm --seed 3 -o "$out/w.st" >/dev/null &&
  "$LRC" backward $MODEL --preset small --set norm=$norm --weights "$out/w.st" --input "$out/in.st" -o "$out/gref.st" >/dev/null &&
  "$LRC" backward $MODEL --preset small --set norm=$norm --weights "$out/w.st" --input "$out/in.st" -o "$out/ggpu.st" --target cuda >/dev/null &&
  "$LRC" backward $MODEL --preset small --set norm=$norm --weights "$out/w.st" --input "$out/in.st" -o "$out/gf32.st" --target cuda \
    --precision f32 >/dev/null
  if [ $? != 0 ]; then echo "FAIL $norm: lrc backward failed"; failed=1; continue; fi
  printf '%-16s f32  ' "$norm"
  "$COMPARE" "$out/gf32.st" "$out/gref.st" '*' 1e-4 || failed=1
  printf '%-16s bf16 ' "$norm"
  "$COMPARE" "$out/ggpu.st" "$out/gref.st" '*' 5e-2 1e-2 || failed=1
done
}

train() {
step "lrc train --target cuda: 30 steps of small against the same run on the cpu"
printf 'In the beginning God created the heaven and the earth. %.0s' $(seq 1 400) >"$out/text.txt"
for t in cuda cpu; do
  "$LRC" train $MODEL --preset small --set norm=layerrope --steps 30 --lr 3e-3 --batch 8 --seq 128 --eval-every 10 \
    --data "$out/text.txt" --target $t -o "$out/train_$t" >/dev/null 2>"$out/train_$t.err" ||
    { echo "FAIL train --target $t: $(tail -1 "$out/train_$t.err")"; failed=1; }
done
if [ -f "$out/train_cuda/metrics.jsonl" ] && [ -f "$out/train_cpu/metrics.jsonl" ]; then
  "$PY" - "$out" <<'PY' || failed=1
import json, sys
rows = {t: [json.loads(l) for l in open(sys.argv[1] + "/train_%s/metrics.jsonl" % t)] for t in ("cuda", "cpu")}
for t in ("cuda", "cpu"):
    tps = sorted(r["tokens_per_s"] for r in rows[t][1:])
    print("%-5s train loss step 1 %.4f, step 30 %.4f, validation %.4f; median %.0f tokens/s (AdamW included)"
          % (t, rows[t][0]["train_loss"], rows[t][-1]["train_loss"], rows[t][-1]["val_loss"], tps[len(tps) // 2]))
rel = abs(rows["cuda"][-1]["val_loss"] - rows["cpu"][-1]["val_loss"]) / rows["cpu"][-1]["val_loss"]
print("validation loss, cuda against cpu: %.2e relative (bf16 storage; 5e-2 allowed)" % rel)
sys.exit(0 if rel < 5e-2 and rows["cuda"][-1]["train_loss"] < rows["cuda"][0]["train_loss"] else 1)
PY
else
  echo "FAIL train: a run left no metrics.jsonl"; failed=1
fi
keep "$out/train_cuda/metrics.jsonl" train_cuda_metrics.jsonl
}

speed() {
step "forward speed at B=8, T=256: lrc cuda package, torch eager, torch.compile"
tokens 8 256 "$out/in8.st"
table=""
for preset in 130m 1b; do
  "$LRC" init $MODEL --preset $preset --seed 1 -o "$out/w_$preset.st" >/dev/null || { failed=1; continue; }
  "$LRC" compile $MODEL --preset $preset --target cuda --arch $arch --weights "$out/w_$preset.st" --batch 8 --seq 256 \
    -o "$out/pkg_$preset" | grep -E '^(compiled|kernels)'
  lrc_out=$("$LRC" forward "$out/pkg_$preset" --input "$out/in8.st" -o "$out/o.st" --repeat 20)
  echo "$lrc_out"
  lrc_ms=$(echo "$lrc_out" | sed -n 's/^forward: median \([0-9.]*\) ms.*/\1/p')
  torch_out=$("$PY" bench/gpu/torch_forward.py --preset $preset --batch 8 --seq 256 --weights "$out/w_$preset.st" \
    --input "$out/in8.st" --repeat 20 --logits "$out/t.st")
  echo "$torch_out"
  "$COMPARE" "$out/o.st" "$out/t.st" logits 5e-2 || { echo "FAIL $preset: lrc's logits are not torch's (bf16 both, 5e-2)"; failed=1; }
  eager=$(echo "$torch_out" | sed -n 's/^torch-eager: median \([0-9.]*\) ms.*/\1/p')
  comp=$(echo "$torch_out" | sed -n 's/^torch-compile: median \([0-9.]*\) ms.*/\1/p')
  [ -n "$lrc_ms" ] && [ -n "$eager" ] && [ -n "$comp" ] || { echo "FAIL $preset: a side printed no time"; failed=1; }
  table+=$(awk -v p=$preset -v l="${lrc_ms:-0}" -v e="${eager:-0}" -v c="${comp:-0}" 'BEGIN {
    printf "%-6s lrc %8.3f ms   eager %8.3f ms (%.2fx)   compile %8.3f ms (%.2fx)\n", p, l, e, (l > 0 ? e / l : 0), c, (l > 0 ? c / l : 0) }')$'\n'
done

step "lrc profile of the 1b package (CUDA events; ceilings measured on this GPU)"
"$LRC" profile "$out/pkg_1b" --input "$out/in8.st" --repeat 10 -o "$out/trace_1b.json" >"$out/profile_1b.txt" || failed=1
head -80 "$out/profile_1b.txt"
keep "$out/profile_1b.txt" profile_1b.txt
keep "$out/trace_1b.json" trace_1b.json

step "decode of 1b: greedy, batch 1, a 16-token prompt, 128 new tokens, a KV cache of 256 positions"
ids=$(awk 'BEGIN { for (j = 0; j < 16; j++) printf "%s%d", (j ? " " : ""), (7 * j + 3) % 32000 }')
if "$LRC" compile $MODEL --preset 1b --target cuda --arch $arch --weights "$out/w_1b.st" --ctx 256 -o "$out/dec_1b" >/dev/null &&
  "$LRC" generate "$out/dec_1b" --prompt-ids "$ids" -n 128 --temperature 0 >"$out/dec_ids.txt" 2>"$out/dec.err"; then
  cat "$out/dec.err"
  lrc_tps=$(sed -n 's/.* \([0-9.]*\) tokens\/s.*/\1/p' "$out/dec.err" | head -1)
else
  echo "FAIL decode: $(tail -1 "$out/dec.err" 2>/dev/null)"; failed=1
fi
torch_out=$("$PY" bench/gpu/torch_forward.py --preset 1b --weights "$out/w_1b.st" --decode 128 --prompt-len 16 --ctx 256)
echo "$torch_out" | grep -v '^torch-decode-ids'
"$PY" - "$out/dec_ids.txt" <<PY
import sys
a = open(sys.argv[1]).read().split()
b = """$(echo "$torch_out" | sed -n 's/^torch-decode-ids: //p')""".split()
same = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
print("decode ids: lrc and torch agree on the first %d of %d greedy tokens (bf16 both; a random model's top logits"
      " are near ties, so bf16 rounding alone can part them early)" % (same, len(a)))
PY
tg=$(echo "$torch_out" | sed -n 's/^torch-decode-graph: \([0-9.]*\) tokens.*/\1/p')
te=$(echo "$torch_out" | sed -n 's/^torch-decode-eager: \([0-9.]*\) tokens.*/\1/p')
table+=$(awk -v l="${lrc_tps:-0}" -v e="${te:-0}" -v g="${tg:-0}" 'BEGIN {
  printf "1b decode: lrc %7.1f tokens/s   eager %7.1f (%.2fx)   graph %7.1f (%.2fx)\n", l, e, (e > 0 ? l / e : 0), g, (g > 0 ? l / g : 0) }')$'\n'

step "training step without the optimizer (forward, loss, backward), 130m, B=8, T=256"
lrc_out=$(LRC_PROFILE=1 "$LRC" backward $MODEL --preset 130m --weights "$out/w_130m.st" --input "$out/in8.st" -o "$out/g130.st" \
  --target cuda --repeat 10 2>"$out/profile_step_130m.txt")
echo "$lrc_out"
echo "the step's launches, the slowest first (LRC_PROFILE: events around each, run apart from the median above):"
head -25 "$out/profile_step_130m.txt"
keep "$out/profile_step_130m.txt" profile_step_130m.txt
lrc_ms=$(echo "$lrc_out" | sed -n 's/^backward: median \([0-9.]*\) ms.*/\1/p')
torch_out=$("$PY" bench/gpu/torch_forward.py --preset 130m --batch 8 --seq 256 --weights "$out/w_130m.st" --repeat 10 --backward)
echo "$torch_out"
eager=$(echo "$torch_out" | sed -n 's/^torch-eager: median \([0-9.]*\) ms.*/\1/p')
comp=$(echo "$torch_out" | sed -n 's/^torch-compile: median \([0-9.]*\) ms.*/\1/p')
[ -n "$lrc_ms" ] && [ -n "$eager" ] && [ -n "$comp" ] || { echo "FAIL 130m train step: a side printed no time"; failed=1; }
table+=$(awk -v l="${lrc_ms:-0}" -v e="${eager:-0}" -v c="${comp:-0}" 'BEGIN {
  printf "130m train step: lrc %8.3f ms   eager %8.3f ms (%.2fx)   compile %8.3f ms (%.2fx)\n", l, e, (l > 0 ? e / l : 0), c, (l > 0 ? c / l : 0) }')$'\n'

step "summary (ratios: torch time / lrc time, above 1 means lrc is faster)"
printf '%s' "$table"
}

for s in $sections; do $s; done
echo "total $((SECONDS - start)) s; $( [ $failed = 0 ] && echo 'all checks passed' || echo 'SOME CHECKS FAILED')"
exit $failed
