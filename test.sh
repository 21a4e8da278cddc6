#!/bin/bash
# test.sh — the whole test suite: installs what is missing, builds with
# warnings as errors and runs every test, then again under AddressSanitizer
# and UndefinedBehaviorSanitizer, and prints its total time.
#
# Both builds share one kernel cache that this run makes fresh
# (build/test-cache): the plain build's tests compile every kernel through
# LLVM and NVRTC and fill it, and the sanitized build's tests, which build
# the same IR and CUDA C through the same (instrumented) generators, read
# the object code and cubins back. The sanitizers watch lrc's own C, which
# still runs whole; they never saw into LLVM or NVRTC.
set -euo pipefail
cd "$(dirname "$0")"
start=$SECONDS
trap 'echo "test.sh: total $((SECONDS - start)) s"' EXIT
./setup.sh --deps-only
jobs=$(nproc)
cache=$PWD/build/test-cache
rm -rf "$cache"
mkdir -p "$cache"
export LRC_CACHE_DIR=$cache/kernels
variants=("build -DLRC_SANITIZE=OFF" "build-asan -DLRC_SANITIZE=ON")
asan_skip='^(cuda_compile_presets|arch_[a-z0-9_]*_(logits_cpu|train)|cuda_arch_[a-z0-9_]*_bf16|(parity|grads|cuda)_(llama|vit)_[a-z0-9_]*_base_(ref|cpu|f32|bf16)|(parity|grads|cuda)_parcae_[a-z]*_T3_(ref|cpu|f32|bf16))$'
# both builds before any test: the emulator recompiles a module older than
# its own library, so the sanitized build's must not be built after the
# plain build's tests filled the cache
for variant in "${variants[@]}"; do
  set -- $variant
  echo "== build $1"
  cmake -S . -B "$1" -DLRC_WERROR=ON "$2" -DLRC_TEST_CACHE_DIR="$cache" >/dev/null
  cmake --build "$1" -j"$jobs"
done
for variant in "${variants[@]}"; do
  set -- $variant
  echo "== test $1 ($((SECONDS - start)) s so far)"
  # the sanitized build runs the tests that take lrc's C down new paths
  # (tests/README.md): not cuda_compile_presets (the other widths of
  # cuda_compile_placements: NVRTC time, which no sanitizer sees into), nor
  # a parity case whose twin runs the same generators and executors on
  # other numbers (a model's _base shapes beside its _odd ones, which have
  # the tails; a loop of 3 iterations beside one of 8), nor an architecture's
  # cpu forward, bf16 run or training (its gradient case on cpu and its f32
  # case on cuda render and run the same kernels' code)
  skip=(); [ "$1" = build-asan ] && skip=(-E "$asan_skip")
  # (LeakSanitizer's tracer crashes at exit, which once earned failed tests
  # a second run here, came from libasan's dynamic-TLS bookkeeping:
  # cmake/sanitizer_options.c turns it off)
  ctest --test-dir "$1" --output-on-failure -j"$jobs" "${skip[@]}"
done
echo "test.sh: kernel cache $(du -sh "$cache" | cut -f1)"
