/* test_cpu_fusions — the cpu target's fused kernels against the same ops
 * run apart, on the same inputs: the loss and its gradient as one kernel
 * (fuse rule 9), a product summed over rows inside the sum (rule 10), and
 * the loss fused into the LM head's GEMM (rule 8). Each also checks that
 * the fusion happened (its launch label) and did not happen apart. */
#include "check.h"
#include "cpu_graph.h"

#include <math.h>
#include <stdlib.h>

/* The largest relative difference between the two runs' outputs (got[run][o],
 * o = the loss and its gradient). */
static double worst_pair_diff(lrc_tensor *got[2][2])
{
    double worst = 0;
    for (int o = 0; o < 2; o++) {
        const float *a = got[0][o]->data, *b = got[1][o]->data;
        for (int64_t i = 0; i < lrc_shape_numel(&got[0][o]->shape); i++) {
            double e = fabs((double)a[i] - b[i]) / (fabs((double)b[i]) > 1e-30 ? fabs((double)b[i]) : 1);
            if (!(e <= worst)) worst = e;
        }
    }
    return worst;
}

/* Compiles g (taken over) for the cpu with 2 threads and runs it on in into
 * outs; *fused counts the launches whose label holds `label`. */
static int compile_run_count(lrc_graph *g, const lrc_tensor_set *in, lrc_tensor_set *outs, const char *label, int *fused, lrc_err *err)
{
    lrc_compiled c = {0};
    lrc_pool *pool = lrc_pool_new(2, err);
    lrc_exec *x = NULL;
    int rc = lrc_compile_graph(g, NULL, &c, err);
    *fused = 0;
    for (int i = 0; !rc && i < c.plan.n_launches; i++) *fused += strstr(c.plan.launches[i].label, label) != NULL;
    if (!rc) rc = lrc_exec_new(&c.plan, pool, &x, err);
    if (!rc) rc = lrc_exec_run_plan(x, in, outs, err);
    lrc_exec_free(x);
    lrc_pool_free(pool);
    if (c.g) lrc_compiled_free(&c);
    return rc;
}

/* A loss and its gradient over the same logits and labels run as one
 * kernel (fuse rule 9), with the same values as the two kernels apart
 * (there the gradient, over a copy of the logits, computes each row's
 * statistics itself): the same functions in the same order. */
static int run_loss_pair(bool apart, lrc_tensor *logits, lrc_tensor *labels, lrc_tensor **got, int *fused, lrc_err *err)
{
    lrc_graph *g = lrc_graph_new();
    int l = input(g, "logits", 3, logits->shape.dim, LRC_F32), y = input(g, "labels", 2, labels->shape.dim, LRC_I32);
    int l2 = apart ? input(g, "logits2", 3, logits->shape.dim, LRC_F32) : l;
    out(g, "loss", op(g, LRC_OP_CROSS_ENTROPY, l, y, 0, 0, 0));
    out(g, "loss_grad", op(g, LRC_OP_CROSS_ENTROPY_GRAD, l2, y, 0, 0, 0));
    lrc_tensor *copy = lrc_tensor_new("logits2", LRC_F32, &logits->shape, err);
    memcpy(copy->data, logits->data, (size_t)lrc_shape_numel(&logits->shape) * 4);
    lrc_tensor_set in, out_set;
    lrc_tensor_set_init(&in);
    lrc_tensor_set_init(&out_set);
    lrc_tensor_set_add(&in, logits, err), lrc_tensor_set_add(&in, labels, err);
    if (apart) lrc_tensor_set_add(&in, copy, err);
    lrc_tensor_set_add(&out_set, got[0], err), lrc_tensor_set_add(&out_set, got[1], err);
    int rc = compile_run_count(g, &in, &out_set, "cross_entropy+cross_entropy_grad", fused, err);
    lrc_tensor_free(copy);
    free(in.items);
    free(out_set.items);
    return rc;
}

static void loss_pair_matches_unfused(void)
{
    lrc_err err;
    lrc_rng r;
    lrc_rng_seed(&r, 78);
    lrc_tensor *logits = lrc_tensor_new("logits", LRC_F32, &(lrc_shape){3, {2, 37, 1003}}, &err);
    lrc_tensor *labels = lrc_tensor_new("labels", LRC_I32, &(lrc_shape){2, {2, 37}}, &err);
    fill(logits, &r, 1), fill(labels, &r, 1003); /* (every fifth label -100: ignored rows) */
    lrc_tensor *got[2][2];
    int rc = 0, fused[2];
    for (int v = 0; v < 2; v++) {
        got[v][0] = lrc_tensor_new("loss", LRC_F32, &(lrc_shape){0, {0}}, &err);
        got[v][1] = lrc_tensor_new("loss_grad", LRC_F32, &logits->shape, &err);
        rc = rc || run_loss_pair(v == 1, logits, labels, got[v], &fused[v], &err);
    }
    double worst = rc ? 0 : worst_pair_diff(got);
    printf("     loss pair fused vs apart: loss %.9g and %.9g, worst relative difference %.3g\n", rc ? 0 : ((float *)got[0][0]->data)[0],
           rc ? 0 : ((float *)got[1][0]->data)[0], worst);
    CHECK(!rc && fused[0] == 1 && fused[1] == 0, "the loss and its gradient: %d fused kernels over one logits, %d over two (%s)", fused[0],
          fused[1], rc ? err.msg : "");
    CHECK(!rc && worst == 0, "the fused loss and gradient against the kernels apart: %.3g", worst);
    for (int v = 0; v < 2; v++) lrc_tensor_free(got[v][0]), lrc_tensor_free(got[v][1]);
    lrc_tensor_free(logits);
    lrc_tensor_free(labels);
}

/* The rows of a b summed, a b [2, R, D] (fuse rule 10: the product inside
 * the sum's kernel), against the same sum with the product an output too,
 * so its own kernel's buffer (apart): the same f32 products summed in the
 * same order, so the same bits. Returns the kernels whose label holds
 * "mul+sum_to" in *fused. */
static int run_sum_product(bool apart, lrc_tensor *a, lrc_tensor *b, lrc_tensor *got, int *fused, lrc_err *err)
{
    lrc_graph *g = lrc_graph_new();
    const lrc_shape *sh = &a->shape;
    int xa = input(g, "a", 3, sh->dim, LRC_F32), xb = input(g, "b", 3, sh->dim, LRC_F32), m = op(g, LRC_OP_MUL, xa, xb, 0, 0, 0);
    lrc_node st = {.op = LRC_OP_SUM_TO, .n_in = 1, .in = {m}, .n_iattr = 1, .iattr = {sh->dim[2]}};
    int rc = out(g, "sum", lrc_graph_add(g, &st, err)) || (apart && out(g, "product", m));
    lrc_tensor_set in, outs;
    lrc_tensor_set_init(&in);
    lrc_tensor_set_init(&outs);
    lrc_tensor_set_add(&in, a, err), lrc_tensor_set_add(&in, b, err), lrc_tensor_set_add(&outs, got, err);
    if (rc) lrc_graph_free(g), rc = LRC_EUSER;
    else rc = compile_run_count(g, &in, &outs, "mul+sum_to", fused, err);
    for (int i = 0; i < outs.n; i++)
        if (outs.items[i] != got) lrc_tensor_free(outs.items[i]);
    free(in.items);
    free(outs.items);
    return rc;
}

static void sum_product_matches_unfused(void)
{
    lrc_err err;
    lrc_rng r;
    lrc_rng_seed(&r, 79);
    /* D = 100: a block of 64 columns (two vector passes) and one of 36 (one pass, then 4 columns alone) */
    lrc_shape sh = {3, {2, 37, 100}};
    lrc_tensor *a = lrc_tensor_new("a", LRC_F32, &sh, &err), *b = lrc_tensor_new("b", LRC_F32, &sh, &err), *got[2];
    fill(a, &r, 1), fill(b, &r, 1);
    int rc = 0, fused[2];
    for (int v = 0; v < 2; v++) {
        got[v] = lrc_tensor_new("sum", LRC_F32, &(lrc_shape){1, {100}}, &err);
        rc = rc || run_sum_product(v == 1, a, b, got[v], &fused[v], &err);
    }
    int differ = rc ? -1 : 0;
    for (int i = 0; !rc && i < 100; i++) differ += memcmp((float *)got[0]->data + i, (float *)got[1]->data + i, 4) != 0;
    CHECK(!rc && fused[0] == 1 && fused[1] == 0, "the summed product: %d fused kernels alone, %d with the product an output (%s)", fused[0],
          fused[1], rc ? err.msg : "");
    CHECK(differ == 0, "the summed product fused against apart: %d of 100 sums differ", differ);
    for (int v = 0; v < 2; v++) lrc_tensor_free(got[v]);
    lrc_tensor_free(a);
    lrc_tensor_free(b);
}

/* Outputs `names` of b_loss_head's graph (logits an output when
 * logits_out: unfused), compiled for the cpu and run on in and params. */
static int run_loss_head(const int64_t *d0, bool logits_out, lrc_tensor_set *in, lrc_tensor_set *params, lrc_tensor **got,
                         lrc_err *err)
{
    int64_t d[5] = {d0[0], d0[1], logits_out, d0[3], d0[4]};
    lrc_graph *g = lrc_graph_new();
    b_loss_head(g, d);
    lrc_tensor_set out;
    lrc_tensor_set_init(&out);
    for (int i = 0; i < 2; i++) lrc_tensor_set_add(&out, got[i], err);
    if (logits_out) lrc_tensor_set_add(&out, lrc_tensor_new("logits", LRC_F32, &(lrc_shape){3, {d[0], d[1], d[4]}}, err), err);
    lrc_compiled c;
    lrc_pool *pool = lrc_pool_new(2, err);
    lrc_exec *x = NULL;
    int rc = lrc_compile_graph(g, NULL, &c, err);
    if (!rc) rc = lrc_exec_new(&c.plan, pool, &x, err);
    if (!rc) rc = lrc_exec_bind_params(x, params, err);
    if (!rc) rc = lrc_exec_run_plan(x, in, &out, err);
    lrc_exec_free(x);
    lrc_pool_free(pool);
    if (c.g) lrc_compiled_free(&c);
    if (logits_out) lrc_tensor_free(out.items[2]);
    free(out.items);
    return rc;
}

/* The loss fused into the head (fuse rule 8) against the unfused kernels
 * on the same inputs: the same logits, statistics and formulas, so the same
 * values (issue 23 asks 1e-6). */
static void loss_head_matches_unfused(void)
{
    static const int64_t d[5] = {2, 150, 0, 300, 700};
    lrc_err err;
    lrc_rng r;
    lrc_rng_seed(&r, 77);
    lrc_tensor_set in, params;
    lrc_tensor_set_init(&in);
    lrc_tensor_set_init(&params);
    lrc_tensor *x = lrc_tensor_new("x", LRC_F32, &(lrc_shape){3, {d[0], d[1], d[3]}}, &err);
    lrc_tensor *y = lrc_tensor_new("labels", LRC_I32, &(lrc_shape){2, {d[0], d[1]}}, &err);
    lrc_tensor *w = lrc_tensor_new("w", LRC_F32, &(lrc_shape){2, {d[4], d[3]}}, &err);
    fill(x, &r, 1), fill(y, &r, d[4]), fill(w, &r, 1);
    lrc_tensor_set_add(&in, x, &err), lrc_tensor_set_add(&in, y, &err), lrc_tensor_set_add(&params, w, &err);
    lrc_tensor *got[2][2];
    int rc = 0;
    for (int v = 0; v < 2; v++) {
        got[v][0] = lrc_tensor_new("loss", LRC_F32, &(lrc_shape){0, {0}}, &err);
        got[v][1] = lrc_tensor_new("loss_grad", LRC_F32, &(lrc_shape){3, {d[0], d[1], d[4]}}, &err);
        rc = rc || run_loss_head(d, v == 1, &in, &params, got[v], &err);
    }
    double worst = rc ? 0 : worst_pair_diff(got);
    printf("     loss head fused vs unfused: loss %.9g and %.9g, worst relative difference %.3g\n", rc ? 0 : ((float *)got[0][0]->data)[0],
           rc ? 0 : ((float *)got[1][0]->data)[0], worst);
    CHECK(!rc && worst <= 1e-6, "fused loss head against the unfused kernels: %.3g (%s)", worst, rc ? err.msg : "");
    for (int v = 0; v < 2; v++) lrc_tensor_free(got[v][0]), lrc_tensor_free(got[v][1]);
    lrc_tensor_set_clear(&in);
    lrc_tensor_set_clear(&params);
}

int main(void)
{
    setenv("LRC_CPU_LOSS_HEAD", "1", 1); /* fuse rule 8 is opt-in */
    loss_pair_matches_unfused();
    sum_product_matches_unfused();
    loss_head_matches_unfused();
    return check_summary();
}
