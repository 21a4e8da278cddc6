/* test_cuemu.c — the emulator refuses what a GPU would refuse and shows
 * what a GPU would get wrong:
 * - its race check (LRC_CUEMU_ORDER=check, which every cuda ctest but the
 *   sanitized build's runs under) finds a race between the warps of a
 *   block (a shared-memory exchange missing its barrier) and one between
 *   blocks only (an in-place shift by a block): each gives different bytes
 *   under the schedules `first` and `last` and fails the launch under
 *   `check`, while the same kernels without the race pass under every
 *   schedule, as do a kernel working in place (run twice from the same
 *   memory: its values change once) and a sum through shuffles;
 * - a launch with more threads than the kernel's __launch_bounds__, or more
 *   registers than a multiprocessor has, fails, as the cubin says; a
 *   truncated or corrupt cubin is read without leaving it (the sanitized
 *   build instruments this test's own copy of the parser);
 * - a block finds 0x5A bytes in shared memory it did not write.
 * Linked to the emulator itself: it compiles its kernels with NVRTC
 * (through cuemu's pass-through), as lrc does. */
#include "cuemu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef unsigned long long devptr;
int nvrtcCreateProgram(void **p, const char *src, const char *name, int nh, const char *const *h, const char *const *hn);
int nvrtcCompileProgram(void *p, int n, const char *const *o);
int nvrtcGetProgramLogSize(void *p, size_t *n);
int nvrtcGetProgramLog(void *p, char *s);
int nvrtcGetCUBINSize(void *p, size_t *n);
int nvrtcGetCUBIN(void *p, char *out);
int nvrtcDestroyProgram(void **p);
int cuInit(unsigned flags);
int cuModuleLoadData(void **out, const void *image);
int cuModuleGetFunction(void **out, void *mod, const char *name);
int cuModuleUnload(void *mod);
int cuMemAlloc_v2(devptr *out, size_t n);
int cuMemFree_v2(devptr p);
int cuMemcpyHtoD_v2(devptr dst, const void *src, size_t n);
int cuMemcpyDtoH_v2(void *dst, devptr src, size_t n);
int cuLaunchKernel(void *fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned shared,
                   void *stream, void **params, void **extra);

enum { LAUNCH_OUT_OF_RESOURCES = 701, LAUNCH_FAILED = 719, N = 256 };

/* exchange: each thread of a 64-thread block takes the value of the thread
 * opposite (the other warp's) and writes it back doubled; without the
 * barrier between the read and the write, a warp may overwrite what the
 * other has yet to read. shift: x[i] = x[i + 32] in place, in blocks of 32,
 * reads what the next block may already have written (and nothing a thread
 * of its own block writes); into a second buffer it does not. twice: x[i]
 * doubled in place, no race: under check it must run from the memory as it
 * was, so the values double once. total: a sum through shuffles and shared
 * memory, which the schedules first and last must let through. bounded,
 * heavy: launch bounds and registers. stale: block 1 reads shared memory
 * only block 0 writes. */
static const char *source = "extern \"C\" __global__ void exchange_racy(float *out, const float *in)\n"
                            "{\n"
                            "    __shared__ float s[64];\n"
                            "    s[threadIdx.x] = in[threadIdx.x];\n"
                            "    __syncthreads();\n"
                            "    const float v = s[63 - threadIdx.x];\n"
                            "    s[threadIdx.x] = 2.f * v;\n"
                            "    __syncthreads();\n"
                            "    out[threadIdx.x] = s[threadIdx.x];\n"
                            "}\n"
                            "extern \"C\" __global__ void exchange(float *out, const float *in)\n"
                            "{\n"
                            "    __shared__ float s[64];\n"
                            "    s[threadIdx.x] = in[threadIdx.x];\n"
                            "    __syncthreads();\n"
                            "    const float v = s[63 - threadIdx.x];\n"
                            "    __syncthreads();\n"
                            "    s[threadIdx.x] = 2.f * v;\n"
                            "    __syncthreads();\n"
                            "    out[threadIdx.x] = s[threadIdx.x];\n"
                            "}\n"
                            "extern \"C\" __global__ void shift_racy(float *x)\n"
                            "{\n"
                            "    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                            "    if (i + 32 < 256) x[i] = x[i + 32];\n"
                            "}\n"
                            "extern \"C\" __global__ void shift(float *y, const float *x)\n"
                            "{\n"
                            "    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                            "    y[i] = i + 32 < 256 ? x[i + 32] : x[i];\n"
                            "}\n"
                            "extern \"C\" __global__ void twice(float *x)\n"
                            "{\n"
                            "    x[blockIdx.x * blockDim.x + threadIdx.x] *= 2.f;\n"
                            "}\n"
                            "extern \"C\" __global__ void total(float *y, const float *x)\n"
                            "{\n"
                            "    __shared__ float part[2];\n"
                            "    float v = x[threadIdx.x];\n"
                            "    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);\n"
                            "    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = v;\n"
                            "    __syncthreads();\n"
                            "    if (threadIdx.x == 0) y[0] = part[0] + part[1];\n"
                            "}\n"
                            "extern \"C\" __global__ void __launch_bounds__(64) bounded(float *y, const float *x)\n"
                            "{\n"
                            "    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                            "    y[i] = x[i];\n"
                            "}\n"
                            "extern \"C\" __global__ void heavy(float *y, const float *x)\n"
                            "{\n"
                            "    float v[96], s = 0.f;\n"
                            "#pragma unroll\n"
                            "    for (int k = 0; k < 96; k++) v[k] = x[(threadIdx.x + 7 * k) % 256];\n"
                            "#pragma unroll\n"
                            "    for (int k = 0; k < 96; k++) s += v[k] * v[95 - k] + v[(k + 1) % 96];\n"
                            "    if (threadIdx.x < 256) y[threadIdx.x] = s;\n"
                            "}\n"
                            "extern \"C\" __global__ void stale(float *y, const float *x)\n"
                            "{\n"
                            "    __shared__ float s[32];\n"
                            "    if (blockIdx.x == 0) s[threadIdx.x] = x[threadIdx.x];\n"
                            "    __syncthreads();\n"
                            "    y[blockIdx.x * 32 + threadIdx.x] = s[threadIdx.x];\n"
                            "}\n";

static int failed;
static void *mod;
static devptr d_in, d_out;
static float in[N];

static void check(int ok, const char *what)
{
    printf("%s: %s\n", ok ? "ok" : "FAIL", what);
    failed |= !ok;
}

/* one launch of kernel name under schedule order (NULL: the default) on
 * grid blocks of block threads, from the input: (out, in) its arguments, or
 * in alone (in place); what it leaves in the written buffer in out; the
 * launch's status */
static int launch(const char *name, const char *order, unsigned grid, unsigned block, int in_place, float *out)
{
    void *fn;
    if (cuModuleGetFunction(&fn, mod, name)) {
        fprintf(stderr, "no kernel %s\n", name);
        exit(1);
    }
    if (order) setenv("LRC_CUEMU_ORDER", order, 1);
    else unsetenv("LRC_CUEMU_ORDER");
    static const float zeros[N] = {0};
    if (cuMemcpyHtoD_v2(d_in, in, sizeof in) || cuMemcpyHtoD_v2(d_out, zeros, sizeof zeros)) exit(1);
    void *args[2] = {in_place ? (void *)&d_in : (void *)&d_out, &d_in};
    const int r = cuLaunchKernel(fn, grid, 1, 1, block, 1, 1, 0, NULL, args, NULL);
    if (cuMemcpyDtoH_v2(out, in_place ? d_in : d_out, sizeof in)) exit(1);
    return r;
}

int main(void)
{
    void *prog;
    size_t n;
    const char *opts[] = {"--gpu-architecture=sm_90"};
    if (cuInit(0) || nvrtcCreateProgram(&prog, source, "race.cu", 0, NULL, NULL)) return 1;
    if (nvrtcCompileProgram(prog, 1, opts)) {
        char log[8192] = "";
        if (!nvrtcGetProgramLogSize(prog, &n) && n < sizeof log) nvrtcGetProgramLog(prog, log);
        fprintf(stderr, "nvrtc: %s\n", log);
        return 1;
    }
    char *cubin;
    if (nvrtcGetCUBINSize(prog, &n) || !(cubin = malloc(n)) || nvrtcGetCUBIN(prog, cubin) || cuModuleLoadData(&mod, cubin)) return 1;
    cuemu_resources bounded, exchange;
    check(!cuemu_cubin_resources(cubin, n, "bounded", &bounded) && bounded.max_threads == 64 && bounded.regs >= 4 && bounded.regs <= 255 &&
              !bounded.shared,
          "the cubin: bounded has __launch_bounds__(64), a plausible register count and no shared memory");
    /* sm_90's section holds the kernel's 256 bytes and the 1 KiB a block's system part takes */
    check(!cuemu_cubin_resources(cubin, n, "exchange", &exchange) && !exchange.max_threads && exchange.shared >= 64 * sizeof(float) &&
              exchange.shared <= 64 * sizeof(float) + 1024,
          "the cubin: exchange has no bounds and its 256 bytes of shared memory");
    cuemu_resources heavy;
    check(!cuemu_cubin_resources(cubin, n, "heavy", &heavy) && heavy.regs > 96 && heavy.regs <= 128,
          "the cubin: heavy needs 97 to 128 registers a thread");
    /* a truncated or corrupt image: parsed without reading outside it (the
     * sanitized build's test would see it), sized only when it is whole */
    int whole = 1;
    for (size_t len = 0; len < n; len++) {
        cuemu_resources r;
        whole &= cuemu_cubin_resources(cubin, len, "bounded", &r) != 0 || (r.max_threads == 64 && r.regs == bounded.regs);
    }
    unsigned char *bad = malloc(n);
    unsigned seed = 1;
    for (int trial = 0; trial < 3000 && bad; trial++) {
        memcpy(bad, cubin, n);
        for (int k = 0; k < 6; k++) {
            seed = seed * 1103515245u + 12345u;
            const size_t at = trial % 3 ? (seed >> 8) % 64 : (seed >> 8) % n; /* the header most, anywhere else too */
            seed = seed * 1103515245u + 12345u;
            bad[at] = (unsigned char)(seed >> 16);
        }
        cuemu_resources r;
        (void)cuemu_cubin_resources(bad, n, "bounded", &r);
    }
    free(bad);
    check(whole, "a truncated cubin: refused or read right, never read past its end; 3000 corrupt ones read inside them");
    printf("   (heavy: %u registers; ", heavy.regs);
    printf("bounded: %u registers; exchange: %u registers, bounds %u, %zu bytes shared)\n", bounded.regs, exchange.regs, exchange.max_threads, exchange.shared);
    free(cubin);
    nvrtcDestroyProgram(&prog);
    if (cuMemAlloc_v2(&d_in, sizeof in) || cuMemAlloc_v2(&d_out, sizeof in)) return 1;
    for (int i = 0; i < N; i++) in[i] = (float)(i + 1);

    float a[N], b[N], want[N];
    static const char *const orders[] = {NULL, "lockstep", "first", "last", "check"};
    char what[160];
    for (int i = 0; i < 64; i++) want[i] = 2.f * in[63 - i];
    for (int k = 0; k < 5; k++) {
        snprintf(what, sizeof what, "exchange with its barrier, schedule %s: each value the opposite thread's doubled",
                 orders[k] ? orders[k] : "(default)");
        check(launch("exchange", orders[k], 1, 64, 0, a) == 0 && !memcmp(a, want, 64 * sizeof *a), what);
    }
    check(!launch("exchange_racy", "first", 1, 64, 0, a) && !launch("exchange_racy", "last", 1, 64, 0, b) && memcmp(a, b, 64 * sizeof *a),
          "exchange without it (a race between warps): the schedules first and last give different values");
    check(launch("exchange_racy", "check", 1, 64, 0, a) == LAUNCH_FAILED, "exchange without it: the check fails the launch");

    for (int i = 0; i < N; i++) want[i] = in[i + 32 < N ? i + 32 : i];
    for (int k = 0; k < 5; k++) {
        snprintf(what, sizeof what, "shift into another buffer, schedule %s: each value the one 32 on's",
                 orders[k] ? orders[k] : "(default)");
        check(launch("shift", orders[k], N / 32, 32, 0, a) == 0 && !memcmp(a, want, sizeof a), what);
    }
    check(!launch("shift_racy", "first", N / 32, 32, 1, a) && !launch("shift_racy", "last", N / 32, 32, 1, b) && memcmp(a, b, sizeof a),
          "shift in place (a race between blocks only): the schedules first and last give different values");
    check(launch("shift_racy", "check", N / 32, 32, 1, a) == LAUNCH_FAILED, "shift in place: the check fails the launch");
    check(launch("shift", "sideways", N / 32, 32, 0, a) == 1, "an unknown LRC_CUEMU_ORDER: the launch refused");

    for (int i = 0; i < N; i++) want[i] = 2.f * in[i];
    check(launch("twice", "check", N / 32, 32, 1, a) == 0 && !memcmp(a, want, sizeof a),
          "twice in place under check: each value doubled once (the second schedule starts from the memory as it was)");
    for (int k = 0; k < 5; k++) {
        snprintf(what, sizeof what, "total through shuffles and shared memory, schedule %s: 2080", orders[k] ? orders[k] : "(default)");
        check(launch("total", orders[k], 1, 64, 0, a) == 0 && a[0] == 2080.f, what);
    }

    check(launch("bounded", NULL, N / 64, 64, 0, a) == 0 && !memcmp(a, in, sizeof a), "bounded, 64 threads a block: launched, the values copied");
    check(launch("bounded", NULL, N / 128, 128, 0, a) == LAUNCH_OUT_OF_RESOURCES,
          "bounded, 128 threads a block: refused, past its __launch_bounds__");
    /* heavy's 97 to 128 registers a thread: 16 warps fit the 65536, 18 do
     * not, counted as the hardware does (warps rounded up to 4) */
    check(launch("heavy", NULL, 1, 512, 0, a) == 0, "heavy, 512 threads a block: launched");
    check(launch("heavy", NULL, 1, 576, 0, a) == LAUNCH_OUT_OF_RESOURCES,
          "heavy, 576 threads a block (18 warps, counted as 20): refused, more registers than the 65536 of a multiprocessor");

    /* shared memory a block did not write holds 0x5A bytes, not what the
     * block before left (nor zeros) */
    unsigned char filled[32 * sizeof(float)];
    memset(filled, 0x5A, sizeof filled);
    check(launch("stale", NULL, 2, 32, 0, a) == 0 && !memcmp(a, in, 32 * sizeof *a) && !memcmp(a + 32, filled, sizeof filled) && a[64] == 0.f,
          "stale: block 1 reads the shared memory block 0 wrote, and finds 0x5A bytes (1.5e16)");
    cuMemFree_v2(d_in), cuMemFree_v2(d_out), cuModuleUnload(mod);
    return failed;
}
