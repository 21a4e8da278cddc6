/* bmm.c — the shape rule, FLOPs, batch strides and gradient rule of bmm,
 * the batched product of two activations: a [..., M, K] x b [..., K, N]
 * -> [..., M, N], the batch axes (all but the last two) broadcast as numpy
 * broadcasts them (torch.matmul's rule for operands of two axes or more).
 * Its reference kernel is in ref_ops.c beside matmul's. */
#include "ref_ops.h"

#define IN(k) (&g->nodes[n->in[k]])

int lrc_infer_bmm(const lrc_graph *g, lrc_node *n, lrc_err *err)
{
    char b1[96], b2[96];
    const lrc_shape *a = &IN(0)->shape, *b = &IN(1)->shape;
    for (int k = 0; k < 2; k++)
        if (IN(k)->dtype == LRC_I32) return lrc_err_set(err, "bmm: input %d must be a floating-point tensor, got i32", k + 1);
    if (IN(0)->dtype != IN(1)->dtype)
        return lrc_err_set(err, "bmm: dtypes differ (%s and %s)", lrc_dtype_name(IN(0)->dtype), lrc_dtype_name(IN(1)->dtype));
    if (a->ndim < 2 || b->ndim < 2)
        return lrc_err_set(err, "bmm: a %s and b %s must have two axes or more ([..., M, K] and [..., K, N])", lrc_shape_str(a, b1, sizeof b1),
                           lrc_shape_str(b, b2, sizeof b2));
    if (a->dim[a->ndim - 1] != b->dim[b->ndim - 2])
        return lrc_err_set(err, "bmm: a %s has K = %lld but b %s has %lld rows ([..., M, K] x [..., K, N])", lrc_shape_str(a, b1, sizeof b1),
                           (long long)a->dim[a->ndim - 1], lrc_shape_str(b, b2, sizeof b2), (long long)b->dim[b->ndim - 2]);
    int nd = a->ndim > b->ndim ? a->ndim : b->ndim;
    n->shape.ndim = nd;
    for (int i = 0; i < nd - 2; i++) {
        int ia = a->ndim - nd + i, ib = b->ndim - nd + i;
        int64_t da = ia >= 0 ? a->dim[ia] : 1, db = ib >= 0 ? b->dim[ib] : 1;
        if (da != db && da != 1 && db != 1)
            return lrc_err_set(err, "bmm: the batch axes of a %s and b %s do not broadcast (axis %d: %lld and %lld)", lrc_shape_str(a, b1, sizeof b1),
                               lrc_shape_str(b, b2, sizeof b2), i, (long long)da, (long long)db);
        n->shape.dim[i] = da == 1 ? db : da;
    }
    n->shape.dim[nd - 2] = a->dim[a->ndim - 2];
    n->shape.dim[nd - 1] = b->dim[b->ndim - 1];
    n->dtype = IN(0)->dtype;
    return LRC_OK;
}

double lrc_flops_bmm(const lrc_graph *g, const lrc_node *n)
{
    return 2.0 * (double)lrc_shape_numel(&n->shape) * (double)IN(0)->shape.dim[IN(0)->shape.ndim - 1];
}

void lrc_bmm_strides(const lrc_shape *a, const lrc_shape *b, const lrc_shape *out, int64_t *sa, int64_t *sb)
{
    int nb = out->ndim - 2;
    int64_t ta = 1, tb = 1;
    for (int d = nb - 1; d >= 0; d--) {
        int ia = a->ndim - out->ndim + d, ib = b->ndim - out->ndim + d;
        int64_t da = ia >= 0 ? a->dim[ia] : 1, db = ib >= 0 ? b->dim[ib] : 1;
        sa[d] = da == 1 ? 0 : ta;
        sb[d] = db == 1 ? 0 : tb;
        ta *= da, tb *= db;
    }
}

static int add_node(lrc_graph *g, lrc_node p, lrc_err *err) { return lrc_graph_add(g, &p, err); }

/* v with its last two axes swapped */
static int swap_last(lrc_graph *g, int v, lrc_err *err)
{
    int nd = g->nodes[v].shape.ndim;
    lrc_node p = {.op = LRC_OP_TRANSPOSE, .n_in = 1, .in = {v}, .n_iattr = nd};
    for (int d = 0; d < nd; d++) p.iattr[d] = d;
    p.iattr[nd - 2] = nd - 1, p.iattr[nd - 1] = nd - 2;
    return add_node(g, p, err);
}

/* v summed down to shape s where a batch axis was broadcast */
static int sum_down(lrc_graph *g, int v, const lrc_shape *s, lrc_err *err)
{
    if (v < 0 || lrc_shape_eq(&g->nodes[v].shape, s)) return v;
    lrc_node p = {.op = LRC_OP_SUM_TO, .n_in = 1, .in = {v}, .n_iattr = s->ndim};
    for (int d = 0; d < s->ndim; d++) p.iattr[d] = s->dim[d];
    return add_node(g, p, err);
}

/* da = dy b^T and db = a^T dy, each a bmm, summed over the batch axes its
 * operand was broadcast along */
int lrc_grad_bmm(lrc_graph *g, int id, int dy, int *dx, lrc_err *err)
{
    lrc_node n = g->nodes[id];
    lrc_shape as = g->nodes[n.in[0]].shape, bs = g->nodes[n.in[1]].shape;
    int bt = swap_last(g, n.in[1], err);
    int da = bt < 0 ? -1 : add_node(g, (lrc_node){.op = LRC_OP_BMM, .n_in = 2, .in = {dy, bt}}, err);
    dx[0] = sum_down(g, da, &as, err);
    int at = dx[0] < 0 ? -1 : swap_last(g, n.in[0], err);
    int db = at < 0 ? -1 : add_node(g, (lrc_node){.op = LRC_OP_BMM, .n_in = 2, .in = {at, dy}}, err);
    dx[1] = sum_down(g, db, &bs, err);
    return dx[0] < 0 || dx[1] < 0 ? LRC_EUSER : LRC_OK;
}
