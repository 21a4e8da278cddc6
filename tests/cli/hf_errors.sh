#!/usr/bin/env bash
# hf_errors.sh — bad Hugging Face model directories: a config.json that lrc
# cannot honour (an unknown model_type, key or value, a wrong type), damaged
# weights (a shard the index names but that is missing, a tensor missing or
# of the wrong shape) and a config.json that is not UTF-8 or is cut short.
# Each ends in one line naming the file and the key or tensor, exit 1, and
# no output file (the rule and the checks of errors.sh, error_harness.sh).
#
#   tests/cli/hf_errors.sh PATH_TO_LRC
set -u
export LC_ALL=C
if [ $# -ne 1 ] || [ ! -x "$1" ]; then
  echo "usage: $0 PATH_TO_LRC" >&2
  exit 2
fi
LRC=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HF=$ROOT/tests/fixtures/hf
PY=${PYTHON:-python3}
VERBOSE=${LRC_TESTS_VERBOSE:-0}
# shellcheck source=error_harness.sh
. "$ROOT/tests/cli/error_harness.sh"

fwd() { # the directory's own input where it has one
  local in=$HF/llama_mha/input.safetensors
  [ -f "$1/input.safetensors" ] && in=$1/input.safetensors
  echo forward "$1" --input "$in" -o out.safetensors
}

# ---- config.json values lrc does not implement: one line naming the key ----
cfg bert 'c["model_type"] = "bert"'
t "unknown model_type" 1 'bert/config.json' 'model_type = "bert" is not supported' 'llama' -- $(fwd bert)
cfg notype 'del c["model_type"]'
t "no model_type" 1 'notype/config.json' 'model_type is missing' -- inspect notype
cfg yarn 'c["rope_scaling"] = {"rope_type": "yarn", "factor": 4.0}'
t "rope_scaling of type yarn" 1 'yarn/config.json: rope_scaling.rope_type = "yarn"' 'linear, llama3' -- $(fwd yarn)
cfg l3half 'c["rope_scaling"] = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "original_max_position_embeddings": 64}'
t "llama3 rope_scaling without high_freq_factor" 1 'rope_scaling.high_freq_factor is missing' -- $(fwd l3half)
cfg l3inv 'c["rope_scaling"] = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 4.0, "high_freq_factor": 1.0, "original_max_position_embeddings": 64}'
t "llama3 rope_scaling with its frequencies swapped" 1 'rope_scaling.high_freq_factor = 1:' '0 < low_freq_factor < high_freq_factor' -- $(fwd l3inv)
cfg ropeextra 'c["rope_scaling"] = {"rope_type": "linear", "factor": 2.0, "beta_fast": 32}'
t "a rope_scaling key lrc does not read" 1 'rope_scaling.beta_fast = 32' -- $(fwd ropeextra)
cfg ropetype 'c["rope_scaling"] = {"rope_type": "linear", "type": "dynamic", "factor": 2.0}'
t "rope_scaling whose type and rope_type differ" 1 'rope_scaling.type = "dynamic"' -- $(fwd ropetype)
SRC=$HF/mistral_window cfg mistralrope 'c["rope_scaling"] = {"rope_type": "linear", "factor": 2.0}'
t "rope_scaling on mistral" 1 'mistralrope/config.json: rope_scaling = ' 'model_type llama only' -- $(fwd mistralrope)
cfg gelu 'c["hidden_act"] = "gelu"'
t "an activation lrc lacks" 1 'hidden_act = "gelu"' 'silu' -- $(fwd gelu)
cfg softcap 'c["attn_logit_softcapping"] = 50.0'
t "soft-capping on llama" 1 'attn_logit_softcapping = 50' 'not a key lrc implements for model_type llama' -- $(fwd softcap)
cfg extra 'c["foo_bar"] = 3'
t "an unknown key" 1 'foo_bar = 3' -- inspect extra
cfg tp 'c["pretraining_tp"] = 2'
t "pretraining_tp 2" 1 'pretraining_tp = 2' 'only 1' -- $(fwd tp)
cfg dropout 'c["attention_dropout"] = 0.1'
t "attention dropout" 1 'attention_dropout = 0.1' -- $(fwd dropout)
cfg strheads 'c["num_attention_heads"] = "four"'
t "a string for an integer" 1 'num_attention_heads = "four"' 'expected an integer' -- $(fwd strheads)
cfg kv3 'c["num_key_value_heads"] = 3'
t "kv heads that do not divide the heads" 1 'num_key_value_heads = 3' 'divide num_attention_heads = 4' -- $(fwd kv3)
cfg nohidden 'del c["hidden_size"]'
t "hidden_size missing" 1 'hidden_size is missing' -- $(fwd nohidden)
cfg quant 'c["quantization_config"] = {"quant_method": "gptq", "bits": 4}'
t "a quantized checkpoint" 1 'quantization_config = ' -- $(fwd quant)
cfg tie 'c["tie_word_embeddings"] = "yes"'
t "a string for a boolean" 1 'tie_word_embeddings = "yes"' 'true or false' -- $(fwd tie)
SRC=$HF/qwen2_tied cfg qwsw 'c["use_sliding_window"] = True'
t "qwen2's top-layer sliding window" 1 'use_sliding_window = true' -- $(fwd qwsw)
SRC=$HF/mixtral_moe cfg mxaux 'c["output_router_logits"] = True'
t "mixtral's router loss" 1 'mxaux/config.json: output_router_logits = true' 'auxiliary loss' -- $(fwd mxaux)
SRC=$HF/mixtral_moe cfg mxjit 'c["router_jitter_noise"] = 0.1'
t "mixtral's router noise" 1 'router_jitter_noise = 0.1' 'only 0' -- $(fwd mxjit)
SRC=$HF/mixtral_moe cfg mxk 'c["num_experts_per_tok"] = 6'
t "more experts per token than experts" 1 'num_experts_per_tok = 6' 'must not exceed num_local_experts = 5' -- $(fwd mxk)
SRC=$HF/mixtral_moe cfg mxrope 'c["rope_scaling"] = {"rope_type": "linear", "factor": 2.0}'
t "rope_scaling on mixtral" 1 'mxrope/config.json: rope_scaling = ' 'model_type llama only' -- $(fwd mxrope)
cp -r "$HF/llama_mha" plain
t "--preset with a directory" 1 'plain: --preset does not apply' -- inspect plain --preset tiny

# ---- config.json that is not JSON text ----
cp -r "$HF/llama_mha" latin1 && printf '{"model_type": "llama", "name": "caf\xe9"}' >latin1/config.json
t "config.json not UTF-8" 1 'latin1/config.json: not UTF-8 text \(byte offset 36\)' -- $(fwd latin1)
cp -r "$HF/llama_mha" cut && head -c 200 "$HF/llama_mha/config.json" >cut/config.json
t "config.json cut short" 1 'cut/config.json: invalid JSON' 'truncated' -- $(fwd cut)

# ---- damaged weights: the file and the tensor named ----
cp -r "$HF/llama_gqa_bias" noshard && rm noshard/model-00003-of-00007.safetensors
t "a shard the index names is missing" 1 'noshard/model.safetensors.index.json names shard model-00003-of-00007.safetensors' \
  'cannot open' -- $(fwd noshard)
cp -r "$HF/llama_gqa_bias" badindex
"$PY" -c 'import json,sys; p=sys.argv[1]; j=json.load(open(p)); j["weight_map"]["model.norm.weight"]="model-00001-of-00007.safetensors"; json.dump(j,open(p,"w"))' badindex/model.safetensors.index.json
t "the index puts a tensor in the wrong shard" 1 'index.json: tensor .model.norm.weight. is in model-0000[0-9]-of-00007.safetensors, but the index puts it in another shard' -- $(fwd badindex)
cp -r "$HF/llama_mha" drop && "$PY" "$ROOT/tests/tools/st.py" drop "$HF/llama_mha/model.safetensors" drop/model.safetensors model.layers.1.mlp.up_proj.weight
t "a tensor missing" 1 'drop/model.safetensors: missing tensor .model.layers.1.mlp.up_proj.weight.' -- $(fwd drop)
cp -r "$HF/llama_mha" shape && "$PY" "$ROOT/tests/tools/st.py" set "$HF/llama_mha/model.safetensors" shape/model.safetensors model.layers.0.self_attn.k_proj.weight F32 '[24,48]'
t "a tensor of the wrong shape" 1 'shape/model.safetensors: tensor .model.layers.0.self_attn.k_proj.weight. is F32 \[24,48\]' '\[48,48\]' -- $(fwd shape)
cp -r "$HF/mixtral_moe" mxdrop && "$PY" "$ROOT/tests/tools/st.py" drop "$HF/mixtral_moe/model.safetensors" mxdrop/model.safetensors model.layers.1.block_sparse_moe.experts.4.w2.weight
t "an expert's tensor missing" 1 'mxdrop/model.safetensors: missing tensor .model.layers.1.block_sparse_moe.experts.4.w2.weight.' -- $(fwd mxdrop)
mkdir noweights && cp "$HF/llama_mha/config.json" noweights/
t "no weights in the directory" 1 'noweights: a directory with neither model.safetensors nor model.safetensors.index.json' -- $(fwd noweights)

cp -r "$HF/llama_gqa_bias" selfidx
"$PY" -c 'import json,sys; p=sys.argv[1]; j=json.load(open(p)); j["weight_map"]["lm_head.weight"]="model.safetensors.index.json"; json.dump(j,open(p,"w"))' selfidx/model.safetensors.index.json
t "an index that names itself as a shard" 1 "shard 'model.safetensors.index.json' is not a safetensors file" -- $(fwd selfidx)
t "fine-tuning a directory without a tokenizer.json" 2 'plain has no tokenizer.json, and its text is not bytes: give --tokenizer' -- train plain --steps 1 --lr 1e-3 -o run
t "eval of a directory without a tokenizer.json" 2 'plain has no tokenizer.json' -- eval plain

# ---- lrc export --hf ----
"$LRC" init llama --preset tiny --set norm=post -o post.safetensors >/dev/null
t "export of a placement no family computes" 1 'norm = post normalizes after the residual add' -- export post.safetensors llama --preset tiny --set norm=post --hf post.hf
mkdir taken
t "export into an existing directory" 2 '--hf taken: already exists' -- export post.safetensors llama --preset tiny --set norm=post --hf taken
t "export without --hf" 2 'needs --hf OUT_DIR' -- export post.safetensors llama --preset tiny
mkdir fakerun && echo '{"model": "llama", "sets": []}' >fakerun/run.json
t "export of a run with --set" 2 'run.json sets its model' -- export fakerun --set norm=lns --hf fr.hf
t "export of weights that do not fit" 1 'post.safetensors' -- export post.safetensors llama --preset small --hf small.hf

# ---- a directory is a model only if it holds config.json ----
mkdir llama
ok "a folder named llama does not hide the built-in llama" inspect llama --preset tiny
mkdir empty
t "a directory without config.json" 1 'empty: a directory without config.json' -- inspect empty
ok "control: the directory runs" $(fwd plain)
rm -f out.safetensors

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
