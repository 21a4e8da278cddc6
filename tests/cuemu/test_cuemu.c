/* test_cuemu.c — the emulator refuses what a GPU would refuse and shows
 * what a GPU would get wrong:
 * - its race check (LRC_CUEMU_ORDER=check, which every cuda ctest but the
 *   sanitized build's runs under) finds a race between the warps of a
 *   block (a shared-memory exchange missing its barrier) and one between
 *   blocks (an in-place shift): each gives different bytes under the
 *   schedules `first` and `last` and fails the launch under `check`, while
 *   the same kernels without the race pass under every schedule;
 * - a launch with more threads than the kernel's __launch_bounds__, or more
 *   registers than a multiprocessor has, fails, as the cubin says;
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
 * other has yet to read. shift: x[i] = x[i + 1] in place reads what another
 * block may already have written; into a second buffer it does not. */
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
                            "    if (i + 1 < 256) x[i] = x[i + 1];\n"
                            "}\n"
                            "extern \"C\" __global__ void shift(float *y, const float *x)\n"
                            "{\n"
                            "    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                            "    y[i] = i + 1 < 256 ? x[i + 1] : x[i];\n"
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
                            "    y[threadIdx.x] = s;\n"
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

/* one launch of kernel name under schedule order (NULL: the default) from
 * the input, its result in out; the launch's status */
static unsigned threads = 64; /* a block of bounded */
static int launch(const char *name, const char *order, float *out)
{
    void *fn;
    if (cuModuleGetFunction(&fn, mod, name)) {
        fprintf(stderr, "no kernel %s\n", name);
        exit(1);
    }
    if (order) setenv("LRC_CUEMU_ORDER", order, 1);
    else unsetenv("LRC_CUEMU_ORDER");
    const int exchange = !strncmp(name, "exchange", 8), racy_shift = !strcmp(name, "shift_racy");
    const unsigned block = exchange ? 64 : !strcmp(name, "bounded") || !strcmp(name, "heavy") ? threads : 32;
    const unsigned grid = !strcmp(name, "stale") ? 2 : exchange || block >= N ? 1 : N / block;
    static const float poison[N] = {0};
    if (cuMemcpyHtoD_v2(d_in, in, sizeof in) || cuMemcpyHtoD_v2(d_out, poison, sizeof poison)) exit(1);
    void *args[2] = {racy_shift ? (void *)&d_in : (void *)&d_out, &d_in};
    const int r = cuLaunchKernel(fn, grid, 1, 1, block, 1, 1, 0, NULL, args, NULL);
    if (cuMemcpyDtoH_v2(out, racy_shift ? d_in : d_out, sizeof in)) exit(1);
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
    check(!cuemu_cubin_resources(cubin, n, "heavy", &heavy) && heavy.regs > 64 && heavy.regs <= 128,
          "the cubin: heavy needs more than 64 registers a thread (at most 128)");
    printf("   (heavy: %u registers; ", heavy.regs);
    printf("bounded: %u registers; exchange: %u registers, bounds %u, %zu bytes shared)\n", bounded.regs, exchange.regs, exchange.max_threads, exchange.shared);
    free(cubin);
    nvrtcDestroyProgram(&prog);
    if (cuMemAlloc_v2(&d_in, sizeof in) || cuMemAlloc_v2(&d_out, sizeof in)) return 1;
    for (int i = 0; i < N; i++) in[i] = (float)(i + 1);

    float a[N], b[N], want[N];
    for (int i = 0; i < 64; i++) want[i] = 2.f * in[63 - i];
    static const char *const orders[] = {NULL, "lockstep", "first", "last", "check"};
    for (int k = 0; k < 5; k++) {
        char what[160];
        snprintf(what, sizeof what, "exchange with its barrier, schedule %s: each value the opposite thread's doubled",
                 orders[k] ? orders[k] : "(default)");
        check(launch("exchange", orders[k], a) == 0 && !memcmp(a, want, 64 * sizeof *a), what);
    }
    check(!launch("exchange_racy", "first", a) && !launch("exchange_racy", "last", b) && memcmp(a, b, 64 * sizeof *a),
          "exchange without it: the schedules first and last give different values");
    check(launch("exchange_racy", "check", a) == LAUNCH_FAILED, "exchange without it: the check fails the launch");

    for (int i = 0; i < N; i++) want[i] = in[i + 1 < N ? i + 1 : i];
    for (int k = 0; k < 5; k++) {
        char what[160];
        snprintf(what, sizeof what, "shift into another buffer, schedule %s: each value its successor's",
                 orders[k] ? orders[k] : "(default)");
        check(launch("shift", orders[k], a) == 0 && !memcmp(a, want, sizeof a), what);
    }
    check(!launch("shift_racy", "first", a) && !launch("shift_racy", "last", b) && memcmp(a, b, sizeof a),
          "shift in place: the schedules first and last give different values");
    check(launch("shift_racy", "check", a) == LAUNCH_FAILED, "shift in place: the check fails the launch");
    check(launch("shift", "sideways", a) == 1, "an unknown LRC_CUEMU_ORDER: the launch refused");

    check(launch("bounded", NULL, a) == 0 && !memcmp(a, in, sizeof a), "bounded, 64 threads a block: launched, the values copied");
    threads = 128;
    check(launch("bounded", NULL, a) == LAUNCH_OUT_OF_RESOURCES, "bounded, 128 threads a block: refused, past its __launch_bounds__");
    threads = 256;
    check(launch("heavy", NULL, a) == 0, "heavy, 256 threads a block: launched");
    threads = 1024;
    check(launch("heavy", NULL, a) == LAUNCH_OUT_OF_RESOURCES,
          "heavy, 1024 threads a block: refused, more registers than the 65536 of a multiprocessor");

    /* shared memory a block did not write holds 0x5A bytes, not what the
     * block before left (nor zeros) */
    unsigned char filled[32 * sizeof(float)];
    memset(filled, 0x5A, sizeof filled);
    check(launch("stale", NULL, a) == 0 && !memcmp(a, in, 32 * sizeof *a) && !memcmp(a + 32, filled, sizeof filled) && a[64] == 0.f,
          "stale: block 1 reads the shared memory block 0 wrote, and finds 0x5A bytes (1.5e16)");
    cuMemFree_v2(d_in), cuMemFree_v2(d_out), cuModuleUnload(mod);
    return failed;
}
