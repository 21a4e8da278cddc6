/* cuemu.c — the CUDA driver API as the cuda executor (runtime/cuda_exec.c)
 * and probe call it, run on the host: device memory is host memory with a
 * guard region after every allocation, a module is the kernels' CUDA C
 * (registered by the NVRTC pass-through, cuemu_nvrtc.c) compiled by the
 * host's C++ compiler with prelude.h, and a launch runs every block in turn,
 * each CUDA thread a fiber that yields at barriers, shuffles and mma.sync
 * (the source compiled with __CUDA_ARCH__ as NVRTC was asked for, its asm
 * statements rewritten into prelude.h's models: cuemu_asm.c). It lets CI
 * run every rendered kernel and the executor without a GPU; it says nothing
 * about speed, and bf16 tensor-core rounding differs from a real GPU's.
 *
 * Environment: LRC_CUEMU_DIR (sources and compiled modules, default
 * /tmp/lrc-cuemu-UID), LRC_CUEMU_SM (compute capability, default 90),
 * LRC_CUEMU_MEMORY (device memory in bytes, default 16 GiB), LRC_CUEMU_ORDER
 * (the schedule; below). A GPU keeps no order between blocks, nor between
 * the warps of a block between two __syncthreads: a kernel whose result
 * depends on it (a warp reading shared memory another writes with no
 * barrier between, a block reading another's output) races. The schedules
 * `first` (lowest block, warp and thread first, each warp as far as it can
 * go before the next starts) and `last` (the same from the highest) put
 * every two accesses of different warps or blocks in opposite orders, so
 * such a kernel gives other bytes under the two, which the tests compare
 * (`check`). Neither interleaves two warps or blocks: a race whose two
 * orders give the same bytes (two blocks each adding to one value, which a
 * GPU may lose an update of) passes. `lockstep`, the default, runs every
 * thread of a block to its next barrier or shuffle before any goes on. */
#define _GNU_SOURCE
#include "cuemu.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

typedef unsigned long long devptr;
enum {
    OK = 0,
    INVALID_VALUE = 1,
    OUT_OF_MEMORY = 2,
    INVALID_IMAGE = 200,
    NOT_FOUND = 500,
    ILLEGAL_ADDRESS = 700,
    LAUNCH_OUT_OF_RESOURCES = 701,
    LAUNCH_FAILED = 719,
    NOT_SUPPORTED = 801
};

#define GUARD 256
#define GUARD_BYTE 0xA5

/* ---- memory ------------------------------------------------------------- */

typedef struct alloc {
    unsigned char *p;
    size_t n;
    struct alloc *next;
} alloc;
static alloc *allocs;
static size_t in_use, peak;

/* LRC_CUEMU_PEAK=FILE: the most device memory the process held at once,
 * written at its exit, so a test can give a run just less than that */
__attribute__((destructor)) static void write_peak(void)
{
    const char *path = getenv("LRC_CUEMU_PEAK");
    FILE *f = path && *path && peak ? fopen(path, "w") : NULL; /* a process that never allocated leaves it alone */
    if (f) fprintf(f, "%zu\n", peak), fclose(f);
}

static size_t device_memory(void)
{
    const char *s = getenv("LRC_CUEMU_MEMORY");
    return s && *s ? (size_t)strtoull(s, NULL, 10) : (size_t)16 << 30;
}

int cuMemAlloc_v2(devptr *out, size_t n)
{
    if (in_use + n > device_memory()) return OUT_OF_MEMORY;
    alloc *a = calloc(1, sizeof *a);
    if (!a || !(a->p = aligned_alloc(256, (n + GUARD + 255) / 256 * 256))) {
        free(a);
        return OUT_OF_MEMORY;
    }
    memset(a->p, 0x5A, n); /* not zero: a kernel that reads what nobody wrote should show it */
    memset(a->p + n, GUARD_BYTE, GUARD);
    a->n = n;
    a->next = allocs;
    allocs = a;
    in_use += n;
    if (in_use > peak) peak = in_use;
    *out = (devptr)(uintptr_t)a->p;
    return OK;
}

int cuMemFree_v2(devptr p)
{
    for (alloc **l = &allocs; *l; l = &(*l)->next)
        if ((devptr)(uintptr_t)(*l)->p == p) {
            alloc *a = *l;
            *l = a->next;
            in_use -= a->n;
            free(a->p);
            free(a);
            return OK;
        }
    return INVALID_VALUE;
}

int cuemu_check_guards(const char *what)
{
    for (const alloc *a = allocs; a; a = a->next)
        for (size_t i = 0; i < GUARD; i++)
            if (a->p[a->n + i] != GUARD_BYTE) {
                fprintf(stderr, "cuemu: %s wrote past the end of a %zu-byte allocation\n", what, a->n);
                return 1;
            }
    return 0;
}

/* The allocation that holds [p, p + n), or NULL. */
static const alloc *holding(devptr p, size_t n)
{
    for (const alloc *a = allocs; a; a = a->next)
        if (p >= (devptr)(uintptr_t)a->p && p + n <= (devptr)(uintptr_t)a->p + a->n) return a;
    return NULL;
}

/* [p, p + n) inside one allocation: a copy never runs past its buffer */
static int in_bounds(devptr p, size_t n)
{
    if (holding(p, n)) return 1;
    fprintf(stderr, "cuemu: a copy of %zu bytes at %#llx leaves every allocation\n", n, p);
    return 0;
}

/* LRC_CUEMU_FAULT=KERNEL: a launch of KERNEL faults as on a GPU: it returns
 * success, and every call after it that waits for the device returns
 * CUDA_ERROR_ILLEGAL_ADDRESS (a sticky error: the context is lost) */
static int sticky;

int cuMemcpyHtoD_v2(devptr dst, const void *src, size_t n)
{
    if (sticky) return sticky;
    if (cuemu_capture_refuses()) return cuemu_capture_refuses();
    if (!in_bounds(dst, n)) return INVALID_VALUE;
    memcpy((void *)(uintptr_t)dst, src, n);
    return OK;
}

int cuMemcpyDtoH_v2(void *dst, devptr src, size_t n)
{
    if (sticky) return sticky;
    if (cuemu_capture_refuses()) return cuemu_capture_refuses();
    if (!in_bounds(src, n)) return INVALID_VALUE;
    memcpy(dst, (const void *)(uintptr_t)src, n);
    if (getenv("LRC_CUEMU_TRACE") && n >= 8) fprintf(stderr, "dtoh %#llx %zu last %s\n", src, n, ((unsigned char *)dst)[n - 1] == 0x5A ? "5A" : "-");
    return OK;
}

int cuMemcpyDtoD_v2(devptr dst, devptr src, size_t n)
{
    if (sticky) return sticky;
    if (cuemu_capture_refuses()) return cuemu_capture_refuses();
    if (!in_bounds(dst, n) || !in_bounds(src, n)) return INVALID_VALUE;
    memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
    return OK;
}

typedef struct {
    devptr dst, src;
    size_t n;
} copy_call;

static int copy_now(void *p)
{
    const copy_call *c = p;
    if (sticky) return sticky;
    if (!in_bounds(c->dst, c->n) || !in_bounds(c->src, c->n)) return INVALID_VALUE;
    memmove((void *)(uintptr_t)c->dst, (const void *)(uintptr_t)c->src, c->n);
    return OK;
}

int cuMemcpyDtoDAsync_v2(devptr dst, devptr src, size_t n, void *stream)
{
    copy_call c = {dst, src, n};
    int r = cuemu_stream_use(stream, copy_now, &c, sizeof c);
    return r == CUEMU_CAPTURED ? OK : r ? r : copy_now(&c);
}

int cuMemsetD8_v2(devptr dst, unsigned char v, size_t n)
{
    if (cuemu_capture_refuses()) return cuemu_capture_refuses();
    if (!in_bounds(dst, n)) return INVALID_VALUE;
    memset((void *)(uintptr_t)dst, v, n);
    return OK;
}

/* ---- device and context ------------------------------------------------- */

static int sm(void)
{
    const char *s = getenv("LRC_CUEMU_SM");
    return s && *s ? atoi(s) : 90;
}

int cuInit(unsigned flags) { return flags ? INVALID_VALUE : OK; }
/* LRC_CUEMU_DRIVER: the CUDA version the emulated driver supports (default 13000, CUDA 13.0) */
int cuDriverGetVersion(int *v)
{
    const char *s = getenv("LRC_CUEMU_DRIVER");
    *v = s && *s ? atoi(s) : 13000;
    return OK;
}
int cuDeviceGetCount(int *n) { *n = 1; return OK; }
int cuDeviceGet(int *d, int ordinal) { *d = ordinal; return ordinal ? INVALID_VALUE : OK; }
int cuDeviceGetName(char *name, int len, int d)
{
    (void)d;
    snprintf(name, (size_t)len, "cuemu (CUDA emulated on the host)");
    return OK;
}
int cuDeviceGetAttribute(int *v, int attr, int d)
{
    (void)d;
    *v = attr == 75 ? sm() / 10 : attr == 76 ? sm() % 10 : attr == 16 ? 132 : 0; /* an H100's or H200's 132 SMs */
    return OK;
}
int cuDeviceTotalMem_v2(size_t *bytes, int d)
{
    (void)d;
    *bytes = device_memory();
    return OK;
}
static int ctx_token;
int cuDevicePrimaryCtxRetain(void **ctx, int d) { (void)d; *ctx = &ctx_token; return OK; }
int cuDevicePrimaryCtxRelease_v2(int d) { (void)d; return OK; }
int cuCtxSetCurrent(void *ctx) { return ctx == &ctx_token ? OK : INVALID_VALUE; }
int cuCtxSynchronize(void) { return cuemu_capture_refuses() ? cuemu_capture_refuses() : sticky; }
/* NVRTC opens libcuda.so.1 too and asks for the driver's private tables;
 * without them it compiles as it does on a machine with no driver */
int cuGetExportTable(const void **table, const void *id)
{
    (void)id;
    *table = NULL;
    return NOT_SUPPORTED;
}

/* events: the host's clock when recorded (every call has finished by then) */
static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return 1e3 * (double)t.tv_sec + 1e-6 * (double)t.tv_nsec;
}
int cuEventCreate(void **ev, unsigned flags)
{
    (void)flags;
    *ev = calloc(1, sizeof(double));
    return *ev ? OK : OUT_OF_MEMORY;
}
int cuEventRecord(void *ev, void *stream)
{
    if (cuemu_capture_refuses()) return cuemu_capture_refuses(); /* the executor times launch by launch only */
    *(double *)ev = now_ms();
    return stream ? INVALID_VALUE : OK;
}
int cuEventSynchronize(void *ev) { return sticky ? sticky : ev ? OK : INVALID_VALUE; }
int cuEventElapsedTime(float *ms, void *start, void *end)
{
    *ms = (float)(*(double *)end - *(double *)start);
    return OK;
}
int cuEventDestroy_v2(void *ev)
{
    free(ev);
    return OK;
}

int cuGetErrorName(int r, const char **name)
{
    *name = r == OK ? "CUDA_SUCCESS" : r == INVALID_VALUE ? "CUDA_ERROR_INVALID_VALUE" : r == OUT_OF_MEMORY ? "CUDA_ERROR_OUT_OF_MEMORY"
          : r == INVALID_IMAGE ? "CUDA_ERROR_INVALID_IMAGE" : r == NOT_FOUND ? "CUDA_ERROR_NOT_FOUND"
          : r == LAUNCH_FAILED ? "CUDA_ERROR_LAUNCH_FAILED" : r == LAUNCH_OUT_OF_RESOURCES ? "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"
          : r == ILLEGAL_ADDRESS ? "CUDA_ERROR_ILLEGAL_ADDRESS"
          : "CUDA_ERROR_UNKNOWN";
    return OK;
}

/* ---- modules ------------------------------------------------------------ */

typedef struct {
    unsigned x, y, z;
} dim3;

typedef struct function function;
typedef struct {
    void *so;
    char *source;
    unsigned char *cubin; /* the image, when a cubin: the kernels' resources */
    size_t cubin_size;
    function *functions; /* handed out, freed with the module as the driver does */
    dim3 *thread_idx, *block_idx, *block_dim, *grid_dim;
    void (**barrier)(int);
    char *shared, *shared_end; /* the kernels' shared memory (prelude.h) */
    const uint64_t *mma_count; /* the warps' mma.sync operations so far (prelude.h) */
} module;

struct function {
    module *m;
    function *next;
    void *fn;
    int n_args;
    bool barriers; /* its source calls __syncthreads, a shuffle or a block reduction */
    bool sized;    /* res holds what the cubin says */
    cuemu_resources res;
    char name[128];
};

int cuModuleLoadData(void **out, const void *image)
{
    char src[4200], so[4300];
    if (cuemu_image_paths(image, cuemu_image_size(image), src, sizeof src)) return INVALID_IMAGE;
    module *m = calloc(1, sizeof *m);
    FILE *f = fopen(src, "rb");
    if (f) {
        fseek(f, 0, SEEK_END);
        long len = ftell(f);
        fseek(f, 0, SEEK_SET);
        m->source = calloc((size_t)len + 1, 1);
        if (fread(m->source, 1, (size_t)len, f) != (size_t)len) len = 0;
        fclose(f);
    }
    int bad = !m->source || cuemu_compile(src, so, sizeof so);
    if (!bad && !(m->so = dlopen(so, RTLD_NOW | RTLD_LOCAL))) bad = fprintf(stderr, "cuemu: cannot load %s: %s\n", so, dlerror());
    if (bad) {
        free(m->source);
        free(m);
        return INVALID_IMAGE;
    }
    const size_t size = cuemu_image_size(image);
    if (size >= 4 && !memcmp(image, "\177ELF", 4) && (m->cubin = malloc(size))) memcpy(m->cubin, image, size), m->cubin_size = size;
    m->thread_idx = dlsym(m->so, "threadIdx");
    m->block_idx = dlsym(m->so, "blockIdx");
    m->block_dim = dlsym(m->so, "blockDim");
    m->grid_dim = dlsym(m->so, "gridDim");
    *(void **)&m->barrier = dlsym(m->so, "cuemu_barrier");
    m->mma_count = dlsym(m->so, "cuemu_mma_count");
    void (*shared_range)(char **, char **);
    *(void **)&shared_range = dlsym(m->so, "cuemu_shared_range");
    if (shared_range) shared_range(&m->shared, &m->shared_end);
    if (!m->thread_idx || !m->block_idx || !m->block_dim || !m->grid_dim || !m->barrier || !m->mma_count) {
        fprintf(stderr, "cuemu: %s lacks the prelude's variables\n", so);
        dlclose(m->so);
        free(m->source);
        free(m->cubin);
        free(m);
        return INVALID_IMAGE;
    }
    *out = m;
    return OK;
}

int cuModuleUnload(void *mod)
{
    module *m = mod;
    while (m->functions) {
        function *f = m->functions;
        m->functions = f->next;
        free(f);
    }
    dlclose(m->so);
    free(m->source);
    free(m->cubin);
    free(m);
    return OK;
}

/* Parameters of kernel NAME in its source: extern "C" __global__ ... NAME(...);
 * *barriers when its body (to the next line that is "}") calls anything
 * that synchronizes threads */
static int count_params(const char *src, const char *name, bool *barriers)
{
    size_t n = strlen(name);
    for (const char *p = strstr(src, name); p; p = strstr(p + 1, name)) {
        if (p[-1] != ' ' || p[n] != '(') continue;
        const char *line = p;
        while (line > src && line[-1] != '\n') line--;
        if (!strstr(line, "__global__") || strstr(line, "__global__") > p) continue;
        int count = 0, any = 0;
        for (const char *q = p + n + 1; *q && *q != ')'; q++) {
            if (*q == ',') count++;
            else if (*q != ' ') any = 1;
        }
        const char *end = strstr(p, "\n}\n");
        size_t len = end ? (size_t)(end - p) : strlen(p);
        /* a tensor-core mma is the warp's, as a shuffle is: through lrc's
         * mma_bf16 or an asm statement of its own (whole words: "mma" alone
         * is in every "gamma") */
        static const char *const sync[] = {"__syncthreads", "__shfl",   "block_sum", "block_max", "warp_sum",
                                           "warp_max",      "mma_bf16", "asm(",      "asm volatile", "__asm"};
        *barriers = false;
        for (size_t k = 0; k < sizeof sync / sizeof *sync; k++) {
            const char *hit = strstr(p, sync[k]);
            *barriers = *barriers || (hit && hit < p + len);
        }
        return any ? count + 1 : 0;
    }
    return -1;
}

int cuModuleGetFunction(void **out, void *mod, const char *name)
{
    module *m = mod;
    function *f = calloc(1, sizeof *f);
    f->m = m;
    f->fn = dlsym(m->so, name);
    f->n_args = count_params(m->source, name, &f->barriers);
    snprintf(f->name, sizeof f->name, "%s", name);
    f->sized = m->cubin && !cuemu_cubin_resources(m->cubin, m->cubin_size, name, &f->res);
    if (!f->fn || f->n_args < 0) {
        free(f);
        return NOT_FOUND;
    }
    f->next = m->functions;
    m->functions = f;
    *out = f;
    return OK;
}

/* ---- launches: a block's threads as fibers ------------------------------ */

/* A fiber starts once through ucontext (one system call) and then switches
 * with __builtin_setjmp / __builtin_longjmp, which save and restore only
 * registers: no signal-mask system call per barrier, no libc longjmp check
 * against jumps between stacks. */
enum { RUN, AT_BLOCK_BARRIER, AT_WARP_BARRIER, DONE, NEW };
#define MAX_ARGS 64
#define STACK (64 << 10)

typedef void *jmpbuf[5];
static struct {
    jmpbuf sched, *env;
    ucontext_t start, *ctx;
    int *state, n, cur;
    char *stacks;
    size_t stacks_bytes;
    const function *f;
    void *args[MAX_ARGS];
    dim3 block_dim;
    enum { LOCKSTEP, FIRST, LAST } order; /* LRC_CUEMU_ORDER */
} L;

static __attribute__((noinline)) void jump(void **buf) { __builtin_longjmp(buf, 1); }

static void barrier(int warp_only)
{
    int me = L.cur;
    if (me < 0) { /* a kernel the source scan found free of barriers */
        fprintf(stderr, "cuemu: kernel %s reached a barrier that its source does not show\n", L.f->name);
        abort();
    }
    L.state[me] = warp_only ? AT_WARP_BARRIER : AT_BLOCK_BARRIER;
    if (__builtin_setjmp(L.env[me]) == 0) jump(L.sched);
}

/* Every parameter is a device pointer: the kernel is called with MAX_ARGS
 * of them, those past its own ignored (the SysV and AAPCS64 calling
 * conventions leave extra arguments unread). */
typedef void (*kernel_fn)(void *, void *, void *, void *, void *, void *, void *, void *, void *, void *, void *, void *, void *,
                          void *, void *, void *, void *, void *, void *, void *, void *, void *, void *, void *, void *, void *,
                          void *, void *, void *, void *, void *, void *, void *, void *, void *, void *, void *, void *, void *,
                          void *, void *, void *, void *, void *, void *, void *, void *, void *, void *, void *, void *, void *,
                          void *, void *, void *, void *, void *, void *, void *, void *, void *, void *, void *, void *);

static void call_kernel(void)
{
    void **a = L.args;
    ((kernel_fn)L.f->fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16],
                         a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31],
                         a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46],
                         a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61],
                         a[62], a[63]);
}

static void thread_main(void)
{
    call_kernel();
    L.state[L.cur] = DONE;
    jump(L.sched);
}

static void set_thread(const module *m, int t)
{
    m->thread_idx->x = (unsigned)t % L.block_dim.x;
    m->thread_idx->y = (unsigned)t / L.block_dim.x % L.block_dim.y;
    m->thread_idx->z = (unsigned)t / (L.block_dim.x * L.block_dim.y);
}

/* the i-th thread (or block) of n to run */
static int nth(int i, int n) { return L.order == LAST ? n - 1 - i : i; }

/* Runs the runnable threads of [lo, hi) in the launch's order, each until
 * it finishes or waits. */
static void run_threads(const module *m, int lo, int hi)
{
    for (int i = 0; i < hi - lo; i++) {
        const int t = lo + nth(i, hi - lo);
        if (L.state[t] != RUN && L.state[t] != NEW) continue;
        L.cur = t;
        set_thread(m, t);
        if (__builtin_setjmp(L.sched) == 0) {
            if (L.state[t] == RUN) jump(L.env[t]);
            L.state[t] = RUN;
            L.ctx[t] = L.start;
            L.ctx[t].uc_stack.ss_sp = L.stacks + (size_t)t * STACK;
            L.ctx[t].uc_stack.ss_size = STACK;
            L.ctx[t].uc_link = NULL; /* thread_main jumps back; it never returns */
            makecontext(&L.ctx[t], thread_main, 0);
            setcontext(&L.ctx[t]);
        }
    }
}

/* one past warp w's last thread */
static int warp_end(int w) { return w * 32 + 32 < L.n ? w * 32 + 32 : L.n; }

/* Lets warp w go on past a shuffle when all its live threads wait at one. */
static int release_warp(int w)
{
    const int lo = w * 32, hi = warp_end(w);
    int live = 0, wait = 0;
    for (int t = lo; t < hi; t++) live += L.state[t] != DONE, wait += L.state[t] == AT_WARP_BARRIER;
    if (!wait || wait != live) return 0;
    for (int t = lo; t < hi; t++)
        if (L.state[t] == AT_WARP_BARRIER) L.state[t] = RUN;
    return 1;
}

/* Runs one block up to each __syncthreads, then past it when all its live
 * threads wait there. LOCKSTEP runs every thread to its next barrier or
 * shuffle, then the warps whose live threads all wait at a shuffle go on;
 * FIRST and LAST run one warp as far as it can go (through its shuffles)
 * before the next starts. */
static int run_block(const module *m)
{
    if (m->shared) memset(m->shared, 0x5A, (size_t)(m->shared_end - m->shared)); /* what a block finds there is not zero */
    if (!L.f->barriers) { /* no barrier in its source: each thread runs to its end in turn */
        L.cur = -1;
        for (int i = 0; i < L.n; i++) {
            set_thread(m, nth(i, L.n));
            call_kernel();
        }
        return OK;
    }
    const int warps = (L.n + 31) / 32;
    for (int t = 0; t < L.n; t++) L.state[t] = NEW;
    for (;;) {
        if (L.order == LOCKSTEP) {
            run_threads(m, 0, L.n);
            int released = 0;
            for (int w = 0; w < warps; w++) released |= release_warp(w);
            if (released) continue;
        } else
            for (int i = 0; i < warps; i++) {
                const int w = nth(i, warps);
                do run_threads(m, w * 32, warp_end(w));
                while (release_warp(w));
            }
        int live = 0, at_block = 0;
        for (int t = 0; t < L.n; t++) live += L.state[t] != DONE, at_block += L.state[t] == AT_BLOCK_BARRIER;
        if (!live) return OK;
        if (at_block != live) {
            fprintf(stderr, "cuemu: kernel %s, block (%u, %u, %u): its threads wait at different barriers (a divergent __syncthreads or shuffle)\n",
                    L.f->name, m->block_idx->x, m->block_idx->y, m->block_idx->z);
            return LAUNCH_FAILED;
        }
        for (int t = 0; t < L.n; t++)
            if (L.state[t] == AT_BLOCK_BARRIER) L.state[t] = RUN;
    }
}

static int run_grid(const module *m, int order)
{
    L.order = order;
    const dim3 g = *m->grid_dim;
    const long blocks = (long)g.x * g.y * g.z;
    int r = OK;
    for (long i = 0; i < blocks && !r; i++) {
        const long b = order == LAST ? blocks - 1 - i : i;
        *m->block_idx = (dim3){(unsigned)(b % g.x), (unsigned)(b / g.x % g.y), (unsigned)(b / g.x / g.y)};
        r = run_block(m);
    }
    return r;
}

/* The allocation that holds the byte at p, or NULL. */
static const alloc *holder(const void *p) { return holding((devptr)(uintptr_t)p, 1); }

/* The allocations a launch can reach: those its arguments point into, and
 * those that one among them of at most 1 MiB (a table of pointers, as
 * AdamW's, 72 bytes a tensor) points into; one level of tables. A larger
 * argument (activations) is not read for pointers: that would cost a pass
 * over the arena a launch. */
static const alloc **reach;
static int reach_n, reach_cap;

/* a into reach unless it is there; nonzero when out of memory */
static int reach_add(const alloc *a)
{
    for (int k = 0; k < reach_n; k++)
        if (reach[k] == a) return 0;
    if (reach_n == reach_cap) {
        const alloc **grown = realloc(reach, (size_t)(2 * reach_cap + 64) * sizeof *reach);
        if (!grown) return 1;
        reach = grown, reach_cap = 2 * reach_cap + 64;
    }
    reach[reach_n++] = a;
    return 0;
}

static int reachable(void)
{
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    for (const alloc *a = allocs; a; a = a->next) {
        if ((uintptr_t)a->p < lo) lo = (uintptr_t)a->p;
        if ((uintptr_t)(a->p + a->n) > hi) hi = (uintptr_t)(a->p + a->n);
    }
    reach_n = 0;
    for (int i = 0; i < L.f->n_args; i++) {
        const alloc *a = holder(L.args[i]);
        if (a && reach_add(a)) return 1;
    }
    const int args = reach_n; /* the arguments' allocations, each once: then what the small ones point to */
    for (int i = 0; i < args; i++) {
        const alloc *a = reach[i];
        for (size_t w = 0; a->n <= (1 << 20) && w + 8 <= a->n; w += 8) {
            uintptr_t v;
            memcpy(&v, a->p + w, 8);
            const alloc *t = v >= lo && v < hi ? holder((const void *)v) : NULL;
            if (t && reach_add(t)) return 1;
        }
    }
    return 0;
}

/* LRC_CUEMU_ORDER=check: the launch under `first`, then from the same
 * memory under `last`; a byte that differs between the two is a race, and
 * fails the launch. */
static int run_checked(const module *m)
{
    static unsigned char *before, *after; /* kept from launch to launch: no page faults each time */
    static size_t room;
    if (reachable()) return OUT_OF_MEMORY;
    const alloc **set = reach;
    const int n = reach_n;
    size_t total = 0;
    for (int k = 0; k < n; k++) total += set[k]->n;
    if (total > room) {
        free(before), free(after);
        before = malloc(total), after = malloc(total);
        room = before && after ? total : 0;
        if (!room) return OUT_OF_MEMORY;
    }
    unsigned char *q = before;
    for (int k = 0; k < n; q += set[k]->n, k++) memcpy(q, set[k]->p, set[k]->n);
    int r = run_grid(m, FIRST);
    if (r) return r;
    q = after;
    for (int k = 0; k < n; q += set[k]->n, k++) memcpy(q, set[k]->p, set[k]->n);
    q = before;
    for (int k = 0; k < n; q += set[k]->n, k++) memcpy(set[k]->p, q, set[k]->n);
    if ((r = run_grid(m, LAST))) return r;
    q = after;
    for (int k = 0; k < n; q += set[k]->n, k++)
        if (memcmp(q, set[k]->p, set[k]->n))
            for (size_t i = 0; i < set[k]->n; i++)
                if (set[k]->p[i] != q[i]) {
                    fprintf(stderr, "cuemu: kernel %s races: byte %zu of a %zu-byte buffer differs between the schedules first and last\n",
                            L.f->name, i, set[k]->n);
                    return LAUNCH_FAILED;
                }
    return OK;
}

/* A launch a GPU (sm_80 to sm_90: 64 Ki registers a block) refuses: more
 * threads than the kernel's __launch_bounds__, or registers (allocated 256
 * a warp) past the file. (Static shared memory past 48 KiB ptxas already
 * refuses when it compiles.) */
static int out_of_resources(const function *f, unsigned threads)
{
    /* as the hardware checks it (cuda_occupancy.h): registers allocated 256
     * a warp, to the 4 sub-partitions at once, so warps rounded up to 4 */
    const unsigned warps = (threads + 127) / 128 * 4, regs = warps * ((f->res.regs * 32 + 255) / 256 * 256);
    const char *why = f->res.max_threads && threads > f->res.max_threads ? "threads past its __launch_bounds__"
                      : regs > 65536                                     ? "registers past the 65536 of a multiprocessor"
                                                                         : NULL;
    if (why)
        fprintf(stderr, "cuemu: kernel %s launched with %u threads: %s (bounds %u, %u registers a thread, %zu bytes shared)\n",
                f->name, threads, why, f->res.max_threads, f->res.regs, f->res.shared);
    return why != NULL;
}

/* a launch's arguments, as a capture records it */
typedef struct {
    const function *f;
    unsigned g[3], b[3];
    void *args[MAX_ARGS];
} launch_call;

static int launch_now(void *p);

int cuLaunchKernel(void *fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned shared,
                   void *stream, void **params, void **extra)
{
    const function *f = fn;
    unsigned threads = bx * by * bz;
    if (sticky) return sticky;
    if (!threads || threads > 1024 || !gx || !gy || !gz || shared || extra || f->n_args > MAX_ARGS) return INVALID_VALUE;
    if (gx > 2147483647u || gy > 65535 || gz > 65535) { /* the hardware's grid limits */
        fprintf(stderr, "cuemu: kernel %s launched on a grid of (%u, %u, %u): y and z take at most 65535, x 2^31 - 1\n", f->name, gx,
                gy, gz);
        return INVALID_VALUE;
    }
    if (f->sized && out_of_resources(f, threads)) return LAUNCH_OUT_OF_RESOURCES;
    launch_call c = {f, {gx, gy, gz}, {bx, by, bz}, {NULL}};
    for (int i = 0; i < f->n_args; i++) c.args[i] = *(void **)params[i];
    int r = cuemu_stream_use(stream, launch_now, &c, sizeof c);
    return r == CUEMU_CAPTURED ? OK : r ? r : launch_now(&c);
}

static int launch_now(void *p)
{
    const launch_call *c = p;
    const function *f = c->f;
    const module *m = f->m;
    const unsigned gx = c->g[0], gy = c->g[1], gz = c->g[2], bx = c->b[0], by = c->b[1], bz = c->b[2], threads = bx * by * bz;
    if (sticky) return sticky;
    size_t need = (size_t)threads * STACK;
    if (need > L.stacks_bytes) {
        if (L.stacks) munmap(L.stacks, L.stacks_bytes);
        L.stacks = mmap(NULL, need, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (L.stacks == MAP_FAILED) {
            L.stacks = NULL, L.stacks_bytes = 0;
            return OUT_OF_MEMORY;
        }
        L.stacks_bytes = need;
        L.ctx = realloc(L.ctx, threads * sizeof *L.ctx);
        L.env = realloc(L.env, threads * sizeof *L.env);
        L.state = realloc(L.state, threads * sizeof *L.state);
        getcontext(&L.start);
    }
    L.f = f;
    L.n = (int)threads;
    L.block_dim = (dim3){bx, by, bz};
    for (int i = 0; i < MAX_ARGS; i++) L.args[i] = c->args[i];
    *m->block_dim = (dim3){bx, by, bz};
    *m->grid_dim = (dim3){gx, gy, gz};
    *m->barrier = barrier;
    const char *order = getenv("LRC_CUEMU_ORDER");
    const uint64_t mma_before = *m->mma_count;
    int r;
    if (!order || !*order || !strcmp(order, "lockstep")) r = run_grid(m, LOCKSTEP);
    else if (!strcmp(order, "first")) r = run_grid(m, FIRST);
    else if (!strcmp(order, "last")) r = run_grid(m, LAST);
    else if (!strcmp(order, "check")) r = run_checked(m);
    else {
        fprintf(stderr, "cuemu: LRC_CUEMU_ORDER is '%s'; it takes lockstep, first, last or check\n", order);
        return INVALID_VALUE;
    }
    if (getenv("LRC_CUEMU_TRACE")) {
        fprintf(stderr, "launch %s grid %u %u %u block %u", f->name, gx, gy, gz, bx);
        if (f->sized) fprintf(stderr, " (%u registers, %zu bytes shared)", f->res.regs, f->res.shared);
        if (*m->mma_count != mma_before) fprintf(stderr, " mma.sync %llu", (unsigned long long)(*m->mma_count - mma_before));
        fprintf(stderr, ":");
        for (int i = 0; i < f->n_args; i++) {
            const unsigned char *q = L.args[i];
            int bad = 1;
            for (int k = 0; k < 8; k++) bad &= q[k] == 0x5A;
            fprintf(stderr, " %p%s", (void *)q, bad ? "(5A)" : "");
        }
        fprintf(stderr, "\n");
    }
    if (!r && cuemu_check_guards(f->name)) return LAUNCH_FAILED;
    const char *fault = getenv("LRC_CUEMU_FAULT");
    if (!r && fault && !strcmp(fault, f->name)) sticky = ILLEGAL_ADDRESS; /* the launch itself succeeds */
    return r;
}
