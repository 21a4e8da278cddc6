/* cpu_dot_isa.c — what the CPU's dot-product instructions give for f32
 * activations, built by bench/cpu_dot_isa.sh: the throughput of
 * vfmadd231ps (16 f32 products an instruction), of vdpbf16ps (32 bf16
 * products, AVX512-BF16) and of vpdpbusd (64 u8 x s8 products, AVX512-VNNI),
 * each with 12 independent accumulators, one thread. An f32 activation
 * times a bf16 weight is exact in vdpbf16ps only when the activation is
 * split into three bf16 parts (8 + 8 + 8 bits of its 24-bit significand):
 * three instructions for its 32 products, which the script prints as the
 * exact path's rate. */
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

#define ACC 12

__attribute__((target("avx512f"))) static double fma_rate(long iters, float *sink)
{
    __m512 a[ACC], x = _mm512_set1_ps(1.0001f), y = _mm512_set1_ps(0.9999f);
    for (int i = 0; i < ACC; i++) a[i] = _mm512_set1_ps((float)i);
    double t0 = now();
    for (long n = 0; n < iters; n++)
        for (int i = 0; i < ACC; i++) a[i] = _mm512_fmadd_ps(x, y, a[i]);
    double dt = now() - t0;
    for (int i = 0; i < ACC; i++) *sink += _mm512_reduce_add_ps(a[i]);
    return (double)iters * ACC / dt;
}

__attribute__((target("avx512f,avx512bf16"))) static double dpbf16_rate(long iters, float *sink)
{
    __m512 a[ACC], x = _mm512_set1_ps(1.0001f), y = _mm512_set1_ps(0.9999f);
    __m512bh xb = _mm512_cvtne2ps_pbh(x, x), yb = _mm512_cvtne2ps_pbh(y, y);
    for (int i = 0; i < ACC; i++) a[i] = _mm512_set1_ps((float)i);
    double t0 = now();
    for (long n = 0; n < iters; n++)
        for (int i = 0; i < ACC; i++) a[i] = _mm512_dpbf16_ps(a[i], xb, yb);
    double dt = now() - t0;
    for (int i = 0; i < ACC; i++) *sink += _mm512_reduce_add_ps(a[i]);
    return (double)iters * ACC / dt;
}

__attribute__((target("avx512f,avx512vnni"))) static double dpbusd_rate(long iters, float *sink)
{
    __m512i a[ACC], x = _mm512_set1_epi8(3), y = _mm512_set1_epi8(-2);
    for (int i = 0; i < ACC; i++) a[i] = _mm512_set1_epi32(i);
    double t0 = now();
    for (long n = 0; n < iters; n++)
        for (int i = 0; i < ACC; i++) a[i] = _mm512_dpbusd_epi32(a[i], x, y);
    double dt = now() - t0;
    for (int i = 0; i < ACC; i++) *sink += (float)_mm512_reduce_add_epi32(a[i]);
    return (double)iters * ACC / dt;
}

int main(int argc, char **argv)
{
    long iters = argc > 1 ? atol(argv[1]) : 20000000L;
    float sink = 0;
    __builtin_cpu_init();
    double f = fma_rate(iters, &sink);
    printf("vfmadd231ps %.3f Ginstr/s %.1f GMAC/s\n", f / 1e9, 16 * f / 1e9);
    if (__builtin_cpu_supports("avx512bf16")) {
        double d = dpbf16_rate(iters, &sink);
        printf("vdpbf16ps %.3f Ginstr/s %.1f GMAC/s exact3 %.1f GMAC/s\n", d / 1e9, 32 * d / 1e9, 32 * d / 3 / 1e9);
    }
    if (__builtin_cpu_supports("avx512vnni")) {
        double v = dpbusd_rate(iters, &sink);
        printf("vpdpbusd %.3f Ginstr/s %.1f GMAC/s\n", v / 1e9, 64 * v / 1e9);
    }
    return sink == 12345.0f; /* keeps the sums */
}
