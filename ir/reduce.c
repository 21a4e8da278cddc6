/* reduce.c — shape rules, FLOPs and gradient rules of the ops along one
 * axis: the reductions sum, mean, amax and logsumexp, cumsum, concat, and
 * expand (a broadcast to a shape), with amax's gradient. Their reference
 * kernels are ref_reduce.c. Each splits its input as [outer, len, inner]
 * about `axis` (iattr[0]), which the shape rule stores counted from the
 * front (-1 is the last axis, as in torch), so that a node re-infers to
 * itself. */
#include "ref_ops.h"

#include <string.h>

#define IN(k) (&g->nodes[n->in[k]])

/* n->iattr[0] as an axis of a shape of ndim axes, stored from the front */
static int want_axis(lrc_node *n, int ndim, const lrc_shape *x, lrc_err *err)
{
    char b[96];
    int64_t a = n->iattr[0];
    if (ndim < 1)
        return lrc_err_set(err, "%s: the input is a scalar %s, which has no axis", lrc_op_name(n->op), lrc_shape_str(x, b, sizeof b));
    if (a < -ndim || a >= ndim)
        return lrc_err_set(err, "%s: axis %lld is not an axis of %s (%d to %d)", lrc_op_name(n->op), (long long)a,
                           lrc_shape_str(x, b, sizeof b), -ndim, ndim - 1);
    n->iattr[0] = a < 0 ? a + ndim : a;
    return LRC_OK;
}

static int want_flag(const lrc_node *n, int at, const char *what, lrc_err *err)
{
    if (n->iattr[at] != 0 && n->iattr[at] != 1)
        return lrc_err_set(err, "%s: %s must be true or false, got %lld", lrc_op_name(n->op), what, (long long)n->iattr[at]);
    return LRC_OK;
}

static int want_float_in(const lrc_graph *g, const lrc_node *n, int k, lrc_err *err)
{
    if (IN(k)->dtype == LRC_I32)
        return lrc_err_set(err, "%s: input %d must be a floating-point tensor, got i32", lrc_op_name(n->op), k + 1);
    return LRC_OK;
}

void lrc_axis_split(const lrc_shape *s, int axis, int64_t *outer, int64_t *len, int64_t *inner)
{
    *outer = *inner = 1;
    for (int d = 0; d < axis; d++) *outer *= s->dim[d];
    for (int d = axis + 1; d < s->ndim; d++) *inner *= s->dim[d];
    *len = s->dim[axis];
}

/* x -> x reduced along axis: kept as 1 (keepdim) or dropped */
int lrc_infer_reduce(const lrc_graph *g, lrc_node *n, lrc_err *err)
{
    const lrc_shape *x = &IN(0)->shape;
    if (want_float_in(g, n, 0, err) || want_axis(n, x->ndim, x, err) || want_flag(n, 1, "keepdim", err)) return LRC_EUSER;
    int axis = (int)n->iattr[0];
    n->dtype = IN(0)->dtype;
    n->shape = *x;
    if (n->iattr[1]) n->shape.dim[axis] = 1;
    else {
        for (int d = axis; d + 1 < x->ndim; d++) n->shape.dim[d] = x->dim[d + 1];
        n->shape.dim[--n->shape.ndim] = 0;
    }
    return LRC_OK;
}

int lrc_infer_cumsum(const lrc_graph *g, lrc_node *n, lrc_err *err)
{
    const lrc_shape *x = &IN(0)->shape;
    if (want_float_in(g, n, 0, err) || want_axis(n, x->ndim, x, err) || want_flag(n, 1, "reverse", err)) return LRC_EUSER;
    n->dtype = IN(0)->dtype;
    n->shape = *x;
    return LRC_OK;
}

/* every input of input 1's rank and sizes but along axis, which adds up */
int lrc_infer_concat(const lrc_graph *g, lrc_node *n, lrc_err *err)
{
    char b1[96], b2[96];
    const lrc_shape *x = &IN(0)->shape;
    for (int k = 0; k < n->n_in; k++)
        if (want_float_in(g, n, k, err)) return LRC_EUSER;
    if (want_axis(n, x->ndim, x, err)) return LRC_EUSER;
    int axis = (int)n->iattr[0];
    n->dtype = IN(0)->dtype;
    n->shape = *x;
    for (int k = 1; k < n->n_in; k++) {
        const lrc_shape *s = &IN(k)->shape;
        if (s->ndim != x->ndim)
            return lrc_err_set(err, "concat: input %d %s has %d axes, input 1 %s has %d", k + 1, lrc_shape_str(s, b1, sizeof b1), s->ndim,
                               lrc_shape_str(x, b2, sizeof b2), x->ndim);
        for (int d = 0; d < x->ndim; d++)
            if (d != axis && s->dim[d] != x->dim[d])
                return lrc_err_set(err, "concat: input %d %s has size %lld at axis %d, input 1 %s has %lld (only axis %d, the one joined, may differ)",
                                   k + 1, lrc_shape_str(s, b1, sizeof b1), (long long)s->dim[d], d, lrc_shape_str(x, b2, sizeof b2),
                                   (long long)x->dim[d], axis);
        if (IN(k)->dtype != n->dtype)
            return lrc_err_set(err, "concat: input %d is %s, input 1 %s", k + 1, lrc_dtype_name(IN(k)->dtype), lrc_dtype_name(n->dtype));
        n->shape.dim[axis] += s->dim[axis];
    }
    return LRC_OK;
}

/* x aligned right against the shape; -1 keeps x's size there */
int lrc_infer_expand(const lrc_graph *g, lrc_node *n, lrc_err *err)
{
    char b1[96], b2[96];
    const lrc_shape *x = &IN(0)->shape;
    if (want_float_in(g, n, 0, err)) return LRC_EUSER;
    if (n->n_iattr < x->ndim || n->n_iattr > LRC_MAX_DIMS)
        return lrc_err_set(err, "expand: the shape must have %d to %d axes (x is %s), got %d", x->ndim, LRC_MAX_DIMS,
                           lrc_shape_str(x, b1, sizeof b1), n->n_iattr);
    n->shape.ndim = n->n_iattr;
    int lead = n->n_iattr - x->ndim;
    for (int d = 0; d < n->n_iattr; d++) {
        int64_t want = n->iattr[d], have = d >= lead ? x->dim[d - lead] : 1;
        if (want == -1 && d >= lead) want = have;
        if (want <= 0)
            return lrc_err_set(err, "expand: size %lld at axis %d is not positive%s", (long long)want, d,
                               d < lead ? " (-1 keeps a size of x only where x has that axis)" : "");
        n->shape.dim[d] = want;
    }
    for (int d = lead; d < n->n_iattr; d++)
        if (x->dim[d - lead] != 1 && x->dim[d - lead] != n->shape.dim[d])
            return lrc_err_set(err, "expand: x %s cannot expand to %s: axis %d has size %lld, which must be 1 or %lld",
                               lrc_shape_str(x, b1, sizeof b1), lrc_shape_str(&n->shape, b2, sizeof b2), d,
                               (long long)x->dim[d - lead], (long long)n->shape.dim[d]);
    for (int d = 0; d < n->shape.ndim; d++) n->iattr[d] = n->shape.dim[d]; /* resolved: re-infers to itself */
    n->dtype = IN(0)->dtype;
    return LRC_OK;
}

/* x, y = amax(x, axis, keepdim), dy of y's shape -> x's shape */
int lrc_infer_amax_grad(const lrc_graph *g, lrc_node *n, lrc_err *err)
{
    const lrc_shape *x = &IN(0)->shape;
    if (want_axis(n, x->ndim, x, err)) return LRC_EUSER;
    lrc_shape y = *x;
    y.dim[n->iattr[0]] = 1;
    if (!lrc_shape_eq(&IN(1)->shape, &y) || !lrc_shape_eq(&IN(2)->shape, &y))
        return lrc_err_set(err, "amax_grad: y and dy must be x's shape with 1 at axis %lld", (long long)n->iattr[0]);
    n->dtype = IN(0)->dtype;
    n->shape = *x;
    return LRC_OK;
}

double lrc_flops_along(const lrc_graph *g, const lrc_node *n)
{
    double in = 0;
    for (int k = 0; k < n->n_in; k++) in += (double)lrc_shape_numel(&IN(k)->shape);
    return n->op == LRC_OP_LOGSUMEXP ? 4 * in : n->op == LRC_OP_CONCAT || n->op == LRC_OP_EXPAND ? 0 : in;
}

/* ---- gradient rules ------------------------------------------------------ */

static int add_node(lrc_graph *g, lrc_node *p, lrc_err *err) { return lrc_graph_add(g, p, err); }

/* node v (of a reduction's output shape) with its reduced axis kept as 1 */
static int keep_axis(lrc_graph *g, const lrc_node *n, int v, lrc_err *err)
{
    if (v < 0 || n->iattr[1]) return v;
    const lrc_shape *x = &g->nodes[n->in[0]].shape;
    lrc_node p = {.op = LRC_OP_RESHAPE, .n_in = 1, .in = {v}, .n_iattr = x->ndim};
    for (int d = 0; d < x->ndim; d++) p.iattr[d] = d == n->iattr[0] ? 1 : x->dim[d];
    return add_node(g, &p, err);
}

static int expand_to(lrc_graph *g, int v, const lrc_shape *to, lrc_err *err)
{
    if (v < 0 || lrc_shape_eq(&g->nodes[v].shape, to)) return v;
    lrc_node p = {.op = LRC_OP_EXPAND, .n_in = 1, .in = {v}, .n_iattr = to->ndim};
    for (int d = 0; d < to->ndim; d++) p.iattr[d] = to->dim[d];
    return add_node(g, &p, err);
}

static int binary(lrc_graph *g, lrc_op op, int a, int b, lrc_err *err)
{
    if (a < 0 || b < 0) return -1;
    lrc_node p = {.op = op, .n_in = 2, .in = {a, b}};
    return add_node(g, &p, err);
}

static int unary(lrc_graph *g, lrc_op op, int a, double s, lrc_err *err)
{
    if (a < 0) return -1;
    lrc_node p = {.op = op, .n_in = 1, .in = {a}, .fattr = {s}};
    return add_node(g, &p, err);
}

/* sum: dy spread back over the axis; mean: and divided by its length */
int lrc_grad_reduce(lrc_graph *g, int id, int dy, int *dx, lrc_err *err)
{
    lrc_node n = g->nodes[id];
    const lrc_shape x = g->nodes[n.in[0]].shape;
    int d = expand_to(g, keep_axis(g, &n, dy, err), &x, err);
    if (n.op == LRC_OP_MEAN) d = unary(g, LRC_OP_SCALE, d, 1.0 / (double)x.dim[n.iattr[0]], err);
    dx[0] = d;
    return d < 0 ? LRC_EUSER : LRC_OK;
}

/* amax: dy to the max elements, split evenly among ties (amax_grad) */
int lrc_grad_amax(lrc_graph *g, int id, int dy, int *dx, lrc_err *err)
{
    lrc_node n = g->nodes[id];
    int y = keep_axis(g, &n, id, err), d = keep_axis(g, &n, dy, err);
    lrc_node p = {.op = LRC_OP_AMAX_GRAD, .n_in = 3, .in = {n.in[0], y, d}, .iattr = {n.iattr[0]}};
    dx[0] = y < 0 || d < 0 ? -1 : add_node(g, &p, err);
    return dx[0] < 0 ? LRC_EUSER : LRC_OK;
}

/* logsumexp: dy exp(x - y), the softmax along the axis times dy */
int lrc_grad_logsumexp(lrc_graph *g, int id, int dy, int *dx, lrc_err *err)
{
    lrc_node n = g->nodes[id];
    const lrc_shape x = g->nodes[n.in[0]].shape;
    int y = expand_to(g, unary(g, LRC_OP_SCALE, keep_axis(g, &n, id, err), -1.0, err), &x, err);
    int p = unary(g, LRC_OP_EXP, binary(g, LRC_OP_ADD, n.in[0], y, err), 0, err);
    dx[0] = binary(g, LRC_OP_MUL, p, expand_to(g, keep_axis(g, &n, dy, err), &x, err), err);
    return dx[0] < 0 ? LRC_EUSER : LRC_OK;
}

/* cumsum's transpose is the cumsum the other way */
int lrc_grad_cumsum(lrc_graph *g, int id, int dy, int *dx, lrc_err *err)
{
    lrc_node n = g->nodes[id];
    lrc_node p = {.op = LRC_OP_CUMSUM, .n_in = 1, .in = {dy}, .iattr = {n.iattr[0], !n.iattr[1]}};
    dx[0] = add_node(g, &p, err);
    return dx[0] < 0 ? LRC_EUSER : LRC_OK;
}

/* concat: each input's part of dy, a slice */
int lrc_grad_concat(lrc_graph *g, int id, int dy, int *dx, lrc_err *err)
{
    lrc_node n = g->nodes[id];
    int64_t at = 0;
    for (int k = 0; k < n.n_in; k++) {
        int64_t size = g->nodes[n.in[k]].shape.dim[n.iattr[0]];
        lrc_node p = {.op = LRC_OP_SLICE, .n_in = 1, .in = {dy}, .iattr = {n.iattr[0], at, size}};
        if ((dx[k] = add_node(g, &p, err)) < 0) return LRC_EUSER;
        at += size;
    }
    return LRC_OK;
}

/* expand: dy summed over the axes the broadcast repeated */
int lrc_grad_expand(lrc_graph *g, int id, int dy, int *dx, lrc_err *err)
{
    lrc_node n = g->nodes[id];
    const lrc_shape x = g->nodes[n.in[0]].shape;
    lrc_node p = {.op = LRC_OP_SUM_TO, .n_in = 1, .in = {dy}, .n_iattr = x.ndim};
    for (int d = 0; d < x.ndim; d++) p.iattr[d] = x.dim[d];
    dx[0] = add_node(g, &p, err);
    return dx[0] < 0 ? LRC_EUSER : LRC_OK;
}
