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
  ctest --test-dir "$1" --output-on-failure -j"$jobs"
done
