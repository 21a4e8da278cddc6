/* ref_route.c — reference kernels of the routing ops (route.c): top-k in
 * torch.topk's order, gather and its gradient, and the matmul of the rows
 * routed to one expert. Plain C, f64 sums, compiled at both storage
 * precisions like ref_ops.c (ref_route64.c). */
#include "ref_template.h"
#include "topk_order.h"

#ifdef LRC_REF_F64
#define TOPK_FN static inline
LRC_TOPK_ALGORITHM(TOPK_FN, double)
#else
#define TOPK_FN static inline
LRC_TOPK_ALGORITHM(TOPK_FN, float)
#endif

int REF(topk)(const lrc_graph *g, const lrc_node *n, void *const *in, void *out, lrc_err *err)
{
    (void)err;
    int64_t E = last_dim(SHAPE(0)), rows = lrc_shape_numel(SHAPE(0)) / E, k = n->iattr[0];
    real *v = lrc_malloc((size_t)E * sizeof *v);
    int *ix = lrc_malloc((size_t)E * sizeof *ix);
    if (!v || !ix) {
        free(v), free(ix);
        return lrc_err_nomem(err, "for %s's scratch in the reference kernels", lrc_op_name(n->op));
    }
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t j = 0; j < E; j++) v[j] = F(0)[r * E + j], ix[j] = (int)j;
        lrc_topk_order(v, ix, (long)E, (long)k);
        for (int64_t j = 0; j < k; j++) ((int32_t *)out)[r * k + j] = ix[j];
    }
    free(v);
    free(ix);
    return LRC_OK;
}

/* the ids' row r against [0, E): a bad id names where it is */
static int check_ids(const lrc_node *n, const int32_t *ids, int64_t count, int64_t E, lrc_err *err)
{
    for (int64_t i = 0; i < count; i++)
        if (ids[i] < 0 || ids[i] >= E)
            return lrc_err_set(err, "%s: ids[%lld] = %d is outside [0, %lld)", lrc_op_name(n->op), (long long)i, ids[i], (long long)E);
    return LRC_OK;
}

int REF(gather)(const lrc_graph *g, const lrc_node *n, void *const *in, void *out, lrc_err *err)
{
    int64_t E = last_dim(SHAPE(0)), k = last_dim(SHAPE(1)), count = lrc_shape_numel(SHAPE(1));
    if (check_ids(n, I(1), count, E, err)) return LRC_EUSER;
    for (int64_t i = 0; i < count; i++) ((real *)out)[i] = F(0)[(i / k) * E + I(1)[i]];
    return LRC_OK;
}

int REF(gather_grad)(const lrc_graph *g, const lrc_node *n, void *const *in, void *out, lrc_err *err)
{
    int64_t E = n->iattr[0], k = last_dim(SHAPE(0)), count = lrc_shape_numel(SHAPE(0)), total = lrc_shape_numel(&n->shape);
    if (check_ids(n, I(0), count, E, err)) return LRC_EUSER;
    double *acc = lrc_calloc((size_t)total, sizeof(double));
    if (!acc) return lrc_err_nomem(err, "for %s's scratch in the reference kernels", lrc_op_name(n->op));
    for (int64_t i = 0; i < count; i++) acc[(i / k) * E + I(0)[i]] += F(1)[i];
    for (int64_t i = 0; i < total; i++) ((real *)out)[i] = (real)acc[i];
    free(acc);
    return LRC_OK;
}

/* The row of input k (x[..., S|1, K]) that slot row r of the ids reads. */
static int64_t routed_row(const lrc_graph *g, const lrc_node *n, int k, int64_t r)
{
    int64_t S = last_dim(SHAPE(2)), xs = SHAPE(k)->dim[SHAPE(k)->ndim - 2];
    return xs == S ? r : r / S;
}

int REF(expert_matmul)(const lrc_graph *g, const lrc_node *n, void *const *in, void *out, lrc_err *err)
{
    (void)err;
    bool nn = n->iattr[2] != 0;
    int64_t rows = lrc_shape_numel(SHAPE(2)), K = last_dim(SHAPE(0)), N = last_dim(&n->shape);
    for (int64_t r = 0; r < rows; r++) {
        real *o = (real *)out + r * N;
        if (I(2)[r] != n->iattr[0]) {
            for (int64_t j = 0; j < N; j++) o[j] = 0;
            continue;
        }
        const real *x = F(0) + routed_row(g, n, 0, r) * K;
        for (int64_t j = 0; j < N; j++) {
            double acc = 0;
            for (int64_t i = 0; i < K; i++) acc += (double)x[i] * (nn ? F(1)[i * N + j] : F(1)[j * K + i]);
            o[j] = (real)acc;
        }
    }
    return LRC_OK;
}

int REF(expert_matmul_tn)(const lrc_graph *g, const lrc_node *n, void *const *in, void *out, lrc_err *err)
{
    (void)err;
    int64_t rows = lrc_shape_numel(SHAPE(2)), N = n->shape.dim[0], K = n->shape.dim[1];
    double *acc = lrc_calloc((size_t)(N * K), sizeof(double));
    if (!acc) return lrc_err_nomem(err, "for %s's scratch in the reference kernels", lrc_op_name(n->op));
    for (int64_t r = 0; r < rows; r++) {
        if (I(2)[r] != n->iattr[0]) continue;
        const real *a = F(0) + routed_row(g, n, 0, r) * N, *b = F(1) + routed_row(g, n, 1, r) * K;
        for (int64_t j = 0; j < N; j++)
            for (int64_t i = 0; i < K; i++) acc[j * K + i] += (double)a[j] * b[i];
    }
    for (int64_t i = 0; i < N * K; i++) ((real *)out)[i] = (real)acc[i];
    free(acc);
    return LRC_OK;
}
