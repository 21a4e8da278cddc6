#!/bin/bash
# nvrtc_cache.sh LRC MODEL — compiled CUDA kernels are cached on disk by
# content: a second compile of the same model comes from the cache with the
# same cubin, a damaged entry is compiled again and replaced (never used),
# and LRC_NVRTC_CACHE=off compiles every time.
set -u
lrc=$1 model=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export LRC_CACHE_DIR=$dir/cache
passed=0 failed=0
check() { if eval "$2"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL $1"; fi; }
# one shape (--min-seq 256: no shorter ones), so one cache entry
compile() { "$lrc" compile "$model" --preset tiny --target cuda --arch sm_80 --min-seq 256 -o "$dir/$1" | grep '^nvrtc:'; }
first=$(compile p1) second=$(compile p2)
echo "first: $first; second: $second"
check "a first compile fills the cache" "[ '$first' = 'nvrtc: compiled, now cached' ]"
check "a second one reads it" "[ '$second' = 'nvrtc: from the cache' ]"
check "the cached cubin is the compiled one" "cmp -s '$dir/p1/kernels.cubin' '$dir/p2/kernels.cubin' && cmp -s '$dir/p1/kernels.ptx' '$dir/p2/kernels.ptx'"
entry=$(ls "$dir"/cache/nvrtc/*.bin)
head -c 3000 "$entry" >"$entry.cut" && mv "$entry.cut" "$entry"
third=$(compile p3)
echo "damaged entry: $third"
check "a damaged entry is compiled again" "[ '$third' = 'nvrtc: a damaged cache entry, compiled again and replaced' ]"
check "and the result is right" "cmp -s '$dir/p1/kernels.cubin' '$dir/p3/kernels.cubin'"
check "and the entry replaced" "[ \"\$(compile p4)\" = 'nvrtc: from the cache' ]"
check "LRC_NVRTC_CACHE=off compiles" "LRC_NVRTC_CACHE=off compile p5 | grep -q 'no cache'"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
