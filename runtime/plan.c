/* plan.c — running a compiled plan: the arena and persistent buffers, the
 * binding of parameters, inputs and outputs, the checks of integer inputs,
 * and each launch split across the thread pool. */
#include "lrc_runtime.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

struct lrc_exec {
    const lrc_plan *plan;
    lrc_pool *pool;
    void *arena;
    void **ptr;          /* per buffer: where it is during a run */
    void **args;         /* a launch's arguments: room for the plan's longest */
    bool prepared;       /* the `once` launches ran for the bound parameters */
    double *times_ns;    /* profiling, or NULL */
    int64_t *calls;
    lrc_trace_event *events; /* tracing, or NULL */
    int64_t events_cap, *n_events;
    int64_t *iteration;  /* per back edge: the loop's current iteration */
};

void lrc_plan_free(lrc_plan *p)
{
    for (int i = 0; i < p->n_bufs; i++) free(p->bufs[i].name);
    for (int i = 0; i < p->n_launches; i++) {
        free(p->launches[i].symbol);
        free(p->launches[i].label);
        free(p->launches[i].args);
    }
    free(p->bufs);
    free(p->launches);
    free(p->checks);
    memset(p, 0, sizeof *p);
}

int lrc_exec_new(const lrc_plan *plan, lrc_pool *pool, lrc_exec **out, lrc_err *err)
{
    lrc_exec *x = lrc_calloc(1, sizeof *x);
    if (!x) return lrc_err_nomem(err, "for a plan's executor");
    x->plan = plan;
    x->pool = pool;
    x->ptr = lrc_calloc((size_t)plan->n_bufs + 1, sizeof(void *));
    int most = 0;
    for (int li = 0; li < plan->n_launches; li++) most = plan->launches[li].n_args > most ? plan->launches[li].n_args : most;
    x->args = lrc_calloc((size_t)most + 1, sizeof(void *));
    x->iteration = lrc_calloc((size_t)plan->n_launches + 1, sizeof(int64_t));
    if (!x->ptr || !x->args || !x->iteration) {
        lrc_exec_free(x);
        return lrc_err_nomem(err, "for the executor of a plan of %d buffers and %d launches", plan->n_bufs, plan->n_launches);
    }
    x->arena = lrc_alloc_data((size_t)plan->arena_bytes);
    if (!x->arena) {
        lrc_exec_free(x);
        return lrc_err_nomem(err, "for a %lld-byte arena", (long long)plan->arena_bytes);
    }
    for (int i = 0; i < plan->n_bufs; i++) {
        const lrc_plan_buf *b = &plan->bufs[i];
        if (b->kind == LRC_BUF_ARENA) x->ptr[i] = (char *)x->arena + b->offset;
        if ((b->kind == LRC_BUF_PERSIST || b->kind == LRC_BUF_STATE) && !(x->ptr[i] = lrc_alloc_data((size_t)b->bytes))) {
            lrc_exec_free(x);
            return lrc_err_nomem(err, "for %lld bytes of %s", (long long)b->bytes,
                                 b->kind == LRC_BUF_STATE ? "state (a KV cache)" : "packed weights or a kernel's scratch");
        }
        if (b->kind == LRC_BUF_PERSIST) memset(x->ptr[i], 0, (size_t)b->bytes); /* a scratch's counter starts at zero */
    }
    *out = x;
    lrc_exec_reset_state(x);
    return LRC_OK;
}

void lrc_exec_reset_state(lrc_exec *x)
{
    for (int i = 0; i < x->plan->n_bufs; i++)
        if (x->plan->bufs[i].kind == LRC_BUF_STATE) memset(x->ptr[i], 0, (size_t)x->plan->bufs[i].bytes);
}

void lrc_exec_free(lrc_exec *x)
{
    if (!x) return;
    for (int i = 0; x->ptr && i < x->plan->n_bufs; i++)
        if (x->plan->bufs[i].kind == LRC_BUF_PERSIST || x->plan->bufs[i].kind == LRC_BUF_STATE) free(x->ptr[i]);
    free(x->arena);
    free(x->ptr);
    free(x->args);
    free(x->iteration);
    free(x);
}

void lrc_exec_profile(lrc_exec *x, double *times_ns, int64_t *calls)
{
    x->times_ns = times_ns;
    x->calls = calls;
}

void lrc_exec_trace(lrc_exec *x, lrc_trace_event *events, int64_t cap, int64_t *n)
{
    x->events = events;
    x->events_cap = cap;
    x->n_events = n;
}

bool lrc_plan_buf_packs(const lrc_plan_buf *b, const char *name)
{
    if (b->kind != LRC_BUF_PARAM || !b->packed[0]) return false;
    const char *base = b->name, *colon = strchr(base, ':');
    if (!strncmp(base, "fold.", 5) && colon) base = colon + 1;
    size_t len = strlen(name);
    return !strncmp(base, name, len) && base[len] == '@';
}

int lrc_plan_find_tensor(const lrc_plan_buf *b, const lrc_tensor_set *set, const lrc_tensor **out, lrc_err *err)
{
    char b1[96], b2[96];
    const char *what = b->kind == LRC_BUF_PARAM ? "parameter" : "input";
    const lrc_tensor *t = lrc_tensor_set_find(set, b->name);
    if (!t) return lrc_err_set(err, "missing %s '%s'", what, b->name);
    if (t->dtype != b->dtype || !lrc_shape_eq(&t->shape, &b->shape))
        return lrc_err_set(err, "%s '%s' is %s %s, the program expects %s %s", what, b->name, lrc_dtype_st_name(t->dtype),
                           lrc_shape_str(&t->shape, b1, sizeof b1), lrc_dtype_st_name(b->dtype),
                           lrc_shape_str(&b->shape, b2, sizeof b2));
    *out = t;
    return LRC_OK;
}

int lrc_plan_check_ids(const lrc_plan *p, const lrc_tensor_set *inputs, lrc_err *err)
{
    /* a loop's iteration counts given as an input: none negative */
    for (int li = 0; li < p->n_launches; li++) {
        if (p->launches[li].loop_to < 0) continue;
        const lrc_plan_buf *b = &p->bufs[p->launches[li].args[2]];
        const lrc_tensor *t = b->kind == LRC_BUF_INPUT ? lrc_tensor_set_find(inputs, b->name) : NULL;
        if (!t || t->dtype != LRC_I32 || !lrc_shape_eq(&t->shape, &b->shape)) continue;
        for (int64_t i = 0; i < lrc_shape_numel(&t->shape); i++)
            if (((const int32_t *)t->data)[i] < 0)
                return lrc_err_set(err, "%s[%lld] = %d: a loop's iteration count must be 0 or more", b->name, (long long)i,
                                   ((const int32_t *)t->data)[i]);
    }
    for (int c = 0; c < p->n_checks; c++) {
        const lrc_plan_check *ck = &p->checks[c];
        const lrc_plan_buf *b = &p->bufs[ck->buf];
        const lrc_tensor *t = lrc_tensor_set_find(inputs, b->name);
        if (!t || t->dtype != LRC_I32 || !lrc_shape_eq(&t->shape, &b->shape)) continue; /* lrc_plan_find_tensor says what is wrong */
        const int32_t *v = t->data;
        int64_t n = lrc_shape_numel(&b->shape), last = b->shape.ndim ? b->shape.dim[b->shape.ndim - 1] : 1;
        for (int64_t i = 0; i < n; i++)
            if (v[i] < ck->lo || v[i] >= ck->hi)
                return lrc_err_set(err, "%s[%lld,%lld] = %d is outside [%lld, %lld)", b->name, (long long)(i / last),
                                   (long long)(i % last), v[i], (long long)ck->lo, (long long)ck->hi);
    }
    return LRC_OK;
}

bool lrc_loop_rows(const int32_t *counts, int64_t rows, int64_t t, void *state, const void *next, size_t row_bytes)
{
    int32_t most = 0;
    for (int64_t b = 0; b < rows; b++) {
        if (t < counts[b]) /* finished sequences keep their state */
            memcpy((char *)state + b * row_bytes, (const char *)next + b * row_bytes, row_bytes);
        if (counts[b] > most) most = counts[b];
    }
    return t + 1 < most;
}

bool lrc_plan_back_edge(const lrc_plan *p, int li, int64_t t, void *const *ptr)
{
    const lrc_plan_launch *l = &p->launches[li];
    const lrc_plan_buf *st = &p->bufs[l->args[0]];
    int64_t rows = st->shape.ndim ? st->shape.dim[0] : 1;
    return lrc_loop_rows(ptr[l->args[2]], rows, t, ptr[l->args[0]], ptr[l->args[1]], (size_t)(st->bytes / rows));
}

int lrc_exec_bind_params(lrc_exec *x, const lrc_tensor_set *params, lrc_err *err)
{
    for (int i = 0; i < x->plan->n_bufs; i++) {
        const lrc_plan_buf *b = &x->plan->bufs[i];
        if (b->kind != LRC_BUF_PARAM) continue;
        const lrc_tensor *t;
        int rc = lrc_plan_find_tensor(b, params, &t, err);
        if (rc) return rc;
        x->ptr[i] = t->data;
    }
    x->prepared = false;
    return LRC_OK;
}

void lrc_exec_params_changed(lrc_exec *x) { x->prepared = false; }

typedef struct {
    lrc_kernel_fn fn;
    void **args;
} task;

static void run_task(void *ctx, int64_t begin, int64_t end, int thread)
{
    (void)thread;
    task *t = ctx;
    t->fn(t->args, begin, end);
}

/* Launch li's kernel over its items; its args read from x->args, which
 * holds the longest launch's (a fused group may read any number of buffers). */
static int launch(lrc_exec *x, int li, lrc_err *err)
{
    const lrc_plan_launch *l = &x->plan->launches[li];
    for (int a = 0; a < l->n_args; a++) x->args[a] = x->ptr[l->args[a]];
    task t = {l->fn, x->args};
    bool timed = x->times_ns || x->events;
    double t0 = timed ? (1e9 * lrc_now_s()) : 0;
    int rc = l->steal ? lrc_pool_run_stealing(x->pool, run_task, &t, l->n_items, err) : lrc_pool_run(x->pool, run_task, &t, l->n_items, err);
    if (rc) return lrc_err_prefix(err, "%s", l->label && l->label[0] ? l->label : l->symbol);
    double dt = timed ? (1e9 * lrc_now_s()) - t0 : 0;
    if (x->times_ns) {
        x->times_ns[li] += dt;
        x->calls[li]++;
    }
    if (x->events && *x->n_events < x->events_cap) x->events[(*x->n_events)++] = (lrc_trace_event){li, t0, dt};
    return LRC_OK;
}

int lrc_exec_run_plan(lrc_exec *x, const lrc_tensor_set *inputs, lrc_tensor_set *outputs, lrc_err *err)
{
    const lrc_plan *p = x->plan;
    char b1[96], b2[96];
    int first_out = outputs->n, rc = LRC_OK;
    for (int i = 0; i < p->n_bufs && !rc; i++) {
        const lrc_plan_buf *b = &p->bufs[i];
        if (b->kind == LRC_BUF_INPUT) {
            const lrc_tensor *t;
            if (!(rc = lrc_plan_find_tensor(b, inputs, &t, err))) x->ptr[i] = t->data;
        } else if (b->kind == LRC_BUF_OUTPUT) {
            lrc_tensor *t = lrc_tensor_set_find(outputs, b->name);
            if (t && (t->dtype != b->dtype || !lrc_shape_eq(&t->shape, &b->shape)))
                rc = lrc_err_set(err, "output '%s' given as %s %s, the program writes %s %s", b->name,
                                 lrc_dtype_st_name(t->dtype), lrc_shape_str(&t->shape, b1, sizeof b1), lrc_dtype_st_name(b->dtype),
                                 lrc_shape_str(&b->shape, b2, sizeof b2));
            else if (t) x->ptr[i] = t->data; /* the caller's buffer, reused */
            else if (!(t = lrc_tensor_new_uninit(b->name, b->dtype, &b->shape, err)) || lrc_tensor_set_add(outputs, t, err))
                rc = LRC_EUSER;
            else x->ptr[i] = t->data;
        } else if (b->kind == LRC_BUF_PARAM && !x->ptr[i]) {
            rc = lrc_err_set(err, "parameter '%s' is not bound", b->name);
        }
    }
    if (!rc) rc = lrc_plan_check_ids(p, inputs, err);
    if (!rc && !x->prepared) {
        for (int li = 0; li < p->n_launches && !rc; li++)
            if (p->launches[li].once) rc = launch(x, li, err);
        x->prepared = !rc;
    }
    for (int li = 0; li < p->n_launches && !rc; li++) {
        if (p->launches[li].loop_to >= 0) { /* a loop's back edge */
            if (lrc_plan_back_edge(p, li, x->iteration[li], x->ptr)) {
                x->iteration[li]++;
                li = p->launches[li].loop_to - 1;
            } else {
                x->iteration[li] = 0;
            }
        } else if (!p->launches[li].once) {
            rc = launch(x, li, err);
        }
    }
    if (rc) /* no partial outputs */
        while (outputs->n > first_out) lrc_tensor_free(outputs->items[--outputs->n]);
    return rc;
}
