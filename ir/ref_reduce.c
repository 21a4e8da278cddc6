/* ref_reduce.c — reference kernels of the ops along one axis (reduce.c):
 * sum, mean, amax, logsumexp, cumsum, scan, concat, expand and amax's
 * gradient.
 * Each walks its input as [outer, len, inner] about the axis, in f64;
 * compiled at both storage precisions like ref_ops.c (ref_reduce64.c). */
#include "ref_template.h"

/* sum, mean, amax, logsumexp (the node's op says which) */
int REF(reduce)(const lrc_graph *g, const lrc_node *n, void *const *in, void *out, lrc_err *err)
{
    (void)err;
    int64_t outer, len, inner;
    lrc_axis_split(SHAPE(0), (int)n->iattr[0], &outer, &len, &inner);
    const real *x = F(0);
    real *y = out;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            const real *p = x + o * len * inner + i;
            double m = p[0], s = 0;
            for (int64_t r = 1; r < len; r++)
                if (p[r * inner] > m) m = p[r * inner];
            if (n->op == LRC_OP_AMAX) s = m;
            else if (n->op == LRC_OP_LOGSUMEXP) {
                for (int64_t r = 0; r < len; r++) s += exp(p[r * inner] - m);
                s = m + log(s);
            } else {
                for (int64_t r = 0; r < len; r++) s += p[r * inner];
                if (n->op == LRC_OP_MEAN) s /= (double)len;
            }
            y[o * inner + i] = (real)s;
        }
    return LRC_OK;
}

int REF(cumsum)(const lrc_graph *g, const lrc_node *n, void *const *in, void *out, lrc_err *err)
{
    (void)err;
    int64_t outer, len, inner;
    lrc_axis_split(SHAPE(0), (int)n->iattr[0], &outer, &len, &inner);
    bool rev = n->iattr[1] != 0;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            double s = 0;
            for (int64_t j = 0; j < len; j++) {
                int64_t at = (o * len + (rev ? len - 1 - j : j)) * inner + i;
                s += F(0)[at];
                ((real *)out)[at] = (real)s;
            }
        }
    return LRC_OK;
}

/* h_t = a_t h_{t-1} + b_t, each step in f64 from h as stored (so every
 * target, which keeps h in its output, rounds where this does) */
int REF(scan)(const lrc_graph *g, const lrc_node *n, void *const *in, void *out, lrc_err *err)
{
    (void)err;
    int64_t outer, len, inner;
    lrc_axis_split(SHAPE(0), (int)n->iattr[0], &outer, &len, &inner);
    bool rev = n->iattr[1] != 0;
    real *h = out;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            real prev = n->n_in == 3 ? F(2)[o * inner + i] : 0;
            for (int64_t j = 0; j < len; j++) {
                int64_t at = (o * len + (rev ? len - 1 - j : j)) * inner + i;
                prev = h[at] = (real)((double)F(0)[at] * (double)prev + (double)F(1)[at]);
            }
        }
    return LRC_OK;
}

/* each input's rows of its length along the axis, one after another */
int REF(concat)(const lrc_graph *g, const lrc_node *n, void *const *in, void *out, lrc_err *err)
{
    (void)err;
    int axis = (int)n->iattr[0];
    int64_t outer, total, inner, at = 0;
    lrc_axis_split(&n->shape, axis, &outer, &total, &inner);
    for (int k = 0; k < n->n_in; k++) {
        int64_t len = SHAPE(k)->dim[axis];
        for (int64_t o = 0; o < outer; o++)
            memcpy((real *)out + (o * total + at) * inner, F(k) + o * len * inner, (size_t)(len * inner) * sizeof(real));
        at += len;
    }
    return LRC_OK;
}

/* out[i] = x at i's index with 0 on the axes x has as 1 (or lacks) */
int REF(expand)(const lrc_graph *g, const lrc_node *n, void *const *in, void *out, lrc_err *err)
{
    (void)err;
    const lrc_shape *x = SHAPE(0), *o = &n->shape;
    int64_t stride[LRC_MAX_DIMS] = {0}, s = 1, count = lrc_shape_numel(o);
    for (int d = x->ndim - 1; d >= 0; d--) {
        stride[d + o->ndim - x->ndim] = x->dim[d] == 1 ? 0 : s;
        s *= x->dim[d];
    }
    for (int64_t i = 0; i < count; i++) {
        int64_t rest = i, src = 0;
        for (int d = o->ndim - 1; d >= 0; d--) {
            src += (rest % o->dim[d]) * stride[d];
            rest /= o->dim[d];
        }
        ((real *)out)[i] = F(0)[src];
    }
    return LRC_OK;
}

/* dy / (the count of maxima) where x is the max, else 0 */
int REF(amax_grad)(const lrc_graph *g, const lrc_node *n, void *const *in, void *out, lrc_err *err)
{
    (void)err;
    int64_t outer, len, inner;
    lrc_axis_split(SHAPE(0), (int)n->iattr[0], &outer, &len, &inner);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            const real *x = F(0) + o * len * inner + i, m = F(1)[o * inner + i];
            int64_t ties = 0;
            for (int64_t r = 0; r < len; r++) ties += x[r * inner] == m;
            double share = ties ? (double)F(2)[o * inner + i] / (double)ties : 0;
            for (int64_t r = 0; r < len; r++) ((real *)out)[(o * len + r) * inner + i] = x[r * inner] == m ? (real)share : 0;
        }
    return LRC_OK;
}
