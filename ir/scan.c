/* scan.c — the shape rule, FLOPs and gradient rule of scan, the linear
 * recurrence h_t = a_t h_{t-1} + b_t along `axis` (iattr[0]), from the end
 * with `reverse` (iattr[1]); h_{-1} = init (input 3, a's shape without the
 * axis) or 0. Its reference kernel is in ref_reduce.c beside cumsum's (a
 * scan with a = 1). */
#include "ref_ops.h"

#define IN(k) (&g->nodes[n->in[k]])

/* a, b of one shape, init (if any) that shape without the axis */
int lrc_infer_scan(const lrc_graph *g, lrc_node *n, lrc_err *err)
{
    char b1[96], b2[96], b3[96];
    if (n->n_in < 2 || n->n_in > 3) return lrc_err_set(err, "scan: expects 2 or 3 inputs (a, b, init), got %d", n->n_in);
    for (int k = 0; k < n->n_in; k++)
        if (IN(k)->dtype == LRC_I32) return lrc_err_set(err, "scan: input %d must be a floating-point tensor, got i32", k + 1);
    const lrc_shape *a = &IN(0)->shape, *b = &IN(1)->shape;
    if (!lrc_shape_eq(a, b))
        return lrc_err_set(err, "scan: a %s and b %s must have one shape", lrc_shape_str(a, b1, sizeof b1), lrc_shape_str(b, b2, sizeof b2));
    int64_t axis = n->iattr[0];
    if (a->ndim < 1) return lrc_err_set(err, "scan: a is a scalar %s, which has no axis", lrc_shape_str(a, b1, sizeof b1));
    if (axis < -a->ndim || axis >= a->ndim)
        return lrc_err_set(err, "scan: axis %lld is not an axis of %s (%d to %d)", (long long)axis, lrc_shape_str(a, b1, sizeof b1), -a->ndim,
                           a->ndim - 1);
    if (n->iattr[1] != 0 && n->iattr[1] != 1) return lrc_err_set(err, "scan: reverse must be true or false, got %lld", (long long)n->iattr[1]);
    n->iattr[0] = axis < 0 ? axis + a->ndim : axis;
    if (n->n_in == 3) {
        lrc_shape want = *a;
        for (int d = (int)n->iattr[0]; d + 1 < a->ndim; d++) want.dim[d] = a->dim[d + 1];
        want.dim[--want.ndim] = 0;
        if (!lrc_shape_eq(&IN(2)->shape, &want))
            return lrc_err_set(err, "scan: init %s must be a %s without axis %lld, %s", lrc_shape_str(&IN(2)->shape, b1, sizeof b1),
                               lrc_shape_str(a, b2, sizeof b2), (long long)n->iattr[0], lrc_shape_str(&want, b3, sizeof b3));
    }
    n->dtype = IN(0)->dtype;
    n->shape = *a;
    return LRC_OK;
}

double lrc_flops_scan(const lrc_graph *g, const lrc_node *n)
{
    (void)g;
    return 2.0 * (double)lrc_shape_numel(&n->shape);
}

static int add_node(lrc_graph *g, lrc_node p, lrc_err *err) { return lrc_graph_add(g, &p, err); }

/* v along axis: out[t] = v[t + start] where inside, else 0 (length len);
 * zeros as v * 0 where that is nowhere (a shift by one of a length-1 axis,
 * which slice refuses) */
static int shift(lrc_graph *g, int v, int axis, int64_t start, int64_t len, lrc_err *err)
{
    if (v < 0) return -1;
    if (start >= g->nodes[v].shape.dim[axis] || start + len <= 0)
        return add_node(g, (lrc_node){.op = LRC_OP_SCALE, .n_in = 1, .in = {v}, .fattr = {0.0}}, err);
    return add_node(g, (lrc_node){.op = LRC_OP_SLICE, .n_in = 1, .in = {v}, .iattr = {axis, start, len}}, err);
}

static int binary(lrc_graph *g, lrc_op op, int x, int y, lrc_err *err)
{
    if (x < 0 || y < 0) return -1;
    return add_node(g, (lrc_node){.op = op, .n_in = 2, .in = {x, y}}, err);
}

/* v viewed as the shape s (the same elements) */
static int view(lrc_graph *g, int v, const lrc_shape *s, lrc_err *err)
{
    if (v < 0) return -1;
    lrc_node p = {.op = LRC_OP_RESHAPE, .n_in = 1, .in = {v}, .n_iattr = s->ndim};
    for (int d = 0; d < s->ndim; d++) p.iattr[d] = s->dim[d];
    return add_node(g, p, err);
}

/* The transpose of the recurrence is the scan the other way, with a one
 * step later (s = +1 forwards, -1 in reverse): c_t = g_t + a_{t+s} c_{t+s};
 * then db = c, da_t = c_t h_{t-s} (h before the first step: init or 0),
 * dinit = a c at the first step. Ops only, so it runs on every target. */
int lrc_grad_scan(lrc_graph *g, int id, int dy, int *dx, lrc_err *err)
{
    lrc_node n = g->nodes[id];
    const lrc_shape x = n.shape;
    int axis = (int)n.iattr[0], rev = (int)n.iattr[1], s = rev ? -1 : 1;
    int64_t T = x.dim[axis], first = rev ? T - 1 : 0;
    int a_next = shift(g, n.in[0], axis, s, T, err);
    int c = a_next < 0 ? -1 : add_node(g, (lrc_node){.op = LRC_OP_SCAN, .n_in = 2, .in = {a_next, dy}, .iattr = {axis, !rev}}, err);
    int h_prev = shift(g, id, axis, -s, T, err);
    if (n.n_in == 3) { /* init at the first step, zeros elsewhere */
        lrc_shape kept = x;
        kept.dim[axis] = 1;
        h_prev = binary(g, LRC_OP_ADD, h_prev, shift(g, view(g, n.in[2], &kept, err), axis, -first, T, err), err);
    }
    dx[0] = binary(g, LRC_OP_MUL, c, h_prev, err);
    dx[1] = c;
    if (n.n_in == 3) dx[2] = view(g, shift(g, binary(g, LRC_OP_MUL, n.in[0], c, err), axis, first, 1, err), &g->nodes[n.in[2]].shape, err);
    return dx[0] < 0 || c < 0 || (n.n_in == 3 && dx[2] < 0) ? LRC_EUSER : LRC_OK;
}
