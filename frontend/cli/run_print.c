/* run_print.c — what the commands print about runs, shared by the target
 * entries: forward's timing line and a host's --repeat of a package,
 * LRC_PROFILE's quick look, and lrc profile's table of functions against
 * the machine's ceilings; and the rule for ref's and cpu's options. */
#include "cli_targets.h"

#include <stdlib.h>
#include <string.h>

void cli_print_times(const cli_args *a, double *ms, const lrc_tensor_set *in, int threads)
{
    for (int64_t i = 1; i < a->repeat; i++) /* insertion sort: a few runs */
        for (int64_t j = i; j > 0 && ms[j - 1] > ms[j]; j--) {
            double t = ms[j];
            ms[j] = ms[j - 1];
            ms[j - 1] = t;
        }
    const lrc_tensor *tok = lrc_tensor_set_find(in, "tokens");
    double med = ms[a->repeat / 2], tokens = tok ? (double)lrc_shape_numel(&tok->shape) : 0;
    printf("forward: median %.2f ms over %lld runs (min %.2f, max %.2f), %.0f tokens/s, %d threads\n", med,
           (long long)a->repeat, ms[0], ms[a->repeat - 1], tokens / (med / 1e3), threads);
}

int cli_target_host_time_session(const cli_args *a, lrc_session *s, const lrc_array *arr, const lrc_tensor_set *in, lrc_err *err)
{
    lrc_session_info info;
    int rc = lrc_session_describe(s, &info) ? cli_session_error(s, err) : LRC_OK;
    if (rc) return rc;
    double *ms = lrc_xmalloc((size_t)a->repeat * sizeof(double) + 8);
    /* steady state, as a serving loop runs: the outputs of one run are the
     * buffers of the next (every run still writes all of them) */
    for (int64_t r = 0; r < a->repeat && !rc; r++) {
        double t0 = lrc_now_s();
        if (lrc_session_run(s, arr, in->n)) rc = cli_session_error(s, err);
        ms[r] = 1e3 * (lrc_now_s() - t0);
    }
    if (!rc) cli_print_times(a, ms, in, info.threads);
    free(ms);
    return rc;
}

/* ref and cpu compute in f32 and are timed by the commands themselves. */
int cli_target_f32_check(const char *cmd, const cli_args *a, lrc_err *err)
{
    if (strcmp(cmd, "backward")) return LRC_OK;
    if (a->precision) return lrc_err_set(err, "--precision applies to --target cuda (ref and cpu compute in f32)"), EXIT_USER;
    /* it times the device's kernels; on ref and cpu it would be ignored without a word */
    if (a->repeat) return lrc_err_set(err, "--repeat applies to --target cuda (it times the kernels on the device)"), EXIT_USER;
    return LRC_OK;
}

static const double *quick_ns; /* what by_time compares */
static int by_quick_time(const void *a, const void *b)
{
    const double x = quick_ns[*(const int *)a], y = quick_ns[*(const int *)b];
    return x < y ? 1 : x > y ? -1 : *(const int *)a - *(const int *)b;
}

/* Prints the per-launch times gathered with LRC_PROFILE set, the launch
 * that took the most time in all first. */
void cli_print_quick_profile(const lrc_plan *plan, const double *ns, const int64_t *calls)
{
    double total = 0;
    int *order = lrc_xcalloc((size_t)plan->n_launches + 1, sizeof *order);
    for (int i = 0; i < plan->n_launches; i++) total += ns[i], order[i] = i;
    quick_ns = ns;
    qsort(order, (size_t)plan->n_launches, sizeof *order, by_quick_time);
    for (int k = 0; k < plan->n_launches; k++) {
        const int i = order[k];
        const lrc_plan_launch *l = &plan->launches[i];
        if (!calls[i]) continue;
        double ms = ns[i] / 1e6 / (double)calls[i];
        fprintf(stderr, "%8.3f ms %5.1f%% %8.1f GFLOP/s %7.1f GB/s  %s\n", ms, 100 * ns[i] / total,
                l->flops / (ms * 1e6), l->bytes / (ms * 1e6), l->label);
    }
    free(order);
}

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

