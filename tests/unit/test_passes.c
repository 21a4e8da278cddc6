/* test_passes — the graph passes keep the answer and fold what they should.
 * For each PyTorch fixture (tests/fixtures/llama/CASE): the graph after
 * fold_gains, cse and dce, run on the reference backend, gives the logits of
 * the unoptimised graph within 1e-5; with weights, no depth_gain and no
 * multiplication by a norm weight is left in LayerRoPE and Pre-Norm models,
 * and a LayerRoPE model has exactly as many kernels as its Pre-Norm twin.
 * Usage: test_passes MODEL.lua FIXTURE_DIR... */
#include "check.h"
#include "frontend/lrc_frontend.h"
#include "ir/passes/lrc_passes.h"
#include "runtime/lrc_runtime.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define CHECK_IN(cond, ...)                        \
    do {                                        \
        if (cond) passed++;                     \
        else {                                  \
            failed++;                           \
            printf("FAIL %s: ", dir);           \
            printf(__VA_ARGS__);                \
            printf("\n");                       \
        }                                       \
    } while (0)

static double rel_err(const lrc_tensor *a, const lrc_tensor *b)
{
    double num = 0, den = 0;
    const float *x = a->data, *y = b->data;
    for (int64_t i = 0; i < lrc_shape_numel(&b->shape); i++) {
        num += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
        den += (double)y[i] * y[i];
    }
    return sqrt(num) / (den > 0 ? sqrt(den) : 1);
}

/* Kernel count of the model in dir with norm replaced by `norm`. */
static int kernels_with(const char *model, char sets[][128], int n_sets, const char *norm, int64_t B, int64_t T,
                        uint64_t seed)
{
    char *argv[64];
    char normset[64];
    int n = 0;
    for (int i = 0; i < n_sets; i++)
        if (strncmp(sets[i], "norm=", 5)) argv[n++] = sets[i];
    snprintf(normset, sizeof normset, "norm=%s", norm);
    argv[n++] = normset;
    lrc_err err;
    lrc_model m = {0};
    lrc_graph *g = lrc_graph_new();
    lrc_tensor_set consts;
    lrc_schedule s;
    int kernels = -1;
    lrc_pass_ctx ctx = {&consts};
    if (!lrc_model_load(&m, model, NULL, argv, n, &err) && !lrc_model_build(&m, B, T, g, &err) &&
        !lrc_params_init(g, seed, &consts, &err) && !lrc_passes_run(&g, &ctx, NULL, &err) &&
        !lrc_schedule_build(g, &s, &err)) {
        kernels = s.n_groups;
        lrc_schedule_free(&s);
    } else {
        printf("  %s: %s\n", norm, err.msg);
    }
    lrc_tensor_set_clear(&consts);
    lrc_graph_free(g);
    lrc_model_free(&m);
    return kernels;
}

static void run_case(const char *model, const char *dir)
{
    char sets[32][128], path[1024];
    char *argv[32];
    int n_sets = read_config_sets(dir, sets, argv, 32);
    lrc_err err;
    lrc_model m = {0};
    lrc_graph *g = lrc_graph_new();
    lrc_tensor_set in, wfile, params, out_a, out_b;
    lrc_tensor_set_init(&in);
    lrc_tensor_set_init(&wfile);
    lrc_tensor_set_init(&params);
    lrc_tensor_set_init(&out_a);
    lrc_tensor_set_init(&out_b);
    lrc_backend *be = lrc_backend_ref_new();
    snprintf(path, sizeof path, "%s/input.safetensors", dir);
    int rc = lrc_safetensors_load(path, &in, &err);
    snprintf(path, sizeof path, "%s/weights.safetensors", dir);
    const lrc_tensor *tok = rc ? NULL : lrc_tensor_set_find(&in, "tokens");
    if (rc || !tok || lrc_model_load(&m, model, NULL, argv, n_sets, &err) ||
        lrc_model_build(&m, tok->shape.dim[0], tok->shape.dim[1], g, &err) ||
        lrc_safetensors_load(path, &wfile, &err) || lrc_params_bind(g, &wfile, path, &params, &err) ||
        lrc_exec_run(be, g, &in, &params, &out_a, &err)) {
        CHECK_IN(0, "setup: %s", err.msg);
        goto done;
    }
    lrc_pass_ctx ctx = {&params};
    CHECK_IN(!lrc_passes_run(&g, &ctx, NULL, &err), "passes: %s", err.msg);
    CHECK_IN(!lrc_exec_run(be, g, &in, &params, &out_b, &err), "optimised run: %s", err.msg);
    if (out_b.n == 1) {
        double rel = rel_err(out_b.items[0], out_a.items[0]);
        CHECK_IN(rel <= 1e-5, "optimised logits differ: relative error %.3e", rel);
        printf("  %-28s optimised vs unoptimised logits: relative error %.2e\n", strrchr(dir, '/') + 1, rel);
    }
    bool layerrope = false, pre_like = false;
    for (int i = 0; i < n_sets; i++) {
        layerrope = layerrope || !strcmp(sets[i], "norm=layerrope");
        pre_like = pre_like || !strcmp(sets[i], "norm=pre") || !strcmp(sets[i], "norm=lns");
    }
    if (layerrope || pre_like) {
        int gains = 0, muls = 0;
        for (int i = 0; i < g->n_nodes; i++) {
            gains += g->nodes[i].op == LRC_OP_DEPTH_GAIN;
            muls += g->nodes[i].op == LRC_OP_MUL; /* only SwiGLU's product should be left */
        }
        int L = 0;
        for (int i = 0; i < n_sets; i++)
            if (!strncmp(sets[i], "n_layers=", 9)) L = atoi(sets[i] + 9);
        CHECK_IN(gains == 0 && muls == L, "after folding: %d depth_gain, %d mul (want 0 and %d)", gains, muls, L);
    }
    if (layerrope) {
        int k_lr = kernels_with(model, sets, n_sets, "layerrope", 2, 5, 3);
        int k_pre = kernels_with(model, sets, n_sets, "pre", 2, 5, 3);
        CHECK_IN(k_lr > 0 && k_lr == k_pre, "kernels: layerrope %d, pre %d", k_lr, k_pre);
    }
done:
    lrc_backend_close(be);
    lrc_tensor_set_clear(&in);
    lrc_tensor_set_clear(&wfile);
    lrc_tensor_set_clear(&params);
    lrc_tensor_set_clear(&out_a);
    lrc_tensor_set_clear(&out_b);
    lrc_graph_free(g);
    lrc_model_free(&m);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: test_passes MODEL.lua FIXTURE_DIR...\n");
        return 2;
    }
    for (int i = 2; i < argc; i++) run_case(argv[1], argv[i]);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
