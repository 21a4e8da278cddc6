/* cmd_profile.c — lrc profile: every kernel of a forward pass timed over
 * repeated runs, against ceilings measured on this machine at the same
 * thread count (the FMA probe of the program, a large copy), and a trace
 * that Perfetto and chrome://tracing open. */
#include "engine.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    const char *key, *symbol, *label; /* key: the symbol, or for cuBLAS alone the label */
    int first;                        /* its first launch */
    int64_t calls;
    double ns, flops, bytes;
} row_t;

static int by_time(const void *a, const void *b)
{
    const row_t *x = a, *y = b;
    return x->ns < y->ns ? 1 : x->ns > y->ns ? -1 : 0;
}

/* One row per function: launches of equal structure (one per layer) share it. */
static int aggregate(const lrc_plan *p, const double *ns, const int64_t *calls, row_t *rows)
{
    int n = 0;
    for (int i = 0; i < p->n_launches; i++) {
        if (!calls[i]) continue;
        const lrc_plan_launch *l = &p->launches[i];
        int r = 0;
        const char *key = l->symbol[0] ? l->symbol : l->label; /* GEMMs alone: one row per call site */
        while (r < n && strcmp(rows[r].key, key)) r++;
        if (r == n) rows[n++] = (row_t){key, l->symbol[0] ? l->symbol : "cublas", l->label, i, 0, 0, 0, 0};
        rows[r].calls += calls[i];
        rows[r].ns += ns[i];
        rows[r].flops += l->flops * (double)calls[i];
        rows[r].bytes += l->bytes * (double)calls[i];
    }
    qsort(rows, (size_t)n, sizeof *rows, by_time);
    return n;
}

/* Why a GPU kernel that is not a GEMM stays under 60% of the copy
 * bandwidth, or "" when it does not: too short a call for the launch
 * around it to vanish, more arithmetic than bytes, too few blocks to keep
 * every SM's loads in flight, or accesses narrower than 16 bytes (a shape
 * that does not divide); else its shape, for a reader to judge. */
static const char *why_slow(const row_t *r, double peak, double bw, const cli_gpu_shapes *gpu, char *buf, size_t n)
{
    double gb = r->bytes / r->ns, us = r->ns / 1e3 / (double)r->calls;
    if (!strcmp(r->symbol, "cublas") || strstr(r->symbol, "gemm") || !(bw > 0) || gb >= 0.6 * bw) return "";
    const int64_t blocks = gpu->blocks[r->first];
    const int threads = gpu->threads[r->first], access = gpu->access[r->first];
    if (us < 10) snprintf(buf, n, "  [launch-bound: %.0f KB a call in %.1f us]", r->bytes / (double)r->calls / 1e3, us);
    else if (peak > 0 && r->flops / r->bytes > peak / bw) snprintf(buf, n, "  [compute-bound: %.2g FLOP a byte]", r->flops / r->bytes);
    else if (gpu->sms > 0 && blocks < 2 * (int64_t)gpu->sms)
        snprintf(buf, n, "  [%lld blocks for %d SMs: too few to keep the memory busy]", (long long)blocks, gpu->sms);
    else if (access > 0 && access < 16)
        snprintf(buf, n, "  [%d-byte accesses: the shape does not divide into 16 bytes]", access);
    else if (access > 0) snprintf(buf, n, "  [under 60%%: %lld blocks of %d threads, 16-byte accesses]", (long long)blocks, threads);
    else snprintf(buf, n, "  [under 60%%: %lld blocks of %d threads]", (long long)blocks, threads);
    return buf;
}

void cli_print_profile(const lrc_plan *p, const double *ns, const int64_t *calls, int64_t repeat, double peak, double bw,
                       const cli_gpu_shapes *gpu)
{
    row_t *rows = lrc_xcalloc((size_t)p->n_launches + 1, sizeof *rows);
    int n = aggregate(p, ns, calls, rows);
    double total = 0, flops = 0;
    for (int i = 0; i < n; i++) total += rows[i].ns, flops += rows[i].flops;
    printf("forward: %.3f ms per run, %.1f GFLOP/s, %d functions\n\n", total / 1e6 / (double)repeat, flops / total, n);
    printf("%-11s %6s %10s %6s %9s %8s %6s  %s\n", "function", "calls", "total ms", "share", "GFLOP/s", "GB/s", "%peak", "kernel");
    char why[128];
    for (int i = 0; i < n; i++) {
        double gf = rows[i].flops / rows[i].ns, gb = rows[i].bytes / rows[i].ns;
        double frac = peak > 0 ? gf / peak : 0, fb = bw > 0 ? gb / bw : 0;
        /* the ceiling that binds: compute or memory, whichever is closer */
        printf("%-11s %6lld %10.3f %5.1f%% %9.1f %8.1f %5.0f%%%c  %s%s\n", rows[i].symbol, (long long)rows[i].calls, rows[i].ns / 1e6,
               100 * rows[i].ns / total, gf, gb, 100 * (frac > fb ? frac : fb), frac > fb ? 'F' : 'B', rows[i].label,
               gpu ? why_slow(&rows[i], peak, bw, gpu, why, sizeof why) : "");
    }
    printf("\n%%peak: F of the %s ceiling, B of the copy bandwidth, whichever is higher\n", gpu ? "GEMM" : "FMA");
    free(rows);
}

/* lrc profile on GPU 0: a cuda package as it is, or MODEL compiled first
 * (as lrc compile --target cuda would, for this GPU and the input's shape)
 * into a package that lives as long as the profile. */
static int profile_cuda(const cli_args *a, bool pkg, int64_t repeat, const char *trace)
{
    if (!a->input || (!pkg && !a->weights))
        return cli_usage_error("profile", pkg ? "needs --input" : "needs --weights and --input");
    if (pkg) return cli_profile_cuda(a, repeat, trace);
    lrc_err err;
    lrc_cuda_device dev;
    char why[256], arch[16], tmp[64] = "/tmp/lrc-profile-XXXXXX", dir[128];
    lrc_tensor_set in;
    lrc_tensor_set_init(&in);
    const lrc_tensor *t = NULL;
    int rc = lrc_cuda_probe(&dev, why, sizeof why) ? lrc_err_set(&err, "--target cuda: %s", why) : LRC_OK;
    if (!rc) rc = lrc_safetensors_load(a->input, &in, &err);
    if (!rc && !(t = lrc_tensor_set_find(&in, "tokens")) && !(t = lrc_tensor_set_find(&in, "images")))
        rc = lrc_err_set(&err, "%s: no tensor 'tokens' (I32 [B, T]) or 'images' (F32 [B, C, H, W])", a->input);
    if (!rc && t->shape.ndim != 2 && t->shape.ndim != 4)
        rc = lrc_err_set(&err, "%s: '%s' must be [B, T] or [B, C, H, W]", a->input, t->name);
    if (!rc && !mkdtemp(tmp)) rc = lrc_err_set(&err, "%s: cannot create a temporary directory", tmp);
    if (rc) {
        lrc_tensor_set_clear(&in);
        return cli_user_error(&err);
    }
    cli_args b = *a;
    snprintf(arch, sizeof arch, "sm_%d", dev.sm);
    snprintf(dir, sizeof dir, "%s/pkg", tmp);
    b.target = "cuda", b.arch = arch, b.out = dir, b.one_shape = true; /* the input's shape alone */
    b.batch = t->shape.dim[0], b.seq = t->shape.ndim == 2 ? t->shape.dim[1] : 1;
    lrc_tensor_set_clear(&in);
    rc = cli_compile_package(&b);
    if (!rc) {
        b = *a;
        b.m.model = dir, b.weights = NULL; /* folded into the package */
        rc = cli_profile_cuda(&b, repeat, trace);
    }
    cli_package_remove(dir);
    rmdir(tmp);
    return rc;
}

int cmd_profile(int argc, char **argv)
{
    static const struct option opts[] = {MODEL_OPTS,
                                         {"weights", required_argument, 0, OPT_WEIGHTS},
                                         {"input", required_argument, 0, OPT_INPUT},
                                         {"target", required_argument, 0, OPT_TARGET},
                                         {"threads", required_argument, 0, OPT_THREADS},
                                         {"repeat", required_argument, 0, OPT_REPEAT},
                                         {0, 0, 0, 0}};
    static const char *help =
        "usage: lrc profile MODEL|PKG [--preset P] [--set KEY=VALUE]... [--weights W] --input IN\n"
        "                   [--target cpu|cuda] [--threads N] [--repeat N] [-o TRACE.json]\n"
        "\n"
        "Runs the forward pass N times (default 10) after a warm-up and prints, per\n"
        "kernel function, calls, total time, share, GFLOP/s, GB/s and the fraction of\n"
        "this machine's ceilings (FMA throughput and copy bandwidth, measured now with\n"
        "the same threads). Writes a trace for Perfetto / chrome://tracing (default\n"
        "lrc-trace.json).\n"
        "\n"
        "On cuda (a cuda package, or MODEL with --target cuda, compiled first for GPU 0\n"
        "and the input's shape): every launch timed with CUDA events, against a bf16\n"
        "cuBLAS GEMM and a device-to-device copy measured now; a kernel other than a\n"
        "GEMM under 60% of the copy bandwidth gets the reason in brackets.\n";
    cli_args a;
    int rc = cli_parse_args("profile", argc, argv, opts, help, true, &a);
    if (rc >= 0) goto out;
    const char *trace = a.out ? a.out : "lrc-trace.json";
    int64_t repeat = a.repeat > 0 ? a.repeat : 10;
    bool pkg = lrc_package_is(a.m.model);
    char target[16] = "";
    if (pkg) lrc_package_target(a.m.model, target, sizeof target);
    if (!strcmp(target, "cuda") || (!pkg && !strcmp(a.target, "cuda"))) {
        rc = profile_cuda(&a, pkg, repeat, trace);
        goto out;
    }
    if ((rc = cli_check_run_args("profile", &a, "--input", a.input != NULL)) >= 0) goto out;
    lrc_err err;
    lrc_tensor_set in, outs;
    lrc_tensor_set_init(&in);
    lrc_tensor_set_init(&outs);
    cli_engine e;
    memset(&e, 0, sizeof e);
    const lrc_tensor *tok = NULL, *img = NULL;
    rc = lrc_safetensors_load(a.input, &in, &err);
    if (!rc && !(tok = lrc_tensor_set_find(&in, "tokens")) && !(img = lrc_tensor_set_find(&in, "images")))
        rc = lrc_err_set(&err, "%s: no tensor 'tokens' (I32 [B, T]) or 'images' (F32 [B, C, H, W])", a.input);
    if (!rc && tok && (tok->dtype != LRC_I32 || tok->shape.ndim != 2))
        rc = lrc_err_set(&err, "%s: 'tokens' must be I32 [B, T]", a.input);
    if (!rc && img && (img->dtype != LRC_F32 || img->shape.ndim != 4))
        rc = lrc_err_set(&err, "%s: 'images' must be F32 [B, C, H, W]", a.input);
    if (!rc) rc = cli_engine_open(&a, (tok ? tok : img)->shape.dim[0], tok ? tok->shape.dim[1] : 1, &e, &err);
    if (!rc) rc = cli_engine_inputs(&e, &in, a.input, &err);
    if (!rc && (rc = lrc_exec_run_plan(e.x, &in, &outs, &err))) lrc_err_prefix(&err, "%s", a.input); /* warm-up */
    int n_launch = rc ? 0 : e.plan->n_launches;
    double *ns = lrc_xcalloc((size_t)n_launch + 1, sizeof(double));
    int64_t *calls = lrc_xcalloc((size_t)n_launch + 1, sizeof(int64_t)), n_ev = 0;
    lrc_trace_event *ev = lrc_xmalloc(((size_t)n_launch * (size_t)repeat + 1) * sizeof *ev);
    if (!rc) {
        lrc_exec_profile(e.x, ns, calls);
        lrc_exec_trace(e.x, ev, (int64_t)n_launch * repeat, &n_ev);
    }
    for (int64_t r = 0; r < repeat && !rc; r++) rc = lrc_exec_run_plan(e.x, &in, &outs, &err); /* outputs reused */
    if (!rc) rc = lrc_trace_write(trace, e.plan, ev, n_ev, &err);
    if (!rc) {
        double fpi = cli_engine_peak_flops_per_item(&e);
        double peak = e.peak && fpi > 0 ? lrc_measure_peak_gflops(e.pool, e.peak, fpi) : 0;
        double bw = lrc_measure_copy_gbs(e.pool, (size_t)256 << 20);
        int per_run = 0;
        for (int i = 0; i < e.plan->n_launches; i++) per_run += !e.plan->launches[i].once;
        printf("profile of %s: %lld runs, %d threads, %d launches per run\n", a.m.model, (long long)repeat,
               lrc_pool_threads(e.pool), per_run);
        printf("ceilings measured now: %.1f GFLOP/s (FMA probe), %.1f GB/s (copy)\n", peak, bw);
        cli_print_profile(e.plan, ns, calls, repeat, peak, bw, NULL);
        printf("trace %s (%lld events)\n", trace, (long long)n_ev);
    }
    free(ns);
    free(calls);
    free(ev);
    cli_engine_close(&e);
    lrc_tensor_set_clear(&in);
    lrc_tensor_set_clear(&outs);
    rc = rc ? cli_user_error(&err) : 0;
out:
    cli_model_opts_free(&a.m);
    return rc;
}
