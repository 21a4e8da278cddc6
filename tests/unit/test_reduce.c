/* test_reduce — the ops along one axis (ir/reduce.c: sum, mean, amax,
 * logsumexp, cumsum, concat, expand, amax_grad; scan, ir/scan.c) on a
 * target against the reference executor, on random shapes of one to four
 * axes: every axis (counted from the front and from the back), keepdim
 * both ways, cumsum both ways, scan both ways without and with init,
 * concat of three inputs along each axis, expand of every axis of 1, amax
 * with ties, and each reduction of an elementwise chain along every axis
 * (fused into its kernel, within 1e-6); bmm (ir/bmm.c) of equal, broadcast
 * and fewer batch axes; cast both ways, arange and a slice of i32
 * (ir/cast.c). Each other output within 1e-5 of ref (relative); on cpu with guard
 * bytes after every buffer, on cuda with LRC_CUDA_CHECK's guard
 * regions (exit 77 without a device; CI runs the emulator, tests/cuemu).
 * Then the shape rules' errors, the axes rule and the rows rule.
 * Usage: test_reduce cpu|cuda */
#include "check.h"
#include "cpu_graph.h"
#include "cuda_test.h"
#include "ir/passes/lrc_passes.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define GUARD 256
#define GUARD_BYTE 0x5A

static int add(lrc_graph *g, lrc_node p)
{
    lrc_err err;
    int id = lrc_graph_add(g, &p, &err);
    if (id < 0) printf("  build: %s\n", err.msg);
    return id;
}

static int along(lrc_graph *g, lrc_op op, int x, int64_t axis, int64_t flag)
{
    return add(g, (lrc_node){.op = op, .n_in = 1, .in = {x}, .iattr = {axis, flag}});
}

/* bmm (ir/bmm.c) of x [..., M, K] and q^T [..., K, M]: with equal batch
 * axes, with either operand's first axis summed to 1 (broadcast), and with
 * q^T's first axis dropped (fewer axes, aligned right) */
static int build_bmm(lrc_graph *g, const lrc_shape *s, int x, int q)
{
    int nd = s->ndim, rc = 0;
    if (nd < 2) return 0;
    lrc_node t = {.op = LRC_OP_TRANSPOSE, .n_in = 1, .in = {q}, .n_iattr = nd};
    for (int d = 0; d < nd; d++) t.iattr[d] = d;
    t.iattr[nd - 2] = nd - 1, t.iattr[nd - 1] = nd - 2;
    int qt = add(g, t);
    rc = rc || out(g, "bmm_same", add(g, (lrc_node){.op = LRC_OP_BMM, .n_in = 2, .in = {x, qt}}));
    if (nd < 3) return rc;
    int x1 = along(g, LRC_OP_SUM, x, 0, 1), q1 = along(g, LRC_OP_SUM, qt, 0, 1);
    rc = rc || out(g, "bmm_a_bcast", add(g, (lrc_node){.op = LRC_OP_BMM, .n_in = 2, .in = {x1, qt}}));
    rc = rc || out(g, "bmm_b_bcast", add(g, (lrc_node){.op = LRC_OP_BMM, .n_in = 2, .in = {x, q1}}));
    rc = rc || out(g, "bmm_b_fewer", add(g, (lrc_node){.op = LRC_OP_BMM, .n_in = 2, .in = {x, along(g, LRC_OP_SUM, qt, 0, 0)}}));
    return rc;
}

/* cast and arange (ir/cast.c), and a slice of i32: 10 x to i32 (toward
 * zero) and back; arange over the last axis as f32 added to x; 10 x as i32
 * with a zero row before it along axis 0, back to f32 */
static int build_cast(lrc_graph *g, const lrc_shape *s, int x)
{
    int x10 = add(g, (lrc_node){.op = LRC_OP_SCALE, .n_in = 1, .in = {x}, .fattr = {10.0}});
    int xi = add(g, (lrc_node){.op = LRC_OP_CAST, .n_in = 1, .in = {x10}, .iattr = {LRC_I32}});
    int rc = out(g, "cast_trip", add(g, (lrc_node){.op = LRC_OP_CAST, .n_in = 1, .in = {xi}, .iattr = {LRC_F32}}));
    int ar = add(g, (lrc_node){.op = LRC_OP_ARANGE, .iattr = {s->dim[s->ndim - 1]}});
    int af = add(g, (lrc_node){.op = LRC_OP_CAST, .n_in = 1, .in = {ar}, .iattr = {LRC_F32}});
    rc = rc || out(g, "arange_plus_x", add(g, (lrc_node){.op = LRC_OP_ADD, .n_in = 2, .in = {x, af}}));
    int sl = add(g, (lrc_node){.op = LRC_OP_SLICE, .n_in = 1, .in = {xi}, .iattr = {0, -1, s->dim[0] + 1}});
    return rc || out(g, "slice_i32", add(g, (lrc_node){.op = LRC_OP_CAST, .n_in = 1, .in = {sl}, .iattr = {LRC_F32}}));
}

/* pro_<op>_<a>: op along axis a of exp(x * b) * x + b, b an input of its
 * own (x's shape with axes 0 and a of 1): an elementwise prologue that
 * both targets run in the reduction's kernel (fuse rule 11), broadcast
 * along the reduced axis and another. */
static int prologue(lrc_graph *g, const lrc_shape *s, int x, lrc_op op, int a, int64_t ax)
{
    char name[64];
    lrc_shape bs = *s;
    bs.dim[0] = bs.dim[a] = 1;
    snprintf(name, sizeof name, "b_%s_%d", lrc_op_name(op), a);
    int b = lrc_graph_add_input(g, name, LRC_F32, &bs, NULL, &(lrc_err){0});
    int xb = add(g, (lrc_node){.op = LRC_OP_MUL, .n_in = 2, .in = {x, b}});
    int ex = add(g, (lrc_node){.op = LRC_OP_EXP, .n_in = 1, .in = {xb}});
    int ey = add(g, (lrc_node){.op = LRC_OP_MUL, .n_in = 2, .in = {ex, x}});
    int p = add(g, (lrc_node){.op = LRC_OP_ADD, .n_in = 2, .in = {ey, b}});
    snprintf(name, sizeof name, "pro_%s_%d", lrc_op_name(op), a);
    return b < 0 || xb < 0 || ex < 0 || ey < 0 || p < 0 || out(g, name, along(g, op, p, ax, a % 2));
}

/* x of shape s (and q: its values on a grid of 0.5, so amax ties), every
 * op along every axis as an output named op_axis_flag */
static int build(lrc_graph *g, const lrc_shape *s, uint64_t seed)
{
    int x = lrc_graph_add_input(g, "x", LRC_F32, s, NULL, &(lrc_err){0});
    int q = lrc_graph_add_input(g, "q", LRC_F32, s, NULL, &(lrc_err){0});
    int rc = x < 0 || q < 0;
    static const lrc_op reductions[] = {LRC_OP_SUM, LRC_OP_MEAN, LRC_OP_AMAX, LRC_OP_LOGSUMEXP};
    char name[64];
    for (int a = 0; a < s->ndim && !rc; a++) {
        int64_t ax = a % 2 ? a - s->ndim : a; /* odd axes counted from the back */
        for (size_t k = 0; k < sizeof reductions / sizeof reductions[0]; k++)
            for (int keep = 0; keep < 2; keep++) {
                snprintf(name, sizeof name, "%s_%d_%d", lrc_op_name(reductions[k]), a, keep);
                rc = rc || out(g, name, along(g, reductions[k], reductions[k] == LRC_OP_AMAX ? q : x, ax, keep));
            }
        for (size_t k = 0; k < sizeof reductions / sizeof reductions[0] && !rc; k++)
            rc = prologue(g, s, x, reductions[k], a, ax);
        for (int rev = 0; rev < 2; rev++) {
            snprintf(name, sizeof name, "cumsum_%d_%d", a, rev);
            rc = rc || out(g, name, along(g, LRC_OP_CUMSUM, x, ax, rev));
        }
        /* scan(x, q) both ways, without and with init: x's first row along a */
        lrc_node iv = {.op = LRC_OP_RESHAPE, .n_in = 1, .n_iattr = s->ndim - 1};
        for (int d = 0, j = 0; d < s->ndim; d++)
            if (d != a) iv.iattr[j++] = s->dim[d];
        iv.in[0] = add(g, (lrc_node){.op = LRC_OP_SLICE, .n_in = 1, .in = {x}, .iattr = {a, 0, 1}});
        int init = iv.in[0] < 0 ? -1 : add(g, iv);
        for (int k = 0; k < 4; k++) {
            snprintf(name, sizeof name, "scan_%d_%d_%d", a, k & 1, k >> 1);
            lrc_node sc = {.op = LRC_OP_SCAN, .n_in = 2 + (k >> 1), .in = {x, q, init}, .iattr = {ax, k & 1}};
            rc = rc || init < 0 || out(g, name, add(g, sc));
        }
        /* amax's gradient where ties split dy */
        int y = along(g, LRC_OP_AMAX, q, a, 1);
        lrc_shape ys = *s;
        ys.dim[a] = 1;
        snprintf(name, sizeof name, "dy_%d", a);
        int dy = lrc_graph_add_input(g, name, LRC_F32, &ys, NULL, &(lrc_err){0});
        snprintf(name, sizeof name, "amax_grad_%d", a);
        rc = rc || y < 0 || dy < 0 || out(g, name, add(g, (lrc_node){.op = LRC_OP_AMAX_GRAD, .n_in = 3, .in = {q, y, dy}, .iattr = {a}}));
        /* concat of x, a slice of it and x again along axis a; expand of x's axis a reduced to 1 */
        int64_t part = s->dim[a] > 1 ? s->dim[a] - 1 : 1;
        int sl = add(g, (lrc_node){.op = LRC_OP_SLICE, .n_in = 1, .in = {x}, .iattr = {a, 0, part}});
        snprintf(name, sizeof name, "concat_%d", a);
        rc = rc || out(g, name, add(g, (lrc_node){.op = LRC_OP_CONCAT, .n_in = 3, .in = {x, sl, x}, .iattr = {ax}}));
        lrc_node e = {.op = LRC_OP_EXPAND, .n_in = 1, .in = {along(g, LRC_OP_SUM, x, a, 1)}, .n_iattr = s->ndim + 1};
        e.iattr[0] = 2;
        for (int d = 0; d < s->ndim; d++) e.iattr[d + 1] = d == a ? s->dim[d] + (int64_t)(seed % 3) : -1;
        snprintf(name, sizeof name, "expand_%d", a);
        rc = rc || out(g, name, add(g, e));
    }
    return rc || build_bmm(g, s, x, q) || build_cast(g, s, x);
}

static lrc_tensor *guarded(const char *name, const lrc_shape *s)
{
    lrc_err err;
    lrc_tensor *x = lrc_tensor_new(name, LRC_F32, s, &err);
    x->data = realloc(x->data, x->nbytes + GUARD);
    memset((char *)x->data + x->nbytes, GUARD_BYTE, GUARD);
    return x;
}

static bool guard_ok(const lrc_tensor *t)
{
    for (size_t i = 0; i < GUARD; i++)
        if (((const unsigned char *)t->data)[t->nbytes + i] != GUARD_BYTE) return false;
    return true;
}

/* g's outputs on the target into got (taken: g) */
static int run_target(const char *target, const char *arch, lrc_graph *g, lrc_tensor_set *in, lrc_tensor_set *got, lrc_err *err)
{
    lrc_compiled c;
    memset(&c, 0, sizeof c);
    int rc;
    if (!strcmp(target, "cuda")) {
        lrc_cuda_exec *x = NULL;
        rc = lrc_compile_graph_cuda(g, NULL, arch, true, &c, err);
        if (!rc) rc = lrc_cuda_exec_new(&c.plan, &c.cuda.table, c.cubin, &x, err);
        if (!rc) rc = lrc_cuda_exec_run(x, in, got, err);
        lrc_cuda_exec_free(x);
    } else {
        lrc_tensor_set params;
        lrc_tensor_set_init(&params);
        lrc_pool *pool = lrc_pool_new(2, err);
        lrc_exec *x = NULL;
        rc = lrc_compile_graph(g, NULL, &c, err);
        if (!rc) rc = lrc_exec_new(&c.plan, pool, &x, err);
        if (!rc) rc = lrc_exec_bind_params(x, &params, err);
        if (!rc) rc = lrc_exec_run_plan(x, in, got, err);
        lrc_exec_free(x);
        lrc_pool_free(pool);
    }
    if (c.g) lrc_compiled_free(&c);
    return rc;
}

static void run_shape(const char *target, const char *arch, const lrc_shape *s, uint64_t seed)
{
    lrc_err err;
    char label[96], b[96];
    snprintf(label, sizeof label, "%s %s", target, lrc_shape_str(s, b, sizeof b));
    lrc_graph *g = lrc_graph_new(), *g2 = lrc_graph_new();
    if (build(g, s, seed) || build(g2, s, seed)) {
        CHECK(0, "%s: cannot build", label);
        lrc_graph_free(g), lrc_graph_free(g2);
        return;
    }
    lrc_rng r;
    lrc_rng_seed(&r, seed);
    lrc_tensor_set in, params, want, got;
    lrc_tensor_set_init(&in), lrc_tensor_set_init(&params), lrc_tensor_set_init(&want), lrc_tensor_set_init(&got);
    for (int i = 0; i < g->n_nodes; i++) {
        const lrc_node *n = &g->nodes[i];
        if (n->op != LRC_OP_INPUT) continue;
        lrc_tensor *t = guarded(n->name, &n->shape);
        fill(t, &r, 1);
        if (!strcmp(n->name, "q"))
            for (int64_t j = 0; j < lrc_shape_numel(&n->shape); j++) ((float *)t->data)[j] = roundf(((float *)t->data)[j] * 2) / 2;
        lrc_tensor_set_add(&in, t, &err);
    }
    bool cpu = strcmp(target, "cuda") != 0;
    for (int i = 0; i < g->n_outputs && cpu; i++) /* cuda writes outputs it allocates; its guards are LRC_CUDA_CHECK's */
        lrc_tensor_set_add(&got, guarded(g->output_names[i], &g->nodes[g->outputs[i]].shape), &err);
    lrc_backend *ref = lrc_backend_ref_new();
    int rc = lrc_exec_run(ref, g, &in, &params, &want, &err);
    lrc_backend_close(ref);
    if (!rc) rc = run_target(target, arch, g2, &in, &got, &err);
    else lrc_graph_free(g2);
    CHECK(!rc, "%s: %s", label, rc ? err.msg : "");
    int bad = 0;
    for (int i = 0; !rc && i < want.n; i++) {
        const lrc_tensor *a = lrc_tensor_set_find(&got, want.items[i]->name), *w = want.items[i];
        double num = 0, den = 0;
        for (int64_t j = 0; a && j < lrc_shape_numel(&w->shape); j++) {
            double d = (double)((float *)a->data)[j] - ((float *)w->data)[j];
            num += d * d, den += (double)((float *)w->data)[j] * ((float *)w->data)[j];
        }
        double rel = sqrt(num) / (den > 0 ? sqrt(den) : 1);
        double tol = strncmp(w->name, "pro_", 4) ? 1e-5 : 1e-6; /* a prologue computes the values ref stores */
        if (!a || !(rel <= tol)) printf("FAIL %s: output %s relative error %.3e\n", label, w->name, a ? rel : INFINITY), bad++;
        if (a && cpu && !guard_ok(a)) printf("FAIL %s: wrote past the end of output %s\n", label, w->name), bad++;
    }
    for (int i = 0; i < in.n; i++)
        if (!guard_ok(in.items[i])) printf("FAIL %s: wrote past the end of input %s\n", label, in.items[i]->name), bad++;
    CHECK(!bad, "%s: %d outputs wrong of %d", label, bad, want.n);
    if (!rc && !bad) printf("ok   %s: %d outputs\n", label, want.n);
    lrc_graph_free(g);
    lrc_tensor_set_clear(&in), lrc_tensor_set_clear(&params), lrc_tensor_set_clear(&want), lrc_tensor_set_clear(&got);
}

/* g's nodes and outputs added to the empty graph h */
static int build_copy(const lrc_graph *g, lrc_graph *h, lrc_err *err)
{
    for (int i = 0; i < g->n_nodes; i++) {
        const lrc_node *n = &g->nodes[i];
        int id = n->op == LRC_OP_INPUT ? lrc_graph_add_input(h, n->name, n->dtype, &n->shape, NULL, err) : lrc_graph_add(h, n, err);
        if (id != i) return LRC_EUSER;
    }
    for (int o = 0; o < g->n_outputs; o++)
        if (lrc_graph_add_output(h, g->output_names[o], g->outputs[o], err) < 0) return LRC_EUSER;
    return LRC_OK;
}

/* One-line errors that name the axis and the sizes */
static void shape_errors(void)
{
    lrc_err err;
    lrc_graph *g = lrc_graph_new();
    lrc_shape s = {3, {2, 3, 4}}, t = {3, {2, 5, 4}}, u = {3, {2, 3, 5}};
    int x = lrc_graph_add_input(g, "x", LRC_F32, &s, NULL, &err), y = lrc_graph_add_input(g, "y", LRC_F32, &t, NULL, &err);
    int z = lrc_graph_add_input(g, "z", LRC_F32, &u, NULL, &err);
    lrc_node p = {.op = LRC_OP_SUM, .n_in = 1, .in = {x}, .iattr = {3}};
    CHECK(lrc_graph_add(g, &p, &err) < 0 && strstr(err.msg, "axis 3 is not an axis of [2,3,4] (-3 to 2)"), "sum axis 3: %s", err.msg);
    p.iattr[0] = -4;
    CHECK(lrc_graph_add(g, &p, &err) < 0 && strstr(err.msg, "axis -4"), "sum axis -4: %s", err.msg);
    p.iattr[0] = -1;
    int ok = lrc_graph_add(g, &p, &err);
    CHECK(ok >= 0 && g->nodes[ok].iattr[0] == 2 && g->nodes[ok].shape.ndim == 2, "sum axis -1 is axis 2, dropped");
    lrc_node c = {.op = LRC_OP_CONCAT, .n_in = 2, .in = {x, y}, .iattr = {1}};
    CHECK(lrc_graph_add(g, &c, &err) >= 0, "concat along 1: %s", err.msg);
    c.in[1] = z;
    CHECK(lrc_graph_add(g, &c, &err) < 0 && strstr(err.msg, "size 5 at axis 2") && strstr(err.msg, "has 4"), "concat mismatch: %s", err.msg);
    c.n_in = 0;
    char want[32];
    snprintf(want, sizeof want, "1 to %d inputs", LRC_MAX_INPUTS);
    CHECK(lrc_graph_add(g, &c, &err) < 0 && strstr(err.msg, want), "concat of none: %s", err.msg);
    lrc_node ca = {.op = LRC_OP_CAST, .n_in = 1, .in = {x}, .iattr = {LRC_F32}};
    CHECK(lrc_graph_add(g, &ca, &err) < 0 && strstr(err.msg, "cast: x is f32 already"), "cast to its dtype: %s", err.msg);
    ca.iattr[0] = LRC_BF16;
    CHECK(lrc_graph_add(g, &ca, &err) < 0 && strstr(err.msg, "cast: to must be 0 (f32) or 3 (i32), got 1"), "cast to bf16: %s", err.msg);
    lrc_node ar = {.op = LRC_OP_ARANGE, .iattr = {0}};
    CHECK(lrc_graph_add(g, &ar, &err) < 0 && strstr(err.msg, "arange: n must be from 1"), "arange(0): %s", err.msg);
    lrc_node sc = {.op = LRC_OP_SCAN, .n_in = 2, .in = {x, z}, .iattr = {1}};
    CHECK(lrc_graph_add(g, &sc, &err) < 0 && strstr(err.msg, "scan: a [2,3,4] and b [2,3,5] must have one shape"), "scan a/b: %s", err.msg);
    lrc_shape is = {2, {2, 5}};
    sc.in[1] = x, sc.in[2] = lrc_graph_add_input(g, "init", LRC_F32, &is, NULL, &err), sc.n_in = 3;
    CHECK(lrc_graph_add(g, &sc, &err) < 0 && strstr(err.msg, "init [2,5] must be a [2,3,4] without axis 1, [2,4]"), "scan init: %s", err.msg);
    sc.n_in = 1;
    CHECK(lrc_graph_add(g, &sc, &err) < 0 && strstr(err.msg, "2 or 3 inputs"), "scan of one: %s", err.msg);
    lrc_node e = {.op = LRC_OP_EXPAND, .n_in = 1, .in = {x}, .n_iattr = 3, .iattr = {2, 6, 4}};
    CHECK(lrc_graph_add(g, &e, &err) < 0 && strstr(err.msg, "axis 1 has size 3, which must be 1 or 6"), "expand: %s", err.msg);
    lrc_graph_free(g);
}

/* the batch axis (0) through the ops: a reduction over it mixes it, over
 * another axis keeps it (moved where keepdim drops an axis before it);
 * cumsum or scan over it reads earlier rows only, reversed later ones */
static void axes_rule(void)
{
    static const struct {
        lrc_op op;
        int tracked, axis, flag, want; /* want -1: mixes */
    } cases[] = {{LRC_OP_SUM, 0, 0, 0, -1},    {LRC_OP_SUM, 1, 0, 0, 0},     {LRC_OP_SUM, 1, 0, 1, 1},
                 {LRC_OP_AMAX, 2, 1, 0, 1},    {LRC_OP_MEAN, 0, 2, 0, 0},    {LRC_OP_CUMSUM, 1, 1, 0, 1},
                 {LRC_OP_CUMSUM, 1, 1, 1, -1}, {LRC_OP_LOGSUMEXP, 1, 1, 1, -1}, {LRC_OP_SCAN, 1, 1, 0, 1},
                 {LRC_OP_SCAN, 1, 1, 1, -1},   {LRC_OP_SCAN, 2, 1, 0, 2}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lrc_err err;
        lrc_graph *g = lrc_graph_new();
        lrc_shape s = {3, {2, 3, 4}};
        int x = lrc_graph_add_input(g, "x", LRC_F32, &s, NULL, &err);
        if (cases[i].op == LRC_OP_SCAN) add(g, (lrc_node){.op = LRC_OP_SCAN, .n_in = 2, .in = {x, x}, .iattr = {cases[i].axis, cases[i].flag}});
        else along(g, cases[i].op, x, cases[i].axis, cases[i].flag);
        int in_axis[2] = {cases[i].tracked, -1}, axis[2];
        int rc = lrc_graph_track_axis(g, in_axis, "sequence", axis, &err);
        CHECK(cases[i].want < 0 ? rc != 0 : !rc && axis[1] == cases[i].want, "%s over %d tracking %d: rc %d axis %d", lrc_op_name(cases[i].op),
              cases[i].axis, cases[i].tracked, rc, rc ? -9 : axis[1]);
        lrc_graph_free(g);
    }
}

/* bmm's axes rule: x [2, 3, 4] tracked, times an untracked y, as a
 * (x y, y [2, 4, 5]) and as b (y x, y [2, 5, 3]): the batch axis and a's
 * M or b's N stay, K mixes */
static void axes_rule_bmm(void)
{
    static const struct {
        int x_is_b, tracked, want; /* want -1: mixes */
    } cases[] = {{0, 0, 0}, {0, 1, 1}, {0, 2, -1}, {1, 0, 0}, {1, 1, -1}, {1, 2, 2}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lrc_err err;
        lrc_graph *g = lrc_graph_new();
        lrc_shape xs = {3, {2, 3, 4}}, ys = cases[i].x_is_b ? (lrc_shape){3, {2, 5, 3}} : (lrc_shape){3, {2, 4, 5}};
        int x = lrc_graph_add_input(g, "x", LRC_F32, &xs, NULL, &err), y = lrc_graph_add_input(g, "y", LRC_F32, &ys, NULL, &err);
        add(g, (lrc_node){.op = LRC_OP_BMM, .n_in = 2, .in = {cases[i].x_is_b ? y : x, cases[i].x_is_b ? x : y}});
        int in_axis[3] = {cases[i].tracked, -1, -1}, axis[3];
        int rc = lrc_graph_track_axis(g, in_axis, "sequence", axis, &err);
        CHECK(cases[i].want < 0 ? rc != 0 && strstr(err.msg, "sums over K") : !rc && axis[2] == cases[i].want, "bmm, x as %s tracking %d: rc %d axis %d",
              cases[i].x_is_b ? "b" : "a", cases[i].tracked, rc, rc ? -9 : axis[2]);
        lrc_graph_free(g);
    }
}

/* The rows rule (the last_rows pass): logits = x * sum(x, axis 2, keepdim)
 * + cumsum(x, axis 2) + scan(x, x, axis 2, init) is cut to the last row
 * through the three ops, and that row is the full graph's; along the
 * sequence (axis 1) each reads every row. */
static void rows_rule(void)
{
    for (int over_seq = 0; over_seq < 2; over_seq++) {
        lrc_err err;
        lrc_graph *g = lrc_graph_new();
        lrc_shape s = {3, {2, 5, 7}};
        int x = lrc_graph_add_input(g, "x", LRC_F32, &s, NULL, &err);
        int r = along(g, LRC_OP_SUM, x, over_seq ? 1 : 2, 1);
        int y = add(g, (lrc_node){.op = LRC_OP_ADD, .n_in = 2,
                                  .in = {add(g, (lrc_node){.op = LRC_OP_MUL, .n_in = 2, .in = {x, r}}), along(g, LRC_OP_CUMSUM, x, over_seq ? 1 : 2, 0)}});
        /* + scan(x, x, init = x's first feature or position along the scan's axis) */
        int ax = over_seq ? 1 : 2;
        int first = add(g, (lrc_node){.op = LRC_OP_SLICE, .n_in = 1, .in = {x}, .iattr = {ax, 0, 1}});
        int init = add(g, (lrc_node){.op = LRC_OP_RESHAPE, .n_in = 1, .in = {first}, .n_iattr = 2, .iattr = {2, over_seq ? 7 : 5}});
        y = add(g, (lrc_node){.op = LRC_OP_ADD, .n_in = 2, .in = {y, add(g, (lrc_node){.op = LRC_OP_SCAN, .n_in = 3, .in = {x, x, init}, .iattr = {ax}})}});
        out(g, "logits", y);
        lrc_graph *cut = lrc_graph_new();
        int rc = build_copy(g, cut, &err) || lrc_pass_last_rows(&cut, &err);
        CHECK(!rc, "last_rows: %s", rc ? err.msg : "");
        int64_t rows_read[3] = {-1, -1, -1}; /* the sum's, the cumsum's and the scan's input rows in the cut graph */
        for (int i = 0; !rc && i < cut->n_nodes; i++)
            if (cut->nodes[i].op == LRC_OP_SUM || cut->nodes[i].op == LRC_OP_CUMSUM || cut->nodes[i].op == LRC_OP_SCAN)
                rows_read[cut->nodes[i].op == LRC_OP_SUM ? 0 : cut->nodes[i].op == LRC_OP_CUMSUM ? 1 : 2] = cut->nodes[cut->nodes[i].in[0]].shape.dim[1];
        CHECK(rc || (rows_read[0] == (over_seq ? 5 : 1) && rows_read[1] == rows_read[0] && rows_read[2] == rows_read[0]),
              "last_rows along axis %d: the sum reads %lld rows, cumsum %lld, scan %lld", over_seq ? 1 : 2, (long long)rows_read[0],
              (long long)rows_read[1], (long long)rows_read[2]);
        lrc_tensor_set in, params, full, last;
        lrc_tensor_set_init(&in), lrc_tensor_set_init(&params), lrc_tensor_set_init(&full), lrc_tensor_set_init(&last);
        lrc_tensor *t = lrc_tensor_new("x", LRC_F32, &s, &err);
        lrc_rng rng;
        lrc_rng_seed(&rng, 9);
        fill(t, &rng, 1);
        lrc_tensor_set_add(&in, t, &err);
        lrc_backend *ref = lrc_backend_ref_new();
        if (!rc) rc = lrc_exec_run(ref, g, &in, &params, &full, &err) || lrc_exec_run(ref, cut, &in, &params, &last, &err);
        lrc_backend_close(ref);
        const float *a = rc ? NULL : full.items[0]->data, *b = rc ? NULL : last.items[0]->data;
        bool same = !rc;
        for (int bi = 0; same && bi < 2; bi++)
            same = !memcmp(a + (bi * 5 + 4) * 7, b + bi * 7, 7 * sizeof(float));
        CHECK(same, "last_rows over a sum along axis %d: the last row differs from the full graph's (%s)", over_seq ? 1 : 2, rc ? err.msg : "");
        lrc_tensor_set_clear(&in), lrc_tensor_set_clear(&params), lrc_tensor_set_clear(&full), lrc_tensor_set_clear(&last);
        lrc_graph_free(cut);
        lrc_graph_free(g);
    }
}

int main(int argc, char **argv)
{
    if (argc != 2 || (strcmp(argv[1], "cpu") && strcmp(argv[1], "cuda"))) {
        fprintf(stderr, "usage: test_reduce cpu|cuda\n");
        return 2;
    }
    char arch[32] = "";
    if (!strcmp(argv[1], "cuda")) cuda_test_device(arch, sizeof arch);
    else shape_errors(), axes_rule(), axes_rule_bmm(), rows_rule();
    static const lrc_shape shapes[] = {{1, {7}}, {2, {1, 5}}, {2, {9, 3}}, {3, {2, 1, 6}}, {3, {3, 4, 19}}, {4, {2, 3, 1, 5}}, {4, {1, 2, 4, 3}}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) run_shape(argv[1], arch, &shapes[i], 500 + i);
    return check_summary();
}
