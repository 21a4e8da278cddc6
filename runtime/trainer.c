/* trainer.c — lrc train's loop: micro-batches through the training graph,
 * the gradients checked and averaged, AdamW at the scheduled rate, and a
 * checkpoint at every evaluation and on an interrupt. Where the step runs
 * is a device (lrc_train_device_ops): this CPU's compiled plan here, GPU 0
 * in cuda_optim.c. What the data is and what a step reports are the
 * caller's hooks, so that the loop knows neither text nor images nor the
 * progress line. */
#include "lrc_runtime.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- the CPU: the compiled plan, AdamW on the thread pool ----------------- */

typedef struct {
    lrc_exec *x;
    lrc_pool *pool;
    lrc_param_spans *spans;
    const lrc_adamw_cfg *adam;
    lrc_tensor **items, **pg, **pm, **pv; /* the parameters, their gradients and moments */
    lrc_tensor **acc;                     /* --accum K: the micro-batches' gradients summed */
    int n;
    int64_t accum, local; /* the step's micro-batches, over all ranks and on this one */
    lrc_dist *dist;
    lrc_zero *zero; /* --zero 1: this rank's shard of the moments */
} cpu_device;

static int cpu_run(void *dev, const lrc_tensor_set *in, lrc_tensor_set *outs, lrc_err *err)
{
    return lrc_exec_run_plan(((cpu_device *)dev)->x, in, outs, err);
}

/* The gradients are the graph's outputs named as the parameters; with
 * --accum they are summed here (micro counts this rank's micro-batches),
 * over the ranks after this rank's last, and then averaged: the norm of
 * the last call is that of the average. */
static int cpu_grads(void *dev, const lrc_tensor_set *outs, int64_t micro, double *norm, int *bad, lrc_err *err)
{
    cpu_device *s = dev;
    for (int i = 0; i < s->n; i++) s->pg[i] = lrc_tensor_set_find(outs, s->items[i]->name);
    if (lrc_grads_check(s->pool, s->spans, s->pg, norm, bad, err)) return LRC_EUSER;
    if (*bad >= 0 || !s->acc) return LRC_OK;
    for (int i = 0; i < s->n; i++) {
        const float *gd = s->pg[i]->data;
        int64_t count = lrc_shape_numel(&s->pg[i]->shape);
        float *a = s->acc[i]->data;
        for (int64_t k = 0; k < count; k++) a[k] = micro ? a[k] + gd[k] : gd[k];
    }
    if (micro != s->local - 1) return LRC_OK;
    if (s->dist && lrc_dist_sum_tensors(s->dist, s->acc, s->n, err)) return LRC_EUSER;
    for (int i = 0; i < s->n; i++) {
        float *a = s->acc[i]->data;
        int64_t count = lrc_shape_numel(&s->acc[i]->shape);
        for (int64_t k = 0; k < count; k++) a[k] /= (float)s->accum;
        s->pg[i] = s->acc[i];
    }
    int ignored;
    return lrc_grads_check(s->pool, s->spans, s->pg, norm, &ignored, err);
}

/* AdamW in place; the packing kernels then run again on the new weights */
static int cpu_update(void *dev, int64_t step, double lr, double norm, lrc_err *err)
{
    cpu_device *s = dev;
    int rc = s->zero ? lrc_zero_step(s->zero, s->adam, s->pool, step, lr, norm, s->items, s->pg, err)
                     : lrc_adamw_step(s->adam, s->pool, s->spans, step, lr, norm, s->items, s->pg, s->pm, s->pv, err);
    lrc_exec_params_changed(s->x);
    return rc;
}

static int cpu_to_host(void *dev, lrc_err *err)
{
    cpu_device *s = dev; /* the weights and moments live on the host; --zero's moments on their ranks */
    return s->zero ? lrc_zero_gather(s->zero, err) : LRC_OK;
}

static void cpu_free(void *dev)
{
    cpu_device *s = dev;
    for (int i = 0; s->acc && i < s->n; i++) lrc_tensor_free(s->acc[i]);
    free(s->acc);
    free(s->pg);
    lrc_param_spans_free(s->spans);
    lrc_zero_free(s->zero);
    free(s);
}

static const lrc_train_device_ops cpu_ops = {cpu_run, cpu_grads, cpu_update, cpu_to_host, cpu_free};

int lrc_trainer_use_cpu(lrc_trainer *t, lrc_exec *x, lrc_pool *pool, lrc_err *err)
{
    if (t->accum % lrc_dist_size(t->dist))
        return lrc_err_set(err, "%lld micro-batches a step cannot be shared by %d ranks", (long long)t->accum, lrc_dist_size(t->dist));
    cpu_device *s = lrc_calloc(1, sizeof *s);
    if (!s) return lrc_err_nomem(err, "for the trainer's device");
    lrc_train_state *st = &t->st;
    *s = (cpu_device){.x = x, .pool = pool, .adam = &t->adam, .items = st->params.items, .pm = st->m, .pv = st->v, .n = st->params.n,
                      .accum = t->accum, .local = t->accum / lrc_dist_size(t->dist), .dist = t->dist};
    s->pg = lrc_calloc((size_t)s->n + 1, sizeof *s->pg);
    s->acc = t->accum > 1 ? lrc_calloc((size_t)s->n + 1, sizeof *s->acc) : NULL;
    t->ops = &cpu_ops;
    t->dev = s; /* freed by the trainer, whatever happens below */
    if (!s->pg || (t->accum > 1 && !s->acc)) return lrc_err_nomem(err, "for the gradients of %d parameters", s->n);
    for (int i = 0; s->acc && i < s->n; i++)
        if (!(s->acc[i] = lrc_tensor_new(s->items[i]->name, LRC_F32, &s->items[i]->shape, err))) return LRC_EUSER;
    if (!(s->spans = lrc_param_spans_new(s->items, s->n))) return lrc_err_nomem(err, "for the optimizer's spans of %d parameters", s->n);
    for (int i = 0; i < s->n; i++) t->opt_bytes += st->m[i]->nbytes + st->v[i]->nbytes;
    if (!t->zero) return LRC_OK;
    if (!t->dist) return lrc_err_set(err, "--zero 1 shards AdamW's moments over MPI ranks: start lrc train with mpirun");
    if (lrc_zero_new(t->dist, st, &s->zero, err)) return LRC_EUSER;
    t->opt_bytes = lrc_zero_bytes(s->zero);
    return LRC_OK;
}

/* ---- the loop --------------------------------------------------------------- */

void lrc_trainer_init(lrc_trainer *t)
{
    memset(t, 0, sizeof *t);
    lrc_tensor_set_init(&t->st.ck);
    lrc_tensor_set_init(&t->st.params);
    lrc_tensor_set_init(&t->in);
    lrc_tensor_set_init(&t->outs);
    t->accum = 1;
}

int lrc_trainer_loss(lrc_trainer *t, float *loss, lrc_err *err)
{
    int rc = t->ops->run(t->dev, &t->in, &t->outs, err);
    const lrc_tensor *l = rc ? NULL : lrc_tensor_set_find(&t->outs, "loss");
    if (!rc && !l) return lrc_err_set(err, "the training graph has no output 'loss'");
    if (!rc) *loss = ((const float *)l->data)[0];
    return rc;
}

int lrc_trainer_to_host(lrc_trainer *t, lrc_err *err) { return t->ops->to_host(t->dev, err); }

/* Forward and backward over the step's micro-batches: their mean loss and
 * the norm of their mean gradient. */
static int forward_backward(lrc_trainer *t, const lrc_train_hooks *h, int64_t step, float *loss, double *norm, double *ph, lrc_err *err)
{
    int rc = LRC_OK;
    *loss = 0;
    /* every rank draws every micro-batch (the random state stays the same
     * on all), and runs its own */
    int64_t per = t->accum / lrc_dist_size(t->dist), mine = lrc_dist_rank(t->dist) * per;
    for (int64_t micro = 0; micro < t->accum && !rc; micro++) {
        h->batch(h->ctx, step, micro, &t->st.rng);
        if (micro < mine || micro >= mine + per) continue;
        float l = 0;
        int bad = -1;
        double t0 = lrc_now_s();
        if ((rc = lrc_trainer_loss(t, &l, err))) break;
        double t1 = lrc_now_s();
        *loss += l / (float)t->accum;
        rc = t->ops->grads(t->dev, &t->outs, micro - mine, norm, &bad, err);
        ph[0] += t1 - t0, ph[1] += lrc_now_s() - t1;
        if (!rc && bad >= 0)
            rc = lrc_err_set(err, "step %lld: the gradient of '%s' is not finite (the last checkpoint is kept)", (long long)step + 1,
                             t->st.params.items[bad]->name);
    }
    if (!rc && t->dist) rc = lrc_dist_sum_f32(t->dist, loss, 1, err);
    if (!rc && !isfinite(*loss))
        rc = lrc_err_set(err, "step %lld: the loss is not finite (the last checkpoint is kept)", (long long)step + 1);
    return rc;
}

/* Ranks stop together: when any was interrupted. */
static int ranks_agree_stop(lrc_trainer *t, bool *interrupted, lrc_err *err)
{
    int any = *interrupted;
    if (lrc_dist_max_int(t->dist, &any, 1, err)) return LRC_EUSER;
    *interrupted = any;
    return LRC_OK;
}

/* Rank 0's checkpoint, once the ranks' weights are known to be the same:
 * a rank that diverged (a fault, or a kernel that is not deterministic)
 * stops the run, and the last checkpoint is kept. */
static int checkpoint(lrc_trainer *t, const lrc_train_hooks *h, lrc_err *err)
{
    if (t->dist) {
        uint64_t sum = LRC_FNV_SEED;
        for (int i = 0; i < t->st.params.n; i++) sum = lrc_fnv1a(sum, t->st.params.items[i]->data, t->st.params.items[i]->nbytes);
        int differ = -1;
        if (lrc_dist_agree(t->dist, sum, &differ, err)) return LRC_EUSER;
        if (differ >= 0)
            return lrc_err_set(err, "step %lld: the weights of rank %d differ from rank 0's (their checksums): the ranks diverged "
                                    "(the last checkpoint is kept)",
                               (long long)t->st.step, differ);
        if (lrc_dist_rank(t->dist) != 0) return LRC_OK;
    }
    return lrc_checkpoint_save(h->checkpoint, &t->st, err);
}

int lrc_trainer_run(lrc_trainer *t, const lrc_train_hooks *h, bool *interrupted, lrc_err *err)
{
    int rc = LRC_OK;
    *interrupted = false;
    const int64_t first = t->st.step;
    for (int64_t step = t->st.step; step < t->stop && !rc; step++) {
        lrc_train_step s = {.step = step};
        double ph[3] = {0, 0, 0};
        if ((rc = forward_backward(t, h, step, &s.loss, &s.grad_norm, ph, err))) break;
        s.lr = lrc_lr_at(&t->sched, step);
        double t0 = lrc_now_s();
        if ((rc = t->ops->update(t->dev, step, s.lr, s.grad_norm, err))) break;
        ph[2] = lrc_now_s() - t0;
        if (step > first) {
            for (int i = 0; i < 3; i++) t->phase_s[i] += ph[i];
            t->phase_steps++;
        }
        s.eval = (step + 1) % t->eval_every == 0 || step + 1 == t->stop;
        rc = h->after_step(h->ctx, &s, err);
        t->st.step = step + 1;
        *interrupted = h->interrupted(h->ctx);
        if (!rc && t->dist) rc = ranks_agree_stop(t, interrupted, err);
        if (!rc && (s.eval || *interrupted) && !(rc = t->ops->to_host(t->dev, err))) rc = checkpoint(t, h, err);
        if (*interrupted) break;
    }
    return rc;
}

void lrc_trainer_free(lrc_trainer *t)
{
    if (t->ops) t->ops->free(t->dev);
    lrc_train_state_free(&t->st);
    lrc_tensor_set_clear(&t->in);
    lrc_tensor_set_clear(&t->outs);
    memset(t, 0, sizeof *t);
}
