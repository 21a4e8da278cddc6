/* test_cuda_optim — lrc train's AdamW on the device (runtime/cuda_optim.c)
 * against the host's (runtime/train.c) on the same gradients: the tiny
 * LLaMA's training graph on the cuda target at f32 and at bf16 storage, its
 * gradients read back once, then given to both optimizers. Checks the
 * global norm, the weights and both moments after a step with weight decay
 * and clipping, the sum of two micro-batches (--accum 2), a bf16 weight
 * rounded from its f32 master (the next loss equals that of a fresh upload),
 * and a non-finite gradient named as the host names it. Guard regions after
 * every buffer (LRC_CUDA_CHECK). Exits 77, skipped, where no cuda device
 * runs it; CI runs it on the host emulator (tests/cuemu).
 * Usage: test_cuda_optim MODEL.lua */
#include "cuda_test.h"
#include "frontend/compile.h"
#include "frontend/lrc_frontend.h"

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
            if (!(e <= worst)) worst = e; /* nan counts as the worst */
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
    cJSON *meta = cJSON_CreateObject();
    cJSON_AddItemToObject(meta, "cuda", lrc_compiled_cuda_meta(&s->c));
    char *text = cJSON_PrintUnformatted(meta);
    cJSON_Delete(meta);
    TRY(lrc_cuda_exec_new(&s->c.plan, text, s->c.cubin, &s->x, &err));
    free(text);
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
    double host_norm = lrc_grads_check(pool, spans, g1, &bad), dev_norm = 0;
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
    lrc_adamw_step(&cfg, pool, spans, 3, 1e-2, host_norm, hp, g1, hm, hv);
    TRY(lrc_cuda_optim_download(o, &err));
    double ep = max_rel(s.items, hp, n, 1e-3), em = max_rel(m, hm, n, 1e-6), ev = max_rel(v, hv, n, 1e-9);
    snprintf(what, sizeof what, "%s: a step with decay and clipping, weights and moments as the host's (1e-6)", tag);
    expect(ep <= 1e-6 && em <= 1e-6 && ev <= 1e-6, what, fmax(ep, fmax(em, ev)));
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
    host_norm = lrc_grads_check(pool, spans, ga, &bad);
    TRY(lrc_cuda_optim_new(s.x, s.items, m, v, n, &cfg, 2, &o, &err));
    fill_tokens(&s.in, 2);
    loss_of(&s);
    TRY(lrc_cuda_optim_grads(o, 0, &dev_norm, &bad, &err));
    fill_tokens(&s.in, 3);
    loss_of(&s);
    TRY(lrc_cuda_optim_grads(o, 1, &dev_norm, &bad, &err));
    TRY(lrc_cuda_optim_step(o, 0, 3e-3, dev_norm, &err));
    lrc_adamw_step(&cfg, pool, spans, 0, 3e-3, host_norm, hp, ga, hm, hv);
    TRY(lrc_cuda_optim_download(o, &err));
    ep = max_rel(s.items, hp, n, 1e-3), em = max_rel(m, hm, n, 1e-6), ev = max_rel(v, hv, n, 1e-9);
    snprintf(what, sizeof what, "%s: two micro-batches averaged: norm %.6g (host %.6g), the step as the host's", tag, dev_norm, host_norm);
    expect(fabs(dev_norm - host_norm) <= 1e-9 * host_norm && ep <= 1e-6 && em <= 1e-6 && ev <= 1e-6, what,
           fmax(fabs(dev_norm - host_norm) / host_norm, fmax(ep, fmax(em, ev))));
    lrc_cuda_optim_free(o);
    free_all(ga, n), free_all(gb, n), free_all(hp, n), free_all(hm, n), free_all(hv, n);

    /* a non-finite gradient: the tensor the host's check names */
    float *w = s.items[n - 1]->data;
    w[0] = NAN;
    TRY(lrc_cuda_exec_bind_params(s.x, &s.params, &err));
    lrc_tensor **gn = host_grads(&s);
    int host_bad;
    lrc_grads_check(pool, spans, gn, &host_bad);
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

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_cuda_optim MODEL.lua\n");
        return 2;
    }
    char arch[16];
    cuda_test_device(arch, sizeof arch); /* the optimizer's buffers get guard regions too */
    check_precision(argv[1], arch, true);
    check_precision(argv[1], arch, false);
    return failed ? 1 : 0;
}
