#!/bin/bash
# llvm_cache.sh LRC — the cpu target's compiled kernels are cached on disk by
# content (codegen/kcache.c): a second compile of the same model comes from
# the cache and computes the same bytes, just in time and ahead of time; a
# damaged entry is compiled again and replaced (never used); two processes
# filling the cache at once each leave a whole entry; LRC_LLVM_CACHE=off and
# LRC_CACHE=off compile every time; lrc cache counts and clears the entries.
set -u
lrc=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
source "$(dirname "$0")/../tools/check.sh"
cd "$dir"
export LRC_CACHE_DIR=$dir/cache
"$lrc" init llama --preset tiny --seed 3 -o w.st >/dev/null || exit 1
# tokens [2, 8] as safetensors: an 8-byte header length, the JSON, the ids
python3 -c '
import json, struct, sys
ids = [(7 * i + 3) % 256 for i in range(16)]
h = json.dumps({"tokens": {"dtype": "I32", "shape": [2, 8], "data_offsets": [0, 64]}}).encode()
h += b" " * (-len(h) % 8)
sys.stdout.buffer.write(struct.pack("<Q", len(h)) + h + struct.pack("<16i", *ids))' >in.st || exit 1
fwd() { "$lrc" forward llama --preset tiny --weights w.st --input in.st -o "$1" --target cpu | grep '^llvm:'; }
first=$(fwd o1.st) second=$(fwd o2.st)
echo "first: $first; second: $second"
check "a first compile fills the cache" "[ '$first' = 'llvm: compiled, now cached' ]"
check "a second one reads it" "[ '$second' = 'llvm: from the cache' ]"
check "the cached kernels compute the same bytes" "cmp -s o1.st o2.st"
check "lrc cache counts one entry" "'$lrc' cache | grep -q '^  llvm   1 entries'"
entry=$(ls cache/llvm/*.bin)
head -c 3000 "$entry" >"$entry.cut" && mv "$entry.cut" "$entry"
third=$(fwd o3.st)
echo "damaged entry: $third"
check "a damaged entry is compiled again" "[ '$third' = 'llvm: a damaged cache entry, compiled again and replaced' ]"
check "and the result is right" "cmp -s o1.st o3.st"
check "and the entry replaced" "[ \"\$(fwd o4.st)\" = 'llvm: from the cache' ]"
# a flipped byte inside the payload, the size unchanged: the hash sees it
python3 -c 'import sys; p = sys.argv[1]; b = bytearray(open(p, "rb").read()); b[len(b) // 2] ^= 0x40; open(p, "wb").write(b)' "$entry"
check "a flipped byte is compiled again" "[ \"\$(fwd o5.st)\" = 'llvm: a damaged cache entry, compiled again and replaced' ] && cmp -s o1.st o5.st"
check "LRC_LLVM_CACHE=off compiles" "[ \"\$(LRC_LLVM_CACHE=off fwd o6.st)\" = 'llvm: no cache' ] && cmp -s o1.st o6.st"
check "LRC_CACHE=off compiles" "[ \"\$(LRC_CACHE=off fwd o7.st)\" = 'llvm: no cache' ]"
# ahead of time: the package's object code from the same entry
pkg() { "$lrc" compile llama --preset tiny --weights w.st --target cpu --batch 2 --seq 8 --min-seq 8 -o "$1" | grep '^llvm:'; }
check "a package's kernels come from the cache" "[ \"\$(pkg p1)\" = 'llvm: from the cache' ]"
"$lrc" forward p1 --input in.st -o o8.st >/dev/null
check "and the package computes the same bytes" "cmp -s o1.st o8.st"
# two processes filling an empty cache at once
"$lrc" cache --clear >clear.txt
check "lrc cache --clear removes the entries" "grep -q '^  llvm   [1-9][0-9]* entries, .* removed' clear.txt && [ -z \"\$(ls cache/llvm)\" ]"
fwd r1.st >r1.txt & fwd r2.st >r2.txt & wait
check "two writers at once: both compile" "grep -q 'now cached' r1.txt && grep -q 'now cached' r2.txt"
check "and compute the same bytes" "cmp -s o1.st r1.st && cmp -s o1.st r2.st"
check "and leave one whole entry, no temporary file" "[ \"\$(ls cache/llvm | wc -l)\" = 1 ] && [ \"\$(fwd o9.st)\" = 'llvm: from the cache' ]"
summary
