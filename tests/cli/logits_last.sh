#!/bin/bash
# logits_last.sh LRC MODELS_DIR HF_DIR — lrc compile --logits last: the
# logits of the last position only, [B, 1, V], bit for bit the last row of
# the full forward's, for LLaMA pre and layerrope, Parcae (a loop), GPT-2
# (learned positions), a Hugging Face directory and a mixture of experts;
# the LM head and the last layer after its attention run for one row (the
# plan's FLOPs and the kernels inspect prints; the op table's rows rules,
# the experts' routing included); and the errors: the
# option with --ctx or --min-seq, a model without logits [B, T, V], a bad
# value, a package of --logits last run on a shorter sequence.
lrc=$(readlink -f "$1") models=$(readlink -f "$2") hf=$(readlink -f "$3")
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/tests/tools/check.sh"
st() { /usr/bin/python3 "$root/tests/tools/st.py" "$@"; }
cd "$dir" || exit 1

st make tok.st '{"tokens": ["I32", [2, 8], [5, 17, 3, 9, 22, 1, 14, 30, 7, 2, 11, 28, 6, 19, 4, 25]]}'
st make tok6.st '{"tokens": ["I32", [2, 6], [5, 17, 3, 9, 22, 1, 7, 2, 11, 28, 6, 19]]}'
"$lrc" init "$models/llama.lua" --preset tiny --seed 3 -o w_pre.st >/dev/null
"$lrc" init "$models/llama.lua" --preset tiny --set norm=layerrope --seed 4 -o w_lr.st >/dev/null
flops() { /usr/bin/python3 -c 'import json, sys; print(int(sum(l.get("flops", 0) for l in json.load(open(sys.argv[1]))["launches"])))' "$1/package.json"; }

# pair NAME MODEL [options]: packages of every position's logits and of the last one's, run on the same tokens
pair() {
  local name=$1 model=$2
  shift 2
  for l in all last; do
    "$lrc" compile "$model" "$@" --target cpu --batch 2 --seq 8 --logits $l -o "pkg_${name}_$l" >"out_${name}_$l.txt" 2>&1 &&
      "$lrc" forward "pkg_${name}_$l" --input tok.st -o "lg_${name}_$l.st" >/dev/null 2>>"out_${name}_$l.txt"
  done
  local same
  same=$(/usr/bin/python3 - "lg_${name}_all.st" "lg_${name}_last.st" "$root/tests/tools" <<'PY' 2>&1
import sys
sys.path.insert(0, sys.argv[3])
import st
_, (B, T, V), a = st.arrays(sys.argv[1])["logits"]
_, shape, b = st.arrays(sys.argv[2])["logits"]
rows = [a[(i * T + T - 1) * V:(i * T + T) * V] for i in range(B)]
print("shape %s, the last rows %s" % (shape, "equal" if shape == [B, 1, V] and list(b) == [x for r in rows for x in r] else "DIFFER"))
PY
)
  check "$name: --logits last: [2, 1, V], the full forward's last row bit for bit ($same; $(grep -v '^ok' "out_${name}_last.txt" | head -1))" \
    "[[ '$same' == *'[2, 1, '*'equal' ]]"
  local fa fl
  fa=$(flops "pkg_${name}_all") fl=$(flops "pkg_${name}_last")
  check "$name: and fewer FLOPs ($fl of $fa)" "[ $fl -gt 0 ] && [ $fl -lt $fa ]"
  check "$name: package.json says so" "grep -q '\"logits\":[[:space:]]*\"last\"' pkg_${name}_last/package.json"
}
pair llama_pre "$models/llama.lua" --preset tiny --weights w_pre.st
pair llama_layerrope "$models/llama.lua" --preset tiny --set norm=layerrope --weights w_lr.st
pair hf_qwen2 "$hf"
pair llama_q8 "$models/llama.lua" --preset tiny --weights w_pre.st --weights-dtype q8
# a loop (Parcae's recurrent block) and learned positions (GPT-2's slice) on the way up
"$lrc" init "$models/parcae.lua" --preset tiny --seed 5 -o w_parcae.st >/dev/null
"$lrc" init "$models/gpt2.lua" --preset tiny --seed 6 -o w_gpt2.st >/dev/null
pair parcae "$models/parcae.lua" --preset tiny --weights w_parcae.st
pair gpt2 "$models/gpt2.lua" --preset tiny --weights w_gpt2.st
"$lrc" init "$models/llama.lua" --preset tiny --set n_experts=4 --seed 7 -o w_moe.st >/dev/null
pair llama_moe "$models/llama.lua" --preset tiny --set n_experts=4 --weights w_moe.st

# the cut: the LM head and the last layer's MLP read one row a sequence, attention every row
"$lrc" inspect "$models/llama.lua" --preset tiny --batch 2 --seq 8 --logits last --after last_rows --ir >ir.txt 2>&1
check "inspect --after last_rows: slices after the last attention and the residual stream, the rest [2, 1, ...]" \
  "[ \$(grep -c '= slice' ir.txt) = 2 ] && grep -q 'attention.*\\[2,8,' ir.txt && grep -q 'matmul.*\\[2,1,256\\]' ir.txt"
# a mixture of experts: the last layer's router, top-k and experts for one row, the first layer's for every row
"$lrc" inspect "$models/llama.lua" --preset tiny --set n_experts=4 --batch 2 --seq 8 --logits last --after last_rows --ir >ir_moe.txt 2>&1
check "inspect --after last_rows, a mixture of experts: expert_matmul on [2,8,2,...] in layer 0 and on [2,1,2,...] in layer 1 ($(grep -c 'expert_matmul.*\[2,1,2,' ir_moe.txt) of $(grep -c 'expert_matmul' ir_moe.txt))" \
  "[ \$(grep -c 'expert_matmul.*\\[2,8,2,' ir_moe.txt) = 12 ] && [ \$(grep -c 'expert_matmul.*\\[2,1,2,' ir_moe.txt) = 12 ] && grep -q 'topk.*\\[2,1,2\\]' ir_moe.txt"

# errors: one line, exit 2 (usage) or 1
t() { # NAME STATUS PATTERN -- ARGS...
  local name=$1 want=$2 pat=$3
  shift 4
  "$lrc" "$@" >out.txt 2>err.txt
  local s=$?
  check "$name: exit $want, one line ($(head -1 err.txt))" "[ $s = $want ] && [ \$(wc -l <err.txt) = 1 ] && grep -q -- \"$pat\" err.txt"
}
t "--logits with a decoder" 2 "--logits last is for whole sequences" -- compile "$models/llama.lua" --preset tiny --target cpu --ctx 16 --logits last -o bad
t "--logits with --min-seq" 2 "--min-seq needs every position's logits" -- compile "$models/llama.lua" --preset tiny --target cpu --seq 8 --min-seq 4 --logits last -o bad
t "a bad --logits" 2 "--logits first: expected all or last" -- compile "$models/llama.lua" --preset tiny --target cpu --logits first -o bad
t "an image model" 1 "needs a language model's output 'logits' \\[B, T, V\\]" -- compile "$models/vit.lua" --preset tiny --target cpu --logits last -o bad
t "inspect --after last_rows without it" 2 "--after last_rows needs --logits last" -- inspect "$models/llama.lua" --preset tiny --after last_rows
t "a shorter sequence" 1 "its logits are the last of 8 positions" -- forward pkg_llama_pre_last --input tok6.st -o bad.st
check "and no package, no output" "[ ! -e bad ] && [ ! -e bad.st ]"
summary
