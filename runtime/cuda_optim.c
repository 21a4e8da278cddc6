/* cuda_optim.c — lrc train's AdamW on the device: the f32 master weights
 * (a bf16 weight's own buffer; an f32 weight is its graph buffer), the
 * moments and, with --accum, the summed gradients live in device memory,
 * and the training graph's gradients never leave it. Three kernels of the
 * training graph's module (codegen/cuda/render.c's OPTIMIZER) do the work,
 * each over every parameter in one launch; the host reads back only the
 * per-block sums of squares, for the global norm and the non-finite check,
 * and the state itself when a checkpoint is written. The kernels' settings
 * sit on the device, one slot each: those that never change written once,
 * AdamW's (the step's rate, clipping and bias corrections) once a step.
 * Over MPI ranks (lrc_cuda_optim_use_dist) the summed gradients go through
 * the host once a step: read back, summed over the ranks as the cpu's are
 * (lrc_dist_sum_tensors), averaged and written back, so that every rank's
 * AdamW takes the same average. */
#include "cuda_internal.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the kernels' opt_tensor and opt_hp, from the declaration their CUDA C is
 * generated from (lrc_cuda_abi.h), pointers as device addresses */
LRC_CUDA_OPT_STRUCTS(devptr, devptr, devptr)
typedef struct opt_tensor opt_tensor;
typedef struct opt_hp opt_hp;
_Static_assert(sizeof(opt_tensor) == LRC_CUDA_OPT_TENSOR_BYTES && sizeof(opt_hp) == LRC_CUDA_OPT_HP_BYTES,
               "the layouts codegen/cuda/prelude.c's optimizer kernels read");
_Static_assert(offsetof(opt_tensor, n) == 48 && offsetof(opt_hp, n_tensors) == 40, "no padding the device would lay out otherwise");
#define OPT_CHUNK LRC_CUDA_OPT_CHUNK
/* the settings' slots in d_hp, HP_STRIDE bytes apart */
enum { HP_SUMSQ, HP_SUMSQ_ACC, HP_ACC_FIRST, HP_ACC_MID, HP_ACC_LAST, HP_ADAMW, HP_SLOTS };
#define HP_STRIDE 64
_Static_assert(sizeof(opt_hp) <= HP_STRIDE, "a slot holds the settings");
#define OPT_BLOCK LRC_CUDA_OPT_BLOCK

struct lrc_cuda_optim {
    lrc_cuda_exec *x;
    lrc_adamw_cfg cfg;
    int n;
    int64_t accum, local; /* the step's micro-batches, over all ranks and on this one */
    lrc_dist *dist;
    lrc_tensor **host; /* over ranks: the summed gradients on their way through the host */
    lrc_tensor *const *params, *const *m, *const *v; /* the host's copies, the caller's */
    opt_tensor *tab;
    int *grad_buf; /* per tensor: the plan buffer of its gradient */
    int64_t blocks;
    devptr d_tab, d_hp, d_sq;
    double *sq; /* per block, read back */
    devptr *owned;
    size_t *owned_bytes;
    int n_owned;
    void *f_sumsq, *f_accum, *f_adamw;
};

/* bytes of device memory the optimizer owns, a guard region after them under LRC_CUDA_CHECK */
static int opt_alloc(lrc_cuda_optim *o, size_t bytes, devptr *p, const char *what, const char *name, lrc_err *err)
{
    cuda_api *a = &o->x->api;
    size_t pad = o->x->check ? GUARD : 0;
    int r = a->mem_alloc(p, (bytes ? bytes : 4) + pad);
    /* the model comes before cuBLASLt's workspace */
    if (r && lrc_cuda_lt_release(o->x)) r = a->mem_alloc(p, (bytes ? bytes : 4) + pad);
    if (r)
        return lrc_err_set(err, "cuda: out of device memory for the optimizer's %zu bytes of %s%s%s%s (AdamW keeps 12 bytes a parameter on the device)",
                           bytes, what, name ? " of '" : "", name ? name : "", name ? "'" : "");
    o->owned[o->n_owned] = *p;
    o->owned_bytes[o->n_owned++] = bytes ? bytes : 4;
    if (pad && (r = a->memset8(*p + (devptr)(bytes ? bytes : 4), GUARD_BYTE, pad))) return lrc_cuda_fail(o->x, r, "writing a guard region", err);
    return LRC_OK;
}

static int find_buf(const lrc_plan *p, lrc_buf_kind kind, const char *name)
{
    for (int i = 0; i < p->n_bufs; i++)
        if (p->bufs[i].kind == kind && p->bufs[i].name && !strcmp(p->bufs[i].name, name)) return i;
    return -1;
}

int lrc_cuda_optim_new(lrc_cuda_exec *x, lrc_tensor *const *params, lrc_tensor *const *m, lrc_tensor *const *v, int n,
                       const lrc_adamw_cfg *cfg, int64_t accum, lrc_cuda_optim **out, lrc_err *err)
{
    lrc_cuda_optim *o = lrc_calloc(1, sizeof *o);
    if (!o) return lrc_err_nomem(err, "cuda: for the optimizer");
    o->x = x, o->cfg = *cfg, o->n = n, o->accum = o->local = accum > 1 ? accum : 1, o->params = params, o->m = m, o->v = v;
    o->tab = lrc_calloc((size_t)n + 1, sizeof *o->tab);
    o->grad_buf = lrc_calloc((size_t)n + 1, sizeof *o->grad_buf);
    o->owned = lrc_calloc((size_t)(5 * n + 4), sizeof *o->owned);
    o->owned_bytes = lrc_calloc((size_t)(5 * n + 4), sizeof *o->owned_bytes);
    cuda_api *a = &x->api;
    int rc = LRC_OK, r = 0;
    if (!o->tab || !o->grad_buf || !o->owned || !o->owned_bytes)
        rc = lrc_err_nomem(err, "cuda: for the optimizer's table of %d tensors", n);
    else if (a->get_function(&o->f_sumsq, x->module, "lrc_opt_sumsq") || a->get_function(&o->f_accum, x->module, "lrc_opt_accum") ||
        a->get_function(&o->f_adamw, x->module, "lrc_opt_adamw"))
        rc = lrc_err_set(err, "cuda: the module has no optimizer kernels (not a training graph's)");
    for (int i = 0; i < n && !rc; i++) {
        const lrc_tensor *t = params[i];
        int pb = find_buf(x->plan, LRC_BUF_PARAM, t->name), gb = find_buf(x->plan, LRC_BUF_OUTPUT, t->name);
        if (pb < 0 || gb < 0) {
            rc = lrc_err_set(err, "cuda: the training graph has no %s for parameter '%s'", pb < 0 ? "buffer" : "gradient", t->name);
            break;
        }
        if (x->storage[gb] != LRC_CUDA_F32) {
            rc = lrc_err_set(err, "cuda: the gradient of '%s' is stored as %s, the optimizer reads f32", t->name, lrc_cuda_storage_name(x->storage[gb]));
            break;
        }
        opt_tensor *e = &o->tab[i];
        e->n = lrc_shape_numel(&t->shape);
        e->first_block = o->blocks;
        o->blocks += (e->n + OPT_CHUNK - 1) / OPT_CHUNK;
        e->decayed = t->shape.ndim >= 2 || cfg->decay_all;
        e->g = x->ptr[gb];
        size_t bytes = (size_t)e->n * 4;
        if (x->storage[pb] == LRC_CUDA_BF16) { /* the graph reads bf16, AdamW updates the f32 master */
            e->p16 = x->ptr[pb];
            if (!(rc = opt_alloc(o, bytes, &e->p, "master weights", t->name, err)) && (r = a->htod(e->p, t->data, bytes)))
                rc = lrc_cuda_fail(x, r, "copying the master weights", err);
        } else {
            e->p = x->ptr[pb];
        }
        if (!rc) rc = opt_alloc(o, bytes, &e->m, "moments", t->name, err);
        if (!rc) rc = opt_alloc(o, bytes, &e->v, "moments", t->name, err);
        if (!rc && o->accum > 1) rc = opt_alloc(o, bytes, &e->acc, "summed gradients", t->name, err);
        if (!rc && ((r = a->htod(e->m, m[i]->data, bytes)) || (r = a->htod(e->v, v[i]->data, bytes))))
            rc = lrc_cuda_fail(x, r, "copying the moments", err);
        if (!rc) x->on_device[gb] = true; /* lrc_cuda_exec_run leaves it here */
        o->grad_buf[i] = gb;
    }
    if (!rc && !(o->sq = lrc_calloc((size_t)o->blocks + 1, sizeof *o->sq))) rc = lrc_err_nomem(err, "cuda: for %lld sums", (long long)o->blocks);
    if (!rc) rc = opt_alloc(o, (size_t)n * sizeof *o->tab, &o->d_tab, "table", NULL, err);
    if (!rc) rc = opt_alloc(o, HP_SLOTS * HP_STRIDE, &o->d_hp, "settings", NULL, err);
    if (!rc) rc = opt_alloc(o, (size_t)o->blocks * sizeof *o->sq, &o->d_sq, "sums", NULL, err);
    if (!rc && (r = a->htod(o->d_tab, o->tab, (size_t)n * sizeof *o->tab))) rc = lrc_cuda_fail(x, r, "copying the optimizer's table", err);
    /* the settings that never change: the norms, and --accum's sums (the
     * last micro-batch's divides by K) */
    unsigned char slots[HP_SLOTS * HP_STRIDE] = {0};
    const opt_hp fixed[HP_ADAMW] = {{.n_tensors = n}, {.n_tensors = n, .from_acc = 1}, {.div = 1.f, .n_tensors = n, .first = 1},
                                    {.div = 1.f, .n_tensors = n}, {.div = (float)o->accum, .n_tensors = n}};
    for (int k = 0; k < HP_ADAMW; k++) memcpy(slots + k * HP_STRIDE, &fixed[k], sizeof fixed[k]);
    if (!rc && (r = a->htod(o->d_hp, slots, sizeof slots))) rc = lrc_cuda_fail(x, r, "copying the optimizer's settings", err);
    if (rc) {
        lrc_cuda_optim_free(o);
        return rc;
    }
    *out = o;
    return LRC_OK;
}

void lrc_cuda_optim_free(lrc_cuda_optim *o)
{
    if (!o) return;
    for (int i = 0; o->grad_buf && i < o->n; i++) o->x->on_device[o->grad_buf[i]] = false; /* the gradients come back to the host again */
    for (int i = 0; i < o->n_owned; i++) o->x->api.mem_free(o->owned[i]);
    free(o->owned);
    free(o->owned_bytes);
    free(o->tab);
    free(o->grad_buf);
    free(o->sq);
    for (int i = 0; o->host && i < o->n; i++) lrc_tensor_free(o->host[i]);
    free(o->host);
    free(o);
}

int lrc_cuda_optim_use_dist(lrc_cuda_optim *o, lrc_dist *d, lrc_err *err)
{
    int64_t size = lrc_dist_size(d);
    if (o->accum % size)
        return lrc_err_set(err, "%lld micro-batches a step cannot be shared by %lld ranks", (long long)o->accum, (long long)size);
    if (size == 1) return LRC_OK;
    o->dist = d, o->local = o->accum / size;
    if (!(o->host = lrc_calloc((size_t)o->n + 1, sizeof *o->host))) return lrc_err_nomem(err, "cuda: for the gradients' host copies");
    for (int i = 0; i < o->n; i++)
        if (!(o->host[i] = lrc_tensor_new(o->params[i]->name, LRC_F32, &o->params[i]->shape, err))) return LRC_EUSER;
    /* the last micro-batch only sums: the host divides, after the ranks' sum */
    const opt_hp last = {.div = 1.f, .n_tensors = o->n};
    int r = o->x->api.htod(o->d_hp + HP_ACC_LAST * HP_STRIDE, &last, sizeof last);
    return r ? lrc_cuda_fail(o->x, r, "copying the optimizer's settings", err) : LRC_OK;
}

/* The ranks' summed gradients through the host: read back, summed over the
 * ranks, divided by the step's micro-batches, written back. */
static int opt_sum_ranks(lrc_cuda_optim *o, lrc_err *err)
{
    cuda_api *a = &o->x->api;
    int r = 0;
    for (int i = 0; i < o->n && !r; i++) r = a->dtoh(o->host[i]->data, o->tab[i].acc, o->host[i]->nbytes);
    if (r) return lrc_cuda_fail(o->x, r, "reading the gradients back for the ranks' sum", err);
    if (lrc_dist_sum_tensors(o->dist, o->host, o->n, err)) return LRC_EUSER;
    for (int i = 0; i < o->n && !r; i++) {
        float *g = o->host[i]->data;
        for (int64_t k = 0; k < o->tab[i].n; k++) g[k] /= (float)o->accum;
        r = a->htod(o->tab[i].acc, g, o->host[i]->nbytes);
    }
    return r ? lrc_cuda_fail(o->x, r, "writing the ranks' average gradients", err) : LRC_OK;
}

/* One of the kernels over every parameter, with the settings in slot `slot`. */
static int opt_launch(lrc_cuda_optim *o, void *fn, const char *name, int slot, lrc_err *err)
{
    cuda_api *a = &o->x->api;
    int r;
    if (!o->blocks) return LRC_OK;
    devptr argv[3] = {o->d_tab, o->d_hp + (devptr)(slot * HP_STRIDE), o->d_sq};
    void *args[3] = {&argv[0], &argv[1], &argv[2]};
    if ((r = a->launch(fn, (unsigned)o->blocks, 1, 1, OPT_BLOCK, 1, 1, 0, NULL, args, NULL))) return lrc_cuda_fail(o->x, r, name, err);
    if (!o->x->check) return LRC_OK;
    char what[64];
    snprintf(what, sizeof what, "the optimizer's %s", name);
    int rc = lrc_cuda_check_guards(o->x, what, err);
    for (int i = 0; i < o->n_owned && !rc; i++) {
        if (!lrc_cuda_guard_intact(o->x, o->owned[i] + (devptr)o->owned_bytes[i], &r))
            return lrc_err_set(err, "cuda (LRC_CUDA_CHECK): %s wrote past the end of its buffer %d (%zu bytes)", what, i, o->owned_bytes[i]);
        if (r) return lrc_cuda_fail(o->x, r, "reading a guard region", err);
    }
    return rc;
}

/* The global norm of the gradients (or of their sums), from the blocks'
 * sums of squares; *bad = the first tensor with inf or nan, else -1. */
static int opt_norm(lrc_cuda_optim *o, bool from_acc, double *norm, int *bad, lrc_err *err)
{
    int rc = opt_launch(o, o->f_sumsq, "lrc_opt_sumsq", from_acc ? HP_SUMSQ_ACC : HP_SUMSQ, err), r;
    if (!rc && o->blocks && (r = o->x->api.dtoh(o->sq, o->d_sq, (size_t)o->blocks * sizeof *o->sq)))
        rc = lrc_cuda_fail(o->x, r, "reading the gradients' norm", err);
    double total = 0;
    *bad = -1;
    for (int i = 0; i < o->n && !rc; i++) {
        const opt_tensor *e = &o->tab[i];
        double s = 0;
        for (int64_t b = e->first_block; b < e->first_block + (e->n + OPT_CHUNK - 1) / OPT_CHUNK; b++) s += o->sq[b];
        if (!isfinite(s) && *bad < 0) *bad = i;
        total += s;
    }
    *norm = sqrt(total);
    return rc;
}

int lrc_cuda_optim_grads(lrc_cuda_optim *o, int64_t micro, double *norm, int *bad, lrc_err *err)
{
    int rc = opt_norm(o, false, norm, bad, err);
    if (rc || o->accum == 1 || *bad >= 0) return rc;
    bool last = micro == o->local - 1;
    /* one micro-batch a rank: the first's copy, which the host then sums */
    rc = opt_launch(o, o->f_accum, "lrc_opt_accum", micro == 0 ? HP_ACC_FIRST : last ? HP_ACC_LAST : HP_ACC_MID, err);
    if (!rc && last && o->dist) rc = opt_sum_ranks(o, err);
    if (!rc && last) { /* the norm of the average, not of the last micro-batch */
        int ignored;
        rc = opt_norm(o, true, norm, &ignored, err);
    }
    return rc;
}

int lrc_cuda_optim_step(lrc_cuda_optim *o, int64_t step, double lr, double grad_norm, lrc_err *err)
{
    /* runtime/train.c's lrc_adamw_step, the same constants rounded the same
     * way: in double, then to f32 once, as PyTorch's scalars */
    const lrc_adamw_cfg *c = &o->cfg;
    double scale = c->clip > 0 && grad_norm > c->clip ? c->clip / grad_norm : 1.0;
    double bc1 = 1 - pow(c->beta1, (double)(step + 1)), bc2 = 1 - pow(c->beta2, (double)(step + 1));
    opt_hp hp = {(float)c->beta1, (float)(1 - c->beta1), (float)c->beta2, (float)(1 - c->beta2), (float)scale,
                 (float)(1 - lr * c->weight_decay), (float)(-lr / bc1), (float)sqrt(bc2), (float)c->eps, 1.f, o->n, o->accum > 1, 0};
    int r = o->x->api.htod(o->d_hp + HP_ADAMW * HP_STRIDE, &hp, sizeof hp);
    return r ? lrc_cuda_fail(o->x, r, "copying the optimizer's settings", err) : opt_launch(o, o->f_adamw, "lrc_opt_adamw", HP_ADAMW, err);
}

int lrc_cuda_optim_download(lrc_cuda_optim *o, lrc_err *err)
{
    cuda_api *a = &o->x->api;
    int r = a->sync();
    for (int i = 0; i < o->n && !r; i++) {
        size_t bytes = (size_t)o->tab[i].n * 4;
        if (!(r = a->dtoh(o->params[i]->data, o->tab[i].p, bytes)) && !(r = a->dtoh(o->m[i]->data, o->tab[i].m, bytes)))
            r = a->dtoh(o->v[i]->data, o->tab[i].v, bytes);
    }
    return r ? lrc_cuda_fail(o->x, r, "reading the weights and moments back", err) : LRC_OK;
}

/* ---- lrc train's device on GPU 0 (trainer.c's loop) ----------------------- */

typedef struct {
    lrc_cuda_exec *x;
    lrc_cuda_optim *opt;
    bool host_current; /* the host's weights and moments are this step's */
} cuda_device;

static int cuda_run(void *dev, const lrc_tensor_set *in, lrc_tensor_set *outs, lrc_err *err)
{
    return lrc_cuda_exec_run(((cuda_device *)dev)->x, in, outs, err);
}

static int cuda_grads(void *dev, const lrc_tensor_set *outs, int64_t micro, double *norm, int *bad, lrc_err *err)
{
    (void)outs; /* the gradients stay on the device */
    return lrc_cuda_optim_grads(((cuda_device *)dev)->opt, micro, norm, bad, err);
}

static int cuda_update(void *dev, int64_t step, double lr, double norm, lrc_err *err)
{
    cuda_device *d = dev;
    d->host_current = false;
    return lrc_cuda_optim_step(d->opt, step, lr, norm, err);
}

/* read back once a step however many want it (a checkpoint, an evaluation on the CPU) */
static int cuda_to_host(void *dev, lrc_err *err)
{
    cuda_device *d = dev;
    if (d->host_current) return LRC_OK;
    int rc = lrc_cuda_optim_download(d->opt, err);
    d->host_current = rc == LRC_OK;
    return rc;
}

static void cuda_free(void *dev)
{
    cuda_device *d = dev;
    lrc_cuda_optim_free(d->opt);
    free(d);
}

static const lrc_train_device_ops cuda_ops = {cuda_run, cuda_grads, cuda_update, cuda_to_host, cuda_free};

int lrc_trainer_use_cuda(lrc_trainer *t, lrc_cuda_exec *x, lrc_err *err)
{
    if (t->zero) return lrc_err_set(err, "--zero 1 shards the cpu's AdamW: on --target cuda it has no effect, leave it out");
    cuda_device *d = lrc_calloc(1, sizeof *d);
    if (!d) return lrc_err_nomem(err, "cuda: for the trainer's device");
    d->x = x;
    t->ops = &cuda_ops;
    t->dev = d;
    int rc = lrc_cuda_optim_new(x, t->st.params.items, t->st.m, t->st.v, t->st.params.n, &t->adam, t->accum, &d->opt, err);
    return rc ? rc : lrc_cuda_optim_use_dist(d->opt, t->dist, err);
}
