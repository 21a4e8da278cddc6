/* cmd_train.c — lrc train: next-byte training on text with the training
 * graph (forward, loss, backward) compiled for this CPU or GPU 0, AdamW, seeded
 * batches, metrics in RUN_DIR/metrics.jsonl and an atomic checkpoint that
 * --resume continues bit for bit. */
#include "classify.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <signal.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum { LRC_EINTERRUPTED = 2 }; /* not an error: stopped by Ctrl-C, checkpoint written */

typedef struct {
    int64_t steps, batch, seq, seed, eval_every, stop_after, accum;
    double lr, warmup, clip, weight_decay;
    bool decay_all;
    const char *data, *resume;
    lrc_augment aug; /* image models */
    const char *target; /* cpu or cuda */
} train_args;

/* Where the training graph runs: this CPU (the compiled plan, AdamW on the
 * thread pool), or GPU 0 (the same graph as CUDA C, and AdamW's kernels in
 * its module: the gradients, the f32 master weights and the moments stay on
 * the device, and come to the host only for a checkpoint). */
typedef struct {
    lrc_exec *x;
    lrc_cuda_exec *cx;
    lrc_cuda_optim *opt;
    lrc_tensor **items, **pg, **pm, **pv; /* the parameters, their gradients and moments */
    lrc_tensor **acc;                     /* --accum K on the CPU: the micro-batches' gradients summed */
    int n;
    int64_t accum;
    lrc_pool *pool;
    lrc_param_spans *spans;
    const lrc_adamw_cfg *adam;
    bool host_current; /* cuda: the host's weights and moments are this step's */
} step_engine;

static int engine_run(step_engine *s, const lrc_tensor_set *in, lrc_tensor_set *outs, lrc_err *err)
{
    return s->cx ? lrc_cuda_exec_run(s->cx, in, outs, err) : lrc_exec_run_plan(s->x, in, outs, err);
}

/* After micro-batch `micro` of a step: the gradients checked, summed over
 * the micro-batches, and their global norm (of the average, with the last). */
static int engine_grads(step_engine *s, const lrc_tensor_set *outs, int64_t step, int64_t micro, double *gn, lrc_err *err)
{
    int bad = -1, rc = LRC_OK;
    if (s->opt) rc = lrc_cuda_optim_grads(s->opt, micro, gn, &bad, err);
    else {
        for (int i = 0; i < s->n; i++) s->pg[i] = lrc_tensor_set_find(outs, s->items[i]->name);
        *gn = lrc_grads_check(s->pool, s->spans, s->pg, &bad);
    }
    if (!rc && bad >= 0)
        return lrc_err_set(err, "step %lld: the gradient of '%s' is not finite (the last checkpoint is kept)", (long long)step + 1,
                           s->items[bad]->name);
    for (int i = 0; s->acc && !rc && i < s->n; i++) {
        const float *gd = s->pg[i]->data;
        int64_t count = lrc_shape_numel(&s->pg[i]->shape);
        float *a = s->acc[i]->data;
        for (int64_t k = 0; k < count; k++) a[k] = micro ? a[k] + gd[k] : gd[k];
        if (micro == s->accum - 1) {
            for (int64_t k = 0; k < count; k++) a[k] /= (float)s->accum;
            s->pg[i] = s->acc[i];
        }
    }
    if (s->acc && !rc && micro == s->accum - 1) *gn = lrc_grads_check(s->pool, s->spans, s->pg, &bad);
    return rc;
}

/* AdamW; on the CPU the packing kernels then run again on the new weights */
static int engine_update(step_engine *s, int64_t step, double lr, double gn, lrc_err *err)
{
    s->host_current = false;
    if (s->opt) return lrc_cuda_optim_step(s->opt, step, lr, gn, err);
    lrc_adamw_step(s->adam, s->pool, s->spans, step, lr, gn, s->items, s->pg, s->pm, s->pv);
    lrc_exec_params_changed(s->x);
    return LRC_OK;
}

/* The host's weights and moments current (a checkpoint, an evaluation on
 * the CPU), read back once a step however many want them */
static int engine_to_host(step_engine *s, lrc_err *err)
{
    if (!s->opt || s->host_current) return LRC_OK;
    int rc = lrc_cuda_optim_download(s->opt, err);
    s->host_current = rc == LRC_OK;
    return rc;
}

/* The training graph for GPU 0's architecture through NVRTC, on the device. */
static int open_cuda(lrc_graph *g, lrc_compiled *c, lrc_cuda_exec **cx, lrc_err *err)
{
    lrc_cuda_device dev;
    char why[256], arch[16];
    if (lrc_cuda_probe(&dev, why, sizeof why)) {
        lrc_graph_free(g);
        return lrc_err_set(err, "--target cuda: %s", why);
    }
    snprintf(arch, sizeof arch, "sm_%d", dev.sm);
    int rc = lrc_compile_graph_cuda(g, NULL, arch, false, c, err);
    cJSON *meta = rc ? NULL : cJSON_CreateObject();
    if (meta) cJSON_AddItemToObject(meta, "cuda", lrc_compiled_cuda_meta(c));
    char *text = meta ? cJSON_PrintUnformatted(meta) : NULL;
    cJSON_Delete(meta);
    if (!rc) rc = lrc_cuda_exec_new(&c->plan, text, c->cubin, cx, err);
    free(text);
    if (!rc) printf("training on %s (sm_%d)\n", dev.name, dev.sm);
    return rc;
}

/* An image model's data (images [B, C, S, S], class labels [B]; a language
 * model trains on text) and the forward plan that evaluates it. */
typedef struct {
    lrc_images im;
    bool have_im;
    cli_classifier val;
    bool have_val;
} train_data;

/* A looped model's per-step inputs (models/parcae.lua): the iterations
 * without gradients and the mask of the unrolled ones with, from
 * T_b = max(1, Poisson(mu_rec)) per sequence and k_b = min(T_b, mu_bwd); and
 * the random initial state, redrawn every step. */
typedef struct {
    lrc_tensor *iters, *mask, *h0; /* NULL when the model has no such input */
    int64_t B, K;
    double mu;
    int64_t T_eval;
    int32_t *k;
} loop_inputs;

static int loop_inputs_open(lrc_model *m, const lrc_graph *g, lrc_tensor_set *in, loop_inputs *li, lrc_err *err)
{
    memset(li, 0, sizeof *li);
    lrc_tensor **slot[3] = {&li->iters, &li->mask, &li->h0};
    static const char *names[3] = {"iterations", "iteration_mask", "h0"};
    for (int q = 0; q < 3; q++) {
        int id = lrc_graph_find(g, LRC_OP_INPUT, names[q]);
        if (id < 0) continue;
        lrc_tensor *t = lrc_tensor_new(names[q], g->nodes[id].dtype, &g->nodes[id].shape, err);
        if (!t || lrc_tensor_set_add(in, t, err)) return LRC_EUSER;
        *slot[q] = t;
    }
    if (!li->iters) return LRC_OK;
    li->B = li->iters->shape.dim[0];
    li->K = li->mask ? li->mask->shape.dim[1] : 0;
    li->k = lrc_xcalloc((size_t)li->B + 1, sizeof *li->k);
    if (lrc_model_config_number(m, "mu_rec", &li->mu, err) || lrc_model_config_int(m, "T", &li->T_eval, err)) return LRC_EUSER;
    if (!(li->mu > 0) || li->mu > 200) return lrc_err_set(err, "mu_rec = %g: expected a mean number of iterations in (0, 200]", li->mu);
    return LRC_OK;
}

/* eval: every sequence at the config's T, else T_b drawn */
static void loop_inputs_draw(loop_inputs *li, lrc_rng *r, bool eval)
{
    if (!li->iters) return;
    for (int64_t b = 0; b < li->B; b++) {
        int32_t T = eval ? (int32_t)li->T_eval : lrc_poisson_at_least_1(li->mu, r);
        li->k[b] = T < li->K ? T : (int32_t)li->K;
        ((int32_t *)li->iters->data)[b] = T - li->k[b];
    }
    if (li->mask) lrc_parcae_mask(li->mask->data, li->K, li->B, li->k, 0);
    if (li->h0)
        lrc_fill_trunc_normal(li->h0->data, lrc_shape_numel(&li->h0->shape),
                              sqrt(2.0 / (5.0 * (double)li->h0->shape.dim[li->h0->shape.ndim - 1])), r);
}

/* Ctrl-C: the step in flight finishes, a checkpoint is written, then exit. */
static volatile sig_atomic_t interrupted;
static void on_sigint(int sig)
{
    (void)sig;
    interrupted = 1;
}

/* The text: --data FILE, or the King James Bible from Debian's bible-kjv. */
int cli_text_load(const char *path, int64_t seq, lrc_text *t, lrc_err *err)
{
    if (path) return lrc_text_load(t, path, seq, err);
    FILE *p = popen("bible -f Gen1:1-Rev22:21 2>/dev/null", "r");
    size_t len = 0;
    uint8_t *buf = p ? (uint8_t *)lrc_read_all(p, &len) : NULL;
    int status = p ? pclose(p) : -1;
    int rc = status != 0 || !buf || len == 0
                 ? lrc_err_set(err, "no --data given and the King James Bible is not installed (apt-get install bible-kjv)")
                 : lrc_text_from_bytes(t, buf, (int64_t)len, seq, "bible-kjv", err);
    free(buf);
    return rc;
}

/* Every tensor named `prefix + param name` for each parameter, in order. */
static lrc_tensor **state_of(lrc_tensor_set *s, const lrc_tensor_set *params, const char *prefix, lrc_err *err)
{
    lrc_tensor **out = lrc_xcalloc((size_t)params->n + 1, sizeof *out);
    for (int i = 0; i < params->n; i++) {
        char name[600];
        snprintf(name, sizeof name, "%s%s", prefix, params->items[i]->name);
        if (!(out[i] = lrc_tensor_set_find(s, name))) {
            lrc_tensor *z = lrc_tensor_new(name, LRC_F32, &params->items[i]->shape, err);
            if (!z || lrc_tensor_set_add(s, z, err)) {
                free(out);
                return NULL;
            }
            out[i] = z;
        }
    }
    return out;
}

static int write_checkpoint(const char *dir, lrc_tensor_set *ck, int64_t step, const lrc_rng *rng, lrc_err *err)
{
    lrc_tensor *st = lrc_tensor_set_find(ck, "train.step"), *rs = lrc_tensor_set_find(ck, "train.rng");
    ((int32_t *)st->data)[0] = (int32_t)step;
    memcpy(rs->data, rng->s, sizeof rng->s);
    char path[4200];
    snprintf(path, sizeof path, "%s/checkpoint.safetensors", dir);
    return lrc_safetensors_save(path, ck, err); /* a temporary file renamed over: never partial */
}

static int append_metrics(const char *dir, cJSON *obj, lrc_err *err)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    char *line = cJSON_PrintUnformatted(obj);
    FILE *f = fopen(path, "a");
    int rc = !f || fprintf(f, "%s\n", line) < 0 || fclose(f) ? lrc_err_set(err, "%s: cannot write: %s", path, strerror(errno)) : LRC_OK;
    cJSON_free(line);
    cJSON_Delete(obj);
    return rc;
}

static int train_run(const cli_args *a, const train_args *ta, const char *dir, lrc_err *err)
{
    lrc_model m = {0};
    lrc_text text = {0};
    lrc_tensor_set params, ck, in, outs;
    lrc_tensor_set_init(&params);
    lrc_tensor_set_init(&ck);
    lrc_tensor_set_init(&in);
    lrc_tensor_set_init(&outs);
    lrc_compiled c;
    memset(&c, 0, sizeof c);
    lrc_pool *pool = NULL;
    lrc_exec *x = NULL;
    lrc_tensor **pm = NULL, **pv = NULL, **pg = NULL;
    lrc_graph *g = lrc_graph_new();
    int64_t B = ta->batch, T = ta->seq, step0 = 0, vocab = 0;
    lrc_shape bt = {2, {B, T}};
    train_data td;
    memset(&td, 0, sizeof td);
    int rc = lrc_model_load(&m, a->m.model, a->m.preset, a->m.sets, a->m.n_sets, err);
    /* the threads that fill a new run's parameters, then run the CPU's kernels */
    if (!rc && !(pool = lrc_pool_new(a->threads > 0 ? (int)a->threads : lrc_pool_default_threads(), err))) rc = LRC_EUSER;
    bool images = m.task == LRC_TASK_IMAGE;
    if (!rc && images) {
        rc = cli_images_open(&m, ta->data, &td.im, err);
        td.have_im = !rc;
    } else if (!rc) {
        rc = lrc_model_config_int(&m, "vocab", &vocab, err);
        if (!rc && vocab < 256) rc = lrc_err_set(err, "byte-level text needs a vocabulary of at least 256, the model has %lld", (long long)vocab);
        if (!rc) rc = cli_text_load(ta->data, T, &text, err);
    }
    if (!rc) rc = lrc_model_build_training(&m, B, T, g, err);
    /* parameters: from the checkpoint when resuming, else initialised */
    lrc_rng rng;
    lrc_rng_seed(&rng, (uint64_t)ta->seed);
    char ckpath[4200];
    snprintf(ckpath, sizeof ckpath, "%s/checkpoint.safetensors", dir);
    if (!rc && ta->resume) {
        rc = lrc_safetensors_load(ckpath, &ck, err);
        const lrc_tensor *st = rc ? NULL : lrc_tensor_set_find(&ck, "train.step"), *rs = rc ? NULL : lrc_tensor_set_find(&ck, "train.rng");
        if (!rc && (!st || !rs || st->dtype != LRC_I32 || rs->nbytes != sizeof rng.s))
            rc = lrc_err_set(err, "%s: not an lrc training checkpoint (no train.step / train.rng)", ckpath);
        if (!rc) {
            step0 = ((int32_t *)st->data)[0];
            memcpy(rng.s, rs->data, sizeof rng.s);
            lrc_tensor_set model_part;
            lrc_tensor_set_init(&model_part);
            for (int i = 0; i < ck.n && !rc; i++)
                if (strncmp(ck.items[i]->name, "adam.", 5) && strncmp(ck.items[i]->name, "train.", 6)) {
                    lrc_tensor *t = lrc_tensor_to_f32(ck.items[i], err);
                    rc = t ? lrc_tensor_set_add(&model_part, t, err) : LRC_EUSER;
                }
            if (!rc) rc = lrc_params_bind(g, &model_part, ckpath, &params, err);
            lrc_tensor_set_clear(&model_part);
        }
    } else if (!rc) {
        rc = lrc_params_init(g, (uint64_t)ta->seed, pool, &params, err);
        lrc_shape one = {1, {1}}, four = {1, {8}};
        lrc_tensor *st = rc ? NULL : lrc_tensor_new("train.step", LRC_I32, &one, err);
        lrc_tensor *rs = st ? lrc_tensor_new("train.rng", LRC_I32, &four, err) : NULL;
        if (!rs || lrc_tensor_set_add(&ck, st, err) || lrc_tensor_set_add(&ck, rs, err)) rc = LRC_EUSER;
    }
    /* the checkpoint holds the parameters themselves, then the optimizer state */
    if (!rc) {
        for (int i = 0; i < params.n && !rc; i++) {
            lrc_tensor *old = lrc_tensor_set_find(&ck, params.items[i]->name);
            if (old) { /* resumed: the bound copy is the one that trains */
                for (int j = 0; j < ck.n; j++)
                    if (ck.items[j] == old) {
                        lrc_tensor_free(old);
                        ck.items[j] = params.items[i];
                    }
            } else {
                rc = lrc_tensor_set_add(&ck, params.items[i], err);
            }
        }
        params.n = 0; /* owned by ck now */
        free(params.items);
        params.items = NULL;
        params.cap = 0;
    }
    lrc_tensor_set view; /* the parameters, in the graph's order, owned by ck */
    lrc_tensor_set_init(&view);
    for (int i = 0; i < g->n_nodes && !rc; i++)
        if (g->nodes[i].op == LRC_OP_PARAM) {
            view.items = lrc_xrealloc(view.items, (size_t)(view.n + 1) * sizeof *view.items);
            view.items[view.n++] = lrc_tensor_set_find(&ck, g->nodes[i].name);
        }
    if (!rc && (!(pm = state_of(&ck, &view, "adam.m/", err)) || !(pv = state_of(&ck, &view, "adam.v/", err)))) rc = LRC_EUSER;
    lrc_shape b1 = {1, {B}}, img = {0};
    if (!rc && images) img = g->nodes[lrc_graph_find(g, LRC_OP_INPUT, "images")].shape;
    lrc_tensor *tok = rc ? NULL : images ? lrc_tensor_new("images", LRC_F32, &img, err) : lrc_tensor_new("tokens", LRC_I32, &bt, err);
    lrc_tensor *lab = tok ? lrc_tensor_new("labels", LRC_I32, images ? &b1 : &bt, err) : NULL;
    if (!rc && (!lab || lrc_tensor_set_add(&in, tok, err) || lrc_tensor_set_add(&in, lab, err))) rc = LRC_EUSER;
    loop_inputs loop;
    memset(&loop, 0, sizeof loop);
    if (!rc) rc = loop_inputs_open(&m, g, &in, &loop, err);
    bool cuda = !strcmp(ta->target, "cuda");
    step_engine eng = {0};
    if (!rc) {
        rc = cuda ? open_cuda(g, &c, &eng.cx, err) : lrc_compile_graph(g, NULL, &c, err);
        g = NULL;
    }
    if (!rc && !cuda) rc = lrc_exec_new(&c.plan, pool, &x, err);
    eng.x = x;
    if (!rc) rc = cuda ? lrc_cuda_exec_bind_params(eng.cx, &ck, err) : lrc_exec_bind_params(x, &ck, err);
    if (!rc && images) {
        rc = cli_classifier_open(&m, B, pool, &ck, &td.val, err);
        td.have_val = true;
    }
    double *prof_ns = NULL; /* LRC_PROFILE: a developer's look at the step's kernels */
    int64_t *prof_calls = NULL;
    if (!rc && !cuda && getenv("LRC_PROFILE")) {
        prof_ns = lrc_xcalloc((size_t)c.plan.n_launches + 1, sizeof(double));
        prof_calls = lrc_xcalloc((size_t)c.plan.n_launches + 1, sizeof(int64_t));
        lrc_exec_profile(x, prof_ns, prof_calls);
    }
    lrc_schedule_cfg sched = {ta->lr, ta->warmup, 0.1, ta->steps};
    lrc_adamw_cfg adam = {0.9, 0.999, 1e-8, ta->weight_decay, ta->clip, ta->decay_all};
    interrupted = 0;
    struct sigaction sa = {0}, old_sa;
    sa.sa_handler = on_sigint;
    sigaction(SIGINT, &sa, &old_sa);
    int64_t done = step0;
    bool line_open = false; /* the progress line awaits its newline */
    int64_t stop = ta->stop_after > 0 && ta->stop_after < ta->steps ? ta->stop_after : ta->steps;
    double t0 = lrc_now_s(), tstep = t0;
    pg = lrc_xcalloc((size_t)view.n + 1, sizeof *pg);
    eng = (step_engine){
        .x = x, .cx = eng.cx, .items = view.items, .pg = pg, .pm = pm, .pv = pv, .n = view.n, .accum = ta->accum, .pool = pool, .adam = &adam};
    if (!rc && cuda) rc = lrc_cuda_optim_new(eng.cx, view.items, pm, pv, view.n, &adam, ta->accum, &eng.opt, err);
    /* --accum K on the CPU: the gradients of K micro-batches summed here, then averaged */
    eng.acc = !cuda && ta->accum > 1 ? lrc_xcalloc((size_t)view.n + 1, sizeof *eng.acc) : NULL;
    for (int i = 0; eng.acc && i < view.n && !rc; i++)
        if (!(eng.acc[i] = lrc_tensor_new(view.items[i]->name, LRC_F32, &view.items[i]->shape, err))) rc = LRC_EUSER;
    if (!rc && !cuda) eng.spans = lrc_param_spans_new(view.items, view.n);
    for (int64_t step = step0; step < stop && !rc; step++) {
        float l = 0;
        double gn = 0;
        for (int64_t micro = 0; micro < ta->accum && !rc; micro++) {
            if (images) lrc_images_batch(&td.im, (uint64_t)ta->seed, step * ta->accum + micro, B, &ta->aug, tok->data, lab->data);
            else lrc_text_batch(&text, false, B, T, &rng, tok->data, lab->data);
            loop_inputs_draw(&loop, &rng, false);
            if ((rc = engine_run(&eng, &in, &outs, err))) break;
            l += ((float *)lrc_tensor_set_find(&outs, "loss")->data)[0] / (float)ta->accum;
            rc = engine_grads(&eng, &outs, step, micro, &gn, err);
        }
        if (rc) break;
        if (!rc && !isfinite(l)) rc = lrc_err_set(err, "step %lld: the loss is not finite (the last checkpoint is kept)", (long long)step + 1);
        if (rc) break;
        double lr = lrc_lr_at(&sched, step);
        if ((rc = engine_update(&eng, step, lr, gn, err))) break;
        bool eval = (step + 1) % ta->eval_every == 0 || step + 1 == stop;
        /* validation images run on the CPU, with the host's weights */
        if (eval && td.have_val && (rc = engine_to_host(&eng, err))) break;
        if (td.have_val) cli_classifier_params_changed(&td.val);
        double now = lrc_now_s(), tps = (double)(B * (images ? 1 : T) * ta->accum) / (now - tstep);
        tstep = now;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "step", (double)step + 1);
        cJSON_AddNumberToObject(o, "train_loss", l);
        cJSON_AddNumberToObject(o, "lr", lr);
        cJSON_AddNumberToObject(o, "grad_norm", gn);
        cJSON_AddNumberToObject(o, images ? "images_per_s" : "tokens_per_s", tps);
        double vl = 0, vacc = 0;
        if (eval && images) { /* every validation image, with the forward plan */
            rc = cli_classifier_eval(&td.val, &td.im, LRC_SPLIT_VAL, &vl, &vacc, err);
            cJSON_AddNumberToObject(o, "val_loss", vl);
            cJSON_AddNumberToObject(o, "val_acc", vacc);
        } else if (eval) { /* a fixed validation set: the same batches at every evaluation */
            lrc_rng vr;
            lrc_rng_seed(&vr, (uint64_t)ta->seed + 0x5eed);
            /* the step's outputs are spent (AdamW read the gradients): the
             * evaluation writes into them rather than allocating its own */
            for (int e = 0; e < 4 && !rc; e++) {
                lrc_text_batch(&text, true, B, T, &vr, tok->data, lab->data);
                loop_inputs_draw(&loop, &vr, true); /* at the config's T */
                rc = engine_run(&eng, &in, &outs, err);
                if (!rc) vl += ((float *)lrc_tensor_set_find(&outs, "loss")->data)[0] / 4.0;
            }
            cJSON_AddNumberToObject(o, "val_loss", vl);
        }
        if (!rc) rc = append_metrics(dir, o, err);
        else cJSON_Delete(o);
        double left = (now - t0) / (double)(step + 1 - step0) * (double)(stop - step - 1);
        printf("\rstep %lld/%lld  loss %.4f  lr %.2e  %.0f %s/s  %.0f s left", (long long)step + 1, (long long)ta->steps, l, lr,
               tps, images ? "img" : "tok", left);
        if (eval && images) printf("  val %.4f  acc %.4f\n", vl, vacc);
        else if (eval) printf("  val %.4f\n", vl);
        line_open = !eval;
        fflush(stdout);
        done = step + 1;
        if (!rc && (eval || interrupted) && !(rc = engine_to_host(&eng, err))) rc = write_checkpoint(dir, &ck, step + 1, &rng, err);
        if (!rc && interrupted) {
            printf("\ninterrupted after step %lld; checkpoint written: continue with lrc train --resume %s\n",
                   (long long)step + 1, dir);
            break;
        }
    }
    if (line_open) putchar('\n'); /* an error or the summary starts a line of its own */
    if (prof_ns) cli_print_quick_profile(&c.plan, prof_ns, prof_calls);
    free(prof_ns);
    free(prof_calls);
    lrc_param_spans_free(eng.spans);
    for (int i = 0; eng.acc && i < view.n; i++) lrc_tensor_free(eng.acc[i]);
    free(eng.acc);
    lrc_cuda_optim_free(eng.opt);
    sigaction(SIGINT, &old_sa, NULL);
    if (!rc && interrupted) rc = LRC_EINTERRUPTED;
    if (!rc) { /* the weights alone, for forward, generate and compile */
        char mpath[4200];
        snprintf(mpath, sizeof mpath, "%s/model.safetensors", dir);
        rc = lrc_safetensors_save(mpath, &view, err);
    }
    if (!rc) {
        printf("trained to step %lld of %lld; checkpoint %s, weights %s/model.safetensors\n", (long long)done,
               (long long)ta->steps, ckpath, dir);
        char png[4200];
        lrc_err perr;
        snprintf(png, sizeof png, "%s/loss.png", dir);
        char *runs[1] = {(char *)dir};
        if (lrc_plot_runs(runs, 1, png, &perr)) printf("no plot: %s\n", perr.msg); /* training itself succeeded */
        else printf("loss curves %s\n", png);
    }
    free(pm);
    free(pv);
    free(pg);
    free(view.items);
    lrc_exec_free(x);
    lrc_cuda_exec_free(eng.cx);
    lrc_pool_free(pool);
    if (c.g) lrc_compiled_free(&c);
    lrc_graph_free(g);
    lrc_tensor_set_clear(&ck);
    lrc_tensor_set_clear(&in);
    lrc_tensor_set_clear(&outs);
    lrc_text_free(&text);
    if (td.have_val) cli_classifier_close(&td.val);
    free(loop.k);
    if (td.have_im) lrc_images_free(&td.im);
    lrc_model_free(&m);
    return rc;
}

/* The run's settings, kept in RUN_DIR/run.json so that --resume continues
 * the same run (schedule of the same steps, same data, same seed). */
static int save_run(const char *dir, const cli_args *a, lrc_err *err)
{
    cJSON *o = cJSON_CreateObject(), *sets = cJSON_AddArrayToObject(o, "sets");
    cJSON_AddStringToObject(o, "model", a->m.model);
    if (a->m.preset) cJSON_AddStringToObject(o, "preset", a->m.preset);
    for (int i = 0; i < a->m.n_sets; i++) cJSON_AddItemToArray(sets, cJSON_CreateString(a->m.sets[i]));
    cJSON_AddNumberToObject(o, "steps", (double)a->steps);
    cJSON_AddNumberToObject(o, "lr", a->lr);
    cJSON_AddNumberToObject(o, "batch", (double)a->batch);
    cJSON_AddNumberToObject(o, "seq", (double)a->seq);
    cJSON_AddNumberToObject(o, "warmup", a->warmup);
    cJSON_AddNumberToObject(o, "eval_every", (double)a->eval_every);
    cJSON_AddNumberToObject(o, "seed", (double)a->seed);
    cJSON_AddNumberToObject(o, "clip", a->clip);
    cJSON_AddNumberToObject(o, "accum", (double)a->accum);
    cJSON_AddNumberToObject(o, "weight_decay", a->weight_decay);
    cJSON_AddBoolToObject(o, "decay_all", a->decay_all);
    cJSON_AddNumberToObject(o, "crop_pad", (double)a->crop_pad);
    cJSON_AddStringToObject(o, "target", a->target);
    cJSON_AddBoolToObject(o, "flip", a->flip);
    if (a->data) cJSON_AddStringToObject(o, "data", a->data);
    char *text = cJSON_Print(o), path[4200];
    cJSON_Delete(o);
    snprintf(path, sizeof path, "%s/run.json", dir);
    FILE *f = fopen(path, "w");
    int rc = !f || fputs(text, f) == EOF || fclose(f) ? lrc_err_set(err, "%s: cannot write: %s", path, strerror(errno)) : LRC_OK;
    cJSON_free(text);
    return rc;
}

/* Fills a from RUN_DIR/run.json; strings point into *keep (freed by the caller). */
static int load_run(const char *dir, cli_args *a, cJSON **keep, lrc_err *err)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/run.json", dir);
    FILE *f = fopen(path, "rb");
    if (!f) return lrc_err_set(err, "%s: not a run directory (no run.json: %s)", dir, strerror(errno));
    char buf[65536];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    cJSON *o = *keep = cJSON_Parse(buf);
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(o, "model"), *sets = cJSON_GetObjectItemCaseSensitive(o, "sets");
    if (!cJSON_IsString(model) || !cJSON_IsArray(sets)) return lrc_err_set(err, "%s: damaged (no model or sets)", path);
    a->m.model = model->valuestring;
    const cJSON *preset = cJSON_GetObjectItemCaseSensitive(o, "preset"), *data = cJSON_GetObjectItemCaseSensitive(o, "data");
    a->m.preset = cJSON_IsString(preset) ? preset->valuestring : NULL;
    a->data = cJSON_IsString(data) ? data->valuestring : NULL;
    a->m.n_sets = 0;
    for (const cJSON *s = sets->child; s; s = s->next)
        if (cJSON_IsString(s)) {
            a->m.sets = realloc(a->m.sets, (size_t)(a->m.n_sets + 1) * sizeof *a->m.sets);
            a->m.sets[a->m.n_sets++] = s->valuestring;
        }
    static const char *keys[] = {"steps", "lr", "batch", "seq", "warmup", "eval_every", "seed"};
    double v[7];
    for (int i = 0; i < 7; i++) {
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, keys[i]);
        if (!cJSON_IsNumber(x)) return lrc_err_set(err, "%s: damaged (no %s)", path, keys[i]);
        v[i] = x->valuedouble;
    }
    a->steps = (int64_t)v[0], a->lr = v[1], a->batch = (int64_t)v[2], a->seq = (int64_t)v[3];
    a->warmup = v[4], a->eval_every = (int64_t)v[5], a->seed = (int64_t)v[6];
    const cJSON *clip = cJSON_GetObjectItemCaseSensitive(o, "clip");
    a->clip = cJSON_IsNumber(clip) ? clip->valuedouble : 0;
    const cJSON *accum = cJSON_GetObjectItemCaseSensitive(o, "accum");
    a->accum = cJSON_IsNumber(accum) && accum->valuedouble >= 1 ? (int64_t)accum->valuedouble : 1;
    const cJSON *wd = cJSON_GetObjectItemCaseSensitive(o, "weight_decay");
    a->weight_decay = cJSON_IsNumber(wd) ? wd->valuedouble : 0;
    a->decay_all = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "decay_all"));
    const cJSON *pad = cJSON_GetObjectItemCaseSensitive(o, "crop_pad");
    a->crop_pad = cJSON_IsNumber(pad) ? (int64_t)pad->valuedouble : -1;
    a->flip = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "flip"));
    const cJSON *target = cJSON_GetObjectItemCaseSensitive(o, "target");
    if (cJSON_IsString(target) && (!strcmp(target->valuestring, "cpu") || !strcmp(target->valuestring, "cuda")))
        a->target = target->valuestring;
    return LRC_OK;
}

/* The first argument that --resume cannot take, or NULL: the run goes on
 * with its run.json's settings, so any other option (or a model) would be
 * ignored, and is refused instead. An option may be abbreviated, as
 * getopt_long allows (which then refuses an ambiguous one). */
static const char *resume_extra(int argc, char **argv)
{
    static const char *takes[] = {"--resume", "--stop-after", "--threads"};
    for (int i = 1; i < argc; i++) {
        const char *eq = strchr(argv[i], '=');
        size_t n = eq ? (size_t)(eq - argv[i]) : strlen(argv[i]);
        bool ok = !strcmp(argv[i], "--help") || !strcmp(argv[i], "-h");
        for (int k = 0; k < 3 && !ok; k++)
            if (n > 2 && n <= strlen(takes[k]) && !strncmp(argv[i], takes[k], n)) {
                ok = true;
                if (!eq) i++; /* its value */
            }
        if (!ok) return argv[i];
    }
    return NULL;
}

int cmd_train(int argc, char **argv)
{
    static const struct option opts[] = {MODEL_OPTS,
                                         {"steps", required_argument, 0, OPT_STEPS},
                                         {"lr", required_argument, 0, OPT_LR},
                                         {"batch", required_argument, 0, OPT_BATCH},
                                         {"seq", required_argument, 0, OPT_SEQ},
                                         {"warmup", required_argument, 0, OPT_WARMUP},
                                         {"eval-every", required_argument, 0, OPT_EVAL_EVERY},
                                         {"seed", required_argument, 0, OPT_SEED},
                                         {"threads", required_argument, 0, OPT_THREADS},
                                         {"stop-after", required_argument, 0, OPT_STOP_AFTER},
                                         {"data", required_argument, 0, OPT_DATA},
                                         {"resume", required_argument, 0, OPT_RESUME},
                                         {"clip", required_argument, 0, OPT_CLIP},
                                         {"accum", required_argument, 0, OPT_ACCUM},
                                         {"weight-decay", required_argument, 0, OPT_WEIGHT_DECAY},
                                         {"decay-all", no_argument, 0, OPT_DECAY_ALL},
                                         {"target", required_argument, 0, OPT_TARGET},
                                         {"crop-pad", required_argument, 0, OPT_CROP_PAD},
                                         {"flip", no_argument, 0, OPT_FLIP},
                                         {0, 0, 0, 0}};
    static const char *help =
        "usage: lrc train MODEL [--preset P] [--set KEY=VALUE]... --steps N --lr X [--batch B] [--seq T]\n"
        "                 [--warmup F] [--eval-every K] [--seed S] [--threads N] [--stop-after K]\n"
        "                 [--clip G] [--accum K] [--weight-decay W [--decay-all]] [--data FILE|DIR]\n"
        "                 [--crop-pad P] [--flip] [--target cpu|cuda] -o RUN_DIR\n"
        "       lrc train --resume RUN_DIR [--stop-after K] [--threads N]\n"
        "\n"
        "Trains on text, one token per byte (the King James Bible from Debian's\n"
        "bible-kjv unless --data), with AdamW (0.9, 0.999, 1e-8), linear warm-up over\n"
        "F of the steps (default 0.1) then cosine decay to 0.1x the peak rate X.\n"
        "RUN_DIR gets run.json, metrics.jsonl (train and validation loss, rate,\n"
        "gradient norm, tokens/s) and checkpoint.safetensors (parameters, optimizer\n"
        "state, step, random state), written atomically at each evaluation.\n"
        "--stop-after K ends after step K of N; --resume continues bit for bit.\n"
        "--clip G scales the gradients down to a global norm of G (default: off).\n"
        "--accum K averages the gradients of K batches of B per step (default 1).\n"
        "--weight-decay W: AdamW's decoupled decay (default 0), on weight matrices\n"
        "only unless --decay-all (then gains, biases and LayerRoPE scalars too).\n"
        "Ctrl-C finishes the step, writes the checkpoint and exits (status 130).\n"
        "--target cuda runs the step on GPU 0: the training graph as CUDA C through\n"
        "NVRTC (bf16 storage), and AdamW's kernels on f32 master weights there.\n"
        "\n"
        "An image model (vit) trains on Fashion-MNIST instead: --data DIR holds its\n"
        "four IDX files (default: Debian's /usr/share/datasets/fashion-mnist), the\n"
        "last 5,000 training images validate (val_loss, val_acc in metrics.jsonl),\n"
        "each epoch is a seeded shuffle, and training images get a random crop after\n"
        "padding by P pixels (--crop-pad P; default 0, off: 2,500 steps of a small\n"
        "ViT learn more without it) and, with --flip, a\n"
        "random horizontal flip. --seq does not apply; lrc eval gives test accuracy.\n";
    bool resuming = false;
    for (int i = 1; i < argc; i++) resuming = resuming || !strcmp(argv[i], "--resume") || !strncmp(argv[i], "--resume=", 9);
    const char *extra = resuming ? resume_extra(argc, argv) : NULL;
    cli_args a;
    int rc = extra ? cli_usage_error("train", "%s does not apply to --resume, which goes on as the run's run.json says "
                                              "(only --stop-after and --threads may be given)", extra)
                   : cli_parse_args("train", argc, argv, opts, help, !resuming, &a);
    if (extra) return rc;
    if (rc >= 0) goto out;
    if (a.batch == 0) a.batch = 16;
    if (a.accum == 0) a.accum = 1;
    cJSON *keep = NULL;
    lrc_err err;
    const char *dir = a.resume ? a.resume : a.out;
    if (!strcmp(a.target, "ref")) a.target = "cpu"; /* the default target of the commands: ref runs no training */
    if (strcmp(a.target, "cpu") && strcmp(a.target, "cuda")) {
        rc = cli_usage_error("train", "--target %s: training runs on the cpu or cuda target", a.target);
        goto out;
    }
    if (!a.resume && (!a.out || a.steps == -1 || a.lr < 0)) {
        rc = cli_usage_error("train", "needs --steps, --lr and -o RUN_DIR");
        goto out;
    }
    int64_t stop_after = a.stop_after, threads = a.threads;
    rc = LRC_OK;
    if (a.resume) {
        rc = load_run(a.resume, &a, &keep, &err);
        a.stop_after = stop_after;
        a.threads = threads;
    } else {
        struct stat st;
        if (a.threads == 0 || a.threads < -1) rc = lrc_err_set(&err, "--threads %lld: the thread count must be at least 1", (long long)a.threads);
        else if (a.steps < 1) rc = lrc_err_set(&err, "--steps %lld: train for at least one step", (long long)a.steps);
        else if (stat(a.out, &st) == 0) rc = lrc_err_set(&err, "%s exists: continue it with --resume %s, or choose another -o", a.out, a.out);
        else if (mkdir(a.out, 0755)) rc = lrc_err_set(&err, "%s: cannot create: %s", a.out, strerror(errno));
        if (!rc && a.eval_every == 0) a.eval_every = a.steps / 10 > 0 ? a.steps / 10 : 1;
        if (!rc) rc = save_run(a.out, &a, &err);
    }
    if (!rc && (a.threads == 0 || a.threads < -1)) rc = lrc_err_set(&err, "--threads %lld: the thread count must be at least 1", (long long)a.threads);
    bool created = !a.resume && !rc;
    if (!rc) {
        train_args ta = {a.steps, a.batch, a.seq, a.seed, a.eval_every, a.stop_after, a.accum, a.lr, a.warmup, a.clip, a.weight_decay, a.decay_all, a.data, a.resume,
                         {a.crop_pad < 0 ? 0 : (int)a.crop_pad, a.flip}, a.target};
        rc = train_run(&a, &ta, dir, &err);
    }
    char ck[4200];
    snprintf(ck, sizeof ck, "%s/checkpoint.safetensors", a.out ? a.out : "");
    struct stat cst;
    if (rc && created && stat(ck, &cst) != 0) { /* a new run that never got going leaves nothing behind */
        static const char *files[] = {"run.json", "metrics.jsonl"};
        for (int i = 0; i < 2; i++) {
            snprintf(ck, sizeof ck, "%s/%s", a.out, files[i]);
            remove(ck);
        }
        rmdir(a.out);
    }
    rc = rc == LRC_EINTERRUPTED ? 130 : rc ? cli_user_error(&err) : 0; /* 130: ended by SIGINT, as shells say */
    cJSON_Delete(keep);
out:
    cli_model_opts_free(&a.m);
    return rc;
}
