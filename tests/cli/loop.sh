#!/bin/bash
# loop.sh LRC PARCAE ST_COMPARE — the loop region end to end on the cpu
# target: Parcae compiled at T = 1 and at T = 8 has the same kernels (the
# body is compiled once, T is an input); a package run with `iterations`
# 1, 3 and 8 equals the model run with --set T=1, 3 and 8; per-sequence
# counts give each row its own T; a like-init model trains a few steps with
# T drawn per sequence, and resumes bit for bit.
set -eu
lrc=$1 model=$2 compare=$3
st=$(cd "$(dirname "$0")/../tools" && pwd)/st.py
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir"
fails=0
check() { if eval "$2"; then echo "ok   $1"; else echo "FAIL $1"; fails=$((fails + 1)); fi; }
P=(--preset tiny --set state_init=zero)
k1=$("$lrc" compile "$model" "${P[@]}" --set T=1 --seq 12 --batch 2 -o pkg1 --target cpu | sed -n 's/^kernels //p')
k8=$("$lrc" compile "$model" "${P[@]}" --set T=8 --seq 12 --batch 2 -o pkg8 --target cpu | sed -n 's/^kernels //p')
echo "kernels at T = 1: $k1, at T = 8: $k8"
check "the same kernels at T = 1 and T = 8" '[ -n "$k1" ] && [ "$k1" = "$k8" ]'
# training with T drawn per sequence (like-init state), then a resume
T=(train "$model" --preset tiny --steps 4 --lr 1e-3 --batch 2 --seq 16 --eval-every 2 --threads 2)
printf 'In the beginning God created the heaven and the earth. %.0s' $(seq 1 40) >text.txt
"$lrc" "${T[@]}" --data text.txt -o full >/dev/null
"$lrc" "${T[@]}" --data text.txt -o half --stop-after 2 >/dev/null
"$lrc" train --resume half >/dev/null
check "a looped model's training resumes bit for bit" 'cmp -s full/checkpoint.safetensors half/checkpoint.safetensors'
check "its validation loss is finite" 'grep -q "\"val_loss\":[0-9]" full/metrics.jsonl'
# trained weights: at initialisation (zero output projections) the loop is
# linear and the final RMSNorm makes every T give the same logits
cp full/model.safetensors w.safetensors
toks='"tokens": ["I32", [2, 12], ['"$(seq -s, 0 23 | awk -F, '{for (i = 1; i <= NF; i++) printf "%s%d", (i > 1 ? ", " : ""), (7 * $i + 3) % 256}')"']]'
python3 "$st" make tok.safetensors "{$toks}"
for T in 1 3 8; do python3 "$st" make in$T.safetensors "{$toks, \"iterations\": [\"I32\", [2], [$T, $T]]}"; done
python3 "$st" make in_mixed.safetensors "{$toks, \"iterations\": [\"I32\", [2], [1, 8]]}"
for T in 1 3 8; do
  "$lrc" forward "$model" "${P[@]}" --set T=$T --weights w.safetensors --input tok.safetensors -o ref$T.safetensors >/dev/null
  "$lrc" forward pkg1 --weights w.safetensors --input in$T.safetensors -o pkg$T.safetensors >/dev/null
  check "package with iterations = $T equals the model at T = $T (ref)" \
    '"$compare" pkg$T.safetensors ref$T.safetensors logits 1e-5 >/dev/null'
done
check "lrc profile runs a looped model (iterations from its config)" \
  '"$lrc" profile "$model" "${P[@]}" --set T=3 --weights w.safetensors --input tok.safetensors --repeat 2 -o trace.json | grep -q "^profile of"'
check "T = 8 differs from T = 1" '! "$compare" ref8.safetensors ref1.safetensors logits 1e-3 >/dev/null'
# per-sequence counts: row 0 as at T = 1, row 1 as at T = 8
"$lrc" forward pkg1 --weights w.safetensors --input in_mixed.safetensors -o mixed.safetensors >/dev/null
python3 - <<'PY' && echo "ok   per-sequence counts: each row at its own T" || { echo "FAIL per-sequence counts"; exit 1; }
import json, struct
def load(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        h = json.loads(f.read(n))
        data = f.read()
    t = h["logits"]
    a, b = t["data_offsets"]
    return t["shape"], struct.unpack("<%df" % ((b - a) // 4), data[a:b])
shape, mixed = load("mixed.safetensors")
_, one = load("ref1.safetensors")
_, eight = load("ref8.safetensors")
half = len(mixed) // 2
rel = lambda x, y: max(abs(p - q) for p, q in zip(x, y)) / max(abs(q) for q in y)
assert rel(mixed[:half], one[:half]) < 1e-5, rel(mixed[:half], one[:half])
assert rel(mixed[half:], eight[half:]) < 1e-5, rel(mixed[half:], eight[half:])
PY

# loops in unusual places, cpu against ref (each a bug once): a residual
# around the loop (fusion made a cycle), parameters and inputs declared
# inside the body and a loop inside a loop (the ref executor leaked), and a
# body reading several values from before the loop
toy() { # toy NAME BODY-AND-RESULT: a model whose build has e, counts, lin, lin2
  cat >"$1.lua" <<LUA
local lrc = require "lrc"
local nn = require "lrc.nn"
local M = { defaults = { d = 8, vocab = 256, T = 3 }, presets = {} }
function M.build(cfg, tokens)
  local s = tokens.shape
  local e = nn.embedding("emb", cfg.vocab, cfg.d)(tokens)
  local counts = lrc.input("iterations", { s[1] }, "i32")
  local lin, lin2 = nn.linear("w", cfg.d, cfg.d), nn.linear("w2", cfg.d, cfg.d)
  local head = nn.linear("head", cfg.d, cfg.vocab)
  $2
end
return M
LUA
  "$lrc" init "$1.lua" --seed 7 -o "$1_w.safetensors" >/dev/null
}
python3 "$st" make toy_in.safetensors "{$toks, \"iterations\": [\"I32\", [2], [3, 1]]}"
toy residual 'local m = lin(e); local inj = m * 0.5
  local h = nn.loop(e * 0.0, counts, function(h) return lrc.silu(lin2(h)) + m end)
  return head(h + inj)'
toy inside 'local h = nn.loop(e * 1.0, counts, function(h)
    local g = lrc.param("g", { cfg.d }, { "normal", std = 1.0 }, "x")
    return lrc.silu(lin(h)) * g + e end)
  return head(h)'
toy nested 'local h = nn.loop(e * 1.0, counts, function(h)
    local q = nn.loop(h * 1.0, counts, function(q) return lrc.silu(lin(q)) + h end)
    return q * 0.5 + e end)
  return head(h)'
toy invariants 'local a, b = lin(e), lrc.silu(lin2(e))
  local h = nn.loop(e * 0.0, counts, function(h) return lrc.silu(lin(h)) * b + a + e * 0.5 end)
  return head(h)'
for m in residual inside nested invariants; do
  "$lrc" forward $m.lua --weights ${m}_w.safetensors --input toy_in.safetensors -o ${m}_ref.safetensors >/dev/null &&
  "$lrc" forward $m.lua --weights ${m}_w.safetensors --input toy_in.safetensors -o ${m}_cpu.safetensors --target cpu >/dev/null
  check "$m: cpu equals ref" '"$compare" ${m}_cpu.safetensors ${m}_ref.safetensors logits 1e-5 >/dev/null'
done
echo "$fails failed"
[ "$fails" -eq 0 ]
