/* test_decode — decoding one token at a time with a KV cache gives, at
 * every position, the logits PyTorch computed for the whole sequence
 * (tests/fixtures/llama/CASE, every placement), within 1e-5: on the
 * reference backend and compiled for the cpu target.
 * Usage: test_decode MODEL.lua FIXTURE_DIR... */
#include "check.h"
#include "frontend/compile.h"
#include "frontend/lrc_frontend.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>


/* Relative error of logits for position t (all batch rows) against want[B,T,V]. */
static double step_err(const float *got, const lrc_tensor *want, int64_t t)
{
    int64_t B = want->shape.dim[0], T = want->shape.dim[1], V = want->shape.dim[2];
    double num = 0, den = 0;
    for (int64_t b = 0; b < B; b++)
        for (int64_t v = 0; v < V; v++) {
            double w = ((const float *)want->data)[(b * T + t) * V + v], d = got[b * V + v] - w;
            num += d * d;
            den += w * w;
        }
    return sqrt(num) / (den > 0 ? sqrt(den) : 1);
}

static void run_case(const char *model, const char *dir, bool compiled)
{
    char sets[32][128], path[1024], *argv[32];
    int n_sets = read_config_sets(dir, sets, argv, 32);
    lrc_err err;
    lrc_model m = {0};
    lrc_graph *g = lrc_graph_new();
    lrc_tensor_set fin, fexp, wfile, params, in, outs;
    lrc_tensor_set_init(&fin);
    lrc_tensor_set_init(&fexp);
    lrc_tensor_set_init(&wfile);
    lrc_tensor_set_init(&params);
    lrc_tensor_set_init(&in);
    lrc_tensor_set_init(&outs);
    lrc_compiled c;
    memset(&c, 0, sizeof c);
    lrc_pool *pool = NULL;
    lrc_exec *x = NULL;
    lrc_backend *ref = lrc_backend_ref_new();
    const char *label = strrchr(dir, '/') ? strrchr(dir, '/') + 1 : dir;
    snprintf(path, sizeof path, "%s/input.safetensors", dir);
    int rc = lrc_safetensors_load(path, &fin, &err);
    snprintf(path, sizeof path, "%s/expected.safetensors", dir);
    if (!rc) rc = lrc_safetensors_load(path, &fexp, &err);
    const lrc_tensor *tokens = rc ? NULL : lrc_tensor_set_find(&fin, "tokens"), *want = rc ? NULL : fexp.items[0];
    int64_t B = tokens ? tokens->shape.dim[0] : 0, T = tokens ? tokens->shape.dim[1] : 0;
    snprintf(path, sizeof path, "%s/weights.safetensors", dir);
    if (!rc) rc = lrc_model_load(&m, model, NULL, argv, n_sets, &err);
    if (!rc) rc = lrc_model_build(&m, B, 1, g, &err);
    lrc_pass_ctx decode = {.kv_cache_len = T};
    if (!rc) rc = lrc_passes_run(&g, &decode, "kv_cache", &err);
    if (!rc) rc = lrc_safetensors_load(path, &wfile, &err);
    if (!rc) rc = lrc_params_bind(g, &wfile, path, &params, &err);
    lrc_shape ts = {2, {B, 1}}, ps = {1, {1}};
    lrc_tensor *tok = lrc_tensor_new("tokens", LRC_I32, &ts, &err), *pos = lrc_tensor_new("pos", LRC_I32, &ps, &err);
    lrc_tensor_set_add(&in, tok, &err);
    lrc_tensor_set_add(&in, pos, &err);
    if (!rc && !compiled) /* the reference executor takes the caches as tensors it updates */
        for (int i = 0; i < g->n_nodes; i++)
            if (g->nodes[i].op == LRC_OP_STATE) lrc_tensor_set_add(&in, lrc_tensor_new(g->nodes[i].name, LRC_F32, &g->nodes[i].shape, &err), &err);
    if (!rc && compiled) {
        rc = lrc_compile_graph(g, &params, &c, &err);
        g = NULL;
        if (!rc && !(pool = lrc_pool_new(2, &err))) rc = LRC_EUSER;
        if (!rc) rc = lrc_exec_new(&c.plan, pool, &x, &err);
        if (!rc) rc = lrc_exec_bind_params(x, &params, &err);
    }
    double worst = 0;
    for (int64_t t = 0; t < T && !rc; t++) {
        for (int64_t b = 0; b < B; b++) ((int32_t *)tok->data)[b] = ((const int32_t *)tokens->data)[b * T + t];
        ((int32_t *)pos->data)[0] = (int32_t)t;
        lrc_tensor_set_clear(&outs);
        rc = compiled ? lrc_exec_run_plan(x, &in, &outs, &err) : lrc_exec_run(ref, g, &in, &params, &outs, &err);
        if (!rc) {
            double e = step_err(outs.items[0]->data, want, t);
            if (e > worst) worst = e;
        }
    }
    bool ok = !rc && worst <= 1e-5;
    if (rc) printf("FAIL %s (%s): %s\n", label, compiled ? "cpu" : "ref", err.msg);
    else printf("%s %-22s %s decode, %lld steps: worst relative error %.2e\n", ok ? "ok  " : "FAIL", label,
                compiled ? "cpu" : "ref", (long long)T, worst);
    ok ? passed++ : failed++;
    lrc_exec_free(x);
    lrc_pool_free(pool);
    if (c.g) lrc_compiled_free(&c);
    lrc_backend_close(ref);
    lrc_graph_free(g);
    lrc_model_free(&m);
    lrc_tensor_set_clear(&fin);
    lrc_tensor_set_clear(&fexp);
    lrc_tensor_set_clear(&wfile);
    lrc_tensor_set_clear(&params);
    lrc_tensor_set_clear(&in);
    lrc_tensor_set_clear(&outs);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: test_decode MODEL.lua FIXTURE_DIR...\n");
        return 2;
    }
    for (int i = 2; i < argc; i++) {
        run_case(argv[1], argv[i], false);
        run_case(argv[1], argv[i], true);
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
