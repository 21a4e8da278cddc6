/* ew.c — every elementwise op of LRC_EW_OPS (lrc_ir.h), defined once: its
 * value as one expression over the primitives (expr_<op>), and its
 * gradient as one rule over the graph builder's algebra (grad_<op>), where
 * each primitive adds its op. ref, the cpu and the cuda renderers evaluate
 * the expressions over their own algebras (lrc_ew.h); autodiff runs the
 * rules. An expression keeps the operation order the kernels have always
 * had, so that results stay the same bit for bit. */
#include "lrc_ew.h"

#include <math.h>

#define EXPR(op) static lrc_ew_val expr_##op(lrc_ew_alg *A, const lrc_node *n, const lrc_ew_val *x)
/* a rule gets the inputs x, the output y, its gradient dy, and fills
 * dx[k] (left alone: no gradient flows to input k); each dx[k] is then
 * summed over the axes a broadcast repeated */
#define GRAD(op) \
    static void grad_##op(lrc_ew_alg *A, const lrc_node *n, const lrc_ew_val *x, lrc_ew_val y, lrc_ew_val dy, lrc_ew_val *dx)
#define UNUSED (void)A, (void)n, (void)x, (void)y, (void)dy, (void)dx
#define NO_RULE NULL /* a gradient op: autodiff never differentiates one */

/* Phi(x) = (1 + erf(x / sqrt 2)) / 2, GELU's gate */
static lrc_ew_val normal_cdf(lrc_ew_alg *A, lrc_ew_val x)
{
    return ew_mul(A, ew_c(A, 0.5), ew_add(A, ew_c(A, 1.0), ew_erf(A, ew_mul(A, x, ew_c(A, 0.70710678118654752440)))));
}

/* gelu_tanh's 2u = 2 sqrt(2/pi) x (1 + 0.044715 x^2), torch's kBeta and kKappa */
#define GELU_BETA 0.79788456080286535588
#define GELU_KAPPA 0.044715
static lrc_ew_val gelu_tanh_2u(lrc_ew_alg *A, lrc_ew_val x)
{
    lrc_ew_val inner = ew_fma(A, ew_mul(A, x, x), ew_c(A, GELU_KAPPA), ew_c(A, 1.0));
    return ew_mul(A, ew_mul(A, x, ew_c(A, 2.0 * GELU_BETA)), inner);
}

/* The graph builder's own: an op that is no primitive (a gradient op, or
 * scale with its attribute) added as a node. */
static lrc_ew_val node(lrc_ew_alg *A, lrc_op op, lrc_ew_val a, lrc_ew_val b, double f);

/* ---- the existing ops: fast fused paths, defined by their expressions ---- */

EXPR(add) { (void)n; return ew_add(A, x[0], x[1]); }
GRAD(add) { UNUSED; dx[0] = dy, dx[1] = dy; }
EXPR(mul) { (void)n; return ew_mul(A, x[0], x[1]); }
GRAD(mul) { UNUSED; dx[0] = ew_mul(A, dy, x[1]), dx[1] = ew_mul(A, dy, x[0]); }
EXPR(scale) { return ew_mul(A, x[0], ew_c(A, n->fattr[0])); }
GRAD(scale) { UNUSED; dx[0] = node(A, LRC_OP_SCALE, dy, dy, n->fattr[0]); }
EXPR(silu) { (void)n; return ew_div(A, x[0], ew_add(A, ew_c(A, 1.0), ew_exp(A, ew_neg(A, x[0])))); }
GRAD(silu) { UNUSED; dx[0] = node(A, LRC_OP_SILU_GRAD, x[0], dy, 0); }
EXPR(silu_grad) /* dy s (1 + x (1 - s)), s = sigmoid(x) */
{
    (void)n;
    lrc_ew_val s = ew_div(A, ew_c(A, 1.0), ew_add(A, ew_c(A, 1.0), ew_exp(A, ew_neg(A, x[0]))));
    return ew_mul(A, ew_mul(A, x[1], s), ew_fma(A, x[0], ew_sub(A, ew_c(A, 1.0), s), ew_c(A, 1.0)));
}
EXPR(gelu) { (void)n; return ew_mul(A, x[0], normal_cdf(A, x[0])); }
GRAD(gelu) { UNUSED; dx[0] = node(A, LRC_OP_GELU_GRAD, x[0], dy, 0); }
EXPR(gelu_grad) /* dy (Phi(x) + x phi(x)) */
{
    (void)n;
    lrc_ew_val pdf = ew_mul(A, ew_exp(A, ew_mul(A, ew_mul(A, x[0], x[0]), ew_c(A, -0.5))), ew_c(A, 0.39894228040143267794));
    return ew_mul(A, x[1], ew_fma(A, x[0], pdf, normal_cdf(A, x[0])));
}
EXPR(relu) { (void)n; return ew_maximum(A, x[0], ew_c(A, 0.0)); }
GRAD(relu) { UNUSED; dx[0] = node(A, LRC_OP_RELU_GRAD, x[0], dy, 0); }
EXPR(relu_grad) { (void)n; return ew_where(A, ew_gt(A, x[0], ew_c(A, 0.0)), x[1], ew_c(A, 0.0)); }
EXPR(exp) { (void)n; return ew_exp(A, x[0]); }
GRAD(exp) { UNUSED; dx[0] = ew_mul(A, dy, y); } /* d e^x = e^x dx: the output itself */
/* log(1 + e^x) = max(x, 0) + log1p(e^-|x|): no overflow */
EXPR(softplus) { (void)n; return ew_add(A, ew_maximum(A, x[0], ew_c(A, 0.0)), ew_log1p(A, ew_exp(A, ew_neg(A, ew_abs(A, x[0]))))); }
GRAD(softplus) /* d softplus = sigmoid(x) dx = e^(x - softplus(x)) dx */
{
    UNUSED;
    dx[0] = ew_mul(A, dy, ew_exp(A, ew_add(A, x[0], node(A, LRC_OP_SCALE, y, y, -1.0))));
}
EXPR(tanh) { (void)n; return ew_tanh(A, x[0]); }
/* tanh and sigmoid from their output y, as torch's tanh_backward and
 * sigmoid_backward: no transcendental in the backward pass */
GRAD(tanh) { UNUSED; dx[0] = node(A, LRC_OP_TANH_GRAD, y, dy, 0); }
EXPR(tanh_grad) { (void)n; return ew_mul(A, x[1], ew_fma(A, ew_neg(A, x[0]), x[0], ew_c(A, 1.0))); }
EXPR(sigmoid) { (void)n; return ew_sigmoid(A, x[0]); }
GRAD(sigmoid) { UNUSED; dx[0] = node(A, LRC_OP_SIGMOID_GRAD, y, dy, 0); }
EXPR(sigmoid_grad) { (void)n; return ew_mul(A, ew_mul(A, x[1], x[0]), ew_sub(A, ew_c(A, 1.0), x[0])); }
/* x (1 + tanh u) / 2 written as x sigmoid(2u), the same function: 1 + tanh u
 * cancels for negative x (all of it once tanh u rounds to -1), sigmoid does
 * not */
EXPR(gelu_tanh) { (void)n; return ew_mul(A, x[0], ew_sigmoid(A, gelu_tanh_2u(A, x[0]))); }
GRAD(gelu_tanh) { UNUSED; dx[0] = node(A, LRC_OP_GELU_TANH_GRAD, x[0], dy, 0); }
/* d/dx x s(2u) = s + 2 x s (1 - s) u', s = sigmoid(2u), with 1 - s =
 * sigmoid(-2u), which does not cancel for large x */
EXPR(gelu_tanh_grad)
{
    (void)n;
    lrc_ew_val x2 = ew_mul(A, x[0], x[0]), u2 = gelu_tanh_2u(A, x[0]);
    lrc_ew_val s = ew_sigmoid(A, u2), sn = ew_sigmoid(A, ew_neg(A, u2));
    lrc_ew_val du = ew_fma(A, x2, ew_c(A, 3.0 * GELU_KAPPA * GELU_BETA), ew_c(A, GELU_BETA));
    lrc_ew_val twox_sn = ew_mul(A, ew_mul(A, x[0], ew_c(A, 2.0)), sn);
    return ew_mul(A, ew_mul(A, x[1], s), ew_fma(A, twox_sn, du, ew_c(A, 1.0)));
}
#define grad_silu_grad NO_RULE
#define grad_gelu_grad NO_RULE
#define grad_relu_grad NO_RULE
#define grad_tanh_grad NO_RULE
#define grad_sigmoid_grad NO_RULE
#define grad_gelu_tanh_grad NO_RULE

/* ---- the primitives as ops ------------------------------------------------ */

EXPR(neg) { (void)n; return ew_neg(A, x[0]); }
GRAD(neg) { UNUSED; dx[0] = ew_neg(A, dy); }
EXPR(abs) { (void)n; return ew_abs(A, x[0]); }
GRAD(abs) { UNUSED; dx[0] = ew_mul(A, dy, ew_sign(A, x[0])); }
EXPR(sqrt) { (void)n; return ew_sqrt(A, x[0]); }
GRAD(sqrt) { UNUSED; dx[0] = ew_div(A, ew_mul(A, dy, ew_c(A, 0.5)), y); }
EXPR(rsqrt) { (void)n; return ew_rsqrt(A, x[0]); }
GRAD(rsqrt) { UNUSED; dx[0] = ew_mul(A, ew_mul(A, dy, ew_c(A, -0.5)), ew_mul(A, y, ew_mul(A, y, y))); } /* -x^-3/2 / 2 */
EXPR(log) { (void)n; return ew_log(A, x[0]); }
GRAD(log) { UNUSED; dx[0] = ew_div(A, dy, x[0]); }
EXPR(log1p) { (void)n; return ew_log1p(A, x[0]); }
GRAD(log1p) { UNUSED; dx[0] = ew_div(A, dy, ew_add(A, x[0], ew_c(A, 1.0))); }
EXPR(expm1) { (void)n; return ew_expm1(A, x[0]); }
GRAD(expm1) { UNUSED; dx[0] = ew_mul(A, dy, ew_add(A, y, ew_c(A, 1.0))); }
EXPR(sin) { (void)n; return ew_sin(A, x[0]); }
GRAD(sin) { UNUSED; dx[0] = ew_mul(A, dy, ew_cos(A, x[0])); }
EXPR(cos) { (void)n; return ew_cos(A, x[0]); }
GRAD(cos) { UNUSED; dx[0] = ew_neg(A, ew_mul(A, dy, ew_sin(A, x[0]))); }
EXPR(erf) { (void)n; return ew_erf(A, x[0]); }
GRAD(erf) /* 2 / sqrt(pi) e^-x^2 */
{
    UNUSED;
    dx[0] = ew_mul(A, dy, ew_mul(A, ew_c(A, 1.12837916709551257390), ew_exp(A, ew_neg(A, ew_mul(A, x[0], x[0])))));
}
EXPR(floor) { (void)n; return ew_floor(A, x[0]); }
GRAD(floor) { UNUSED; } /* zero almost everywhere: none flows */
EXPR(sign) { (void)n; return ew_sign(A, x[0]); }
GRAD(sign) { UNUSED; }
EXPR(reciprocal) { (void)n; return ew_reciprocal(A, x[0]); }
GRAD(reciprocal) { UNUSED; dx[0] = ew_neg(A, ew_mul(A, dy, ew_mul(A, y, y))); }
EXPR(sub) { (void)n; return ew_sub(A, x[0], x[1]); }
GRAD(sub) { UNUSED; dx[0] = dy, dx[1] = ew_neg(A, dy); }
EXPR(div) { (void)n; return ew_div(A, x[0], x[1]); }
GRAD(div) { UNUSED; dx[0] = ew_div(A, dy, x[1]), dx[1] = ew_neg(A, ew_div(A, ew_mul(A, dy, y), x[1])); }
EXPR(pow) { (void)n; return ew_pow(A, x[0], x[1]); }
GRAD(pow) /* b a^(b-1) and a^b ln a */
{
    UNUSED;
    dx[0] = ew_mul(A, dy, ew_mul(A, x[1], ew_pow(A, x[0], ew_sub(A, x[1], ew_c(A, 1.0)))));
    dx[1] = ew_mul(A, dy, ew_mul(A, y, ew_log(A, x[0])));
}
/* the larger (smaller) operand takes the gradient, each half of it at a
 * tie, as torch's */
static void grad_select(lrc_ew_alg *A, lrc_ew_val first, lrc_ew_val tie, lrc_ew_val dy, lrc_ew_val *dx)
{
    lrc_ew_val m = ew_fma(A, tie, ew_c(A, 0.5), first);
    dx[0] = ew_mul(A, dy, m);
    dx[1] = ew_mul(A, dy, ew_sub(A, ew_c(A, 1.0), m));
}
EXPR(maximum) { (void)n; return ew_maximum(A, x[0], x[1]); }
GRAD(maximum) { UNUSED; grad_select(A, ew_gt(A, x[0], x[1]), ew_eq(A, x[0], x[1]), dy, dx); }
EXPR(minimum) { (void)n; return ew_minimum(A, x[0], x[1]); }
GRAD(minimum) { UNUSED; grad_select(A, ew_lt(A, x[0], x[1]), ew_eq(A, x[0], x[1]), dy, dx); }
/* comparisons: no gradient flows through them */
EXPR(lt) { (void)n; return ew_lt(A, x[0], x[1]); }
GRAD(lt) { UNUSED; }
EXPR(le) { (void)n; return ew_le(A, x[0], x[1]); }
GRAD(le) { UNUSED; }
EXPR(eq) { (void)n; return ew_eq(A, x[0], x[1]); }
GRAD(eq) { UNUSED; }
EXPR(ne) { (void)n; return ew_ne(A, x[0], x[1]); }
GRAD(ne) { UNUSED; }
EXPR(gt) { (void)n; return ew_gt(A, x[0], x[1]); }
GRAD(gt) { UNUSED; }
EXPR(ge) { (void)n; return ew_ge(A, x[0], x[1]); }
GRAD(ge) { UNUSED; }
EXPR(where) { (void)n; return ew_where(A, x[0], x[1], x[2]); }
GRAD(where)
{
    UNUSED;
    dx[1] = ew_where(A, x[0], dy, ew_c(A, 0.0));
    dx[2] = ew_where(A, x[0], ew_c(A, 0.0), dy);
}
EXPR(fma) { (void)n; return ew_fma(A, x[0], x[1], x[2]); }
GRAD(fma) { UNUSED; dx[0] = ew_mul(A, dy, x[1]), dx[1] = ew_mul(A, dy, x[0]), dx[2] = dy; }
EXPR(softsign) { (void)n; return ew_div(A, x[0], ew_add(A, ew_c(A, 1.0), ew_abs(A, x[0]))); }
GRAD(softsign) /* 1 / (1 + |x|)^2 */
{
    UNUSED;
    lrc_ew_val d = ew_add(A, ew_c(A, 1.0), ew_abs(A, x[0]));
    dx[0] = ew_div(A, dy, ew_mul(A, d, d));
}
EXPR(full) { (void)x; return ew_c(A, n->fattr[0]); }
GRAD(full) { UNUSED; }

/* ---- the table ------------------------------------------------------------ */

typedef struct ew_row {
    lrc_ew_val (*expr)(lrc_ew_alg *A, const lrc_node *n, const lrc_ew_val *x);
    void (*grad)(lrc_ew_alg *A, const lrc_node *n, const lrc_ew_val *x, lrc_ew_val y, lrc_ew_val dy, lrc_ew_val *dx);
    int flags;
    bool is;
} ew_row;

/* expr_<op> and grad_<op> for every row of LRC_EW_OPS: an op without them
 * does not compile */
static const ew_row ew_rows[LRC_OP_COUNT] = {
#define EW_ROW(E, op, nin, shape, fattr, flops, ratio, flags_) [LRC_OP_##E] = {expr_##op, grad_##op, flags_, true},
    LRC_EW_OPS(EW_ROW)
#undef EW_ROW
};

bool lrc_ew_is(lrc_op op) { return ew_rows[op].is; }
int lrc_ew_flags(lrc_op op) { return ew_rows[op].flags; }
bool lrc_ew_has_grad(lrc_op op) { return ew_rows[op].grad != NULL; }
lrc_ew_val lrc_ew_eval(lrc_ew_alg *A, const lrc_node *n, const lrc_ew_val *x) { return ew_rows[n->op].expr(A, n, x); }

static const struct {
    const char *name;
    int arity;
} prims[LRC_PRIM_COUNT] = {
#define PRIM_ROW(E, name, arity) [LRC_PRIM_##E] = {#name, arity},
    LRC_PRIMS(PRIM_ROW)
#undef PRIM_ROW
};
const char *lrc_prim_name(lrc_prim p) { return prims[p].name; }
int lrc_prim_arity(lrc_prim p) { return prims[p].arity; }

/* ---- the graph builder: each primitive adds the op of its name ------------- */

typedef struct builder {
    lrc_graph *g;
    lrc_err *err;
    const char *loc; /* the differentiated node's */
    bool failed;
} builder;

static lrc_ew_val add_node(lrc_ew_alg *A, lrc_node *p)
{
    builder *b = A->ctx;
    lrc_ew_val v = {.i = -1};
    for (int k = 0; k < p->n_in; k++)
        if (p->in[k] < 0) b->failed = true;
    if (b->failed) return v;
    p->loc = (char *)b->loc;
    v.i = lrc_graph_add(b->g, p, b->err);
    if (v.i < 0) b->failed = true;
    return v;
}

static lrc_ew_val node(lrc_ew_alg *A, lrc_op op, lrc_ew_val a, lrc_ew_val b, double f)
{
    lrc_node p = {.op = op, .n_in = lrc_op_table[op].n_in, .in = {(int)a.i, (int)b.i}, .fattr = {f}};
    return add_node(A, &p);
}

static lrc_ew_val graph_const(lrc_ew_alg *A, double v)
{
    lrc_node p = {.op = LRC_OP_FULL, .fattr = {v}}; /* shape []: it broadcasts */
    return add_node(A, &p);
}

#define GRAPH_PRIM(E, name, arity)                                        \
    static lrc_ew_val graph_##name(lrc_ew_alg *A, const lrc_ew_val *x)    \
    {                                                                     \
        lrc_node p = {.op = LRC_OP_##E, .n_in = arity};                   \
        for (int k = 0; k < arity; k++) p.in[k] = (int)x[k].i;            \
        return add_node(A, &p);                                           \
    }
LRC_PRIMS(GRAPH_PRIM)
#undef GRAPH_PRIM

const lrc_ew_prim_fn lrc_ew_graph_prims[LRC_PRIM_COUNT] = {
#define GRAPH_ENTRY(E, name, arity) [LRC_PRIM_##E] = graph_##name,
    LRC_PRIMS(GRAPH_ENTRY)
#undef GRAPH_ENTRY
};

/* x summed over the axes a broadcast to x's shape repeated, back to `to`. */
static int sum_to(lrc_graph *g, int x, const lrc_shape *to, lrc_err *err)
{
    if (x < 0 || lrc_shape_eq(&g->nodes[x].shape, to)) return x;
    lrc_node p = {.op = LRC_OP_SUM_TO, .n_in = 1, .in = {x}, .n_iattr = to->ndim};
    for (int i = 0; i < to->ndim; i++) p.iattr[i] = to->dim[i];
    return lrc_graph_add(g, &p, err);
}

int lrc_ew_grad(lrc_graph *g, int id, int dy, int *dx, lrc_err *err)
{
    lrc_node n = g->nodes[id]; /* a copy: adding nodes moves the array */
    if (!ew_rows[n.op].grad) return lrc_err_set(err, "%s has no gradient rule", lrc_op_name(n.op));
    builder b = {g, err, n.loc, false};
    lrc_ew_alg A = {graph_const, lrc_ew_graph_prims, &b};
    lrc_ew_val x[LRC_MAX_INPUTS], d[LRC_MAX_INPUTS], y = {.i = id}, vdy = {.i = dy};
    for (int k = 0; k < LRC_MAX_INPUTS; k++) x[k].i = n.in[k], d[k].i = -1;
    if (dy < 0) vdy = graph_const(&A, 1.0); /* the output is the loss */
    ew_rows[n.op].grad(&A, &n, x, y, vdy, d);
    for (int k = 0; k < n.n_in && !b.failed; k++) {
        dx[k] = sum_to(g, (int)d[k].i, &g->nodes[n.in[k]].shape, err);
        if (d[k].i >= 0 && dx[k] < 0) b.failed = true;
    }
    return b.failed ? LRC_EUSER : LRC_OK;
}
