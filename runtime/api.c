/* api.c — the embedding API (lrc.h) over the package loader and the
 * executor table (executors.c): a package runs on the executor of its
 * target. lrc forward and lrc generate run packages through it, so a
 * program embedding lrc gets the messages the command line prints. */
#include "lrc.h"
#include "lrc_runtime.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

_Static_assert(LRC_ARRAY_MAX_DIMS >= LRC_MAX_DIMS, "lrc_array holds every shape of the IR");

/* lrc_session_time keeps every run's time: a bound that keeps that small */
#define LRC_TIME_MAX_REPEAT 1000000

struct lrc_session {
    char *dir;
    lrc_package pkg;
    bool bound;           /* weights are bound, a run may start */
    const lrc_executor_ops *ex; /* the package's target's */
    lrc_exec_host host;
    void *x;              /* the executor of the package's own shape */
    lrc_tensor_set weights; /* bound: a host plan points into them; a device keeps them to replace some */
    lrc_tensor_set in, out, step_in;
    bool ran;             /* in holds the inputs of a run */
    bool opened;          /* lrc_session_open succeeded: the session may run */
    int64_t batch, seq, ctx, vocab, pos, iterations;
    char device[128];
    lrc_err err;
    /* A shorter run (fewer rows or positions than compiled) pads its inputs
     * to one of the compiled shapes, pkg.shapes[i] (opened on first use) or
     * the package's own (i = -1), and cuts the outputs back. */
    void **sx;              /* per shape */
    bool *sbound;           /* bound to the weights bound now */
    lrc_tensor_set pin, pout; /* the last shorter run's padded inputs and uncut outputs */
    int run_shape;          /* the shape that ran them */
    bool shorter;           /* the last run was a shorter one: s->out holds cut copies */
    lrc_tokenizer *tok;     /* the package's tokenizer.json, loaded on first use */
    lrc_ids tok_ids;        /* the last encode's */
    char *tok_text;         /* the last decode's */
};

static const lrc_dtype elem_dtype[] = {LRC_F32, LRC_BF16, LRC_F16, LRC_I32};

const char *lrc_version(void) { return LRC_PROJECT_VERSION; }

const char *lrc_status_string(lrc_status st)
{
    static const char *const names[] = {"ok", "package", "invalid", "device", "out of memory"}; /* by value, from 0 */
    return (unsigned)st < sizeof names / sizeof names[0] ? names[st] : "unknown status";
}

lrc_session_options lrc_session_default_options(void) { return (lrc_session_options){.threads = 0}; }

const char *lrc_session_error(const lrc_session *s) { return s ? s->err.msg : "no session (lrc_session_open failed or was not called)"; }

void *lrc_session_executor(struct lrc_session *s, const lrc_executor_ops **ops, const lrc_plan **plan)
{
    *ops = s->ex;
    *plan = &s->pkg.plan;
    return s->x;
}

/* Every call starts with an empty message and ends here on failure: one
 * line, though it quotes package.json's names; one that ran out of memory
 * (lrc_err_nomem) is NOMEM, whatever the caller took it for. */
static lrc_status fail(lrc_session *s, lrc_status st)
{
    if (!s->err.msg[0]) snprintf(s->err.msg, sizeof s->err.msg, "failed");
    lrc_err_one_line(&s->err, LRC_EUSER);
    return s->err.nomem ? LRC_STATUS_NOMEM : st;
}

/* lrc_session_open's session when it cannot allocate one: it did not open, so no call writes it; close leaves it. */
static lrc_session no_memory = {.err = {"out of memory for a session (lrc_session_open)", true}};

/* The shapes package.json's meta gives; the machine checked against what
 * the package was compiled for (its executor's open_host) and the
 * executor of its own shape made. */
static lrc_status read_meta(lrc_session *s, int threads)
{
    const lrc_package *k = &s->pkg;
    s->batch = k->batch;
    s->seq = k->seq;
    s->ctx = k->ctx;
    s->vocab = k->vocab;
    s->iterations = k->iterations;
    lrc_exec_host_opts ho = {.pkg = k, .dir = s->dir, .threads = threads};
    int st = s->ex->open_host(&ho, &s->host, &s->err);
    if (!st) snprintf(s->device, sizeof s->device, "%s", s->host.device);
    if (!st) st = s->ex->create(&(lrc_exec_source){.plan = &k->plan, .table = &k->cuda, .dir = s->dir}, &s->host, &s->x, &s->err);
    return st ? fail(s, (lrc_status)st) : LRC_STATUS_OK;
}

/* Whether set holds every parameter of the plan as it binds them (f32; on
 * an executor that binds half floats also bf16 or f16 of the right shape):
 * the executors' own messages,
 * checked before anything changes. */
static int check_params(const lrc_session *s, const lrc_tensor_set *set, lrc_err *err)
{
    for (int i = 0; i < s->pkg.plan.n_bufs; i++) {
        const lrc_plan_buf *b = &s->pkg.plan.bufs[i];
        if (b->kind != LRC_BUF_PARAM) continue;
        const lrc_tensor *t = lrc_tensor_set_find(set, b->name);
        if (s->ex->binds_half && t && (t->dtype == LRC_BF16 || t->dtype == LRC_F16) && lrc_shape_eq(&t->shape, &b->shape)) continue;
        if (lrc_plan_find_tensor(b, set, &t, err)) return LRC_EUSER;
    }
    return LRC_OK;
}

/* Binds set (checked, taken over) in place of the weights bound before,
 * which stay when it fails. */
static lrc_status bind_set(lrc_session *s, lrc_tensor_set *set, const char *what)
{
    int rc = check_params(s, set, &s->err);
    if (rc) {
        if (what) lrc_err_prefix(&s->err, "%s", what);
        lrc_tensor_set_clear(set);
        return fail(s, LRC_STATUS_INVALID);
    }
    rc = s->ex->bind(s->x, set, &s->err);
    if (rc) { /* a device failure: the check above found nothing wrong */
        lrc_tensor_set_clear(set);
        return fail(s, LRC_STATUS_DEVICE);
    }
    lrc_tensor_set_clear(&s->weights); /* the plan points into set now */
    s->weights = *set;
    lrc_tensor_set_init(set);
    s->bound = true;
    for (int i = 0; i < s->pkg.n_shapes; i++) s->sbound[i] = false; /* bound again before they run */
    return LRC_STATUS_OK;
}

/* Widens the tensors to f32 for a host plan (an executor that binds half
 * floats takes bf16 and f16 as they are; u8 is what the compiler packed,
 * bound as it is). */
static int widen(const lrc_session *s, lrc_tensor_set *set, const char *what, lrc_err *err)
{
    for (int i = 0; i < set->n; i++) {
        if (set->items[i]->dtype == LRC_I32)
            return lrc_err_set(err, "%s: tensor '%s' is I32, parameters are floats", what, set->items[i]->name);
        if (s->ex->binds_half || set->items[i]->dtype == LRC_F32 || set->items[i]->dtype == LRC_U8) continue;
        lrc_tensor *f = lrc_tensor_to_f32(set->items[i], err);
        if (!f) return LRC_EUSER;
        lrc_tensor_free(set->items[i]);
        set->items[i] = f;
    }
    return LRC_OK;
}

lrc_status lrc_session_open(const char *dir, const lrc_session_options *options, lrc_session **out)
{
    if (!out) return LRC_STATUS_INVALID;
    lrc_session *s = *out = lrc_calloc(1, sizeof *s);
    if (!s) return *out = &no_memory, LRC_STATUS_NOMEM;
    lrc_tensor_set_init(&s->weights);
    lrc_tensor_set_init(&s->in);
    lrc_tensor_set_init(&s->out);
    lrc_tensor_set_init(&s->step_in);
    lrc_tensor_set_init(&s->pin);
    lrc_tensor_set_init(&s->pout);
    lrc_session_options o = options ? *options : lrc_session_default_options();
    if (!dir) {
        lrc_err_set(&s->err, "no package directory given");
        return fail(s, LRC_STATUS_INVALID);
    }
    if (!(s->dir = lrc_strdup(dir))) return lrc_err_nomem(&s->err, "for the package's path %s", dir), fail(s, LRC_STATUS_INVALID);
    if (o.threads < 0 || o.threads > LRC_POOL_MAX_THREADS) {
        lrc_err_set(&s->err, "threads %d: the thread count must be at least 1 (0: all cores) and at most %d", o.threads,
                    LRC_POOL_MAX_THREADS);
        return fail(s, LRC_STATUS_INVALID);
    }
    if (lrc_package_load(dir, &s->pkg, &s->err)) return fail(s, LRC_STATUS_PACKAGE);
    s->ex = lrc_executor_for_package(s->pkg.target);
    int ns = s->pkg.n_shapes ? s->pkg.n_shapes : 1;
    s->sx = lrc_calloc((size_t)ns, sizeof *s->sx);
    s->sbound = lrc_calloc((size_t)ns, sizeof *s->sbound);
    if (!s->sx || !s->sbound) return lrc_err_nomem(&s->err, "for the executors of %d shapes of %s", ns, dir), fail(s, LRC_STATUS_INVALID);
    s->run_shape = -2; /* none yet */
    lrc_status st = read_meta(s, o.threads);
    if (st) return st;
    if (!s->pkg.has_weights) {
        s->opened = true;
        return LRC_STATUS_OK;
    }
    lrc_tensor_set w = s->pkg.weights; /* moved: the bound set is the package's own */
    lrc_tensor_set_init(&s->pkg.weights);
    char what[4200];
    snprintf(what, sizeof what, "%s/weights.safetensors", dir);
    if (widen(s, &w, what, &s->err)) {
        lrc_tensor_set_clear(&w);
        return fail(s, LRC_STATUS_PACKAGE);
    }
    st = bind_set(s, &w, what);
    s->opened = st == LRC_STATUS_OK;
    return st == LRC_STATUS_INVALID ? LRC_STATUS_PACKAGE : st; /* the package's own weights are its own fault */
}

void lrc_session_close(lrc_session *s)
{
    if (!s || s == &no_memory) return;
    for (int i = 0; s->sx && i < s->pkg.n_shapes; i++) /* missing: an open that ran out of memory */
        if (s->sx[i]) s->ex->destroy(s->sx[i]);
    free(s->sx);
    free(s->sbound);
    lrc_tensor_set_clear(&s->pin);
    lrc_tensor_set_clear(&s->pout);
    if (s->x) s->ex->destroy(s->x);
    lrc_exec_host_close(s->ex, &s->host);
    lrc_package_free(&s->pkg);
    lrc_tensor_set_clear(&s->weights);
    lrc_tensor_set_clear(&s->in);
    lrc_tensor_set_clear(&s->out);
    lrc_tensor_set_clear(&s->step_in);
    lrc_tokenizer_free(s->tok);
    lrc_ids_free(&s->tok_ids);
    free(s->tok_text);
    free(s->dir);
    free(s);
}

/* Calls on a session that did not open fail, keeping the message of its open. */
static bool usable(lrc_session *s)
{
    if (!s || !s->opened) return false;
    s->err.msg[0] = 0;
    s->err.nomem = false;
    return true;
}

static int n_inputs(const lrc_session *s)
{
    int n = 0;
    for (int i = 0; i < s->pkg.plan.n_bufs; i++) n += s->pkg.plan.bufs[i].kind == LRC_BUF_INPUT;
    return n;
}

lrc_status lrc_session_describe(lrc_session *s, lrc_session_info *info)
{
    if (!usable(s) || !info) return LRC_STATUS_INVALID;
    memset(info, 0, sizeof *info);
    snprintf(info->target, sizeof info->target, "%s", s->pkg.target);
    snprintf(info->device, sizeof info->device, "%s", s->device);
    info->batch = s->batch;
    info->seq = s->seq;
    info->shorter_batch = s->pkg.batch_prefix && s->ctx == 0;
    info->shorter_seq = s->pkg.seq_prefix && s->ctx == 0;
    info->context = s->ctx;
    info->vocab = s->vocab;
    info->position = s->pos;
    info->has_weights = s->bound;
    info->n_inputs = n_inputs(s);
    for (int i = 0; i < s->pkg.plan.n_bufs; i++) info->n_outputs += s->pkg.plan.bufs[i].kind == LRC_BUF_OUTPUT;
    info->threads = s->host.pool ? lrc_pool_threads(s->host.pool) : 0;
    info->sm = s->host.sm;
    return LRC_STATUS_OK;
}

static void to_array(const lrc_plan_buf *b, const lrc_tensor *t, lrc_array *out)
{
    memset(out, 0, sizeof *out);
    const lrc_dtype d = t ? t->dtype : b->dtype;
    const lrc_shape *sh = t ? &t->shape : &b->shape;
    out->name = t ? t->name : b->name;
    out->elem = d == LRC_I32 ? LRC_ELEM_I32 : d == LRC_BF16 ? LRC_ELEM_BF16 : d == LRC_F16 ? LRC_ELEM_F16 : LRC_ELEM_F32;
    out->ndim = sh->ndim;
    for (int i = 0; i < sh->ndim; i++) out->shape[i] = sh->dim[i];
    out->data = t ? t->data : NULL;
}

lrc_status lrc_session_input(lrc_session *s, int i, lrc_array *out)
{
    if (!usable(s) || !out) return LRC_STATUS_INVALID;
    for (int b = 0, k = 0; b < s->pkg.plan.n_bufs; b++)
        if (s->pkg.plan.bufs[b].kind == LRC_BUF_INPUT && k++ == i) {
            to_array(&s->pkg.plan.bufs[b], NULL, out);
            return LRC_STATUS_OK;
        }
    lrc_err_set(&s->err, "input %d: the package has %d inputs", i, n_inputs(s));
    return fail(s, LRC_STATUS_INVALID);
}

/* A copy of the caller's array as a tensor, its type and shape checked. */
static lrc_tensor *from_array(const lrc_array *a, int i, const char *what, lrc_err *err)
{
    if (!a->name) return lrc_err_set(err, "%s %d has no name", what, i), NULL;
    if ((unsigned)a->elem > LRC_ELEM_I32)
        return lrc_err_set(err, "%s '%s': element type %d is not one of lrc_elem", what, a->name, (int)a->elem), NULL;
    if (a->ndim < 0 || a->ndim > LRC_MAX_DIMS)
        return lrc_err_set(err, "%s '%s' has %d dimensions; lrc takes 0 to %d", what, a->name, a->ndim, LRC_MAX_DIMS), NULL;
    lrc_shape sh = {a->ndim, {0}};
    for (int d = 0; d < a->ndim; d++) {
        if (a->shape[d] < 0) return lrc_err_set(err, "%s '%s': dimension %d is %lld", what, a->name, d, (long long)a->shape[d]), NULL;
        sh.dim[d] = a->shape[d];
    }
    lrc_tensor *t = lrc_tensor_new_uninit(a->name, elem_dtype[a->elem], &sh, err);
    if (t && t->nbytes && !a->data) {
        lrc_err_set(err, "%s '%s' has no data", what, a->name);
        lrc_tensor_free(t);
        return NULL;
    }
    if (t && t->nbytes) memcpy(t->data, a->data, t->nbytes);
    return t;
}

/* Every tensor of set names a parameter of the package. */
static int known_params(const lrc_session *s, const lrc_tensor_set *set, const char *what, lrc_err *err)
{
    for (int i = 0; i < set->n; i++) {
        bool known = false, packed = false;
        for (int b = 0; b < s->pkg.plan.n_bufs && !known; b++) {
            const lrc_plan_buf *pb = &s->pkg.plan.bufs[b];
            known = pb->kind == LRC_BUF_PARAM && !strcmp(pb->name, set->items[i]->name);
            packed = packed || lrc_plan_buf_packs(pb, set->items[i]->name);
        }
        if (packed && !known)
            return lrc_err_set(err, "%s: tensor '%s' is packed into the package %s, which was compiled with its weights: compile it without "
                                    "--weights to bind others", what, set->items[i]->name, s->dir);
        if (!known) return lrc_err_set(err, "%s: extra tensor '%s' that the package %s does not have", what, set->items[i]->name, s->dir);
    }
    return LRC_OK;
}

lrc_status lrc_session_bind_weights_file(lrc_session *s, const char *path)
{
    if (!usable(s)) return LRC_STATUS_INVALID;
    if (!path) return lrc_err_set(&s->err, "no weights file given"), fail(s, LRC_STATUS_INVALID);
    lrc_tensor_set w;
    int rc = lrc_safetensors_load(path, &w, &s->err);
    if (!rc) rc = known_params(s, &w, path, &s->err);
    if (!rc) rc = widen(s, &w, path, &s->err);
    if (rc) {
        lrc_tensor_set_clear(&w);
        return fail(s, LRC_STATUS_INVALID);
    }
    return bind_set(s, &w, path);
}

lrc_status lrc_session_bind_weights(lrc_session *s, const lrc_array *weights, int n)
{
    if (!usable(s)) return LRC_STATUS_INVALID;
    if (n < 0 || (n > 0 && !weights)) return lrc_err_set(&s->err, "%d weights at %p", n, (const void *)weights), fail(s, LRC_STATUS_INVALID);
    lrc_tensor_set given, w;
    lrc_tensor_set_init(&given);
    lrc_tensor_set_init(&w);
    int rc = LRC_OK;
    for (int i = 0; i < n && !rc; i++) {
        lrc_tensor *t = from_array(&weights[i], i, "weight", &s->err);
        rc = t ? lrc_tensor_set_add(&given, t, &s->err) : LRC_EUSER; /* a duplicate is freed */
    }
    if (!rc) rc = known_params(s, &given, "weights", &s->err);
    if (!rc) rc = widen(s, &given, "weights", &s->err);
    /* the new set: the given tensors, then copies of the bound ones not given */
    if (!rc) { /* w is empty: it takes the given set whole, which cannot fail */
        w = given;
        lrc_tensor_set_init(&given);
    }
    for (int i = 0; i < s->weights.n && !rc; i++) {
        const lrc_tensor *old = s->weights.items[i];
        if (lrc_tensor_set_find(&w, old->name)) continue;
        lrc_tensor *t = lrc_tensor_new_uninit(old->name, old->dtype, &old->shape, &s->err);
        if (t) memcpy(t->data, old->data, t->nbytes);
        rc = t ? lrc_tensor_set_add(&w, t, &s->err) : LRC_EUSER;
    }
    lrc_tensor_set_clear(&given);
    if (rc) {
        lrc_tensor_set_clear(&w);
        return fail(s, LRC_STATUS_INVALID);
    }
    return bind_set(s, &w, NULL);
}

/* Appends to err's message (cut at its size). */
__attribute__((format(printf, 2, 3))) static void err_append(lrc_err *err, const char *fmt, ...)
{
    size_t n = strlen(err->msg);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg + n, sizeof err->msg - n, fmt, ap);
    va_end(ap);
}

/* The shape of buffer b for a run of rb rows and rt positions. */
static lrc_shape shape_for(const lrc_package *k, int b, int64_t rb, int64_t rt)
{
    lrc_shape sh = k->plan.bufs[b].shape;
    if (k->batch_axis[b] >= 0) sh.dim[k->batch_axis[b]] = rb;
    if (k->seq_axis[b] >= 0) sh.dim[k->seq_axis[b]] = rt;
    return sh;
}

/* The rows and positions the caller's inputs hold: each input's shape is
 * the compiled one but where the package's batch and sequence axes are,
 * which may be shorter; anything else is the one-line reason. */
static lrc_status request_shape(lrc_session *s, int64_t *rb, int64_t *rt)
{
    const lrc_package *k = &s->pkg;
    *rb = *rt = 0;
    for (int b = 0; b < k->plan.n_bufs; b++) {
        const lrc_plan_buf *pb = &k->plan.bufs[b];
        const lrc_tensor *t = pb->kind == LRC_BUF_INPUT ? lrc_tensor_set_find(&s->in, pb->name) : NULL;
        if (!t) continue;
        bool fits = t->dtype == pb->dtype && t->shape.ndim == pb->shape.ndim;
        for (int d = 0; d < pb->shape.ndim && fits; d++) {
            int64_t *got = d == k->batch_axis[b] ? rb : d == k->seq_axis[b] ? rt : NULL;
            fits = got ? t->shape.dim[d] >= 1 && t->shape.dim[d] <= pb->shape.dim[d] && (!*got || *got == t->shape.dim[d])
                       : t->shape.dim[d] == pb->shape.dim[d];
            if (got) *got = t->shape.dim[d];
        }
        if (fits) continue;
        if (k->batch_axis[b] < 0 && k->seq_axis[b] < 0) {
            const lrc_tensor *dummy;
            lrc_plan_find_tensor(pb, &s->in, &dummy, &s->err); /* "input 'tokens' is I32 [1,300], the program expects I32 [1,256]" */
        } else { /* "input 'tokens' is I32 [2,9], the package takes I32 [1..2,1..7]" */
            char got[96], want[160] = "[";
            size_t w = 1;
            for (int d = 0; d < pb->shape.ndim && w < sizeof want; d++)
                w += (size_t)snprintf(want + w, sizeof want - w, d == k->batch_axis[b] || d == k->seq_axis[b] ? "%s1..%lld" : "%s%lld",
                                      d ? "," : "", (long long)pb->shape.dim[d]);
            if (w < sizeof want) snprintf(want + w, sizeof want - w, "]");
            lrc_err_set(&s->err, "input '%s' is %s %s, the package takes %s %s", pb->name, lrc_dtype_st_name(t->dtype),
                        lrc_shape_str(&t->shape, got, sizeof got), lrc_dtype_st_name(pb->dtype), want);
        }
        /* one axis shorter than compiled, where the package runs only its own size: why */
        int at = t->shape.ndim == pb->shape.ndim ? -1 : -2;
        for (int d = 0; d < pb->shape.ndim && at != -2; d++)
            if (t->shape.dim[d] != pb->shape.dim[d]) at = at == -1 && t->shape.dim[d] < pb->shape.dim[d] ? d : -2;
        const char *why = at == 0 && !k->batch_prefix ? k->batch_fixed : at == 1 && !k->seq_prefix ? k->seq_fixed : "";
        if (at >= 0 && why[0] && !strstr(why, "no input has"))
            err_append(&s->err, " (%s runs only that %s: %s)", s->dir, at ? "length" : "batch", why);
        return fail(s, LRC_STATUS_INVALID);
    }
    if (!*rb) *rb = s->batch;
    if (!*rt) *rt = s->seq;
    return LRC_STATUS_OK;
}

/* Copies the box that src and dst share (their leading elements along
 * each axis): a shorter input into a padded one, or back. Same dtype and
 * rank. */
static void copy_box(const lrc_tensor *src, lrc_tensor *dst)
{
    int nd = src->shape.ndim;
    size_t es = lrc_dtype_size(src->dtype);
    int64_t box[LRC_MAX_DIMS], idx[LRC_MAX_DIMS] = {0}, rows = 1;
    for (int d = 0; d < nd; d++) {
        box[d] = src->shape.dim[d] < dst->shape.dim[d] ? src->shape.dim[d] : dst->shape.dim[d];
        if (d < nd - 1) rows *= box[d];
    }
    if (nd == 0) {
        memcpy(dst->data, src->data, es);
        return;
    }
    for (int64_t r = 0; r < rows && box[nd - 1] > 0; r++) {
        int64_t so = 0, doff = 0;
        for (int d = 0; d < nd - 1; d++) so = so * src->shape.dim[d] + idx[d], doff = doff * dst->shape.dim[d] + idx[d];
        memcpy((char *)dst->data + (size_t)(doff * dst->shape.dim[nd - 1]) * es,
               (const char *)src->data + (size_t)(so * src->shape.dim[nd - 1]) * es, (size_t)box[nd - 1] * es);
        for (int d = nd - 2; d >= 0 && ++idx[d] == box[d]; d--) idx[d] = 0;
    }
}

/* The package's output buffer named name, or -1. */
static int out_buf(const lrc_session *s, const char *name)
{
    for (int b = 0; b < s->pkg.plan.n_bufs; b++)
        if (s->pkg.plan.bufs[b].kind == LRC_BUF_OUTPUT && !strcmp(s->pkg.plan.bufs[b].name, name)) return b;
    return -1;
}

/* The smallest compiled shape that holds rb x rt: -1 (the package's own) or i (pkg.shapes[i]). */
static int pick_shape(const lrc_session *s, int64_t rb, int64_t rt)
{
    int best = -1;
    double cost = (double)s->batch * (double)s->seq;
    for (int i = 0; i < s->pkg.n_shapes; i++) {
        const lrc_package *v = &s->pkg.shapes[i];
        if (v->batch >= rb && v->seq >= rt && (double)v->batch * (double)v->seq < cost) best = i, cost = (double)v->batch * (double)v->seq;
    }
    return best;
}

/* Shape i's executor, made and bound to the weights on its first run. */
static lrc_status open_shape(lrc_session *s, int i)
{
    const lrc_package *v = &s->pkg.shapes[i];
    int rc = s->sx[i] ? LRC_OK : s->ex->create(&(lrc_exec_source){.plan = &v->plan, .table = &v->cuda, .dir = v->dir}, &s->host, &s->sx[i], &s->err);
    if (rc) return fail(s, (lrc_status)rc);
    if (s->sbound[i]) return LRC_STATUS_OK;
    rc = s->ex->bind(s->sx[i], &s->weights, &s->err);
    if (rc) return lrc_err_prefix(&s->err, "%s", v->dir), fail(s, LRC_STATUS_PACKAGE);
    s->sbound[i] = true;
    return LRC_STATUS_OK;
}

/* Runs shape i (-1: the package's own) on the inputs in pin. */
static lrc_status run_shape(lrc_session *s, int i)
{
    const lrc_plan *p = i < 0 ? &s->pkg.plan : &s->pkg.shapes[i].plan;
    if (lrc_plan_check_ids(p, &s->pin, &s->err)) return fail(s, LRC_STATUS_INVALID);
    int st = s->ex->run(i < 0 ? s->x : s->sx[i], &s->pin, &s->pout, &s->err);
    return st ? fail(s, (lrc_status)st) : LRC_STATUS_OK;
}

/* rb rows and rt positions, fewer than compiled: the inputs padded to the
 * smallest compiled shape that holds them (token ids with the lowest valid
 * one), run, and the outputs cut to rb x rt. Padding is never read by the
 * rows and positions kept: the compiler allowed the axis only where every
 * op keeps a prefix (ir/axes.c). */
static lrc_status run_shorter(lrc_session *s, int64_t rb, int64_t rt)
{
    int i = pick_shape(s, rb, rt);
    lrc_status st = i >= 0 ? open_shape(s, i) : LRC_STATUS_OK;
    if (st) return st;
    const lrc_plan *p = i < 0 ? &s->pkg.plan : &s->pkg.shapes[i].plan;
    if (i != s->run_shape) { /* another plan's buffers; the same plan's are filled again in place */
        lrc_tensor_set_clear(&s->pin);
        lrc_tensor_set_clear(&s->pout);
    }
    for (int b = 0; b < p->n_bufs; b++) {
        const lrc_plan_buf *pb = &p->bufs[b];
        const lrc_tensor *t = pb->kind == LRC_BUF_INPUT ? lrc_tensor_set_find(&s->in, pb->name) : NULL;
        if (!t) continue;
        lrc_tensor *pad = lrc_tensor_set_find(&s->pin, pb->name);
        if (pad) memset(pad->data, 0, pad->nbytes); /* the last run's rows and positions are padding now */
        else if (!(pad = lrc_tensor_new(pb->name, pb->dtype, &pb->shape, &s->err)) || lrc_tensor_set_add(&s->pin, pad, &s->err))
            return fail(s, LRC_STATUS_INVALID);
        for (int c = 0; c < p->n_checks; c++)
            if (p->checks[c].buf == b && pb->dtype == LRC_I32)
                for (int64_t e = 0; e < lrc_shape_numel(&pb->shape); e++) ((int32_t *)pad->data)[e] = (int32_t)p->checks[c].lo;
        copy_box(t, pad);
    }
    s->run_shape = i;
    if ((st = run_shape(s, i))) return st;
    /* cut into the outputs of the last run when they have these shapes: a serving loop's steady state */
    bool reuse = s->shorter && s->out.n == s->pout.n;
    for (int o = 0; o < s->pout.n && reuse; o++) {
        const lrc_tensor *t = s->pout.items[o], *c = s->out.items[o];
        int b = out_buf(s, t->name);
        lrc_shape sh = b >= 0 ? shape_for(&s->pkg, b, rb, rt) : t->shape;
        reuse = !strcmp(c->name, t->name) && lrc_shape_eq(&c->shape, &sh);
    }
    if (!reuse) lrc_tensor_set_clear(&s->out);
    for (int o = 0; o < s->pout.n; o++) {
        const lrc_tensor *t = s->pout.items[o];
        int b = out_buf(s, t->name);
        lrc_shape sh = b >= 0 ? shape_for(&s->pkg, b, rb, rt) : t->shape;
        lrc_tensor *cut = reuse ? s->out.items[o] : lrc_tensor_new_uninit(t->name, t->dtype, &sh, &s->err);
        if (!reuse && (!cut || lrc_tensor_set_add(&s->out, cut, &s->err))) return fail(s, LRC_STATUS_INVALID);
        copy_box(t, cut);
    }
    s->shorter = true;
    return LRC_STATUS_OK;
}

/* Runs the plan on s->in (inputs completed and checked): outputs into s->out. */
static lrc_status run_inputs(lrc_session *s)
{
    if (!s->bound) {
        lrc_err_set(&s->err, "%s was compiled without weights: bind them (lrc_session_bind_weights_file) before running", s->dir);
        return fail(s, LRC_STATUS_INVALID);
    }
    const lrc_plan *p = &s->pkg.plan;
    char names[512] = "";
    size_t used = 0;
    for (int i = 0; i < p->n_bufs; i++)
        if (p->bufs[i].kind == LRC_BUF_INPUT && used < sizeof names)
            used += (size_t)snprintf(names + used, sizeof names - used, "%s%s", used ? ", " : "", p->bufs[i].name);
    for (int i = 0; i < s->in.n; i++) {
        bool known = false;
        for (int b = 0; b < p->n_bufs && !known; b++) known = p->bufs[b].kind == LRC_BUF_INPUT && !strcmp(p->bufs[b].name, s->in.items[i]->name);
        if (!known) return lrc_err_set(&s->err, "unexpected tensor '%s' (the model's inputs: %s)", s->in.items[i]->name, names), fail(s, LRC_STATUS_INVALID);
    }
    int64_t rb, rt;
    lrc_status st = request_shape(s, &rb, &rt);
    if (st) return st;
    for (int b = 0; b < p->n_bufs; b++) { /* what a looped model can do without, for the rows and positions given */
        const lrc_plan_buf *want = &p->bufs[b];
        if (want->kind != LRC_BUF_INPUT || lrc_tensor_set_find(&s->in, want->name)) continue;
        lrc_shape sh = shape_for(&s->pkg, b, rb, rt);
        lrc_tensor *t = NULL;
        if (!strcmp(want->name, "iterations") && want->dtype == LRC_I32 && want->shape.ndim == 1 && s->iterations > 0) {
            /* its compile-time config's T for every row */
            if ((t = lrc_tensor_new("iterations", LRC_I32, &sh, &s->err)))
                for (int64_t k = 0; k < sh.dim[0]; k++) ((int32_t *)t->data)[k] = (int32_t)s->iterations;
        } else if (!strcmp(want->name, "h0") && want->dtype == LRC_F32 && want->shape.ndim >= 1) {
            /* its random initial state, from a fixed seed: the same every run (as lrc forward of a model) */
            if ((t = lrc_tensor_new("h0", LRC_F32, &sh, &s->err))) {
                lrc_rng r;
                lrc_rng_seed(&r, 0);
                lrc_fill_trunc_normal(t->data, lrc_shape_numel(&t->shape), sqrt(2.0 / (5.0 * (double)sh.dim[sh.ndim - 1])), &r);
            }
        } else {
            lrc_err_set(&s->err, "no tensor '%s' (the model's inputs: %s)", want->name, names);
        }
        if (!t || lrc_tensor_set_add(&s->in, t, &s->err)) return fail(s, LRC_STATUS_INVALID);
    }
    if (rb != s->batch || rt != s->seq) {
        if ((st = run_shorter(s, rb, rt))) return st;
        s->ran = true;
        return LRC_STATUS_OK;
    }
    if (s->shorter) lrc_tensor_set_clear(&s->out); /* cut copies: the run writes its own */
    s->shorter = false;
    if (lrc_plan_check_ids(p, &s->in, &s->err)) return fail(s, LRC_STATUS_INVALID);
    int rc = s->ex->run(s->x, &s->in, &s->out, &s->err);
    if (rc) return fail(s, (lrc_status)rc);
    s->ran = true; /* only a run that succeeded is one to repeat */
    return LRC_STATUS_OK;
}

lrc_status lrc_session_run(lrc_session *s, const lrc_array *inputs, int n)
{
    if (!usable(s)) return LRC_STATUS_INVALID;
    if (n < 0 || (n > 0 && !inputs)) return lrc_err_set(&s->err, "%d inputs at %p", n, (const void *)inputs), fail(s, LRC_STATUS_INVALID);
    lrc_tensor_set_clear(&s->in);
    s->ran = false;
    for (int i = 0; i < n; i++) {
        lrc_tensor *t = from_array(&inputs[i], i, "input", &s->err);
        if (!t || lrc_tensor_set_add(&s->in, t, &s->err)) return fail(s, LRC_STATUS_INVALID);
    }
    return run_inputs(s);
}

lrc_status lrc_session_output(lrc_session *s, const char *name, lrc_array *out)
{
    if (!usable(s) || !out) return LRC_STATUS_INVALID;
    const lrc_tensor *t = name ? lrc_tensor_set_find(&s->out, name) : NULL;
    if (!t) {
        lrc_err_set(&s->err, "no output '%s'%s", name ? name : "(null)", s->out.n ? "" : ": no run yet");
        return fail(s, LRC_STATUS_INVALID);
    }
    to_array(NULL, t, out);
    return LRC_STATUS_OK;
}

lrc_status lrc_session_output_at(lrc_session *s, int i, lrc_array *out)
{
    if (!usable(s) || !out) return LRC_STATUS_INVALID;
    if (i < 0 || i >= s->out.n) {
        lrc_err_set(&s->err, "output %d: the last run gave %d", i, s->out.n);
        return fail(s, LRC_STATUS_INVALID);
    }
    to_array(NULL, s->out.items[i], out);
    return LRC_STATUS_OK;
}

/* A decoder: anything else is refused with what to do. */
static bool decoder(lrc_session *s)
{
    if (s->ctx > 0) return true;
    lrc_err_set(&s->err, "%s was compiled for whole sequences: compile it with --ctx C to generate", s->dir);
    return false;
}

lrc_status lrc_session_step(lrc_session *s, int32_t token, const float **logits, int64_t *vocab)
{
    if (!usable(s)) return LRC_STATUS_INVALID;
    if (!decoder(s)) return fail(s, LRC_STATUS_INVALID);
    if (s->pos >= s->ctx) {
        lrc_err_set(&s->err, "the context holds %lld positions, all used: reset the session to start again", (long long)s->ctx);
        return fail(s, LRC_STATUS_INVALID);
    }
    if (!s->step_in.n) {
        lrc_shape one = {2, {1, 1}}, p1 = {1, {1}};
        lrc_tensor *tok = lrc_tensor_new("tokens", LRC_I32, &one, &s->err), *pos = tok ? lrc_tensor_new("pos", LRC_I32, &p1, &s->err) : NULL;
        if (!pos) lrc_tensor_free(tok);
        else if (lrc_tensor_set_add(&s->step_in, tok, &s->err)) lrc_tensor_free(pos); /* an add takes its tensor, failing or not */
        else lrc_tensor_set_add(&s->step_in, pos, &s->err);
        if (s->step_in.n < 2) return lrc_tensor_set_clear(&s->step_in), fail(s, LRC_STATUS_INVALID); /* both, or none kept */
    }
    ((int32_t *)s->step_in.items[0]->data)[0] = token;
    ((int32_t *)s->step_in.items[1]->data)[0] = (int32_t)s->pos;
    /* the step's inputs become the run's, so that lrc_session_time repeats the step */
    lrc_tensor_set_clear(&s->in);
    s->ran = false;
    for (int i = 0; i < s->step_in.n; i++) {
        const lrc_tensor *t = s->step_in.items[i];
        lrc_tensor *c = lrc_tensor_new_uninit(t->name, t->dtype, &t->shape, &s->err);
        if (!c || lrc_tensor_set_add(&s->in, c, &s->err)) return fail(s, LRC_STATUS_INVALID);
        memcpy(c->data, t->data, t->nbytes);
    }
    lrc_status st = run_inputs(s);
    if (st) return st;
    const lrc_tensor *lg = lrc_tensor_set_find(&s->out, "logits");
    if (!lg) lg = s->out.n ? s->out.items[0] : NULL;
    if (!lg) return lrc_err_set(&s->err, "%s: the decoder has no output", s->dir), fail(s, LRC_STATUS_PACKAGE);
    s->pos++;
    if (logits) *logits = lg->data;
    if (vocab) *vocab = lrc_shape_numel(&lg->shape);
    return LRC_STATUS_OK;
}

lrc_status lrc_session_reset(lrc_session *s)
{
    if (!usable(s)) return LRC_STATUS_INVALID;
    if (!decoder(s)) return fail(s, LRC_STATUS_INVALID);
    /* a step at position p writes the caches' row p and reads rows 0..p
     * only, so position 0 alone starts a new sequence on any executor; one
     * that can also clears its caches, as a fresh executor has them */
    if (s->ex->reset_state) s->ex->reset_state(s->x);
    s->pos = 0;
    return LRC_STATUS_OK;
}

lrc_status lrc_session_time(lrc_session *s, int64_t repeat, double *median_ms)
{
    if (!usable(s) || !median_ms) return LRC_STATUS_INVALID;
    if (!s->ran || repeat < 1 || repeat > LRC_TIME_MAX_REPEAT) {
        if (s->ran) lrc_err_set(&s->err, "repeat %lld: time between 1 and %d runs", (long long)repeat, LRC_TIME_MAX_REPEAT);
        else lrc_err_set(&s->err, "no run to repeat yet (repeat %lld)", (long long)repeat);
        return fail(s, LRC_STATUS_INVALID);
    }
    int i = s->shorter ? s->run_shape : -1; /* a shorter run: the padded shape's plan */
    lrc_status st = i >= 0 ? open_shape(s, i) : LRC_STATUS_OK; /* bound again if the weights changed since */
    if (st) return st;
    void *x = i < 0 ? s->x : s->sx[i];
    if (s->ex->time) {
        int rc = s->ex->time(x, repeat, median_ms, &s->err);
        return rc ? fail(s, (lrc_status)rc) : LRC_STATUS_OK;
    }
    lrc_tensor_set *in = s->shorter ? &s->pin : &s->in, *out = s->shorter ? &s->pout : &s->out;
    double *ms = lrc_malloc((size_t)repeat * sizeof(double));
    if (!ms) return lrc_err_nomem(&s->err, "for the times of %lld runs", (long long)repeat), fail(s, LRC_STATUS_INVALID);
    int rc = LRC_OK;
    for (int64_t r = 0; r < repeat && !rc; r++) {
        double t0 = lrc_now_s();
        rc = s->ex->run(x, in, out, &s->err); /* the outputs of one run are the buffers of the next */
        ms[r] = 1e3 * (lrc_now_s() - t0);
    }
    if (rc) { /* a median of the runs that happened would be a wrong figure */
        free(ms);
        return fail(s, (lrc_status)rc);
    }
    *median_ms = lrc_median(ms, repeat);
    free(ms);
    return LRC_STATUS_OK;
}

/* The package's tokenizer.json, once. */
static lrc_status session_tokenizer(lrc_session *s)
{
    if (s->tok) return LRC_STATUS_OK;
    char path[4200];
    struct stat st;
    snprintf(path, sizeof path, "%s/tokenizer.json", s->dir);
    if (stat(path, &st) != 0) {
        snprintf(s->err.msg, sizeof s->err.msg, "%.900s: the package has no tokenizer (compile it with --tokenizer)", s->dir);
        return LRC_STATUS_INVALID;
    }
    return lrc_tokenizer_load(path, &s->tok, &s->err) ? fail(s, LRC_STATUS_PACKAGE) : LRC_STATUS_OK;
}

lrc_status lrc_session_tokenize(lrc_session *s, const char *text, size_t len, int add_special, const int32_t **ids,
                                int64_t *n)
{
    if (!usable(s) || !ids || !n || (!text && len)) return LRC_STATUS_INVALID;
    lrc_status st = session_tokenizer(s);
    if (st) return st;
    s->tok_ids.n = 0;
    if (lrc_tokenizer_encode(s->tok, text ? text : "", len, add_special != 0, &s->tok_ids, &s->err)) return fail(s, LRC_STATUS_INVALID);
    *ids = s->tok_ids.ids, *n = s->tok_ids.n;
    return LRC_STATUS_OK;
}

lrc_status lrc_session_detokenize(lrc_session *s, const int32_t *ids, int64_t n, const char **text, size_t *len)
{
    if (!usable(s) || !text || !len || n < 0 || (!ids && n)) return LRC_STATUS_INVALID;
    lrc_status st = session_tokenizer(s);
    if (st) return st;
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= lrc_tokenizer_n_vocab(s->tok)) {
            snprintf(s->err.msg, sizeof s->err.msg, "id %d (at %lld) is outside the tokenizer's vocabulary of %lld", ids[i],
                     (long long)i, (long long)lrc_tokenizer_n_vocab(s->tok));
            return LRC_STATUS_INVALID;
        }
    free(s->tok_text);
    s->tok_text = NULL;
    if (lrc_tokenizer_decode(s->tok, ids, n, false, &s->tok_text, len, &s->err)) return fail(s, LRC_STATUS_INVALID);
    *text = s->tok_text;
    return LRC_STATUS_OK;
}
