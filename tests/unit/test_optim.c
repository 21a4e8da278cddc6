/* test_optim — lrc train's AdamW on the host (runtime/train.c,
 * lrc_adamw_step with lrc_grads_check's norm for --clip) and its learning-
 * rate schedule (lrc_lr_at) against independent references: PyTorch's
 * torch.optim.AdamW and clip_grad_norm_ over 10 seeded steps, and a closed
 * form of the schedule, both from tests/reference/make_optim_fixtures.py.
 * Every step compares the weights, both moments and the global norm; every
 * step of every (steps, warmup) setting compares the learning rate.
 * Usage: test_optim FIXTURE_DIR (tests/fixtures/optim) */
#include "optim_fixture.h"

static int failed;

static void expect(bool ok, const char *what, double figure)
{
    printf("%s: %s (%.3g)\n", ok ? "ok" : "FAIL", what, figure);
    failed += !ok;
}

/* the gradient of step s as lrc train uses it: with --accum K, the K
 * micro-batches summed in f32 in order and divided by K, as
 * frontend/cli/cmd_train.c's engine_grads does on the CPU (a static function of
 * the command, so the host test repeats it here; the device's own sum,
 * runtime/cuda_optim.c's, is what test_cuda_optim checks) */
static void optim_average(const optim_case *c, int64_t s, lrc_tensor **g)
{
    for (int i = 0; i < OPTIM_N_PARAMS; i++) {
        float *a = g[i]->data;
        int64_t n = lrc_shape_numel(&g[i]->shape);
        for (int64_t j = 0; j < c->accum; j++) {
            const float *x = optim_get(c, "grad", s, j, i)->data;
            for (int64_t k = 0; k < n; k++) a[k] = j ? a[k] + x[k] : x[k];
        }
        for (int64_t k = 0; c->accum > 1 && k < n; k++) a[k] /= (float)c->accum;
    }
}

/* one case: the parameters from init/, then every step's gradients through
 * lrc_grads_check and lrc_adamw_step at the fixture's learning rate */
static void check_case(const char *dir, const char *name)
{
    optim_case c;
    optim_case_load(&c, dir, name);
    lrc_err err;
    lrc_tensor *p[OPTIM_N_PARAMS], *g[OPTIM_N_PARAMS], *m[OPTIM_N_PARAMS], *v[OPTIM_N_PARAMS];
    for (int i = 0; i < OPTIM_N_PARAMS; i++) {
        p[i] = optim_copy(optim_get(&c, "init", -1, -1, i), i);
        g[i] = optim_copy(p[i], i), m[i] = optim_copy(p[i], i), v[i] = optim_copy(p[i], i);
        memset(m[i]->data, 0, m[i]->nbytes); /* PyTorch's state starts at zeros, as lrc train's */
        memset(v[i]->data, 0, v[i]->nbytes);
    }
    lrc_pool *pool = lrc_pool_new(1, &err);
    if (!pool) optim_die("%s", err.msg);
    lrc_param_spans *spans = lrc_param_spans_new(p, OPTIM_N_PARAMS);
    double ep = 0, em = 0, ev = 0, en = 0, elr = 0;
    int64_t clipped = 0;
    for (int64_t s = 0; s < c.steps; s++) {
        optim_average(&c, s, g);
        int bad;
        double norm;
        if (lrc_grads_check(pool, spans, g, &norm, &bad, &err)) optim_die("%s", err.msg);
        en = optim_worse(en, bad >= 0 ? INFINITY : fabs(norm - c.norm[s]) / c.norm[s]);
        clipped += c.cfg.clip > 0 && norm > c.cfg.clip;
        /* the schedule lrc train would give this step, against the closed form */
        elr = optim_worse(elr, fabs(lrc_lr_at(&c.sched, s) - c.lr[s]) / c.lr[s]);
        if (lrc_adamw_step(&c.cfg, pool, spans, s, c.lr[s], norm, p, g, m, v, &err)) optim_die("%s", err.msg);
        for (int i = 0; i < OPTIM_N_PARAMS; i++) {
            ep = optim_worse(ep, optim_rel(p[i], optim_get(&c, "p", s, -1, i)));
            em = optim_worse(em, optim_rel(m[i], optim_get(&c, "m", s, -1, i)));
            ev = optim_worse(ev, optim_rel(v[i], optim_get(&c, "v", s, -1, i)));
        }
    }
    char what[256];
    snprintf(what, sizeof what, "%s: global norm as clip_grad_norm_'s, every step (%g)", name, OPTIM_TOL_NORM);
    expect(en <= OPTIM_TOL_NORM, what, en);
    snprintf(what, sizeof what, "%s: clipping at %g clips %lld of %lld steps (PyTorch: %lld)", name, c.cfg.clip,
             (long long)clipped, (long long)c.steps, (long long)c.clipped);
    expect(clipped == c.clipped, what, (double)clipped);
    snprintf(what, sizeof what, "%s: lrc_lr_at as the closed form at the case's steps (1e-12)", name);
    expect(elr <= 1e-12, what, elr);
    snprintf(what, sizeof what, "%s: weights after each of %lld steps as torch.optim.AdamW's (%g)", name, (long long)c.steps, OPTIM_TOL_P);
    expect(ep <= OPTIM_TOL_P, what, ep);
    snprintf(what, sizeof what, "%s: exp_avg after each step (%g)", name, OPTIM_TOL_M);
    expect(em <= OPTIM_TOL_M, what, em);
    snprintf(what, sizeof what, "%s: exp_avg_sq after each step (%g)", name, OPTIM_TOL_V);
    expect(ev <= OPTIM_TOL_V, what, ev);
    for (int i = 0; i < OPTIM_N_PARAMS; i++) lrc_tensor_free(p[i]), lrc_tensor_free(g[i]), lrc_tensor_free(m[i]), lrc_tensor_free(v[i]);
    lrc_param_spans_free(spans);
    lrc_pool_free(pool);
    lrc_tensor_set_clear(&c.st);
}

/* every (steps, warmup) setting of schedule.json, step by step */
static void check_schedule(const char *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/schedule.json", dir);
    FILE *f = fopen(path, "rb");
    if (!f) optim_die("%s: cannot open", path);
    size_t len;
    char *text = lrc_read_all(f, &len);
    fclose(f);
    cJSON *j = text ? cJSON_Parse(text) : NULL;
    free(text);
    const cJSON *cases = cJSON_GetObjectItemCaseSensitive(j, "cases");
    if (!cJSON_IsArray(cases) || cJSON_GetArraySize(cases) < 2) optim_die("%s: no cases", path);
    double peak = cJSON_GetObjectItemCaseSensitive(j, "peak")->valuedouble, floor = cJSON_GetObjectItemCaseSensitive(j, "floor")->valuedouble;
    const cJSON *e;
    cJSON_ArrayForEach(e, cases)
    {
        lrc_schedule_cfg s = {peak, cJSON_GetObjectItemCaseSensitive(e, "warmup")->valuedouble, floor,
                              (int64_t)cJSON_GetObjectItemCaseSensitive(e, "steps")->valuedouble};
        const cJSON *lr = cJSON_GetObjectItemCaseSensitive(e, "lr");
        if (cJSON_GetArraySize(lr) != s.steps) optim_die("%s: %lld steps but %d rates", path, (long long)s.steps, cJSON_GetArraySize(lr));
        double worst = 0;
        int64_t at = 0;
        for (int64_t k = 0; k < s.steps; k++) {
            double want = cJSON_GetArrayItem(lr, (int)k)->valuedouble, got = lrc_lr_at(&s, k), r = fabs(got - want) / want;
            if (!(r <= worst) || k == 0) worst = r, at = k;
        }
        char what[160];
        snprintf(what, sizeof what, "schedule: %lld steps, warmup %g: every step's rate as the closed form's (1e-12; worst at step %lld)",
                 (long long)s.steps, s.warmup, (long long)at);
        expect(worst <= 1e-12, what, worst);
    }
    cJSON_Delete(j);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_optim FIXTURE_DIR\n");
        return 2;
    }
    static const char *cases[] = {"plain", "decay", "decay_all", "clip", "accum"};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) check_case(argv[1], cases[i]);
    check_schedule(argv[1]);
    return failed ? 1 : 0;
}
