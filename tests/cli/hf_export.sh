#!/bin/bash
# hf_export.sh LRC ST_COMPARE — lrc export --hf round trips: a llama model's
# weights (pre, lns and layerrope placements; grouped key-value heads, tied
# embeddings and biases; RoPE scaling (llama3, linear); a sliding window as mistral; a mixture of
# experts as mixtral) exported as a Hugging
# Face directory (Peri-Norm as gemma2), which lrc then runs as a MODEL: its logits within 1e-5 of
# the original's. (bench/hf_export.py loads the same directories in
# transformers and llama.cpp, which CI does not have.)
set -eu
lrc=$1 compare=$2
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
cd "$t"
python3 - <<'PY'
import json, struct
ids = [(7 * i + 3) % 256 for i in range(2 * 9)]
h = json.dumps({"tokens": {"dtype": "I32", "shape": [2, 9], "data_offsets": [0, 4 * len(ids)]}}).encode()
h += b" " * (-len(h) % 8)
open("in.safetensors", "wb").write(struct.pack("<Q", len(h)) + h + struct.pack("<%di" % len(ids), *ids))
PY
check() { # NAME SETS...: init, perturb nothing, export, run both, compare
  local name=$1
  shift
  local sets=()
  for s in "$@"; do sets+=(--set "$s"); done
  "$lrc" init llama --preset tiny "${sets[@]}" --seed 3 -o "$name.safetensors" >/dev/null
  "$lrc" export "$name.safetensors" llama --preset tiny "${sets[@]}" --hf "$name.hf/" >/dev/null # a trailing slash names it too
  "$lrc" forward llama --preset tiny "${sets[@]}" --weights "$name.safetensors" --input in.safetensors -o "$name.a.safetensors"
  "$lrc" forward "$name.hf" --input in.safetensors -o "$name.b.safetensors"
  echo -n "$name: "
  "$compare" "$name.b.safetensors" "$name.a.safetensors" logits 1e-5
}
check pre
check lns norm=lns
check layerrope norm=layerrope layerrope_alpha=0.3 layerrope_beta=-0.2 layerrope_alpha_rot=0.5
check layerrope_gqa_tied norm=layerrope n_kv_heads=1 tie_embeddings=true qkv_bias=true o_bias=true mlp_bias=true
check mistral sliding_window=4 n_kv_heads=1
check layerrope_llama3_rope norm=layerrope rope_factor=8 rope_low_freq=1 rope_high_freq=4 rope_orig_ctx=8
check linear_rope rope_factor=2.5
check peri norm=peri n_kv_heads=1
check layerrope_peri norm=layerrope_peri tie_embeddings=true layerrope_beta=-0.3
check layerrope_moe norm=layerrope n_experts=4 experts_per_tok=2 n_kv_heads=1
grep -q '"model_type":[[:space:]]*"mixtral"' layerrope_moe.hf/config.json || { echo "FAIL: a mixture of experts should export as mixtral"; exit 1; }
grep -q '"model_type":[[:space:]]*"gemma2"' layerrope_peri.hf/config.json || { echo "FAIL: Peri-Norm should export as gemma2"; exit 1; }
grep -q '"model_type":[[:space:]]*"mistral"' mistral.hf/config.json || { echo "FAIL: a sliding window should export as mistral"; exit 1; }
grep -q '"sliding_window":[[:space:]]*4' mistral.hf/config.json || { echo "FAIL: mistral's sliding_window is not 4"; exit 1; }
# an absent key takes transformers' class default: mistral's window is 4096
cp -r mistral.hf nowin && python3 -c 'import json; c=json.load(open("nowin/config.json")); del c["sliding_window"]; json.dump(c, open("nowin/config.json","w"))'
"$lrc" inspect nowin | grep -Eq 'sliding_window +4096' || { echo "FAIL: mistral without sliding_window should take 4096"; exit 1; }
python3 - <<'PY'
import json
t = json.load(open("layerrope.hf/tokenizer.json"))
v = t["model"]["vocab"]
assert len(v) == 256 and sorted(v.values()) == list(range(256)), "the byte vocabulary must hold ids 0..255 once"
assert v["<0x41>"] == 65 and v["\u2581"] == 32 and t["model"]["byte_fallback"], "bytes as Llama 2's byte fallback"
c = json.load(open("layerrope_gqa_tied.hf/config.json"))
assert c["num_key_value_heads"] == 1 and c["tie_word_embeddings"] is True and c["attention_bias"] is True, c
for name, want in (("layerrope_llama3_rope", {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                             "high_freq_factor": 4.0, "original_max_position_embeddings": 8}),
                   ("linear_rope", {"rope_type": "linear", "factor": 2.5})):
    got = json.load(open(name + ".hf/config.json"))["rope_scaling"]
    assert got == want, (name, got)
    # floats as floats: transformers checks that the factor is a float
    assert all(isinstance(got[k], float) for k in want if k.endswith("factor")), (name, got)
print("tokenizer.json: 256 byte tokens; config.json: GQA, tied, biased, RoPE scaled as set")
PY
