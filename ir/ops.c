/* ops.c — the op table: one row per op with its inputs, attributes, shape
 * rule, fusion class, FLOP count, reference kernels, gradient rule and byte
 * rule (docs/architecture.md, rule 1). */
#include "lrc_ir.h"
#include "lrc_ew.h"
#include "ref_ops.h"

#include <math.h>
#include <string.h>

#define IN(k) (&g->nodes[n->in[k]])

static double numel_of(const lrc_node *n);
static double flops_attention(const lrc_graph *g, const lrc_node *n);

static int want_float(const lrc_graph *g, const lrc_node *n, int k, lrc_err *err)
{
    lrc_dtype t = IN(k)->dtype;
    if (t == LRC_I32)
        return lrc_err_set(err, "%s: input %d must be a floating-point tensor, got %s",
                           lrc_op_table[n->op].name, k + 1, lrc_dtype_name(t));
    return LRC_OK;
}

static int want_rank(const lrc_graph *g, const lrc_node *n, int k, int rank, lrc_err *err)
{
    char b[96];
    if (IN(k)->shape.ndim != rank)
        return lrc_err_set(err, "%s: input %d must have %d axes, got shape %s",
                           lrc_op_table[n->op].name, k + 1, rank,
                           lrc_shape_str(&IN(k)->shape, b, sizeof b));
    return LRC_OK;
}

static int want_scalar(const lrc_graph *g, const lrc_node *n, int k, lrc_err *err)
{
    char b[96];
    if (lrc_shape_numel(&IN(k)->shape) != 1 || IN(k)->dtype == LRC_I32)
        return lrc_err_set(err, "%s: input %d must be a floating-point scalar, got %s %s",
                           lrc_op_table[n->op].name, k + 1, lrc_dtype_name(IN(k)->dtype),
                           lrc_shape_str(&IN(k)->shape, b, sizeof b));
    return LRC_OK;
}

static int infer_source(const lrc_graph *g, lrc_node *n, lrc_err *err)
{
    (void)g;
    char b[96];
    for (int i = 0; i < n->shape.ndim; i++)
        if (n->shape.dim[i] <= 0)
            return lrc_err_set(err, "%s '%s': sizes must be positive, got shape %s",
                               n->op == LRC_OP_PARAM ? "parameter" : n->op == LRC_OP_STATE ? "state" : "input",
                               n->name ? n->name : "?", lrc_shape_str(&n->shape, b, sizeof b));
    return LRC_OK;
}

static int infer_same(const lrc_graph *g, lrc_node *n, lrc_err *err)
{
    if (want_float(g, n, 0, err)) return LRC_EUSER;
    n->dtype = IN(0)->dtype;
    n->shape = IN(0)->shape;
    return LRC_OK;
}

static int infer_embedding(const lrc_graph *g, lrc_node *n, lrc_err *err)
{
    char b[96];
    if (IN(0)->dtype != LRC_I32)
        return lrc_err_set(err, "embedding: ids must be i32, got %s", lrc_dtype_name(IN(0)->dtype));
    if (want_float(g, n, 1, err) || want_rank(g, n, 1, 2, err)) return LRC_EUSER;
    if (IN(0)->shape.ndim + 1 > LRC_MAX_DIMS)
        return lrc_err_set(err, "embedding: ids %s have too many axes",
                           lrc_shape_str(&IN(0)->shape, b, sizeof b));
    n->dtype = IN(1)->dtype;
    n->shape = IN(0)->shape;
    n->shape.dim[n->shape.ndim++] = IN(1)->shape.dim[1];
    return LRC_OK;
}

static int infer_matmul(const lrc_graph *g, lrc_node *n, lrc_err *err)
{
    char b1[96], b2[96];
    if (want_float(g, n, 0, err) || want_float(g, n, 1, err) || want_rank(g, n, 1, 2, err))
        return LRC_EUSER;
    const lrc_shape *x = &IN(0)->shape, *w = &IN(1)->shape;
    if (x->ndim < 1 || x->dim[x->ndim - 1] != w->dim[1])
        return lrc_err_set(err, "matmul: x %s has %lld features but the weight %s [out, in] expects %lld",
                           lrc_shape_str(x, b1, sizeof b1),
                           x->ndim ? (long long)x->dim[x->ndim - 1] : 0LL,
                           lrc_shape_str(w, b2, sizeof b2), (long long)w->dim[1]);
    n->dtype = IN(0)->dtype;
    n->shape = *x;
    n->shape.dim[x->ndim - 1] = w->dim[0];
    return LRC_OK;
}

static int infer_rmsnorm(const lrc_graph *g, lrc_node *n, lrc_err *err)
{
    if (infer_same(g, n, err)) return LRC_EUSER;
    if (n->shape.ndim < 1) return lrc_err_set(err, "rmsnorm: input must have at least one axis");
    if (!(n->fattr[0] > 0)) return lrc_err_set(err, "rmsnorm: eps must be positive, got %g", n->fattr[0]);
    return LRC_OK;
}

/* numpy broadcasting of every input: align trailing axes; each pair must
 * match or be 1. */
static int infer_broadcast(const lrc_graph *g, lrc_node *n, lrc_err *err)
{
    char b1[96], b2[96];
    n->shape = IN(0)->shape;
    for (int k = 0; k < n->n_in; k++)
        if (want_float(g, n, k, err)) return LRC_EUSER;
    for (int k = 1; k < n->n_in; k++) {
        lrc_shape a = n->shape;
        const lrc_shape *b = &IN(k)->shape;
        int nd = a.ndim > b->ndim ? a.ndim : b->ndim;
        n->shape.ndim = nd;
        for (int i = 0; i < nd; i++) {
            int ia = a.ndim - nd + i, ib = b->ndim - nd + i;
            int64_t da = ia >= 0 ? a.dim[ia] : 1, db = ib >= 0 ? b->dim[ib] : 1;
            if (da != db && da != 1 && db != 1)
                return lrc_err_set(err, "%s: shapes %s and %s do not broadcast", lrc_op_table[n->op].name,
                                   lrc_shape_str(&a, b1, sizeof b1), lrc_shape_str(b, b2, sizeof b2));
            n->shape.dim[i] = da == 1 ? db : da;
        }
        if (IN(k)->dtype != IN(0)->dtype)
            return lrc_err_set(err, "%s: dtypes differ (%s and %s)", lrc_op_table[n->op].name,
                               lrc_dtype_name(IN(0)->dtype), lrc_dtype_name(IN(k)->dtype));
    }
    n->dtype = IN(0)->dtype;
    return LRC_OK;
}

/* full: the `shape` list ([] for a scalar), f32 */
static int infer_full(const lrc_graph *g, lrc_node *n, lrc_err *err)
{
    (void)g;
    if (n->n_iattr > LRC_MAX_DIMS) return lrc_err_set(err, "full: the shape must have at most %d axes", LRC_MAX_DIMS);
    int64_t numel = 1;
    n->shape.ndim = n->n_iattr;
    for (int i = 0; i < n->n_iattr; i++) {
        if (n->iattr[i] <= 0) return lrc_err_set(err, "full: size %lld at axis %d is not positive", (long long)n->iattr[i], i);
        if (__builtin_mul_overflow(numel, n->iattr[i], &numel) || numel > LRC_MAX_ELEMENTS)
            return lrc_err_set(err, "full: more than 2^40 elements");
        n->shape.dim[i] = n->iattr[i];
    }
    n->dtype = LRC_F32;
    return LRC_OK;
}

static int infer_rope(const lrc_graph *g, lrc_node *n, lrc_err *err)
{
    if (infer_same(g, n, err) || want_rank(g, n, 0, 4, err)) return LRC_EUSER;
    if (n->shape.dim[3] % 2)
        return lrc_err_set(err, "rope: the head dimension must be even, got %lld",
                           (long long)n->shape.dim[3]);
    if (!(n->fattr[0] > 0)) return lrc_err_set(err, "rope: base must be positive, got %g", n->fattr[0]);
    lrc_rope r = lrc_rope_of(n);
    return lrc_rope_check(&r, lrc_op_table[n->op].name, err);
}

/* k and v of an attention: [B,T,Hkv,Dh] for q [B,T,H,Dh], Hkv dividing H
 * (grouped-query attention: query head h reads key-value head h / (H / Hkv),
 * transformers' repeat_kv), k and v alike. */
static int want_kv_heads(const lrc_graph *g, const lrc_node *n, lrc_err *err)
{
    char b1[96], b2[96];
    const lrc_shape *q = &IN(0)->shape, *k = &IN(1)->shape;
    const char *op = lrc_op_table[n->op].name;
    if (!lrc_shape_eq(k, &IN(2)->shape))
        return lrc_err_set(err, "%s: k %s and v %s must have the same shape [B,T,Hkv,Dh]", op, lrc_shape_str(k, b1, sizeof b1),
                           lrc_shape_str(&IN(2)->shape, b2, sizeof b2));
    if (k->dim[0] != q->dim[0] || k->dim[1] != q->dim[1] || k->dim[3] != q->dim[3])
        return lrc_err_set(err, "%s: q %s and k %s must agree in B, T and Dh ([B,T,H,Dh] and [B,T,Hkv,Dh])", op,
                           lrc_shape_str(q, b1, sizeof b1), lrc_shape_str(k, b2, sizeof b2));
    if (q->dim[2] % k->dim[2])
        return lrc_err_set(err, "%s: k and v have %lld heads, which do not divide q's %lld heads", op, (long long)k->dim[2],
                           (long long)q->dim[2]);
    return LRC_OK;
}

/* The sliding window (an integer attribute at iattr[w_at]) and the logit
 * soft-cap (fattr[c_at]): 0 is none; a window needs the causal mask. */
static int want_window_softcap(const lrc_node *n, int w_at, int c_at, bool causal, lrc_err *err)
{
    const char *op = lrc_op_table[n->op].name;
    if (n->iattr[w_at] < 0) return lrc_err_set(err, "%s: window must be >= 0 (0: none), got %lld", op, (long long)n->iattr[w_at]);
    if (n->iattr[w_at] > 0 && !causal) return lrc_err_set(err, "%s: a sliding window needs causal attention", op);
    if (!(n->fattr[c_at] >= 0) || isinf(n->fattr[c_at]))
        return lrc_err_set(err, "%s: softcap must be a finite number >= 0 (0: none), got %g", op, n->fattr[c_at]);
    return LRC_OK;
}

/* attention's general form: q [B,Tq,H,Dqk], k [B,Tk,Hkv,Dqk] and
 * v [B,Tk,Hkv,Dv] (Hkv dividing H), and the optional additive bias
 * [B|1,H|1,Tq,Tk] (input 3), broadcast over its size-1 axes. */
static int want_qkv_bias(const lrc_graph *g, const lrc_node *n, int bias_at, lrc_err *err)
{
    char b1[96], b2[96];
    const lrc_shape *q = &IN(0)->shape, *k = &IN(1)->shape, *v = &IN(2)->shape;
    const char *op = lrc_op_table[n->op].name;
    if (k->dim[0] != q->dim[0] || k->dim[3] != q->dim[3])
        return lrc_err_set(err, "%s: q %s and k %s must agree in B and Dqk ([B,Tq,H,Dqk] and [B,Tk,Hkv,Dqk])", op,
                           lrc_shape_str(q, b1, sizeof b1), lrc_shape_str(k, b2, sizeof b2));
    if (v->dim[0] != k->dim[0] || v->dim[1] != k->dim[1] || v->dim[2] != k->dim[2])
        return lrc_err_set(err, "%s: k %s and v %s must agree in B, Tk and Hkv ([B,Tk,Hkv,Dqk] and [B,Tk,Hkv,Dv])", op,
                           lrc_shape_str(k, b1, sizeof b1), lrc_shape_str(v, b2, sizeof b2));
    if (q->dim[2] % k->dim[2])
        return lrc_err_set(err, "%s: k and v have %lld heads, which do not divide q's %lld heads", op, (long long)k->dim[2],
                           (long long)q->dim[2]);
    if (n->n_in <= bias_at) return LRC_OK;
    if (want_float(g, n, bias_at, err) || want_rank(g, n, bias_at, 4, err)) return LRC_EUSER;
    const lrc_shape *bs = &IN(bias_at)->shape;
    if ((bs->dim[0] != 1 && bs->dim[0] != q->dim[0]) || (bs->dim[1] != 1 && bs->dim[1] != q->dim[2]) || bs->dim[2] != q->dim[1] ||
        bs->dim[3] != k->dim[1])
        return lrc_err_set(err, "%s: bias %s does not broadcast to [B, H, Tq, Tk] = [%lld, %lld, %lld, %lld]", op,
                           lrc_shape_str(bs, b1, sizeof b1), (long long)q->dim[0], (long long)q->dim[2], (long long)q->dim[1],
                           (long long)k->dim[1]);
    return LRC_OK;
}

static int infer_attention(const lrc_graph *g, lrc_node *n, lrc_err *err)
{
    for (int k = 0; k < 3; k++)
        if (want_float(g, n, k, err) || want_rank(g, n, k, 4, err)) return LRC_EUSER;
    if (want_qkv_bias(g, n, 3, err)) return LRC_EUSER;
    if (!(n->fattr[0] > 0)) return lrc_err_set(err, "attention: scale must be positive, got %g", n->fattr[0]);
    if (want_window_softcap(n, 1, 1, n->iattr[0] != 0, err)) return LRC_EUSER;
    n->dtype = IN(0)->dtype;
    n->shape = IN(0)->shape;
    n->shape.dim[3] = IN(2)->shape.dim[3];
    return LRC_OK;
}

/* q, k, v -> [B,T,H] f32, each query row's log-sum-exp (the attributes
 * attention's: the fusion pass runs it in the attention over the same
 * inputs, fuse rule 7) */
static int infer_attention_lse(const lrc_graph *g, lrc_node *n, lrc_err *err)
{
    if (infer_attention(g, n, err)) return LRC_EUSER;
    n->shape.ndim = 3;
    n->shape.dim[3] = 0;
    return LRC_OK;
}

static int infer_reshape(const lrc_graph *g, lrc_node *n, lrc_err *err)
{
    char b1[96], b2[96];
    int64_t known = 1, numel = lrc_shape_numel(&IN(0)->shape);
    int infer_at = -1;
    /* no axes: a scalar, as a reduction over every element leaves */
    if (n->n_iattr < 0 || n->n_iattr > LRC_MAX_DIMS)
        return lrc_err_set(err, "reshape: the new shape must have 0 to %d axes", LRC_MAX_DIMS);
    n->shape.ndim = n->n_iattr;
    for (int i = 0; i < n->n_iattr; i++) {
        int64_t d = n->iattr[i];
        if (d == -1 && infer_at < 0) infer_at = i;
        else if (d <= 0) return lrc_err_set(err, "reshape: size %lld at axis %d is not positive", (long long)d, i);
        else if (__builtin_mul_overflow(known, d, &known))
            return lrc_err_set(err, "reshape: the new shape's sizes multiply past 2^63 at axis %d", i);
        n->shape.dim[i] = d;
    }
    if (infer_at >= 0) {
        if (numel % known)
            return lrc_err_set(err, "reshape: %lld elements do not split into axes of %lld",
                               (long long)numel, (long long)known);
        n->shape.dim[infer_at] = numel / known;
    }
    if (lrc_shape_numel(&n->shape) != numel)
        return lrc_err_set(err, "reshape: %s has %lld elements, %s has %lld",
                           lrc_shape_str(&IN(0)->shape, b1, sizeof b1), (long long)numel,
                           lrc_shape_str(&n->shape, b2, sizeof b2), (long long)lrc_shape_numel(&n->shape));
    /* Store the resolved shape, so that the node re-infers to itself. */
    for (int i = 0; i < n->shape.ndim; i++) n->iattr[i] = n->shape.dim[i];
    n->dtype = IN(0)->dtype;
    return LRC_OK;
}

static int infer_transpose(const lrc_graph *g, lrc_node *n, lrc_err *err)
{
    const lrc_shape *x = &IN(0)->shape;
    bool seen[LRC_MAX_DIMS] = {0};
    if (n->n_iattr != x->ndim)
        return lrc_err_set(err, "transpose: perm has %d axes, the input %d", n->n_iattr, x->ndim);
    n->shape.ndim = x->ndim;
    for (int i = 0; i < x->ndim; i++) {
        int64_t p = n->iattr[i];
        if (p < 0 || p >= x->ndim || seen[p])
            return lrc_err_set(err, "transpose: perm is not a permutation of 0..%d", x->ndim - 1);
        seen[p] = true;
        n->shape.dim[i] = x->dim[p];
    }
    n->dtype = IN(0)->dtype;
    return LRC_OK;
}

static int infer_depth_gain(const lrc_graph *g, lrc_node *n, lrc_err *err)
{
    if (want_float(g, n, 0, err) || want_rank(g, n, 0, 1, err)) return LRC_EUSER;
    for (int k = 1; k < 5; k++)
        if (want_scalar(g, n, k, err)) return LRC_EUSER;
    if (IN(0)->shape.dim[0] % 2)
        return lrc_err_set(err, "depth_gain: LayerRoPE pairs features (2j, 2j+1), so the width must be even, got %lld",
                           (long long)IN(0)->shape.dim[0]);
    if (n->iattr[0] < 0) return lrc_err_set(err, "depth_gain: layer must be >= 0, got %lld", (long long)n->iattr[0]);
    if (!(n->fattr[0] > 0)) return lrc_err_set(err, "depth_gain: base must be positive, got %g", n->fattr[0]);
    n->dtype = LRC_F32; /* docs/architecture.md, numerics: LayerRoPE parameters and gains stay f32 */
    n->shape = IN(0)->shape;
    return LRC_OK;
}

static int infer_cross_entropy(const lrc_graph *g, lrc_node *n, lrc_err *err)
{
    char b1[96], b2[96];
    const lrc_shape *x = &IN(0)->shape, *y = &IN(1)->shape;
    if (want_float(g, n, 0, err)) return LRC_EUSER;
    if (IN(1)->dtype != LRC_I32)
        return lrc_err_set(err, "cross_entropy: labels must be i32, got %s", lrc_dtype_name(IN(1)->dtype));
    bool ok = x->ndim == y->ndim + 1;
    for (int i = 0; ok && i < y->ndim; i++) ok = x->dim[i] == y->dim[i];
    if (!ok)
        return lrc_err_set(err, "cross_entropy: labels %s must have the shape of logits %s without the last axis",
                           lrc_shape_str(y, b2, sizeof b2), lrc_shape_str(x, b1, sizeof b1));
    n->dtype = LRC_F32;
    n->shape.ndim = 0;
    return LRC_OK;
}

static int infer_kv_attention(const lrc_graph *g, lrc_node *n, lrc_err *err)
{
    char b1[96], b2[96];
    for (int k = 0; k < 5; k++)
        if (want_float(g, n, k, err) || want_rank(g, n, k, 4, err)) return LRC_EUSER;
    const lrc_shape *q = &IN(0)->shape, *kc = &IN(3)->shape, *k = &IN(1)->shape;
    if (want_kv_heads(g, n, err)) return LRC_EUSER;
    for (int i = 3; i < 5; i++)
        if (IN(i)->op != LRC_OP_STATE)
            return lrc_err_set(err, "kv_attention: input %d must be a state buffer (the cache)", i + 1);
    /* the caches hold the key-value heads only: [B, Tmax, Hkv, Dh] */
    if (!lrc_shape_eq(kc, &IN(4)->shape) || kc->dim[0] != k->dim[0] || kc->dim[2] != k->dim[2] || kc->dim[3] != k->dim[3] ||
        kc->dim[1] < k->dim[1])
        return lrc_err_set(err, "kv_attention: caches %s do not hold [B, Tmax, Hkv, Dh] for k %s",
                           lrc_shape_str(kc, b1, sizeof b1), lrc_shape_str(k, b2, sizeof b2));
    if (IN(5)->dtype != LRC_I32 || lrc_shape_numel(&IN(5)->shape) != 1)
        return lrc_err_set(err, "kv_attention: pos must be one i32");
    if (q->dim[3] % 2) return lrc_err_set(err, "kv_attention: the head dimension must be even for RoPE");
    /* base 0: no RoPE (a model with learned positions, GPT-2's) */
    if (!(n->fattr[0] > 0) || !(n->fattr[1] >= 0))
        return lrc_err_set(err, "kv_attention: scale must be positive and base positive or 0 (no RoPE)");
    lrc_rope r = lrc_rope_of(n);
    if (want_window_softcap(n, 0, 2, true, err) || lrc_rope_check(&r, "kv_attention", err)) return LRC_EUSER;
    n->dtype = IN(0)->dtype;
    n->shape = *q;
    return LRC_OK;
}

static int infer_layernorm(const lrc_graph *g, lrc_node *n, lrc_err *err)
{
    if (infer_same(g, n, err)) return LRC_EUSER;
    if (n->shape.ndim < 1) return lrc_err_set(err, "layernorm: input must have at least one axis");
    if (!(n->fattr[0] > 0)) return lrc_err_set(err, "layernorm: eps must be positive, got %g", n->fattr[0]);
    return LRC_OK;
}

/* of any dtype: an i32 slice (of ids, of an arange) pads with 0 as f32 does */
static int infer_slice(const lrc_graph *g, lrc_node *n, lrc_err *err)
{
    char b[96];
    const lrc_shape *x = &IN(0)->shape;
    int64_t axis = n->iattr[0], start = n->iattr[1], size = n->iattr[2];
    if (axis < 0 || axis >= x->ndim)
        return lrc_err_set(err, "slice: axis %lld is not an axis of %s", (long long)axis, lrc_shape_str(x, b, sizeof b));
    if (size <= 0) return lrc_err_set(err, "slice: size must be positive, got %lld", (long long)size);
    int64_t end;
    if (__builtin_add_overflow(start, size, &end))
        return lrc_err_set(err, "slice: start %lld + size %lld is past 2^63", (long long)start, (long long)size);
    if (start >= x->dim[axis] || end <= 0)
        return lrc_err_set(err, "slice: positions %lld..%lld miss every position of axis %lld of %s", (long long)start,
                           (long long)(end - 1), (long long)axis, lrc_shape_str(x, b, sizeof b));
    n->dtype = IN(0)->dtype;
    n->shape = *x;
    n->shape.dim[axis] = size;
    return LRC_OK;
}

static int infer_loop_next(const lrc_graph *g, lrc_node *n, lrc_err *err)
{
    char b1[96], b2[96];
    const lrc_shape *h = &IN(0)->shape;
    if (IN(0)->op != LRC_OP_LOOP_STATE) return lrc_err_set(err, "loop_next: input 1 must be the loop's state (loop_state)");
    if (n->in[1] == n->in[0]) return lrc_err_set(err, "loop_next: the loop body returns its state unchanged");
    if (!lrc_shape_eq(h, &IN(1)->shape) || IN(1)->dtype != IN(0)->dtype)
        return lrc_err_set(err, "loop_next: the body returns %s, the state is %s: they must match",
                           lrc_shape_str(&IN(1)->shape, b1, sizeof b1), lrc_shape_str(h, b2, sizeof b2));
    if (IN(2)->dtype != LRC_I32 || IN(2)->shape.ndim != 1 || h->ndim < 1 || IN(2)->shape.dim[0] != h->dim[0])
        return lrc_err_set(err, "loop_next: counts must be i32 [%lld], one per row of the state %s",
                           h->ndim ? (long long)h->dim[0] : 1LL, lrc_shape_str(h, b2, sizeof b2));
    n->dtype = IN(0)->dtype;
    n->shape = *h;
    return LRC_OK;
}

/* ---- shape rules of the gradient ops ------------------------------------ */

static int infer_matmul_nn(const lrc_graph *g, lrc_node *n, lrc_err *err)
{
    if (want_rank(g, n, 1, 2, err)) return LRC_EUSER;
    const lrc_shape *x = &IN(0)->shape;
    if (x->ndim < 1 || x->dim[x->ndim - 1] != IN(1)->shape.dim[0])
        return lrc_err_set(err, "matmul_nn: dy's last axis must be the weight's rows");
    n->dtype = IN(0)->dtype;
    n->shape = *x;
    n->shape.dim[x->ndim - 1] = IN(1)->shape.dim[1];
    return LRC_OK;
}

static int infer_matmul_tn(const lrc_graph *g, lrc_node *n, lrc_err *err)
{
    const lrc_shape *a = &IN(0)->shape, *b = &IN(1)->shape;
    if (a->ndim < 1 || b->ndim != a->ndim || lrc_shape_numel(a) / a->dim[a->ndim - 1] != lrc_shape_numel(b) / b->dim[b->ndim - 1])
        return lrc_err_set(err, "matmul_tn: dy and x must have the same rows");
    n->dtype = IN(0)->dtype;
    n->shape = (lrc_shape){2, {a->dim[a->ndim - 1], b->dim[b->ndim - 1]}};
    return LRC_OK;
}

static int infer_embedding_grad(const lrc_graph *g, lrc_node *n, lrc_err *err)
{
    if (IN(0)->dtype != LRC_I32 || n->iattr[0] < 1) return lrc_err_set(err, "embedding_grad: needs i32 ids and a vocab");
    n->dtype = IN(1)->dtype;
    n->shape = (lrc_shape){2, {n->iattr[0], IN(1)->shape.dim[IN(1)->shape.ndim - 1]}};
    return LRC_OK;
}

static int infer_sum_to(const lrc_graph *g, lrc_node *n, lrc_err *err)
{
    const lrc_shape *x = &IN(0)->shape;
    if (n->n_iattr > x->ndim) return lrc_err_set(err, "sum_to: more axes than the input");
    n->shape.ndim = n->n_iattr;
    for (int i = 0; i < n->n_iattr; i++) {
        int64_t d = n->iattr[i], xd = x->dim[x->ndim - n->n_iattr + i];
        if (d != 1 && d != xd) return lrc_err_set(err, "sum_to: the target shape does not broadcast to the input");
        n->shape.dim[i] = d;
    }
    n->dtype = IN(0)->dtype;
    return LRC_OK;
}

static int infer_same_as_first(const lrc_graph *g, lrc_node *n, lrc_err *err)
{
    for (int k = 1; k < n->n_in; k++)
        if (!lrc_shape_eq(&IN(0)->shape, &IN(k)->shape) && IN(k)->dtype != LRC_I32)
            return lrc_err_set(err, "%s: inputs must have the same shape", lrc_op_table[n->op].name);
    n->dtype = IN(0)->dtype;
    n->shape = IN(0)->shape;
    return LRC_OK;
}

/* q, k, v, dy, y, lse [, bias] -> the gradient of q (which 0, q's shape),
 * k or v (1, 2: [B,Tk,Hkv,Dqk] or [B,Tk,Hkv,Dv], the sum over the query
 * heads of each key-value head) or the bias (3: its shape, the sum over its
 * broadcast axes). y is the forward's output and lse its attention_lse: the
 * gradient's statistics, saved. */
static int infer_attention_grad(const lrc_graph *g, lrc_node *n, lrc_err *err)
{
    if (n->iattr[1] < 0 || n->iattr[1] > 3) return lrc_err_set(err, "attention_grad: which must be 0, 1, 2 or 3");
    if (n->iattr[1] == 3 && n->n_in < 7) return lrc_err_set(err, "attention_grad: which 3 (the bias's gradient) needs the bias");
    for (int k = 0; k < 6; k++)
        if (want_float(g, n, k, err) || want_rank(g, n, k, k == 5 ? 3 : 4, err)) return LRC_EUSER;
    if (want_qkv_bias(g, n, 6, err)) return LRC_EUSER;
    const lrc_shape *q = &IN(0)->shape, *lse = &IN(5)->shape;
    lrc_shape out = *q;
    out.dim[3] = IN(2)->shape.dim[3];
    if (!lrc_shape_eq(&out, &IN(3)->shape) || !lrc_shape_eq(&out, &IN(4)->shape))
        return lrc_err_set(err, "attention_grad: dy and y must have the forward's output shape [B,Tq,H,Dv]");
    if (lse->dim[0] != q->dim[0] || lse->dim[1] != q->dim[1] || lse->dim[2] != q->dim[2])
        return lrc_err_set(err, "attention_grad: lse must be [B,T,H] of q's [B,T,H,Dh]");
    if (want_window_softcap(n, 2, 1, n->iattr[0] != 0, err)) return LRC_EUSER;
    n->dtype = IN(0)->dtype;
    n->shape = IN(n->iattr[1] == 3 ? 6 : n->iattr[1])->shape;
    return LRC_OK;
}

static int infer_depth_gain_grad(const lrc_graph *g, lrc_node *n, lrc_err *err)
{
    if (n->iattr[1] < 0 || n->iattr[1] > 4) return lrc_err_set(err, "depth_gain_grad: which must be 0 to 4");
    if (IN(0)->shape.ndim != 1 || IN(0)->shape.dim[0] % 2) /* as depth_gain: every kernel writes pairs */
        return lrc_err_set(err, "depth_gain_grad: the gains must be a vector of even width");
    n->dtype = LRC_F32;
    n->shape = IN(n->iattr[1])->shape;
    return LRC_OK;
}

static int infer_cross_entropy_grad(const lrc_graph *g, lrc_node *n, lrc_err *err)
{
    if (IN(1)->dtype != LRC_I32) return lrc_err_set(err, "cross_entropy_grad: labels must be i32");
    n->dtype = LRC_F32;
    n->shape = IN(0)->shape;
    return LRC_OK;
}

static double flops_matmul_nn(const lrc_graph *g, const lrc_node *n) { return 2.0 * numel_of(n) * (double)IN(1)->shape.dim[0]; }
static double flops_matmul_tn(const lrc_graph *g, const lrc_node *n)
{
    return 2.0 * numel_of(n) * (double)(lrc_shape_numel(&IN(0)->shape) / IN(0)->shape.dim[IN(0)->shape.ndim - 1]);
}
/* The whole gradient recomputes S = q k^T and P and forms dP = dy v^T, dq,
 * dk and dv: five products of attention's two, 2.5 times its FLOPs, a third
 * to each of the three nodes (which share one kernel). */
static double flops_attention_grad(const lrc_graph *g, const lrc_node *n) { return 2.5 / 3.0 * flops_attention(g, n); }

/* ---- FLOP counts ------------------------------------------------------- */

static double numel_of(const lrc_node *n) { return (double)lrc_shape_numel(&n->shape); }
static double flops_zero(const lrc_graph *g, const lrc_node *n) { (void)g; (void)n; return 0; }
static double flops_1(const lrc_graph *g, const lrc_node *n) { (void)g; return numel_of(n); }
static double flops_2(const lrc_graph *g, const lrc_node *n) { (void)g; return 2 * numel_of(n); }
static double flops_4(const lrc_graph *g, const lrc_node *n) { (void)g; return 4 * numel_of(n); }
static double flops_5(const lrc_graph *g, const lrc_node *n) { (void)g; return 5 * numel_of(n); }
static double flops_8(const lrc_graph *g, const lrc_node *n) { (void)g; return 8 * numel_of(n); }

static double flops_matmul(const lrc_graph *g, const lrc_node *n)
{
    return 2.0 * numel_of(n) * (double)IN(1)->shape.dim[1];
}

static double flops_rmsnorm(const lrc_graph *g, const lrc_node *n)
{
    (void)g;
    return 3 * numel_of(n); /* square-accumulate, then one multiply per element */
}

/* (query, key) pairs a query row sees, summed over T rows: all T, causal
 * t + 1, and with a sliding window of W at most W. */
static double attention_pairs(double T, bool causal, double W)
{
    if (!causal) return T * T;
    if (W <= 0 || W >= T) return T * (T + 1) / 2;
    return W * (W + 1) / 2 + (T - W) * W;
}

static double flops_attention(const lrc_graph *g, const lrc_node *n)
{
    /* counted with q's heads (a gradient's node may have k's) */
    const lrc_shape *q = &IN(0)->shape;
    double B = (double)q->dim[0], T = (double)q->dim[1], H = (double)q->dim[2], D = (double)q->dim[3];
    int w_at = n->op == LRC_OP_ATTENTION_GRAD ? 2 : 1;
    /* q.k and p.v, 2 FLOPs each per multiply-add; causal attends to t+1 keys */
    double pairs = attention_pairs(T, n->iattr[0] != 0, (double)n->iattr[w_at]), Tk = (double)IN(1)->shape.dim[1];
    if (Tk != T) pairs = T * Tk; /* cross-attention: counted without its mask */
    return B * H * pairs * (2 * D + 2 * (double)IN(2)->shape.dim[3] + 5);
}

static double flops_kv_attention(const lrc_graph *g, const lrc_node *n)
{
    /* against the whole cache (or the window) at worst: the position is only known at run time */
    double B = (double)n->shape.dim[0], T = (double)n->shape.dim[1], H = (double)n->shape.dim[2];
    double D = (double)n->shape.dim[3], Tmax = (double)IN(3)->shape.dim[1];
    if (n->iattr[0] > 0 && (double)n->iattr[0] < Tmax) Tmax = (double)n->iattr[0];
    return B * H * T * Tmax * (4 * D + 5) + 6 * B * T * H * D;
}

static double flops_cross_entropy(const lrc_graph *g, const lrc_node *n)
{
    return 4 * (double)lrc_shape_numel(&IN(0)->shape);
}

static double flops_depth_gain(const lrc_graph *g, const lrc_node *n)
{
    return 8 * (double)IN(0)->shape.dim[0];
}

/* ---- the rows ----------------------------------------------------------- */

/* A row is ROW_<op>, one OP(...) each: every field is an argument of OP, so
 * a row that leaves one out (a gradient rule, say) does not compile, and
 * an op without a row names an undefined ROW_<op> in the table below.
 * Absent things are written out: NONE (no attributes), NO_REF, NO_GRAD.
 *
 * OP(inputs, fusion class, integer attributes, float attributes, list
 *    attribute, shape rule, FLOPs, backward/forward FLOP ratio, reference
 *    kernels, gradient rule, byte rule, axes rule, flags) */
#define OP(nin, fusion_, iattr_, fattr_, ilist_, infer_, flops_, ratio, refs, grad_, bytes_, axes_, flags)           \
    .n_in = nin, .fusion = LRC_FUSE_##fusion_, .iattr = iattr_, .fattr = fattr_, .ilist = ilist_, .infer = infer_, \
    .flops = flops_, .bwd_flops_ratio = ratio, refs, .grad = grad_, .bytes = LRC_BYTES_##bytes_,                     \
    .axes = LRC_AXES_##axes_, .share_by_which = ((flags) & SHARES_KERNEL) != 0,                                      \
    .keeps_zero = ((flags) & KEEPS_ZERO) != 0, .rows = (lrc_rows_rule)((flags) / ROWS_UNIT)
#define ATTRS(...) {__VA_ARGS__}
#define NONE {0}
/* both storage precisions of an op's reference kernel */
#define REFS(name) .ref = lrc_ref_##name, .ref64 = lrc_ref64_##name
#define NO_REF .ref = NULL, .ref64 = NULL
#define NO_GRAD NULL
/* flags: SHARES_KERNEL, KEEPS_ZERO, and the rows rule times ROWS_UNIT (ROWS(FIRST)) */
enum { SHARES_KERNEL = 1, KEEPS_ZERO = 2, ROWS_UNIT = 4 };
#define ROWS(r) (LRC_ROWS_##r * ROWS_UNIT)

#define ROW_input OP(0, SOURCE, NONE, NONE, NULL, infer_source, flops_zero, 0, NO_REF, NO_GRAD, NONE, SOURCE, 0)
#define ROW_param OP(0, SOURCE, NONE, NONE, NULL, infer_source, flops_zero, 0, NO_REF, NO_GRAD, NONE, SOURCE, 0)
#define ROW_embedding OP(2, OPAQUE, NONE, NONE, NULL, infer_embedding, flops_zero, 1, REFS(embedding), lrc_grad_embedding, GATHER, GATHER, 0)
#define ROW_matmul OP(2, GEMM, NONE, NONE, NULL, infer_matmul, flops_matmul, 2, REFS(matmul), lrc_grad_matmul, ALL, LOCAL, ROWS(FIRST))
#define ROW_rmsnorm OP(1, ROW, NONE, ATTRS("eps"), NULL, infer_rmsnorm, flops_rmsnorm, 2, REFS(rmsnorm), lrc_grad_rmsnorm, ALL, LOCAL, ROWS(FIRST))
#define ROPE_ATTRS "factor", "low_freq", "high_freq", "orig_ctx" /* the scaling (lrc_rope) */
#define ROW_rope OP(1, OPAQUE, NONE, ATTRS("base", ROPE_ATTRS), NULL, infer_rope, flops_4, 1, REFS(rope), lrc_grad_rope, ALL, LOCAL, 0)
#define ROW_attention                                                                                                    \
    OP(3, ATTENTION, ATTRS("causal", "window"), ATTRS("scale", "softcap"), NULL, infer_attention, flops_attention, 2.5, REFS(attention),   \
       lrc_grad_attention, ALL, ATTENTION, 0), .opt_in = "bias"
#define ROW_attention_lse                                                                                                \
    OP(3, ATTENTION, ATTRS("causal", "window"), ATTRS("scale", "softcap"), NULL, infer_attention_lse, flops_zero, 0,   \
       REFS(attention_lse), NO_GRAD, ALL, MIXED, 0), .opt_in = "bias"
#define ROW_softmax OP(1, ROW, NONE, NONE, NULL, infer_same, flops_5, 1, REFS(softmax), lrc_grad_softmax, ALL, LOCAL, ROWS(FIRST))
#define ROW_reshape OP(1, VIEW, NONE, NONE, "shape", infer_reshape, flops_zero, 0, REFS(reshape), lrc_grad_reshape, NONE, RESHAPE, ROWS(RESHAPE))
#define ROW_transpose OP(1, OPAQUE, NONE, NONE, "perm", infer_transpose, flops_zero, 0, REFS(transpose), lrc_grad_transpose, ALL, TRANSPOSE, 0)
#define ROW_depth_gain                                                                                                   \
    OP(5, OPAQUE, ATTRS("layer"), ATTRS("base"), NULL, infer_depth_gain, flops_depth_gain, 2, REFS(depth_gain),       \
       lrc_grad_depth_gain, ALL, LOCAL, 0)
#define ROW_cross_entropy                                                                                                \
    OP(2, REDUCTION, NONE, NONE, NULL, infer_cross_entropy, flops_cross_entropy, 1, REFS(cross_entropy),             \
       lrc_grad_cross_entropy, ALL, MIXED, 0)
#define ROW_state OP(0, SOURCE, NONE, NONE, NULL, infer_source, flops_zero, 0, NO_REF, NO_GRAD, NONE, SOURCE, 0)
#define ROW_kv_attention                                                                                                 \
    OP(6, ATTENTION, ATTRS("window"), ATTRS("scale", "base", "softcap", ROPE_ATTRS), NULL, infer_kv_attention, flops_kv_attention, 0, REFS(kv_attention), \
       NO_GRAD, ALL, MIXED, 0)
#define ROW_layernorm OP(1, ROW, NONE, ATTRS("eps"), NULL, infer_layernorm, flops_5, 2, REFS(layernorm), lrc_grad_layernorm, ALL, LOCAL, ROWS(FIRST))
#define ROW_slice                                                                                                        \
    OP(1, OPAQUE, ATTRS("axis", "start", "size", "positions"), NONE, NULL, infer_slice, flops_zero, 0, REFS(slice), lrc_grad_slice, \
       ALL, SLICE, ROWS(SLICE))
#define ROW_loop_state OP(1, OPAQUE, NONE, NONE, NULL, infer_same, flops_zero, 0, REFS(loop_state), lrc_grad_stop, ALL, LOCAL, 0)
#define ROW_loop_next OP(3, OPAQUE, ATTRS("scan"), NONE, NULL, infer_loop_next, flops_zero, 0, NO_REF, lrc_grad_loop_next, ALL, LOOP, 0)
#define ROW_matmul_nn OP(2, GEMM, NONE, NONE, NULL, infer_matmul_nn, flops_matmul_nn, 0, REFS(matmul_nn), NO_GRAD, ALL, MIXED, 0)
#define ROW_matmul_tn OP(2, GEMM, NONE, NONE, NULL, infer_matmul_tn, flops_matmul_tn, 0, REFS(matmul_tn), NO_GRAD, ALL, MIXED, 0)
#define ROW_embedding_grad                                                                                               \
    OP(2, OPAQUE, ATTRS("vocab"), NONE, NULL, infer_embedding_grad, flops_1, 0, REFS(embedding_grad), NO_GRAD, ALL, MIXED, 0)
#define ROW_sum_to OP(1, OPAQUE, NONE, NONE, "shape", infer_sum_to, flops_1, 0, REFS(sum_to), NO_GRAD, ALL, MIXED, 0)
#define ROW_rmsnorm_grad                                                                                                 \
    OP(2, OPAQUE, NONE, ATTRS("eps"), NULL, infer_same_as_first, flops_5, 0, REFS(rmsnorm_grad), NO_GRAD, ALL, MIXED, 0)
#define ROW_rope_grad OP(1, OPAQUE, NONE, ATTRS("base", ROPE_ATTRS), NULL, infer_rope, flops_4, 0, REFS(rope_grad), NO_GRAD, ALL, MIXED, 0)
#define ROW_attention_grad                                                                                               \
    OP(6, OPAQUE, ATTRS("causal", "which", "window"), ATTRS("scale", "softcap"), NULL, infer_attention_grad, flops_attention_grad, 0,      \
       REFS(attention_grad), NO_GRAD, ALL, MIXED, SHARES_KERNEL), .opt_in = "bias"
#define ROW_softmax_grad OP(2, OPAQUE, NONE, NONE, NULL, infer_same_as_first, flops_4, 0, REFS(softmax_grad), NO_GRAD, ALL, MIXED, 0)
#define ROW_depth_gain_grad                                                                                              \
    OP(6, OPAQUE, ATTRS("layer", "which"), ATTRS("base"), NULL, infer_depth_gain_grad, flops_depth_gain, 0,           \
       REFS(depth_gain_grad), NO_GRAD, ALL, MIXED, SHARES_KERNEL)
#define ROW_cross_entropy_grad                                                                                           \
    OP(2, OPAQUE, NONE, NONE, NULL, infer_cross_entropy_grad, flops_cross_entropy, 0, REFS(cross_entropy_grad), NO_GRAD, \
       ALL, MIXED, 0)
#define ROW_layernorm_grad                                                                                               \
    OP(2, OPAQUE, NONE, ATTRS("eps"), NULL, infer_same_as_first, flops_8, 0, REFS(layernorm_grad), NO_GRAD, ALL, MIXED, 0)
/* a mixture of experts' routing (route.c) */
#define ROW_topk OP(1, OPAQUE, ATTRS("k"), NONE, NULL, lrc_infer_topk, lrc_flops_topk, 0, REFS(topk), lrc_grad_stop, ALL, LOCAL, ROWS(FIRST))
#define ROW_gather OP(2, OPAQUE, NONE, NONE, NULL, lrc_infer_gather, flops_zero, 1, REFS(gather), lrc_grad_gather, ALL, LOCAL, ROWS(EACH))
#define ROW_gather_grad                                                                                                  \
    OP(2, OPAQUE, ATTRS("n"), NONE, NULL, lrc_infer_gather_grad, flops_1, 0, REFS(gather_grad), NO_GRAD, ALL, MIXED, 0)
#define ROW_expert_matmul                                                                                                \
    OP(3, OPAQUE, ATTRS("expert", "experts", "nn"), NONE, NULL, lrc_infer_expert_matmul, lrc_flops_expert_matmul, 2,      \
       REFS(expert_matmul), lrc_grad_expert_matmul, ALL, ROUTED, ROWS(ROUTED))
#define ROW_expert_matmul_tn                                                                                             \
    OP(3, OPAQUE, ATTRS("expert", "experts"), NONE, NULL, lrc_infer_expert_matmul_tn, lrc_flops_expert_matmul_tn, 0,    \
       REFS(expert_matmul_tn), NO_GRAD, ALL, MIXED, 0)
/* the ops along one axis (reduce.c); concat takes 1 to LRC_MAX_INPUTS inputs (n_in -1) */
#define AXIS_KEEP ATTRS("axis", "keepdim")
#define ROW_sum OP(1, REDUCTION, AXIS_KEEP, NONE, NULL, lrc_infer_reduce, lrc_flops_along, 1, REFS(reduce), lrc_grad_reduce, ALL, ALONG, ROWS(SLICE))
#define ROW_mean OP(1, REDUCTION, AXIS_KEEP, NONE, NULL, lrc_infer_reduce, lrc_flops_along, 1, REFS(reduce), lrc_grad_reduce, ALL, ALONG, ROWS(SLICE))
#define ROW_amax OP(1, REDUCTION, AXIS_KEEP, NONE, NULL, lrc_infer_reduce, lrc_flops_along, 2, REFS(reduce), lrc_grad_amax, ALL, ALONG, ROWS(SLICE))
#define ROW_logsumexp                                                                                                    \
    OP(1, REDUCTION, AXIS_KEEP, NONE, NULL, lrc_infer_reduce, lrc_flops_along, 1, REFS(reduce), lrc_grad_logsumexp, ALL, ALONG, ROWS(SLICE))
#define ROW_cumsum                                                                                                       \
    OP(1, OPAQUE, ATTRS("axis", "reverse"), NONE, NULL, lrc_infer_cumsum, lrc_flops_along, 1, REFS(cumsum), lrc_grad_cumsum, ALL, ALONG, ROWS(SLICE))
#define ROW_concat OP(-1, OPAQUE, ATTRS("axis"), NONE, NULL, lrc_infer_concat, lrc_flops_along, 0, REFS(concat), lrc_grad_concat, ALL, ALONG, 0)
#define ROW_expand OP(1, OPAQUE, NONE, NONE, "shape", lrc_infer_expand, lrc_flops_along, 1, REFS(expand), lrc_grad_expand, ALL, ALONG, 0)
#define ROW_amax_grad OP(3, OPAQUE, ATTRS("axis"), NONE, NULL, lrc_infer_amax_grad, flops_1, 0, REFS(amax_grad), NO_GRAD, ALL, MIXED, 0)
/* 2 inputs, or 3 with init (n_in -1, checked by its shape rule) */
#define ROW_scan OP(-1, OPAQUE, ATTRS("axis", "reverse"), NONE, NULL, lrc_infer_scan, lrc_flops_scan, 2, REFS(scan), lrc_grad_scan, ALL, ALONG, ROWS(SCAN))
/* the batched product of two activations (bmm.c) */
#define ROW_bmm OP(2, OPAQUE, NONE, NONE, NULL, lrc_infer_bmm, lrc_flops_bmm, 2, REFS(bmm), lrc_grad_bmm, ALL, BMM, 0)
/* between i32 and f32 (cast.c): no gradient flows through an integer */
#define ROW_cast OP(1, OPAQUE, ATTRS("to"), NONE, NULL, lrc_infer_cast, flops_1, 0, REFS(cast), lrc_grad_stop, ALL, LOCAL, ROWS(FIRST))
#define ROW_arange OP(0, OPAQUE, ATTRS("n"), NONE, NULL, lrc_infer_arange, flops_zero, 0, REFS(arange), NO_GRAD, ALL, SOURCE, 0)

/* The elementwise ops' rows, from their LRC_EW_OPS entries: computed by
 * their expression (ir/ew.c) in ref's lrc_ref_ew, differentiated by their
 * rule through lrc_ew_grad. */
#define EW_INFER_SAME infer_same
#define EW_INFER_BCAST infer_broadcast
#define EW_INFER_FIRST infer_same_as_first
#define EW_INFER_FULL infer_full
#define EW_ILIST_SAME NULL
#define EW_ILIST_BCAST NULL
#define EW_ILIST_FIRST NULL
#define EW_ILIST_FULL "shape"
#define EW_FLOPS_0 flops_zero
#define EW_FLOPS_1 flops_1
#define EW_FLOPS_2 flops_2
#define EW_FLOPS_4 flops_4
#define EW_FLOPS_5 flops_5
#define EW_FLOPS_8 flops_8
#define EW_HAS(flags, f) (((flags) & LRC_EW_##f) != 0)
#define EW_ROW(E, op, nin, shape, fattr_, flops_, ratio, flags)                                                       \
    [LRC_OP_##E] = {.name = #op, .n_in = nin, .fattr = {fattr_}, .ilist = EW_ILIST_##shape, .infer = EW_INFER_##shape,   \
                    .fusion = EW_HAS(flags, ALONE) || EW_HAS(flags, F64) ? LRC_FUSE_OPAQUE : LRC_FUSE_ELEMENTWISE,          \
                    .flops = EW_FLOPS_##flops_, .bwd_flops_ratio = ratio, .ref = lrc_ref_ew, .ref64 = lrc_ref64_ew,         \
                    .grad = EW_HAS(flags, GRAD_OP) ? NULL : lrc_ew_grad, .bytes = LRC_BYTES_ALL,                            \
                    .axes = EW_HAS(flags, GRAD_OP) ? LRC_AXES_MIXED : LRC_AXES_LOCAL, .keeps_zero = EW_HAS(flags, KEEPS_ZERO), \
                    .rows = EW_HAS(flags, ROWS_FIRST) ? LRC_ROWS_FIRST : EW_HAS(flags, ROWS_EACH) ? LRC_ROWS_EACH : LRC_ROWS_NONE},

/* The op table: LRC_OPS over the rows, then LRC_EW_OPS, each named by its op. */
const lrc_op_info lrc_op_table[LRC_OP_COUNT] = {
#define LRC_OP_ROW(E, op) [LRC_OP_##E] = {.name = #op, ROW_##op},
    LRC_OPS(LRC_OP_ROW)
#undef LRC_OP_ROW
    LRC_EW_OPS(EW_ROW)
};

const char *lrc_op_name(lrc_op op) { return lrc_op_table[op].name; }

int lrc_op_parse(const char *name, lrc_op *out)
{
    for (int i = 0; i < LRC_OP_COUNT; i++)
        if (!strcmp(lrc_op_table[i].name, name)) {
            *out = (lrc_op)i;
            return 0;
        }
    return -1;
}

double lrc_node_bytes(const lrc_graph *g, const lrc_node *n)
{
    lrc_bytes_rule rule = lrc_op_table[n->op].bytes;
    if (rule == LRC_BYTES_NONE) return 0;
    double bytes = numel_of(n) * (double)lrc_dtype_size(n->dtype);
    if (rule == LRC_BYTES_GATHER) /* a gather reads only the rows it returns */
        return 2 * bytes + numel_of(IN(0)) * (double)lrc_dtype_size(IN(0)->dtype);
    for (int k = 0; k < n->n_in; k++)
        bytes += numel_of(IN(k)) * (double)lrc_dtype_size(IN(k)->dtype);
    return bytes;
}
