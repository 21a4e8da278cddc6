/* test_grad_fd — the gradient rules against finite differences: for every
 * PyTorch fixture (every placement), the training graph runs on the reference
 * kernels with f64 storage (the op table's ref64), and every parameter's
 * gradient is checked two ways against central differences of the loss:
 *   - along a random ±1 direction over all of its entries (g·v), relative
 *     to |g|, so that every entry takes part;
 *   - at its two largest entries, each relative to itself.
 * Independent of PyTorch: these are the rules of ir/grad.c and
 * ir/ref_grad.c, checked against the forward ops alone.
 * Usage: test_grad_fd MODEL.lua FIXTURE_DIR... */
#include "check.h"
#include "frontend/lua/lrc_lua.h"
#include "ir/lrc_ew.h"
#include "ir/passes/lrc_passes.h"
#include "runtime/lrc_runtime.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define TOL 1e-4
#define STEP 1e-5 /* f64: rounding ~1e-15/STEP, truncation ~STEP^2, both far below TOL */

static double run64_loss(lrc_run64 *r)
{
    lrc_err err;
    int rc = lrc_run64_exec(r, 0, r->g->n_nodes, &err);
    CHECK(!rc, "%s", err.msg);
    return rc ? NAN : *(const double *)r->buf[r->g->outputs[0]];
}

/* (L(p + h v) - L(p - h v)) / 2h, p restored afterwards */
static double central_diff(lrc_run64 *r, double *p, const double *v, int64_t count)
{
    for (int64_t i = 0; i < count; i++) p[i] += STEP * v[i];
    double up = run64_loss(r);
    for (int64_t i = 0; i < count; i++) p[i] -= 2 * STEP * v[i];
    double down = run64_loss(r);
    for (int64_t i = 0; i < count; i++) p[i] += STEP * v[i];
    return (up - down) / (2 * STEP);
}

/* The f64 gradients of run r against PyTorch's in path (f64 rounded to
 * f32), each within 1e-6 relative; a file that cannot be read fails: it
 * must not fall through to the finite differences as though compared. */
static void compare_torch(const lrc_graph *g, const lrc_run64 *r, const char *path, const char *label, double *worst)
{
    lrc_err err;
    lrc_tensor_set want_g;
    lrc_tensor_set_init(&want_g);
    int rc = lrc_safetensors_load(path, &want_g, &err);
    CHECK(!rc, "%s: %s", label, err.msg);
    if (rc) return;
    double tw = 0, largest = 0;
    for (int i = 0; i < want_g.n; i++) {
        double nn = 0;
        for (int64_t k = 0; k < lrc_shape_numel(&want_g.items[i]->shape); k++)
            nn += (double)((const float *)want_g.items[i]->data)[k] * ((const float *)want_g.items[i]->data)[k];
        if (sqrt(nn) > largest) largest = sqrt(nn);
    }
    for (int o = 0; o < g->n_outputs; o++) {
        const lrc_tensor *w = lrc_tensor_set_find(&want_g, g->output_names[o]);
        CHECK(w != NULL, "%s: PyTorch has no '%s'", label, g->output_names[o]);
        if (!w) continue;
        const double *v = r->buf[g->outputs[o]];
        double num = 0, den = 0;
        for (int64_t i = 0; i < lrc_shape_numel(&w->shape); i++) {
            double d = v[i] - ((const float *)w->data)[i];
            num += d * d;
            den += (double)((const float *)w->data)[i] * ((const float *)w->data)[i];
        }
        /* against PyTorch's f32 rounding; exactly-zero gradients against 1e-6 of the largest */
        double rel = sqrt(num) / (sqrt(den) > 1e-6 * largest ? sqrt(den) : 1e-6 * largest);
        CHECK(rel <= 1e-6, "%s: '%s' in f64: relative error %.2e against PyTorch", label, g->output_names[o], rel);
        if (!(rel <= tw)) tw = rel;
    }
    printf("%s: %d gradients in f64 against PyTorch, worst relative error %.2e\n", label, g->n_outputs - 1, tw);
    if (!(tw <= *worst)) *worst = tw;
    lrc_tensor_set_clear(&want_g);
}

/* Every parameter gradient of g (outputs 1..) against central differences
 * of its loss (output 0): along a random direction, and at its two largest
 * entries. */
static void fd_check(const lrc_graph *g, lrc_run64 *r, const char *label, double *worst)
{
    int n_out = g->n_outputs, checked = 0;
    /* the analytic gradients, copied: every finite difference reruns the graph */
    double **grad = calloc((size_t)n_out, sizeof *grad), case_worst = 0;
    for (int o = 1; o < n_out; o++) {
        int64_t count = lrc_shape_numel(&g->nodes[g->outputs[o]].shape);
        grad[o] = malloc((size_t)count * sizeof(double));
        memcpy(grad[o], r->buf[g->outputs[o]], (size_t)count * sizeof(double));
    }
    /* a gradient that is zero in exact arithmetic (ViT's key bias: softmax
     * ignores a shift shared by every key) is rounding on both sides: errors
     * are measured against at least 1e-6 of the largest gradient norm */
    double floor_norm = 0;
    for (int o = 1; o < n_out; o++) {
        double nn = 0;
        for (int64_t i = 0; i < lrc_shape_numel(&g->nodes[g->outputs[o]].shape); i++) nn += grad[o][i] * grad[o][i];
        if (sqrt(nn) > floor_norm) floor_norm = sqrt(nn);
    }
    floor_norm *= 1e-6;
    lrc_rng rng;
    lrc_rng_seed(&rng, 20261130);
    for (int o = 1; o < n_out; o++) {
        int pid = -1;
        for (int id = 0; id < g->n_nodes && pid < 0; id++)
            if (g->nodes[id].op == LRC_OP_PARAM && !strcmp(g->nodes[id].name, g->output_names[o])) pid = id;
        CHECK(pid >= 0, "%s: gradient '%s' names no parameter", label, g->output_names[o]);
        if (pid < 0) continue;
        int64_t count = lrc_shape_numel(&g->nodes[pid].shape);
        double *v = calloc((size_t)count, sizeof *v), norm = 0, dot = 0;
        for (int64_t i = 0; i < count; i++) {
            v[i] = lrc_rng_uniform(&rng) < 0.5 ? -1 : 1;
            norm += grad[o][i] * grad[o][i];
            dot += grad[o][i] * v[i];
        }
        norm = sqrt(norm);
        double fd = central_diff(r, r->param[pid], v, count);
        double rel = fabs(fd - dot) / (norm > floor_norm ? norm : floor_norm);
        CHECK(rel <= TOL, "%s: %s along a random direction: finite difference %.10g, gradient %.10g (relative %.2e)",
              label, g->output_names[o], fd, dot, rel);
        if (rel > case_worst) case_worst = rel;
        /* the two largest entries, one at a time */
        int64_t top[2] = {-1, -1};
        for (int64_t i = 0; i < count; i++) {
            if (top[0] < 0 || fabs(grad[o][i]) > fabs(grad[o][top[0]])) top[1] = top[0], top[0] = i;
            else if (top[1] < 0 || fabs(grad[o][i]) > fabs(grad[o][top[1]])) top[1] = i;
        }
        memset(v, 0, (size_t)count * sizeof *v);
        for (int pick = 0; pick < 2 && top[pick] >= 0; pick++) {
            int64_t at = top[pick];
            v[at] = 1;
            fd = central_diff(r, r->param[pid], v, count);
            v[at] = 0;
            double want = grad[o][at];
            rel = fabs(fd - want) / (fabs(want) > floor_norm ? fabs(want) : floor_norm);
            CHECK(rel <= TOL, "%s: %s[%lld]: finite difference %.10g, gradient %.10g (relative %.2e)", label,
                  g->output_names[o], (long long)at, fd, want, rel);
            if (rel > case_worst) case_worst = rel;
        }
        checked++;
        free(v);
    }
    printf("%s: %d parameters, worst relative error against finite differences %.2e\n", label, checked, case_worst);
    if (case_worst > *worst) *worst = case_worst;
    for (int o = 1; o < n_out; o++) free(grad[o]);
    free(grad);
}

/* torch: instead of finite differences, the f64 gradients of the fixture's
 * own config against PyTorch's (grads.safetensors, f64 rounded to f32) */
static void run_case(const char *model, const char *dir, bool torch, double *worst)
{
    char sets[32][128], path[1024], *argv[32];
    int n_sets = read_config_sets(dir, sets, argv, 31);
    /* a looped model's truncated gradient (the last mu_bwd iterations) is not
     * the loss's derivative when T > mu_bwd: finite differences check the
     * rules with every iteration unrolled, PyTorch the truncation */
    for (int i = 0; i < n_sets && !torch; i++)
        if (!strncmp(sets[i], "T=", 2)) {
            snprintf(sets[n_sets], sizeof sets[n_sets], "mu_bwd=%s", sets[i] + 2);
            argv[n_sets] = sets[n_sets];
            n_sets++;
            break;
        }
    const char *label = strrchr(dir, '/') ? strrchr(dir, '/') + 1 : dir;
    lrc_err err;
    lrc_model m = {0};
    lrc_graph *g = lrc_graph_new();
    lrc_tensor_set in, wfile, params;
    lrc_tensor_set_init(&in);
    lrc_tensor_set_init(&wfile);
    lrc_tensor_set_init(&params);
    /* an image model's fixture has its batch (images and labels) apart */
    snprintf(path, sizeof path, "%s/batch.safetensors", dir);
    FILE *probe = fopen(path, "rb");
    if (probe) fclose(probe);
    else snprintf(path, sizeof path, "%s/input.safetensors", dir);
    int rc = lrc_safetensors_load(path, &in, &err);
    const lrc_tensor *tokens = rc ? NULL : lrc_tensor_set_find(&in, probe ? "images" : "tokens");
    int64_t B = tokens ? tokens->shape.dim[0] : 0, T = tokens && !probe ? tokens->shape.dim[1] : 1;
    if (!rc && !probe) { /* the labels `lrc backward` uses by default: the tokens shifted left */
        lrc_tensor *l = lrc_tensor_new("labels", LRC_I32, &tokens->shape, &err);
        for (int64_t i = 0; i < B * T; i++)
            ((int32_t *)l->data)[i] = (i + 1) % T ? ((const int32_t *)tokens->data)[i + 1] : -100;
        rc = lrc_tensor_set_add(&in, l, &err);
    }
    if (!rc) rc = lrc_model_load(&m, model, NULL, argv, n_sets, &err);
    if (!rc) rc = lrc_model_build_training(&m, B, T, g, &err);
    lrc_plan_buf want[16];
    if (!rc) rc = lrc_model_complete_inputs(want, lrc_model_graph_inputs(g, want, 16), &m, &in, path, &err);
    snprintf(path, sizeof path, "%s/weights.safetensors", dir);
    if (!rc) rc = lrc_safetensors_load(path, &wfile, &err);
    if (!rc) rc = lrc_params_bind(g, &wfile, path, &params, &err);
    CHECK(!rc, "%s: %s", label, err.msg);
    if (rc) goto out;

    lrc_run64 r;
    lrc_run64_init(&r, g, &in, &params);
    CHECK(!lrc_run64_exec(&r, 0, g->n_nodes, &err), "%s: %s", label, err.msg);
    if (torch) {
        snprintf(path, sizeof path, "%s/grads.safetensors", dir);
        compare_torch(g, &r, path, label, worst);
    } else {
        fd_check(g, &r, label, worst);
    }
    lrc_run64_free(&r);
out:
    lrc_tensor_set_clear(&in);
    lrc_tensor_set_clear(&wfile);
    lrc_tensor_set_clear(&params);
    lrc_graph_free(g);
    lrc_model_free(&m);
}

/* Input k of elementwise op `op` in the graph of elementwise_rules: 3 p_k
 * (values in [-4.5, 4.5): tanh and sigmoid near saturation), or e^p_k
 * where the op needs positive values; where's condition a run-time input
 * of ones and zeros */
static bool positive_input(lrc_op op, int k)
{
    return (k == 0 && (op == LRC_OP_SQRT || op == LRC_OP_RSQRT || op == LRC_OP_LOG || op == LRC_OP_LOG1P ||
                       op == LRC_OP_RECIPROCAL || op == LRC_OP_POW)) ||
           (k == 1 && op == LRC_OP_DIV);
}

static int rule_input(lrc_graph *g, lrc_op op, int k, lrc_err *err)
{
    static const lrc_shape shapes[3] = {{2, {4, 9}}, {1, {9}}, {2, {4, 1}}}; /* broadcast on both sides */
    char name[16];
    snprintf(name, sizeof name, "p%d", k);
    if (op == LRC_OP_WHERE && k == 0) return lrc_graph_add_input(g, "c", LRC_F32, &shapes[0], NULL, err);
    int p = lrc_graph_add_param(g, name, &shapes[k], (lrc_init){LRC_INIT_ZEROS, 0}, NULL, NULL, err);
    bool pos = positive_input(op, k);
    lrc_node f = {.op = pos ? LRC_OP_EXP : LRC_OP_SCALE, .n_in = 1, .in = {p}, .fattr = {3.0}};
    return p < 0 ? -1 : lrc_graph_add(g, &f, err);
}

/* The ops whose gradient is zero wherever it exists: no gradient flows */
static bool zero_gradient(lrc_op op)
{
    static const lrc_op ops[] = {LRC_OP_FLOOR, LRC_OP_SIGN, LRC_OP_LT, LRC_OP_LE, LRC_OP_EQ, LRC_OP_NE, LRC_OP_GT, LRC_OP_GE};
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++)
        if (op == ops[k]) return true;
    return false;
}

/* One elementwise op's rule (ir/ew.c) against finite differences, op on
 * inputs of rule_input, loss = cross_entropy(op(...), labels); the run's
 * inputs and parameters seeded. */
static void elementwise_rule(lrc_op op, int seed, double *worst)
{
    lrc_err err;
    lrc_graph *g = lrc_graph_new();
    lrc_shape ls = {1, {4}};
    int labels = lrc_graph_add_input(g, "labels", LRC_I32, &ls, NULL, &err);
    lrc_node f = {.op = op, .n_in = lrc_op_table[op].n_in, .fattr = {-0.5}}; /* scale's s */
    int y = 0;
    for (int k = 0; k < f.n_in && y >= 0; k++) y = f.in[k] = rule_input(g, op, k, &err);
    if (y >= 0) y = lrc_graph_add(g, &f, &err);
    lrc_node ce = {.op = LRC_OP_CROSS_ENTROPY, .n_in = 2, .in = {y, labels}};
    int loss = y < 0 ? -1 : lrc_graph_add(g, &ce, &err);
    int rc = loss < 0 ? LRC_EUSER : lrc_pass_autodiff(g, loss, &err);
    CHECK(!rc, "%s: %s", lrc_op_name(op), err.msg);
    lrc_tensor_set in, params;
    lrc_tensor_set_init(&in);
    lrc_tensor_set_init(&params);
    lrc_rng rng;
    lrc_rng_seed(&rng, (uint64_t)seed);
    for (int id = 0; id < g->n_nodes && !rc; id++) {
        const lrc_node *n = &g->nodes[id];
        if (n->op != LRC_OP_PARAM && n->op != LRC_OP_INPUT) continue;
        lrc_tensor *t = lrc_tensor_new(n->name, n->dtype, &n->shape, &err);
        for (int64_t i = 0; i < lrc_shape_numel(&n->shape); i++) {
            if (n->dtype == LRC_I32) ((int32_t *)t->data)[i] = (int32_t)(lrc_rng_next(&rng) % 9);
            else if (n->op == LRC_OP_INPUT) ((float *)t->data)[i] = lrc_rng_uniform(&rng) < 0.5 ? 0.0f : 1.0f; /* where's condition */
            else ((float *)t->data)[i] = (float)(3 * lrc_rng_uniform(&rng) - 1.5);
        }
        lrc_tensor_set_add(n->op == LRC_OP_PARAM ? &params : &in, t, &err);
    }
    if (!rc) {
        lrc_run64 r;
        lrc_run64_init(&r, g, &in, &params);
        CHECK(!lrc_run64_exec(&r, 0, g->n_nodes, &err), "%s: %s", lrc_op_name(op), err.msg);
        CHECK(g->n_outputs > 1, "%s: no gradient flows to its inputs", lrc_op_name(op));
        char label[64];
        snprintf(label, sizeof label, "cross_entropy(%s(...))", lrc_op_name(op));
        fd_check(g, &r, label, worst);
        lrc_run64_free(&r);
    }
    lrc_tensor_set_clear(&in);
    lrc_tensor_set_clear(&params);
    lrc_graph_free(g);
}

/* Every elementwise op's rule one at a time (but the gradient ops', full's
 * and those of a zero gradient), against finite differences. */
static void elementwise_rules(double *worst)
{
    for (int op = 0; op < LRC_OP_COUNT; op++)
        if (lrc_ew_is((lrc_op)op) && lrc_op_table[op].grad && lrc_op_table[op].n_in > 0 && !zero_gradient((lrc_op)op))
            elementwise_rule((lrc_op)op, 7 + op, worst);
}

/* scan(a, p, {axis, reverse, init}) for parameters a (p's shape) and init
 * (p's shape without the axis): case 0 without init, 1..3 with it along
 * each axis, both ways; 4 and 5 along an axis of length 1 (p's and a's
 * first row along axis 1), with and without init */
static int scan_case(lrc_graph *g, int p, int k, lrc_err *err)
{
    static const int64_t axis[] = {1, 1, 0, -1, 1, 1}, rev[] = {0, 1, 0, 1, 0, 1}, has_init[] = {0, 1, 1, 1, 1, 0};
    lrc_shape ps = g->nodes[p].shape;
    int a = lrc_graph_add_param(g, "a", &ps, (lrc_init){LRC_INIT_NORMAL, 1.0}, NULL, NULL, err);
    if (k >= 4) {
        lrc_node sp = {.op = LRC_OP_SLICE, .n_in = 1, .in = {p}, .iattr = {1, 0, 1}}, sa = sp;
        sa.in[0] = a;
        p = lrc_graph_add(g, &sp, err), a = lrc_graph_add(g, &sa, err);
        ps.dim[1] = 1;
    }
    lrc_node n = {.op = LRC_OP_SCAN, .n_in = 2, .in = {a, p}, .iattr = {axis[k], rev[k]}};
    if (has_init[k]) {
        int ax = (int)(axis[k] < 0 ? axis[k] + ps.ndim : axis[k]);
        lrc_shape is = {ps.ndim - 1, {0}};
        for (int d = 0, j = 0; d < ps.ndim; d++)
            if (d != ax) is.dim[j++] = ps.dim[d];
        n.in[n.n_in++] = lrc_graph_add_param(g, "init", &is, (lrc_init){LRC_INIT_NORMAL, 1.0}, NULL, NULL, err);
    }
    return lrc_graph_add(g, &n, err);
}

/* bmm (ir/bmm.c) of p [3, 4, 5] and a parameter w: case 0 p x w [1, 5, 6]
 * (w's batch axis broadcast), case 1 w [2, 1, 6, 4] x p (p has fewer
 * axes, w's axis 1 broadcast: both gradients summed over a broadcast) */
static int bmm_case(lrc_graph *g, int p, int k, lrc_err *err)
{
    lrc_shape ws = k == 0 ? (lrc_shape){3, {1, 5, 6}} : (lrc_shape){4, {2, 1, 6, 4}};
    int w = lrc_graph_add_param(g, "w", &ws, (lrc_init){LRC_INIT_NORMAL, 1.0}, NULL, NULL, err);
    lrc_node n = {.op = LRC_OP_BMM, .n_in = 2, .in = {k == 0 ? p : w, k == 0 ? w : p}};
    return w < 0 ? -1 : lrc_graph_add(g, &n, err);
}

/* The ops along one axis (ir/reduce.c): loss = cross_entropy of the rows
 * of op(p) for a parameter p [3, 4, 5], each op along a middle, first or
 * last axis, softmax over a middle axis as lrc.softmax writes it
 * (exp(x - logsumexp(x, keepdim))), scan (scan_case) and bmm (bmm_case). */
static int along_case(lrc_graph *g, int p, int k, lrc_err *err)
{
    lrc_node a = {.n_in = 1, .in = {p}};
    switch (k) {
    case 0: a.op = LRC_OP_SUM, a.iattr[0] = 1; break;
    case 1: a.op = LRC_OP_MEAN, a.iattr[0] = 0, a.iattr[1] = 1; break;
    case 2: a.op = LRC_OP_AMAX, a.iattr[0] = -1; break;
    case 3: a.op = LRC_OP_AMAX, a.iattr[0] = 1, a.iattr[1] = 1; break;
    case 4: a.op = LRC_OP_LOGSUMEXP, a.iattr[0] = 1, a.iattr[1] = 1; break;
    case 5: a.op = LRC_OP_CUMSUM, a.iattr[0] = 1; break;
    case 6: a.op = LRC_OP_CUMSUM, a.iattr[0] = 0, a.iattr[1] = 1; break;
    case 7: { /* concat of p, 2 p and p along axis 1 */
        lrc_node s = {.op = LRC_OP_SCALE, .n_in = 1, .in = {p}, .fattr = {2.0}};
        a = (lrc_node){.op = LRC_OP_CONCAT, .n_in = 3, .in = {p, lrc_graph_add(g, &s, err), p}, .iattr = {1}};
        break;
    }
    case 8: { /* expand of p's sum over axis 1 to [2, 3, 4, 5] */
        lrc_node s = {.op = LRC_OP_SUM, .n_in = 1, .in = {p}, .iattr = {1, 1}};
        a = (lrc_node){.op = LRC_OP_EXPAND, .n_in = 1, .in = {lrc_graph_add(g, &s, err)}, .n_iattr = 4, .iattr = {2, 3, 4, 5}};
        break;
    }
    case 10: case 11: case 12: case 13: case 14: case 15: return scan_case(g, p, k - 10, err);
    case 16: case 17: return bmm_case(g, p, k - 16, err);
    default: { /* softmax over axis 1 */
        lrc_node l = {.op = LRC_OP_LOGSUMEXP, .n_in = 1, .in = {p}, .iattr = {1, 1}};
        lrc_node s = {.op = LRC_OP_SCALE, .n_in = 1, .in = {lrc_graph_add(g, &l, err)}, .fattr = {-1.0}};
        lrc_node d = {.op = LRC_OP_ADD, .n_in = 2, .in = {p, lrc_graph_add(g, &s, err)}};
        a = (lrc_node){.op = LRC_OP_EXP, .n_in = 1, .in = {lrc_graph_add(g, &d, err)}};
    }
    }
    return lrc_graph_add(g, &a, err);
}

static void along_rules(double *worst)
{
    for (int k = 0; k < 18; k++) {
        lrc_err err;
        lrc_graph *g = lrc_graph_new();
        lrc_shape ps = {3, {3, 4, 5}};
        int p = lrc_graph_add_param(g, "p", &ps, (lrc_init){LRC_INIT_NORMAL, 1.0}, NULL, NULL, &err);
        int y = along_case(g, p, k, &err);
        const lrc_shape *ys = y < 0 ? NULL : &g->nodes[y].shape;
        int64_t V = ys ? ys->dim[ys->ndim - 1] : 1, rows = ys ? lrc_shape_numel(ys) / V : 1;
        lrc_shape ls = {1, {rows}};
        int labels = lrc_graph_add_input(g, "labels", LRC_I32, &ls, NULL, &err);
        lrc_node r2 = {.op = LRC_OP_RESHAPE, .n_in = 1, .in = {y}, .n_iattr = 2, .iattr = {rows, V}};
        int flat = y < 0 ? -1 : lrc_graph_add(g, &r2, &err);
        lrc_node ce = {.op = LRC_OP_CROSS_ENTROPY, .n_in = 2, .in = {flat, labels}};
        int loss = flat < 0 ? -1 : lrc_graph_add(g, &ce, &err);
        int rc = loss < 0 ? LRC_EUSER : lrc_pass_autodiff(g, loss, &err);
        char label[64];
        snprintf(label, sizeof label, "cross_entropy(%s(p), case %d)", y < 0 ? "?" : lrc_op_name(g->nodes[y].op), k);
        lrc_tensor_set in, params;
        lrc_tensor_set_init(&in);
        lrc_tensor_set_init(&params);
        if (!rc) rc = lrc_params_init(g, 11 + k, NULL, &params, &err);
        lrc_tensor *l = rc ? NULL : lrc_tensor_new("labels", LRC_I32, &ls, &err);
        for (int64_t i = 0; l && i < rows; i++) ((int32_t *)l->data)[i] = (int32_t)((i * 3) % V);
        if (!rc) rc = lrc_tensor_set_add(&in, l, &err);
        CHECK(!rc, "%s: %s", label, err.msg);
        if (!rc) {
            lrc_run64 r;
            lrc_run64_init(&r, g, &in, &params);
            CHECK(!lrc_run64_exec(&r, 0, g->n_nodes, &err), "%s: %s", label, err.msg);
            fd_check(g, &r, label, worst);
            lrc_run64_free(&r);
        }
        lrc_tensor_set_clear(&in);
        lrc_tensor_set_clear(&params);
        lrc_graph_free(g);
    }
}

/* Attention with GQA (6 query heads over 2), a window of 3 and the
 * soft-cap: q, k and v as parameters, the loss a cross-entropy of the
 * output's rows, every gradient rule against finite differences. */
static void run_attention_case(int64_t window, double cap, double *worst)
{
    const int64_t B = 2, T = 7, H = 6, Hkv = 2, D = 4;
    char label[64];
    snprintf(label, sizeof label, "attention GQA 6/2 window %lld softcap %g", (long long)window, cap);
    lrc_err err;
    lrc_graph *g = lrc_graph_new();
    lrc_shape qs = {4, {B, T, H, D}}, ks = {4, {B, T, Hkv, D}}, ls = {1, {B * T}};
    lrc_init init = {LRC_INIT_NORMAL, 1.5};
    int q = lrc_graph_add_param(g, "q", &qs, init, "attention", NULL, &err);
    int k = lrc_graph_add_param(g, "k", &ks, init, "attention", NULL, &err);
    int v = lrc_graph_add_param(g, "v", &ks, init, "attention", NULL, &err);
    int labels = lrc_graph_add_input(g, "labels", LRC_I32, &ls, NULL, &err);
    lrc_node a = {.op = LRC_OP_ATTENTION, .n_in = 3, .in = {q, k, v}, .iattr = {1, window}, .fattr = {0.5, cap}};
    lrc_node r2 = {.op = LRC_OP_RESHAPE, .n_in = 1, .n_iattr = 2, .iattr = {B * T, H * D}};
    lrc_node ce = {.op = LRC_OP_CROSS_ENTROPY, .n_in = 2, .in = {-1, labels}};
    int rc = q < 0 || k < 0 || v < 0 || labels < 0 || (r2.in[0] = lrc_graph_add(g, &a, &err)) < 0 ||
             (ce.in[0] = lrc_graph_add(g, &r2, &err)) < 0;
    int loss = rc ? -1 : lrc_graph_add(g, &ce, &err);
    if (!rc) rc = loss < 0 || lrc_pass_autodiff(g, loss, &err);
    lrc_tensor_set in, params;
    lrc_tensor_set_init(&in);
    lrc_tensor_set_init(&params);
    if (!rc) rc = lrc_params_init(g, 7, NULL, &params, &err);
    lrc_tensor *l = rc ? NULL : lrc_tensor_new("labels", LRC_I32, &ls, &err);
    for (int64_t i = 0; l && i < B * T; i++) ((int32_t *)l->data)[i] = (int32_t)((i * 7) % (H * D));
    if (!rc) rc = lrc_tensor_set_add(&in, l, &err);
    CHECK(!rc, "%s: %s", label, err.msg);
    if (!rc) {
        lrc_run64 r;
        lrc_run64_init(&r, g, &in, &params);
        CHECK(!lrc_run64_exec(&r, 0, g->n_nodes, &err), "%s: %s", label, err.msg);
        fd_check(g, &r, label, worst);
        lrc_run64_free(&r);
    }
    lrc_tensor_set_clear(&in);
    lrc_tensor_set_clear(&params);
    lrc_graph_free(g);
}

/* Attention's general form (GQA 4/2, Tq != Tk, Dv != Dqk) with a learned
 * bias of shape bias_b x bias_h (dbias: dS summed over its broadcast axes),
 * and, with `mask`, a run-time -inf padding mask [B,1,Tq,Tk] added to it
 * (batch b hides its last b + 1 keys, the last batch's last row all of
 * them): q, k, v and the bias as parameters against finite differences. */
static void run_attention_general(int64_t Tq, int64_t Tk, int64_t Dv, int64_t bias_b, int64_t bias_h, int causal, double cap, bool mask,
                                  double *worst)
{
    const int64_t B = 2, H = 4, Hkv = 2, D = 4;
    char label[128];
    snprintf(label, sizeof label, "attention Tq %lld Tk %lld Dv %lld bias [%lld,%lld,Tq,Tk]%s%s softcap %g", (long long)Tq, (long long)Tk,
             (long long)Dv, (long long)bias_b, (long long)bias_h, causal ? " causal" : "", mask ? " -inf mask" : "", cap);
    lrc_err err;
    lrc_graph *g = lrc_graph_new();
    lrc_shape qs = {4, {B, Tq, H, D}}, ks = {4, {B, Tk, Hkv, D}}, vs = {4, {B, Tk, Hkv, Dv}}, ls = {1, {B * Tq}};
    lrc_shape bs = {4, {bias_b, bias_h, Tq, Tk}}, ms = {4, {B, 1, Tq, Tk}};
    lrc_init init = {LRC_INIT_NORMAL, 1.5};
    int q = lrc_graph_add_param(g, "q", &qs, init, "attention", NULL, &err);
    int k = lrc_graph_add_param(g, "k", &ks, init, "attention", NULL, &err);
    int v = lrc_graph_add_param(g, "v", &vs, init, "attention", NULL, &err);
    int bias = lrc_graph_add_param(g, "bias", &bs, init, "attention", NULL, &err);
    int labels = lrc_graph_add_input(g, "labels", LRC_I32, &ls, NULL, &err);
    int m = mask ? lrc_graph_add_input(g, "mask", LRC_F32, &ms, NULL, &err) : -1;
    if (mask) {
        lrc_node add = {.op = LRC_OP_ADD, .n_in = 2, .in = {bias, m}};
        bias = lrc_graph_add(g, &add, &err);
    }
    lrc_node a = {.op = LRC_OP_ATTENTION, .n_in = 4, .in = {q, k, v, bias}, .iattr = {causal, 0}, .fattr = {0.5, cap}};
    lrc_node r2 = {.op = LRC_OP_RESHAPE, .n_in = 1, .n_iattr = 2, .iattr = {B * Tq, H * Dv}};
    lrc_node ce = {.op = LRC_OP_CROSS_ENTROPY, .n_in = 2, .in = {-1, labels}};
    int rc = q < 0 || k < 0 || v < 0 || bias < 0 || labels < 0 || (r2.in[0] = lrc_graph_add(g, &a, &err)) < 0 ||
             (ce.in[0] = lrc_graph_add(g, &r2, &err)) < 0;
    int loss = rc ? -1 : lrc_graph_add(g, &ce, &err);
    if (!rc) rc = loss < 0 || lrc_pass_autodiff(g, loss, &err);
    lrc_tensor_set in, params;
    lrc_tensor_set_init(&in);
    lrc_tensor_set_init(&params);
    if (!rc) rc = lrc_params_init(g, 7, NULL, &params, &err);
    lrc_tensor *l = rc ? NULL : lrc_tensor_new("labels", LRC_I32, &ls, &err);
    for (int64_t i = 0; l && i < B * Tq; i++) ((int32_t *)l->data)[i] = (int32_t)((i * 7) % (H * Dv));
    if (!rc) rc = lrc_tensor_set_add(&in, l, &err);
    lrc_tensor *mt = rc || !mask ? NULL : lrc_tensor_new("mask", LRC_F32, &ms, &err);
    for (int64_t b = 0; mt && b < B; b++)
        for (int64_t t = 0; t < Tq; t++)
            for (int64_t j = 0; j < Tk; j++)
                ((float *)mt->data)[(b * Tq + t) * Tk + j] = j >= Tk - 1 - b || (b == B - 1 && t == Tq - 1) ? -INFINITY : 0.f;
    if (mt) rc = lrc_tensor_set_add(&in, mt, &err);
    CHECK(!rc, "%s: %s", label, err.msg);
    if (!rc) {
        lrc_run64 r;
        lrc_run64_init(&r, g, &in, &params);
        CHECK(!lrc_run64_exec(&r, 0, g->n_nodes, &err), "%s: %s", label, err.msg);
        fd_check(g, &r, label, worst);
        lrc_run64_free(&r);
    }
    lrc_tensor_set_clear(&in);
    lrc_tensor_set_clear(&params);
    lrc_graph_free(g);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: test_grad_fd MODEL.lua FIXTURE_DIR...\n");
        return 2;
    }
    double worst = 0;
    elementwise_rules(&worst);
    along_rules(&worst);
    for (int i = 2; i < argc; i++) run_case(argv[1], argv[i], false, &worst);
    run_attention_case(0, 0, &worst);
    run_attention_case(3, 2.0, &worst);
    run_attention_general(3, 6, 5, 1, 4, 0, 0, false, &worst);
    run_attention_general(6, 3, 3, 2, 1, 1, 2.0, false, &worst);
    run_attention_general(5, 7, 6, 2, 4, 1, 0, true, &worst);
    run_attention_general(4, 4, 2, 1, 1, 0, 0, true, &worst);
    printf("worst relative error against finite differences over all cases: %.2e (tolerance %.0e)\n", worst, TOL);
    double torch_worst = 0;
    for (int i = 2; i < argc; i++) run_case(argv[1], argv[i], true, &torch_worst);
    printf("worst relative error of the f64 gradients against PyTorch over all cases: %.2e (tolerance 1e-06)\n", torch_worst);
    return check_summary();
}
