/* profile.c — the ceilings a profile compares kernels against (copy
 * bandwidth, FMA throughput, both measured on this machine and thread
 * count) and traces in Chrome's JSON format. */
#include "lrc_runtime.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double lrc_now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct {
    char *src, *dst;
    size_t chunk, bytes;
} copy_job;

static void copy_part(void *ctx, int64_t begin, int64_t end, int thread)
{
    (void)thread;
    copy_job *j = ctx;
    for (int64_t i = begin; i < end; i++) {
        size_t off = (size_t)i * j->chunk, n = off + j->chunk > j->bytes ? j->bytes - off : j->chunk;
        memcpy(j->dst + off, j->src + off, n);
    }
}

double lrc_measure_copy_gbs(lrc_pool *pool, size_t bytes)
{
    copy_job j = {lrc_alloc_data(bytes), lrc_alloc_data(bytes), (size_t)1 << 20, bytes};
    if (!j.src || !j.dst) {
        free(j.src);
        free(j.dst);
        return 0;
    }
    memset(j.src, 1, bytes);
    memset(j.dst, 0, bytes);
    int64_t chunks = (int64_t)((bytes + j.chunk - 1) / j.chunk);
    double t[7] = {0};
    bool ran = true; /* false: the pool was busy (a nested run), nothing measured */
    for (int r = 0; r < 7 && ran; r++) {
        double t0 = lrc_now_s();
        ran = !lrc_pool_run(pool, copy_part, &j, chunks, NULL);
        t[r] = lrc_now_s() - t0;
    }
    qsort(t, 7, sizeof t[0], cmp);
    free(j.src);
    free(j.dst);
    return ran ? 2.0 * (double)bytes / t[3] / 1e9 : 0;
}

typedef struct {
    lrc_kernel_fn fn;
    float *sink;
} peak_job;

static void peak_part(void *ctx, int64_t begin, int64_t end, int thread)
{
    peak_job *j = ctx;
    void *args[1] = {&j->sink[thread * 16]};
    j->fn(args, begin, end);
}

double lrc_measure_peak_gflops(lrc_pool *pool, lrc_kernel_fn probe, double flops_per_item)
{
    int threads = lrc_pool_threads(pool);
    float *sink = lrc_calloc((size_t)threads * 16, sizeof(float));
    if (!sink) return 0; /* unknown, as when a run fails */
    peak_job j = {probe, sink};
    int64_t items = 4 * (int64_t)threads;
    double t[5] = {0};
    bool ran = true; /* as in lrc_measure_copy_gbs */
    for (int r = 0; r < 5 && ran; r++) {
        double t0 = lrc_now_s();
        ran = !lrc_pool_run(pool, peak_part, &j, items, NULL);
        t[r] = lrc_now_s() - t0;
    }
    qsort(t, 5, sizeof t[0], cmp);
    free(sink);
    return ran ? flops_per_item * (double)items / t[2] / 1e9 : 0;
}

int lrc_trace_write(const char *path, const lrc_plan *plan, const lrc_trace_event *ev, int64_t n, lrc_err *err)
{
    cJSON *root = cJSON_CreateObject(), *list = cJSON_AddArrayToObject(root, "traceEvents");
    double origin = n ? ev[0].start_ns : 0;
    for (int64_t i = 0; i < n; i++) {
        const lrc_plan_launch *l = &plan->launches[ev[i].launch];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "name", l->label && *l->label ? l->label : l->symbol);
        cJSON_AddStringToObject(e, "cat", l->symbol);
        cJSON_AddStringToObject(e, "ph", "X");
        cJSON_AddNumberToObject(e, "ts", (ev[i].start_ns - origin) / 1e3); /* microseconds */
        cJSON_AddNumberToObject(e, "dur", ev[i].dur_ns / 1e3);
        cJSON_AddNumberToObject(e, "pid", 1);
        cJSON_AddNumberToObject(e, "tid", 1);
        cJSON *args = cJSON_AddObjectToObject(e, "args");
        cJSON_AddNumberToObject(args, "flops", l->flops);
        cJSON_AddNumberToObject(args, "bytes", l->bytes);
        cJSON_AddNumberToObject(args, "work_items", (double)l->n_items);
        cJSON_AddItemToArray(list, e);
    }
    cJSON_AddStringToObject(root, "displayTimeUnit", "ms");
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    int rc = lrc_write_atomic(path, text, strlen(text), err);
    cJSON_free(text);
    return rc;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double lrc_median(double *v, int64_t n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double); /* n log n: a timer may keep a million runs */
    return v[n / 2];
}
