#!/bin/bash
# test_st_compare.sh ST_COMPARE — the comparison every parity test rests on:
# equal files pass; a NaN fails wherever it stands among the tensors (it
# was forgotten once a later tensor was compared); with a FLOOR, a zeroed
# tensor of more than one element fails, and one element within the floor
# passes.
compare=$1
source "$(dirname "$0")/check.sh"
# mk FILE NAME=V,V,... : an F32 file of one-dimensional tensors
mk() {
  python3 - "$@" <<'PY'
import json, struct, sys
h, data = {}, b""
for arg in sys.argv[2:]:
    name, vals = arg.split("=")
    v = [float(x) for x in vals.split(",")]
    raw = struct.pack("<%df" % len(v), *v)
    h[name] = {"dtype": "F32", "shape": [len(v)], "data_offsets": [len(data), len(data) + len(raw)]}
    data += raw
s = json.dumps(h).encode()
s += b" " * (-len(s) % 8)
open(sys.argv[1], "wb").write(struct.pack("<Q", len(s)) + s + data)
PY
}
mk "$dir/ref.st" a=0.1,0.2,0.2 b=4,5,6 s=0.01
mk "$dir/same.st" a=0.1,0.2,0.2 b=4,5,6 s=0.01
mk "$dir/nan_first.st" a=nan,0.2,0.2 b=4,5,6 s=0.01
mk "$dir/nan_last.st" a=0.1,0.2,0.2 b=4,5,6 s=nan
mk "$dir/zero_a.st" a=0,0,0 b=4,5,6 s=0.01
mk "$dir/zero_s.st" a=0.1,0.2,0.2 b=4,5,6 s=0
"$compare" "$dir/same.st" "$dir/ref.st" '*' 1e-6 >/dev/null
check "equal files pass" "[ $? = 0 ]"
for f in nan_first nan_last; do
  "$compare" "$dir/$f.st" "$dir/ref.st" '*' 1e-1 >"$dir/out.txt"
  rc=$?
  check "$f: a NaN fails ($(cat "$dir/out.txt"))" "[ $rc = 1 ] && grep -q 'error nan' '$dir/out.txt'"
done
# the largest norm is |b| = 8.77: against 1e-1 of it, a (|a| = 0.3) zeroed
# would be an error of 0.34, under 0.5; only the one-element s is floored
"$compare" "$dir/zero_a.st" "$dir/ref.st" '*' 0.5 1e-1 >/dev/null
check "with a floor, a zeroed tensor of three elements fails" "[ $? = 1 ]"
"$compare" "$dir/zero_s.st" "$dir/ref.st" '*' 0.5 1e-1 >/dev/null
check "with a floor, a scalar's error within it passes" "[ $? = 0 ]"
"$compare" "$dir/zero_s.st" "$dir/ref.st" '*' 0.5 >/dev/null
check "without a floor, the zeroed scalar fails" "[ $? = 1 ]"
summary
