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
  if ! ctest --test-dir "$1" --output-on-failure -j"$jobs" "${skip[@]}"; then
    # LeakSanitizer's stop-the-world tracer now and then crashes as a process
    # exits ("Tracer caught signal 11", google/sanitizers#1353): a crash of
    # the leak checker, not a leak report nor a test's verdict. Only then do
    # the failed tests run once more, and they must pass.
    # Each failed test's own output must hold the tracer's message
    # (tests/tools/tracer_crash_only.sh): a real failure beside one tracer
    # crash gets no second run.
    tests/tools/tracer_crash_only.sh "$1" || exit 1
    echo "== LeakSanitizer's tracer crashed (not a leak report) in each failed test: those once more"
    # with the same -E: ctest numbers the tests of a filtered run among
    # themselves, and --rerun-failed takes those numbers (without it, the
    # tests after cuda_compile_presets' place ran in the failed ones' stead)
    ctest --test-dir "$1" --output-on-failure --rerun-failed "${skip[@]}"
  fi
done
