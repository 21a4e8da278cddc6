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
#define __expf expf /* glibc declares its own __expf: a macro, not a second one */
#define __logf logf
#define __sincosf sincosf /* glibc declares its own too */
static inline float rsqrtf(float x) { return 1.f / sqrtf(x); }
template <class A, class B> static inline auto min(A a, B b) -> decltype(a + b) { return a < b ? a : b; }
template <class A, class B> static inline auto max(A a, B b) -> decltype(a + b) { return a > b ? a : b; }
