/* cli_target_cuda.c — the command line on the cuda target (the target
 * itself: frontend/compile/target_cuda.c, runtime/executors.c): lrc
 * forward --repeat of a cuda package, lrc compile's summary line, lrc
 * devices, and lrc profile of a cuda package: the device checked against the package's
 * architecture (its cubin, or its PTX on a newer GPU), the weights uploaded
 * once, the inputs run once, then every launch timed with CUDA events
 * against the device's ceilings measured now. */
#include "cli_targets.h"

#include <stdlib.h>
#include <string.h>

/* lrc backward runs on the device now: a missing one is the first error */
static int cuda_check(const char *cmd, const cli_args *a, lrc_err *err)
{
    char why[256];
    if (a->weights_dtype) /* the device's storage is --precision's; a target that lacks a storage is bad input, as issue 22 has it */
        return lrc_err_set(err, "--weights-dtype is for --target cpu (cuda stores weight matrices as --precision says)"), EXIT_USER;
    lrc_cuda_device dev;
    if (!strcmp(cmd, "backward") && lrc_cuda_probe(&dev, why, sizeof why)) return lrc_err_set(err, "--target cuda: %s", why), EXIT_USER;
    return LRC_OK;
}

/* compiling needs NVRTC only; running needs the driver, a GPU and cuBLAS */
static void cuda_report(void)
{
    char why[256];
    if (lrc_nvrtc_available(why, sizeof why))
        printf("target cuda, compile: available (NVRTC %s: lrc compile --target cuda --arch sm_XX, no GPU needed)\n",
               lrc_nvrtc_version());
    else printf("target cuda, compile: not available: %s\n", why);
    lrc_cuda_device dev;
    if (lrc_cuda_probe(&dev, why, sizeof why))
        printf("target cuda, run: not available: %s\n", why);
    else
        printf("target cuda, run: available: %s (sm_%d, %.0f GiB; %d device%s; lrc forward runs cuda packages)\n", dev.name,
               dev.sm, (double)dev.memory_bytes / (1 << 30), dev.count, dev.count == 1 ? "" : "s");
}

/* lrc forward --repeat of a cuda package: the launches of one forward on
 * the device, inputs already there. */
static int cuda_time_session(const cli_args *a, lrc_session *s, const lrc_array *arr, const lrc_tensor_set *in, lrc_err *err)
{
    (void)arr;
    lrc_session_info info;
    double med = 0;
    if (lrc_session_describe(s, &info) || lrc_session_time(s, a->repeat, &med)) return cli_session_error(s, err);
    const lrc_tensor *tok = lrc_tensor_set_find(in, "tokens");
    printf("forward: median %.3f ms over %lld runs, %.0f tokens/s, on %s (sm_%d; device time, copies not included)\n", med,
           (long long)a->repeat, tok ? (double)lrc_shape_numel(&tok->shape) / (med / 1e3) : 0, info.device, info.sm);
    return LRC_OK;
}

/* ---- lrc profile ----------------------------------------------------------- */

/* A cuda package (a->m.model) on GPU 0 with its weights (inside, or
 * a->weights), and, when a->input is given, its tensors read into in and
 * completed (a looped model's iterations). */
typedef struct {
    lrc_package pkg;
    bool have_pkg;
    lrc_tensor_set in, wfile;
    lrc_cuda_exec *x;
    lrc_cuda_device dev;
} cuda_run_pkg;

static int cuda_open_package(const cli_args *a, cuda_run_pkg *c, lrc_err *err)
{
    memset(c, 0, sizeof *c);
    lrc_tensor_set_init(&c->in);
    lrc_tensor_set_init(&c->wfile);
    int rc = lrc_package_load(a->m.model, &c->pkg, err);
    if (rc) return rc;
    c->have_pkg = true;
    int sm = c->pkg.arch[0] ? atoi(c->pkg.arch + 3) : 0; /* "sm_90" */
    char why[256];
    void *image = NULL;
    if (lrc_cuda_probe(&c->dev, why, sizeof why))
        rc = lrc_err_set(err, "%s is compiled for cuda (sm_%d) and this machine cannot run it: %s", a->m.model, sm, why);
    else if (c->dev.sm < sm)
        rc = lrc_err_set(err, "%s is compiled for sm_%d, and %s is sm_%d: compile it again with --arch sm_%d", a->m.model, sm,
                         c->dev.name, c->dev.sm, c->dev.sm);
    /* the cubin for its own architecture; PTX, compiled by the driver, for a newer one */
    if (!rc && !(image = lrc_package_cuda_image(a->m.model, c->dev.sm == sm, err))) rc = LRC_EUSER;
    if (!rc && c->pkg.has_weights && a->weights)
        rc = lrc_err_set(err, "%s holds its weights (folded at compile time): leave out --weights", a->m.model);
    if (!rc && !c->pkg.has_weights && !a->weights)
        rc = lrc_err_set(err, "%s was compiled without weights: give them with --weights W", a->m.model);
    if (!rc && a->weights) rc = lrc_safetensors_load(a->weights, &c->wfile, err);
    if (!rc) rc = lrc_cuda_exec_new(&c->pkg.plan, &c->pkg.cuda, image, &c->x, err);
    free(image);
    if (!rc) rc = lrc_cuda_exec_bind_params(c->x, a->weights ? &c->wfile : &c->pkg.weights, err);
    if (!rc && a->input && !(rc = lrc_safetensors_load(a->input, &c->in, err))) rc = cli_package_inputs(&c->pkg, &c->in, a->input, err);
    return rc;
}

static void cuda_close_package(cuda_run_pkg *c)
{
    lrc_cuda_exec_free(c->x);
    if (c->have_pkg) lrc_package_free(&c->pkg);
    lrc_tensor_set_clear(&c->in);
    lrc_tensor_set_clear(&c->wfile);
}

/* The device's profile table of an open package, after a warm-up (the driver loads the kernels then). */
static int cuda_profile_runs(const cli_args *a, cuda_run_pkg *c, int64_t repeat, const char *trace, lrc_err *err)
{
    lrc_tensor_set outs;
    lrc_tensor_set_init(&outs);
    int rc = lrc_cuda_exec_run(c->x, &c->in, &outs, err);
    const lrc_plan *plan = &c->pkg.plan;
    int n_launch = rc ? 0 : plan->n_launches;
    double *ns = lrc_xcalloc((size_t)n_launch + 1, sizeof(double)), copy = 0, gemm = 0;
    int64_t *calls = lrc_xcalloc((size_t)n_launch + 1, sizeof(int64_t)), n_ev = 0;
    /* a loop's body may run more often than once a run: room for 4 times the launches */
    int64_t cap = 4 * (int64_t)n_launch * repeat + 1;
    lrc_trace_event *ev = lrc_xmalloc((size_t)cap * sizeof *ev);
    if (!rc) {
        lrc_cuda_exec_profile(c->x, ns, calls);
        lrc_cuda_exec_trace(c->x, ev, cap, &n_ev);
    }
    for (int64_t r = 0; r < repeat && !rc; r++) rc = lrc_cuda_exec_run(c->x, &c->in, &outs, err);
    if (!rc) {
        lrc_cuda_exec_profile(c->x, NULL, NULL);
        lrc_cuda_exec_trace(c->x, NULL, 0, NULL);
        rc = lrc_cuda_measure_ceilings(c->x, c->dev.memory_bytes, &copy, &gemm, err);
    }
    int64_t *blocks = lrc_xcalloc((size_t)n_launch + 1, sizeof(int64_t));
    int *threads = lrc_xcalloc((size_t)n_launch + 1, sizeof(int)), *access = lrc_xcalloc((size_t)n_launch + 1, sizeof(int));
    for (int i = 0; i < n_launch; i++) {
        /* bytes as stored on the device: the plan (ours, loaded for this run) counts f32 */
        c->pkg.plan.launches[i].bytes = lrc_cuda_exec_bytes(c->x, i);
        lrc_cuda_exec_launch_shape(c->x, i, &blocks[i], &threads[i], &access[i]);
    }
    const cli_gpu_shapes shapes = {blocks, threads, access, c->dev.sms};
    if (!rc) rc = lrc_trace_write(trace, plan, ev, n_ev, err);
    if (!rc) {
        printf("profile of %s: %lld runs on %s (sm_%d, %d SMs), CUDA events around every launch\n", a->m.model, (long long)repeat,
               c->dev.name, c->dev.sm, c->dev.sms);
        printf("ceilings measured now: %.1f GFLOP/s (bf16 cuBLAS GEMM), %.1f GB/s (device-to-device copy)\n", gemm, copy);
        cli_print_profile(plan, ns, calls, repeat, gemm, copy, &shapes);
        printf("trace %s (%lld events)\n", trace, (long long)n_ev);
    }
    free(ns);
    free(calls);
    free(ev);
    free(blocks);
    free(threads);
    free(access);
    lrc_tensor_set_clear(&outs);
    return rc;
}

static int cuda_profile_package(const cli_args *a, int64_t repeat, const char *trace)
{
    lrc_err err;
    cuda_run_pkg c;
    int rc = cuda_open_package(a, &c, &err);
    if (!rc) rc = cuda_profile_runs(a, &c, repeat, trace, &err);
    cuda_close_package(&c);
    return rc ? cli_user_error(&err) : 0;
}

/* lrc profile of a cuda package on GPU 0 (cmd_profile.c compiles a model
 * into one first). */
static int cuda_profile_command(const cli_args *a, bool pkg, int64_t repeat, const char *trace)
{
    (void)pkg;
    if (!a->input) return cli_usage_error("profile", "needs --input");
    return cuda_profile_package(a, repeat, trace);
}

static void cuda_compile_report(const lrc_model *m, const cli_args *a, const lrc_compiled *c)
{
    printf("compiled %s%s%s for cuda (%s, NVRTC %s): %d kernels in CUDA C, cubin %zu bytes, PTX for newer GPUs, in %.0f ms\n"
           "nvrtc: %s\n",
           m->path, a->m.preset ? " preset " : "", a->m.preset ? a->m.preset : "", c->arch, lrc_nvrtc_version(), c->cuda.n_symbols,
           c->cubin_size, c->passes_ms + c->codegen_ms,
           c->kernel_cache == LRC_KCACHE_OFF ? "no cache (LRC_NVRTC_CACHE=off, or no cache directory)"
                                            : lrc_kcache_state_name((lrc_kcache_state)c->kernel_cache));
}

const cli_target cli_target_cuda = {
    .t = &lrc_target_cuda,
    .check = cuda_check,
    .report = cuda_report,
    .time_session = cuda_time_session,
    .says_wrote = true,
    .profile_command = cuda_profile_command,
    .compile_report = cuda_compile_report,
};
