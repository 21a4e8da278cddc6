#!/bin/bash
# test.sh — the whole test suite: installs what is missing, then builds with
# warnings as errors and runs every test, then again under AddressSanitizer
# and UndefinedBehaviorSanitizer.
set -euo pipefail
cd "$(dirname "$0")"
./setup.sh --deps-only
jobs=$(nproc)
for variant in "build -DLRC_SANITIZE=OFF" "build-asan -DLRC_SANITIZE=ON"; do
  set -- $variant
  echo "== $1"
  cmake -S . -B "$1" -DLRC_WERROR=ON "$2" >/dev/null
  cmake --build "$1" -j"$jobs"
  # the sanitizers watch the CUDA renderer in cuda_compile_placements; the
  # other widths only add NVRTC time, which no sanitizer sees into
  skip=(); [ "$1" = build-asan ] && skip=(-E cuda_compile_presets)
  # (LeakSanitizer's tracer crashes at exit, which once earned failed tests
  # a second run here, came from libasan's dynamic-TLS bookkeeping:
  # cmake/sanitizer_options.c turns it off)
  ctest --test-dir "$1" --output-on-failure -j"$jobs" "${skip[@]}"
done
