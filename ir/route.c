/* route.c — the ops of a sparse mixture of experts (transformers' Mixtral
 * block): top-k selection, gathering the selected scores, and the matmul
 * that computes only the rows routed to one expert. Their shape rules,
 * FLOP counts, gradient rules and axes rule; the reference kernels are in
 * ref_route.c, the rows in ops.c. */
#include "ref_ops.h"
#include "topk_order.h"

#define IN(k) (&g->nodes[n->in[k]])

static int64_t last_of(const lrc_shape *s) { return s->ndim ? s->dim[s->ndim - 1] : 1; }

/* a and b agree on every axis but the last */
static bool same_leading(const lrc_shape *a, const lrc_shape *b)
{
    if (a->ndim != b->ndim || a->ndim < 1) return false;
    for (int d = 0; d < a->ndim - 1; d++)
        if (a->dim[d] != b->dim[d]) return false;
    return true;
}

static int want_ids(const lrc_graph *g, const lrc_node *n, int k, lrc_err *err)
{
    if (IN(k)->dtype != LRC_I32)
        return lrc_err_set(err, "%s: input %d (the ids) must be i32, got %s", lrc_op_name(n->op), k + 1, lrc_dtype_name(IN(k)->dtype));
    return LRC_OK;
}

static int want_values(const lrc_graph *g, const lrc_node *n, int k, lrc_err *err)
{
    if (IN(k)->dtype == LRC_I32)
        return lrc_err_set(err, "%s: input %d must be a floating-point tensor, got i32", lrc_op_name(n->op), k + 1);
    if (IN(k)->shape.ndim < 1) return lrc_err_set(err, "%s: input %d must have at least one axis", lrc_op_name(n->op), k + 1);
    return LRC_OK;
}

int lrc_infer_topk(const lrc_graph *g, lrc_node *n, lrc_err *err)
{
    if (want_values(g, n, 0, err)) return LRC_EUSER;
    int64_t E = last_of(&IN(0)->shape), k = n->iattr[0];
    if (k < 1 || k > E) return lrc_err_set(err, "topk: k must be in [1, %lld] (the last axis), got %lld", (long long)E, (long long)k);
    if (k > LRC_TOPK_MAX_SORTED && k * 64 > E)
        return lrc_err_set(err, "topk: k = %lld of %lld: lrc orders ties as torch.topk does for k <= %d or k * 64 <= n", (long long)k,
                           (long long)E, LRC_TOPK_MAX_SORTED);
    n->dtype = LRC_I32;
    n->shape = IN(0)->shape;
    n->shape.dim[n->shape.ndim - 1] = k;
    return LRC_OK;
}

int lrc_infer_gather(const lrc_graph *g, lrc_node *n, lrc_err *err)
{
    char b1[96], b2[96];
    if (want_values(g, n, 0, err) || want_ids(g, n, 1, err)) return LRC_EUSER;
    if (!same_leading(&IN(0)->shape, &IN(1)->shape))
        return lrc_err_set(err, "gather: x %s and ids %s must agree on every axis but the last", lrc_shape_str(&IN(0)->shape, b1, sizeof b1),
                           lrc_shape_str(&IN(1)->shape, b2, sizeof b2));
    n->dtype = IN(0)->dtype;
    n->shape = IN(1)->shape;
    return LRC_OK;
}

int lrc_infer_gather_grad(const lrc_graph *g, lrc_node *n, lrc_err *err)
{
    if (want_ids(g, n, 0, err) || want_values(g, n, 1, err)) return LRC_EUSER;
    if (!lrc_shape_eq(&IN(0)->shape, &IN(1)->shape)) return lrc_err_set(err, "gather_grad: ids and dy must have the same shape");
    if (n->iattr[0] < 1) return lrc_err_set(err, "gather_grad: n (the gathered axis' length) must be positive");
    n->dtype = IN(1)->dtype;
    n->shape = IN(0)->shape;
    n->shape.dim[n->shape.ndim - 1] = n->iattr[0];
    return LRC_OK;
}

/* x[..., S or 1, K] against ids[..., S]: the rows' axes and the slot axis */
static int routed_rows(const lrc_graph *g, const lrc_node *n, int k, const lrc_shape *ids, lrc_err *err)
{
    char b1[96], b2[96];
    const lrc_shape *x = &IN(k)->shape;
    bool ok = x->ndim == ids->ndim + 1;
    for (int d = 0; ok && d < ids->ndim; d++) ok = x->dim[d] == ids->dim[d] || (d == ids->ndim - 1 && x->dim[d] == 1);
    if (!ok)
        return lrc_err_set(err, "%s: input %d %s must be the ids' shape %s (the slot axis may be 1) and one more axis", lrc_op_name(n->op),
                           k + 1, lrc_shape_str(x, b1, sizeof b1), lrc_shape_str(ids, b2, sizeof b2));
    return LRC_OK;
}

static int check_expert(const lrc_node *n, lrc_err *err)
{
    if (n->iattr[1] < 1 || n->iattr[0] < 0 || n->iattr[0] >= n->iattr[1])
        return lrc_err_set(err, "%s: expert must be in [0, experts), got %lld of %lld", lrc_op_name(n->op), (long long)n->iattr[0],
                           (long long)n->iattr[1]);
    return LRC_OK;
}

int lrc_infer_expert_matmul(const lrc_graph *g, lrc_node *n, lrc_err *err)
{
    char b1[96], b2[96];
    if (want_values(g, n, 0, err) || want_values(g, n, 1, err) || want_ids(g, n, 2, err) || check_expert(n, err)) return LRC_EUSER;
    const lrc_shape *x = &IN(0)->shape, *w = &IN(1)->shape, *ids = &IN(2)->shape;
    if (ids->ndim < 1) return lrc_err_set(err, "expert_matmul: ids need an axis");
    if (routed_rows(g, n, 0, ids, err)) return LRC_EUSER;
    bool nn = n->iattr[2] != 0;
    if (w->ndim != 2 || w->dim[nn ? 0 : 1] != last_of(x))
        return lrc_err_set(err, "expert_matmul: x %s has %lld features but the weight %s %s expects %lld", lrc_shape_str(x, b1, sizeof b1),
                           (long long)last_of(x), lrc_shape_str(w, b2, sizeof b2), nn ? "[in, out] (nn)" : "[out, in]",
                           w->ndim == 2 ? (long long)w->dim[nn ? 0 : 1] : -1LL);
    n->dtype = IN(0)->dtype;
    n->shape = *ids;
    n->shape.dim[n->shape.ndim++] = w->dim[nn ? 1 : 0];
    return LRC_OK;
}

int lrc_infer_expert_matmul_tn(const lrc_graph *g, lrc_node *n, lrc_err *err)
{
    if (want_values(g, n, 0, err) || want_values(g, n, 1, err) || want_ids(g, n, 2, err) || check_expert(n, err)) return LRC_EUSER;
    const lrc_shape *ids = &IN(2)->shape;
    if (ids->ndim < 1) return lrc_err_set(err, "expert_matmul_tn: ids need an axis");
    if (routed_rows(g, n, 0, ids, err) || routed_rows(g, n, 1, ids, err)) return LRC_EUSER;
    n->dtype = IN(0)->dtype;
    n->shape = (lrc_shape){2, {last_of(&IN(0)->shape), last_of(&IN(1)->shape)}};
    return LRC_OK;
}

/* introselect's comparisons: a few per entry of each row */
double lrc_flops_topk(const lrc_graph *g, const lrc_node *n)
{
    double E = (double)last_of(&IN(0)->shape), rows = (double)lrc_shape_numel(&IN(0)->shape) / E;
    return rows * E * 4;
}

/* the rows routed here: an even share of the slots, 1 / experts of them */
double lrc_flops_expert_matmul(const lrc_graph *g, const lrc_node *n)
{
    return 2.0 * (double)lrc_shape_numel(&n->shape) * (double)last_of(&IN(0)->shape) / (double)n->iattr[1];
}

double lrc_flops_expert_matmul_tn(const lrc_graph *g, const lrc_node *n)
{
    return 2.0 * (double)lrc_shape_numel(&IN(2)->shape) * (double)lrc_shape_numel(&n->shape) / (double)n->iattr[1];
}

/* ---- gradient rules ------------------------------------------------------ */

#define NODE lrc_node n = g->nodes[id] /* a copy: adding nodes moves the array */

/* the scores gathered flow back to the entries they came from */
int lrc_grad_gather(lrc_graph *g, int id, int dy, int *dx, lrc_err *err)
{
    NODE;
    lrc_node p = {.op = LRC_OP_GATHER_GRAD, .n_in = 2, .in = {n.in[1], dy}, .iattr = {last_of(&g->nodes[n.in[0]].shape)}};
    dx[0] = lrc_graph_add(g, &p, err);
    return dx[0] < 0 ? LRC_EUSER : LRC_OK;
}

/* y = x W^T on the routed rows: dx = dy W there (nn), dW = dy^T x over them;
 * with nn the roles of W's axes swap. A slot axis of 1 in x was broadcast
 * over the slots: its gradient is summed back. */
int lrc_grad_expert_matmul(lrc_graph *g, int id, int dy, int *dx, lrc_err *err)
{
    NODE;
    bool nn = n.iattr[2] != 0;
    lrc_node p = {.op = LRC_OP_EXPERT_MATMUL, .n_in = 3, .in = {dy, n.in[1], n.in[2]}, .iattr = {n.iattr[0], n.iattr[1], !nn}};
    int full = lrc_graph_add(g, &p, err);
    dx[0] = full;
    const lrc_shape xs = g->nodes[n.in[0]].shape;
    if (full >= 0 && !lrc_shape_eq(&g->nodes[full].shape, &xs)) {
        lrc_node s = {.op = LRC_OP_SUM_TO, .n_in = 1, .in = {full}, .n_iattr = xs.ndim};
        for (int i = 0; i < xs.ndim; i++) s.iattr[i] = xs.dim[i];
        dx[0] = lrc_graph_add(g, &s, err);
    }
    lrc_node t = {.op = LRC_OP_EXPERT_MATMUL_TN, .n_in = 3, .in = {nn ? n.in[0] : dy, nn ? dy : n.in[0], n.in[2]},
                  .iattr = {n.iattr[0], n.iattr[1]}};
    dx[1] = dx[0] < 0 ? -1 : lrc_graph_add(g, &t, err);
    return dx[0] < 0 || dx[1] < 0 ? LRC_EUSER : LRC_OK;
}
