#!/bin/bash
# check_fixtures.sh — regenerates every committed PyTorch fixture of
# tests/fixtures/{ops,llama,vit,parcae,optim} into a temporary directory (the
# five make_*_fixtures.py scripts with --out) and compares them with the committed
# files: the same set of files, text files (config.txt) byte for byte, in each
# safetensors file the same tensors, dtypes, shapes and metadata, integer
# tensors exactly and every f32 tensor within TOL by st_compare.
#
#   check_fixtures.sh ST_COMPARE [COMMITTED_DIR]      (ctest fixtures_regen)
#
# COMMITTED_DIR (default tests/fixtures) is what is compared against, so that
# a perturbed copy can show the check fails.
#
# TOL: regenerating here gives byte-identical files (all of them, at 1, 2
# and 4 torch threads). The stored values are f32 rounded from f64, so a
# machine whose BLAS sums in another order can only flip an f32 rounding: at
# most one ulp, 1.2e-7 of that value and so of its tensor's norm. 2e-7 lets
# such flips through and catches any value that moved further.
#
# Needs torch for /usr/bin/python3 (or $LRC_PYTHON). Without it the check
# says so and is skipped (exit 77), except in CI (CI=true), where it fails.
set -u
TOL=2e-7
here=$(cd "$(dirname "$0")" && pwd)
st_compare=${1:?usage: check_fixtures.sh ST_COMPARE [COMMITTED_DIR]}
committed=$(cd "${2:-$here/../fixtures}" && pwd)
py=${LRC_PYTHON:-/usr/bin/python3}
dirs="ops llama vit parcae optim"

if ! "$py" -c 'import torch' 2>/dev/null; then
    if [ "${CI:-}" = true ]; then
        echo "FAIL: torch is not importable by $py, and CI=true: the fixtures cannot be checked against their scripts"
        exit 1
    fi
    echo "skip: torch is not importable by $py: the committed fixtures are NOT checked against their scripts"
    exit 77
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
start=$(date +%s)
# grads after make_fixtures (it reads the regenerated llama weights)
for script in make_fixtures make_grad_fixtures make_vit_fixtures make_parcae_fixtures make_optim_fixtures; do
    if ! "$py" "$here/$script.py" --out "$tmp/new" > "$tmp/$script.log" 2>&1; then
        echo "FAIL: $script.py --out failed:"
        tail -20 "$tmp/$script.log"
        exit 1
    fi
done
echo "regenerated in $(($(date +%s) - start)) s"

list() { (cd "$1" && for d in $dirs; do [ -d "$d" ] && find "$d" -type f; done) | LC_ALL=C sort; }
list "$committed" > "$tmp/committed.txt"
list "$tmp/new" > "$tmp/regenerated.txt"
bad=0
while read -r f; do
    echo "FAIL: $f is committed but no script makes it"
    bad=1
done < <(LC_ALL=C comm -23 "$tmp/committed.txt" "$tmp/regenerated.txt")
while read -r f; do
    echo "FAIL: $f is made by a script but not committed"
    bad=1
done < <(LC_ALL=C comm -13 "$tmp/committed.txt" "$tmp/regenerated.txt")

# Headers of two safetensors files: the same tensors, dtypes, shapes and
# metadata, non-f32 tensors byte for byte; prints the f32 tensors' names.
header_check='
import json, struct, sys
def read(p):
    b = open(p, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    meta = h.pop("__metadata__", None)
    return meta, {k: (v["dtype"], v["shape"], b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]]) for k, v in h.items()}
(ma, ta), (mb, tb) = read(sys.argv[1]), read(sys.argv[2])
if ma != mb:
    sys.exit("metadata differs: %s against %s" % (ma, mb))
if sorted(ta) != sorted(tb):
    sys.exit("tensors differ: %s against %s" % (sorted(ta), sorted(tb)))
for k in sorted(ta):
    if ta[k][:2] != tb[k][:2]:
        sys.exit("%s: %s %s against %s %s" % (k, ta[k][0], ta[k][1], tb[k][0], tb[k][1]))
    if ta[k][0] != "F32" and ta[k][2] != tb[k][2]:
        sys.exit("%s (%s) differs" % (k, ta[k][0]))
print("\n".join(k for k in sorted(ta) if ta[k][0] == "F32"))
'
same=0 compared=0 worst=0
while read -r f; do
    new=$tmp/new/$f old=$committed/$f
    compared=$((compared + 1))
    if cmp -s "$new" "$old"; then
        same=$((same + 1))
        continue
    fi
    if [ "${f%.safetensors}" = "$f" ]; then
        echo "FAIL: $f differs from its regeneration:"
        diff "$new" "$old" | head -10
        bad=1
        continue
    fi
    if ! names=$("$py" -c "$header_check" "$new" "$old" 2>&1); then
        echo "FAIL: $f: $names"
        bad=1
        continue
    fi
    while read -r name; do
        [ -n "$name" ] || continue
        if ! out=$("$st_compare" "$new" "$old" "$name" "$TOL" 2>&1); then
            echo "FAIL: $f: $out"
            bad=1
        fi
        rel=$(printf '%s\n' "$out" | sed -n 's/.*worst relative error \([^ ]*\).*/\1/p')
        [ -n "$rel" ] && worst=$(awk -v a="$worst" -v b="$rel" 'BEGIN { print (b + 0 > a + 0) ? b : a }')
    done <<< "$names"
done < <(LC_ALL=C comm -12 "$tmp/committed.txt" "$tmp/regenerated.txt")

echo "$compared files compared ($dirs): $same byte-identical, worst relative error of the others $worst (tolerance $TOL)"
[ "$compared" -gt 0 ] || { echo "FAIL: no fixtures compared"; bad=1; }
exit $bad
