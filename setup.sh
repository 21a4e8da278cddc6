#!/bin/bash
# setup.sh — the first command on a fresh machine: installs the Debian
# packages lrc needs, builds it, and runs the main job: the demo, then a small
# LayerRoPE LLaMA trained on the King James Bible (a few minutes), its loss
# curves (runs/*/loss.png) and text generated from it.
#   ./setup.sh              install, build, run the demo
#   ./setup.sh --deps-only  install the packages only (test.sh uses this)
set -euo pipefail
cd "$(dirname "$0")"

# Build: compiler, CMake, Lua 5.4, cJSON, PCRE2 and libunistring (tokenizers' split regexes and Unicode normalizers), LLVM (14; 15 to 19 also work).
# Tests: PyTorch for the parity tests and OpenBLAS so that torch is not 30x slow.
# Training: the King James Bible, lrc train's default text, and gnuplot for the loss curves.
# Images: zlib for the gzipped IDX files, and Fashion-MNIST (runtime/images.c).
# Embedding: pkgconf, so programs find the installed liblrc (pkg-config --libs lrc; tests/cli/embed.sh).
# Data-parallel training: Open MPI, which lrc train loads at run time under mpirun (docs/distributed.md; tests/cli/train_dist.sh).
packages=(build-essential cmake liblua5.4-dev libcjson-dev libpcre2-dev libunistring-dev python3-torch libopenblas0-pthread bible-kjv gnuplot-nox
          zlib1g-dev dataset-fashion-mnist pkgconf openmpi-bin libopenmpi-dev)
if ! command -v llvm-config-19 llvm-config-18 llvm-config-17 llvm-config-16 llvm-config-15 \
     llvm-config-14 llvm-config >/dev/null 2>&1; then
  packages+=(llvm-14-dev)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi
# NVRTC comes with the CUDA toolkit (/usr/local/cuda), not from Debian: lrc
# loads it at run time to compile for --target cuda (no GPU needed), and the
# cuda_compile tests use it, so the test run stops here without it.
if ! ldconfig -p 2>/dev/null | grep -q 'libnvrtc\.so' && ! ls /usr/local/cuda/lib64/libnvrtc.so* >/dev/null 2>&1; then
  msg="NVRTC (libnvrtc.so from the CUDA toolkit) not found: lrc cannot compile for --target cuda"
  if [ "${1:-}" = "--deps-only" ]; then
    echo "setup: $msg, which the tests need: install the CUDA toolkit under /usr/local/cuda" >&2
    exit 1
  fi
  echo "setup: note: $msg (everything else works)"
fi
[ "${1:-}" = "--deps-only" ] && exit 0

cmake -S . -B build >/dev/null
cmake --build build -j"$(nproc)"
echo
./build/lrc demo
# The main job: a small LayerRoPE LLaMA trained on the King James Bible for a
# few minutes, its loss curves, then text from it.
run="runs/kjv-layerrope-$(date +%Y%m%d-%H%M%S)"
mkdir -p runs
echo
./build/lrc train llama --preset small --set norm=layerrope --steps 400 --lr 3e-3 --warmup 0.05 \
  --eval-every 50 -o "$run"
echo
./build/lrc generate llama --preset small --set norm=layerrope --weights "$run/model.safetensors" \
  --prompt "And God said, " -n 300 --temperature 0.7 --seed 1
