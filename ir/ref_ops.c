/* ref_ops.c — the reference implementation of every op: plain,
 * obviously-correct C, referenced from the op table. Storage is f32 (i32 for
 * ids and labels); every sum and every transcendental is computed in double
 * (docs/architecture.md, rule 2). The `ref` backend runs these, and passes use them to fold
 * constants. Compiled twice, at f32 and f64 storage (ref_template.h). */
#include "ref_template.h"
#include "lrc_ew.h"

/* integer tensors (ids, labels) stay i32 at either precision */
static size_t elem_bytes(const lrc_node *n) { return n->dtype == LRC_I32 ? 4 : sizeof(real); }

/* "tokens[1,3]" for the flat index i of shape s. */
static char *index_str(const char *name, const lrc_shape *s, int64_t i, char *buf, size_t n)
{
    int64_t idx[LRC_MAX_DIMS];
    for (int d = s->ndim - 1; d >= 0; d--) {
        idx[d] = i % s->dim[d];
        i /= s->dim[d];
    }
    size_t used = (size_t)snprintf(buf, n, "%s[", name);
    for (int d = 0; d < s->ndim && used < n; d++)
        used += (size_t)snprintf(buf + used, n - used, "%s%lld", d ? "," : "", (long long)idx[d]);
    if (used < n) snprintf(buf + used, n - used, "]");
    return buf;
}

static const char *input_name(const lrc_graph *g, const lrc_node *n, int k, const char *fallback)
{
    const lrc_node *src = &g->nodes[n->in[k]];
    return src->op == LRC_OP_INPUT && src->name ? src->name : fallback;
}

int REF(embedding)(const lrc_graph *g, const lrc_node *n, void *const *in, void *out, lrc_err *err)
{
    int64_t count = lrc_shape_numel(SHAPE(0)), V = SHAPE(1)->dim[0], d = SHAPE(1)->dim[1];
    for (int64_t i = 0; i < count; i++) {
        int32_t id = I(0)[i];
        if (id < 0 || id >= V) {
            char b[128];
            return lrc_err_set(err, "%s = %d is outside the vocabulary [0, %lld)",
                               index_str(input_name(g, n, 0, "ids"), SHAPE(0), i, b, sizeof b), id, (long long)V);
        }
        memcpy((real *)out + i * d, F(1) + (int64_t)id * d, (size_t)d * sizeof(real));
    }
    return LRC_OK;
}

int REF(matmul)(const lrc_graph *g, const lrc_node *n, void *const *in, void *out, lrc_err *err)
{
    (void)err;
    int64_t K = SHAPE(1)->dim[1], N = SHAPE(1)->dim[0], M = lrc_shape_numel(SHAPE(0)) / K;
    for (int64_t m = 0; m < M; m++)
        for (int64_t j = 0; j < N; j++) {
            const real *x = F(0) + m * K, *w = F(1) + j * K;
            double acc = 0;
            for (int64_t k = 0; k < K; k++) acc += (double)x[k] * w[k];
            ((real *)out)[m * N + j] = (real)acc;
        }
    return LRC_OK;
}

/* a [..., M, K] x b [..., K, N], each batch index's matrices found by
 * lrc_bmm_strides (0 where an operand broadcasts) */
int REF(bmm)(const lrc_graph *g, const lrc_node *n, void *const *in, void *out, lrc_err *err)
{
    (void)err;
    const lrc_shape *o = &n->shape;
    int nb = o->ndim - 2;
    int64_t M = o->dim[nb], N = o->dim[nb + 1], K = last_dim(SHAPE(0)), sa[LRC_MAX_DIMS], sb[LRC_MAX_DIMS];
    lrc_bmm_strides(SHAPE(0), SHAPE(1), o, sa, sb);
    int64_t batch = lrc_shape_numel(o) / (M * N);
    for (int64_t i = 0; i < batch; i++) {
        int64_t ia = 0, ib = 0, rest = i;
        for (int d = nb - 1; d >= 0; d--) {
            ia += rest % o->dim[d] * sa[d], ib += rest % o->dim[d] * sb[d];
            rest /= o->dim[d];
        }
        const real *a = F(0) + ia * M * K, *b = F(1) + ib * K * N;
        for (int64_t m = 0; m < M; m++)
            for (int64_t j = 0; j < N; j++) {
                double acc = 0;
                for (int64_t k = 0; k < K; k++) acc += (double)a[m * K + k] * b[k * N + j];
                ((real *)out)[(i * M + m) * N + j] = (real)acc;
            }
    }
    return LRC_OK;
}

int REF(rmsnorm)(const lrc_graph *g, const lrc_node *n, void *const *in, void *out, lrc_err *err)
{
    (void)err;
    int64_t d = last_dim(SHAPE(0)), rows = lrc_shape_numel(SHAPE(0)) / d;
    for (int64_t r = 0; r < rows; r++) {
        const real *x = F(0) + r * d;
        double ss = 0;
        for (int64_t i = 0; i < d; i++) ss += (double)x[i] * x[i];
        double inv = 1.0 / sqrt(ss / (double)d + n->fattr[0]);
        for (int64_t i = 0; i < d; i++) ((real *)out)[r * d + i] = (real)(x[i] * inv);
    }
    return LRC_OK;
}

/* Element strides of an input broadcast to the output shape (0 on axes it
 * repeats along). */
static void broadcast_strides(const lrc_shape *in, const lrc_shape *out, int64_t *st)
{
    int64_t s = 1;
    for (int d = out->ndim - 1; d >= 0; d--) {
        int di = in->ndim - out->ndim + d;
        int64_t size = di >= 0 ? in->dim[di] : 1;
        st[d] = size == 1 ? 0 : s;
        s *= size;
    }
}

/* Every elementwise op: its expression (ir/ew.c) over the reference's
 * algebra, in double, each input broadcast to the output (numpy rules). */
int REF(ew)(const lrc_graph *g, const lrc_node *n, void *const *in, void *out, lrc_err *err)
{
    (void)err;
    int64_t st[LRC_MAX_INPUTS][LRC_MAX_DIMS], at[LRC_MAX_INPUTS] = {0}, idx[LRC_MAX_DIMS] = {0};
    for (int k = 0; k < n->n_in; k++) broadcast_strides(SHAPE(k), &n->shape, st[k]);
    lrc_ew_alg A = {lrc_ew_ref_const, lrc_ew_ref_prims, NULL};
    int64_t count = lrc_shape_numel(&n->shape);
    real *o = out;
    for (int64_t i = 0; i < count; i++) {
        lrc_ew_val x[LRC_MAX_INPUTS];
        for (int k = 0; k < n->n_in; k++) x[k].d = F(k)[at[k]];
        o[i] = (real)lrc_ew_eval(&A, n, x).d;
        for (int d = n->shape.ndim - 1; d >= 0; d--) { /* odometer increment */
            for (int k = 0; k < n->n_in; k++) at[k] += st[k][d];
            if (++idx[d] < n->shape.dim[d]) break;
            for (int k = 0; k < n->n_in; k++) at[k] -= st[k][d] * n->shape.dim[d];
            idx[d] = 0;
        }
    }
    return LRC_OK;
}

/* Sequence RoPE (rotate-half) by +angle, or its transpose (the gradient)
 * by -angle when sign is -1. */
int REF(rotate)(const lrc_node *n, const real *x, real *out, int sign)
{
    int64_t B = n->shape.dim[0], T = n->shape.dim[1], H = n->shape.dim[2], D = n->shape.dim[3], half = D / 2;
    lrc_rope rope = lrc_rope_of(n);
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t h = 0; h < H; h++) {
                const real *xr = x + ((b * T + t) * H + h) * D;
                real *o = out + ((b * T + t) * H + h) * D;
                for (int64_t i = 0; i < half; i++) {
                    double ang = (double)t * lrc_rope_inv_freq(&rope, i, D);
                    double c = cos(ang), s = sign * sin(ang), x1 = xr[i], x2 = xr[i + half];
                    o[i] = (real)(x1 * c - x2 * s);
                    o[i + half] = (real)(x2 * c + x1 * s);
                }
            }
    return LRC_OK;
}

int REF(rope)(const lrc_graph *g, const lrc_node *n, void *const *in, void *out, lrc_err *err)
{
    (void)err;
    (void)g;
    return REF(rotate)(n, F(0), out, 1);
}

/* Row t of query head h: its scaled, soft-capped scores, plus the bias
 * when there is one (input 3, [B|1,H|1,Tq,Tk]), against keys
 * [*first, *keys) into p[], and their max (-inf: the row sees no key).
 * k has Hkv heads (Hkv dividing H): query head h reads head h / (H / Hkv).
 * Causal with Tq != Tk is torch's is_causal: query t sees keys j <= t. */
static double attn_scores(const lrc_graph *g, const lrc_node *n, void *const *in, int64_t b, int64_t h, int64_t t, double *p,
                          int64_t *first, int64_t *keys)
{
    const lrc_shape *qs = SHAPE(0), *ks = SHAPE(1);
    int64_t Tq = qs->dim[1], H = qs->dim[2], D = qs->dim[3], Tk = ks->dim[1], Hkv = ks->dim[2];
    const real *q = F(0) + ((b * Tq + t) * H + h) * D, *bias = NULL;
    if (n->n_in > 3) {
        const lrc_shape *bs = SHAPE(3);
        bias = F(3) + (((bs->dim[0] > 1 ? b : 0) * bs->dim[1] + (bs->dim[1] > 1 ? h : 0)) * Tq + t) * Tk;
    }
    double mx = -INFINITY;
    *keys = n->iattr[0] && t + 1 < Tk ? t + 1 : Tk;
    *first = attn_first_key(t, n->iattr[1]);
    for (int64_t j = *first; j < *keys; j++) {
        const real *k = F(1) + ((b * Tk + j) * Hkv + h / (H / Hkv)) * D;
        double s = 0;
        for (int64_t i = 0; i < D; i++) s += (double)q[i] * k[i];
        p[j] = attn_softcap(s * n->fattr[0], n->fattr[1]);
        if (bias) p[j] += bias[j];
        if (p[j] > mx) mx = p[j];
    }
    return mx;
}

/* A row whose every key is masked (-inf bias) gives zeros, and its
 * log-sum-exp is -inf (torch's SDPA gives NaN there). */
int REF(attention)(const lrc_graph *g, const lrc_node *n, void *const *in, void *out, lrc_err *err)
{
    (void)err;
    int64_t B = n->shape.dim[0], T = n->shape.dim[1], H = n->shape.dim[2], D = n->shape.dim[3];
    int64_t Tk = SHAPE(1)->dim[1], Hkv = SHAPE(1)->dim[2], G = H / Hkv;
    double *p = lrc_malloc((size_t)Tk * sizeof(double)), *acc = lrc_malloc((size_t)D * sizeof(double));
    if (!p || !acc) {
        free(p), free(acc);
        return lrc_err_nomem(err, "for %s's scratch in the reference kernels", lrc_op_name(n->op));
    }
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t t = 0; t < T; t++) {
                int64_t first, keys;
                double mx = attn_scores(g, n, in, b, h, t, p, &first, &keys), sum = 0;
                real *o = (real *)out + ((b * T + t) * H + h) * D;
                if (mx == -INFINITY) {
                    for (int64_t i = 0; i < D; i++) o[i] = 0;
                    continue;
                }
                for (int64_t j = first; j < keys; j++) sum += (p[j] = exp(p[j] - mx));
                for (int64_t i = 0; i < D; i++) acc[i] = 0;
                for (int64_t j = first; j < keys; j++) {
                    const real *v = F(2) + ((b * Tk + j) * Hkv + h / G) * D;
                    for (int64_t i = 0; i < D; i++) acc[i] += p[j] * v[i];
                }
                for (int64_t i = 0; i < D; i++) o[i] = (real)(acc[i] / sum);
            }
    free(p);
    free(acc);
    return LRC_OK;
}

/* The log-sum-exp of each query row's scores, [B, T, H]: what the backward
 * reads instead of computing the softmax's statistics again. */
int REF(attention_lse)(const lrc_graph *g, const lrc_node *n, void *const *in, void *out, lrc_err *err)
{
    (void)err;
    int64_t B = n->shape.dim[0], T = n->shape.dim[1], H = n->shape.dim[2];
    double *p = lrc_malloc((size_t)SHAPE(1)->dim[1] * sizeof(double));
    if (!p) return lrc_err_nomem(err, "for %s's scratch in the reference kernels", lrc_op_name(n->op));
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t h = 0; h < H; h++) {
                int64_t first, keys;
                double mx = attn_scores(g, n, in, b, h, t, p, &first, &keys), sum = 0;
                for (int64_t j = first; j < keys; j++) sum += exp(p[j] - mx);
                ((real *)out)[(b * T + t) * H + h] = (real)(mx == -INFINITY ? mx : mx + log(sum));
            }
    free(p);
    return LRC_OK;
}

int REF(softmax)(const lrc_graph *g, const lrc_node *n, void *const *in, void *out, lrc_err *err)
{
    (void)err;
    (void)g;
    int64_t d = last_dim(&n->shape), rows = lrc_shape_numel(&n->shape) / d;
    for (int64_t r = 0; r < rows; r++) {
        const real *x = F(0) + r * d;
        real *o = (real *)out + r * d;
        double mx = -INFINITY, sum = 0;
        for (int64_t i = 0; i < d; i++) mx = x[i] > mx ? x[i] : mx;
        for (int64_t i = 0; i < d; i++) sum += exp((double)x[i] - mx);
        for (int64_t i = 0; i < d; i++) o[i] = (real)(exp((double)x[i] - mx) / sum);
    }
    return LRC_OK;
}

int REF(reshape)(const lrc_graph *g, const lrc_node *n, void *const *in, void *out, lrc_err *err)
{
    (void)err;
    (void)g;
    memcpy(out, in[0], (size_t)lrc_shape_numel(&n->shape) * elem_bytes(n));
    return LRC_OK;
}

int REF(transpose)(const lrc_graph *g, const lrc_node *n, void *const *in, void *out, lrc_err *err)
{
    (void)err;
    const lrc_shape *x = SHAPE(0);
    int64_t xst[LRC_MAX_DIMS], st[LRC_MAX_DIMS], idx[LRC_MAX_DIMS] = {0}, s = 1;
    for (int d = x->ndim - 1; d >= 0; d--) {
        xst[d] = s;
        s *= x->dim[d];
    }
    for (int d = 0; d < x->ndim; d++) st[d] = xst[n->iattr[d]]; /* output axis d walks input axis perm[d] */
    int64_t count = lrc_shape_numel(&n->shape), src = 0;
    for (int64_t i = 0; i < count; i++) {
        if (n->dtype == LRC_I32) ((int32_t *)out)[i] = I(0)[src];
        else ((real *)out)[i] = F(0)[src];
        for (int d = n->shape.ndim - 1; d >= 0; d--) {
            src += st[d];
            if (++idx[d] < n->shape.dim[d]) break;
            src -= st[d] * n->shape.dim[d];
            idx[d] = 0;
        }
    }
    return LRC_OK;
}

int REF(depth_gain)(const lrc_graph *g, const lrc_node *n, void *const *in, void *out, lrc_err *err)
{
    (void)err;
    int64_t d = SHAPE(0)->dim[0];
    double u = log((double)n->iattr[0] + 1.0);
    double r = (double)F(1)[0] + (double)F(2)[0] * u;
    double theta = exp((double)F(3)[0] + (double)F(4)[0] * u), mag = exp(r);
    for (int64_t j = 0; j < d / 2; j++) {
        double ang = theta * pow(n->fattr[0], -2.0 * (double)j / (double)d);
        double c = cos(ang), s = sin(ang), g0 = F(0)[2 * j], g1 = F(0)[2 * j + 1];
        ((real *)out)[2 * j] = (real)(mag * (g0 * c - g1 * s));
        ((real *)out)[2 * j + 1] = (real)(mag * (g0 * s + g1 * c));
    }
    return LRC_OK;
}

int REF(cross_entropy)(const lrc_graph *g, const lrc_node *n, void *const *in, void *out, lrc_err *err)
{
    int64_t V = last_dim(SHAPE(0)), rows = lrc_shape_numel(SHAPE(1)), used = 0;
    double total = 0;
    for (int64_t r = 0; r < rows; r++) {
        int32_t y = I(1)[r];
        if (y == -100) continue;
        if (y < 0 || y >= V) {
            char b[128];
            return lrc_err_set(err, "%s = %d is outside [0, %lld) and not -100 (ignored)",
                               index_str(input_name(g, n, 1, "labels"), SHAPE(1), r, b, sizeof b), y,
                               (long long)V);
        }
        const real *x = F(0) + r * V;
        double mx = -INFINITY, sum = 0;
        for (int64_t i = 0; i < V; i++) mx = x[i] > mx ? x[i] : mx;
        for (int64_t i = 0; i < V; i++) sum += exp((double)x[i] - mx);
        total += mx + log(sum) - x[y];
        used++;
    }
    /* Like PyTorch, the mean over no positions is NaN. */
    *(real *)out = used ? (real)(total / (double)used) : NAN;
    return LRC_OK;
}

/* Decoding with a KV cache. The caches (inputs 3 and 4) are state buffers
 * that this op updates in place: rotated k and v of the new positions go
 * into rows pos.. (Hkv heads), then each new query (H heads, head h reading
 * key-value head h / (H / Hkv)) attends to rows [0, pos + t], or to the
 * last `window` of them (absolute positions). */
int REF(kv_attention)(const lrc_graph *g, const lrc_node *n, void *const *in, void *out, lrc_err *err)
{
    int64_t B = n->shape.dim[0], T = n->shape.dim[1], H = n->shape.dim[2], D = n->shape.dim[3], half = D / 2;
    int64_t Tmax = SHAPE(3)->dim[1], pos = I(5)[0], Hkv = SHAPE(1)->dim[2], G = H / Hkv;
    double scale = n->fattr[0], cap = n->fattr[2];
    lrc_rope rope = lrc_rope_of(n);
    if (pos < 0 || pos + T > Tmax)
        return lrc_err_set(err, "kv_attention: positions %lld..%lld do not fit the cache of %lld", (long long)pos,
                           (long long)(pos + T - 1), (long long)Tmax);
    real *kc = in[3], *vc = in[4];
    double *p = lrc_malloc((size_t)(pos + T) * sizeof(double)), *acc = lrc_malloc((size_t)D * sizeof(double));
    double *qr = lrc_malloc((size_t)D * sizeof(double));
    if (!p || !acc || !qr) {
        free(p), free(acc), free(qr);
        return lrc_err_nomem(err, "for %s's scratch in the reference kernels", lrc_op_name(n->op));
    }
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t h = 0; h < Hkv; h++) {
                const real *k = F(1) + ((b * T + t) * Hkv + h) * D, *v = F(2) + ((b * T + t) * Hkv + h) * D;
                real *kd = kc + ((b * Tmax + pos + t) * Hkv + h) * D, *vd = vc + ((b * Tmax + pos + t) * Hkv + h) * D;
                for (int64_t i = 0; i < half; i++) {
                    double ang = (double)(pos + t) * lrc_rope_inv_freq(&rope, i, D), c = cos(ang), s = sin(ang);
                    kd[i] = (real)(k[i] * c - k[i + half] * s);
                    kd[i + half] = (real)(k[i + half] * c + k[i] * s);
                }
                for (int64_t i = 0; i < D; i++) vd[i] = v[i];
            }
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t h = 0; h < H; h++) {
                const real *q = F(0) + ((b * T + t) * H + h) * D;
                for (int64_t i = 0; i < half; i++) {
                    double ang = (double)(pos + t) * lrc_rope_inv_freq(&rope, i, D), c = cos(ang), s = sin(ang);
                    qr[i] = (double)(real)(q[i] * c - q[i + half] * s);
                    qr[i + half] = (double)(real)(q[i + half] * c + q[i] * s);
                }
                int64_t keys = pos + t + 1, first = attn_first_key(pos + t, n->iattr[0]);
                double mx = -INFINITY, sum = 0;
                for (int64_t j = first; j < keys; j++) {
                    const real *k = kc + ((b * Tmax + j) * Hkv + h / G) * D;
                    double sc = 0;
                    for (int64_t i = 0; i < D; i++) sc += qr[i] * k[i];
                    p[j] = attn_softcap(sc * scale, cap);
                    if (p[j] > mx) mx = p[j];
                }
                for (int64_t j = first; j < keys; j++) sum += (p[j] = exp(p[j] - mx));
                for (int64_t i = 0; i < D; i++) acc[i] = 0;
                for (int64_t j = first; j < keys; j++) {
                    const real *v = vc + ((b * Tmax + j) * Hkv + h / G) * D;
                    for (int64_t i = 0; i < D; i++) acc[i] += p[j] * v[i];
                }
                real *o = (real *)out + ((b * T + t) * H + h) * D;
                for (int64_t i = 0; i < D; i++) o[i] = (real)(acc[i] / sum);
            }
    free(p);
    free(acc);
    free(qr);
    return LRC_OK;
}

int REF(layernorm)(const lrc_graph *g, const lrc_node *n, void *const *in, void *out, lrc_err *err)
{
    (void)err;
    int64_t d = last_dim(SHAPE(0)), rows = lrc_shape_numel(SHAPE(0)) / d;
    for (int64_t r = 0; r < rows; r++) {
        const real *x = F(0) + r * d;
        double mean, inv = row_mean_inv_std(x, d, n->fattr[0], &mean);
        for (int64_t i = 0; i < d; i++) ((real *)out)[r * d + i] = (real)((x[i] - mean) * inv);
    }
    return LRC_OK;
}

/* out[.., i, ..] = x[.., i + start, ..] along the axis, zero outside x */
int REF(slice)(const lrc_graph *g, const lrc_node *n, void *const *in, void *out, lrc_err *err)
{
    (void)err;
    const lrc_shape *x = SHAPE(0);
    int axis = (int)n->iattr[0];
    int64_t start = n->iattr[1], size = n->shape.dim[axis], len = x->dim[axis], inner = 1, outer = 1;
    for (int d = axis + 1; d < x->ndim; d++) inner *= x->dim[d];
    for (int d = 0; d < axis; d++) outer *= x->dim[d];
    /* an element of x: real, or i32 (which stays i32 in both precisions) */
    size_t el = n->dtype == LRC_I32 ? sizeof(int32_t) : sizeof(real);
    char *o = out;
    const char *x0 = in[0];
    for (int64_t a = 0; a < outer; a++)
        for (int64_t i = 0; i < size; i++) {
            int64_t j = i + start;
            char *dst = o + (size_t)((a * size + i) * inner) * el;
            if (j < 0 || j >= len) memset(dst, 0, (size_t)inner * el);
            else memcpy(dst, x0 + (size_t)((a * len + j) * inner) * el, (size_t)inner * el);
        }
    return LRC_OK;
}

/* i32 -> f32 as the nearest float; f32 -> i32 toward zero, and what is
 * not inside the i32 range (NaN too) INT32_MIN, as x86's cvttss2si gives
 * it (torch's .to(torch.int32) on the cpu) */
int REF(cast)(const lrc_graph *g, const lrc_node *n, void *const *in, void *out, lrc_err *err)
{
    (void)g, (void)err;
    int64_t count = lrc_shape_numel(&n->shape);
    for (int64_t i = 0; i < count; i++) {
        if (n->dtype == LRC_F32) {
            ((real *)out)[i] = (real)(float)I(0)[i];
        } else {
            double v = (double)F(0)[i];
            ((int32_t *)out)[i] = v > -2147483649.0 && v < 2147483648.0 ? (int32_t)v : INT32_MIN;
        }
    }
    return LRC_OK;
}

int REF(arange)(const lrc_graph *g, const lrc_node *n, void *const *in, void *out, lrc_err *err)
{
    (void)g, (void)in, (void)err;
    for (int64_t i = 0; i < n->shape.dim[0]; i++) ((int32_t *)out)[i] = (int32_t)i;
    return LRC_OK;
}

/* the loop's entry: the state starts as the initial value (the executors
 * run the back edge, loop_next, themselves) */
int REF(loop_state)(const lrc_graph *g, const lrc_node *n, void *const *in, void *out, lrc_err *err)
{
    (void)g;
    (void)err;
    memcpy(out, in[0], (size_t)lrc_shape_numel(&n->shape) * sizeof(real));
    return LRC_OK;
}

