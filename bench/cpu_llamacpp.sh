#!/bin/bash
# cpu_llamacpp.sh [hf_llamacpp.py options...] — lrc against llama.cpp on the CPU at f32,
# bf16 and q8 (llama.cpp's Q8_0), on one Hugging Face LLaMA checkpoint of the 60m shape
# with a 32 000-token vocabulary: prompt processing of 256 tokens and decoding of 128,
# same threads, interleaved, with the ratio lrc / llama.cpp at each precision.
#
# 1. Builds llama.cpp once, cached outside the repository in $LRC_LLAMACPP_CACHE (default
#    ~/.cache/lrc/llamacpp): the tree vendored in the llama-cpp-python 0.3.36 sdist (from
#    PyPI), CMake with GGML_NATIVE off and each instruction-set option on exactly when
#    /proc/cpuinfo lists it (a native build has died with SIGILL on a virtual CPU whose
#    model name promises more than its flags). A Python with transformers for its
#    converter goes in the same cache ($LRC_HF_PYTHON overrides it).
# 2. Runs bench/hf_llamacpp.py --vocab 32000 --pp 256 --tg 128: lrc export of a 60m model,
#    llama.cpp's own convert_hf_to_gguf.py to F32, BF16 and Q8_0, llama-bench against lrc
#    forward / lrc generate of packages compiled with --weights-dtype f32, bf16 and q8. A
#    precision llama.cpp cannot run here is reported as such, not dropped.
# Extra options go to hf_llamacpp.py (--threads, --rounds, --lrc, ...; later ones win).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cache=${LRC_LLAMACPP_CACHE:-$HOME/.cache/lrc/llamacpp}
ver=0.3.36
src=$cache/llama_cpp_python-$ver/vendor/llama.cpp
build=$cache/build-$ver
mkdir -p "$cache"

flags=$(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2)
has() { [[ " $flags " == *" $1 "* ]] && echo ON || echo OFF; }
opts=(-DGGML_NATIVE=OFF -DGGML_AVX=$(has avx) -DGGML_AVX2=$(has avx2) -DGGML_FMA=$(has fma) -DGGML_F16C=$(has f16c)
      -DGGML_BMI2=$(has bmi2) -DGGML_SSE42=$(has sse4_2) -DGGML_AVX_VNNI=$(has avx_vnni) -DGGML_AVX512=$(has avx512f)
      -DGGML_AVX512_VBMI=$(has avx512vbmi) -DGGML_AVX512_VNNI=$(has avx512_vnni) -DGGML_AVX512_BF16=$(has avx512_bf16)
      -DGGML_AMX_TILE=$(has amx_tile) -DGGML_AMX_INT8=$(has amx_int8) -DGGML_AMX_BF16=$(has amx_bf16))
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(nproc) cores"
echo "llama.cpp cmake: ${opts[*]}"

# a Python with transformers for the converter (its pip also fetches the sdist: Debian's
# python3 has no pip of its own)
py=${LRC_HF_PYTHON:-$cache/venv/bin/python}
if ! "$py" -c 'import transformers, sentencepiece, google.protobuf' 2>/dev/null; then
  echo "making a Python with transformers for the converter: $cache/venv"
  /usr/bin/python3 -m venv --system-site-packages "$cache/venv"
  "$cache/venv/bin/pip" install -q "transformers==4.44.2" tokenizers sentencepiece protobuf >"$cache/pip.log" 2>&1 ||
    { echo "RESULT: pip install transformers failed (see $cache/pip.log)"; exit 1; }
  py=$cache/venv/bin/python
fi

if [ ! -f "$src/convert_hf_to_gguf.py" ]; then
  echo "fetching the llama-cpp-python $ver sdist into $cache"
  "$py" -m pip download --no-deps --no-binary :all: "llama-cpp-python==$ver" -d "$cache" >"$cache/download.log" 2>&1 ||
    { echo "RESULT: pip download llama-cpp-python==$ver failed (see $cache/download.log)"; exit 1; }
  tar -xzf "$cache/llama_cpp_python-$ver.tar.gz" -C "$cache"
fi
stamp="$build/lrc-options.txt"
if [ ! -x "$build/bin/llama-bench" ] || [ "$(cat "$stamp" 2>/dev/null)" != "${opts[*]}" ]; then
  echo "building llama.cpp into $build (once; minutes)"
  rm -rf "$build"
  cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_SERVER=OFF "${opts[@]}" >"$cache/cmake.log" 2>&1 || { echo "RESULT: cmake failed (see $cache/cmake.log)"; exit 1; }
  cmake --build "$build" -j"$(nproc)" --target llama-bench llama >"$cache/build.log" 2>&1 ||
    { echo "RESULT: the llama.cpp build failed (see $cache/build.log)"; exit 1; }
  echo "${opts[*]}" >"$stamp"
fi

exec /usr/bin/python3 "$root/bench/hf_llamacpp.py" --llamacpp-build "$build" --converter "$src/convert_hf_to_gguf.py" \
  --hf-python "$py" --preset 60m --norm pre --vocab 32000 --pp 256 --tg 128 "$@"
