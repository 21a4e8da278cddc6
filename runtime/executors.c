/* executors.c — the table of executors (lrc_runtime.h, lrc_executor_ops):
 * ref, the interpreter over a graph on the reference backend; cpu, a
 * compiled plan on the thread pool (plan.c, pool.c); cuda, a compiled plan
 * on GPU 0 (cuda_exec.c). A new target adds one entry here. */
#include "lrc.h"
#include "lrc_runtime.h"

#include <stdlib.h>
#include <string.h>

/* ---- ref: the plain-C reference, op by op ------------------------------- */

typedef struct ref_exec {
    lrc_backend *be;
    const lrc_graph *g;
    const lrc_tensor_set *params; /* bound (borrowed) */
} ref_exec;

static int ref_create(const lrc_exec_source *src, const lrc_exec_host *h, void **x, lrc_err *err)
{
    (void)h;
    ref_exec *r = lrc_calloc(1, sizeof *r);
    if (!r) return lrc_err_nomem(err, "for the ref executor"), LRC_STATUS_NOMEM;
    r->g = src->g;
    if (!(r->be = lrc_backend_open("ref", err))) {
        free(r);
        return LRC_STATUS_INVALID;
    }
    *x = r;
    return LRC_STATUS_OK;
}

/* the interpreter reads parameters as they are bound */
static int ref_bind(void *x, const lrc_tensor_set *params, lrc_err *err)
{
    (void)err;
    ((ref_exec *)x)->params = params;
    return LRC_STATUS_OK;
}

static int ref_run(void *x, const lrc_tensor_set *in, lrc_tensor_set *out, lrc_err *err)
{
    ref_exec *r = x;
    return lrc_exec_run(r->be, r->g, in, r->params, out, err) ? LRC_STATUS_INVALID : LRC_STATUS_OK;
}

static void ref_destroy(void *x)
{
    ref_exec *r = x;
    if (!r) return;
    lrc_backend_close(r->be);
    free(r);
}

const lrc_executor_ops lrc_executor_ref = {
    .name = "ref",
    .create = ref_create,
    .bind = ref_bind,
    .run = ref_run,
    .destroy = ref_destroy,
};

/* ---- cpu: a compiled plan on the thread pool ------------------------------ */

static int cpu_open_host(const lrc_exec_host_opts *o, lrc_exec_host *h, lrc_err *err)
{
    if (o->pkg) {
        /* a package runs on CPUs with the features it was compiled for */
        if (lrc_cpu_check_features(o->pkg->requires[0] ? o->pkg->requires : "avx2,fma", err)) return LRC_STATUS_PACKAGE;
        snprintf(h->device, sizeof h->device, "%s", o->pkg->cpu);
    }
    if ((h->pool = o->pool)) return LRC_STATUS_OK;
    h->pool = lrc_pool_new(o->threads > 0 ? o->threads : lrc_pool_default_threads(), err);
    h->own_pool = h->pool != NULL;
    return h->pool ? LRC_STATUS_OK : LRC_STATUS_INVALID;
}

static void cpu_close_host(lrc_exec_host *h)
{
    if (h->own_pool) lrc_pool_free(h->pool);
}

static int cpu_create(const lrc_exec_source *src, const lrc_exec_host *h, void **x, lrc_err *err)
{
    lrc_exec *e = NULL;
    int rc = lrc_exec_new(src->plan, h->pool, &e, err);
    *x = e;
    return rc ? LRC_STATUS_INVALID : LRC_STATUS_OK;
}

static int cpu_bind(void *x, const lrc_tensor_set *params, lrc_err *err) { return lrc_exec_bind_params(x, params, err); }

static int cpu_run(void *x, const lrc_tensor_set *in, lrc_tensor_set *out, lrc_err *err)
{
    return lrc_exec_run_plan(x, in, out, err) ? LRC_STATUS_INVALID : LRC_STATUS_OK;
}

static void cpu_profile(void *x, double *ns, int64_t *calls) { lrc_exec_profile(x, ns, calls); }

static void cpu_trace(void *x, lrc_trace_event *ev, int64_t cap, int64_t *n) { lrc_exec_trace(x, ev, cap, n); }

static void cpu_reset_state(void *x) { lrc_exec_reset_state(x); }

static int cpu_train(void *x, const lrc_exec_host *h, lrc_trainer *tr, lrc_err *err) { return lrc_trainer_use_cpu(tr, x, h->pool, err); }

static void cpu_destroy(void *x) { lrc_exec_free(x); }

const lrc_executor_ops lrc_executor_cpu = {
    .name = "cpu",
    .open_host = cpu_open_host,
    .close_host = cpu_close_host,
    .create = cpu_create,
    .bind = cpu_bind,
    .run = cpu_run,
    .profile = cpu_profile,
    .trace = cpu_trace,
    .reset_state = cpu_reset_state,
    .train = cpu_train,
    .destroy = cpu_destroy,
};

/* ---- cuda: a compiled plan on GPU 0 ---------------------------------------- */

static int cuda_open_host(const lrc_exec_host_opts *o, lrc_exec_host *h, lrc_err *err)
{
    lrc_cuda_device dev;
    char why[256];
    int sm = o->pkg && strlen(o->pkg->arch) > 3 ? atoi(o->pkg->arch + 3) : 0; /* "sm_90" */
    if (lrc_cuda_probe(&dev, why, sizeof why)) {
        if (o->pkg) lrc_err_set(err, "%s is compiled for cuda (sm_%d) and this machine cannot run it: %s", o->dir, sm, why);
        else lrc_err_set(err, "%s", why);
        return LRC_STATUS_DEVICE;
    }
    snprintf(h->device, sizeof h->device, "%s", dev.name);
    h->sm = dev.sm;
    h->sms = dev.sms;
    h->memory_bytes = dev.memory_bytes;
    if (!o->pkg) return LRC_STATUS_OK;
    if (dev.sm < sm) {
        lrc_err_set(err, "%s is compiled for sm_%d, and %s is sm_%d: compile it again with --arch sm_%d", o->dir, sm, dev.name, dev.sm,
                    dev.sm);
        return LRC_STATUS_DEVICE;
    }
    /* the cubin for its own architecture; PTX, compiled by the driver, for a newer one */
    h->cubin = dev.sm == sm;
    return LRC_STATUS_OK;
}

static int cuda_create(const lrc_exec_source *src, const lrc_exec_host *h, void **x, lrc_err *err)
{
    void *image = src->image ? NULL : lrc_package_cuda_image(src->dir, h->cubin, err);
    if (!src->image && !image) return LRC_STATUS_PACKAGE;
    lrc_cuda_exec *e = NULL;
    int rc = lrc_cuda_exec_new(src->plan, src->table, src->image ? src->image : image, &e, err);
    free(image);
    *x = e;
    return rc ? LRC_STATUS_DEVICE : LRC_STATUS_OK;
}

static int cuda_bind(void *x, const lrc_tensor_set *params, lrc_err *err) { return lrc_cuda_exec_bind_params(x, params, err); }

static int cuda_run(void *x, const lrc_tensor_set *in, lrc_tensor_set *out, lrc_err *err)
{
    return lrc_cuda_exec_run(x, in, out, err) ? LRC_STATUS_DEVICE : LRC_STATUS_OK;
}

static int cuda_time(void *x, int64_t repeat, double *median_ms, lrc_err *err)
{
    return lrc_cuda_exec_time(x, repeat, median_ms, err) ? LRC_STATUS_DEVICE : LRC_STATUS_OK;
}

static void cuda_profile(void *x, double *ns, int64_t *calls) { lrc_cuda_exec_profile(x, ns, calls); }

static void cuda_trace(void *x, lrc_trace_event *ev, int64_t cap, int64_t *n) { lrc_cuda_exec_trace(x, ev, cap, n); }

static int cuda_train(void *x, const lrc_exec_host *h, lrc_trainer *tr, lrc_err *err)
{
    (void)h;
    return lrc_trainer_use_cuda(tr, x, err);
}

static void cuda_destroy(void *x) { lrc_cuda_exec_free(x); }

const lrc_executor_ops lrc_executor_cuda = {
    .name = "cuda",
    .binds_half = true,
    .open_host = cuda_open_host,
    .create = cuda_create,
    .bind = cuda_bind,
    .run = cuda_run,
    .time = cuda_time,
    .profile = cuda_profile,
    .trace = cuda_trace,
    .train = cuda_train,
    .destroy = cuda_destroy,
};

/* ---- the table --------------------------------------------------------------- */

const lrc_executor_ops *const lrc_executors[] = {&lrc_executor_ref, &lrc_executor_cpu, &lrc_executor_cuda};
const int lrc_n_executors = (int)(sizeof lrc_executors / sizeof lrc_executors[0]);

const lrc_executor_ops *lrc_executor_find(const char *name)
{
    for (int i = 0; name && i < lrc_n_executors; i++)
        if (!strcmp(lrc_executors[i]->name, name)) return lrc_executors[i];
    return NULL;
}

const lrc_executor_ops *lrc_executor_for_package(const char *name)
{
    const lrc_executor_ops *e = lrc_executor_find(name);
    for (int i = 0; (!e || !e->open_host) && i < lrc_n_executors; i++) e = lrc_executors[i];
    return e;
}

void lrc_exec_host_close(const lrc_executor_ops *ops, lrc_exec_host *h)
{
    if (ops && ops->close_host) ops->close_host(h);
    memset(h, 0, sizeof *h);
}
