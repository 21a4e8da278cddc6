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

/* query rows whose P and dS are in the scratch at once: 16 rows of 4096
 * keys are 256 KiB each, in a core's L2 */
#define ROWS_A_BLOCK 16

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
    LLVMValueRef row;    /* scratch: a dq row's sums */
    LLVMValueRef dk, dv; /* scratch: every key's sums of dk and dv over the blocks so far */
    LLVMValueRef b, h, kv; /* batch, query head, key-value head */
} gen_head;

#define QOFF(g, t, w) em_imul(e, em_iadd(e, em_imul(e, em_iadd(e, em_imul(e, (g)->b, em_i64(e, (g)->Tq)), (t)), em_i64(e, (g)->H)), (g)->h), em_i64(e, (w)))
#define KOFF(g, j, w) em_imul(e, em_iadd(e, em_imul(e, em_iadd(e, em_imul(e, (g)->b, em_i64(e, (g)->Tk)), (j)), em_i64(e, (g)->Hkv)), (g)->kv), em_i64(e, (w)))

/* Step 1 for row t: P[t, j] and dS[t, j] (and U) over every key j, in the
 * block's scratch rows from t0. */
static void entries_row(em_t *e, const gen_head *g, LLVMValueRef t, LLVMValueRef t0, bool need_ds)
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
    LLVMValueRef row = em_imul(e, LLVMBuildSub(e->b, t, t0, ""), em_i64(e, g->Tk));
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

/* over i < n, vectors of w then one at a time:
 * sums[so + i] = fma(m, R[ro + i], sums[so + i]) (so NULL: 0) */
static void axpy_at(em_t *e, int w, LLVMValueRef sums, LLVMValueRef m, LLVMValueRef R, LLVMValueRef ro, int64_t n, LLVMValueRef so)
{
    int64_t body = w > 1 ? n - n % w : 0;
    em_loop l;
    if (!so) so = em_i64(e, 0);
    if (body) {
        LLVMValueRef i = em_for_begin(e, &l, em_i64(e, 0), em_i64(e, body)), at = em_iadd(e, so, i);
        em_store(e, sums, at, em_fma(e, em_splat(e, m, w), em_load(e, R, em_iadd(e, ro, i), w), em_load(e, sums, at, w)), w);
        em_for_end(e, &l, em_i64(e, w));
    }
    if (body == n) return;
    LLVMValueRef i = em_for_begin(e, &l, em_i64(e, body), em_i64(e, n)), at = em_iadd(e, so, i);
    em_store(e, sums, at, em_fma(e, m, em_load(e, R, em_iadd(e, ro, i), 1), em_load(e, sums, at, 1)), 1);
    em_for_end(e, &l, em_i64(e, 1));
}

/* Step 2 for the rows t of a block (from t0, n of them), each row's P and
 * dS in the scratch: dq_t = scale sum_j dS[t, j] k_j into O; and into the
 * sums over every key j, sum_t dS[t, j] q_t (dk) and sum_t P[t, j] dy_t
 * (dv), block after block, so each entry still adds its t in order: the
 * block's P and dS stay in cache where the whole Tq x Tk of them did not. */
static void grad_block(em_t *e, const gen_head *g, LLVMValueRef t0, LLVMValueRef n, LLVMValueRef *out_of)
{
    em_loop lt, lj, li;
    LLVMValueRef r = em_for_begin(e, &lt, em_i64(e, 0), n);
    LLVMValueRef t = em_iadd(e, t0, r), rowat = em_imul(e, r, em_i64(e, g->Tk));
    if (out_of[0]) { /* dq_t: its own row of sums, scaled and stored once */
        LLVMValueRef i = em_for_begin(e, &li, em_i64(e, 0), em_i64(e, g->D));
        em_store(e, g->row, i, em_f32(e, 0), 1);
        em_for_end(e, &li, em_i64(e, 1));
    }
    LLVMValueRef j = em_for_begin(e, &lj, em_i64(e, 0), em_i64(e, g->Tk));
    LLVMValueRef at = em_iadd(e, rowat, j);
    if (out_of[0] || out_of[1]) {
        LLVMValueRef m = em_load(e, g->S, at, 1);
        if (g->U) m = em_mul(e, m, em_load(e, g->U, at, 1));
        if (out_of[0]) axpy_at(e, g->w, g->row, m, g->K, KOFF(g, j, g->D), g->D, NULL);
        if (out_of[1]) axpy_at(e, g->w, g->dk, m, g->Q, QOFF(g, t, g->D), g->D, em_imul(e, j, em_i64(e, g->D)));
    }
    if (out_of[2]) axpy_at(e, g->w, g->dv, em_load(e, g->P, at, 1), g->DY, QOFF(g, t, g->Dv), g->Dv, em_imul(e, j, em_i64(e, g->Dv)));
    em_for_end(e, &lj, em_i64(e, 1));
    if (out_of[0]) {
        LLVMValueRef i = em_for_begin(e, &li, em_i64(e, 0), em_i64(e, g->D)), oat = em_iadd(e, QOFF(g, t, g->D), i);
        em_store(e, out_of[0], oat, em_mul(e, em_load(e, g->row, i, 1), em_f32(e, g->scale)), 1);
        em_for_end(e, &li, em_i64(e, 1));
    }
    em_for_end(e, &lt, em_i64(e, 1));
}

/* After the last block: dk (times scale) and dv from their sums into O,
 * added where G heads share them (add). */
static void grad_keys_out(em_t *e, const gen_head *g, int which, LLVMValueRef O, bool add)
{
    int64_t width = which == 2 ? g->Dv : g->D;
    LLVMValueRef sums = which == 2 ? g->dv : g->dk;
    double f = which == 2 ? 1.0 : g->scale;
    em_loop lj, li;
    LLVMValueRef j = em_for_begin(e, &lj, em_i64(e, 0), em_i64(e, g->Tk));
    LLVMValueRef i = em_for_begin(e, &li, em_i64(e, 0), em_i64(e, width));
    LLVMValueRef v = em_mul(e, em_load(e, sums, em_iadd(e, em_imul(e, j, em_i64(e, width)), i), 1), em_f32(e, f));
    LLVMValueRef oat = em_iadd(e, KOFF(g, j, width), i);
    em_store(e, O, oat, add ? em_add(e, em_load(e, O, oat, 1), v) : v, 1);
    em_for_end(e, &li, em_i64(e, 1));
    em_for_end(e, &lj, em_i64(e, 1));
}

/* The bias's gradient for the block's rows of one (batch, query head): dS
 * before the soft-cap's factor, added where the bias is broadcast (the
 * buffer zeroed first). */
static void grad_bias(em_t *e, const gen_head *g, LLVMValueRef O, bool add, LLVMValueRef t0, LLVMValueRef n)
{
    LLVMValueRef bb = g->bias_b ? g->b : em_i64(e, 0), bh = g->bias_h ? g->h : em_i64(e, 0);
    LLVMValueRef base = em_iadd(e, em_imul(e, em_iadd(e, em_imul(e, bb, em_i64(e, g->bh)), bh), em_i64(e, g->Tq * g->Tk)),
                                em_imul(e, t0, em_i64(e, g->Tk)));
    em_loop l;
    LLVMValueRef x = em_for_begin(e, &l, em_i64(e, 0), em_imul(e, n, em_i64(e, g->Tk)));
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
    int64_t TB = g.Tq < ROWS_A_BLOCK ? g.Tq : ROWS_A_BLOCK;
    LLVMValueRef rows_bytes = em_i64(e, TB * g.Tk * 4);
    g.P = em_malloc(e, rows_bytes), g.S = em_malloc(e, rows_bytes), g.U = g.cap > 0 ? em_malloc(e, rows_bytes) : NULL;
    g.row = em_malloc(e, em_i64(e, g.D * 4));
    g.dk = out_of[1] ? em_malloc(e, em_i64(e, g.Tk * g.D * 4)) : NULL;
    g.dv = out_of[2] ? em_malloc(e, em_i64(e, g.Tk * g.Dv * 4)) : NULL;
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
    if (g.dk) zero(e, g.dk, em_i64(e, 0), g.Tk * g.D);
    if (g.dv) zero(e, g.dv, em_i64(e, 0), g.Tk * g.Dv);
    em_loop lb;
    LLVMValueRef t0 = em_for_begin(e, &lb, em_i64(e, 0), em_i64(e, g.Tq)), end = em_iadd(e, t0, em_i64(e, TB));
    LLVMValueRef n = LLVMBuildSub(e->b, LLVMBuildSelect(e->b, LLVMBuildICmp(e->b, LLVMIntSLT, end, em_i64(e, g.Tq), ""), end,
                                                        em_i64(e, g.Tq), ""), t0, "");
    LLVMValueRef t = em_for_begin(e, &lt, t0, em_iadd(e, t0, n));
    entries_row(e, &g, t, t0, need_ds);
    em_for_end(e, &lt, em_i64(e, 1));
    grad_block(e, &g, t0, n, out_of);
    if (out_of[3]) grad_bias(e, &g, out_of[3], bias_sum, t0, n);
    em_for_end(e, &lb, em_i64(e, TB));
    for (int which = 1; which < 3; which++)
        if (out_of[which]) grad_keys_out(e, &g, which, out_of[which], Gq > 1);
    em_for_end(e, &lg, em_i64(e, 1));
    em_for_end(e, &lp, em_i64(e, 1));
    em_for_end(e, &li, em_i64(e, 1));
    em_free(e, g.P);
    em_free(e, g.S);
    em_free(e, g.row);
    if (g.dk) em_free(e, g.dk);
    if (g.dv) em_free(e, g.dv);
    if (g.U) em_free(e, g.U);
}
