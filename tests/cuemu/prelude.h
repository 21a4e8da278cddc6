/* prelude.h — what CUDA C gives a kernel, for the host: included before a
 * rendered kernels.cu that g++ compiles into a shared library the emulator
 * (cuemu.c) loads. Each CUDA thread is a fiber; the emulator sets the index
 * variables before it resumes one and fills cuemu_barrier, so a barrier or a
 * shuffle is a switch back to its scheduler. Only what codegen/cuda renders
 * is here; anything else fails to compile, which is the point. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#undef INFINITY /* the renderer defines its own, through __int_as_float */
#undef NAN

struct cuemu_dim3 {
    unsigned x, y, z;
};
extern "C" {
cuemu_dim3 threadIdx, blockIdx, blockDim, gridDim;
/* 0: __syncthreads; 1: every live thread of the caller's warp */
void (*cuemu_barrier)(int warp_only);
uint64_t cuemu_lane_slot[1024];
}

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
/* Blocks run one at a time: one copy of a kernel's shared memory is enough.
 * It lives in its own section, which the emulator fills with 0x5A bytes
 * before each block (cuemu_shared_range gives its bounds): on a GPU a block
 * finds in shared memory whatever was there, so a kernel that reads a
 * shared value its block did not write should show it. */
#define __shared__ static __attribute__((section("cuemu_shared")))
extern "C" {
extern char __start_cuemu_shared[] __attribute__((weak)), __stop_cuemu_shared[] __attribute__((weak));
void cuemu_shared_range(char **lo, char **hi) { *lo = __start_cuemu_shared, *hi = __stop_cuemu_shared; }
}
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))

struct alignas(16) float4 {
    float x, y, z, w;
};
struct alignas(8) float2 {
    float x, y;
};
struct alignas(16) uint4 {
    unsigned x, y, z, w;
};
struct alignas(8) uint2 {
    unsigned x, y;
};
static inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
static inline float2 make_float2(float x, float y) { return {x, y}; }
static inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }
static inline uint2 make_uint2(unsigned x, unsigned y) { return {x, y}; }

/* A GPU faults on a vector access its address is not aligned to; the host
 * would not, so the renderer's vector loads and stores check it here. */
static inline void cuemu_vec_aligned(const void *p, unsigned bytes)
{
    if ((uintptr_t)p % bytes) {
        fprintf(stderr, "cuemu: misaligned %u-byte vector access at %p\n", bytes, p);
        abort();
    }
}
#define LRC_VEC_ALIGNED(p, bytes) cuemu_vec_aligned(p, bytes)

static inline unsigned cuemu_tid(void) { return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z); }
static inline void __syncthreads(void) { cuemu_barrier(0); }

/* every lane of the warp offers v and takes thread other's */
template <class T> static inline T cuemu_shuffle(T v, unsigned other)
{
    static_assert(sizeof(T) <= 8, "a shuffle moves at most 8 bytes");
    const unsigned me = cuemu_tid();
    memcpy(&cuemu_lane_slot[me], &v, sizeof v);
    cuemu_barrier(1); /* every lane has written */
    T r = v;
    if (other < 1024) memcpy(&r, &cuemu_lane_slot[other], sizeof r);
    cuemu_barrier(1); /* every lane has read: the slots are free again */
    return r;
}
template <class T> static inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask)
{
    (void)mask;
    return cuemu_shuffle(v, cuemu_tid() ^ (unsigned)lane_mask);
}
/* the value of lane src of the caller's warp */
template <class T> static inline T __shfl_sync(unsigned mask, T v, int src)
{
    (void)mask;
    return cuemu_shuffle(v, (cuemu_tid() & ~31u) | ((unsigned)src & 31u));
}

static inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
static inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
static inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
static inline int __float_as_int(float f) { int i; memcpy(&i, &f, 4); return i; }
/* The SFU's approximations, to the bounds the CUDA C++ Programming Guide
 * gives (its tables of single-precision functions and intrinsics): __expf
 * within 2 + floor(|1.173 x|) ulp, __sincosf within 2^-21.41 absolute on
 * [-pi, pi] ("larger otherwise": taken as growing with |x| / pi), __logf
 * within 2^-21.41 absolute on [0.5, 2] and 3 ulp elsewhere, rsqrtf within
 * 2 ulp; the .ftz instructions behind them read and write subnormals as
 * zero. Each exact result moves by an amount inside its bound that a hash of
 * the input picks, so the f32 tolerances are measured with errors of the
 * hardware's size rather than against exact functions. (Macros: glibc
 * declares its own __expf, __logf and __sincosf.) */
static inline unsigned cuemu_mix(float x, unsigned salt)
{
    unsigned u = __float_as_uint(x) ^ salt;
    u ^= u >> 16, u *= 0x7feb352du, u ^= u >> 15, u *= 0x846ca68bu, u ^= u >> 16;
    return u;
}
static inline float cuemu_ftz(float x) { return fabsf(x) < 1.17549435e-38f ? copysignf(0.f, x) : x; }
/* y (positive, finite) rounded, then moved by k ulp, k in [1 - n, n - 1]:
 * within n ulp of y, the rounding's half included */
static inline float cuemu_ulps(double y, float x, unsigned n)
{
    float f = (float)y;
    if (!(f > 0) || isinf(f)) return f;
    long v = (long)__float_as_uint(f) + (long)(cuemu_mix(x, 0) % (2 * n - 1)) - (long)(n - 1);
    return __uint_as_float((unsigned)(v < 1 ? 1 : v > 0x7f7fffffL ? 0x7f7fffffL : v));
}
/* y moved by at most e, then rounded (half an ulp more: callers leave room) */
static inline float cuemu_within(double y, float x, unsigned salt, double e)
{
    return (float)(y + e * ((double)(cuemu_mix(x, salt) % 2001u) / 1000.0 - 1.0));
}
static inline float cuemu_expf(float x)
{
    x = cuemu_ftz(x);
    return cuemu_ftz(cuemu_ulps(exp((double)x), x, 2u + (unsigned)floorf(fabsf(1.173f * x))));
}
static inline float cuemu_logf(float x)
{
    x = cuemu_ftz(x);
    if (!(x > 0) || isinf(x)) return logf(x);
    if (x >= 0.5f && x <= 2.f) return cuemu_within(log((double)x), x, 1u, 2.9e-7); /* + 6e-8 rounding < 2^-21.41 */
    double y = log((double)x);
    return y > 0 ? cuemu_ulps(y, x, 3u) : -cuemu_ulps(-y, x, 3u);
}
static inline void cuemu_sincosf(float x, float *s, float *c)
{
    x = cuemu_ftz(x);
    const double e = 2.9e-7 * fmax(1.0, fabs((double)x) / 3.14159265358979); /* + 6e-8 rounding < 2^-21.41 */
    *s = cuemu_ftz(cuemu_within(sin((double)x), x, 2u, e));
    *c = cuemu_ftz(cuemu_within(cos((double)x), x, 3u, e));
}
#define __expf cuemu_expf
#define __logf cuemu_logf
#define __sincosf cuemu_sincosf
static inline float rsqrtf(float x)
{
    x = cuemu_ftz(x);
    if (!(x > 0) || isinf(x)) return 1.f / sqrtf(x);
    return cuemu_ulps(1.0 / sqrt((double)x), x, 2u);
}
/* Blocks run one after another and a block's threads are fibers that
 * switch only at barriers and shuffles: an atomic is a plain read and write,
 * and every write is seen by the blocks after it. */
static inline unsigned atomicAdd(unsigned *p, unsigned v) { const unsigned old = *p; *p = old + v; return old; }
static inline void __threadfence() {}
/* The round-to-nearest intrinsics NVRTC never fuses into an FMA (its default
 * --fmad=true may contract a plain a * b + c, rounding once; the host compile
 * here does not contract, so the emulator cannot show where it would). Out
 * of line, so that no host compiler fuses them either once inlined. */
__attribute__((noinline)) static float __fmul_rn(float a, float b) { return a * b; }
__attribute__((noinline)) static float __fadd_rn(float a, float b) { return a + b; }
__attribute__((noinline)) static float __fdiv_rn(float a, float b) { return a / b; }
__attribute__((noinline)) static float __fsqrt_rn(float a) { return sqrtf(a); }
template <class A, class B> static inline auto min(A a, B b) -> decltype(a + b) { return a < b ? a : b; }
template <class A, class B> static inline auto max(A a, B b) -> decltype(a + b) { return a > b ? a : b; }

/* mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 d, a, b, c: the
 * emulator's NVRTC rewrites the asm statement (cuemu_asm.c) into a call of
 * this model. Written from the PTX ISA ("Matrix Fragments for mma.m16n8k16
 * with floating point type"), with g = laneid >> 2, t = laneid % 4 and
 * element i of a fragment in the low (i even) or high half of register i / 2:
 * A (16x16, row): a_i at row g for i in {0, 1, 4, 5}, g + 8 otherwise;
 * column 2t + (i & 1), and 8 more for i >= 4. B (16x8, col): b_i at row
 * 2t + (i & 1), and 8 more for i >= 2; column g. C and D (16x8, f32): c_i
 * at row g for i < 2, g + 8 otherwise; column 2t + (i & 1). A warp-wide
 * operation, as a shuffle is: every lane scatters its fragments into its
 * warp's matrices by those formulas, the warp meets, and each lane sums its
 * four elements of D, f32 from its c, k = 0 to 15 in order (a product of
 * two bf16 is exact in f32; a tensor core's order of the adds is its own). */
extern "C" {
uint64_t cuemu_mma_count; /* warp operations, which the emulator reads out a launch */
}
static struct {
    float a[16][16], b[16][8];
} cuemu_mma_warp[32];
static unsigned cuemu_mma_seq[1024]; /* each lane's operations: all 32 of a warp's must take part */
static inline int cuemu_mma_a_row(int i, int g) { return i < 2 || (i >= 4 && i < 6) ? g : g + 8; }
static inline int cuemu_mma_a_col(int i, int t) { return t * 2 + (i & 1) + (i >= 4 ? 8 : 0); }
static inline int cuemu_mma_b_row(int i, int t) { return t * 2 + (i & 1) + (i >= 2 ? 8 : 0); }
static inline int cuemu_mma_c_row(int i, int g) { return i < 2 ? g : g + 8; }
static inline int cuemu_mma_c_col(int i, int t) { return t * 2 + (i & 1); }
/* element i of a fragment of .b32 registers, two bf16 each, low half first */
static inline float cuemu_bf16_elem(const unsigned *r, int i) { return __uint_as_float((r[i / 2] >> (i & 1) * 16 & 0xffffu) << 16); }
static inline void cuemu_mma_m16n8k16_row_col_f32_bf16_bf16_f32(float &d0, float &d1, float &d2, float &d3, unsigned a0, unsigned a1,
                                                                 unsigned a2, unsigned a3, unsigned b0, unsigned b1, float c0, float c1,
                                                                 float c2, float c3)
{
    const unsigned me = cuemu_tid(), lane = me & 31, g = lane >> 2, t = lane & 3;
    if (blockDim.x * blockDim.y * blockDim.z % 32) {
        fprintf(stderr, "cuemu: mma.sync in a block of %u threads, a partial warp\n", blockDim.x * blockDim.y * blockDim.z);
        abort();
    }
    const unsigned a[4] = {a0, a1, a2, a3}, b[2] = {b0, b1};
    const float c[4] = {c0, c1, c2, c3};
    auto &w = cuemu_mma_warp[me >> 5];
    for (int i = 0; i < 8; i++) w.a[cuemu_mma_a_row(i, g)][cuemu_mma_a_col(i, t)] = cuemu_bf16_elem(a, i);
    for (int i = 0; i < 4; i++) w.b[cuemu_mma_b_row(i, t)][g] = cuemu_bf16_elem(b, i);
    const unsigned seq = ++cuemu_mma_seq[me];
    cuemu_barrier(1); /* every lane has put its fragments in */
    for (unsigned l = me & ~31u; l <= (me | 31u); l++)
        if (cuemu_mma_seq[l] != seq) {
            fprintf(stderr, "cuemu: mma.sync: lane %u of warp %u is not at the same mma.sync as lane %u (a divergent or exited lane)\n", l & 31,
                    me >> 5, lane);
            abort();
        }
    float d[4];
    for (int i = 0; i < 4; i++) {
        const int row = cuemu_mma_c_row(i, g), col = cuemu_mma_c_col(i, t);
        float s = c[i];
        for (int k = 0; k < 16; k++) s = fmaf(w.a[row][k], w.b[k][col], s);
        d[i] = s;
    }
    if (lane == 0) cuemu_mma_count++;
    cuemu_barrier(1); /* every lane has read: the warp's matrices are free again */
    d0 = d[0], d1 = d[1], d2 = d[2], d3 = d[3];
}
