# common.sh — sourced by the emulator's shell tests: a scratch directory
# $out removed on exit, the failure flag, st.py as `py`, and token inputs.
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
failed=0
tools=$(cd "$(dirname "${BASH_SOURCE[0]}")/../tools" && pwd) # PYTHONPATH="$tools": import st
py() { python3 "$tools/st.py" "$@"; }
# tokens FILE B T: I32 tokens [B, T], (7 i + 3) mod 251
tokens() {
  py make "$1" "{\"tokens\": [\"I32\", [$2, $3], $(python3 -c "print([(7 * i + 3) % 251 for i in range($2 * $3)])")]}"
}
