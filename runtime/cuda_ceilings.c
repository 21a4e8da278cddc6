/* cuda_ceilings.c — what the device itself reaches, for lrc profile's
 * percentages: a device-to-device copy's bandwidth and a bf16 cuBLAS GEMM's
 * rate, each the median of 5 timed runs after a warm-up (CUDA events). */
#include "cuda_internal.h"

/* Milliseconds of fn(x, arg) on the device: the median of 5 after a warm-up. */
static int time_device(lrc_cuda_exec *x, int (*fn)(lrc_cuda_exec *, const void *), const void *arg, double *ms, lrc_err *err)
{
    void *ev[2] = {NULL, NULL};
    float t[5];
    int r = x->api.event_create(&ev[0], 0);
    if (!r) r = x->api.event_create(&ev[1], 0);
    if (!r) r = fn(x, arg);
    for (int k = 0; k < 5 && !r; k++) {
        if (!(r = x->api.event_record(ev[0], NULL)) && !(r = fn(x, arg)) && !(r = x->api.event_record(ev[1], NULL)) &&
            !(r = x->api.event_sync(ev[1])))
            r = x->api.event_elapsed(&t[k], ev[0], ev[1]);
        for (int j = k; j > 0 && t[j - 1] > t[j]; j--) {
            float s = t[j];
            t[j] = t[j - 1];
            t[j - 1] = s;
        }
    }
    for (int k = 0; k < 2; k++)
        if (ev[k]) x->api.event_destroy(ev[k]);
    *ms = r ? 0 : t[2];
    return r ? lrc_cuda_fail(x, r, "timing the device's ceilings", err) : LRC_OK;
}

typedef struct {
    devptr a, b, c;
    size_t bytes;
    int n;
} ceiling_job;

static int copy_job(lrc_cuda_exec *x, const void *arg)
{
    const ceiling_job *j = arg;
    return x->api.dtod(j->b, j->a, j->bytes);
}

static int gemm_job(lrc_cuda_exec *x, const void *arg)
{
    const ceiling_job *j = arg;
    const float one = 1.f, zero = 0.f;
    return x->api.gemm_ex(x->blas, OP_N, OP_N, j->n, j->n, j->n, &one, (void *)j->a, R_16BF, j->n, (void *)j->b, R_16BF, j->n, &zero,
                          (void *)j->c, R_16BF, j->n, COMPUTE_32F, GEMM_DEFAULT);
}

int lrc_cuda_measure_ceilings(lrc_cuda_exec *x, int64_t device_bytes, double *copy_gbs, double *gemm_gflops, lrc_err *err)
{
    /* buffers of a sixteenth of the device at most: a copy of up to 1 GiB,
     * a bf16 GEMM of up to 8192^3 */
    size_t budget = (size_t)(device_bytes > 0 ? device_bytes : (int64_t)1 << 30) / 16;
    ceiling_job j = {0, 0, 0, budget / 2 < ((size_t)1 << 30) ? budget / 2 : (size_t)1 << 30, 8192};
    while (j.n > 256 && (size_t)3 * j.n * j.n * 2 > budget) j.n -= 256;
    double ms = 0;
    int r = x->api.mem_alloc(&j.a, j.bytes);
    if (!r && !(r = x->api.mem_alloc(&j.b, j.bytes)) && !(r = x->api.memset8(j.a, 0, j.bytes))) {
        int rc = time_device(x, copy_job, &j, &ms, err);
        if (rc) r = -1;
        *copy_gbs = ms > 0 ? 2.0 * (double)j.bytes / (ms * 1e6) : 0;
    }
    if (!r) r = x->api.mem_alloc(&j.c, (size_t)j.n * j.n * 2);
    if (!r && !(r = x->api.memset8(j.b, 0, (size_t)j.n * j.n * 2))) { /* zeros: no overflow, the same work */
        int rc = time_device(x, gemm_job, &j, &ms, err);
        if (rc) r = -1;
        *gemm_gflops = ms > 0 ? 2.0 * j.n * (double)j.n * j.n / (ms * 1e6) : 0;
    }
    if (j.a) x->api.mem_free(j.a);
    if (j.b) x->api.mem_free(j.b);
    if (j.c) x->api.mem_free(j.c);
    if (r > 0) return lrc_err_set(err, "cuda: out of device memory for the ceilings' %zu-byte buffers", j.bytes);
    return r ? LRC_EUSER : LRC_OK;
}
