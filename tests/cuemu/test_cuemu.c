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
 * - a block finds 0x5A bytes in shared memory it did not write;
 * - inline PTX: a module is compiled for the host with __CUDA_ARCH__ the
 *   architecture NVRTC compiled it for (750 for sm_75; LRC_CUEMU_SM's when
 *   no option says); mma.sync m16n8k16 bf16 (the asm statement, rewritten
 *   into the emulator's model) gives A B + C exactly on integer matrices,
 *   and the same fragments with every lane's a[0] and a[1] exchanged (rows
 *   g and g + 8 of A's first 8 columns) give that swapped product, not the
 *   right one; an asm statement the emulator has no model of fails the
 *   module's load, naming the instruction.
 * - __expf, __sincosf, rsqrtf and __logf err within the Programming
 *   Guide's bounds, as the hardware's approximations may, and flush
 *   subnormals to zero.
 * Linked to the emulator itself: it compiles its kernels with NVRTC
 * (through cuemu's pass-through), as lrc does. */
#include "cuemu.h"

#include <fcntl.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef unsigned long long devptr;
int nvrtcCreateProgram(void **p, const char *src, const char *name, int nh, const char *const *h, const char *const *hn);
int nvrtcCompileProgram(void *p, int n, const char *const *o);
int nvrtcGetProgramLogSize(void *p, size_t *n);
int nvrtcGetProgramLog(void *p, char *s);
int nvrtcGetCUBINSize(void *p, size_t *n);
int nvrtcGetCUBIN(void *p, char *out);
int nvrtcGetPTXSize(void *p, size_t *n);
int nvrtcGetPTX(void *p, char *out);
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

enum { INVALID_VALUE = 1, INVALID_IMAGE = 200, LAUNCH_OUT_OF_RESOURCES = 701, LAUNCH_FAILED = 719, N = 256 };

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

/* mma: one m16n8k16 tile, D = A B + C, its fragments loaded as the PTX ISA
 * lays them out (g = lane >> 2, t = lane % 4; register r of A holds row g
 * or, r odd, g + 8, columns 2t and 2t + 1, 8 more for r >= 2; register r of
 * B rows 2t and 2t + 1, 8 more for r = 1, column g; c_i row g or, i >= 2,
 * g + 8, column 2t + (i & 1)), with every lane's a[0] and a[1] exchanged
 * when *swap. arch: the __CUDA_ARCH__ it was compiled with. other_asm: an
 * instruction the emulator has no model of. */
static const char *mma_source =
    "extern \"C\" __global__ void mma(float *d, const unsigned short *a, const unsigned short *b, const float *c, const int *swap)\n"
    "{\n"
    "    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;\n"
    "    unsigned ra[4], rb[2];\n"
    "    float acc[4];\n"
    "    for (int r = 0; r < 4; r++) {\n"
    "        const int i = (g + (r & 1) * 8) * 16 + 2 * t + (r >> 1) * 8;\n"
    "        ra[r] = a[i] | (unsigned)a[i + 1] << 16;\n"
    "    }\n"
    "    for (int r = 0; r < 2; r++) rb[r] = b[(2 * t + r * 8) * 8 + g] | (unsigned)b[(2 * t + r * 8 + 1) * 8 + g] << 16;\n"
    "    for (int i = 0; i < 4; i++) acc[i] = c[(g + (i >> 1) * 8) * 8 + 2 * t + (i & 1)];\n"
    "    if (*swap) {\n"
    "        const unsigned x = ra[0];\n"
    "        ra[0] = ra[1], ra[1] = x;\n"
    "    }\n"
    "    asm volatile(\"mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\\n\"\n"
    "                 : \"+f\"(acc[0]), \"+f\"(acc[1]), \"+f\"(acc[2]), \"+f\"(acc[3])\n"
    "                 : \"r\"(ra[0]), \"r\"(ra[1]), \"r\"(ra[2]), \"r\"(ra[3]), \"r\"(rb[0]), \"r\"(rb[1]));\n"
    "    for (int i = 0; i < 4; i++) d[(g + (i >> 1) * 8) * 8 + 2 * t + (i & 1)] = acc[i];\n"
    "}\n";
static const char *arch_source = "extern \"C\" __global__ void arch(int *out) { out[threadIdx.x] = __CUDA_ARCH__; }\n";
static const char *other_asm_source = "extern \"C\" __global__ void other(float *y, const float *x)\n"
                                      "{\n"
                                      "    float v;\n"
                                      "    asm(\"add.f32 %0, %1, %2;\" : \"=f\"(v) : \"f\"(x[0]), \"f\"(x[1]));\n"
                                      "    y[0] = v;\n"
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

/* source compiled by NVRTC for arch (NULL: no option; PTX then, and for a
 * compute_XX, else a cubin) and loaded: the load's status, the module into *out */
static int load(const char *src, const char *arch, void **out)
{
    void *prog;
    size_t n;
    char opt[64], *image;
    snprintf(opt, sizeof opt, "--gpu-architecture=%s", arch ? arch : "");
    const char *opts[] = {opt};
    if (nvrtcCreateProgram(&prog, src, "test.cu", 0, NULL, NULL)) exit(1);
    if (nvrtcCompileProgram(prog, arch ? 1 : 0, opts)) {
        char log[8192] = "";
        if (!nvrtcGetProgramLogSize(prog, &n) && n < sizeof log) nvrtcGetProgramLog(prog, log);
        fprintf(stderr, "nvrtc: %s\n", log);
        exit(1);
    }
    /* a virtual architecture (compute_XX) has PTX alone: its "cubin" is an
     * empty buffer NVRTC writes nothing into */
    const bool cubin = arch && strncmp(arch, "compute_", 8);
    if ((cubin ? nvrtcGetCUBINSize(prog, &n) : nvrtcGetPTXSize(prog, &n)) || !(image = malloc(n)) ||
        (cubin ? nvrtcGetCUBIN(prog, image) : nvrtcGetPTX(prog, image)))
        exit(1);
    const int r = cuModuleLoadData(out, image);
    free(image);
    nvrtcDestroyProgram(&prog);
    return r;
}

/* bf16 of a small integer: the top half of its float, exact */
static unsigned short bf16_of(float v)
{
    unsigned u;
    memcpy(&u, &v, 4);
    return (unsigned short)(u >> 16);
}

/* mma on A, B, C of small integers (every sum exact in f32), against the
 * host's A B + C, then with the rows exchanged */
/* the SFU's approximations, x = in[i], y = x * 0.031 (within [-pi, pi]) */
static const char *sfu_source = "extern \"C\" __global__ void sfu(float *out, const float *in)\n"
                                "{\n"
                                "    const int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                                "    const float x = in[i], y = x * 0.031f, z = fabsf(x) * 0.05f + 0.01f;\n"
                                "    float s, c;\n"
                                "    __sincosf(y, &s, &c);\n"
                                "    out[5 * i] = __expf(x), out[5 * i + 1] = s, out[5 * i + 2] = c;\n"
                                "    out[5 * i + 3] = rsqrtf(z), out[5 * i + 4] = __logf(z);\n"
                                "}\n";

/* |got - want| in units of the float ulp at want */
static double ulps(float got, double want)
{
    const float w = (float)want;
    const double ulp = (double)nextafterf(fabsf(w), INFINITY) - fabs((double)w);
    return fabs((double)got - want) / ulp;
}

/* The emulator's __expf, __sincosf, rsqrtf and __logf err as the hardware's
 * may, within the Programming Guide's bounds, and flush subnormals: each
 * differs from the exact function somewhere, none outside its bound, and
 * __expf(-100) (3.7e-44, a subnormal) is 0. */
static void check_sfu(void)
{
    enum { M = 512 };
    void *m, *fn;
    static float x[M], out[5 * M];
    for (int i = 0; i < M; i++) x[i] = -100.f + 0.2f * (float)i;
    devptr din, dout;
    if (load(sfu_source, "sm_90", &m) || cuModuleGetFunction(&fn, m, "sfu") || cuMemAlloc_v2(&din, sizeof x) ||
        cuMemAlloc_v2(&dout, sizeof out) || cuMemcpyHtoD_v2(din, x, sizeof x))
        exit(1);
    void *args[2] = {&dout, &din};
    if (cuLaunchKernel(fn, M / 64, 1, 1, 64, 1, 1, 0, NULL, args, NULL) || cuMemcpyDtoH_v2(out, dout, sizeof out)) exit(1);
    int inexact[4] = {0}, outside[4] = {0};
    double worst[4] = {0};
    for (int i = 0; i < M; i++) {
        const float y = x[i] * 0.031f, z = fabsf(x[i]) * 0.05f + 0.01f;
        const double e = exp((double)x[i]), bound = 2 + floor(fabs(1.173 * x[i]));
        const double err[4] = {e < 1.17549435e-38 ? (out[5 * i] == 0.f ? 0 : INFINITY) : ulps(out[5 * i], e) / bound,
                               fmax(fabs(out[5 * i + 1] - sin((double)y)), fabs(out[5 * i + 2] - cos((double)y))) / 3.58e-7,
                               ulps(out[5 * i + 3], 1.0 / sqrt((double)z)) / 2.0,
                               z >= 0.5f && z <= 2.f ? fabs(out[5 * i + 4] - log((double)z)) / 3.58e-7 : ulps(out[5 * i + 4], log((double)z)) / 3.0};
        const float exact[4] = {expf(x[i]), sinf(y), 1.f / sqrtf(z), logf(z)};
        const float got[4] = {out[5 * i], out[5 * i + 1], out[5 * i + 3], out[5 * i + 4]};
        for (int f = 0; f < 4; f++) {
            inexact[f] += got[f] != exact[f];
            outside[f] += !(err[f] <= 1.0);
            worst[f] = fmax(worst[f], err[f]);
        }
    }
    char what[256];
    static const char *const names[4] = {"__expf (2 + |1.173 x| ulp)", "__sincosf (2^-21.41 on [-pi, pi])", "rsqrtf (2 ulp)",
                                          "__logf (2^-21.41 on [0.5, 2], else 3 ulp)"};
    for (int f = 0; f < 4; f++) {
        snprintf(what, sizeof what, "%s: %d of %d inputs differ from the exact function, %d outside the bound (worst %.2f of it)", names[f],
                 inexact[f], M, outside[f], worst[f]);
        check(inexact[f] > M / 4 && !outside[f], what);
    }
    check(out[0] == 0.f, "__expf(-100), 3.7e-44: flushed to 0 as ex2.approx.ftz does");
    cuMemFree_v2(din), cuMemFree_v2(dout), cuModuleUnload(m);
}

static void check_mma(void)
{
    void *m, *fn;
    if (load(mma_source, "sm_90", &m) || cuModuleGetFunction(&fn, m, "mma")) exit(1);
    float a[16][16], b[16][8], c[16][8], d[16][8], want[16][8], swapped[16][8];
    unsigned short a16[256], b16[128];
    for (int r = 0; r < 16; r++)
        for (int k = 0; k < 16; k++) a[r][k] = (float)((r * 7 + k * 3) % 11 - 5), a16[r * 16 + k] = bf16_of(a[r][k]);
    for (int k = 0; k < 16; k++)
        for (int n = 0; n < 8; n++) b[k][n] = (float)((k * 5 + n * 3 + k * n) % 9 - 4), b16[k * 8 + n] = bf16_of(b[k][n]);
    for (int r = 0; r < 16; r++)
        for (int n = 0; n < 8; n++) {
            c[r][n] = (float)(r * 8 - n * 3);
            want[r][n] = swapped[r][n] = c[r][n];
            for (int k = 0; k < 16; k++) {
                want[r][n] += a[r][k] * b[k][n];
                swapped[r][n] += a[k < 8 ? r ^ 8 : r][k] * b[k][n]; /* rows g and g + 8 of columns 0 to 7 exchanged */
            }
        }
    devptr dd, da, db, dc, ds;
    if (cuMemAlloc_v2(&dd, sizeof d) || cuMemAlloc_v2(&da, sizeof a16) || cuMemAlloc_v2(&db, sizeof b16) || cuMemAlloc_v2(&dc, sizeof c) ||
        cuMemAlloc_v2(&ds, sizeof(int)) || cuMemcpyHtoD_v2(da, a16, sizeof a16) || cuMemcpyHtoD_v2(db, b16, sizeof b16) ||
        cuMemcpyHtoD_v2(dc, c, sizeof c))
        exit(1);
    void *args[5] = {&dd, &da, &db, &dc, &ds};
    static const char *const orders[] = {"lockstep", "first", "last", "check"};
    for (int swap = 0; swap < 2; swap++)
        for (int k = 0; k < 4; k++) {
            setenv("LRC_CUEMU_ORDER", orders[k], 1);
            memset(d, 0, sizeof d);
            if (cuMemcpyHtoD_v2(ds, &swap, sizeof swap) || cuMemcpyHtoD_v2(dd, d, sizeof d)) exit(1);
            const int r = cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, NULL, args, NULL);
            if (cuMemcpyDtoH_v2(d, dd, sizeof d)) exit(1);
            int right = 0, as_swapped = 0;
            for (int i = 0; i < 16; i++)
                for (int n = 0; n < 8; n++) right += d[i][n] == want[i][n], as_swapped += d[i][n] == swapped[i][n];
            char what[200];
            snprintf(what, sizeof what, "mma.sync m16n8k16 bf16, schedule %s%s: %d of 128 elements of D are A B + C, %d the swapped product", orders[k],
                     swap ? ", every lane's a[0] and a[1] exchanged" : "", right, as_swapped);
            /* the exchange changes D but for 8 elements, where the two rows' products happen to agree */
            check(!r && (swap ? as_swapped == 128 && right < 128 : right == 128), what);
        }
    unsetenv("LRC_CUEMU_ORDER");
    cuMemFree_v2(dd), cuMemFree_v2(da), cuMemFree_v2(db), cuMemFree_v2(dc), cuMemFree_v2(ds), cuModuleUnload(m);
}

/* __CUDA_ARCH__ of a module compiled for arch (NULL: none said), run on the emulator; 0 when it did not run */
static int arch_of(const char *arch)
{
    void *m, *fn;
    devptr out;
    int v = 0;
    if (load(arch_source, arch, &m) || cuModuleGetFunction(&fn, m, "arch") || cuMemAlloc_v2(&out, sizeof v)) return 0;
    void *args[1] = {&out};
    if (cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL) || cuMemcpyDtoH_v2(&v, out, sizeof v)) v = 0;
    cuMemFree_v2(out), cuModuleUnload(m);
    return v;
}

/* inline PTX with no model: the load fails and says which instruction */
static void check_other_asm(void)
{
    char path[] = "/tmp/test_cuemu_XXXXXX", said[4096] = "";
    const int fd = mkstemp(path), saved = dup(2);
    void *m;
    fflush(stderr);
    dup2(fd, 2);
    const int r = load(other_asm_source, "sm_90", &m);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    if (pread(fd, said, sizeof said - 1, 0) < 0) said[0] = 0;
    close(fd);
    remove(path);
    fprintf(stderr, "%s", said);
    check(r == INVALID_IMAGE && strstr(said, "no model of the inline PTX \"add.f32 %0, %1, %2;\""),
          "an asm statement the emulator has no model of (add.f32): the module does not load, and the message names it");
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
    {   /* grid y and z take 65 535 blocks at most, as on the hardware */
        void *fn, *args[2] = {&d_out, &d_in};
        check(!cuModuleGetFunction(&fn, mod, "bounded") && cuLaunchKernel(fn, 1, 65536, 1, 64, 1, 1, 0, NULL, args, NULL) == INVALID_VALUE &&
                  cuLaunchKernel(fn, 1, 1, 65536, 64, 1, 1, 0, NULL, args, NULL) == INVALID_VALUE &&
                  cuLaunchKernel(fn, 1, 1, 1, 64, 1, 1, 0, NULL, args, NULL) == 0,
              "a grid of 65536 blocks on y or on z: refused (one block launched)");
    }
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

    check(arch_of("sm_90") == 900, "a module compiled for sm_90: __CUDA_ARCH__ 900");
    check(arch_of("sm_75") == 750, "a module compiled for sm_75: __CUDA_ARCH__ 750 (lrc's mma_bf16 takes its shuffles there)");
    check(arch_of("compute_80") == 800, "a module compiled for compute_80 (PTX): __CUDA_ARCH__ 800");
    setenv("LRC_CUEMU_SM", "86", 1);
    check(arch_of(NULL) == 860, "a module whose compile names no architecture: LRC_CUEMU_SM's (86: 860)");
    unsetenv("LRC_CUEMU_SM");
    check_mma();
    check_sfu();
    check_other_asm();
    return failed;
}
