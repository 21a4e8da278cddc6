#!/bin/bash
# weights_dtype.sh LRC MODELS_DIR ST_COMPARE HF_DIR — lrc compile --target cpu
# --weights-dtype bf16 and q8 against the f32 package of the same weights:
# the logits within 1e-2 (bf16) and 3e-2 (q8) relative (st_compare) and not
# within 1e-7 (so the weights were rounded: no silent f32 path), for LLaMA
# pre and layerrope, a ViT and a Hugging Face directory (HF_DIR); the small
# preset, briefly trained, continuing greedily the same for 16 tokens; every
# weight matrix in the package's file BF16, or I8 with F16 block scales, and
# every vector F32, every GEMM's matrix packed at compile time into its
# panels in that storage (LLaMA's file then half, or about 0.27x, the f32
# one), and no pack kernel left to run; panels packed at run time (a package
# without weights) quantized as numpy quantizes; and the errors: a dtype lrc
# lacks, the option on the cuda target, a NaN or Inf block scale in the file
# (a q8 pair's or a packed panel's), a packed tensor of the wrong size, an
# I8 tensor without scales, a CPU without a feature the package needs.
lrc=$(readlink -f "$1") models=$(readlink -f "$2") compare=$(readlink -f "$3") hf=$(readlink -f "$4")
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/tests/tools/check.sh"
st() { /usr/bin/python3 "$root/tests/tools/st.py" "$@"; }
cd "$dir" || exit 1

tokens='{"tokens": ["I32", [2, 8], [5, 17, 3, 9, 22, 1, 14, 30, 7, 2, 11, 28, 6, 19, 4, 25]]}'
images=$(/usr/bin/python3 -c 'import json, math; print(json.dumps({"images": ["F32", [2, 1, 8, 8], [math.sin(0.37 * i) for i in range(128)]]}))')
st make tok.st "$tokens"
st make img.st "$images"

# the dtypes a package's file holds: "matrix:BF16 packed:bf16 vector:F32",
# "matrix:I8 packed:q8 scale:F16 vector:F32" (packed: a GEMM's panels, U8
# named WEIGHT@LAYOUT, by the storage its layout names)
kinds() {
  /usr/bin/python3 -c '
import re, sys; sys.path.insert(0, sys.argv[2]); import st
ts = st.tensors(sys.argv[1])
def kind(k, d, s):
    if "@" in k: return "packed:" + re.match(r"(f32|bf16|q8)p", k.split("@")[1]).group(1) if d == "U8" else "bad"
    return ("scale" if k.endswith(".q8_scale") else "matrix" if len(s) >= 2 else "vector") + ":" + d
print(" ".join(sorted({kind(k, d, s) for k, (d, s, _) in ts.items()})))' "$1/weights.safetensors" "$root/tests/tools"
}

# compile_all NAME MODEL INPUT [compile options...]: the f32, bf16 and q8 packages, their logits
compile_all() {
  local name=$1 model=$2 input=$3
  shift 3
  for d in f32 bf16 q8; do
    "$lrc" compile "$model" "$@" --target cpu --weights-dtype "$d" --batch 2 --seq 8 -o "pkg_${name}_$d" >/dev/null 2>"err_$name.txt" &&
      "$lrc" forward "pkg_${name}_$d" --input "$input" -o "lg_${name}_$d.st" >/dev/null 2>>"err_$name.txt"
  done
  check "$name: compiled and ran the three packages ($(head -1 "err_$name.txt"))" \
    "[ -s lg_${name}_f32.st ] && [ -s lg_${name}_bf16.st ] && [ -s lg_${name}_q8.st ]"
  local d lim out k
  for d in bf16 q8; do
    lim=$([ $d = bf16 ] && echo 1e-2 || echo 3e-2)
    out=$("$compare" "lg_${name}_$d.st" "lg_${name}_f32.st" logits $lim 2>&1)
    check "$name: $d logits within $lim of f32 ($out)" "'$compare' lg_${name}_$d.st lg_${name}_f32.st logits $lim >/dev/null"
    check "$name: and not within 1e-7 (the weights were rounded)" "! '$compare' lg_${name}_$d.st lg_${name}_f32.st logits 1e-7 >/dev/null 2>&1"
    check "$name: package.json says $d" "grep -q '\"weights_dtype\":[[:space:]]*\"$d\"' pkg_${name}_$d/package.json"
  done
  k=$(kinds "pkg_${name}_bf16")
  check "$name: bf16: every GEMM's matrix packed as bf16, any other BF16, every vector F32 ($k)" \
    "[[ ' $k ' == *' packed:bf16 '* ]] && [[ ' $k ' =~ ^\ (matrix:BF16\ )?packed:bf16\ (vector:F32\ )?$ ]]"
  k=$(kinds "pkg_${name}_q8")
  check "$name: q8: every GEMM's matrix packed as q8, any other I8 with F16 scales, every vector F32 ($k)" \
    "[[ ' $k ' =~ ^\ (matrix:I8\ )?packed:q8\ (scale:F16\ )?(vector:F32\ )?$ ]]"
  for d in f32 bf16 q8; do
    check "$name: $d: packed at compile time, no pack kernel left to run" "! grep -q '\"once\":[[:space:]]*true' pkg_${name}_$d/package.json"
  done
}

"$lrc" init "$models/llama.lua" --preset tiny --seed 3 -o w_pre.st >/dev/null
"$lrc" init "$models/llama.lua" --preset tiny --set norm=layerrope --seed 4 -o w_lr.st >/dev/null
"$lrc" init "$models/vit.lua" --preset tiny --seed 5 -o w_vit.st >/dev/null
compile_all llama_pre "$models/llama.lua" tok.st --preset tiny --weights w_pre.st
compile_all llama_layerrope "$models/llama.lua" tok.st --preset tiny --set norm=layerrope --weights w_lr.st
compile_all vit "$models/vit.lua" img.st --preset tiny --weights w_vit.st
compile_all hf_qwen2 "$hf" tok.st
# the GEMMs' panels (the plan's packed parameters): half, and about 0.27
# (an f16 scale per 32 int8 values, as Q8_0; panels padded to 64 bytes, which
# weighs more where panels are narrow: AVX2's 8-column ones of tiny's
# gate and up, 34 * 8 + 16 -> 320 bytes a row of blocks, take 0.31)
packed() { /usr/bin/python3 -c 'import json, sys; print(sum(b["bytes"] for b in json.load(open(sys.argv[1]))["buffers"] if "packed" in b))' "$1/package.json"; }
# the buffers whose size is not their layout's (panels of NR columns by
# inner rows, cols / NR of them rounded up: f32 4 bytes a value, bf16 2,
# q8 (NR (inner + 2 blocks)) rounded up to 64 bytes), or "none"
off_size() { /usr/bin/python3 -c '
import json, sys
bad = []
for b in json.load(open(sys.argv[1]))["buffers"]:
    if "packed" not in b: continue
    p = b["packed"]; nr, k = p["panel"], p["inner"]; panels = (p["cols"] + nr - 1) // nr
    per = {"f32": nr * k * 4, "bf16": nr * k * 2, "q8": (nr * (2 * ((k + 31) // 32) + k) + 63) // 64 * 64}[p["store"]]
    if b["bytes"] != panels * per: bad.append("%s: %d bytes, not %d" % (b["name"], b["bytes"], panels * per))
print("; ".join(bad) or "none")' "$1/package.json"; }
a=$(packed pkg_llama_pre_f32) b=$(packed pkg_llama_pre_bf16) c=$(packed pkg_llama_pre_q8)
check "llama: the packed panels are half the f32 ones in bf16 ($b of $a bytes)" "[ $b -gt 0 ] && [ $((2 * b)) = $a ]"
check "llama: and 0.26 to 0.31 of them in q8 ($c of $a bytes)" "[ $((1000 * c / a)) -ge 260 ] && [ $((1000 * c / a)) -le 310 ]"
for d in f32 bf16 q8; do
  o=$(off_size pkg_llama_pre_$d)
  check "llama: $d: every packed buffer the size of its layout's panels ($o)" "[ '$o' = none ]"
done
a=$(stat -c %s pkg_llama_pre_f32/weights.safetensors) b=$(stat -c %s pkg_llama_pre_bf16/weights.safetensors) c=$(stat -c %s pkg_llama_pre_q8/weights.safetensors)
check "llama: the bf16 weights file is about half the f32 one ($b of $a bytes)" "[ $((200 * b / a)) -ge 95 ] && [ $((200 * b / a)) -le 105 ]"
check "llama: the q8 one 0.26 to 0.30 of it ($c of $a bytes; 34 bytes per 32 weights, vectors f32)" \
  "[ $((1000 * c / a)) -ge 260 ] && [ $((1000 * c / a)) -le 300 ]"

# compiled without weights, packed when it runs: the pack kernels round
# f32 weights to bf16 (nearest even) and quantize them to q8 (llama.cpp's
# Q8_0 with an f16 scale: scale = f16(amax / 127), q = round(x / scale),
# ties away from zero), bit for bit as numpy does here (the GEMMs'
# matrices alone: vectors and the embedding's gather read the parameters
# themselves)
/usr/bin/python3 - w_pre.st "$root/tests/tools" <<'PY'
import struct, sys
import numpy as np
sys.path.insert(0, sys.argv[2])
import st
ts = st.tensors(sys.argv[1])
def gemm_matrix(k, s):
    return len(s) >= 2 and "embed" not in k
def bf16(raw):
    u = np.frombuffer(raw, dtype=np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000).astype(np.uint32).tobytes()
def q8(raw, shape):  # blocks of 32 along the last axis (the GEMMs' W[N, K])
    w = np.frombuffer(raw, dtype=np.float32).reshape(-1, shape[-1])
    out = np.empty_like(w)
    for b in range(0, w.shape[1], 32):
        x = w[:, b:b + 32]
        d = (np.abs(x).max(axis=1) / np.float32(127)).astype(np.float16).astype(np.float32)
        inv = np.where(d != 0, np.float32(1) / np.where(d != 0, d, np.float32(1)), np.float32(0)).astype(np.float32)
        v = (x * inv[:, None]).astype(np.float64)
        q = np.clip(np.sign(v) * np.floor(np.abs(v) + 0.5), -127, 127).astype(np.float32)
        out[:, b:b + 32] = q * d[:, None]
    return out.tobytes()
st.pack("w_pre_bf16.st", {k: [d, s, bf16(r) if gemm_matrix(k, s) else r] for k, (d, s, r) in ts.items()})
st.pack("w_pre_q8.st", {k: [d, s, q8(r, s) if gemm_matrix(k, s) else r] for k, (d, s, r) in ts.items()})
PY
for d in bf16 q8; do
  "$lrc" compile "$models/llama.lua" --preset tiny --target cpu --weights-dtype $d --batch 2 --seq 8 -o pkg_nw_$d >/dev/null &&
    "$lrc" forward pkg_nw_$d --weights w_pre.st --input tok.st -o lg_nw_$d.st >/dev/null 2>&1 &&
    "$lrc" forward pkg_nw_$d --weights w_pre_$d.st --input tok.st -o lg_nw_${d}_py.st >/dev/null 2>&1
  check "$d panels packed at run time from f32 weights: as from weights numpy stored as $d beforehand, bit for bit" \
    "[ -s lg_nw_$d.st ] && '$compare' lg_nw_$d.st lg_nw_${d}_py.st logits 0 >/dev/null && ! '$compare' lg_nw_$d.st lg_llama_pre_f32.st logits 1e-7 >/dev/null 2>&1"
done

# the small preset, trained for 80 steps on one sentence (it continues "In t" with "he earth. And th": its argmax no near-tie): the greedy continuation in each storage
for i in $(seq 60); do echo "In the beginning God created the heaven and the earth. And the earth was without form."; done >text.txt
"$lrc" train "$models/llama.lua" --preset small --steps 80 --lr 1e-2 --warmup 0 --batch 4 --seq 32 --data text.txt --threads 2 -o run >/dev/null 2>&1
for d in f32 bf16 q8; do
  "$lrc" compile "$models/llama.lua" --preset small --weights run/model.safetensors --target cpu --weights-dtype "$d" --ctx 64 -o "dec_$d" >/dev/null
  "$lrc" generate "dec_$d" --prompt-ids "73 110 32 116" -n 16 --temperature 0 2>/dev/null | head -1 | tr ' ' '\n' | grep -E '^[0-9]+$' >"gen_$d.txt"
done
check "trained decoder: 16 greedy tokens ($(tr '\n' ' ' <gen_f32.txt))" "[ \$(wc -l <gen_f32.txt) = 16 ]"
check "bf16 continues as f32 ($(tr '\n' ' ' <gen_bf16.txt))" "cmp -s gen_f32.txt gen_bf16.txt"
check "q8 continues as f32 ($(tr '\n' ' ' <gen_q8.txt))" "cmp -s gen_f32.txt gen_q8.txt"

# the GEMMs against an f64 product of the stored weights (gemm-bench's check), on each of the
# kernel's paths: 1 row (decoding's tiles of four panels), a few rows, and rows enough that
# a q8 panel is widened once per work item; a partial last panel and a partial last block; and
# sums over K longer than the tiling's kc (AVX-512's 256, AVX2's 2048), taken in blocks (a
# widened q8 panel's are not)
for d in bf16 q8; do
  for mnk in "1 1000 77" "5 33 77" "50 100 77" "130 300 200" "3 70 700" "130 300 600" "3 70 2200"; do
    set -- $mnk
    for op in matmul matmul_nn; do
      out=$("$lrc" gemm-bench --m $1 --n $2 --k $3 --op $op --weights-dtype $d --repeat 1 2>&1 | tail -1)
      check "gemm-bench $op $mnk with $d weights: within f32 summation's bound ($out)" "[[ '$out' == *': ok' ]]"
    done
  done
done

# errors: one line, exit 2 (usage) or 1
"$lrc" compile "$models/llama.lua" --preset tiny --target cpu --weights-dtype q4 -o bad >out.txt 2>err.txt
s=$?
check "a dtype lrc lacks: exit 2, one line naming it ($(cat err.txt))" "[ $s = 2 ] && [ \$(wc -l <err.txt) = 1 ] && grep -q 'weights-dtype q4: expected f32, bf16 or q8' err.txt"
for d in bf16 q8; do
  "$lrc" compile "$models/llama.lua" --preset tiny --target cuda --weights-dtype $d -o bad >out.txt 2>err.txt
  s=$?
  check "--weights-dtype $d on the cuda target, which lacks it: exit 1, one line ($(cat err.txt))" "[ $s = 1 ] && [ \$(wc -l <err.txt) = 1 ] && grep -q 'weights-dtype is for --target cpu' err.txt"
done
check "and no package" "[ ! -e bad ]"
# damage SELECT EDIT: lrc forward of pkg_bad, a copy of the q8 package whose
# weights file has its first tensor with SELECT in its name (n) edited by
# the Python statement EDIT (ts: name -> [dtype, shape, bytes])
damage() {
  rm -rf pkg_bad && cp -r pkg_llama_pre_q8 pkg_bad
  /usr/bin/python3 - pkg_bad/weights.safetensors "$root/tests/tools" "$1" "$2" <<'PY'
import struct, sys
sys.path.insert(0, sys.argv[2])
import st
ts = st.tensors(sys.argv[1])
n = sorted(k for k in ts if sys.argv[3] in k)[0]
exec(sys.argv[4])
st.pack(sys.argv[1], ts)
PY
  "$lrc" forward pkg_bad --input tok.st -o bad.st >out.txt 2>err.txt
}
scale3() { echo "r = bytearray(ts[n][2]); r[6:8] = struct.pack('<H', 0x$1); ts[n][2] = bytes(r)"; }
# a corrupted block scale: f16 NaN (0x7e00) or Inf (0x7c00) in the file
for bits in 7e00:NaN 7c00:Inf; do
  damage .q8_scale "$(scale3 "${bits%:*}")"
  s=$?
  check "a q8 block scale that is ${bits#*:}: exit 1, one line naming the tensor and block ($(cat err.txt))" \
    "[ $s = 1 ] && [ \$(wc -l <err.txt) = 1 ] && grep -q \"q8_scale': block scale 3 is ${bits#*:}: the file is corrupt\" err.txt && [ ! -e bad.st ]"
done
# a packed panel's block scale that is NaN, and a packed tensor cut short
damage @q8p "$(scale3 7e00)"
s=$?
check "a packed q8 panel's block scale that is NaN: exit 1, one line naming the tensor, column and rows ($(cat err.txt))" \
  "[ $s = 1 ] && [ \$(wc -l <err.txt) = 1 ] && grep -q \"@q8p[0-9]*': the q8 scale of column 3, rows 0-31 is NaN: a damaged package?\" err.txt && [ ! -e bad.st ]"
damage @q8p "ts[n] = ['U8', [ts[n][1][0] - 64], ts[n][2][:-64]]"
s=$?
check "a packed tensor 64 bytes short: exit 1, one line ($(cat err.txt))" \
  "[ $s = 1 ] && [ \$(wc -l <err.txt) = 1 ] && grep -q 'the plan packed' err.txt && [ ! -e bad.st ]"
# an I8 tensor without its scales
damage .q8_scale "del ts[n]"
s=$?
check "an I8 tensor without its scales: exit 1, one line ($(cat err.txt))" "[ $s = 1 ] && [ \$(wc -l <err.txt) = 1 ] && grep -q 'is I8 without its scales' err.txt"
# a package needing a CPU feature lrc cannot check
rm -rf pkg_bad && cp -r pkg_llama_pre_q8 pkg_bad
/usr/bin/python3 -c 'import json, sys; p = json.load(open(sys.argv[1])); p["meta"]["requires"] += ",avx512_fp99"; json.dump(p, open(sys.argv[1], "w"))' pkg_bad/package.json 2>err_py.txt
"$lrc" forward pkg_bad --input tok.st -o bad.st >out.txt 2>err.txt
s=$?
check "a package needing a CPU feature lrc cannot check: exit 1, one line ($(cat err.txt))" "[ $s = 1 ] && [ \$(wc -l <err.txt) = 1 ] && grep -q \"needs CPU feature 'avx512_fp99'\" err.txt"
LRC_CPU_HIDE=f16c "$lrc" forward pkg_llama_pre_q8 --input tok.st -o bad.st >out.txt 2>err.txt
s=$?
check "a q8 package on a CPU without f16c (LRC_CPU_HIDE): exit 1, one line ($(cat err.txt))" \
  "[ $s = 1 ] && [ \$(wc -l <err.txt) = 1 ] && grep -q 'compiled for a CPU with f16c, which this CPU lacks: compile it here' err.txt && [ ! -e bad.st ]"
check "q8 packages say what the pack kernels need besides the f32 ones" "grep -q '\"requires\":[[:space:]]*\"[a-z0-9,_]*f16c' pkg_llama_pre_q8/package.json"
summary
