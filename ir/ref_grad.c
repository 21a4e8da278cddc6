/* ref_grad.c — reference implementations of the gradient ops: plain C,
 * f32 storage, f64 arithmetic, as ref_ops.c (and compiled twice like it). */
#include "ref_template.h"

int REF(matmul_nn)(const lrc_graph *g, const lrc_node *n, void *const *in, void *out, lrc_err *err)
{
    (void)err;
    int64_t N = SHAPE(1)->dim[0], K = SHAPE(1)->dim[1], M = lrc_shape_numel(SHAPE(0)) / N;
    for (int64_t m = 0; m < M; m++)
        for (int64_t k = 0; k < K; k++) {
            double acc = 0;
            for (int64_t j = 0; j < N; j++) acc += (double)F(0)[m * N + j] * F(1)[j * K + k];
            ((real *)out)[m * K + k] = (real)acc;
        }
    return LRC_OK;
}

int REF(matmul_tn)(const lrc_graph *g, const lrc_node *n, void *const *in, void *out, lrc_err *err)
{
    (void)err;
    int64_t N = last_dim(SHAPE(0)), K = last_dim(SHAPE(1)), M = lrc_shape_numel(SHAPE(0)) / N;
    for (int64_t j = 0; j < N; j++)
        for (int64_t k = 0; k < K; k++) {
            double acc = 0;
            for (int64_t m = 0; m < M; m++) acc += (double)F(0)[m * N + j] * F(1)[m * K + k];
            ((real *)out)[j * K + k] = (real)acc;
        }
    return LRC_OK;
}

int REF(embedding_grad)(const lrc_graph *g, const lrc_node *n, void *const *in, void *out, lrc_err *err)
{
    (void)err;
    int64_t rows = lrc_shape_numel(SHAPE(0)), d = n->shape.dim[1], total = lrc_shape_numel(&n->shape);
    double *acc = lrc_calloc((size_t)total, sizeof(double));
    if (!acc) return lrc_err_nomem(err, "for %s's scratch in the reference kernels", lrc_op_name(n->op));
    for (int64_t r = 0; r < rows; r++)
        for (int64_t i = 0; i < d; i++) acc[(int64_t)I(0)[r] * d + i] += F(1)[r * d + i];
    for (int64_t i = 0; i < total; i++) ((real *)out)[i] = (real)acc[i];
    free(acc);
    return LRC_OK;
}

int REF(sum_to)(const lrc_graph *g, const lrc_node *n, void *const *in, void *out, lrc_err *err)
{
    (void)err;
    const lrc_shape *x = SHAPE(0), *o = &n->shape;
    int64_t total = lrc_shape_numel(o), count = lrc_shape_numel(x), idx[LRC_MAX_DIMS] = {0};
    double *acc = lrc_calloc((size_t)total + 1, sizeof(double));
    if (!acc) return lrc_err_nomem(err, "for %s's scratch in the reference kernels", lrc_op_name(n->op));
    for (int64_t i = 0; i < count; i++) {
        /* the output index: x's index with broadcast axes dropped or set to 0 */
        int64_t oi = 0;
        for (int d = 0; d < o->ndim; d++) {
            int xd = x->ndim - o->ndim + d;
            oi = oi * o->dim[d] + (o->dim[d] == 1 ? 0 : idx[xd]);
        }
        acc[oi] += F(0)[i];
        for (int d = x->ndim - 1; d >= 0; d--) {
            if (++idx[d] < x->dim[d]) break;
            idx[d] = 0;
        }
    }
    for (int64_t i = 0; i < total; i++) ((real *)out)[i] = (real)acc[i];
    free(acc);
    return LRC_OK;
}

int REF(rmsnorm_grad)(const lrc_graph *g, const lrc_node *n, void *const *in, void *out, lrc_err *err)
{
    (void)err;
    int64_t d = last_dim(SHAPE(0)), rows = lrc_shape_numel(SHAPE(0)) / d;
    for (int64_t r = 0; r < rows; r++) {
        const real *x = F(0) + r * d, *dy = F(1) + r * d;
        double ss = 0, dot = 0;
        for (int64_t i = 0; i < d; i++) ss += (double)x[i] * x[i], dot += (double)dy[i] * x[i];
        double rs = 1.0 / sqrt(ss / (double)d + n->fattr[0]);
        for (int64_t i = 0; i < d; i++)
            ((real *)out)[r * d + i] = (real)(rs * dy[i] - x[i] * rs * rs * rs * dot / (double)d);
    }
    return LRC_OK;
}

int REF(rope_grad)(const lrc_graph *g, const lrc_node *n, void *const *in, void *out, lrc_err *err)
{
    (void)err;
    (void)g;
    return REF(rotate)(n, F(0), out, -1);
}

/* Row t's probabilities P[t][j] over keys j < Tk and dS[t][j] =
 * P o (dP - rowsum(dP o P)), dP = dy_t . v_j, times the soft-cap's
 * tanh'; dSb the same before that factor (the bias's gradient: the bias is
 * added after the cap). A row that sees no key has P and dS zeros. */
static void attn_grad_row(const lrc_graph *g, const lrc_node *n, void *const *in, int64_t b, int64_t h, int64_t t, double *P, double *dS,
                          double *dSb)
{
    const lrc_shape *qs = SHAPE(0), *ks = SHAPE(1);
    int64_t Tq = qs->dim[1], H = qs->dim[2], D = qs->dim[3], Tk = ks->dim[1], Hkv = ks->dim[2], G = H / Hkv, Dv = SHAPE(2)->dim[3];
    int64_t keys = n->iattr[0] && t + 1 < Tk ? t + 1 : Tk, first = attn_first_key(t, n->iattr[2]);
    double scale = n->fattr[0], cap = n->fattr[1], mx = -INFINITY, sum = 0, rowdot = 0;
    const real *q = F(0) + ((b * Tq + t) * H + h) * D, *dy = F(3) + ((b * Tq + t) * H + h) * Dv, *bias = NULL;
    if (n->n_in > 6) {
        const lrc_shape *bs = SHAPE(6);
        bias = F(6) + (((bs->dim[0] > 1 ? b : 0) * bs->dim[1] + (bs->dim[1] > 1 ? h : 0)) * Tq + t) * Tk;
    }
    for (int64_t j = 0; j < Tk; j++) {
        double s = -INFINITY, dcap = 1;
        if (j >= first && j < keys) {
            const real *k = F(1) + ((b * Tk + j) * Hkv + h / G) * D;
            s = 0;
            for (int64_t i = 0; i < D; i++) s += (double)q[i] * k[i];
            s *= scale;
            if (cap > 0) {
                double th = tanh(s / cap);
                s = cap * th;
                dcap = 1 - th * th;
            }
            if (bias) s += bias[j];
        }
        P[j] = s;
        dS[j] = dcap; /* for now */
        if (s > mx) mx = s;
    }
    for (int64_t j = 0; j < Tk; j++) sum += (P[j] = mx > -INFINITY && P[j] > -INFINITY ? exp(P[j] - mx) : 0);
    for (int64_t j = 0; j < Tk; j++) {
        const real *v = F(2) + ((b * Tk + j) * Hkv + h / G) * Dv;
        double dp = 0;
        if (sum > 0) P[j] /= sum;
        for (int64_t i = 0; i < Dv; i++) dp += (double)dy[i] * v[i];
        double dcap = dS[j];
        dS[j] = dp;
        dSb[j] = dcap; /* the factor, kept until rowdot is known */
        rowdot += dp * P[j];
    }
    for (int64_t j = 0; j < Tk; j++) {
        double dcap = dSb[j], d = P[j] * (dS[j] - rowdot);
        dSb[j] = d;
        dS[j] = P[j] != 0 ? d * dcap : d;
    }
}

/* The general form (a bias, input 6; Tq != Tk; Dv != Dqk): the gradient of
 * q (which 0), k (1), v (2) or the bias (3: dS summed over the bias's
 * broadcast axes), from the definition as below. */
static int attention_grad_general(const lrc_graph *g, const lrc_node *n, void *const *in, void *out, lrc_err *err)
{
    const lrc_shape *qs = SHAPE(0), *ks = SHAPE(1);
    int64_t B = qs->dim[0], Tq = qs->dim[1], H = qs->dim[2], D = qs->dim[3], Tk = ks->dim[1], Hkv = ks->dim[2], G = H / Hkv;
    int64_t Dv = SHAPE(2)->dim[3];
    int which = (int)n->iattr[1];
    double scale = n->fattr[0];
    double *P = lrc_malloc((size_t)(Tq * Tk) * sizeof(double)), *dS = lrc_malloc((size_t)(Tq * Tk) * sizeof(double));
    double *dSb = lrc_malloc((size_t)(Tq * Tk) * sizeof(double));
    if (!P || !dS || !dSb) {
        free(P), free(dS), free(dSb);
        return lrc_err_nomem(err, "for %s's scratch in the reference kernels", lrc_op_name(n->op));
    }
    int64_t total = lrc_shape_numel(&n->shape);
    double *acc = lrc_malloc((size_t)total * sizeof(double));
    if (!acc) {
        free(P), free(dS), free(dSb);
        return lrc_err_nomem(err, "for %s's scratch in the reference kernels", lrc_op_name(n->op));
    }
    memset(acc, 0, (size_t)total * sizeof(double));
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++) {
            for (int64_t t = 0; t < Tq; t++) attn_grad_row(g, n, in, b, h, t, P + t * Tk, dS + t * Tk, dSb + t * Tk);
            if (which == 3) {
                const lrc_shape *bs = &n->shape;
                double *o = acc + ((bs->dim[0] > 1 ? b : 0) * bs->dim[1] + (bs->dim[1] > 1 ? h : 0)) * Tq * Tk;
                for (int64_t x = 0; x < Tq * Tk; x++) o[x] += dSb[x];
                continue;
            }
            int64_t rows = which ? Tk : Tq, width = which == 2 ? Dv : D, inner = which ? Tq : Tk;
            for (int64_t t = 0; t < rows; t++)
                for (int64_t i = 0; i < width; i++) {
                    double s = 0;
                    for (int64_t j = 0; j < inner; j++) {
                        if (which == 0) s += dS[t * Tk + j] * F(1)[((b * Tk + j) * Hkv + h / G) * D + i] * scale;
                        else if (which == 1) s += dS[j * Tk + t] * F(0)[((b * Tq + j) * H + h) * D + i] * scale;
                        else s += P[j * Tk + t] * F(3)[((b * Tq + j) * H + h) * Dv + i];
                    }
                    acc[which ? ((b * Tk + t) * Hkv + h / G) * width + i : ((b * Tq + t) * H + h) * D + i] += s;
                }
        }
    for (int64_t x = 0; x < total; x++) ((real *)out)[x] = (real)acc[x];
    free(P), free(dS), free(dSb), free(acc);
    return LRC_OK;
}

/* Recomputes each (batch, query head)'s probabilities from q and k: the
 * reference takes the definition, not the forward's y and lse (inputs 4
 * and 5), which the compiled targets read;
 * dS = P o (dP - rowsum(dP o P)), times the soft-cap's tanh' = 1 - (u/cap)^2
 * where u = cap tanh(s/cap) is the capped score. dk and dv of a key-value
 * head sum over the query heads that read it (GQA). */
int REF(attention_grad)(const lrc_graph *g, const lrc_node *n, void *const *in, void *out, lrc_err *err)
{
    if (n->n_in > 6 || SHAPE(1)->dim[1] != SHAPE(0)->dim[1] || SHAPE(2)->dim[3] != SHAPE(0)->dim[3])
        return attention_grad_general(g, n, in, out, err);
    const lrc_shape *qs = SHAPE(0);
    int64_t B = qs->dim[0], T = qs->dim[1], H = qs->dim[2], D = qs->dim[3], Hkv = SHAPE(1)->dim[2], G = H / Hkv;
    int which = (int)n->iattr[1];
    int64_t window = n->iattr[2];
    double scale = n->fattr[0], cap = n->fattr[1];
    double *P = lrc_malloc((size_t)(T * T) * sizeof(double)), *dS = lrc_malloc((size_t)(T * T) * sizeof(double));
    double *dcap = cap > 0 ? lrc_malloc((size_t)(T * T) * sizeof(double)) : NULL;
    if (!P || !dS || (cap > 0 && !dcap)) {
        free(P), free(dS), free(dcap);
        return lrc_err_nomem(err, "for %s's scratch in the reference kernels", lrc_op_name(n->op));
    }
    if (which && G > 1) memset(out, 0, (size_t)lrc_shape_numel(&n->shape) * sizeof(real));
#define AT(k, b, t, h) (F(k) + (((b) * T + (t)) * H + (h)) * D)
#define KV(k, b, t, h) (F(k) + (((b) * T + (t)) * Hkv + (h) / G) * D)
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++) {
            for (int64_t t = 0; t < T; t++) {
                int64_t keys = n->iattr[0] ? t + 1 : T, first = attn_first_key(t, window);
                double mx = -INFINITY, sum = 0, rowdot = 0;
                for (int64_t j = 0; j < T; j++) {
                    double s = -INFINITY;
                    if (j >= first && j < keys) {
                        s = 0;
                        for (int64_t i = 0; i < D; i++) s += (double)AT(0, b, t, h)[i] * KV(1, b, j, h)[i];
                        s *= scale;
                        if (cap > 0) {
                            double th = tanh(s / cap);
                            s = cap * th;
                            dcap[t * T + j] = 1 - th * th;
                        }
                    }
                    P[t * T + j] = s;
                    if (s > mx) mx = s;
                }
                for (int64_t j = 0; j < T; j++) sum += (P[t * T + j] = j >= first && j < keys ? exp(P[t * T + j] - mx) : 0);
                for (int64_t j = 0; j < T; j++) {
                    P[t * T + j] /= sum;
                    double dp = 0; /* dP[t][j] = dy_t . v_j */
                    for (int64_t i = 0; i < D; i++) dp += (double)AT(3, b, t, h)[i] * KV(2, b, j, h)[i];
                    dS[t * T + j] = dp;
                    rowdot += dp * P[t * T + j];
                }
                for (int64_t j = 0; j < T; j++) {
                    dS[t * T + j] = P[t * T + j] * (dS[t * T + j] - rowdot);
                    if (cap > 0 && P[t * T + j] != 0) dS[t * T + j] *= dcap[t * T + j];
                }
            }
            for (int64_t t = 0; t < T; t++)
                for (int64_t i = 0; i < D; i++) {
                    double acc = 0;
                    for (int64_t j = 0; j < T; j++) {
                        if (which == 0) acc += dS[t * T + j] * KV(1, b, j, h)[i] * scale; /* dq_t = sum_j dS[t,j] k_j */
                        else if (which == 1) acc += dS[j * T + t] * AT(0, b, j, h)[i] * scale; /* dk_t = sum_j dS[j,t] q_j */
                        else acc += P[j * T + t] * AT(3, b, j, h)[i]; /* dv_t = sum_j P[j,t] dy_j */
                    }
                    int64_t at = which ? ((b * T + t) * Hkv + h / G) * D + i : ((b * T + t) * H + h) * D + i;
                    if (which && G > 1) ((real *)out)[at] += (real)acc;
                    else ((real *)out)[at] = (real)acc;
                }
        }
#undef AT
#undef KV
    free(P);
    free(dS);
    free(dcap);
    return LRC_OK;
}

int REF(softmax_grad)(const lrc_graph *g, const lrc_node *n, void *const *in, void *out, lrc_err *err)
{
    (void)err;
    (void)g;
    int64_t d = last_dim(&n->shape), rows = lrc_shape_numel(&n->shape) / d;
    for (int64_t r = 0; r < rows; r++) {
        const real *y = F(0) + r * d, *dy = F(1) + r * d;
        double dot = 0;
        for (int64_t i = 0; i < d; i++) dot += (double)dy[i] * y[i];
        for (int64_t i = 0; i < d; i++) ((real *)out)[r * d + i] = (real)(y[i] * (dy[i] - dot));
    }
    return LRC_OK;
}

/* g[2j] = m (g0 c - g1 s), g[2j+1] = m (g0 s + g1 c) with m = e^(a + b u),
 * angle theta f_j, theta = e^(ar + br u), f_j = base^(-2j/d). */
int REF(depth_gain_grad)(const lrc_graph *g, const lrc_node *n, void *const *in, void *out, lrc_err *err)
{
    (void)err;
    int64_t d = SHAPE(0)->dim[0];
    int which = (int)n->iattr[1];
    double u = log((double)n->iattr[0] + 1.0), m = exp((double)F(1)[0] + (double)F(2)[0] * u);
    double theta = exp((double)F(3)[0] + (double)F(4)[0] * u), dmag = 0, dtheta = 0;
    const real *gam = F(0), *dy = F(5);
    for (int64_t j = 0; j < d / 2; j++) {
        double f = pow(n->fattr[0], -2.0 * (double)j / (double)d), c = cos(theta * f), s = sin(theta * f);
        double g0 = m * (gam[2 * j] * c - gam[2 * j + 1] * s), g1 = m * (gam[2 * j] * s + gam[2 * j + 1] * c);
        double dy0 = dy[2 * j], dy1 = dy[2 * j + 1];
        if (which == 0) {
            ((real *)out)[2 * j] = (real)(m * (dy0 * c + dy1 * s));
            ((real *)out)[2 * j + 1] = (real)(m * (-dy0 * s + dy1 * c));
        }
        dmag += dy0 * g0 + dy1 * g1;        /* d g / d log m = g */
        dtheta += f * (dy1 * g0 - dy0 * g1); /* d g0 / d theta = -f g1, d g1 / d theta = f g0 */
    }
    double v = which == 1 ? dmag : which == 2 ? dmag * u : which == 3 ? dtheta * theta : dtheta * theta * u;
    if (which > 0) ((real *)out)[0] = (real)v;
    return LRC_OK;
}

int REF(cross_entropy_grad)(const lrc_graph *g, const lrc_node *n, void *const *in, void *out, lrc_err *err)
{
    int64_t V = last_dim(SHAPE(0)), rows = lrc_shape_numel(SHAPE(1)), used = 0;
    for (int64_t r = 0; r < rows; r++) used += I(1)[r] != -100;
    for (int64_t r = 0; r < rows; r++) {
        const real *x = F(0) + r * V;
        real *o = (real *)out + r * V;
        int32_t y = I(1)[r];
        if (y == -100) {
            memset(o, 0, (size_t)V * sizeof(real));
            continue;
        }
        if (y < 0 || y >= V) return lrc_err_set(err, "labels: %d is outside [0, %lld) and not -100", y, (long long)V);
        double mx = -INFINITY, sum = 0;
        for (int64_t i = 0; i < V; i++) mx = x[i] > mx ? x[i] : mx;
        for (int64_t i = 0; i < V; i++) sum += exp((double)x[i] - mx);
        for (int64_t i = 0; i < V; i++) o[i] = (real)((exp((double)x[i] - mx) / sum - (i == y)) / (double)used);
    }
    return LRC_OK;
}

/* dx = inv (dy - mean(dy) - xh mean(dy xh)), xh = (x - mean) inv */
int REF(layernorm_grad)(const lrc_graph *g, const lrc_node *n, void *const *in, void *out, lrc_err *err)
{
    (void)err;
    int64_t d = last_dim(SHAPE(0)), rows = lrc_shape_numel(SHAPE(0)) / d;
    for (int64_t r = 0; r < rows; r++) {
        const real *x = F(0) + r * d, *dy = F(1) + r * d;
        double mean, sdy = 0, sdyx = 0, inv = row_mean_inv_std(x, d, n->fattr[0], &mean);
        for (int64_t i = 0; i < d; i++) {
            sdy += dy[i];
            sdyx += dy[i] * (x[i] - mean) * inv;
        }
        sdy /= (double)d;
        sdyx /= (double)d;
        for (int64_t i = 0; i < d; i++)
            ((real *)out)[r * d + i] = (real)(inv * (dy[i] - sdy - (x[i] - mean) * inv * sdyx));
    }
    return LRC_OK;
}
