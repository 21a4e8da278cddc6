#!/bin/bash
# cpu_dot_isa.sh [ROUNDS] — the dot-product instructions a CPU has, against f32 FMA, for
# issue 22's question: would AVX512-BF16 or VNNI make lrc's bf16 or q8 GEMMs faster while
# their activations stay f32? Builds bench/cpu_dot_isa.c (one thread, 12 accumulators per
# instruction, the three measured in turn in each round) and prints, as medians of ROUNDS
# (default 5): products per second of vfmadd231ps (f32 x f32, what lrc's GEMMs run on
# widened weights), of vdpbf16ps (bf16 x bf16, activations rounded to bf16), of the exact
# use of vdpbf16ps for an f32 activation (three bf16 parts of its significand: three
# instructions for one instruction's products), and of vpdpbusd (u8 x s8, activations
# quantized to 8 bits, as llama.cpp's Q8_0 dot products), each as a ratio to FMA.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
rounds=${1:-5}
flags=$(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2)
echo "date      $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "cpu       $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(nproc) cores; one thread"
echo "features $(for f in avx2 fma avx512f avx512_bf16 avx512_vnni avx_vnni amx_bf16 amx_int8; do [[ " $flags " == *" $f "* ]] && printf ' %s' $f; done)"
echo "load avg  $(cut -d' ' -f1-3 /proc/loadavg)"
bin=$(mktemp)
trap 'rm -f "$bin"' EXIT
${CC:-cc} -O2 -Wall -Wextra "$root/bench/cpu_dot_isa.c" -o "$bin"
for r in $(seq "$rounds"); do "$bin"; done | awk -v rounds="$rounds" '
  function median(k,   n, i, j, t, a) {
    n = cnt[k]; for (i = 1; i <= n; i++) a[i] = v[k, i]
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  /^vfmadd231ps/ { v["fma", ++cnt["fma"]] = $4 }
  /^vdpbf16ps/   { v["bf16", ++cnt["bf16"]] = $4; v["exact", ++cnt["exact"]] = $7 }
  /^vpdpbusd/    { v["vnni", ++cnt["vnni"]] = $4 }
  END {
    f = median("fma")
    printf "GMAC/s, one thread, median of %d rounds:\n", rounds
    printf "  vfmadd231ps  f32 x f32 (lrc: widened weights, f32 activations)   %7.1f   1.00x\n", f
    if (cnt["bf16"]) {
      printf "  vdpbf16ps    bf16 x bf16 (activations rounded to bf16)         %7.1f   %.2fx\n", median("bf16"), median("bf16") / f
      printf "  vdpbf16ps    f32 activations exactly (three bf16 parts)        %7.1f   %.2fx\n", median("exact"), median("exact") / f
    } else print "  vdpbf16ps    (no avx512_bf16 on this CPU)"
    if (cnt["vnni"]) printf "  vpdpbusd     u8 x s8 (activations quantized to int8)           %7.1f   %.2fx\n", median("vnni"), median("vnni") / f
    else print "  vpdpbusd     (no avx512_vnni on this CPU)"
  }'
echo "load avg  $(cut -d' ' -f1-3 /proc/loadavg) (end)"
