#!/usr/bin/env bash
# size_bounds.sh — sizes no machine could hold, from a Hugging Face
# config.json or a model's defaults, end promptly in one line naming the
# key or the Lua line (the rule and the checks of errors.sh,
# error_harness.sh: exit 1, within `timeout 20`). Before, lrc built a graph
# for them for ever: num_hidden_layers = 2^53 made `lrc inspect DIR` loop,
# and a mixture of 65536 experts made `inspect --params` run for minutes
# (each new parameter's name was compared with all the others).
#
#   tests/cli/size_bounds.sh PATH_TO_LRC
set -u
export LC_ALL=C
if [ $# -ne 1 ] || [ ! -x "$1" ]; then
  echo "usage: $0 PATH_TO_LRC" >&2
  exit 2
fi
LRC=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HF=$ROOT/tests/fixtures/hf
MOE=$ROOT/tests/cli/models/moe_65536.lua
PY=${PYTHON:-python3}
VERBOSE=${LRC_TESTS_VERBOSE:-0}
# shellcheck source=error_harness.sh
. "$ROOT/tests/cli/error_harness.sh"

"$PY" "$ROOT/tests/tools/st.py" make in.safetensors '{"tokens": ["I32", [1, 4], [1, 2, 3, 4]]}' ||
  { echo "size_bounds.sh: st.py failed" >&2; exit 2; }

ok "the config as written" inspect "$HF/llama_mha"
cfg layers 'c["num_hidden_layers"] = 9007199254740992'
t "num_hidden_layers = 2^53" 1 'layers/config.json: num_hidden_layers = 9007199254740992: more than 2147483647' -- inspect layers
t "num_hidden_layers = 2^53, forward" 1 'layers/config.json: num_hidden_layers = 9007199254740992' -- \
  forward layers --input in.safetensors -o out.safetensors
cfg negative 'c["vocab_size"] = -2**40'
t "vocab_size = -2^40" 1 'negative/config.json: vocab_size = -1099511627776: more than 2147483647 in magnitude' -- inspect negative
SRC=$HF/mixtral_moe cfg experts 'c["num_local_experts"] = 2**40'
t "num_local_experts = 2^40" 1 'experts/config.json: num_local_experts = 1099511627776: more than 2147483647' -- inspect experts --params
# under the integer bound, but past any checkpoint's depth or width: built,
# they took 7 s (65536 layers) and 16 s (a million experts) to fail or pass
cfg deep 'c["num_hidden_layers"] = 65536'
t "num_hidden_layers = 65536" 1 'deep/config.json: num_hidden_layers = 65536: more than 4096, the most lrc builds' -- inspect deep
SRC=$HF/mixtral_moe cfg wide_moe 'c["num_local_experts"] = 1000000'
t "num_local_experts = 10^6" 1 'wide_moe/config.json: num_local_experts = 1000000: more than 4096' -- inspect wide_moe --params
# under the integer bound, but too big for memory: the parameter that passes
# it is named, with the line of the model that makes it
cfg wide 'c["hidden_size"] = 400000; c["num_attention_heads"] = 4; c["num_key_value_heads"] = 4'
t "hidden_size = 400000 (640 GB of f32 in q_proj alone)" 1 'llama\.lua:[0-9]+: parameter .*\[400000,400000\]' \
  "more than this machine's [0-9.]+ GB of memory" -- inspect wide --params

ok "65536 experts of a small width fit" inspect "$MOE" --set d=8 --set d_ff=8 --params
t "65536 experts by default: inspect --params" 1 "moe_65536\.lua:[0-9]+: parameter 'moe\.experts\.[0-9]+\.w[123]\.weight'" \
  "more than this machine's [0-9.]+ GB of memory" -- inspect "$MOE" --params
t "65536 experts by default: init" 1 "moe_65536\.lua:[0-9]+: parameter 'moe\.experts" -- init "$MOE" -o w.safetensors
t "65536 experts by default: compile" 1 "moe_65536\.lua:[0-9]+: parameter 'moe\.experts" -- \
  compile "$MOE" --target cpu --batch 1 --seq 4 -o pkg

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
