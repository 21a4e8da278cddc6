/* test_cuda_optim — lrc train's AdamW on the device (runtime/cuda_optim.c)
 * against the host's (runtime/train.c) on the same gradients: the tiny
 * LLaMA's training graph on the cuda target at f32 and at bf16 storage, its
 * gradients read back once, then given to both optimizers. Checks the
 * global norm, the weights and both moments after a step with weight decay
 * and clipping, the sum of two micro-batches (--accum 2), a bf16 weight
 * rounded from its f32 master (the next loss equals that of a fresh upload),
 * and a non-finite gradient named as the host names it. Then, against
 * PyTorch, not the host: the device's AdamW over the 10 steps of every case of
 * tests/fixtures/optim (torch.optim.AdamW with decay, --decay-all, clipping
 * and --accum 3, whose sum and average the device does), at f32 and at bf16
 * storage. Guard regions after every buffer (LRC_CUDA_CHECK). Exits 77,
 * skipped, where no cuda device runs it; CI runs it on the host emulator
 * (tests/cuemu).
 * Usage: test_cuda_optim MODEL.lua [OPTIM_FIXTURE_DIR (default: this tree's)] */
#include "cuda_test.h"
#include "optim_fixture.h"
#include "frontend/compile/lrc_compile.h"
#include "frontend/lua/lrc_lua.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failed;

static void expect(bool ok, const char *what, double figure)
{
    printf("%s: %s (%.3g)\n", ok ? "ok" : "FAIL", what, figure);
    failed += !ok;
}

#define TRY(call)                                                                                                                \
    do {                                                                                                                         \
        if (call) {                                                                                                              \
            printf("FAIL: %s: %s\n", #call, err.msg);                                                                            \
            exit(1);                                                                                                             \
        }                                                                                                                        \
    } while (0)

/* the largest |a - b| / max(|b|, floor) over the tensors */
static double max_rel(lrc_tensor *const *a, lrc_tensor *const *b, int n, double floor)
{
    double worst = 0;
    for (int i = 0; i < n; i++) {
        const float *x = a[i]->data, *y = b[i]->data;
        for (int64_t k = 0; k < lrc_shape_numel(&a[i]->shape); k++) {
            double e = fabs((double)x[k] - y[k]) / fmax(fabs((double)y[k]), floor);
            if (isnan(e) || e > worst) worst = e; /* a nan is the worst, and stays */
        }
    }
    return worst;
}

static lrc_tensor **copies(lrc_tensor *const *t, int n, lrc_err *err)
{
    lrc_tensor **c = lrc_xcalloc((size_t)n + 1, sizeof *c);
    for (int i = 0; i < n; i++) {
        if (!(c[i] = lrc_tensor_new(t[i]->name, LRC_F32, &t[i]->shape, err))) exit(1);
        memcpy(c[i]->data, t[i]->data, t[i]->nbytes);
    }
    return c;
}

static void free_all(lrc_tensor **t, int n)
{
    for (int i = 0; i < n; i++) lrc_tensor_free(t[i]);
    free(t);
}

static void fill_tokens(lrc_tensor_set *in, int seed)
{
    int32_t *tok = lrc_tensor_set_find(in, "tokens")->data, *lab = lrc_tensor_set_find(in, "labels")->data;
    int64_t n = lrc_shape_numel(&lrc_tensor_set_find(in, "tokens")->shape);
    for (int64_t k = 0; k < n; k++) tok[k] = (int32_t)((7 * k + 3 * seed + 1) % 251), lab[k] = (int32_t)((5 * k + seed) % 256);
}

typedef struct {
    lrc_compiled c;
    lrc_cuda_exec *x;
    lrc_tensor_set params, in, outs;
    lrc_tensor **items; /* the parameters in the graph's order */
    int n;
} setup;

static void setup_open(setup *s, const char *model, const char *arch, bool f32)
{
    lrc_err err;
    lrc_model m;
    memset(s, 0, sizeof *s);
    lrc_tensor_set_init(&s->in);
    lrc_tensor_set_init(&s->outs);
    lrc_graph *g = lrc_graph_new();
    TRY(lrc_model_load(&m, model, "tiny", NULL, 0, &err));
    TRY(lrc_model_build_training(&m, 2, 16, g, &err));
    lrc_model_free(&m);
    TRY(lrc_params_init(g, 7, NULL, &s->params, &err));
    s->items = lrc_xcalloc((size_t)g->n_nodes + 1, sizeof *s->items);
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].op == LRC_OP_PARAM) s->items[s->n++] = lrc_tensor_set_find(&s->params, g->nodes[i].name);
    lrc_shape bt = {2, {2, 16}};
    lrc_tensor *tok = lrc_tensor_new("tokens", LRC_I32, &bt, &err), *lab = lrc_tensor_new("labels", LRC_I32, &bt, &err);
    TRY(!tok || !lab || lrc_tensor_set_add(&s->in, tok, &err) || lrc_tensor_set_add(&s->in, lab, &err));
    TRY(lrc_compile_graph_cuda(g, NULL, arch, f32, &s->c, &err)); /* takes g */
    TRY(lrc_cuda_exec_new(&s->c.plan, &s->c.cuda.table, s->c.cubin, &s->x, &err));
    TRY(lrc_cuda_exec_bind_params(s->x, &s->params, &err));
}

static void setup_close(setup *s)
{
    lrc_cuda_exec_free(s->x);
    lrc_compiled_free(&s->c);
    lrc_tensor_set_clear(&s->params);
    lrc_tensor_set_clear(&s->in);
    lrc_tensor_set_clear(&s->outs);
    free(s->items);
}

/* the gradients of the inputs' current batch, read back from the device */
static lrc_tensor **host_grads(setup *s)
{
    lrc_err err;
    TRY(lrc_cuda_exec_run(s->x, &s->in, &s->outs, &err));
    lrc_tensor **g = lrc_xcalloc((size_t)s->n + 1, sizeof *g);
    for (int i = 0; i < s->n; i++) g[i] = lrc_tensor_set_find(&s->outs, s->items[i]->name);
    lrc_tensor **c = copies(g, s->n, &err);
    free(g); /* the run's outputs themselves stay in s->outs */
    return c;
}

static float loss_of(setup *s)
{
    lrc_err err;
    TRY(lrc_cuda_exec_run(s->x, &s->in, &s->outs, &err));
    return ((float *)lrc_tensor_set_find(&s->outs, "loss")->data)[0];
}

static void check_precision(const char *model, const char *arch, bool f32)
{
    const char *tag = f32 ? "f32" : "bf16";
    char what[160];
    lrc_err err;
    setup s;
    setup_open(&s, model, arch, f32);
    int n = s.n;
    lrc_pool *pool = lrc_pool_new(1, &err);
    lrc_param_spans *spans = lrc_param_spans_new(s.items, n);
    /* moments from an earlier step: small, v positive */
    lrc_tensor **m = copies(s.items, n, &err), **v = copies(s.items, n, &err);
    for (int i = 0; i < n; i++)
        for (int64_t k = 0; k < lrc_shape_numel(&m[i]->shape); k++) {
            ((float *)m[i]->data)[k] = 1e-3f * (float)((k * 37 + i) % 19 - 9);
            ((float *)v[i]->data)[k] = 1e-6f * (float)((k * 11 + i) % 13 + 1);
        }
    lrc_adamw_cfg cfg = {0.9, 0.999, 1e-8, 0.1, 0.5, false}; /* decay on matrices, clipping at 0.5 */

    /* one micro-batch */
    fill_tokens(&s.in, 1);
    lrc_tensor **g1 = host_grads(&s);
    lrc_tensor **hp = copies(s.items, n, &err), **hm = copies(m, n, &err), **hv = copies(v, n, &err);
    int bad;
    double host_norm = 0, dev_norm = 0;
    TRY(lrc_grads_check(pool, spans, g1, &host_norm, &bad, &err));
    lrc_cuda_optim *o;
    TRY(lrc_cuda_optim_new(s.x, s.items, m, v, n, &cfg, 1, &o, &err));
    float lh = ((float *)lrc_tensor_set_find(&s.outs, "loss")->data)[0];
    lrc_tensor *stale = lrc_tensor_set_find(&s.outs, s.items[0]->name);
    ((float *)stale->data)[0] = 12345.f;
    float l0 = loss_of(&s); /* the same batch again, the gradients left on the device */
    snprintf(what, sizeof what, "%s: the same loss run to run (%.7g, %.7g), the gradients not read back", tag, lh, l0);
    expect(l0 == lh && ((float *)stale->data)[0] == 12345.f, what, fabs(l0 - lh));
    TRY(lrc_cuda_optim_grads(o, 0, &dev_norm, &bad, &err));
    snprintf(what, sizeof what, "%s: the gradients' global norm %.6g on the device, %.6g on the host", tag, dev_norm, host_norm);
    expect(bad < 0 && fabs(dev_norm - host_norm) <= 1e-9 * host_norm, what, fabs(dev_norm - host_norm) / host_norm);
    TRY(lrc_cuda_optim_step(o, 3, 1e-2, dev_norm, &err));
    TRY(lrc_adamw_step(&cfg, pool, spans, 3, 1e-2, host_norm, hp, g1, hm, hv, &err));
    TRY(lrc_cuda_optim_download(o, &err));
    double ep = max_rel(s.items, hp, n, 1e-3), em = max_rel(m, hm, n, 1e-6), ev = max_rel(v, hv, n, 1e-9);
    snprintf(what, sizeof what, "%s: a step with decay and clipping, weights and moments as the host's (1e-6)", tag);
    expect(ep <= 1e-6 && em <= 1e-6 && ev <= 1e-6, what, optim_worse(ep, optim_worse(em, ev)));
    /* the graph reads the new weights: the same loss as after a fresh upload of the master */
    float l_dev = loss_of(&s);
    TRY(lrc_cuda_exec_bind_params(s.x, &s.params, &err));
    float l_up = loss_of(&s);
    snprintf(what, sizeof what, "%s: the graph's weights are the master's, rounded as an upload rounds (loss %.7g, %.7g)", tag, l_dev, l_up);
    expect(l_dev == l_up && l_dev != l0, what, fabs(l_dev - l_up));
    lrc_cuda_optim_free(o);
    free_all(g1, n), free_all(hp, n), free_all(hm, n), free_all(hv, n);

    /* two micro-batches summed and averaged (--accum 2) */
    fill_tokens(&s.in, 2);
    lrc_tensor **ga = host_grads(&s);
    fill_tokens(&s.in, 3);
    lrc_tensor **gb = host_grads(&s);
    for (int i = 0; i < n; i++) { /* as cmd_train.c sums them */
        float *a = ga[i]->data;
        const float *b = gb[i]->data;
        for (int64_t k = 0; k < lrc_shape_numel(&ga[i]->shape); k++) a[k] = (a[k] + b[k]) / 2.f;
    }
    hp = copies(s.items, n, &err), hm = copies(m, n, &err), hv = copies(v, n, &err);
    TRY(lrc_grads_check(pool, spans, ga, &host_norm, &bad, &err));
    TRY(lrc_cuda_optim_new(s.x, s.items, m, v, n, &cfg, 2, &o, &err));
    fill_tokens(&s.in, 2);
    loss_of(&s);
    TRY(lrc_cuda_optim_grads(o, 0, &dev_norm, &bad, &err));
    fill_tokens(&s.in, 3);
    loss_of(&s);
    TRY(lrc_cuda_optim_grads(o, 1, &dev_norm, &bad, &err));
    TRY(lrc_cuda_optim_step(o, 0, 3e-3, dev_norm, &err));
    TRY(lrc_adamw_step(&cfg, pool, spans, 0, 3e-3, host_norm, hp, ga, hm, hv, &err));
    TRY(lrc_cuda_optim_download(o, &err));
    ep = max_rel(s.items, hp, n, 1e-3), em = max_rel(m, hm, n, 1e-6), ev = max_rel(v, hv, n, 1e-9);
    snprintf(what, sizeof what, "%s: two micro-batches averaged: norm %.6g (host %.6g), the step as the host's", tag, dev_norm, host_norm);
    expect(fabs(dev_norm - host_norm) <= 1e-9 * host_norm && ep <= 1e-6 && em <= 1e-6 && ev <= 1e-6, what,
           optim_worse(fabs(dev_norm - host_norm) / host_norm, optim_worse(ep, optim_worse(em, ev))));
    lrc_cuda_optim_free(o);
    free_all(ga, n), free_all(gb, n), free_all(hp, n), free_all(hm, n), free_all(hv, n);

    /* a non-finite gradient: the tensor the host's check names */
    float *w = s.items[n - 1]->data;
    w[0] = NAN;
    TRY(lrc_cuda_exec_bind_params(s.x, &s.params, &err));
    lrc_tensor **gn = host_grads(&s);
    int host_bad;
    double gn_norm;
    TRY(lrc_grads_check(pool, spans, gn, &gn_norm, &host_bad, &err));
    TRY(lrc_cuda_optim_new(s.x, s.items, m, v, n, &cfg, 1, &o, &err));
    loss_of(&s);
    TRY(lrc_cuda_optim_grads(o, 0, &dev_norm, &bad, &err));
    snprintf(what, sizeof what, "%s: a nan weight: the first non-finite gradient is '%s' (the host says '%s')", tag,
             bad >= 0 ? s.items[bad]->name : "none", host_bad >= 0 ? s.items[host_bad]->name : "none");
    expect(bad >= 0 && bad == host_bad, what, (double)bad);
    lrc_cuda_optim_free(o);
    free_all(gn, n), free_all(m, n), free_all(v, n);
    lrc_param_spans_free(spans);
    lrc_pool_free(pool);
    setup_close(&s);
}

/* A training graph that hands its inputs back as the gradients: the fixture's
 * parameters, an f32 input 'grad.<p>' per parameter, the output named as the
 * parameter its input times 1 (exact), and a loss that reads every parameter
 * (so the plan keeps their buffers). The device's optimizer then sees
 * PyTorch's gradients bit for bit. */
static lrc_graph *fixture_graph(const optim_case *c)
{
    lrc_err err;
    lrc_graph *g = lrc_graph_new();
    int loss = -1;
    for (int i = 0; i < OPTIM_N_PARAMS; i++) {
        const lrc_shape *sh = &optim_get(c, "init", -1, -1, i)->shape;
        char in[64];
        snprintf(in, sizeof in, "grad.%s", optim_names[i]);
        int p = lrc_graph_add_param(g, optim_names[i], sh, (lrc_init){LRC_INIT_ZEROS, 0}, "test", NULL, &err), x;
        TRY(p < 0 || (x = lrc_graph_add_input(g, in, LRC_F32, sh, NULL, &err)) < 0);
        int gr = lrc_graph_add(g, &(lrc_node){.op = LRC_OP_SCALE, .n_in = 1, .in = {x}, .fattr = {1.0}}, &err);
        int sum = lrc_graph_add(g, &(lrc_node){.op = LRC_OP_SUM_TO, .n_in = 1, .in = {p}}, &err);
        TRY(gr < 0 || sum < 0 || lrc_graph_add_output(g, optim_names[i], gr, &err));
        loss = loss < 0 ? sum : lrc_graph_add(g, &(lrc_node){.op = LRC_OP_ADD, .n_in = 2, .in = {loss, sum}}, &err);
        TRY(loss < 0);
    }
    TRY(lrc_graph_add_output(g, "loss", loss, &err));
    return g;
}

/* one fixture case on the device: every step's micro-batches run through the
 * graph into lrc_cuda_optim_grads, then lrc_cuda_optim_step at PyTorch's
 * learning rate, the weights and moments read back and compared */
static void check_fixture(const char *dir, const char *name, const char *arch, bool f32)
{
    lrc_err err;
    optim_case c;
    optim_case_load(&c, dir, name);
    lrc_compiled comp;
    TRY(lrc_compile_graph_cuda(fixture_graph(&c), NULL, arch, f32, &comp, &err)); /* takes the graph */
    lrc_cuda_exec *x;
    TRY(lrc_cuda_exec_new(&comp.plan, &comp.cuda.table, comp.cubin, &x, &err));
    lrc_tensor_set params, in, outs;
    lrc_tensor_set_init(&params), lrc_tensor_set_init(&in), lrc_tensor_set_init(&outs);
    lrc_tensor *p[OPTIM_N_PARAMS], *m[OPTIM_N_PARAMS], *v[OPTIM_N_PARAMS], *gin[OPTIM_N_PARAMS];
    for (int i = 0; i < OPTIM_N_PARAMS; i++) {
        p[i] = optim_copy(optim_get(&c, "init", -1, -1, i), i);
        m[i] = optim_copy(p[i], i), v[i] = optim_copy(p[i], i);
        memset(m[i]->data, 0, m[i]->nbytes);
        memset(v[i]->data, 0, v[i]->nbytes);
        char nm[64];
        snprintf(nm, sizeof nm, "grad.%s", optim_names[i]);
        TRY(!(gin[i] = lrc_tensor_new(nm, LRC_F32, &p[i]->shape, &err)) || lrc_tensor_set_add(&in, gin[i], &err) ||
            lrc_tensor_set_add(&params, p[i], &err));
    }
    TRY(lrc_cuda_exec_bind_params(x, &params, &err));
    lrc_cuda_optim *o;
    TRY(lrc_cuda_optim_new(x, p, m, v, OPTIM_N_PARAMS, &c.cfg, c.accum, &o, &err));
    double ep = 0, em = 0, ev = 0, en = 0;
    for (int64_t s = 0; s < c.steps; s++) {
        double norm = 0;
        int bad = -1;
        for (int64_t j = 0; j < c.accum; j++) {
            for (int i = 0; i < OPTIM_N_PARAMS; i++) memcpy(gin[i]->data, optim_get(&c, "grad", s, j, i)->data, gin[i]->nbytes);
            TRY(lrc_cuda_exec_run(x, &in, &outs, &err));
            TRY(lrc_cuda_optim_grads(o, j, &norm, &bad, &err));
        }
        en = optim_worse(en, bad >= 0 ? INFINITY : fabs(norm - c.norm[s]) / c.norm[s]);
        TRY(lrc_cuda_optim_step(o, s, c.lr[s], norm, &err));
        TRY(lrc_cuda_optim_download(o, &err));
        for (int i = 0; i < OPTIM_N_PARAMS; i++) {
            ep = optim_worse(ep, optim_rel(p[i], optim_get(&c, "p", s, -1, i)));
            em = optim_worse(em, optim_rel(m[i], optim_get(&c, "m", s, -1, i)));
            ev = optim_worse(ev, optim_rel(v[i], optim_get(&c, "v", s, -1, i)));
        }
    }
    char what[256];
    snprintf(what, sizeof what, "%s: torch fixture '%s' (accum %lld), %lld steps as PyTorch's: norm %.2g (%g), weights %.2g (%g), "
             "exp_avg %.2g (%g), exp_avg_sq %.2g (%g); worst share of a bound", f32 ? "f32" : "bf16", name, (long long)c.accum,
             (long long)c.steps, en, OPTIM_TOL_NORM, ep, OPTIM_TOL_P, em, OPTIM_TOL_M, ev, OPTIM_TOL_V);
    expect(en <= OPTIM_TOL_NORM && ep <= OPTIM_TOL_P && em <= OPTIM_TOL_M && ev <= OPTIM_TOL_V, what,
           optim_worse(en / OPTIM_TOL_NORM, optim_worse(ep / OPTIM_TOL_P, optim_worse(em / OPTIM_TOL_M, ev / OPTIM_TOL_V))));
    lrc_cuda_optim_free(o);
    lrc_cuda_exec_free(x);
    lrc_compiled_free(&comp);
    for (int i = 0; i < OPTIM_N_PARAMS; i++) lrc_tensor_free(m[i]), lrc_tensor_free(v[i]);
    lrc_tensor_set_clear(&params), lrc_tensor_set_clear(&in), lrc_tensor_set_clear(&outs);
    lrc_tensor_set_clear(&c.st);
}

int main(int argc, char **argv)
{
    if (argc != 2 && argc != 3) {
        fprintf(stderr, "usage: test_cuda_optim MODEL.lua [OPTIM_FIXTURE_DIR]\n");
        return 2;
    }
    /* bench/gpu/run.sh passes the model alone: the fixtures of this source tree then */
    const char *fixtures = argc == 3 ? argv[2] : LRC_OPTIM_FIXTURES;
    char arch[16];
    cuda_test_device(arch, sizeof arch); /* the optimizer's buffers get guard regions too */
    check_precision(argv[1], arch, true);
    check_precision(argv[1], arch, false);
    static const char *cases[] = {"plain", "decay", "decay_all", "clip", "accum"};
    for (int f32 = 1; f32 >= 0; f32--)
        for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) check_fixture(fixtures, cases[i], arch, f32);
    return failed ? 1 : 0;
}
