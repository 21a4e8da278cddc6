/* test_decode — decoding one token at a time with a KV cache gives, at
 * every position, the logits PyTorch computed for the whole sequence
 * (tests/fixtures/llama/CASE, every placement), within 1e-5: on the
 * reference backend and compiled for the cpu target.
 * Usage: test_decode MODEL.lua FIXTURE_DIR... */
#include "check.h"
#include "frontend/compile/lrc_compile.h"
#include "frontend/lua/lrc_lua.h"

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

/* ---- one attention layer: GQA, a window, the soft-cap ------------------- */

/* q [B,T,H,D] and k, v [B,T,Hkv,D] inputs, RoPE on q and k, causal attention
 * with a window and a soft-cap: output "y". */
static lrc_graph *attention_graph(int64_t B, int64_t T, int64_t H, int64_t Hkv, int64_t D, int64_t window, double cap)
{
    lrc_err err;
    lrc_graph *g = lrc_graph_new();
    lrc_shape qs = {4, {B, T, H, D}}, ks = {4, {B, T, Hkv, D}};
    int q = lrc_graph_add_input(g, "q", LRC_F32, &qs, NULL, &err), k = lrc_graph_add_input(g, "k", LRC_F32, &ks, NULL, &err);
    int v = lrc_graph_add_input(g, "v", LRC_F32, &ks, NULL, &err);
    lrc_node rq = {.op = LRC_OP_ROPE, .n_in = 1, .in = {q}, .fattr = {500.0}}, rk = {.op = LRC_OP_ROPE, .n_in = 1, .in = {k}, .fattr = {500.0}};
    lrc_node a = {.op = LRC_OP_ATTENTION, .n_in = 3, .in = {lrc_graph_add(g, &rq, &err), lrc_graph_add(g, &rk, &err), v},
                  .iattr = {1, window}, .fattr = {1.0 / sqrt((double)D), cap}};
    int y = lrc_graph_add(g, &a, &err);
    if (y < 0 || lrc_graph_add_output(g, "y", y, &err)) {
        printf("FAIL attention graph: %s\n", err.msg);
        lrc_graph_free(g);
        return NULL;
    }
    return g;
}

static lrc_tensor *filled(const char *name, int64_t B, int64_t T, int64_t H, int64_t D, uint32_t seed)
{
    lrc_err err;
    lrc_shape s = {4, {B, T, H, D}};
    lrc_tensor *t = lrc_tensor_new(name, LRC_F32, &s, &err);
    for (int64_t i = 0; i < lrc_shape_numel(&s); i++) {
        seed = seed * 1664525u + 1013904223u;
        ((float *)t->data)[i] = (float)((double)(seed >> 8) / (double)(1u << 24) * 4.0 - 2.0);
    }
    return t;
}

/* Rows t of x [B,T,H,D] into dst [B,1,H,D]. */
static void take_row(const lrc_tensor *x, lrc_tensor *dst, int64_t t)
{
    int64_t B = x->shape.dim[0], T = x->shape.dim[1], row = x->shape.dim[2] * x->shape.dim[3];
    for (int64_t b = 0; b < B; b++)
        memcpy((float *)dst->data + b * row, (const float *)x->data + (b * T + t) * row, (size_t)row * sizeof(float));
}

/* Decoding one position at a time with the KV cache (kv_attention: caches of
 * Hkv heads, the window over absolute positions) gives the whole sequence's
 * attention at every position, on ref and compiled for the cpu. */
static void run_attention_case(int64_t H, int64_t Hkv, int64_t window, double cap, bool compiled)
{
    const int64_t B = 2, T = 9, D = 8;
    lrc_err err;
    lrc_tensor_set full_in, full_out, in, outs, params;
    lrc_tensor_set_init(&full_in);
    lrc_tensor_set_init(&full_out);
    lrc_tensor_set_init(&in);
    lrc_tensor_set_init(&outs);
    lrc_tensor_set_init(&params);
    lrc_backend *ref = lrc_backend_ref_new();
    lrc_compiled c;
    memset(&c, 0, sizeof c);
    lrc_pool *pool = NULL;
    lrc_exec *x = NULL;
    const lrc_tensor *src[3] = {filled("q", B, T, H, D, 1), filled("k", B, T, Hkv, D, 2), filled("v", B, T, Hkv, D, 3)};
    for (int i = 0; i < 3; i++) lrc_tensor_set_add(&full_in, (lrc_tensor *)src[i], &err);
    lrc_graph *fg = attention_graph(B, T, H, Hkv, D, window, cap), *g = attention_graph(B, 1, H, Hkv, D, window, cap);
    int rc = fg && g ? lrc_exec_run(ref, fg, &full_in, &params, &full_out, &err) : LRC_EUSER;
    lrc_pass_ctx decode = {.kv_cache_len = T};
    if (!rc) rc = lrc_passes_run(&g, &decode, "kv_cache", &err);
    int64_t cache_heads = -1;
    for (int i = 0; !rc && i < g->n_nodes; i++)
        if (g->nodes[i].op == LRC_OP_STATE) cache_heads = g->nodes[i].shape.dim[2];
    lrc_tensor *row[3] = {filled("q", B, 1, H, D, 0), filled("k", B, 1, Hkv, D, 0), filled("v", B, 1, Hkv, D, 0)};
    lrc_shape ps = {1, {1}};
    lrc_tensor *pos = lrc_tensor_new("pos", LRC_I32, &ps, &err);
    for (int i = 0; i < 3; i++) lrc_tensor_set_add(&in, row[i], &err);
    lrc_tensor_set_add(&in, pos, &err);
    if (!rc && !compiled)
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
        for (int i = 0; i < 3; i++) take_row(src[i], row[i], t);
        ((int32_t *)pos->data)[0] = (int32_t)t;
        lrc_tensor_set_clear(&outs);
        rc = compiled ? lrc_exec_run_plan(x, &in, &outs, &err) : lrc_exec_run(ref, g, &in, &params, &outs, &err);
        const lrc_tensor *want = rc ? NULL : full_out.items[0];
        double num = 0, den = 0;
        for (int64_t b = 0; !rc && b < B; b++)
            for (int64_t i = 0; i < H * D; i++) {
                double w = ((const float *)want->data)[(b * T + t) * H * D + i], d = ((const float *)outs.items[0]->data)[b * H * D + i] - w;
                num += d * d;
                den += w * w;
            }
        if (!rc && sqrt(num / den) > worst) worst = sqrt(num / den);
    }
    bool ok = !rc && worst <= 1e-5 && cache_heads == Hkv;
    char label[64];
    snprintf(label, sizeof label, "attention H=%lld Hkv=%lld window=%lld softcap=%g", (long long)H, (long long)Hkv, (long long)window, cap);
    if (rc) printf("FAIL %s (%s): %s\n", label, compiled ? "cpu" : "ref", err.msg);
    else printf("%s %s %s decode, %lld steps: worst relative error %.2e, caches of %lld heads\n", ok ? "ok  " : "FAIL", label,
                compiled ? "cpu" : "ref", (long long)T, worst, (long long)cache_heads);
    ok ? passed++ : failed++;
    lrc_exec_free(x);
    lrc_pool_free(pool);
    if (c.g) lrc_compiled_free(&c);
    lrc_backend_close(ref);
    lrc_graph_free(g);
    lrc_graph_free(fg);
    lrc_tensor_set_clear(&full_in);
    lrc_tensor_set_clear(&full_out);
    lrc_tensor_set_clear(&in);
    lrc_tensor_set_clear(&outs);
    lrc_tensor_set_clear(&params);
}

/* The decoder takes causal self-attention only: with a bias, Tk != Tq or
 * Dv != Dqk the kv_cache pass refuses it in one line. */
static void run_general_refused(void)
{
    const char *what[3] = {"a bias", "Tk != Tq", "Dv != Dqk"};
    for (int c = 0; c < 3; c++) {
        lrc_err err;
        lrc_graph *g = lrc_graph_new();
        lrc_shape qs = {4, {1, 4, 2, 8}}, ks = {4, {1, c == 1 ? 3 : 4, 2, 8}}, vs = {4, {1, c == 1 ? 3 : 4, 2, c == 2 ? 6 : 8}};
        lrc_shape bs = {4, {1, 1, 4, 4}};
        lrc_node a = {.op = LRC_OP_ATTENTION, .n_in = c == 0 ? 4 : 3, .iattr = {1}, .fattr = {0.35}};
        a.in[0] = lrc_graph_add_input(g, "q", LRC_F32, &qs, NULL, &err);
        a.in[1] = lrc_graph_add_input(g, "k", LRC_F32, &ks, NULL, &err);
        a.in[2] = lrc_graph_add_input(g, "v", LRC_F32, &vs, NULL, &err);
        a.in[3] = lrc_graph_add_input(g, "bias", LRC_F32, &bs, NULL, &err);
        int y = lrc_graph_add(g, &a, &err), rc = y < 0 || lrc_graph_add_output(g, "y", y, &err);
        lrc_pass_ctx decode = {.kv_cache_len = 8};
        if (!rc) rc = lrc_passes_run(&g, &decode, "kv_cache", &err) == 0 ? -1 : 0;
        bool ok = rc == 0 && strstr(err.msg, "needs causal self-attention without a bias");
        printf("%s kv_cache refuses attention with %s: %s\n", ok ? "ok  " : "FAIL", what[c], err.msg);
        ok ? passed++ : failed++;
        lrc_graph_free(g);
    }
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
    /* GQA (6 over 2), MQA, a window of 3 (the sequence is 9), the soft-cap, all at once */
    const struct { int64_t H, Hkv, window; double cap; } attn[] = {{6, 2, 0, 0}, {4, 1, 0, 0}, {2, 2, 3, 0}, {2, 2, 0, 1.5}, {6, 2, 3, 1.5}};
    for (size_t i = 0; i < sizeof attn / sizeof attn[0]; i++)
        for (int compiled = 0; compiled < 2; compiled++) run_attention_case(attn[i].H, attn[i].Hkv, attn[i].window, attn[i].cap, compiled);
    run_general_refused();
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
