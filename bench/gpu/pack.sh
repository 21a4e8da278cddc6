#!/bin/bash
# bench/gpu/pack.sh — what the GPU machine needs from here, in gpu-carry/
# (git-ignored): the lrc binary, st_compare, test_cuda_ops, test_cuda_optim, and the shared libraries they
# load that a machine with only CUDA, CMake and PyTorch lacks (Lua, LLVM,
# cJSON, ...), compressed to gpu-carry.tar.xz (about 40 MB, under the 64 MiB a
# device run may carry). Run after building; run.sh unpacks it there.
set -eu
cd "$(dirname "$0")/../.."
rm -rf gpu-carry && mkdir -p gpu-carry/lib
cp build/lrc gpu-carry/
cp "$(find build -name st_compare -type f | head -1)" gpu-carry/
cp "$(find build -name test_cuda_ops -type f | head -1)" gpu-carry/
cp "$(find build -name test_cuda_optim -type f | head -1)" gpu-carry/
# every library outside glibc's own set, resolved as this machine resolves it
ldd build/lrc | awk '/=> \//{print $3}' | grep -Ev '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*)\.so' |
  while read -r lib; do cp -L "$lib" gpu-carry/lib/; done
tar -cJf gpu-carry.tar.xz gpu-carry
ls -la gpu-carry.tar.xz
