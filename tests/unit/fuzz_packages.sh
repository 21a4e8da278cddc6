#!/usr/bin/env bash
# fuzz_packages.sh — the seed packages of fuzz_package.c (ctest
# package_fuzz_packages, the setup of package_fuzz): small models compiled
# for the cpu target, each reaching another part of the loader and the
# runtime. Into OUT (made afresh):
#
#   llama       weights compiled in, batch 2 x seq 8 with its shorter shapes (shape-BxT/)
#   llama_q8    q8 weights: packed parameters and their scales
#   llama_bf16  bf16 weights, widened when loaded
#   llama_bare  no weights: bound at run time from llama_bare.weights.safetensors
#   llama_dec   a decoder (--ctx 16, KV caches as state) that carries a tokenizer.json
#   parcae      a looped model: back edges, iteration counts, an initial state
#   vit         images in, classes out
#   llama_cu    for cuda (sm_80): its launch table in package.json; without
#               a GPU it opens as far as the device, an error
#
#   tests/unit/fuzz_packages.sh PATH_TO_LRC MODELS_DIR TOKENIZER.json OUT
set -eu
if [ $# -ne 4 ] || [ ! -x "$1" ]; then
  echo "usage: $0 PATH_TO_LRC MODELS_DIR TOKENIZER.json OUT" >&2
  exit 2
fi
LRC=$1 M=$2 TOK=$3 OUT=$4
rm -rf "$OUT"
mkdir -p "$OUT"
cd "$OUT"
c() { "$LRC" compile "$@" --target cpu >/dev/null; }
"$LRC" init "$M/llama.lua" --preset tiny --seed 1 -o llama.init.safetensors >/dev/null
"$LRC" init "$M/parcae.lua" --preset tiny --seed 2 -o parcae.init.safetensors >/dev/null
"$LRC" init "$M/vit.lua" --preset tiny --seed 3 -o vit.init.safetensors >/dev/null
c "$M/llama.lua" --preset tiny --weights llama.init.safetensors --batch 2 --seq 8 --min-seq 4 -o llama
c "$M/llama.lua" --preset tiny --weights llama.init.safetensors --weights-dtype q8 --seq 8 -o llama_q8
c "$M/llama.lua" --preset tiny --weights llama.init.safetensors --weights-dtype bf16 --seq 8 -o llama_bf16
c "$M/llama.lua" --preset tiny --seq 8 -o llama_bare
cp llama.init.safetensors llama_bare.weights.safetensors
c "$M/llama.lua" --preset tiny --weights llama.init.safetensors --ctx 16 --tokenizer "$TOK" -o llama_dec
c "$M/parcae.lua" --preset tiny --weights parcae.init.safetensors --seq 8 -o parcae
c "$M/vit.lua" --preset tiny --weights vit.init.safetensors -o vit
"$LRC" compile "$M/llama.lua" --preset tiny --weights llama.init.safetensors --seq 8 --target cuda --arch sm_80 -o llama_cu >/dev/null
echo "fuzz_packages.sh: compiled llama llama_q8 llama_bf16 llama_bare llama_dec parcae vit llama_cu into $OUT"
