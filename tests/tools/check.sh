# check.sh — sourced by the shell tests: a scratch directory $dir removed on
# exit, `check NAME CONDITION` (CONDITION is eval'ed; a false one prints
# "FAIL NAME" and counts; with LRC_TEST_VERBOSE set a true one prints "ok
# NAME", figures included), and `summary`, which prints the "N passed, M
# failed" line and exits 1 when anything failed.
set -u
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
passed=0 failed=0
check() { if eval "$2"; then passed=$((passed + 1)); [ -z "${LRC_TEST_VERBOSE:-}" ] || echo "ok $1"; else failed=$((failed + 1)); echo "FAIL $1"; fi; }
summary() {
  echo "$passed passed, $failed failed"
  [ "$failed" = 0 ] || exit 1
}
