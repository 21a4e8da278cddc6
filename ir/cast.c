/* cast.c — the shape rules of cast (between i32 and f32) and arange (the
 * i32 vector 0..n-1). Their reference kernels are in ref_ops.c. */
#include "ref_ops.h"

#define IN(k) (&g->nodes[n->in[k]])

/* x -> x's shape as `to` (iattr[0], an lrc_dtype: LRC_F32 or LRC_I32),
 * from the other of the two */
int lrc_infer_cast(const lrc_graph *g, lrc_node *n, lrc_err *err)
{
    int64_t to = n->iattr[0];
    if (to != LRC_F32 && to != LRC_I32)
        return lrc_err_set(err, "cast: to must be %d (f32) or %d (i32), got %lld", LRC_F32, LRC_I32, (long long)to);
    lrc_dtype from = IN(0)->dtype;
    if (from != LRC_F32 && from != LRC_I32) return lrc_err_set(err, "cast: x must be f32 or i32, got %s", lrc_dtype_name(from));
    if ((int64_t)from == to) return lrc_err_set(err, "cast: x is %s already", lrc_dtype_name(from));
    n->dtype = (lrc_dtype)to;
    n->shape = IN(0)->shape;
    return LRC_OK;
}

/* no inputs -> i32 [n]: 0, 1, ..., n - 1 */
int lrc_infer_arange(const lrc_graph *g, lrc_node *n, lrc_err *err)
{
    (void)g;
    if (n->iattr[0] <= 0 || n->iattr[0] > INT32_MAX)
        return lrc_err_set(err, "arange: n must be from 1 to 2^31 - 1, got %lld", (long long)n->iattr[0]);
    n->dtype = LRC_I32;
    n->shape = (lrc_shape){1, {n->iattr[0]}};
    return LRC_OK;
}
