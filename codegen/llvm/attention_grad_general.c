/* attention_grad_general.c — the gradient of attention's general form for
 * the cpu target: an additive bias [B|1, H|1, Tq, Tk] (and its gradient
 * where the bias depends on a parameter), Tq != Tk, Dv != Dqk. A work item
 * is a (batch, key-value head), or the whole batch where a gradient of the
 * bias sums over broadcast axes (program.c gives such a kernel one item, so
 * no two items add into the same rows). For each of its G query heads:
 *
 *   1. each row t's entries over all Tk keys: the score s (scale q . k,
 *      soft-capped, plus the bias), P = exp(s - lse) from the forward's
 *      log-sum-exp (0 for a key the row does not see or a -inf bias), and
 *      dS = P o (dP - dy_t . y_t) with dP = dy_t . v_j into scratch, the
 *      soft-cap's 1 - tanh^2 apart (the bias's gradient is dS before it);
 *   2. dq_t = scale sum_j dS[t,j] k_j, dk_j = scale sum_t dS[t,j] q_t and
 *      dv_j = sum_t P[t,j] dy_t, dk and dv summed over the G heads.
 *
 * Simple loops, vectorised along the head width (the dots by lanes of
 * partial sums, the sums of step 2 a row of them at once): the specialised
 * kernel (attention_grad.c) keeps the causal and full forms with Tq == Tk,
 * Dv == Dqk and no bias; this one runs where a padding mask or a
 * cross-attention needs a gradient. Sums run in a fixed order, so a run
 * repeats bit for bit. */
#include "kgen.h"

#include <math.h>

/* sum over i < n of A[ao + i] B[bo + i]: w lanes of partial sums over the
 * first n - n % w entries (up to 16 vectors of products added as a tree,
 * else a vector FMA a step: not a chain of scalar FMAs each waiting for the
 * last), added across, then the rest in order; acc is a scalar slot, vacc a
 * vector one */
static LLVMValueRef dot(em_t *e, int w, LLVMValueRef acc, LLVMValueRef vacc, LLVMValueRef A, LLVMValueRef ao, LLVMValueRef B,
                        LLVMValueRef bo, int64_t n)
{
    int64_t body = w > 1 ? n - n % w : 0;
    em_loop l;
    LLVMBuildStore(e->b, em_f32(e, 0), acc);
    if (body && body / w <= 16) { /* a head's width: unrolled, the products summed as a tree */
        LLVMValueRef part[16];
        int np = (int)(body / w);
        for (int c = 0; c < np; c++)
            part[c] = em_mul(e, em_load(e, A, em_iadd(e, ao, em_i64(e, c * w)), w), em_load(e, B, em_iadd(e, bo, em_i64(e, c * w)), w));
        for (int step = 1; step < np; step *= 2)
            for (int c = 0; c + step < np; c += 2 * step) part[c] = em_add(e, part[c], part[c + step]);
        LLVMBuildStore(e->b, em_hsum(e, part[0], w), acc);
    } else if (body) {
        LLVMBuildStore(e->b, em_fw(e, 0, w), vacc);
        LLVMValueRef i = em_for_begin(e, &l, em_i64(e, 0), em_i64(e, body));
        LLVMValueRef x = em_fma(e, em_load(e, A, em_iadd(e, ao, i), w), em_load(e, B, em_iadd(e, bo, i), w),
                                LLVMBuildLoad2(e->b, em_vty(e, w), vacc, ""));
        LLVMBuildStore(e->b, x, vacc);
        em_for_end(e, &l, em_i64(e, w));
        LLVMBuildStore(e->b, em_hsum(e, LLVMBuildLoad2(e->b, em_vty(e, w), vacc, ""), w), acc);
    }
    if (body == n) return LLVMBuildLoad2(e->b, e->f32, acc, "");
    LLVMValueRef i = em_for_begin(e, &l, em_i64(e, body), em_i64(e, n));
    LLVMValueRef x = em_fma(e, em_load(e, A, em_iadd(e, ao, i), 1), em_load(e, B, em_iadd(e, bo, i), 1), LLVMBuildLoad2(e->b, e->f32, acc, ""));
    LLVMBuildStore(e->b, x, acc);
    em_for_end(e, &l, em_i64(e, 1));
    return LLVMBuildLoad2(e->b, e->f32, acc, "");
}

/* The shapes and the pointers one (batch, query head) reads and writes. */
typedef struct {
    int64_t Tq, Tk, H, Hkv, D, Dv, W, bh; /* bh: the bias's head count (1 or H) */
    bool causal, bias_b, bias_h;           /* the bias varies along batch, heads */
    double scale, cap;
    int w; /* floats per vector */
    LLVMValueRef Q, K, V, DY, Y, LSE, Bias, P, S, U, acc, vacc;
    LLVMValueRef row; /* scratch: one output row's sums */
    LLVMValueRef b, h, kv; /* batch, query head, key-value head */
} gen_head;

#define QOFF(g, t, w) em_imul(e, em_iadd(e, em_imul(e, em_iadd(e, em_imul(e, (g)->b, em_i64(e, (g)->Tq)), (t)), em_i64(e, (g)->H)), (g)->h), em_i64(e, (w)))
#define KOFF(g, j, w) em_imul(e, em_iadd(e, em_imul(e, em_iadd(e, em_imul(e, (g)->b, em_i64(e, (g)->Tk)), (j)), em_i64(e, (g)->Hkv)), (g)->kv), em_i64(e, (w)))

/* Step 1 for row t: P[t, j] and dS[t, j] (and U) over every key j. */
static void entries_row(em_t *e, const gen_head *g, LLVMValueRef t, bool need_ds)
{
    LLVMValueRef lo = kg_first_key(e, t, g->W), hi = em_i64(e, g->Tk);
    if (g->causal) { /* keys j <= t, as the forward (top-left aligned where Tq != Tk) */
        LLVMValueRef t1 = em_iadd(e, t, em_i64(e, 1));
        hi = LLVMBuildSelect(e->b, LLVMBuildICmp(e->b, LLVMIntSLT, t1, hi, ""), t1, hi, "");
    }
    LLVMValueRef qo = QOFF(g, t, g->D), yo = QOFF(g, t, g->Dv);
    LLVMValueRef lse = em_load(e, g->LSE, em_iadd(e, em_imul(e, em_iadd(e, em_imul(e, g->b, em_i64(e, g->Tq)), t), em_i64(e, g->H)), g->h), 1);
    LLVMValueRef rd = need_ds ? dot(e, g->w, g->acc, g->vacc, g->DY, yo, g->Y, yo, g->Dv) : NULL; /* rowsum(dP o P) = dy_t . y_t */
    LLVMValueRef brow = NULL;
    if (g->Bias) {
        LLVMValueRef bb = g->bias_b ? g->b : em_i64(e, 0), bh = g->bias_h ? g->h : em_i64(e, 0);
        brow = em_imul(e, em_iadd(e, em_imul(e, em_iadd(e, em_imul(e, bb, em_i64(e, g->bh)), bh), em_i64(e, g->Tq)), t), em_i64(e, g->Tk));
    }
    LLVMValueRef row = em_imul(e, t, em_i64(e, g->Tk));
    em_loop lj;
    LLVMValueRef j = em_for_begin(e, &lj, em_i64(e, 0), em_i64(e, g->Tk));
    LLVMValueRef s = em_mul(e, dot(e, g->w, g->acc, g->vacc, g->Q, qo, g->K, KOFF(g, j, g->D), g->D), em_f32(e, g->scale)), u = NULL;
    if (g->cap > 0) {
        LLVMValueRef th = em_tanh(e, LLVMBuildFDiv(e->b, s, em_f32(e, g->cap), ""), 1);
        s = em_mul(e, th, em_f32(e, g->cap));
        u = LLVMBuildFSub(e->b, em_f32(e, 1.0), em_mul(e, th, th), "");
    }
    if (brow) s = em_add(e, s, em_load(e, g->Bias, em_iadd(e, brow, j), 1));
    /* a key outside the row's range or under a -inf bias: P = 0 (em_exp's clamp would give e^-87) */
    LLVMValueRef seen = LLVMBuildAnd(e->b, LLVMBuildICmp(e->b, LLVMIntSGE, j, lo, ""), LLVMBuildICmp(e->b, LLVMIntSLT, j, hi, ""), "");
    seen = LLVMBuildAnd(e->b, seen, LLVMBuildFCmp(e->b, LLVMRealOGT, s, em_f32(e, -INFINITY), ""), "");
    LLVMValueRef p = LLVMBuildSelect(e->b, seen, em_exp(e, LLVMBuildFSub(e->b, s, lse, ""), 1), em_f32(e, 0), "");
    LLVMValueRef at = em_iadd(e, row, j);
    em_store(e, g->P, at, p, 1);
    if (need_ds) {
        LLVMValueRef dp = dot(e, g->w, g->acc, g->vacc, g->DY, yo, g->V, KOFF(g, j, g->Dv), g->Dv);
        em_store(e, g->S, at, em_mul(e, p, LLVMBuildFSub(e->b, dp, rd, "")), 1);
        if (u) em_store(e, g->U, at, u, 1);
    }
    em_for_end(e, &lj, em_i64(e, 1));
}

/* over i < n, vectors of w then one at a time: row[i] = fma(m, R[ro + i], row[i]) */
static void axpy_row(em_t *e, int w, LLVMValueRef row, LLVMValueRef m, LLVMValueRef R, LLVMValueRef ro, int64_t n)
{
    int64_t body = w > 1 ? n - n % w : 0;
    em_loop l;
    if (body) {
        LLVMValueRef i = em_for_begin(e, &l, em_i64(e, 0), em_i64(e, body));
        em_store(e, row, i, em_fma(e, em_splat(e, m, w), em_load(e, R, em_iadd(e, ro, i), w), em_load(e, row, i, w)), w);
        em_for_end(e, &l, em_i64(e, w));
    }
    if (body == n) return;
    LLVMValueRef i = em_for_begin(e, &l, em_i64(e, body), em_i64(e, n));
    em_store(e, row, i, em_fma(e, m, em_load(e, R, em_iadd(e, ro, i), 1), em_load(e, row, i, 1)), 1);
    em_for_end(e, &l, em_i64(e, 1));
}

/* Step 2 for one gradient (which 0, 1, 2): output row r over `rows`, its
 * `width` entries each a sum over `inner` rows of M's entry times R's row,
 * in that order (the row's entries side by side in the scratch row, a
 * vector at a time); added into O where G heads share it (add). */
static void grad_out(em_t *e, const gen_head *g, int which, LLVMValueRef O, bool add)
{
    int64_t rows = which ? g->Tk : g->Tq, inner = which ? g->Tq : g->Tk, width = which == 2 ? g->Dv : g->D;
    LLVMValueRef M = which == 2 ? g->P : g->S, R = which == 0 ? g->K : which == 1 ? g->Q : g->DY;
    double f = which == 2 ? 1.0 : g->scale;
    em_loop lr, li, lx;
    LLVMValueRef r = em_for_begin(e, &lr, em_i64(e, 0), em_i64(e, rows));
    LLVMValueRef oo = which ? KOFF(g, r, width) : QOFF(g, r, width);
    LLVMValueRef i = em_for_begin(e, &li, em_i64(e, 0), em_i64(e, width));
    em_store(e, g->row, i, em_f32(e, 0), 1);
    em_for_end(e, &li, em_i64(e, 1));
    LLVMValueRef x = em_for_begin(e, &lx, em_i64(e, 0), em_i64(e, inner));
    /* M[t, j]: t the query row, j the key */
    LLVMValueRef at = which ? em_iadd(e, em_imul(e, x, em_i64(e, g->Tk)), r) : em_iadd(e, em_imul(e, r, em_i64(e, g->Tk)), x);
    LLVMValueRef m = em_load(e, M, at, 1);
    if (which != 2 && g->U) m = em_mul(e, m, em_load(e, g->U, at, 1));
    axpy_row(e, g->w, g->row, m, R, which == 0 ? KOFF(g, x, width) : QOFF(g, x, width), width);
    em_for_end(e, &lx, em_i64(e, 1));
    i = em_for_begin(e, &li, em_i64(e, 0), em_i64(e, width));
    LLVMValueRef v = em_mul(e, em_load(e, g->row, i, 1), em_f32(e, f)), oat = em_iadd(e, oo, i);
    em_store(e, O, oat, add ? em_add(e, em_load(e, O, oat, 1), v) : v, 1);
    em_for_end(e, &li, em_i64(e, 1));
    em_for_end(e, &lr, em_i64(e, 1));
}

/* The bias's gradient for one (batch, query head): dS before the soft-cap's
 * factor, added where the bias is broadcast (the buffer zeroed first). */
static void grad_bias(em_t *e, const gen_head *g, LLVMValueRef O, bool add)
{
    LLVMValueRef bb = g->bias_b ? g->b : em_i64(e, 0), bh = g->bias_h ? g->h : em_i64(e, 0);
    LLVMValueRef base = em_imul(e, em_iadd(e, em_imul(e, bb, em_i64(e, g->bh)), bh), em_i64(e, g->Tq * g->Tk));
    em_loop l;
    LLVMValueRef x = em_for_begin(e, &l, em_i64(e, 0), em_i64(e, g->Tq * g->Tk));
    LLVMValueRef v = em_load(e, g->S, x, 1), at = em_iadd(e, base, x);
    em_store(e, O, at, add ? em_add(e, em_load(e, O, at, 1), v) : v, 1);
    em_for_end(e, &l, em_i64(e, 1));
}

/* zeros into O[0, n) */
static void zero(em_t *e, LLVMValueRef O, LLVMValueRef from, int64_t n)
{
    em_loop l;
    LLVMValueRef x = em_for_begin(e, &l, em_i64(e, 0), em_i64(e, n));
    em_store(e, O, em_iadd(e, from, x), em_f32(e, 0), 1);
    em_for_end(e, &l, em_i64(e, 1));
}

bool kg_attention_grad_is_general(const lrc_graph *g, const lrc_node *a)
{
    const lrc_shape *qs = &g->nodes[a->in[0]].shape;
    return a->n_in > 6 || g->nodes[a->in[1]].shape.dim[1] != qs->dim[1] || g->nodes[a->in[2]].shape.dim[3] != qs->dim[3];
}

void kg_attention_grad_general(kgen *k)
{
    em_t *e = k->e;
    const lrc_graph *graph = k->g;
    const lrc_node *a = &graph->nodes[k->gr->anchor];
    const lrc_shape *qs = &graph->nodes[a->in[0]].shape, *vs = &graph->nodes[a->in[2]].shape;
    const lrc_shape *bs = a->n_in > 6 ? &graph->nodes[a->in[6]].shape : NULL;
    gen_head g = {.Tq = qs->dim[1], .Tk = vs->dim[1], .H = qs->dim[2], .Hkv = vs->dim[2], .D = qs->dim[3], .Dv = vs->dim[3],
                  .W = a->iattr[2], .causal = a->iattr[0] != 0, .scale = a->fattr[0], .cap = a->fattr[1]};
    int64_t B = qs->dim[0], Gq = g.H / g.Hkv;
    if (bs) g.bh = bs->dim[1], g.bias_b = bs->dim[0] > 1, g.bias_h = bs->dim[1] > 1;
    LLVMValueRef out_of[4] = {NULL, NULL, NULL, NULL};
    for (int j = 0; j < k->gr->n_nodes; j++) {
        const lrc_node *m = &graph->nodes[k->gr->nodes[j]];
        if (m->op == LRC_OP_ATTENTION_GRAD) out_of[m->iattr[1]] = kg_ptr(k, k->gr->nodes[j]);
    }
    bool need_ds = out_of[0] || out_of[1] || out_of[3];
    /* a bias broadcast along an axis the items split: summed by one item (program.c's attention_grad_items) */
    bool bias_sum = out_of[3] && ((!g.bias_b && B > 1) || (!g.bias_h && g.H > 1));
    g.Q = kg_ptr(k, a->in[0]), g.K = kg_ptr(k, a->in[1]), g.V = kg_ptr(k, a->in[2]), g.DY = kg_ptr(k, a->in[3]);
    g.Y = kg_ptr(k, a->in[4]), g.LSE = kg_ptr(k, a->in[5]), g.Bias = bs ? kg_ptr(k, a->in[6]) : NULL;
    g.w = k->vec;
    g.acc = em_alloca(e, e->f32, "acc"), g.vacc = em_alloca(e, em_vty(e, g.w), "vacc");
    LLVMValueRef rows_bytes = em_i64(e, g.Tq * g.Tk * 4);
    g.P = em_malloc(e, rows_bytes), g.S = em_malloc(e, rows_bytes), g.U = g.cap > 0 ? em_malloc(e, rows_bytes) : NULL;
    g.row = em_malloc(e, em_i64(e, (g.D > g.Dv ? g.D : g.Dv) * 4));
    if (bias_sum) zero(e, out_of[3], em_i64(e, 0), lrc_shape_numel(bs));
    em_loop li, lg;
    LLVMValueRef item = em_for_begin(e, &li, e->begin, e->end);
    /* one item of B Hkv, or (bias_sum) every (batch, key-value head) in the one item */
    LLVMValueRef first = bias_sum ? em_i64(e, 0) : item, last = bias_sum ? em_i64(e, B * g.Hkv) : em_iadd(e, item, em_i64(e, 1));
    em_loop lp, lt;
    LLVMValueRef pair = em_for_begin(e, &lp, first, last);
    g.b = LLVMBuildSDiv(e->b, pair, em_i64(e, g.Hkv), ""), g.kv = LLVMBuildSRem(e->b, pair, em_i64(e, g.Hkv), "");
    if (Gq > 1) /* dk and dv rows of this pair: sums over its query heads */
        for (int w = 1; w < 3; w++)
            if (out_of[w]) {
                int64_t width = w == 2 ? g.Dv : g.D;
                LLVMValueRef j = em_for_begin(e, &lt, em_i64(e, 0), em_i64(e, g.Tk));
                zero(e, out_of[w], KOFF(&g, j, width), width);
                em_for_end(e, &lt, em_i64(e, 1));
            }
    LLVMValueRef gi = em_for_begin(e, &lg, em_i64(e, 0), em_i64(e, Gq));
    g.h = em_iadd(e, em_imul(e, g.kv, em_i64(e, Gq)), gi);
    LLVMValueRef t = em_for_begin(e, &lt, em_i64(e, 0), em_i64(e, g.Tq));
    entries_row(e, &g, t, need_ds);
    em_for_end(e, &lt, em_i64(e, 1));
    for (int which = 0; which < 3; which++)
        if (out_of[which]) grad_out(e, &g, which, out_of[which], which > 0 && Gq > 1);
    if (out_of[3]) grad_bias(e, &g, out_of[3], bias_sum);
    em_for_end(e, &lg, em_i64(e, 1));
    em_for_end(e, &lp, em_i64(e, 1));
    em_for_end(e, &li, em_i64(e, 1));
    em_free(e, g.P);
    em_free(e, g.S);
    em_free(e, g.row);
    if (g.U) em_free(e, g.U);
}
