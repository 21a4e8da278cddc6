#!/bin/bash
# weights_dtype.sh LRC MODELS_DIR ST_COMPARE HF_DIR — lrc compile --target cpu
# --weights-dtype bf16 against the f32 package of the same weights: the
# logits within 1e-2 (relative, st_compare) and not within 1e-7 (so the
# weights were rounded: no silent f32 path), for LLaMA pre and layerrope, a
# ViT and a Hugging Face directory (HF_DIR); a decoder's greedy
# continuation equal for 16 tokens; every weight matrix in the package's
# file BF16 and every vector F32 (LLaMA's file then half the f32 one); the
# package says its weights' dtype; and the errors: a dtype lrc lacks, the
# option on the cuda target.
lrc=$(readlink -f "$1") models=$(readlink -f "$2") compare=$(readlink -f "$3") hf=$(readlink -f "$4")
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/tests/tools/check.sh"
st() { /usr/bin/python3 "$root/tests/tools/st.py" "$@"; }
cd "$dir" || exit 1

tokens='{"tokens": ["I32", [2, 8], [5, 17, 3, 9, 22, 1, 14, 30, 7, 2, 11, 28, 6, 19, 4, 25]]}'
images=$(/usr/bin/python3 -c 'import json, math; print(json.dumps({"images": ["F32", [2, 1, 8, 8], [math.sin(0.37 * i) for i in range(128)]]}))')
st make tok.st "$tokens"
st make img.st "$images"

# compile_pair NAME MODEL INPUT [compile options...]: the f32 and bf16 packages, their logits
compile_pair() {
  local name=$1 model=$2 input=$3
  shift 3
  for d in f32 bf16; do
    "$lrc" compile "$model" "$@" --target cpu --weights-dtype "$d" --batch 2 --seq 8 -o "pkg_${name}_$d" >/dev/null 2>"err_$name.txt" &&
      "$lrc" forward "pkg_${name}_$d" --input "$input" -o "lg_${name}_$d.st" >/dev/null 2>>"err_$name.txt"
  done
  check "$name: compiled and ran both packages ($(head -1 "err_$name.txt"))" "[ -s lg_${name}_f32.st ] && [ -s lg_${name}_bf16.st ]"
  local out
  out=$("$compare" "lg_${name}_bf16.st" "lg_${name}_f32.st" logits 1e-2 2>&1)
  check "$name: bf16 logits within 1e-2 of f32 ($out)" "'$compare' lg_${name}_bf16.st lg_${name}_f32.st logits 1e-2 >/dev/null"
  check "$name: and not within 1e-7 (the weights were rounded)" "! '$compare' lg_${name}_bf16.st lg_${name}_f32.st logits 1e-7 >/dev/null 2>&1"
  check "$name: package.json says bf16" "grep -q '\"weights_dtype\":[[:space:]]*\"bf16\"' pkg_${name}_bf16/package.json"
  local kinds
  kinds=$(/usr/bin/python3 -c '
import sys; sys.path.insert(0, sys.argv[2]); import st
ts = st.tensors(sys.argv[1])
print(" ".join(sorted({"%s:%s" % ("matrix" if len(s) >= 2 else "vector", d) for d, s, _ in ts.values()})))' "pkg_${name}_bf16/weights.safetensors" "$root/tests/tools")
  check "$name: every matrix BF16, every vector F32 ($kinds)" "[ '$kinds' = 'matrix:BF16 vector:F32' ] || [ '$kinds' = 'matrix:BF16' ]"
}

"$lrc" init "$models/llama.lua" --preset tiny --seed 3 -o w_pre.st >/dev/null
"$lrc" init "$models/llama.lua" --preset tiny --set norm=layerrope --seed 4 -o w_lr.st >/dev/null
"$lrc" init "$models/vit.lua" --preset tiny --seed 5 -o w_vit.st >/dev/null
compile_pair llama_pre "$models/llama.lua" tok.st --preset tiny --weights w_pre.st
compile_pair llama_layerrope "$models/llama.lua" tok.st --preset tiny --set norm=layerrope --weights w_lr.st
compile_pair vit "$models/vit.lua" img.st --preset tiny --weights w_vit.st
compile_pair hf_qwen2 "$hf" tok.st
# the GEMMs' packed panels (the plan's persist buffers) are half too: the kernels read bf16
persist() { /usr/bin/python3 -c 'import json, sys; print(sum(b["bytes"] for b in json.load(open(sys.argv[1]))["buffers"] if b["kind"] == "persist"))' "$1/package.json"; }
a=$(persist pkg_llama_pre_f32) b=$(persist pkg_llama_pre_bf16)
check "llama: the packed panels are half the f32 ones ($b of $a bytes)" "[ $b -gt 0 ] && [ $((2 * b)) = $a ]"
# compiled without weights, packed when it runs: the pack kernels round f32
# weights to nearest even, bit for bit as Python rounds them here (the
# GEMMs' matrices alone: vectors and the embedding's gather read the
# parameters themselves)
/usr/bin/python3 - w_pre.st w_pre_rounded.st "$root/tests/tools" <<'PY'
import struct, sys
sys.path.insert(0, sys.argv[3])
import st
def rne(raw):
    out = []
    for (u,) in struct.iter_unpack("<I", raw):
        u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
        out.append(struct.pack("<I", u))
    return b"".join(out)
ts = st.tensors(sys.argv[1])
st.pack(sys.argv[2], {k: [d, s, rne(r) if len(s) >= 2 and "embed" not in k else r] for k, (d, s, r) in ts.items()})
PY
"$lrc" compile "$models/llama.lua" --preset tiny --target cpu --weights-dtype bf16 --batch 2 --seq 8 -o pkg_noweights >/dev/null &&
  "$lrc" forward pkg_noweights --weights w_pre.st --input tok.st -o lg_nw_f32.st >/dev/null 2>&1 &&
  "$lrc" forward pkg_noweights --weights w_pre_rounded.st --input tok.st -o lg_nw_rounded.st >/dev/null 2>&1
check "bf16 panels packed at run time from f32 weights: as from weights rounded beforehand, bit for bit" \
  "[ -s lg_nw_f32.st ] && '$compare' lg_nw_f32.st lg_nw_rounded.st logits 0 >/dev/null && ! '$compare' lg_nw_f32.st lg_llama_pre_f32.st logits 1e-7 >/dev/null 2>&1"
a=$(stat -c %s pkg_llama_pre_f32/weights.safetensors) b=$(stat -c %s pkg_llama_pre_bf16/weights.safetensors)
check "llama: the bf16 weights file is about half the f32 one ($b of $a bytes)" "[ $((200 * b / a)) -ge 95 ] && [ $((200 * b / a)) -le 105 ]"

# a decoder: the greedy continuation of both
for d in f32 bf16; do
  "$lrc" compile "$models/llama.lua" --preset tiny --weights w_pre.st --target cpu --weights-dtype "$d" --ctx 64 -o "dec_$d" >/dev/null
  "$lrc" generate "dec_$d" --prompt-ids "5 17 3 9" -n 16 --temperature 0 2>/dev/null | head -1 | tr ' ' '\n' | grep -E '^[0-9]+$' >"gen_$d.txt"
done
check "decoder: 16 greedy tokens, bf16 as f32 ($(tr '\n' ' ' <gen_bf16.txt))" "[ \$(wc -l <gen_f32.txt) = 16 ] && cmp -s gen_f32.txt gen_bf16.txt"

# errors: one line, exit 2 (usage) or 1
"$lrc" compile "$models/llama.lua" --preset tiny --target cpu --weights-dtype q4 -o bad >out.txt 2>err.txt
st=$?
check "a dtype lrc lacks: exit 2, one line naming it ($(cat err.txt))" "[ $st = 2 ] && [ \$(wc -l <err.txt) = 1 ] && grep -q 'weights-dtype q4: expected f32 or bf16' err.txt"
"$lrc" compile "$models/llama.lua" --preset tiny --target cuda --weights-dtype bf16 -o bad >out.txt 2>err.txt
st=$?
check "--weights-dtype on the cuda target: exit 2, one line ($(cat err.txt))" "[ $st = 2 ] && [ \$(wc -l <err.txt) = 1 ] && grep -q 'weights-dtype is for --target cpu' err.txt"
check "and no package" "[ ! -e bad ]"
summary
