/* cmd_train.c — lrc train: next-byte training on text (or an image model on
 * Fashion-MNIST) with the training graph (forward, loss, backward) compiled
 * for this CPU or GPU 0. Here: the options (run.json: train_run.c), the model, its data
 * and the compiled graph, the validation, metrics in RUN_DIR/metrics.jsonl
 * and the progress line. The loop, its state (parameters, moments, step,
 * random state) and the checkpoint that --resume continues bit for bit are
 * the runtime's (runtime/trainer.c, runtime/checkpoint.c). */
#include "classify.h"
#include "cli_targets.h"
#include "train_dist.h"
#include "../../codegen/llvm/lrc_llvm.h"

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
    int64_t steps, batch, seq, seed, eval_every, stop_after, accum, val_tokens;
    double lr, warmup, clip, weight_decay;
    bool decay_all;
    const char *data, *resume;
    const lrc_tokenizer *tok; /* NULL: one token per byte */
    const char *tok_json;     /* its text, which the token cache's key covers */
    const char *init_from;    /* a Hugging Face directory's weights to fine-tune, or NULL */
    bool lenient;             /* init_from: --set changed the norms, so tensors may be missing or left over */
    lrc_augment aug; /* image models */
    const lrc_target *target; /* one that trains */
    lrc_dist *dist;           /* the ranks under mpirun (train_dist.c), or NULL */
    int zero;                 /* --zero 1: AdamW's moments sharded over the ranks */
} train_args;

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

/* One run of lrc train: what the frontend builds (the model, its data, the
 * compiled graph) around the runtime's trainer, and the progress it reports. */
typedef struct {
    const train_args *ta;
    const char *dir;
    char ckpath[4200];
    lrc_model m;
    lrc_text text;
    train_data td;
    loop_inputs loop;
    bool images, line_open; /* line_open: the progress line awaits its newline */
    bool has_layerrope;     /* LayerRoPE's scalars go into metrics.jsonl (until an evaluation finds none) */
    int64_t B, T, step0;
    lrc_pool *pool;
    lrc_target_plan plan; /* the training graph on the target */
    lrc_tensor *tok, *lab; /* in tr.in */
    lrc_trainer tr;
    double t0, tstep;
    double val_per_byte; /* the last evaluation's */
    double *prof_ns; /* LRC_PROFILE: a developer's look at the step's kernels */
    int64_t *prof_calls;
} train_run_ctx;

/* The model, the threads that fill a new run's parameters (then run the
 * CPU's kernels), the data, and the training graph. */
static int train_open_data(train_run_ctx *r, const cli_args *a, lrc_graph *g, lrc_err *err)
{
    int64_t vocab = 0;
    int rc = lrc_model_load(&r->m, a->m.model, a->m.preset, a->m.sets, a->m.n_sets, err);
    if (!rc && !(r->pool = lrc_pool_new(a->threads > 0 ? (int)a->threads : lrc_pool_default_threads(), err))) rc = LRC_EUSER;
    r->images = r->m.task == LRC_TASK_IMAGE;
    if (!rc && r->images) {
        rc = cli_images_open(&r->m, r->ta->data, &r->td.im, err);
        r->td.have_im = !rc;
    } else if (!rc) {
        rc = lrc_model_config_int(&r->m, "vocab", &vocab, err);
        int64_t need = r->ta->tok ? lrc_tokenizer_n_vocab(r->ta->tok) : 256;
        if (!rc && vocab < need)
            rc = r->ta->tok ? lrc_err_set(err, "the tokenizer has %lld tokens, the model's vocabulary %lld (--set vocab=%lld)",
                                          (long long)need, (long long)vocab, (long long)need)
                            : lrc_err_set(err, "byte-level text needs a vocabulary of at least 256, the model has %lld", (long long)vocab);
        /* the token cache goes beside the run, for every run on the same text */
        char parent[4200];
        snprintf(parent, sizeof parent, "%s", r->dir);
        char *slash = strrchr(parent, '/');
        if (slash && slash[1]) *slash = 0;
        else snprintf(parent, sizeof parent, ".");
        if (!rc) rc = cli_text_load(r->ta->data, r->ta->tok, r->ta->tok_json, parent, r->T, &r->text, err);
    }
    return rc ? rc : lrc_model_build_training(&r->m, r->B, r->T, g, err);
}

/* Fine-tuning: a new run's parameters from a Hugging Face directory's
 * weights. Each must be there with the model's shape, unless --set changed
 * the norm placement (lenient): then what the checkpoint lacks keeps its
 * seeded initialisation (LayerRoPE's shared gains) and what the model lacks
 * (per-layer norm weights) is left out, both named in one line. */
static int init_from_checkpoint(lrc_train_state *st, const char *path, bool lenient, lrc_err *err)
{
    lrc_tensor_set w;
    lrc_tensor_set_init(&w);
    int rc = lrc_safetensors_load(path, &w, err), copied = 0, seeded = 0;
    const char *first_seeded = NULL;
    for (int i = 0; !rc && i < st->params.n; i++) {
        lrc_tensor *p = st->params.items[i], *c = lrc_tensor_set_find(&w, p->name);
        if (!c) {
            if (!lenient) rc = lrc_err_set(err, "%s: no tensor %s, which the model has", path, p->name);
            else if (!seeded++) first_seeded = p->name;
            continue;
        }
        if (!lrc_shape_eq(&c->shape, &p->shape)) {
            char a[64], b[64];
            lrc_shape_str(&c->shape, a, sizeof a), lrc_shape_str(&p->shape, b, sizeof b);
            rc = lrc_err_set(err, "%s: %s is %s, the model's %s", path, p->name, a, b);
            break;
        }
        lrc_tensor *f = lrc_tensor_to_f32(c, err);
        if (!f) rc = LRC_EUSER;
        else memcpy(p->data, f->data, p->nbytes), copied++;
        lrc_tensor_free(f);
    }
    int unused = 0;
    const char *first_unused = NULL;
    for (int i = 0; !rc && i < w.n; i++)
        if (!lrc_tensor_set_find(&st->params, w.items[i]->name) && !unused++) first_unused = w.items[i]->name;
    if (!rc && unused && !lenient)
        rc = lrc_err_set(err, "%s: %s is not a parameter of the model (%d such tensors)", path, first_unused, unused);
    if (!rc) {
        printf("fine-tuning from %s: %d tensors", path, copied);
        if (seeded) printf(", %d initialised from the seed (%s, ...)", seeded, first_seeded);
        if (unused) printf(", %d of the checkpoint left out (%s, ...)", unused, first_unused);
        printf("\n");
    }
    lrc_tensor_set_clear(&w);
    return rc;
}

/* The graph's inputs: tokens or images, labels, a looped model's draws,
 * the defaults of the others. */
static int train_open_inputs(train_run_ctx *r, const lrc_graph *g, lrc_err *err)
{
    lrc_shape bt = {2, {r->B, r->T}}, b1 = {1, {r->B}}, img = {0};
    if (r->images) img = g->nodes[lrc_graph_find(g, LRC_OP_INPUT, "images")].shape;
    r->tok = r->images ? lrc_tensor_new("images", LRC_F32, &img, err) : lrc_tensor_new("tokens", LRC_I32, &bt, err);
    r->lab = r->tok ? lrc_tensor_new("labels", LRC_I32, r->images ? &b1 : &bt, err) : NULL;
    if (!r->lab || lrc_tensor_set_add(&r->tr.in, r->tok, err) || lrc_tensor_set_add(&r->tr.in, r->lab, err)) return LRC_EUSER;
    if (loop_inputs_open(&r->m, g, &r->tr.in, &r->loop, err)) return LRC_EUSER;
    char said[1024]; /* the model's other inputs: no data gives them, so their defaults, said once */
    if (lrc_model_fill_defaults(&r->m, g, &r->tr.in, said, sizeof said, err)) return lrc_err_prefix(err, "train");
    if (said[0]) printf("train: %s\n", said);
    return LRC_OK;
}

/* The graph prepared on the target (which takes g; the cpu's kernels run
 * on the run's pool), the state's parameters bound to it, the classifier
 * of an image model's validation, and the trainer's device. */
static int train_open_device(train_run_ctx *r, lrc_graph *g, lrc_err *err)
{
    const lrc_target *t = r->ta->target;
    lrc_target_plan *p = &r->plan;
    int rc = lrc_target_prepare(t, g, &(lrc_target_opts){.pool = r->pool}, p, err);
    if (!rc && p->have_c) { /* the compile's time, and whether its kernels came from the cache */
        bool cpu = !p->c.have_cuda; /* LLVM's code, or NVRTC's */
        printf("compile: %.1f ms (passes %.1f ms, %s %.1f ms)\n%s: %s\n", p->c.passes_ms + p->c.codegen_ms, p->c.passes_ms,
               cpu ? "LLVM" : "NVRTC", p->c.codegen_ms, cpu ? "llvm" : "nvrtc", lrc_kcache_state_name((lrc_kcache_state)p->c.kernel_cache));
    }
    if (!rc && p->host.device[0]) printf("training on %s (sm_%d)\n", p->host.device, p->host.sm);
    lrc_tensor_set *ck = &r->tr.st.ck;
    if (!rc) rc = lrc_target_bind(p, ck, err);
    if (!rc && r->images) {
        rc = cli_classifier_open(&r->m, r->B, r->pool, ck, &r->td.val, err);
        r->td.have_val = true;
    }
    /* a look at the host's kernels; a device's has lrc profile */
    if (!rc && !p->host.device[0] && p->ex->profile && getenv("LRC_PROFILE")) {
        r->prof_ns = lrc_xcalloc((size_t)p->plan->n_launches + 1, sizeof(double));
        r->prof_calls = lrc_xcalloc((size_t)p->plan->n_launches + 1, sizeof(int64_t));
        p->ex->profile(p->x, r->prof_ns, r->prof_calls);
    }
    if (!rc) rc = lrc_target_train(p, &r->tr, err);
    return rc;
}

static void on_batch(void *ctx, int64_t step, int64_t micro, lrc_rng *rng)
{
    train_run_ctx *r = ctx;
    if (r->prof_ns && step == r->step0 + 1 && micro == 0) { /* the profile leaves out the first step's first touches */
        memset(r->prof_ns, 0, ((size_t)r->plan.plan->n_launches + 1) * sizeof *r->prof_ns);
        memset(r->prof_calls, 0, ((size_t)r->plan.plan->n_launches + 1) * sizeof *r->prof_calls);
        lrc_pool_count_busy(r->pool, true, true);
    }
    if (r->images)
        lrc_images_batch(&r->td.im, (uint64_t)r->ta->seed, step * r->ta->accum + micro, r->B, &r->ta->aug, r->tok->data, r->lab->data);
    else lrc_text_batch(&r->text, false, r->B, r->T, rng, r->tok->data, r->lab->data);
    loop_inputs_draw(&r->loop, rng, false);
}

static bool on_interrupted(void *ctx)
{
    (void)ctx;
    return interrupted;
}

/* Validation: every validation image with the forward plan, or a fixed set
 * of text batches, the same at every evaluation. */
static int train_validate(train_run_ctx *r, cJSON *o, double *vl, double *vacc, lrc_err *err)
{
    int rc = LRC_OK;
    if (r->images) {
        rc = cli_classifier_eval(&r->td.val, &r->td.im, LRC_SPLIT_VAL, vl, vacc, err);
        cJSON_AddNumberToObject(o, "val_loss", *vl);
        cJSON_AddNumberToObject(o, "val_acc", *vacc);
        return rc;
    }
    lrc_rng vr;
    lrc_rng_seed(&vr, (uint64_t)r->ta->seed + 0x5eed);
    /* the step's outputs are spent (AdamW read the gradients): the
     * evaluation writes into them rather than allocating its own */
    /* --val-tokens: that many tokens of fixed windows, the same for every
     * seed (a sweep's arms compare on one set); else four seeded batches */
    double nats = 0, bytes = 0, n = (double)(r->B * r->T);
    int64_t batches = r->ta->val_tokens ? (r->ta->val_tokens + r->B * r->T - 1) / (r->B * r->T) : 4;
    for (int64_t e = 0; e < batches && !rc; e++) {
        float l = 0;
        if (r->ta->val_tokens) lrc_text_val_windows(&r->text, e * r->B, r->B, r->T, r->tok->data, r->lab->data);
        else lrc_text_batch(&r->text, true, r->B, r->T, &vr, r->tok->data, r->lab->data);
        loop_inputs_draw(&r->loop, &vr, true); /* at the config's T */
        if (e % lrc_dist_size(r->ta->dist) != lrc_dist_rank(r->ta->dist)) continue; /* each rank its share, all drawn */
        rc = lrc_trainer_loss(&r->tr, &l, err);
        if (!rc) *vl += l / (double)batches, nats += l * n, bytes += cli_text_label_bytes(r->ta->tok, r->lab->data, r->B * r->T);
    }
    if (!rc) rc = cli_dist_val_sums(r->ta->dist, vl, &nats, &bytes, err);
    cJSON_AddNumberToObject(o, "val_loss", *vl);
    /* per byte of text: runs on different vocabularies compare */
    r->val_per_byte = bytes > 0 ? nats / bytes : 0;
    cJSON_AddNumberToObject(o, "val_loss_per_byte", r->val_per_byte);
    return rc;
}

/* After AdamW: the validation at an evaluation step, a line of
 * metrics.jsonl, and the progress line. */
/* LayerRoPE's scalars (every one-element parameter under a "layerrope."
 * prefix: each site's alpha, beta, alpha_rot, beta_rot) at an evaluation, so
 * that the slopes' course during training can be plotted. False when the
 * model has none. */
static bool add_layerrope_scalars(const lrc_tensor_set *params, cJSON *o)
{
    cJSON *lr = NULL;
    for (int i = 0; i < params->n; i++) {
        const lrc_tensor *t = params->items[i];
        const char *at = strstr(t->name, "layerrope.");
        if (!at || lrc_shape_numel(&t->shape) != 1 || t->dtype != LRC_F32) continue;
        if (!lr) lr = cJSON_AddObjectToObject(o, "layerrope");
        cJSON_AddNumberToObject(lr, at + strlen("layerrope."), (double)((const float *)t->data)[0]);
    }
    return lr != NULL;
}

/* train_validate, left out of LRC_PROFILE's view of the steps: the launch
 * times it adds (validation runs the training plan) are taken back, and the
 * pool does not count it. */
static int validate_unprofiled(train_run_ctx *r, int64_t step, cJSON *o, double *vl, double *vacc, lrc_err *err)
{
    if (!r->prof_ns) return train_validate(r, o, vl, vacc, err);
    size_t n = (size_t)r->plan.plan->n_launches + 1;
    double *ns = lrc_xmalloc(n * sizeof *ns);
    int64_t *calls = lrc_xmalloc(n * sizeof *calls);
    memcpy(ns, r->prof_ns, n * sizeof *ns);
    memcpy(calls, r->prof_calls, n * sizeof *calls);
    bool counting = step > r->step0; /* on since the run's second step (on_batch) */
    lrc_pool_count_busy(r->pool, false, false);
    int rc = train_validate(r, o, vl, vacc, err);
    lrc_pool_count_busy(r->pool, counting, false);
    memcpy(r->prof_ns, ns, n * sizeof *ns);
    memcpy(r->prof_calls, calls, n * sizeof *calls);
    free(ns);
    free(calls);
    return rc;
}

static int on_after_step(void *ctx, const lrc_train_step *s, lrc_err *err)
{
    train_run_ctx *r = ctx;
    int rc;
    /* validation images run on the CPU, with the host's weights */
    if (s->eval && r->td.have_val && (rc = lrc_trainer_to_host(&r->tr, err))) return rc;
    if (r->td.have_val) cli_classifier_params_changed(&r->td.val);
    int64_t step = s->step, stop = r->tr.stop;
    double now = lrc_now_s(), step_s = now - r->tstep, tps = (double)(r->B * (r->images ? 1 : r->T) * r->ta->accum) / step_s;
    r->tstep = now;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "step", (double)step + 1);
    cJSON_AddNumberToObject(o, "train_loss", s->loss);
    cJSON_AddNumberToObject(o, "lr", s->lr);
    cJSON_AddNumberToObject(o, "grad_norm", s->grad_norm);
    cJSON_AddNumberToObject(o, r->images ? "images_per_s" : "tokens_per_s", tps);
    char comm[64]; /* under mpirun: the step's all-reduce, and its share of the step */
    cli_dist_step_comm(r->ta->dist, step_s, o, comm, sizeof comm);
    double vl = 0, vacc = 0;
    rc = s->eval ? validate_unprofiled(r, s->step, o, &vl, &vacc, err) : LRC_OK;
    /* (the device's parameters reach the host for that where they live there) */
    if (!rc && s->eval && r->has_layerrope && !r->td.have_val) rc = lrc_trainer_to_host(&r->tr, err);
    if (!rc && s->eval) r->has_layerrope = add_layerrope_scalars(&r->tr.st.params, o);
    if (!rc && lrc_dist_rank(r->ta->dist) == 0) rc = append_metrics(r->dir, o, err); /* rank 0's alone */
    else cJSON_Delete(o);
    double left = (now - r->t0) / (double)(step + 1 - r->step0) * (double)(stop - step - 1);
    printf("\rstep %lld/%lld  loss %.4f  lr %.2e  %.0f %s/s%s  %.0f s left", (long long)step + 1, (long long)r->ta->steps, s->loss, s->lr,
           tps, r->images ? "img" : "tok", comm, left);
    if (s->eval && r->images) printf("  val %.4f  acc %.4f\n", vl, vacc);
    else if (s->eval && r->ta->tok) printf("  val %.4f (%.4f a byte)\n", vl, r->val_per_byte);
    else if (s->eval) printf("  val %.4f\n", vl);
    r->line_open = !s->eval;
    fflush(stdout);
    return rc;
}

/* The weights alone, for forward, generate and compile; the summary and the plot. */
static int train_finish(train_run_ctx *r, lrc_err *err)
{
    char mpath[4200];
    snprintf(mpath, sizeof mpath, "%s/model.safetensors", r->dir);
    int rc = lrc_safetensors_save(mpath, &r->tr.st.params, err);
    if (rc) return rc;
    printf("trained to step %lld of %lld; checkpoint %s, weights %s/model.safetensors\n", (long long)r->tr.st.step,
           (long long)r->ta->steps, r->ckpath, r->dir);
    char png[4200];
    lrc_err perr;
    snprintf(png, sizeof png, "%s/loss.png", r->dir);
    char *runs[1] = {(char *)r->dir};
    if (lrc_plot_runs(&(lrc_plot_opts){runs, 1, png}, &perr)) printf("no plot: %s\n", perr.msg); /* training itself succeeded */
    else printf("loss curves %s\n", png);
    return LRC_OK;
}

static void train_close(train_run_ctx *r)
{
    free(r->prof_ns);
    free(r->prof_calls);
    lrc_trainer_free(&r->tr); /* the device first: a device optimizer's memory is the plan's */
    lrc_target_plan_free(&r->plan);
    lrc_pool_free(r->pool);
    lrc_text_free(&r->text);
    if (r->td.have_val) cli_classifier_close(&r->td.val);
    free(r->loop.k);
    if (r->td.have_im) lrc_images_free(&r->td.im);
    lrc_model_free(&r->m);
}

/* The training graph's FLOPs a step (its launches' counts since the profile
 * restarted), their rate over the whole step, and that as a share of the FMA
 * peak measured now with the compiled probe, as lrc profile reports it. */
static void print_step_rate(train_run_ctx *r, double step_s)
{
    const lrc_plan *pl = r->plan.plan;
    double flops = 0;
    for (int i = 0; i < pl->n_launches; i++) flops += pl->launches[i].flops * (double)r->prof_calls[i];
    flops /= (double)r->tr.phase_steps;
    lrc_err err;
    lrc_kernel_fn probe = r->plan.have_c && r->plan.c.jit ? lrc_llvm_jit_lookup(r->plan.c.jit, LRC_PEAK_SYMBOL, &err) : NULL;
    double peak = probe ? lrc_measure_peak_gflops(r->pool, probe, lrc_peak_flops_per_item(&r->plan.c.prog.tiling)) : 0;
    fprintf(stderr, "%.1f GFLOP a step at %.1f GFLOP/s", flops / 1e9, flops / step_s / 1e9);
    if (peak > 0) fprintf(stderr, ": %.1f%% of the FMA peak, %.1f GFLOP/s measured now", 100 * flops / step_s / 1e9 / peak, peak);
    fputc('\n', stderr);
}

/* The steps, with Ctrl-C caught: the step in flight finishes, and the
 * trainer writes a checkpoint before it stops. */
static int train_steps(train_run_ctx *r, lrc_err *err)
{
    lrc_train_hooks hooks = {r, on_batch, on_after_step, on_interrupted, r->ckpath};
    interrupted = 0;
    struct sigaction sa = {0}, old_sa;
    sa.sa_handler = on_sigint;
    sigaction(SIGINT, &sa, &old_sa);
    r->step0 = r->tr.st.step;
    r->t0 = r->tstep = lrc_now_s();
    bool stopped = false;
    int rc = lrc_trainer_run(&r->tr, &hooks, &stopped, err);
    if (!rc && stopped)
        printf("\ninterrupted after step %lld; checkpoint written: continue with lrc train --resume %s\n", (long long)r->tr.st.step, r->dir);
    if (r->line_open) putchar('\n'); /* an error or the summary starts a line of its own */
    if (r->prof_ns) cli_print_quick_profile(r->plan.plan, r->prof_ns, r->prof_calls);
    if (r->prof_ns && r->tr.phase_steps) {
        double n = (double)r->tr.phase_steps, *ph = r->tr.phase_s;
        fprintf(stderr, "a step (the mean of %lld after the first): %.3f ms, of which the graph %.3f ms, the gradient check %.3f ms, AdamW %.3f ms\n",
                (long long)r->tr.phase_steps, 1e3 * (ph[0] + ph[1] + ph[2]) / n, 1e3 * ph[0] / n, 1e3 * ph[1] / n, 1e3 * ph[2] / n);
        lrc_pool_count_busy(r->pool, false, false);
        double busy = lrc_pool_busy_fraction(r->pool);
        fprintf(stderr, "the %d threads were busy %.1f%% of the pool's runs (idle %.1f%%)\n", lrc_pool_threads(r->pool), 100 * busy,
                100 * (1 - busy));
        print_step_rate(r, (ph[0] + ph[1] + ph[2]) / n);
    }
    sigaction(SIGINT, &old_sa, NULL);
    return !rc && stopped ? LRC_EINTERRUPTED : rc;
}

static int train_run(const cli_args *a, const train_args *ta, const char *dir, lrc_err *err)
{
    train_run_ctx r;
    memset(&r, 0, sizeof r);
    r.ta = ta, r.dir = dir, r.B = ta->batch, r.T = ta->seq, r.has_layerrope = true;
    snprintf(r.ckpath, sizeof r.ckpath, "%s/checkpoint.safetensors", dir);
    lrc_trainer_init(&r.tr);
    lrc_trainer *tr = &r.tr;
    tr->sched = (lrc_schedule_cfg){ta->lr, ta->warmup, 0.1, ta->steps};
    tr->adam = (lrc_adamw_cfg){0.9, 0.999, 1e-8, ta->weight_decay, ta->clip, ta->decay_all};
    tr->accum = ta->accum, tr->eval_every = ta->eval_every, tr->dist = ta->dist, tr->zero = ta->zero;
    tr->stop = ta->stop_after > 0 && ta->stop_after < ta->steps ? ta->stop_after : ta->steps;
    lrc_graph *g = lrc_graph_new();
    int rc = train_open_data(&r, a, g, err);
    /* parameters: from the checkpoint when resuming, else initialised */
    if (!rc) rc = ta->resume ? lrc_checkpoint_load(r.ckpath, g, &tr->st, err) : lrc_train_state_new(&tr->st, g, (uint64_t)ta->seed, r.pool, err);
    if (!rc && !ta->resume && ta->init_from) rc = init_from_checkpoint(&tr->st, ta->init_from, ta->lenient, err);
    rc = cli_dist_agree_model(ta->dist, rc, g, &tr->st, err);
    if (!rc) rc = train_open_inputs(&r, g, err);
    if (!rc) {
        rc = train_open_device(&r, g, err);
        g = NULL; /* the compiler's now */
    }
    if (!rc) rc = cli_dist_opt_bytes(ta->dist, tr->opt_bytes, err);
    if (!rc) rc = train_steps(&r, err);
    if (!rc && lrc_dist_rank(ta->dist) == 0) rc = train_finish(&r, err);
    lrc_graph_free(g);
    train_close(&r);
    return rc;
}

/* A new run with a tokenizer: vocab is its size unless --set gives one, and
 * RUN_DIR keeps a copy of it (rank 0's, under mpirun: write). */
static int tokenizer_to_run(cli_args *a, const lrc_tokenizer *tok, const char *json, size_t len, bool write, char *vocab_set,
                            size_t n, lrc_err *err)
{
    bool given = lrc_hf_is_dir(a->m.model); /* its config.json's vocab_size */
    for (int i = 0; i < a->m.n_sets; i++) given = given || !strncmp(a->m.sets[i], "vocab=", 6);
    if (!given) {
        snprintf(vocab_set, n, "vocab=%lld", (long long)lrc_tokenizer_n_vocab(tok));
        cli_model_option(&a->m, OPT_SET, vocab_set);
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/tokenizer.json", a->out);
    return write ? lrc_write_atomic(path, json, len, err) : LRC_OK;
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
                                         {"val-tokens", required_argument, 0, OPT_VAL_TOKENS},
                                         {"seed", required_argument, 0, OPT_SEED},
                                         {"threads", required_argument, 0, OPT_THREADS},
                                         {"stop-after", required_argument, 0, OPT_STOP_AFTER},
                                         {"data", required_argument, 0, OPT_DATA},
                                         {"resume", required_argument, 0, OPT_RESUME},
                                         {"clip", required_argument, 0, OPT_CLIP},
                                         {"accum", required_argument, 0, OPT_ACCUM},
                                         {"zero", required_argument, 0, OPT_ZERO},
                                         {"weight-decay", required_argument, 0, OPT_WEIGHT_DECAY},
                                         {"decay-all", no_argument, 0, OPT_DECAY_ALL},
                                         {"target", required_argument, 0, OPT_TARGET},
                                         {"crop-pad", required_argument, 0, OPT_CROP_PAD},
                                         {"flip", no_argument, 0, OPT_FLIP},
                                         {"tokenizer", required_argument, 0, OPT_TOKENIZER},
                                         {0, 0, 0, 0}};
    static const char *help =
        "usage: lrc train MODEL [--preset P] [--set KEY=VALUE]... --steps N --lr X [--batch B] [--seq T]\n"
        "                 [--warmup F] [--eval-every K] [--val-tokens N] [--seed S] [--threads N] [--stop-after K]\n"
        "                 [--clip G] [--accum K] [--weight-decay W [--decay-all]] [--data FILE|DIR]\n"
        "                 [--tokenizer T] [--crop-pad P] [--flip] [--target cpu|cuda] [--zero 0|1] -o RUN_DIR\n"
        "       lrc train --resume RUN_DIR [--stop-after K] [--threads N] [--zero 0|1]\n"
        "\n"
        "Trains on text, one token per byte (the King James Bible from Debian's\n"
        "bible-kjv unless --data), or the tokens of a Hugging Face tokenizer.json\n"
        "with --tokenizer T (the file, or a directory holding it: the text is encoded\n"
        "once, kept in tokens-HASH.bin beside RUN_DIR, and the run keeps a copy of\n"
        "T; vocab is set to its size unless --set gives it). A Hugging Face directory\n"
        "as MODEL is fine-tuned: its weights (with --set norm=..., those the new\n"
        "placement keeps; the rest from the seed) and its tokenizer.json.\n"
        "AdamW (0.9, 0.999, 1e-8), linear warm-up over F of the steps (default 0.1),\n"
        "then cosine decay to 0.1x the peak rate X.\n"
        "RUN_DIR gets run.json, metrics.jsonl (train and validation loss, rate,\n"
        "gradient norm, tokens/s; with --tokenizer also the validation loss per\n"
        "byte of text; at each evaluation LayerRoPE's scalars, \"layerrope\") and\n"
        "checkpoint.safetensors (parameters, optimizer\n"
        "state, step, random state), written atomically at each evaluation.\n"
        "--stop-after K ends after step K of N; --resume continues bit for bit.\n"
        "--val-tokens N validates on N tokens (bytes, without --tokenizer) of fixed\n"
        "windows of the held-out text, the same whatever the seed (default: four\n"
        "batches the seed draws).\n"
        "--clip G scales the gradients down to a global norm of G (default: off).\n"
        "--accum K averages the gradients of K batches of B per step (default 1).\n"
        "Under mpirun -np N, N ranks share each batch (docs/distributed.md); --zero 1\n"
        "shards AdamW's moments over them (a checkpoint still holds them whole).\n"
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
    const char *extra = resuming ? cli_run_resume_extra(argc, argv) : NULL;
    cli_args a;
    int rc = extra ? cli_usage_error("train", "%s does not apply to --resume, which goes on as the run's run.json says "
                                              "(only --stop-after, --threads and --zero may be given)", extra)
                   : cli_parse_args("train", argc, argv, opts, help, !resuming, &a);
    if (extra) return rc;
    if (rc >= 0) goto out;
    /* a Hugging Face directory: its weights fine-tuned on text as its tokenizer.json encodes it */
    char hf_tok[4200];
    struct stat hst;
    bool hf = !resuming && lrc_hf_is_dir(a.m.model);
    if (hf && !a.tokenizer) {
        snprintf(hf_tok, sizeof hf_tok, "%s/tokenizer.json", a.m.model);
        if (stat(hf_tok, &hst) != 0) {
            rc = cli_usage_error("train", "%s has no tokenizer.json, and its text is not bytes: give --tokenizer", a.m.model);
            goto out;
        }
        a.tokenizer = hf_tok;
    }
    if (a.batch == 0) a.batch = 16;
    if (a.accum == 0) a.accum = 1;
    cJSON *keep = NULL;
    lrc_err err;
    const char *dir = a.resume ? a.resume : a.out;
    /* the commands' default target runs no training: the one that runs its compiled code does */
    const lrc_target *target = lrc_target_compiled(lrc_target_find(a.target));
    if (!target || !target->ex->train) {
        char names[128];
        rc = cli_usage_error("train", "--target %s: training runs on the %s target", a.target,
                             cli_target_names(LRC_TARGET_TRAIN, " or ", names, sizeof names));
        goto out;
    }
    a.target = target->name;
    if (!a.resume && (!a.out || a.steps == -1 || a.lr < 0)) {
        rc = cli_usage_error("train", "needs --steps, --lr and -o RUN_DIR");
        goto out;
    }
    lrc_dist *dist = NULL; /* the ranks, under mpirun */
    int dist_rc = cli_dist_open(&dist, &a, &err), rank0 = lrc_dist_rank(dist) == 0;
    int64_t stop_after = a.stop_after, threads = a.threads, zero = a.zero; /* not run.json's: a run resumes with or without */
    char *hf_weights = hf ? lrc_safetensors_dir_file(a.m.model) : NULL;
    lrc_tokenizer *tok = NULL;
    char *tok_json = NULL, vocab_set[64];
    size_t tok_len = 0;
    bool made_dir = false;
    rc = dist_rc;
    if (!rc && a.resume) {
        rc = cli_run_load(a.resume, &a, &keep, &err);
        a.stop_after = stop_after;
        a.threads = threads, a.zero = zero;
        if (!rc && a.tokenizer) rc = cli_tokenizer_open(a.tokenizer, &tok, &tok_json, &tok_len, &err);
        if (!rc) rc = cli_dist_split(dist, &a, true, &err);
    } else if (!rc) {
        struct stat st;
        if (a.threads == 0 || a.threads < -1) rc = lrc_err_set(&err, "--threads %lld: the thread count must be at least 1", (long long)a.threads);
        else if (a.steps < 1) rc = lrc_err_set(&err, "--steps %lld: train for at least one step", (long long)a.steps);
        else if (a.tokenizer && cli_tokenizer_open(a.tokenizer, &tok, &tok_json, &tok_len, &err)) rc = LRC_EUSER;
        else if (cli_dist_split(dist, &a, false, &err)) rc = LRC_EUSER;
        else if (rank0 && stat(a.out, &st) == 0) rc = lrc_err_set(&err, "%s exists: continue it with --resume %s, or choose another -o", a.out, a.out);
        else if (rank0 && (lrc_make_parents(a.out) || mkdir(a.out, 0755))) rc = lrc_err_set(&err, "%s: cannot create: %s", a.out, strerror(errno));
        else made_dir = rank0; /* rank 0's run directory */
        if (!rc && tok) rc = tokenizer_to_run(&a, tok, tok_json, tok_len, rank0, vocab_set, sizeof vocab_set, &err);
        if (!rc && a.eval_every == 0) a.eval_every = a.steps / 10 > 0 ? a.steps / 10 : 1;
        if (!rc && rank0) rc = cli_run_save(a.out, &a, &err);
    }
    if (!rc && (a.threads == 0 || a.threads < -1)) rc = lrc_err_set(&err, "--threads %lld: the thread count must be at least 1", (long long)a.threads);
    if (!rc && hf && !hf_weights) rc = lrc_err_nomem(&err, "reading %s", a.m.model);
    bool created = !a.resume && rank0 && (!rc || made_dir);
    rc = cli_dist_agree_options(dist, rc, &a, &err);
    if (!rc) {
        bool lenient = false;
        for (int i = 0; i < a.m.n_sets; i++) lenient = lenient || !strncmp(a.m.sets[i], "norm=", 5);
        train_args ta = {a.steps, a.batch, a.seq, a.seed, a.eval_every, a.stop_after, a.accum, a.val_tokens, a.lr, a.warmup, a.clip, a.weight_decay, a.decay_all, a.data, a.resume,
                         tok, tok_json, hf ? hf_weights : NULL, lenient, {a.crop_pad < 0 ? 0 : (int)a.crop_pad, a.flip}, lrc_target_compiled(lrc_target_find(a.target)), dist, (int)a.zero};
        rc = train_run(&a, &ta, dir, &err);
    }
    char ck[4200];
    snprintf(ck, sizeof ck, "%s/checkpoint.safetensors", a.out ? a.out : "");
    struct stat cst;
    if (rc && created && stat(ck, &cst) != 0) { /* a new run that never got going leaves nothing behind */
        static const char *files[] = {"run.json", "metrics.jsonl", "tokenizer.json"};
        for (int i = 0; i < 3; i++) {
            snprintf(ck, sizeof ck, "%s/%s", a.out, files[i]);
            remove(ck);
        }
        rmdir(a.out);
    }
    cli_dist_name_rank(dist, rc, &err); /* the error said before MPI closes; LRC_EQUIET: another rank said it */
    int status = rc == LRC_EINTERRUPTED ? 130 : rc == LRC_EQUIET ? EXIT_USER : rc ? cli_user_error(&err) : 0; /* 130: ended by SIGINT, as shells say */
    rc = cli_dist_close(dist, rc, status);
    lrc_tokenizer_free(tok);
    free(tok_json);
    free(hf_weights);
    cJSON_Delete(keep);
out:
    cli_model_opts_free(&a.m);
    return rc;
}
