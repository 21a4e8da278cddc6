/* test_passes — the graph passes keep the answer and fold what they should.
 * For each PyTorch fixture (tests/fixtures/llama/CASE): the graph after
 * fold_gains, cse and dce, run on the reference backend, gives the logits of
 * the unoptimised graph within 1e-5; with weights, no depth_gain and no
 * multiplication by a norm weight is left in LayerRoPE and Pre-Norm models,
 * and a LayerRoPE model has exactly as many kernels as its Pre-Norm twin.
 * pad_hidden widens LLaMA's d_ff = 91 and a ViT's biased d_ff = 30 to
 * multiples of 8 with the logits unchanged, and refuses a width one of
 * whose uses cannot take zero columns. Outputs that share a value (each
 * other's, a parameter's, an input's) get buffers of their own. A
 * broadcast of constants is not folded into a larger constant.
 * Usage: test_passes MODEL.lua FIXTURE_DIR... */
#include "check.h"
#include "frontend/compile/lrc_compile.h"
#include "frontend/lua/lrc_lua.h"
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
    lrc_pass_ctx ctx = {.consts = &consts, .schedule = &s};
    if (!lrc_model_load(&m, model, NULL, argv, n, &err) && !lrc_model_build(&m, B, T, g, &err) &&
        !lrc_params_init(g, seed, NULL, &consts, &err) && !lrc_passes_run(&g, &ctx, NULL, &err)) {
        kernels = s.n_groups;
    } else {
        printf("  %s: %s\n", norm, err.msg);
    }
    if (ctx.scheduled) lrc_schedule_free(&s);
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
    /* the set is the graph's alone, as when compiling: dce frees the
     * originals of folded weights, and nothing the graph reads */
    lrc_pass_ctx ctx = {.consts = &params, .own_consts = true};
    CHECK_IN(!lrc_passes_run(&g, &ctx, NULL, &err), "passes: %s", err.msg);
    int dead = 0, missing = 0;
    for (int i = 0; i < params.n; i++) dead += lrc_graph_find(g, LRC_OP_PARAM, params.items[i]->name) < 0;
    for (int i = 0; i < g->n_nodes; i++) missing += g->nodes[i].op == LRC_OP_PARAM && !lrc_tensor_set_find(&params, g->nodes[i].name);
    CHECK_IN(dead == 0 && missing == 0, "after the passes: %d constants no parameter names, %d parameters without a value", dead,
             missing);
    CHECK_IN(!lrc_exec_run(be, g, &in, &params, &out_b, &err), "optimised run: %s", err.msg);
    /* one output, the logits, on both sides: anything else fails, and is
     * not a comparison skipped */
    CHECK_IN(out_a.n == 1 && out_b.n == 1, "outputs: %d unoptimised, %d optimised (want the logits alone)", out_a.n, out_b.n);
    if (out_a.n == 1 && out_b.n == 1) {
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

/* Fixed inputs for every INPUT of g: ids under 10, or a sine. */
static int make_inputs(const lrc_graph *g, lrc_tensor_set *in, lrc_err *err)
{
    for (int id = 0; id < g->n_nodes; id++) {
        const lrc_node *n = &g->nodes[id];
        if (n->op != LRC_OP_INPUT) continue;
        lrc_tensor *t = lrc_tensor_new(n->name, n->dtype, &n->shape, err);
        if (!t) return LRC_EUSER;
        for (int64_t i = 0; i < lrc_shape_numel(&n->shape); i++)
            if (n->dtype == LRC_I32) ((int32_t *)t->data)[i] = (int32_t)((7 * i + 3) % 10);
            else ((float *)t->data)[i] = (float)sin(0.37 * (double)i);
        if (lrc_tensor_set_add(in, t, err)) return LRC_EUSER;
    }
    return LRC_OK;
}

/* Nodes of g whose last axis is w. */
static int width_count(const lrc_graph *g, int64_t w, lrc_op op)
{
    int k = 0;
    for (int id = 0; id < g->n_nodes; id++) {
        const lrc_shape *s = &g->nodes[id].shape;
        k += s->ndim > 1 && s->dim[s->ndim - 1] == w && (op == LRC_OP_COUNT || g->nodes[id].op == op);
    }
    return k;
}

/* pad_hidden: with frozen random weights, the model's hidden width `from`
 * (SwiGLU's, or a biased GELU MLP's) becomes `to` in every GEMM and op that
 * carries it, the logits stay those of the unpadded graph (the padded
 * columns are exact zeros), and with pad_multiple 0 nothing changes. */
static void pad_model(const char *model, const char *what, char **sets, int n_sets, int64_t from, int64_t to)
{
    const char *dir = what; /* CHECK_IN's label */
    lrc_err err;
    lrc_model m = {0};
    lrc_graph *g = lrc_graph_new(), *g0 = lrc_graph_new();
    lrc_tensor_set in, params, out_a, out_b;
    lrc_tensor_set_init(&in);
    lrc_tensor_set_init(&params);
    lrc_tensor_set_init(&out_a);
    lrc_tensor_set_init(&out_b);
    lrc_backend *be = lrc_backend_ref_new();
    if (lrc_model_load(&m, model, NULL, sets, n_sets, &err) || lrc_model_build(&m, 2, 5, g, &err) ||
        lrc_model_build(&m, 2, 5, g0, &err) || lrc_params_init(g, 3, NULL, &params, &err) || make_inputs(g, &in, &err) ||
        lrc_exec_run(be, g, &in, &params, &out_a, &err)) {
        CHECK_IN(0, "setup: %s", err.msg);
        goto done;
    }
    lrc_pass_ctx off = {.consts = &params}, on = {.consts = &params, .pad_multiple = 8};
    CHECK_IN(!lrc_passes_run(&g0, &off, NULL, &err), "passes without padding: %s", err.msg);
    CHECK_IN(width_count(g0, from, LRC_OP_MATMUL) > 0 && width_count(g0, to, LRC_OP_COUNT) == 0,
             "pad_multiple 0 changed the widths: %d matmuls of %lld, %d nodes of %lld", width_count(g0, from, LRC_OP_MATMUL),
             (long long)from, width_count(g0, to, LRC_OP_COUNT), (long long)to);
    CHECK_IN(!lrc_passes_run(&g, &on, NULL, &err), "passes: %s", err.msg);
    CHECK_IN(width_count(g, from, LRC_OP_COUNT) == 0 && width_count(g, to, LRC_OP_MATMUL) == width_count(g0, from, LRC_OP_MATMUL),
             "padded: %d nodes of width %lld left, %d matmuls of %lld (want %d)", width_count(g, from, LRC_OP_COUNT), (long long)from,
             width_count(g, to, LRC_OP_MATMUL), (long long)to, width_count(g0, from, LRC_OP_MATMUL));
    CHECK_IN(!lrc_exec_run(be, g, &in, &params, &out_b, &err), "padded run: %s", err.msg);
    CHECK_IN(out_a.n == 1 && out_b.n == 1, "outputs: %d unpadded, %d padded (want the logits alone)", out_a.n, out_b.n);
    if (out_a.n == 1 && out_b.n == 1) {
        double rel = rel_err(out_b.items[0], out_a.items[0]);
        CHECK_IN(rel <= 1e-6, "padded logits differ: relative error %.3e", rel);
        printf("  %-28s padded %lld -> %lld: logits within %.2e of the unpadded graph's\n", what, (long long)from, (long long)to, rel);
    }
done:
    lrc_backend_close(be);
    lrc_tensor_set_clear(&in);
    lrc_tensor_set_clear(&params);
    lrc_tensor_set_clear(&out_a);
    lrc_tensor_set_clear(&out_b);
    lrc_graph_free(g);
    lrc_graph_free(g0);
    lrc_model_free(&m);
}

/* The hand-built graphs below: x [3, 16] and N(0, 0.5) parameters. */
static const lrc_init normal_init = {LRC_INIT_NORMAL, 0.5};
static int add_x(lrc_graph *g, lrc_err *err) { return lrc_graph_add_input(g, "x", LRC_F32, &(lrc_shape){2, {3, 16}}, NULL, err); }

/* Random values for g's parameters, then every pass with pad_hidden at 8. */
static int run_padded(lrc_graph **g, lrc_err *err)
{
    lrc_tensor_set params;
    lrc_tensor_set_init(&params);
    lrc_pass_ctx on = {.consts = &params, .pad_multiple = 8};
    int rc = lrc_params_init(*g, 1, NULL, &params, err) || lrc_passes_run(g, &on, NULL, err);
    lrc_tensor_set_clear(&params);
    return rc;
}

/* pad_hidden leaves a hidden width alone when a use cannot take zero
 * columns: exp (1 at a padded zero), or the product itself an output. */
static void pad_refused(void)
{
    const char *dir = "pad_hidden refused";
    for (int as_output = 0; as_output < 2; as_output++) {
        lrc_err err;
        lrc_graph *g = lrc_graph_new();
        int x = add_x(g, &err);
        int w1 = lrc_graph_add_param(g, "w1", &(lrc_shape){2, {13, 16}}, normal_init, NULL, NULL, &err);
        int w2 = lrc_graph_add_param(g, "w2", &(lrc_shape){2, {16, 13}}, normal_init, NULL, NULL, &err);
        int h = lrc_graph_add(g, &(lrc_node){.op = LRC_OP_MATMUL, .n_in = 2, .in = {x, w1}}, &err);
        int e = lrc_graph_add(g, &(lrc_node){.op = as_output ? LRC_OP_SILU : LRC_OP_EXP, .n_in = 1, .in = {h}}, &err);
        int y = lrc_graph_add(g, &(lrc_node){.op = LRC_OP_MATMUL, .n_in = 2, .in = {e, w2}}, &err);
        bool built = y >= 0 && !lrc_graph_add_output(g, "y", y, &err) && (!as_output || !lrc_graph_add_output(g, "h", h, &err));
        CHECK_IN(built, "setup: %s", err.msg);
        CHECK_IN(built && !run_padded(&g, &err) && width_count(g, 13, LRC_OP_MATMUL) == 1 && width_count(g, 16, LRC_OP_MATMUL) == 1,
                 "%s: the width 13 was padded (or the passes failed: %s)", as_output ? "product an output" : "exp", err.msg);
        lrc_graph_free(g);
    }
}

/* A constant [1] that one region (width 1) widens as its bias and another
 * (width 90) adds by broadcasting: the first pads to 8, the second, which
 * cannot take the widened vector, stays 90 (it once failed the pass). */
static void pad_shared_vector(void)
{
    const char *dir = "pad_hidden shared vector";
    lrc_err err;
    lrc_graph *g = lrc_graph_new();
    int x = add_x(g, &err);
    int c = lrc_graph_add_param(g, "c", &(lrc_shape){1, {1}}, normal_init, NULL, NULL, &err);
    int ok = x >= 0 && c >= 0, y[2];
    for (int r = 0; r < 2 && ok; r++) {
        const int64_t n = r ? 90 : 1;
        char wn[8], vn[8], yn[8];
        snprintf(wn, sizeof wn, "w%d", r), snprintf(vn, sizeof vn, "v%d", r), snprintf(yn, sizeof yn, "y%d", r);
        int w = lrc_graph_add_param(g, wn, &(lrc_shape){2, {n, 16}}, normal_init, NULL, NULL, &err);
        int v = lrc_graph_add_param(g, vn, &(lrc_shape){2, {16, n}}, normal_init, NULL, NULL, &err);
        int h = lrc_graph_add(g, &(lrc_node){.op = LRC_OP_MATMUL, .n_in = 2, .in = {x, w}}, &err);
        int a = lrc_graph_add(g, &(lrc_node){.op = LRC_OP_ADD, .n_in = 2, .in = {h, c}}, &err);
        y[r] = lrc_graph_add(g, &(lrc_node){.op = LRC_OP_MATMUL, .n_in = 2, .in = {a, v}}, &err);
        ok = y[r] >= 0 && !lrc_graph_add_output(g, yn, y[r], &err);
    }
    CHECK_IN(ok, "setup: %s", err.msg);
    int rc = ok ? run_padded(&g, &err) : 1;
    CHECK_IN(ok && !rc, "passes: %s", err.msg);
    CHECK_IN(ok && !rc && width_count(g, 8, LRC_OP_MATMUL) == 1 && width_count(g, 90, LRC_OP_MATMUL) == 1,
             "want the width-1 region padded to 8 and the width-90 one left: %d matmuls of 8, %d of 90", width_count(g, 8, LRC_OP_MATMUL),
             width_count(g, 90, LRC_OP_MATMUL));
    lrc_graph_free(g);
}

/* fold_gains evaluates constant subgraphs, but not a broadcast of one:
 * exp(w) [16] folds, its expansion to x's [3, 16] (RWKV's decay, made the
 * shape of a scan's input) and exp(-w) * 1 [3, 16] stay computed, else a
 * package compiled at several batch sizes failed on a constant of one. */
static void fold_broadcast(void)
{
    const char *dir = "fold_gains broadcast";
    lrc_err err;
    lrc_graph *g = lrc_graph_new();
    int x = add_x(g, &err), w = lrc_graph_add_param(g, "w", &(lrc_shape){1, {16}}, normal_init, NULL, NULL, &err);
    int one = lrc_graph_add_param(g, "one", &(lrc_shape){2, {3, 1}}, normal_init, NULL, NULL, &err);
    int e = lrc_graph_add(g, &(lrc_node){.op = LRC_OP_EXP, .n_in = 1, .in = {w}}, &err);
    int a = lrc_graph_add(g, &(lrc_node){.op = LRC_OP_EXPAND, .n_in = 1, .in = {e}, .n_iattr = 2, .iattr = {3, 16}}, &err);
    int m = lrc_graph_add(g, &(lrc_node){.op = LRC_OP_MUL, .n_in = 2, .in = {e, one}}, &err);
    int y = lrc_graph_add(g, &(lrc_node){.op = LRC_OP_FMA, .n_in = 3, .in = {x, a, m}}, &err);
    lrc_tensor_set params;
    lrc_tensor_set_init(&params);
    lrc_pass_ctx ctx = {.consts = &params};
    int rc = y < 0 || lrc_graph_add_output(g, "y", y, &err) || lrc_params_init(g, 1, NULL, &params, &err);
    CHECK_IN(!rc, "setup: %s", err.msg);
    rc = rc || lrc_pass_fold_gains(&g, &ctx, &err);
    CHECK_IN(!rc, "fold_gains: %s", err.msg);
    int n_exp = 0, n_expand = 0, n_mul = 0, big_const = 0;
    for (int i = 0; !rc && i < g->n_nodes; i++) {
        const lrc_node *n = &g->nodes[i];
        n_exp += n->op == LRC_OP_EXP, n_expand += n->op == LRC_OP_EXPAND, n_mul += n->op == LRC_OP_MUL;
        big_const += n->op == LRC_OP_PARAM && lrc_shape_numel(&n->shape) == 48;
    }
    CHECK_IN(!rc && n_exp == 0 && n_expand == 1 && n_mul == 1 && big_const == 0,
             "want exp folded, expand and mul left, no [3, 16] constant: %d exp, %d expand, %d mul, %d such constants", n_exp,
             n_expand, n_mul, big_const);
    lrc_tensor_set_clear(&params);
    lrc_graph_free(g);
}

/* x [3, 16] and w [16] with outputs that share a value: silu(x) twice
 * (cse merges the two) and once more under another name, w itself, and
 * reshape(x) (a view of the input). */
static lrc_graph *aliased_outputs(lrc_err *err)
{
    lrc_graph *g = lrc_graph_new();
    int x = add_x(g, err), w = lrc_graph_add_param(g, "w", &(lrc_shape){1, {16}}, normal_init, NULL, NULL, err);
    int s1 = lrc_graph_add(g, &(lrc_node){.op = LRC_OP_SILU, .n_in = 1, .in = {x}}, err);
    int s2 = lrc_graph_add(g, &(lrc_node){.op = LRC_OP_SILU, .n_in = 1, .in = {x}}, err);
    int r = lrc_graph_add(g, &(lrc_node){.op = LRC_OP_RESHAPE, .n_in = 1, .in = {x}, .n_iattr = 1, .iattr = {48}}, err);
    if (s1 < 0 || s2 < 0 || r < 0 || lrc_graph_add_output(g, "s1", s1, err) || lrc_graph_add_output(g, "s2", s2, err) ||
        lrc_graph_add_output(g, "w_out", w, err) || lrc_graph_add_output(g, "x_flat", r, err) ||
        lrc_graph_add_output(g, "s1_again", s1, err)) {
        lrc_graph_free(g);
        return NULL;
    }
    return g;
}

/* Outputs that are one value (two gradients cse merged), a parameter or an
 * input (through a view) each get a buffer of their own in the schedule,
 * and the cpu target runs the graph with every output's value right (the
 * plan once refused it: "output 's2' is an input or parameter"). */
static void own_outputs(void)
{
    const char *dir = "outputs of their own";
    lrc_err err;
    lrc_graph *g = aliased_outputs(&err), *g0 = aliased_outputs(&err);
    lrc_schedule s;
    lrc_pass_ctx ctx = {.schedule = &s};
    lrc_tensor_set in, params, want, got;
    lrc_tensor_set_init(&in), lrc_tensor_set_init(&params), lrc_tensor_set_init(&want), lrc_tensor_set_init(&got);
    lrc_backend *be = lrc_backend_ref_new();
    int rc = !g || !g0 || lrc_params_init(g0, 5, NULL, &params, &err) || make_inputs(g0, &in, &err) ||
             lrc_exec_run(be, g0, &in, &params, &want, &err);
    CHECK_IN(!rc, "setup: %s", err.msg);
    if (!rc) rc = lrc_passes_run(&g, &ctx, NULL, &err);
    CHECK_IN(!rc, "passes: %s", err.msg);
    for (int i = 0; !rc && i < g->n_outputs; i++) {
        int b = s.buffer_of[g->outputs[i]];
        CHECK_IN(lrc_op_table[g->nodes[b].op].fusion != LRC_FUSE_SOURCE, "output '%s' is in the buffer of %s '%s'",
                 g->output_names[i], lrc_op_name(g->nodes[b].op), g->nodes[b].name);
        for (int j = 0; j < i; j++)
            CHECK_IN(s.buffer_of[g->outputs[j]] != b, "outputs '%s' and '%s' share a buffer", g->output_names[j], g->output_names[i]);
    }
    if (ctx.scheduled) lrc_schedule_free(&s);
    lrc_graph_free(g);
    /* on the cpu: compiled, run, each output its value on ref */
    lrc_compiled c = {0};
    lrc_pool *pool = rc ? NULL : lrc_pool_new(2, &err);
    lrc_exec *x = NULL;
    if (!rc) rc = lrc_compile_graph(aliased_outputs(&err), NULL, &c, &err);
    if (!rc) rc = lrc_exec_new(&c.plan, pool, &x, &err);
    if (!rc) rc = lrc_exec_bind_params(x, &params, &err);
    if (!rc) rc = lrc_exec_run_plan(x, &in, &got, &err);
    CHECK_IN(!rc, "cpu: %s", err.msg);
    for (int i = 0; !rc && i < want.n; i++) {
        const lrc_tensor *a = lrc_tensor_set_find(&got, want.items[i]->name);
        CHECK_IN(a && a->nbytes == want.items[i]->nbytes && rel_err(a, want.items[i]) <= 1e-6, "cpu: output '%s' %s (%.3e from ref)",
                 want.items[i]->name, a ? "differs" : "missing", a && a->nbytes == want.items[i]->nbytes ? rel_err(a, want.items[i]) : 0);
    }
    lrc_exec_free(x);
    lrc_pool_free(pool);
    if (c.g) lrc_compiled_free(&c);
    lrc_backend_close(be);
    lrc_graph_free(g0);
    lrc_tensor_set_clear(&in), lrc_tensor_set_clear(&params), lrc_tensor_set_clear(&want), lrc_tensor_set_clear(&got);
    /* an i32 input returned as it is: no kernel copies i32, so one line naming it */
    g = lrc_graph_new();
    int ids = lrc_graph_add_input(g, "ids", LRC_I32, &(lrc_shape){1, {4}}, NULL, &err);
    ctx = (lrc_pass_ctx){.schedule = &s};
    rc = ids < 0 || lrc_graph_add_output(g, "ids_out", ids, &err) ? -1 : lrc_passes_run(&g, &ctx, NULL, &err);
    CHECK_IN(rc == LRC_EUSER && strstr(err.msg, "output 'ids_out' is the i32 input 'ids' itself"), "an i32 input as an output: %s",
             rc ? err.msg : "no error");
    if (ctx.scheduled) lrc_schedule_free(&s);
    lrc_graph_free(g);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: test_passes MODEL.lua FIXTURE_DIR...\n");
        return 2;
    }
    for (int i = 2; i < argc; i++) run_case(argv[1], argv[i]);
    char llama_sets[][32] = {"n_layers=2", "d_model=32", "n_heads=2", "d_ff=91", "vocab=64"}, vit[1024];
    char vit_sets[][32] = {"n_layers=2", "d_model=16", "n_heads=2", "d_ff=30"};
    char *ls[5], *vs[4];
    for (int i = 0; i < 5; i++) ls[i] = llama_sets[i];
    for (int i = 0; i < 4; i++) vs[i] = vit_sets[i];
    pad_model(argv[1], "llama d_ff=91 (SwiGLU)", ls, 5, 91, 96);
    /* vit.lua beside llama.lua */
    snprintf(vit, sizeof vit, "%.*svit.lua", (int)(strrchr(argv[1], '/') ? strrchr(argv[1], '/') - argv[1] + 1 : 0), argv[1]);
    pad_model(vit, "vit d_ff=30 (bias, GELU)", vs, 4, 30, 32);
    pad_refused();
    pad_shared_vector();
    own_outputs();
    fold_broadcast();
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
