/* cmd_profile.c — lrc profile: every kernel of a forward pass timed over
 * repeated runs, against ceilings measured on this machine at the same
 * thread count (the FMA probe of the program, a large copy), and a trace
 * that Perfetto and chrome://tracing open. */
#include "cli_targets.h"

#include <stdlib.h>
#include <string.h>

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
    /* a package's own target, else --target's; one not known here: the default's (which says what it takes) */
    const lrc_target *t = pkg ? lrc_target_of_package(a.m.model) : lrc_target_find(a.target);
    if (!t || !cli_target_of(t)->profile_command) t = lrc_targets[0];
    rc = cli_target_of(t)->profile_command(&a, pkg, repeat, trace);
out:
    cli_model_opts_free(&a.m);
    return rc;
}
